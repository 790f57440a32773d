"""`--sync-every H`: the schedule of synchronous, local and averaging steps, the timing of a run
that mixes them, and (one worker, plain processes) the local update itself.

Several workers under mpirun (H = 1 bit for bit against synchronous training, H = 4 averaging
with a quarter of the bytes) are checked in tests/test_equivalence.py, beside the runs they are
compared with.
"""

from __future__ import annotations

import pytest

from archbench.runtime.config import TrainConfig
from archbench.runtime.localsgd import AVERAGE, LOCAL, SYNC, SyncSchedule, comm_record
from archbench.runtime.loop import LoopResult, step_statistics

S, L, A = SYNC, LOCAL, AVERAGE


def kinds(schedule: SyncSchedule, steps: int) -> list[str]:
    return [schedule.kind(step) for step in range(steps)]


def test_h1_is_synchronous_every_step_whatever_the_warm_up():
    assert kinds(SyncSchedule(1, 0, 7), 7) == [S] * 7
    assert kinds(SyncSchedule(1, 3, 7), 7) == [S] * 7


def test_rounds_of_h_local_steps_the_last_averaging_and_so_the_last_step_of_the_run():
    assert kinds(SyncSchedule(4, 0, 10), 10) == [L, L, L, A, L, L, L, A, L, A]
    assert kinds(SyncSchedule(4, 0, 8), 8) == [L, L, L, A] * 2
    # two synchronous warm-up steps, then rounds of 3 counted from the first local step
    assert kinds(SyncSchedule(3, 2, 9), 9) == [S, S, L, L, A, L, L, A, A]
    # a warm-up longer than the run: synchronous training
    assert kinds(SyncSchedule(3, 20, 9), 9) == [S] * 9


def test_the_schedule_of_a_run_and_the_architectures_it_applies_to():
    ring = TrainConfig(arch="ring", sync_every=4, sync_every_warmup_steps=2)
    assert SyncSchedule.for_config(ring, 30) == SyncSchedule(4, 2, 30)
    assert SyncSchedule.for_config(ring).local_steps
    # not applicable to one process: it runs synchronous steps (the record says null)
    single = TrainConfig(arch="single", sync_every=4, sync_every_warmup_steps=2)
    assert SyncSchedule.for_config(single, 30) == SyncSchedule(1, 0, 30)
    assert TrainConfig(arch="single", sync_every=4).as_record(1, 1)["sync_every"] is None
    assert not SyncSchedule.for_config(TrainConfig(arch="p2p")).local_steps


def test_comm_record_counts_steps_and_bytes_per_exchanging_step():
    counts = {SYNC: 2, LOCAL: 6, AVERAGE: 2}
    assert comm_record(SyncSchedule(4, 2), counts, 4000) == {
        "sync_every": 4,
        "sync_every_warmup_steps": 2,
        "steps_by_kind": {"sync": 2, "local": 6, "average": 2},
        "exchange_steps": 4,
        "bytes_sent_per_exchange_step": 1000,
    }


def test_a_record_written_before_the_setting_reads_as_synchronizing_every_step():
    from archbench.record.schema import migrate

    ring = migrate({"schema": "archbench.run/2", "config": {"arch": "ring"}})
    assert ring["config"]["sync_every"] == 1 and ring["config"]["sync_every_warmup_steps"] == 0
    single = migrate({"schema": "archbench.run/2", "config": {"arch": "single"}})
    assert single["config"]["sync_every"] is None
    assert single["config"]["sync_every_warmup_steps"] is None
    local = migrate({"schema": "archbench.run/2", "config": {"arch": "p2p", "sync_every": 4}})
    assert local["config"]["sync_every"] == 4 and "sync_every_warmup_steps" not in local["config"]


def test_amortized_step_weighs_each_kind_by_the_steps_that_ran():
    result = LoopResult(
        steps=16,
        train_s=1.0,
        step_times=[0.01, 0.01, 0.01, 0.05, 0.01, 0.01, 0.05],
        step_kinds=[L, L, L, A, L, L, A],
        compute_times=[0.008],
        exchange_times=[0.002],
        probe_kinds=[L],
        timed_kinds={L: 6, A: 2},
    )
    timing = step_statistics(result, global_batch=64, warmup_steps=8)
    assert timing["step_s_median"] == pytest.approx(0.01)  # a local step's
    assert timing["step_s_median_by_kind"] == pytest.approx({L: 0.01, A: 0.05})
    assert timing["step_s_amortized"] == pytest.approx((6 * 0.01 + 2 * 0.05) / 8)
    assert timing["samples_per_s"] == pytest.approx(64 / timing["step_s_amortized"])
    assert timing["exposed_comm_s"] == pytest.approx(timing["step_s_amortized"] - 0.008)
    assert timing["comm_s_median_by_kind"] == {L: pytest.approx(0.002), A: None}


def test_a_kind_timed_only_by_probes_is_priced_at_its_probe_phases():
    result = LoopResult(
        steps=8,
        train_s=1.0,
        step_times=[0.01, 0.01, 0.01],
        step_kinds=[L, L, L],
        compute_times=[0.008],
        exchange_times=[0.03],
        probe_kinds=[A],
        timed_kinds={L: 3, A: 1},
    )
    timing = step_statistics(result, global_batch=32, warmup_steps=4)
    assert timing["step_s_amortized"] == pytest.approx((3 * 0.01 + 0.038) / 4)


def test_one_kind_of_step_leaves_the_timing_as_it_was():
    result = LoopResult(
        steps=5,
        train_s=0.1,
        step_times=[0.01, 0.03, 0.02],
        step_kinds=[S, S, S],
        timed_kinds={S: 3},
    )
    timing = step_statistics(result, global_batch=32, warmup_steps=2)
    assert timing["step_s_amortized"] == timing["step_s_median"] == 0.02
    assert timing["samples_per_s"] == 32 / 0.02
    assert "step_s_median_by_kind" not in timing


def test_one_worker_local_steps_are_plain_sgd_bit_for_bit(train, tmp_path):
    """With one worker averaging changes nothing, so ring and p2p with --sync-every (after
    synchronous warm-up steps whose momentum the local steps carry on) must end exactly where
    `single` ends: the local update is the optimizer's own, and the momentum carries over."""
    common = ["--model", "mlp", "--steps", "12", "--eval-samples", "500", "--warmup-steps", "2"]
    runs = {
        "single": ["--arch", "single"],
        "ring": ["--arch", "ring", "--sync-every", "3", "--sync-every-warmup-steps", "4"],
        "p2p": ["--arch", "p2p", "--sync-every", "5", "--sync-every-warmup-steps", "3"],
    }
    records = {}
    for name, args in runs.items():
        proc, written = train([*common, *args], out=tmp_path / f"{name}.jsonl")
        assert proc.returncode == 0, proc.stderr[-2000:]
        records[name] = written[0]
    single = records["single"]["result"]["param_digest_per_rank"]
    for name in ("ring", "p2p"):
        record = records[name]
        assert record["result"]["param_digest_per_rank"] == single, name
        comm = record["comm"]
        assert comm["sync_every"] == record["config"]["sync_every"]
        assert sum(comm["steps_by_kind"].values()) == 12
        assert comm["steps_by_kind"]["average"] >= 1
        assert comm["bytes_total"] == 0  # nothing travels between one worker and itself
