"""The bad-input table (tests/bad_inputs.py): every case a real process, as a user types it."""

from __future__ import annotations

import pytest
from bad_inputs import CASES, prepare_workspace, run_table


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """The whole table, run once, a few cases at a time."""
    top = tmp_path_factory.mktemp("bad-input")
    prepare_workspace(top / "ws")
    return run_table(top / "ws", top / "scratch")


def test_the_table_covers_every_command():
    commands = {case.name.split()[0] for case in CASES}
    assert {"train", "sweep", "submit", "report", "compare", "predict", "model", "cluster"} <= (
        commands
    )
    assert len(CASES) >= 270


def test_no_bad_input_ends_in_a_traceback(outcomes):
    assert [name for name, outcome in outcomes.items() if outcome.traceback] == []


@pytest.mark.parametrize("name", [case.name for case in CASES])
def test_bad_input_gets_its_documented_answer(outcomes, name):
    outcome = outcomes[name]
    assert not outcome.problems(), f"{outcome.problems()}\n{outcome.stderr}"
