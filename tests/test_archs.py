"""What the rest of archbench asks about an architecture, the descriptors answer."""

from __future__ import annotations

import math

import pytest

from archbench import archs


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
