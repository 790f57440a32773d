"""Time dilation without a cluster: virtual time in records, step blocks, choosing D, the node
environment, loaded baselines in a study's plan and the report's fidelity notes."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pandas as pd
import pytest
from record_files import built_record

from archbench.analysis.fidelity import (
    CORE_WAIT_LIMIT,
    CORES,
    FLOOR,
    drift_causes,
    drift_table,
    engine_cost_findings,
    fidelity_notes,
)
from archbench.analysis.load import load_study
from archbench.analysis.report import data_findings
from archbench.cluster import dilation
from archbench.cluster.dilation import Dilation
from archbench.cluster.nodelib import node_environment
from archbench.cluster.state import link_rate
from archbench.common.bandwidth import Bandwidth
from archbench.common.errors import UsageError
from archbench.record import append_record, cluster_section, in_virtual_time
from archbench.runtime import virtualtime
from archbench.runtime.loop import metered_compute, steady_compute, step_blocks
from archbench.sweep.plan import build_plan
from archbench.sweep.spec import load_spec
from archbench.sweep.target import ClusterTarget


def test_durations_are_divided_and_rates_multiplied_by_the_dilation() -> None:
    timing = {
        "wall_s": 8.0,
        "step_s_median": 0.004,
        "samples_per_s": 100.0,
        "samples_per_s_wall": 50.0,
        "compute_s_median_per_rank": [0.002, None, 0.004],
        "step_s_median_by_kind": {"sync": 0.008},
        "timed_steps": 90,
        "samples_per_epoch": 60000,
        "epochs": [{"epoch": 0, "train_s": 4.0, "samples_per_s": 10.0, "loss": 0.5}],
    }
    virtual = in_virtual_time(timing, 4.0)
    assert virtual["wall_s"] == 2.0 and virtual["step_s_median"] == 0.001
    assert virtual["samples_per_s"] == 400.0 and virtual["samples_per_s_wall"] == 200.0
    assert virtual["compute_s_median_per_rank"] == [0.0005, None, 0.001]
    assert virtual["step_s_median_by_kind"] == {"sync": 0.002}
    assert virtual["timed_steps"] == 90 and virtual["samples_per_epoch"] == 60000
    assert virtual["epochs"] == [{"epoch": 0, "train_s": 1.0, "samples_per_s": 40.0, "loss": 0.5}]
    comm = {"bytes_sent_per_step": 1000, "tensor_partition": {"pipelined_median_s": 0.4}}
    assert in_virtual_time(comm, 4.0) == {
        "bytes_sent_per_step": 1000,
        "tensor_partition": {"pipelined_median_s": 0.1},
    }
    assert in_virtual_time(timing, 1.0) == timing
    assert timing["wall_s"] == 8.0  # a copy: the real figures stay as they were


class _Passes:
    """A trainer whose compute pass takes `pass_s` (the loop calls nothing else here)."""

    def __init__(self, pass_s: float) -> None:
        self.pass_s, self.calls = pass_s, 0

    def compute_pass(self, x, y) -> None:
        self.calls += 1
        time.sleep(self.pass_s)


def test_a_probe_window_leaves_out_the_passes_that_follow_a_wait() -> None:
    """The probe's own pass (here 50x a steady one, as a wait before it can make it on a node)
    and the first after the probe's exchange are left out of the window's mean, also of the
    meter's; without a window the probe's pass is all there is."""
    trainer = _Passes(0.002)
    mean_s, passes = steady_compute(trainer, None, None, first_pass_s=0.1, window_s=0.02)
    # repeated (how often depends on how long a 2 ms sleep takes on a busy machine)
    assert passes == trainer.calls - 1 >= 2
    assert 0.002 <= mean_s < 0.02  # the 0.1 s pass would put the mean at 0.1 / passes or more
    assert steady_compute(_Passes(0.002), None, None, 0.1, 0.0) == (0.1, 1)
    metered = _Passes(0.002)
    mean_s, passes, _share = metered_compute(metered, None, None, 0.1, 0.02, time.process_time)
    assert passes == metered.calls - 1 >= 2 and mean_s < 0.02
    assert metered_compute(_Passes(0.002), None, None, 0.1, 0.0, time.process_time) == (
        0.1,
        1,
        None,
    )


def test_steps_are_summarised_over_blocks_of_a_few_periods() -> None:
    assert step_blocks([0.001, 0.002, 0.003], 0.0) == [0.001, 0.002, 0.003]
    # A cap lets short steps run at full speed and makes a later one pay: blocks even it out.
    steps = [0.001] * 3 + [0.007] + [0.001] * 3 + [0.007]
    blocks = step_blocks(steps, 0.01)
    assert blocks == pytest.approx([0.0025, 0.0025])
    assert sum(steps) / len(steps) == pytest.approx(sum(blocks) / len(blocks))
    assert step_blocks([0.001] * 5, 1.0) == [pytest.approx(0.001)]  # too short: one block


@pytest.mark.parametrize(
    "nodes, cores, expected",
    [(2, 2, 2.5), (3, 2, 4.0), (4, 2, 5.0), (5, 2, 6.0), (4, 16, 1.0)],
)
def test_auto_picks_the_smallest_half_step_dilation_that_fits(
    nodes: int, cores: int, expected: float
) -> None:
    chosen = dilation.parse("auto", nodes, None, cores)
    assert chosen is not None and chosen.factor == expected
    assert chosen.vcpus_per_node == 4 and chosen.vcpus_per_process == 1
    # the nodes' capped threads fill at most half the cores left beside the host's reserve
    usable = (cores - dilation.HOST_RESERVE_CPUS) * dilation.CAPPED_SHARE
    assert nodes / chosen.factor <= usable + 1e-9
    if expected > 1:  # half a step less would not fit
        assert nodes / (expected - 0.5) > usable


def test_explicit_dilation_period_and_quota() -> None:
    chosen = dilation.parse("4", 3, 2, 2)
    assert chosen == Dilation(4.0, 2, 10_000, 1)
    assert chosen.thread_quota_us == 2500 and chosen.node_quota_us == 5000
    assert chosen.process_quota_us == 2500
    assert dilation.parse("4", 3, 2, 2, vcpus_per_process=2).process_quota_us == 5000
    with pytest.raises(UsageError, match="--vcpus-per-process 3 is out of range 1..2"):
        dilation.parse("4", 3, 2, 2, vcpus_per_process=3)
    assert chosen.node_cpus == 0.5
    assert dilation.parse("off", 3, None, 2) is None
    assert dilation.parse("8", 3, None, 2).cfs_period_us == 20_000  # a quota of 2.5 ms at least
    with pytest.raises(UsageError, match="no dilation up to 100 fits"):
        dilation.parse("auto", 64, None, 0.5)
    with pytest.raises(UsageError, match="out of range 1..100"):
        dilation.parse("0.5", 3, None, 2)
    with pytest.raises(UsageError, match="out of range 1..64"):
        dilation.parse("2", 3, 0, 2)


def test_a_node_is_crowded_only_past_its_virtual_cores() -> None:
    # the one rule the report's verdict (records) and microbench's plan (layouts) both use
    assert not virtualtime.crowded(4, 4)  # one virtual core each: full, not crowded
    assert virtualtime.crowded(5, 4)  # a server beside four workers on a node of four
    assert not virtualtime.crowded(2, 4, 2) and virtualtime.crowded(3, 4, 2)


def test_links_are_shaped_to_b_over_d_and_naps_last_d_times_longer() -> None:
    assert link_rate(Bandwidth.tc_rate("1gbit"), 4.0) == Bandwidth(250e6, "250000kbit")
    assert link_rate(Bandwidth.tc_rate("1gbit"), 4.0).text == "250000kbit"
    assert link_rate(Bandwidth.tc_rate("100mbit"), None).text == "100mbit"
    assert link_rate(Bandwidth.tc_rate("1mbit"), 3.0).text == "333kbit"
    slowdown = Dilation(2.5, 1, 10_000)
    env = node_environment(Path("/lib/x.so"), 100, slowdown, Path("/cg/archbench/c"), "v1")
    assert env["LD_PRELOAD"] == "/lib/x.so" and env["ARCHBENCH_IDLE_NAP_US"] == "250"
    assert env["ARCHBENCH_DILATION"] == "2.5" and env["ARCHBENCH_THREAD_QUOTA_US"] == "4000"
    assert env["ARCHBENCH_PROCESS_QUOTA_US"] == "4000"
    assert env["ARCHBENCH_THREAD_CAPS"] == "/cg/archbench/c" and env["ARCHBENCH_VCPUS"] == "1"
    assert env["ARCHBENCH_PROCESS_VCPUS"] == "1"
    plain = node_environment(Path("/lib/x.so"), 100)
    assert plain == {"LD_PRELOAD": "/lib/x.so", "ARCHBENCH_IDLE_NAP_US": "100"}


SPEC = """
study: loaded
cluster: {kind: emulated, nodes: 4, bandwidth: 1gbit}
fixed: {model: mlp, steps: 20}
factors:
  arch: [single, ring]
  workers: [1, 2, 4]
"""


# Alone unless the study asks for companions (runs/companions.yaml: they moved nothing past the
# noise), on any kind of cluster.
@pytest.mark.parametrize("baseline_load, kind, companions", [
    (None, "emulated", {0}), (None, "localhost", {0}), ("loaded", "emulated", {0, 1, 3}),
    ("loaded", "localhost", {0, 1, 3}),
])  # fmt: skip
def test_a_loaded_baseline_runs_beside_workers_minus_one_companions(
    tmp_path: Path, baseline_load: str | None, kind: str, companions: set[int]
) -> None:
    spec_path = tmp_path / "loaded.yaml"
    spec_path.write_text(SPEC + (f"baseline_load: {baseline_load}\n" if baseline_load else ""))
    spec = load_spec(spec_path)
    hosts = [(f"node{k}", 1) for k in range(1, 5)] if kind == "emulated" else [("localhost", 8)]
    target = ClusterTarget(kind, hosts, bandwidth="1gbit" if kind == "emulated" else None)
    plan = build_plan(spec, target)
    singles = [run for run in plan.runs if run.arch == "single"]
    assert {run.config.get("companions", 0) for run in singles} == companions
    for run in singles:
        ranks = 1 + run.config.get("companions", 0)
        assert run.world_size == ranks and run.launched == (kind == "emulated" or ranks > 1)
        if kind == "emulated":
            assert [host for host, _ in run.layout] == [f"node{k}" for k in range(1, ranks + 1)]


def _record(run_id: str, arch: str, workers: int, compute_s: list[float], **more) -> dict:
    servers = 1 if arch == "ps" else 0
    world = servers + (workers if arch != "single" else 1 + more.get("companions", 0))
    hosts = more.get("hosts") or [f"node{k}" for k in range(1, world + 1)]
    config = {"arch": arch, "model": "mlp", "dataset": "fashion_mnist", "batch_size": 32,
              "global_batch_size": 32 * workers, "companions": more.get("companions", 0)}  # fmt: skip
    return built_record(
        run_id,
        config,
        study="dilation",
        cluster=cluster_section(
            arch, world, servers or None, hosts, "mpirun", None, "1gbit", dilation=3.0
        ),
        timing={
            "samples_per_s": 1000.0 * workers,
            "step_s_median": 0.01,
            "train_s": 1.0,
            "compute_s_median": compute_s[0],
            "compute_s_median_per_rank": compute_s,
            "dispatch_s_per_rank": more.get("dispatch", [None] * len(compute_s)),
            "compute_core_share_per_rank": more.get("shares", [None] * len(compute_s)),
        },  # fmt: skip
        fidelity={
            "emulated": True,
            "dilation": 3.0,
            "vcpus_per_node": 4,
            "vcpus_per_process": 1,
            "machine_idle_share": more.get("idle", 0.3),
            "cap_cost_ratio": more.get("cap_cost", None),
            "nodes": {host: {"core_wait_share": more.get("wait", 0.01)} for host in set(hosts)},
        },
    )


def _study(tmp_path: Path, *records: dict):
    """The study these records make, read as the report reads it."""
    results = tmp_path / "results.jsonl"
    for record in records:
        append_record(str(results), record)
    return load_study(results)


def _reps(arch: str, computes: list[float], **more) -> list[dict]:
    """One-worker runs of an engine: its baseline's repetitions."""
    return [
        _record(f"{arch}1-r{k}", arch, 1, [compute], **more) for k, compute in enumerate(computes)
    ]


def test_each_run_is_judged_against_its_own_engines_noise_and_oversubscription_is_named(
    tmp_path: Path,
) -> None:
    study = _study(
        tmp_path,
        *_reps("ring", [0.0100, 0.0104, 0.0097]),
        # 1.02x the ring's own one-worker pass: within its noise.
        _record("ring2", "ring", 2, [0.0101, 0.0103]),
        # A worker at 1.6x: outside it, however the other computed.
        _record("crowded", "ring", 2, [0.0160, 0.0101]),
        # No one-worker p2p run: not judged (never against another engine's baseline).
        _record("p2p2", "p2p", 2, [0.0300, 0.0300]),
        # A run whose threads waited for a core: named whatever its compute.
        _record("busy", "ring", 2, [0.0101, 0.0101], wait=2 * CORE_WAIT_LIMIT),
        _record("saturated", "ring", 2, [0.0101, 0.0101], idle=0.0),
    )
    table = drift_table(study.ok).set_index("run_id")
    assert table.loc["ring2", "baseline_compute_s"] == pytest.approx(0.0100, rel=0.01)
    assert table.loc["ring2", "baseline_runs"] == 3
    assert not table.loc["ring2", "flagged"] and table.loc["crowded", "flagged"]
    assert table.loc["crowded", "worst_ratio"] == pytest.approx(1.6, rel=0.02)
    assert not table.loc["p2p2", "judged"]
    notes = fidelity_notes(study.ok)
    (oversubscribed,) = [note for note in notes if note.startswith("Oversubscribed")]
    assert "`busy`" in oversubscribed and "`saturated`" in oversubscribed
    assert "`ring2`" not in oversubscribed and "2 of 8 runs" in oversubscribed
    # each cause said as measured: a saturated machine, or coinciding wake-ups on an idle one
    assert "1 on a machine with no idle time left" in oversubscribed
    assert "1 while the machine had idle time on average" in oversubscribed
    assert "the machine 30% idle on average" in oversubscribed
    (verdict,) = [note for note in notes if note.startswith("Fidelity")]
    assert "1 of 4 judged runs flagged: `crowded`" in verdict and "`ring2`" not in verdict
    assert "1 with no one-worker p2p run" in verdict
    assert "ring on mlp: 3 run(s), 10.03 ms ± 4%" in verdict
    assert not math.isnan(study.ok.set_index("run_id").loc["busy", "core_wait_share"])


def test_the_tolerance_is_the_baselines_noise_never_under_the_floor(tmp_path: Path) -> None:
    def judged(baseline: list[float], worker: float) -> pd.Series:
        folder = tmp_path / f"{len(list(tmp_path.iterdir()))}"
        folder.mkdir()
        study = _study(folder, *_reps("ring", baseline), _record("run", "ring", 2, [worker] * 2))
        return drift_table(study.ok).set_index("run_id").loc["run"]

    # Identical repetitions: the floor, and a worker 1.3x is flagged.
    tight = judged([0.0100, 0.0100, 0.0100], 0.0130)
    assert tight["tolerance"] == pytest.approx(FLOOR) and tight["flagged"]
    assert not judged([0.0100, 0.0100, 0.0100], 0.0104)["flagged"]
    # Repetitions that spread 15% (as this machine's identical runs do minutes apart): the
    # prediction interval of one more is wide, and the same 1.3x lies inside it.
    noisy = judged([0.0090, 0.0100, 0.0115], 0.0130)
    assert noisy["tolerance"] > 0.3 and not noisy["flagged"]
    # ... but a worker twice as slow as the noisy baseline is still flagged.
    assert judged([0.0090, 0.0100, 0.0115], 0.0300)["flagged"]
    # Two repetitions cannot measure the noise: not judged, and the note says why.
    two = judged([0.0100, 0.0100], 0.0300)
    assert not two["judged"] and two["why_not"] == "only 2 one-worker ring run"


def test_one_host_puts_every_rank_of_a_ps_job_on_the_first_host(tmp_path: Path) -> None:
    spec_path = tmp_path / "local.yaml"
    spec_path.write_text(
        "study: local\ncluster: {kind: emulated, nodes: 4, slots: 3, bandwidth: 1gbit}\n"
        "fixed: {model: mlp, steps: 20, workers: 2}\n"
        "factors: {arch: [ring, ps], placement: [dedicated, one-host]}\n"
    )
    target = ClusterTarget("emulated", [(f"node{k}", 3) for k in range(1, 5)], bandwidth="1gbit")
    layouts = {
        (run.arch, run.config.get("placement")): run.layout
        for run in build_plan(load_spec(spec_path), target).runs
    }
    assert layouts[("ps", "one-host")] == (("node1", 3),)
    assert layouts[("ps", "dedicated")] == (("node1", 1), ("node2", 1), ("node3", 1))
    assert ("ring", "one-host") not in layouts  # a server placement: ring spreads


def test_core_wait_leaves_out_the_time_any_cap_held_a_thread_back() -> None:
    from archbench.cluster.fidelity import ThreadReading, _thread_figures

    start = {7: ThreadReading(0, 0, 0, 0), 8: ThreadReading(0, 0, 0, 0)}
    end = {
        # held back 30 ms by its own cap and 50 ms by its process's: 10 ms left waiting for a core
        7: ThreadReading(40_000_000, 90_000_000, 30_000_000, 50_000_000),
        # the scheduler counts throttled time as waiting: all of it explained by the process cap
        8: ThreadReading(40_000_000, 60_000_000, 0, 70_000_000),
    }
    figures = _thread_figures(start, end, window_s=0.2)
    assert figures["core_wait_s"] == pytest.approx(0.010)
    assert figures["core_wait_share"] == pytest.approx(0.010 / 0.080)
    assert figures["throttled_s"] == pytest.approx(0.030)


def test_an_engines_own_cost_is_a_finding_not_a_drift(tmp_path: Path) -> None:
    study = _study(
        tmp_path,
        *_reps("single", [0.0010, 0.0011, 0.0010], dispatch=[0.0002]),
        *_reps("ps", [0.0025, 0.0026, 0.0025], dispatch=[0.0015]),
        *_reps("ring", [0.0010, 0.0010, 0.0011], dispatch=[0.0002]),
        # 2.5x single's pass, as the parameter server's own one-worker pass: faithful.
        _record("ps2", "ps", 2, [0.0025, 0.0026], dispatch=[0.0015, 0.0016]),
        _record("ring2", "ring", 2, [0.0010, 0.0011], dispatch=[0.0002, 0.0003]),
    )
    table = drift_table(study.ok).set_index("run_id")
    assert not table["flagged"].any(), table
    (finding,) = engine_cost_findings(study.ok)
    assert "against single's 1.03 ms (mlp): ring 1.00× [" in finding
    assert "ps 2.45× [" in finding
    assert "single 0.20 ms, ring 0.20 ms, ps 1.50 ms" in finding
    low, high = (float(v) for v in finding.split("ps 2.45× [")[1].split("]")[0].split(", "))
    assert 2.2 < low < 2.45 < high < 2.7
    # the finding is in the report's findings, under the runs' count
    assert finding in data_findings(study)


def test_a_drift_is_named_by_its_part_less_of_a_core_or_costlier_work(tmp_path: Path) -> None:
    study = _study(
        tmp_path,
        *_reps("ring", [0.0010, 0.0010, 0.0010], shares=[0.98]),
        # 1.3x the baseline's time at the same share of a core: each pass cost 1.3x the CPU
        _record("costly", "ring", 2, [0.0013, 0.0010], shares=[0.98, 0.98]),
        # 1.4x the time on 0.70 of a core: the same CPU per pass, a core not got
        _record("starved", "ring", 2, [0.0014, 0.0010], shares=[0.70, 0.98]),
        _record("unmetered", "ring", 2, [0.0015, 0.0015]),  # written before CPU was metered
        # A crowded node whose cheaper passes kept its time inside the noise: half a core is
        # still not the virtual core promised, so it is flagged for the cores alone.
        _record("halved", "ring", 2, [0.0010, 0.0010], shares=[0.49, 0.98]),
        # A share a little under the baseline's (within the floor), or over it (the process's
        # other threads working during the pass, as on a host): not flagged.
        _record("near", "ring", 2, [0.0010, 0.0010], shares=[0.95, 0.98]),
        _record("more", "ring", 2, [0.0010, 0.0010], shares=[1.20, 1.20]),
    )
    table = drift_table(study.ok).set_index("run_id")
    assert table.loc["halved", "flagged"] and not table.loc["halved", "compute_outside"]
    assert table.loc["halved", "core_share_floor"] == pytest.approx(0.98 / (1 + FLOOR))
    # (its time held because each pass cost half the CPU: both parts are named)
    assert [part for part, _ in drift_causes(table.loc["halved"])] == ["cores", "cost"]
    assert not table.loc["near", "flagged"] and not table.loc["more", "flagged"]
    assert table.loc["costly", "cpu_ratio"] == pytest.approx(1.3)
    assert table.loc["starved", "cpu_ratio"] == pytest.approx(0.0014 * 0.70 / 0.00098)
    assert [part for part, _ in drift_causes(table.loc["costly"])] == ["cost"]
    assert [part for part, _ in drift_causes(table.loc["starved"])] == ["cores"]
    assert drift_causes(table.loc["unmetered"]) == []
    (note,) = [n for n in fidelity_notes(study.ok) if n.startswith("Fidelity")]
    assert (
        "`costly` (mlp, workers=2: 1.15× its engine's 1.00 ms (worst worker 1.30×), noise ±5%: each pass cost 1.30×"
        in note
    )
    assert "0.70 virtual cores against the baseline's 0.98" in note
    assert "`halved` (mlp, workers=2: 1.00× its engine's 1.00 ms" in note
    assert "0.49 virtual cores against the baseline's 0.98, below the 0.93 its noise allows" in note
    assert "Of the 3 whose CPU was metered, 2 had a worker get a different share" in note
    assert ", 2 a worker whose pass took more or less CPU" in note


def test_a_node_holding_more_processes_than_its_virtual_cores_is_flagged_whatever_the_noise(
    tmp_path: Path,
) -> None:
    study = _study(
        tmp_path,
        *_reps("ring", [0.0010, 0.0016, 0.0010], shares=[0.98]),  # noisy: a tolerance past 2x
        # Eight ranks on one node of four virtual cores, half a core each: inside this noise,
        # by its compute and by its share, and still a node the dilation could not honour.
        _record("packed", "ring", 8, [0.0016] * 8, shares=[0.49] * 8, hosts=["node1"] * 8),
        # Four on it: within its cores.
        _record("full", "ring", 4, [0.0012] * 4, shares=[0.97] * 4, hosts=["node1"] * 4),
    )
    table = drift_table(study.ok).set_index("run_id")
    packed, full = table.loc["packed"], table.loc["full"]
    assert packed["tolerance"] > 1 and not packed["compute_outside"], table
    assert packed["lowest_core_share"] > packed["core_share_floor"], table
    assert packed["flagged"] and packed["short_of_cores"], table
    assert packed["crowded_node"] == "node1 holds 8 processes of 1 virtual core each on its 4"
    assert not full["flagged"] and full["crowded_node"] == "", table
    assert [part for part, _ in drift_causes(packed)] == [CORES]
    (note,) = [n for n in fidelity_notes(study.ok) if n.startswith("Fidelity")]
    assert (
        "a node crowded past its virtual cores (node1 holds 8 processes of 1 virtual core each "
        "on its 4; its lowest worker got 0.49 virtual cores while computing against the "
        "baseline's 0.98)" in note
    ), note
    assert "1 of them on a node crowded past its virtual cores" in note, note


def test_capped_work_that_cost_more_cpu_at_up_is_said(tmp_path: Path) -> None:
    def notes_for(*cap_costs: float | None) -> list[str]:
        folder = tmp_path / "-".join(str(value) for value in cap_costs)
        folder.mkdir()
        records = [
            _record(f"run{k}", "ring", 2, [0.0010, 0.0010], cap_cost=value)
            for k, value in enumerate(cap_costs)
        ]
        study = _study(folder, _record("base", "single", 1, [0.0010, 0.0010], companions=1),
                       *records)  # fmt: skip
        return [n for n in fidelity_notes(study.ok) if n.startswith("Capped work")]

    (note,) = notes_for(1.46, 1.62, None)
    assert (
        "cost 1.46-1.62× its uncapped CPU (over 1.1× for 2 of the 2 runs whose cluster measured it)"
        in note
    )
    (note,) = notes_for(1.5, 1.5)
    assert "cost 1.50× its uncapped CPU" in note
    assert notes_for(1.04, 1.08) == []  # within the drift limit: as a host would
    assert notes_for(None) == []  # older records: not measured
