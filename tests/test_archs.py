"""What the rest of archbench asks about an architecture, the descriptors answer; nothing outside
the trainers and archbench/common/archs.py compares an architecture's name with a literal."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from archbench.common import archs

ROOT = Path(__file__).resolve().parent.parent
# `x == "ps"`, `x != 'single'`, `x in ("ring", ...)`: the forms a name comparison takes
LITERAL_COMPARISON = re.compile(
    r"""(==|!=) ?["'](ps|ring|p2p|single)["']|in [(\[{]["'](ps|ring|p2p|single)["']"""
)
# where such a comparison is about something else than an architecture
NOT_AN_ARCHITECTURE = {
    "archbench/perfmodel/measure/mb_ranks.py": 'args.bench != "ps"',  # a microbenchmark's name
}


@pytest.mark.parametrize(
    "question,answers",
    [
        (archs.is_baseline, {"single"}),
        (archs.has_servers, {"ps"}),
        (archs.uses_horovod, {"ring"}),
        (archs.owns_shards, {"p2p"}),
        (archs.gathers_rows, {"ring"}),
    ],
)
def test_each_question_names_the_architectures_it_did_by_name(question, answers):
    assert {name for name in archs.ARCHITECTURES if question(name)} == answers
    for not_a_name in (None, math.nan, "", "PS", "bogus", ["ps"]):
        assert question(not_a_name) is False


def test_figures_list_and_colour_the_architectures_as_before():
    from archbench.analysis import plotting

    assert plotting.ARCH_ORDER == ("single", "ring", "p2p", "ps")
    assert plotting.ARCH_COLORS == {
        "single": "#6b6b6b",
        "ring": "#1f77b4",
        "p2p": "#2ca02c",
        "ps": "#d95f02",
    }
    assert plotting.ARCH_MARKERS == {"single": "s", "ring": "o", "p2p": "^", "ps": "D"}


def test_table_masks_answer_as_the_descriptors_do():
    import pandas as pd

    from archbench.analysis import arch_rows

    frame = pd.DataFrame({"arch": ["single", "ring", "p2p", "ps", None, math.nan]})
    assert arch_rows.baseline(frame).tolist() == [True, False, False, False, False, False]
    assert arch_rows.distributed(frame).tolist() == (frame["arch"] != "single").tolist()
    assert arch_rows.with_servers(frame).tolist() == (frame["arch"] == "ps").tolist()
    assert arch_rows.with_horovod(frame).tolist() == (frame["arch"] == "ring").tolist()


def test_no_module_outside_the_trainers_compares_an_architecture_with_a_literal():
    found = []
    for path in sorted((ROOT / "archbench").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith("archbench/trainers/") or relative == "archbench/common/archs.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if (
                LITERAL_COMPARISON.search(line)
                and NOT_AN_ARCHITECTURE.get(relative, "\0") not in line
            ):
                found.append(f"{relative}:{number}: {line.strip()}")
    assert found == [], "ask the descriptor (archbench.common.archs) instead:\n" + "\n".join(found)
