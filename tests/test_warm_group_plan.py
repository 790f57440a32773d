"""Which runs share a launch (archbench.sweep.groups), and a runs file that is not one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from archbench.common.errors import UsageError
from archbench.common.hosts import HostSlots
from archbench.runtime.settings import SETTINGS
from archbench.runtime.warmgroup import read_runs_file
from archbench.sweep.groups import cold_groups, layout_key, warm_groups
from archbench.sweep.plan import build_plan
from archbench.sweep.spec import load_spec
from archbench.sweep.target import ClusterTarget

REPO = Path(__file__).resolve().parents[1]


def plan_of(tmp_path: Path, text: str):
    path = tmp_path / "study.yaml"
    path.write_text(text)
    spec = load_spec(str(path))
    target = ClusterTarget("localhost", (HostSlots("localhost", 4),))
    return spec, build_plan(spec, target)


STUDY = """
study: grouping
seed: 3
repetitions: 2
cluster: {kind: localhost, slots: 4}
fixed: {workers: 2, model: mlp, steps: 10}
factors:
  arch: [ring, p2p]
  lr: [0.01, 0.02]
  fusion_threshold_mb: [16, 64]
"""


def test_runs_group_by_layout_and_keep_their_order(tmp_path):
    spec, plan = plan_of(tmp_path, STUDY)
    groups = warm_groups(plan.runs)
    # ring: one group per fusion threshold (read when Horovod initialises); p2p: one group
    # (the threshold does not apply to it, so its configurations differ by lr only)
    assert sorted(len(group) for group in groups) == [4, 4, 4]
    for group in groups:
        assert len({run.arch for run in group}) == 1
        assert len({run.config.get("fusion_threshold_mb") for run in group}) == 1
        assert len({layout_key(run) for run in group}) == 1
    flat = [run.run_id for group in groups for run in group]
    assert sorted(flat) == sorted(run.run_id for run in plan.runs)
    # inside a group the (shuffled) plan order stands; groups come in the order of their first run
    position = {run.run_id: index for index, run in enumerate(plan.runs)}
    for group in groups:
        assert [position[r.run_id] for r in group] == sorted(position[r.run_id] for r in group)
    firsts = [position[group[0].run_id] for group in groups]
    assert firsts == sorted(firsts)
    assert cold_groups(plan.runs) == [[run] for run in plan.runs]


def test_a_blocked_study_runs_each_repetition_in_turn_and_launches_within_it(tmp_path):
    spec, plan = plan_of(
        tmp_path, STUDY.replace("repetitions: 2", "repetitions: 2\norder: blocked")
    )
    assert [run.repetition for run in plan.runs] == [1] * 6 + [2] * 6
    # inside a repetition the order is the seeded shuffle's (not the design's)
    _, random_plan = plan_of(tmp_path, STUDY)
    for repetition in (1, 2):
        assert [r.run_id for r in plan.runs if r.repetition == repetition] == [
            r.run_id for r in random_plan.runs if r.repetition == repetition
        ]
    groups = warm_groups(plan.runs, by_repetition=True)
    # the three layouts of the unblocked grouping above, once per repetition
    assert sorted(len(group) for group in groups) == [2] * 6
    assert all(len({run.repetition for run in group}) == 1 for group in groups)
    assert [group[0].repetition for group in groups] == [1, 1, 1, 2, 2, 2]
    assert sorted(len(group) for group in warm_groups(plan.runs)) == [4, 4, 4]
    # the sweep launches that way: its plan line counts the launches within each repetition
    (tmp_path / "study.yaml").write_text(
        STUDY.replace("repetitions: 2", "repetitions: 2\norder: blocked")
    )
    proc = subprocess.run(
        [sys.executable, "-m", "archbench.cli", "sweep", str(tmp_path / "study.yaml"), "--dry-run"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (
        "12 to run in 6 launch(es) (warm: runs sharing a process layout share a launch "
        "within a repetition)" in proc.stdout + proc.stderr
    )


def test_gloo_runs_get_a_launch_each_and_traced_ring_runs_share_with_traced_ones(tmp_path):
    spec, plan = plan_of(
        tmp_path,
        STUDY.replace("fusion_threshold_mb: [16, 64]", "controller: [mpi, gloo]").replace(
            "arch: [ring, p2p]", "arch: [ring]"
        ),
    )
    groups = warm_groups(plan.runs)
    gloo = [g for g in groups if g[0].config.get("controller") == "gloo"]
    assert len(gloo) == 4 and all(len(g) == 1 for g in gloo)
    assert [len(g) for g in groups if g[0].config.get("controller") != "gloo"] == [4]
    traced = STUDY.replace("repetitions: 2", "repetitions: 2\ntimeline: true")
    _, traced_plan = plan_of(tmp_path, traced.replace("fixed: {", "fixed: {probe_every: 5, "))
    assert all(run.traced for run in traced_plan.runs)
    # a traced run joins its layout's launch; ring's layout also holds whether it traces, since
    # Horovod reads HOROVOD_TIMELINE at its initialisation (see the untraced grouping above)
    traced_groups = warm_groups(traced_plan.runs)
    assert sorted(len(group) for group in traced_groups) == [4, 4, 4]
    assert all(len({layout_key(run) for run in group}) == 1 for group in traced_groups)
    untraced_ring = next(run for run in plan_of(tmp_path, STUDY)[1].runs if run.arch == "ring")
    traced_ring = next(
        run
        for run in traced_plan.runs
        if run.arch == "ring" and run.config == {**untraced_ring.config, "probe_every": 5}
    )
    assert layout_key(untraced_ring) != layout_key(traced_ring)


ALSO = """
study: blocks
seed: 3
repetitions: 3
cluster: {kind: localhost, slots: 4}
fixed: {workers: 2, model: mlp, steps: 30}
factors:
  arch: [ring, p2p]
also:
  - fixed: {model: cnn}
    factors: {arch: [ring, p2p]}
    repetitions: 1
    timeline: true
  - factors: {arch: [ring], lr: [0.2]}
  - factors: {arch: [p2p]}       # the study's own p2p configuration: measured once
"""


def test_also_blocks_add_configurations_with_their_own_repetitions_and_traces(tmp_path):
    spec, plan = plan_of(tmp_path, ALSO)
    by_config: dict[tuple, list] = {}
    for run in plan.runs:
        key = (run.arch, run.config["model"], run.config.get("lr"), run.traced)
        by_config.setdefault(key, []).append(run)
    assert {key: len(runs) for key, runs in by_config.items()} == {
        ("ring", "mlp", None, False): 3,
        ("p2p", "mlp", None, False): 3,
        ("ring", "cnn", None, True): 1,
        ("p2p", "cnn", None, True): 1,
        ("ring", "mlp", 0.2, False): 3,
    }
    assert plan.configurations == 5 and len(plan.runs) == 11
    assert any("repeat another configuration" in note for note in plan.notes)
    # the block's fixed settings win over the study's; the rest are the study's
    cnn = by_config[("ring", "cnn", None, True)][0]
    assert cnn.config["steps"] == 30 and cnn.config["workers"] == 2
    # every run lists its level of everything the study varies, so the report tells the
    # block's runs from the rest (a level no design point named: the configuration's or the
    # setting's default)
    default_lr = SETTINGS["lr"].default
    assert cnn.factors == {"arch": "ring", "model": "cnn", "lr": default_lr}
    assert by_config[("ring", "mlp", 0.2, False)][0].factors == {
        "arch": "ring", "lr": 0.2, "model": "mlp",
    }  # fmt: skip
    assert by_config[("p2p", "mlp", None, False)][0].factors["model"] == "mlp"
    # the traced p2p run joins the study's p2p launch; the traced ring run launches apart from
    # the untraced ring runs (Horovod's timeline is set at its initialisation)
    groups = warm_groups(plan.runs)
    assert sorted(len(g) for g in groups) == [1, 4, 6]
    [traced_ring] = [g for g in groups if len(g) == 1]
    assert traced_ring[0].arch == "ring" and traced_ring[0].traced
    # ids of the study's own runs do not depend on the blocks
    _, alone = plan_of(tmp_path, ALSO.split("also:")[0])
    assert {r.run_id for r in alone.runs} <= {r.run_id for r in plan.runs}


def test_a_traced_block_of_a_traced_study_keeps_the_ids_a_plain_one_had(tmp_path):
    """The ids of an untraced study's runs, of a traced one's, and a block that traces the
    study's configuration otherwise: two runs, two ids."""
    base = ALSO.split("also:")[0]
    _, plain = plan_of(tmp_path, base)
    _, twice = plan_of(tmp_path, base + "also:\n  - {factors: {arch: [ring]}, timeline: true}\n")
    plain_ids = {r.run_id for r in plain.runs}
    traced = [r for r in twice.runs if r.traced]
    assert len(traced) == 3 and plain_ids < {r.run_id for r in twice.runs}
    assert not plain_ids & {r.run_id for r in traced}


# 101 x 99 points in one block, beside the study's 2: one more than a study may have
LR_LEVELS = ", ".join(str(0.001 * (i + 1)) for i in range(101))
BATCH_LEVELS = ", ".join(map(str, range(1, 100)))


@pytest.mark.parametrize(
    "block,problem",
    [
        ("[{factors: {arch: [ring]}, warm: true}]", "also\\[1\\]: unknown key 'warm'"),
        ("{factors: {arch: [ring]}}", "also must be a list"),
        ("[{fixed: {arch: ring}, factors: {arch: [p2p]}}]", "'arch' is both fixed and a factor"),
        ("[{factors: {lr: {min: 0.01, max: 0.1}}}]", "a block is a full factorial"),
        ("[{fixed: {epochs: 1}}]", "sets both epochs and steps"),
        ("[{factors: {arch: [ring]}, repetitions: 0}]", "repetitions must be an integer"),
        ("[{factors: {arch: [rings]}}]", "also\\[1\\]: factors"),
        (
            f"[{{factors: {{lr: [{LR_LEVELS}], batch_size: [{BATCH_LEVELS}]}}}}]",
            "its design and also: blocks give 10,001 design points",
        ),
    ],
)
def test_a_block_that_is_not_one_is_named(tmp_path, block, problem):
    text = ALSO.split("also:")[0] + f"also: {block}\n"
    with pytest.raises(UsageError, match=problem):
        plan_of(tmp_path, text)


@pytest.mark.parametrize(
    "text,problem",
    [
        ("{", "not a runs file"),
        ('{"group": "g", "runs": []}', "has no runs"),
        ('{"group": "g", "runs": [{"argv": []}]}', "not a runs file"),
    ],
)
def test_a_runs_file_that_is_not_one_is_named(tmp_path, text, problem):
    path = tmp_path / "runs.json"
    path.write_text(text)
    with pytest.raises(UsageError, match=problem):
        read_runs_file(str(path))


def test_train_refuses_a_missing_runs_file_in_one_line(tmp_path):
    missing = tmp_path / "nothing.json"
    proc = subprocess.run(
        [sys.executable, "-m", "archbench.train", "--runs-file", str(missing)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and str(missing) in lines[0], proc.stderr
    assert not missing.exists()


def test_a_runs_file_lists_each_run_with_its_own_flags(tmp_path):
    path = tmp_path / "runs.json"
    runs = [{"run_id": "a", "argv": ["--arch", "single", "--out", "a.jsonl"]}]
    path.write_text(json.dumps({"group": "g1", "launched_at": 12.5, "runs": runs}))
    group = read_runs_file(str(path))
    assert group.group == "g1" and group.launched_at == 12.5
    assert [(run.run_id, run.argv) for run in group.runs] == [("a", runs[0]["argv"])]
