"""Designs, run plans, run ids, rank layouts and commands (no process starts here)."""

from __future__ import annotations

import math
import random
import textwrap
from pathlib import Path

import pytest

from archbench.common import hosts
from archbench.common.errors import UsageError
from archbench.common.mpirun import mpirun_argv
from archbench.sweep import commands, design
from archbench.sweep.plan import build_plan
from archbench.sweep.spec import NumericRange, load_spec
from archbench.sweep.target import ClusterTarget

LOCAL4 = ClusterTarget("localhost", (("localhost", 4),))
FOUR_NODES = ClusterTarget(
    "emulated", tuple((f"node{i}", 2) for i in range(1, 5)), bandwidth="1gbit"
)


def spec_from(tmp_path: Path, text: str):
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent(text))
    return load_spec(path)


def test_full_factorial_is_every_combination_in_order():
    points = design.full_factorial({"a": [1, 2], "b": ["x", "y", "z"]})
    assert len(points) == 6
    assert points[0] == {"a": 1, "b": "x"} and points[-1] == {"a": 2, "b": "z"}
    assert len({tuple(p.items()) for p in points}) == 6


def test_random_design_draws_distinct_combinations_reproducibly():
    factors = {"a": [1, 2, 3, 4], "b": [10, 20, 30]}
    first = design.random_design(factors, 5, random.Random(1))
    again = design.random_design(factors, 5, random.Random(1))
    assert first == again
    assert len({tuple(p.items()) for p in first}) == 5
    assert all(p["a"] in factors["a"] and p["b"] in factors["b"] for p in first)
    with pytest.raises(UsageError, match="more than the 12 distinct combinations"):
        design.random_design(factors, 13, random.Random(1))


def test_latin_hypercube_uses_each_stratum_once_per_numeric_factor():
    n = 8
    lr = NumericRange(0.001, 0.1, log=True)
    points = design.latin_hypercube(
        {"lr": lr, "batch_size": [8, 16, 32, 64], "model": ["mlp", "cnn"]}, n, random.Random(3)
    )
    assert len(points) == 2 * n  # the categorical factor is crossed with the sample
    for model in ("mlp", "cnn"):
        sample = [p for p in points if p["model"] == model]
        # position of each lr on the log scale of 0.001..0.1, in units of one stratum
        strata = sorted(int(n * math.log(p["lr"] / 0.001) / math.log(100)) for p in sample)
        assert strata == list(range(n)), strata
        # 8 strata over 4 listed levels: each level exactly twice
        assert sorted(p["batch_size"] for p in sample) == [8, 8, 16, 16, 32, 32, 64, 64]


def test_one_at_a_time_moves_one_factor_from_the_base():
    points = design.one_at_a_time({"a": [1, 2, 3], "b": ["x", "y"]}, {"a": 2, "b": "x"})
    assert points == [
        {"a": 2, "b": "x"},
        {"a": 1, "b": "x"},
        {"a": 3, "b": "x"},
        {"a": 2, "b": "y"},
    ]


def test_settings_that_do_not_apply_are_dropped_and_duplicates_run_once(tmp_path):
    spec = spec_from(
        tmp_path,
        """
        fixed: {steps: 10}
        factors:
          arch: [single, ring, ps]
          sync: [sync, async]
          workers: [2, 3]
        """,
    )
    plan = build_plan(spec, LOCAL4)
    by_arch: dict[str, list[dict]] = {}
    for run in plan.runs:
        by_arch.setdefault(run.arch, []).append(run.config)
    assert len(by_arch["single"]) == 1  # sync and workers mean nothing to single
    assert "workers" not in by_arch["single"][0] and "sync" not in by_arch["single"][0]
    assert len(by_arch["ring"]) == 2  # workers only
    assert len(by_arch["ps"]) == 4
    assert plan.design_points == 12 and plan.configurations == 7
    assert any("each runs once" in note for note in plan.notes)


def test_run_ids_are_stable_unique_and_follow_the_configuration(tmp_path):
    text = """
        repetitions: 3
        fixed: {steps: 10}
        factors: {arch: [single, ring], lr: [0.1, 0.2]}
        """
    first = build_plan(spec_from(tmp_path, text), LOCAL4)
    again = build_plan(spec_from(tmp_path, text), LOCAL4)
    assert [r.run_id for r in first.runs] == [r.run_id for r in again.runs]
    assert len({r.run_id for r in first.runs}) == 12
    seeds = sorted(
        r.config["seed"] for r in first.runs if r.config["lr"] == 0.1 and r.arch == "single"
    )
    assert seeds == [1, 2, 3]  # each repetition trains from its own seed
    changed = build_plan(spec_from(tmp_path, text.replace("steps: 10", "steps: 11")), LOCAL4)
    assert not {r.run_id for r in changed.runs} & {r.run_id for r in first.runs}


def test_run_order_is_shuffled_by_the_seed_unless_asked_not_to(tmp_path):
    text = "fixed: {steps: 6}\nfactors: {lr: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]}\nseed: %d\norder: %s\n"
    designed = [
        r.config["lr"] for r in build_plan(spec_from(tmp_path, text % (1, "design")), LOCAL4).runs
    ]
    assert designed == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    shuffled = [
        r.config["lr"] for r in build_plan(spec_from(tmp_path, text % (1, "random")), LOCAL4).runs
    ]
    assert sorted(shuffled) == designed and shuffled != designed
    assert shuffled == [
        r.config["lr"] for r in build_plan(spec_from(tmp_path, text % (1, "random")), LOCAL4).runs
    ]


def test_exclude_drops_matching_configurations(tmp_path):
    spec = spec_from(
        tmp_path,
        """
        fixed: {steps: 6}
        factors: {arch: [ring, ps], workers: [2, 3]}
        exclude: [{arch: ps, workers: 3}]
        """,
    )
    plan = build_plan(spec, LOCAL4)
    assert sorted((r.arch, r.config["workers"]) for r in plan.runs) == [
        ("ps", 2),
        ("ring", 2),
        ("ring", 3),
    ]


LAYOUTS = [
    # (arch, workers, num_ps, placement) -> blocks (host, ranks) in rank order
    (("ring", 4, 0, "spread"), (("node1", 1), ("node2", 1), ("node3", 1), ("node4", 1))),
    (("ring", 3, 0, "packed"), (("node1", 2), ("node2", 1))),
    (("p2p", 2, 0, "spread"), (("node1", 1), ("node2", 1))),
    (("ps", 2, 1, "dedicated"), (("node1", 1), ("node2", 1), ("node3", 1))),
    (("ps", 2, 1, "colocated"), (("node1", 2), ("node2", 1))),
    (("ps", 4, 1, "dedicated"), (("node1", 1), ("node2", 2), ("node3", 1), ("node4", 1))),
    (("ps", 4, 2, "dedicated"), (("node1", 2), ("node2", 2), ("node3", 1), ("node4", 1))),
    (("ps", 3, 1, "colocated"), (("node1", 2), ("node2", 1), ("node3", 1))),
    # every host runs a worker, the first one the server too (no host left idle)
    (("ps", 4, 1, "colocated"), (("node1", 2), ("node2", 1), ("node3", 1), ("node4", 1))),
    (("ps", 1, 1, "one-host"), (("node1", 2),)),
]


@pytest.mark.parametrize("case,expected", LAYOUTS, ids=[str(c) for c, _ in LAYOUTS])
def test_placements_put_ranks_where_they_say(case, expected):
    arch, workers, num_ps, placement = case
    config = {"arch": arch, "workers": workers, "placement": placement}
    if arch == "ps":
        config["num_ps"] = num_ps
    layout = commands.layout_for(config, FOUR_NODES)
    assert layout == expected
    assert sum(ranks for _, ranks in layout) == workers + num_ps
    if placement == "dedicated":  # the PS host runs no worker
        assert layout[0] == ("node1", num_ps)
    if placement == "colocated":  # the PS host also runs a worker
        assert layout[0][1] > num_ps


def test_layouts_that_do_not_fit_are_refused():
    with pytest.raises(UsageError, match="puts 3 ranks on node1, which has 2 slots"):
        commands.layout_for(
            {"arch": "ps", "workers": 1, "num_ps": 3, "placement": "dedicated"}, FOUR_NODES
        )
    with pytest.raises(UsageError, match="9 ranks but the emulated cluster has 8 slots"):
        commands.layout_for({"arch": "ring", "workers": 9, "placement": "packed"}, FOUR_NODES)


def test_a_hostfile_placement_is_read_and_checked(tmp_path):
    hostfile = tmp_path / "hosts.txt"
    hostfile.write_text("# two hosts\nhostA slots=2\nhostB slots=1 max_slots=4\n")
    assert hosts.read_hostfile(str(hostfile)) == [("hostA", 2), ("hostB", 1)]
    config = {"arch": "ring", "workers": 3, "placement": str(hostfile)}
    assert commands.layout_for(config, LOCAL4) == (("hostA", 2), ("hostB", 1))
    with pytest.raises(UsageError, match="4 ranks but hostfile"):
        commands.layout_for({**config, "workers": 4}, LOCAL4)
    hostfile.write_text("hostA slots=two\n")
    with pytest.raises(UsageError, match="cannot read 'slots=two'"):
        hosts.read_hostfile(str(hostfile))


def test_commands_carry_every_setting_and_the_launcher(tmp_path):
    spec = spec_from(
        tmp_path,
        """
        launcher_args: [--mca, btl_tcp_if_include, lo]
        fixed: {arch: ps, model: cnn, steps: 30, num_ps: 2, workers: 2, sync: async, ps_sharding: balanced}
        """,
    )
    (run,) = build_plan(spec, LOCAL4).runs
    train = commands.train_argv(run.config, "/py", "/o/record.jsonl", run.run_id, "s")
    assert train[:3] == ["/py", "-m", "archbench.train"]
    text = " ".join(train)
    for words in (
        "--arch ps",
        "--model cnn",
        "--steps 30",
        "--num-ps 2",
        "--async",
        "--ps-sharding balanced",
        f"--run-id {run.run_id}",
        "--study s",
        "--out /o/record.jsonl",
    ):
        assert words in text
    assert (
        "--workers" not in text and "--placement" not in text
    )  # launch settings are not train flags
    argv = commands.launch_argv(
        run.config, train, "/h.txt", run.world_size, spec.launcher_args, ["X"]
    )
    assert argv[:5] == ["mpirun", "-np", "4", "--hostfile", "/h.txt"]
    assert ["-x", "X"] == argv[argv.index("-x") : argv.index("-x") + 2]
    assert argv[argv.index("--mca") : argv.index("--mca") + 3] == [
        "--mca",
        "btl_tcp_if_include",
        "lo",
    ]
    assert hosts.hostfile_text(run.layout) == "localhost slots=4\n"


def test_mpirun_over_host_blocks_is_the_runs_command_line():
    """Microbenchmarks place ranks by (host, ranks) blocks; the line is otherwise a run's."""
    argv = mpirun_argv(3, [("a", 1), ("b", 2)], ["p", "-m", "x"], ["X"], ["--y"])
    assert argv == [
        "mpirun", "-np", "3", "-H", "a:1,b:2", "--map-by", "slot", "--bind-to", "none",
        "-x", "X", "--y", "p", "-m", "x",
    ]  # fmt: skip
    from archbench.perfmodel.measure.microbench import job_argv

    job = job_argv([("n1", 2)], "/py", ["mpi"])
    assert job[:9] == mpirun_argv(2, [("n1", 2)], [])[:9]
    assert job[-4:] == ["/py", "-m", "archbench.perfmodel.measure.mb_ranks", "mpi"]


def test_horovodrun_and_single_commands(tmp_path):
    ring = {"arch": "ring", "workers": 2, "launcher": "horovodrun", "controller": "gloo"}
    argv = commands.launch_argv(
        ring, ["/venv/bin/python", "-m", "archbench.train"], "/h", 2, [], []
    )
    assert (
        argv[0].endswith("horovodrun")
        and argv[1:5] == ["-np", "2", "--hostfile", "/h"]
        and "--gloo" in argv
    )
    single = {"arch": "single"}
    assert commands.launch_argv(single, ["p", "-m", "archbench.train"], None, 1, ["--x"], []) == [
        "p",
        "-m",
        "archbench.train",
    ]


def test_refused_combinations_left_out_by_exclude_and_an_unset_level(tmp_path):
    """A combination train refuses (top-k with local steps; partitioning with top-k) is
    excluded, not refused, when a pattern leaves it out; `null` leaves a setting unset."""
    spec = spec_from(
        tmp_path,
        """
        fixed: {steps: 6, workers: 2}
        factors:
          arch: [ring, p2p]
          compression: [none, topk]
          sync_every: [1, 8]
          partition_mb: [null, 0.5]
        exclude:
          - {compression: topk, sync_every: 8}
          - {compression: topk, partition_mb: 0.5}
        """,
    )
    plan = build_plan(spec, LOCAL4)
    configs = {
        (r.arch, r.config["compression"], r.config["sync_every"], r.config.get("partition_mb"))
        for r in plan.runs
    }
    assert configs == {
        ("ring", "none", 1, None), ("ring", "topk", 1, None), ("ring", "none", 8, None),
        ("p2p", "none", 1, None), ("p2p", "topk", 1, None), ("p2p", "none", 8, None),
        ("p2p", "none", 1, 0.5), ("p2p", "none", 8, 0.5),
    }  # fmt: skip
    for run in plan.runs:
        argv = commands.train_argv(run.config, "python", "out.jsonl", run.run_id, "s")
        cut = run.config.get("partition_mb")
        assert ("--partition-mb" in argv) == (cut is not None)
    # without the pattern, the refused combination still stops the plan with its one line
    spec.exclude = spec.exclude[1:]
    with pytest.raises(UsageError, match="--sync-every 8 with --compression topk"):
        build_plan(spec, LOCAL4)


def test_design_points_are_counted_and_refused_before_any_is_built(monkeypatch):
    factors = {name: list(range(1, 11)) for name in ("seed", "batch_size", "eval_every", "threads")}
    full = design.Design("full_factorial")
    assert design.count(full, factors) == 10_000
    assert design.count(design.Design("one_at_a_time"), factors) == 37
    assert (
        design.count(design.Design("latin_hypercube", n=7), {"lr": [0.1], "arch": ["a", "b"]}) == 14
    )
    factors["probe_every"] = [1, 2]
    monkeypatch.setattr(design, "full_factorial", lambda f: pytest.fail("built the points"))
    with pytest.raises(UsageError, match="20,000 design points; a study has at most 10,000"):
        design.expand(full, factors, seed=1)


def test_a_plan_refuses_more_runs_than_the_limit(tmp_path):
    seeds = str(list(range(100)))
    spec = spec_from(
        tmp_path, "fixed: {steps: 6}\nrepetitions: 101\nfactors: {seed: " + seeds + "}"
    )
    with pytest.raises(UsageError, match="10,100 runs; a study has at most 10,000"):
        build_plan(spec, LOCAL4)


def test_a_plan_refuses_an_emulated_cluster_this_machine_cannot_build(tmp_path, monkeypatch):
    """Before any lock or folder (a dry run too): the checks of `cluster up`, on a machine whose
    cores leave no room for the nodes."""
    import archbench.runtime.virtualtime

    # the cores the spec's check and the cluster's own (`cluster up`) read
    monkeypatch.setattr(archbench.runtime.virtualtime, "usable_cores", lambda: 0.25)
    spec = spec_from(
        tmp_path, "cluster: {kind: emulated, nodes: 4, name: nosuch-cluster}\nfixed: {steps: 6}"
    )
    with pytest.raises(UsageError, match="cannot build the emulated cluster of 4 nodes"):
        build_plan(spec, FOUR_NODES)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["s.yaml"]
