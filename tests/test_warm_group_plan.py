"""Which runs share a launch (archbench.sweep.groups), and a runs file that is not one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from archbench.errors import UsageError
from archbench.hosts import HostSlots
from archbench.sweep.groups import cold_groups, layout_key, warm_groups
from archbench.sweep.hosts import ClusterTarget
from archbench.sweep.plan import build_plan
from archbench.sweep.spec import load_spec
from archbench.warmgroup import read_runs_file

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
        assert len({layout_key(run, False) for run in group}) == 1
    flat = [run.run_id for group in groups for run in group]
    assert sorted(flat) == sorted(run.run_id for run in plan.runs)
    # inside a group the (shuffled) plan order stands; groups come in the order of their first run
    position = {run.run_id: index for index, run in enumerate(plan.runs)}
    for group in groups:
        assert [position[r.run_id] for r in group] == sorted(position[r.run_id] for r in group)
    firsts = [position[group[0].run_id] for group in groups]
    assert firsts == sorted(firsts)
    assert cold_groups(plan.runs) == [[run] for run in plan.runs]


def test_gloo_and_traced_runs_get_a_launch_each(tmp_path):
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
    assert all(len(group) == 1 for group in warm_groups(plan.runs, timeline=True))


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
