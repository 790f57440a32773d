"""Timelines without engines: the Trace Event Format rules, clock alignment, which steps are
traced, and the breakdown of a step (the engine-backed runs are in test_timeline_train.py)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from archbench.runtime.probes import timed_steps_left, too_short, traced_steps
from archbench.timeline import clock
from archbench.timeline.breakdown import breakdowns, critical_path, summary
from archbench.timeline.traceformat import complete, metadata, problems


def _trace(*events: dict) -> dict:
    head = [metadata("process_name", 0, "rank 0: chief on a"), metadata("thread_name", 0, "t", 0)]
    return {"traceEvents": head + list(events), "displayTimeUnit": "ms", "otherData": {}}


def test_a_well_formed_trace_has_no_problem():
    trace = _trace(
        complete("step 5", "step", 0.0, 100.0, 0, 0, {"step": 5}),
        complete("forward dense", "forward", 10.0, 20.0, 0, 1, {"step": 5}),
        complete("inside", "forward", 12.0, 5.0, 0, 1, {}),  # nested: allowed
        {"name": "b", "ph": "B", "ts": 1.0, "pid": 0, "tid": 2},
        {"ph": "E", "ts": 2.0, "pid": 0, "tid": 2},
    )
    assert problems(trace) == []
    assert problems(trace["traceEvents"]) == []  # the bare list form is the format too


@pytest.mark.parametrize(
    "event, says",
    [
        ({"name": "x", "ph": "Q", "ts": 0, "pid": 0, "tid": 0}, "no known phase"),
        ({"name": "x", "ph": "X", "ts": 0, "dur": -1, "pid": 0, "tid": 0}, "dur"),
        ({"name": "x", "ph": "X", "ts": math.nan, "dur": 1, "pid": 0, "tid": 0}, "ts"),
        ({"name": "x", "ph": "X", "ts": 0, "dur": 1, "pid": "0", "tid": 0}, "pid"),
        ({"ph": "X", "ts": 0, "dur": 1, "pid": 0, "tid": 0}, "needs a name"),
        ({"name": "thread_name", "ph": "M", "pid": 0, "args": {}}, "args.name"),
        ({"name": "colour", "ph": "M", "pid": 0, "args": {"name": "x"}}, "metadata name"),
        ({"ph": "E", "ts": 3, "pid": 0, "tid": 9}, "no B open"),
        ({"name": "x", "ph": "X", "ts": 0, "dur": 1, "pid": 0, "tid": 0, "args": []}, "args"),
    ],
)
def test_each_broken_rule_is_named(event, says):
    found = problems(_trace(event))
    assert any(says in problem for problem in found), found


def test_partly_overlapping_events_on_one_thread_break_the_format():
    trace = _trace(
        complete("a", "comm", 0.0, 10.0, 0, 3, {}), complete("b", "comm", 5.0, 10.0, 0, 3, {})
    )
    assert any("without nesting" in p for p in problems(trace))
    apart = _trace(
        complete("a", "comm", 0.0, 10.0, 0, 3, {}), complete("b", "comm", 5.0, 10.0, 0, 4, {})
    )
    assert problems(apart) == []


def test_an_unbalanced_begin_and_a_bad_top_level_are_problems():
    assert (
        "never ended" in problems(_trace({"name": "b", "ph": "B", "ts": 1, "pid": 0, "tid": 1}))[0]
    )
    assert problems({"events": []})
    assert "displayTimeUnit" in problems({"traceEvents": [], "displayTimeUnit": "s"})[0]


def _rounds(offset_ns: int, delays: list[tuple[int, int]]) -> list[list[tuple]]:
    """Rank 1's allgather rounds with rank 0: rank 1's clock reads `offset_ns` ahead; in each
    round rank 1 enters `late` ns after rank 0 and both leave `took` ns after the later entry."""
    rounds, now = [], 1_000_000_000
    for late, took in delays:
        enter0, enter1 = now, now + late
        leave = max(enter0, enter1) + took
        rounds.append(((enter1 + offset_ns, leave + offset_ns), (enter0, leave)))
        now = leave + 10_000
    return [[], rounds]


def test_clock_offsets_hold_the_truth_within_their_bound():
    delays = [(50_000, 2_000_000), (-30_000, 40_000), (1_000, 5_000), (0, 900_000)]
    for true_offset in (0, 123_456, -7_000_000):
        first, second = clock.offsets(_rounds(true_offset, delays))
        assert first.offset_ns == 0 and first.bound_ns == 0
        assert abs(second.offset_ns - true_offset) <= second.bound_ns
        # the quickest round (1 µs apart, 5 µs long) decides: half its width, 5.5 µs
        assert second.bound_ns <= 5_500


def test_a_ping_pong_bounds_the_offset_by_half_its_round_trip():
    # rank 0 sent at 100, got the answer at 300; rank 1 (offset 1000) stamped it at 1180
    ((_, second)) = clock.offsets([[], [((1180, 1180), (100, 300))]])
    assert second.offset_ns == pytest.approx(980) and second.bound_ns == pytest.approx(100)
    assert abs(second.offset_ns - 1000) <= second.bound_ns


def test_clock_rounds_stop_early_when_the_bound_is_tight():
    calls = []

    def allgather(value):
        calls.append(value)
        return [value, value]  # two ranks on one clock, answering at once

    rounds = clock.allgather_rounds(allgather)
    assert len(rounds[1]) == clock.ROUNDS, "one batch is enough on one quick clock"
    assert len(calls) == clock.ROUNDS + 1
    assert clock.offsets(rounds)[1].bound_ns <= clock.TARGET_BOUND_NS


def test_traced_steps_follow_the_warm_up_and_skip_probes():
    # warm-up 5, a probe every 10th step after it (steps 14, 24) and at step 4
    assert traced_steps(30, 5, 10, 3) == [5, 6, 7]
    assert traced_steps(30, 5, 1, 3) == []  # every step a probe: nothing to trace
    assert traced_steps(30, 5, 2, 3) == [5, 7, 9]  # probes at 6, 8, 10, ... are not traced
    assert timed_steps_left(9, 5, 10, 3) == 1
    assert too_short(9, 5, 10, 3) is None
    message = too_short(8, 5, 10, 3)
    assert "--steps 9 or more" in message and "\n" not in message


def _step_trace() -> dict:
    """Rank 0: forward 0-40, backward 40-80, allreduce 60-100 (20 hidden, 20 exposed), wait
    100-110, update 110-120, nothing 120-130; the step is 0-130 µs."""
    step = {"step": 7}
    return _trace(
        complete("step 7", "step", 0.0, 130.0, 0, 0, step),
        complete("forward a", "forward", 0.0, 40.0, 0, 1, step),
        complete("backward a", "backward", 40.0, 40.0, 0, 1, step),
        complete("allreduce", "comm", 60.0, 40.0, 0, 2, step),
        complete("negotiate", "wait", 100.0, 10.0, 0, 3, step),
        complete("update a", "update", 110.0, 10.0, 0, 1, step),
    )


def test_a_step_is_partitioned_and_its_overlap_measured():
    (row,) = breakdowns(_step_trace())
    micro = 1e-6
    assert row.step_s == pytest.approx(130 * micro)
    assert row.compute == pytest.approx(60 * micro)
    assert row.comm_hidden == pytest.approx(20 * micro)
    assert row.comm_exposed == pytest.approx(20 * micro)
    assert row.wait == pytest.approx(10 * micro)
    assert row.update == pytest.approx(10 * micro)
    assert row.unaccounted == pytest.approx(10 * micro)
    assert row.throttled == 0
    parts = (row.compute, row.comm_hidden, row.comm_exposed, row.update, row.wait, row.host)
    assert sum(parts) + row.unaccounted == pytest.approx(row.step_s)
    assert row.overlap == pytest.approx(0.5)
    assert row.coverage == pytest.approx(120 / 130)
    figures = summary(_step_trace())
    assert figures["overlap"] == pytest.approx(0.5) and figures["median_step"] == 7


def test_the_critical_path_starts_at_the_span_that_ended_last():
    path = critical_path(_step_trace(), 7)
    assert [link["name"] for link in path[:3]] == ["update a", "negotiate", "allreduce"]


def _sweep(spec, *args: str):
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "archbench.cli", "sweep", str(spec), *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


SPEC = """
study: traced
timeline: {timeline}
cluster: {{kind: localhost, slots: 4}}
fixed: {{model: mlp, steps: {steps}, workers: 2}}
factors: {{arch: [ring, p2p], launcher: [mpirun, horovodrun]}}
"""


def test_a_study_with_timeline_true_traces_each_run_beside_its_record(tmp_path):
    spec = tmp_path / "traced.yaml"
    spec.write_text(SPEC.format(timeline="true", steps=30))
    proc = _sweep(spec, "--dry-run")
    assert proc.returncode == 0, proc.stderr
    commands = proc.stdout.splitlines()
    assert len(commands) == 4
    for command in commands:
        words = command.split()
        traced = words[words.index("--timeline-file") + 1]
        out = words[words.index("--out") + 1]
        assert traced == out.replace("record.jsonl", "timeline.json")
    assert not (tmp_path / "traced").exists(), "a dry run writes nothing"
    spec.write_text(SPEC.format(timeline="false", steps=30))
    assert "--timeline" not in _sweep(spec, "--dry-run").stdout


def test_an_also_block_traces_its_own_runs_only(tmp_path):
    spec = tmp_path / "traced.yaml"
    block = "also:\n  - {{fixed: {{steps: {steps}}}, factors: {{arch: [ps]}}, timeline: true}}\n"
    spec.write_text(SPEC.format(timeline="false", steps=8) + block.format(steps=30))
    proc = _sweep(spec, "--dry-run")
    assert proc.returncode == 0, proc.stderr
    traced = [c for c in proc.stdout.splitlines() if "--timeline-file" in c]
    assert len(proc.stdout.splitlines()) == 5 and len(traced) == 1
    assert "--arch ps" in traced[0] and "--steps 30" in traced[0]
    # the block's runs are checked for length as a traced study's are
    spec.write_text(SPEC.format(timeline="false", steps=8) + block.format(steps=8))
    proc = _sweep(spec, "--dry-run")
    assert proc.returncode == 2 and "arch=ps" in proc.stderr and "--steps 9 or more" in proc.stderr


def test_a_study_too_short_to_trace_is_refused_with_one_line(tmp_path):
    spec = tmp_path / "traced.yaml"
    spec.write_text(SPEC.format(timeline="true", steps=8))
    proc = _sweep(spec, "--dry-run")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "--steps 9 or more" in proc.stderr
    spec.write_text(SPEC.format(timeline="maybe", steps=30))
    proc = _sweep(spec, "--dry-run")
    assert proc.returncode == 2 and "timeline must be true or false" in proc.stderr


def test_a_budget_s_throttled_time_explains_a_gap_no_longer_than_the_gap():
    trace = _step_trace()
    frame = next(e for e in trace["traceEvents"] if e.get("cat") == "step")
    frame["args"]["throttled_us"] = 4.0
    (row,) = breakdowns(trace)
    assert row.throttled == pytest.approx(4e-6) and row.unaccounted == pytest.approx(6e-6)
    assert row.span_coverage == pytest.approx(120 / 130) and row.coverage == pytest.approx(
        124 / 130
    )
    frame["args"]["throttled_us"] = 50.0  # more than the 10 µs gap: only the gap is explained
    (row,) = breakdowns(trace)
    assert row.throttled == pytest.approx(10e-6) and row.unaccounted == 0


def test_a_sampled_stop_is_a_span_and_the_steps_total_places_nothing_more():
    trace = _step_trace()
    frame = next(e for e in trace["traceEvents"] if e.get("cat") == "step")
    frame["args"].update(throttled_us=50.0, stops_sampled=True)
    # a stop over the update (10 µs covered by it) and 6 µs of the empty 120-130 µs
    stop = complete("stopped by the node's CPU budget", "stopped", 110.0, 16.0, 0, 4, {"step": 7})
    trace["traceEvents"].append(stop)
    (row,) = breakdowns(trace)
    assert row.stopped == pytest.approx(6e-6) and row.update == pytest.approx(10e-6)
    # the step's 50 µs throttled include the sampled stop: the last 4 µs stay unaccounted
    assert row.throttled == 0 and row.unaccounted == pytest.approx(4e-6)
    assert row.span_coverage == row.coverage == pytest.approx(126 / 130)
    frame["args"].pop("stops_sampled")  # a trace whose stops were not sampled: as before
    (row,) = breakdowns(trace)
    assert row.throttled == pytest.approx(4e-6) and row.unaccounted == 0


def test_horovods_negotiation_is_a_wait_on_each_rank_from_its_readiness_mark():
    from archbench.timeline import horovod

    meta = {"ph": "M", "pid": 0, "name": "process_name", "args": {"name": "t"}}
    base = {"ph": "M", "pid": 0, "name": "x", "args": {"start_time_since_epoch_in_micros": 1000}}
    events = [
        base, meta,
        {"ph": "B", "pid": 0, "ts": 10, "name": "NEGOTIATE_ALLREDUCE"},
        {"ph": "X", "pid": 0, "ts": 10, "name": "1"},  # rank 1 ready first
        {"ph": "X", "pid": 0, "ts": 40, "name": "0"},
        {"ph": "E", "pid": 0, "ts": 41},
        {"ph": "B", "pid": 0, "ts": 41, "name": "ALLREDUCE"},
        {"ph": "B", "pid": 0, "ts": 42, "name": "MPI_ALLREDUCE"},
        {"ph": "E", "pid": 0, "ts": 60, "args": {"shape": "[4]", "dtype": "float32"}},
        {"ph": "E", "pid": 0, "ts": 61},
    ]  # fmt: skip
    found = horovod.spans(events, rank=0)
    waits = {s.rank: s for s in found if s.name.startswith("negotiate")}
    assert {r: (s.start_ns, s.end_ns) for r, s in waits.items()} == {
        0: (1040_000, 1041_000), 1: (1010_000, 1041_000),
    }  # fmt: skip
    assert waits[1].clock == 0, "rank 1's wait is on rank 0's clock (where it was marked)"
    comm = [s for s in found if s.cat == "comm"]
    assert len(comm) == 1 and comm[0].args["bytes"] == 16
    # a timeline without marks: the coordinator's bar, on rank 0
    unmarked = horovod.spans([e for e in events if e["ph"] != "X"], rank=0)
    (bar,) = [s for s in unmarked if s.name.startswith("negotiate")]
    assert (bar.rank, bar.start_ns, bar.end_ns) == (0, 1010_000, 1041_000)


def test_a_servers_time_with_no_op_running_is_a_wait_for_the_workers_requests():
    from archbench.timeline import derive
    from archbench.timeline.spans import Span

    frame = Span(0, "step", "step", "step 3 (the workers')", 100, 200, {"step": 3})
    spans = [
        frame,
        Span(0, "for worker 1", "comm", "push from worker rank 1", 120, 140, {"step": 3}),
        Span(0, "for worker 1", "update", "update", 130, 150, {"step": 3}),
        Span(0, "for worker 1", "comm", "pull to worker rank 1", 180, 190, {"step": 3}),
        Span(1, "compute", "forward", "forward", 100, 120, {"step": 3}),  # a worker: not derived
    ]
    waits = derive.server_idle(spans, servers=[0])
    assert [(w.rank, w.start_ns, w.end_ns) for w in waits] == [
        (0, 100, 120),
        (0, 150, 180),
        (0, 190, 200),
    ]
    assert all(w.cat == "wait" and "derived" in w.args["source"] for w in waits)


def _called_trace(throttled_us: float = 0.0) -> dict:
    """Rank 0, step 0-200 µs: the step thread's call into the engine 10-120 (its ops: forward
    20-50, backward 50-80; then nothing until the call returns at 120, the executor's stall),
    a send 130-170, an update 170-190, nothing 120-130 and 190-200 (outside the call)."""
    step = {"step": 4}
    frame = complete("step 4", "step", 0.0, 200.0, 0, 0, {**step, "throttled_us": throttled_us})
    return _trace(
        frame,
        complete("forward + backward (call)", "compute", 10.0, 110.0, 0, 1, step),
        complete("forward a", "forward", 20.0, 30.0, 0, 2, step),
        complete("backward a", "backward", 50.0, 30.0, 0, 2, step),
        complete("send gradient to rank 1", "comm", 130.0, 40.0, 0, 3, step),
        complete("update: SGD", "update", 170.0, 20.0, 0, 1, step),
    )


def test_a_gap_inside_the_compute_call_is_compute_and_one_outside_is_not():
    (row,) = breakdowns(_called_trace())
    micro = 1e-6
    # ops 60 µs, and the call's own time they leave: 10-20 and 80-120
    assert row.compute == pytest.approx(110 * micro)
    assert row.comm_exposed == pytest.approx(40 * micro) and row.comm_hidden == 0
    assert row.update == pytest.approx(20 * micro)
    assert row.unaccounted == pytest.approx(30 * micro)  # 0-10, 120-130, 190-200
    assert row.span_coverage == pytest.approx(170 / 200)
    without = _called_trace()
    without["traceEvents"] = [e for e in without["traceEvents"] if e.get("cat") != "compute"]
    (row,) = breakdowns(without)
    assert row.compute == pytest.approx(60 * micro), "only the ops without the call"
    assert row.unaccounted == pytest.approx(80 * micro)
    # a budget's throttled time explains what is left outside the call, no more
    (row,) = breakdowns(_called_trace(throttled_us=100.0))
    assert row.throttled == pytest.approx(30 * micro) and row.unaccounted == 0


def test_the_compute_call_claims_only_what_other_spans_leave():
    """Communication inside a fused call (ring's allreduce) stays communication, exposed where
    no op ran: the call is not an op, so it hides nothing; the engine's host spans stay host."""
    step = {"step": 2}
    trace = _trace(
        complete("step 2", "step", 0.0, 100.0, 0, 0, step),
        complete("forward + backward + allreduce + update (call)", "compute", 0.0, 100.0, 0, 1,
                 step),
        complete("backward a", "backward", 0.0, 30.0, 0, 2, step),
        complete("allreduce", "comm", 20.0, 40.0, 0, 3, step),
        complete("TensorFlow executor", "host", 60.0, 10.0, 0, 4, step),
        complete("update a", "update", 90.0, 10.0, 0, 2, step),
    )  # fmt: skip
    (row,) = breakdowns(trace)
    micro = 1e-6
    assert row.comm_hidden == pytest.approx(10 * micro)
    assert row.comm_exposed == pytest.approx(30 * micro)
    assert row.host == pytest.approx(10 * micro)
    assert row.compute == pytest.approx((20 + 20) * micro)  # backward alone 0-20; call 70-90
    assert row.update == pytest.approx(10 * micro) and row.unaccounted == 0
    assert row.overlap == pytest.approx(0.25)


def test_the_critical_path_names_the_work_not_the_call_holding_it():
    path = critical_path(_called_trace(), 4)
    names = [link["name"] for link in path]
    assert names[:3] == ["update: SGD", "send gradient to rank 1", "backward a"]
    assert all(link["cat"] != "compute" for link in path)


def test_the_recorder_times_a_call_only_in_a_traced_step():
    import time

    from archbench.timeline.recorder import CALL_THREAD, Recorder

    recorder = Recorder(rank=3)
    with recorder.call("forward + backward"):
        pass
    assert recorder.spans == [], "outside traced steps nothing is recorded"
    recorder.active, recorder.step = True, 9
    before = time.time_ns()
    with recorder.call("forward + backward"):
        time.sleep(0.002)
    after = time.time_ns()
    (span,) = recorder.spans
    assert (span.rank, span.thread, span.cat) == (3, CALL_THREAD, "compute")
    assert span.name == "forward + backward (call)" and span.args["step"] == 9
    assert before <= span.start_ns and span.end_ns <= after
    assert span.end_ns - span.start_ns >= 2_000_000


class _Engine:
    """A trainer's tf.function stand-in: sleeps, then hands back (loss, gradient)."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def __call__(self, x, y):
        import time

        import numpy as np

        time.sleep(self.seconds)
        return 0.5, np.ones(4, dtype=np.float32)


def _traced(trainer):
    from archbench.timeline.recorder import Recorder

    trainer.recorder = Recorder(rank=0)
    trainer.recorder.active, trainer.recorder.step = True, 5
    return trainer.recorder


def test_p2ps_step_records_its_gradients_call_before_the_exchange():
    import time

    from archbench.trainers.p2p import P2PTrainer

    trainer = object.__new__(P2PTrainer)  # no set-up: the step's own code around the engine
    recorder = _traced(trainer)
    trainer.row_sparse = []
    trainer._gradients = _Engine(0.003)
    exchanged = []
    trainer._exchange_apply = lambda gradient: exchanged.append((time.time_ns(), gradient.sum()))
    assert trainer.train_step(None, None) == 0.5
    (call,) = [s for s in recorder.spans if s.cat == "compute"]
    assert call.name == "forward + backward (call)"
    assert call.end_ns - call.start_ns >= 3_000_000
    assert exchanged and call.end_ns <= exchanged[0][0], "the exchange follows the call"


@pytest.mark.parametrize("arch", ["single", "ring"])
def test_a_fused_step_records_no_call(arch):
    """A fused step's call holds the update (and the ring's allreduce): a span over it would
    account for every gap of the step by construction, so none is recorded."""
    from archbench.runtime.localsgd import SYNC
    from archbench.trainers.ring import RingTrainer
    from archbench.trainers.single import SingleTrainer

    trainer = object.__new__(SingleTrainer if arch == "single" else RingTrainer)
    recorder = _traced(trainer)
    trainer.step_kind = SYNC
    trainer.compressor = None
    trainer._fused = lambda x, y: _Engine(0.002)(x, y)[0]
    assert trainer.train_step(None, None) == 0.5
    assert recorder.spans == []


def test_a_trace_with_calls_keeps_the_format_and_its_host_edges_are_outside_the_call():
    from archbench.timeline import build, derive
    from archbench.timeline.clock import Offset
    from archbench.timeline.recorder import CALL_THREAD
    from archbench.timeline.spans import Span

    step = {"step": 5, "source": derive.LOOP}
    spans = [
        Span(0, "step", "step", "step 5", 0, 100_000, dict(step)),
        Span(0, CALL_THREAD, "compute", "forward + backward (call)", 5_000, 60_000, {"step": 5}),
        Span(0, "compute thread 1", "forward", "forward a", 10_000, 30_000, {"step": 5}),
        Span(0, "compute thread 1", "backward", "backward a", 30_000, 50_000, {"step": 5}),
        Span(0, "mpi", "comm", "send gradient to rank 1", 62_000, 80_000, {"step": 5}),
        Span(0, "python", "update", "update: SGD", 80_000, 95_000, {"step": 5}),
    ]
    arranged = build.arrange(spans, [Offset(0.0, 0.0)], "p2p", ["worker"])
    edges = {s.name: (s.start_ns, s.end_ns) for s in arranged if s.cat == "host"}
    assert edges == {
        "host: the step handed to the engine": (0, 5_000),  # Python, up to the call
        "host: results back to Python": (95_000, 100_000),
    }
    meta = {"ranks": ["rank 0: worker on a"], "meta": {"generator": "archbench --timeline"}}
    trace = build.trace(arranged, 1.0, meta)
    assert problems(trace) == []
    rows = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
    assert CALL_THREAD in rows and not any(r.endswith("(2)") for r in rows), "a row of its own"
    (row,) = breakdowns(trace)
    assert row.unaccounted == pytest.approx(2e-6)  # 60-62: outside the call, no span
    assert row.compute == pytest.approx(55e-6)  # ops 10-50, the call's own 5-10 and 50-60


def test_a_stop_at_a_steps_edge_is_stopped_and_the_rest_of_the_edge_is_host():
    """A stop is the kernel's, not an engine event: the edge runs from the engine's last span
    and leaves the stop out. Before, the edge began at the stop's end and the update-to-stop
    gap stayed unaccounted."""
    from archbench.timeline import build, derive
    from archbench.timeline.clock import Offset
    from archbench.timeline.spans import Span

    step = {"step": 5}
    spans = [
        Span(0, "step", "step", "step 5", 0, 100_000, {**step, "source": derive.LOOP}),
        Span(0, "budget", "stopped", "stopped", 2_000, 4_000, dict(step)),  # before any op
        Span(0, "compute thread 1", "forward", "forward a", 10_000, 40_000, dict(step)),
        Span(0, "compute thread 1", "update", "update", 40_000, 70_000, dict(step)),
        Span(0, "budget", "stopped", "stopped", 85_000, 90_000, dict(step)),  # after the last
    ]
    arranged = build.arrange(spans, [Offset(0.0, 0.0)], "p2p", ["worker"])
    edges = sorted((s.start_ns, s.end_ns, s.name) for s in arranged if s.cat == "host")
    assert edges == [
        (0, 2_000, "host: the step handed to the engine"),
        (4_000, 10_000, "host: the step handed to the engine"),
        (70_000, 85_000, "host: results back to Python"),
        (90_000, 100_000, "host: results back to Python"),
    ]
    trace = build.trace(arranged, 1.0, {"ranks": ["rank 0: worker on a"], "meta": {}})
    (row,) = breakdowns(trace)
    assert row.stopped == pytest.approx(7e-6) and row.host == pytest.approx(33e-6)
    assert row.unaccounted == 0 and row.span_coverage == pytest.approx(1.0)


def test_a_ps_worker_waits_for_the_servers_wherever_no_push_runs_after_its_backward_pass():
    from archbench.timeline import derive
    from archbench.timeline.spans import Span

    step = {"step": 3}
    spans = [
        Span(1, "compute", "backward", "backward conv", 0, 100, dict(step)),
        Span(1, "network", "comm", "push to ps rank 0", 90, 110, dict(step)),  # during backward
        Span(1, "network", "comm", "push to ps rank 0", 120, 130, dict(step)),
        Span(1, "network", "comm", "push to ps rank 0", 125, 140, dict(step)),
        Span(1, "network", "comm", "push to ps rank 0", 160, 170, dict(step)),
        Span(1, "network", "comm", "pull from ps rank 0", 190, 200, dict(step)),
        Span(0, "for worker 1", "comm", "push from worker rank 1", 160, 170, dict(step)),
    ]
    waits = derive.server_waits(spans, workers=[1])
    assert [(w.rank, w.start_ns, w.end_ns, w.name.split(" (")[0]) for w in waits] == [
        (1, 110, 120, "wait for the servers to fetch the gradients"),
        (1, 140, 160, "wait for the servers to fetch the gradients"),
        (1, 170, 190, "wait for the servers"),
    ]
    assert all(w.cat == "wait" and "derived" in w.args["source"] for w in waits)


def test_a_collective_op_waits_from_its_start_to_its_done_callback_on_its_own_clock():
    from archbench.timeline.tfprofile import ASYNC_DONE, ASYNC_START, collective_calls

    grad_a, grad_b = "cond/HorovodAllreduce_grad_a_0", "cond_1/HorovodAllreduce_grad_b_0"
    events = [
        (ASYNC_START, "HorovodAllreduce", grad_a, 100),
        (ASYNC_START, "HorovodAllreduce", grad_b, 110),
        (ASYNC_DONE, "HorovodAllreduce", grad_b, 400),  # b's result back first
        (ASYNC_DONE, "HorovodAllreduce", grad_a, 450),
        (ASYNC_START, "HorovodAllreduce", grad_a, 1100),  # the next step's
        (ASYNC_DONE, "HorovodAllreduce", grad_a, 1300),
        (ASYNC_START, "HorovodAllgather", "rows", 2100),  # outside the traced steps
        (ASYNC_DONE, "HorovodAllgather", "rows", 2200),
        (ASYNC_START, "HorovodAllreduce", "never_back", 1150),  # no done: no span
    ]
    spans = collective_calls(events, windows=[(0, 1000), (1000, 2000)], rank=1)
    found = sorted((s.args["op"], s.start_ns, s.end_ns) for s in spans)
    assert found == [(grad_a, 100, 450), (grad_a, 1100, 1300), (grad_b, 110, 400)]
    assert all(s.rank == 1 and s.cat == "wait" for s in spans)
    assert {s.name for s in spans} == {"allreduce: until the result is back"}
    assert all("this rank's clock" in s.args["source"] for s in spans)


def test_a_string_stat_stored_as_a_reference_is_read_by_its_name():
    from types import SimpleNamespace

    from archbench.timeline.tfprofile import _stats

    class Stat(SimpleNamespace):
        def WhichOneof(self, _):
            return "ref_value" if hasattr(self, "ref_value") else "str_value"

    event = SimpleNamespace(
        stats=[Stat(metadata_id=1, ref_value=7), Stat(metadata_id=2, str_value="Horovod")]
    )
    names = {1: "name", 2: "kernel_type", 7: "cond/HorovodAllreduce_x_0"}
    assert _stats(event, names) == {
        "name": "cond/HorovodAllreduce_x_0",
        "kernel_type": "Horovod",
    }


def _ring_spans(own: bool) -> list:
    """Ranks 0 and 1, step 3, 0-1000 ns on one clock: rank 0's Horovod timeline holds one
    allreduce, its frame 300-600 (its result back on rank 0) with the MPI activity 320-580;
    rank 1's result was back at 700 (its own profiler: the op started at 200, done at 700),
    then its update ran 700-900."""
    from archbench.timeline import derive, horovod
    from archbench.timeline.spans import Span
    from archbench.timeline.tfprofile import COLLECTIVE_SOURCE, COLLECTIVE_THREAD

    loop = {"step": 3, "source": derive.LOOP}
    rank0 = {"source": horovod.SOURCE}
    spans = [
        Span(0, "step", "step", "step 3", 0, 1000, dict(loop)),
        Span(1, "step", "step", "step 3", 0, 1000, dict(loop)),
        Span(0, horovod.OPERATION_THREAD, "wait", "allreduce: until the result is back",
             300, 600, dict(rank0)),
        Span(0, "horovod", "comm", "mpi_allreduce (1 tensor(s))", 320, 580, dict(rank0)),
        Span(1, "compute thread 1", "backward", "backward a", 0, 200, {"step": 3}),
        Span(1, "compute thread 1", "update", "update a", 700, 900, {"step": 3}),
    ]  # fmt: skip
    if own:
        spans.append(
            Span(1, COLLECTIVE_THREAD, "wait", "allreduce: until the result is back", 200, 700,
                 {"step": 3, "source": COLLECTIVE_SOURCE})
        )  # fmt: skip
    return spans


def test_each_ranks_allreduce_ends_when_its_own_result_was_back():
    from archbench.timeline import build
    from archbench.timeline.clock import Offset

    offsets = [Offset(0.0, 0.0), Offset(0.0, 0.0)]
    arranged = build.arrange(_ring_spans(own=True), offsets, "ring", ["worker", "worker"])
    rank1 = [s for s in arranged if s.rank == 1]
    frames = [s for s in rank1 if s.name.startswith("allreduce: until")]
    assert [(s.start_ns, s.end_ns) for s in frames] == [(200, 700)], "its own, not rank 0's"
    assert any(s.cat == "comm" and s.name.startswith("mpi_allreduce") for s in rank1), (
        "the collective's activity is still merged from rank 0's timeline"
    )
    rank0 = [s for s in arranged if s.rank == 0 and s.name.startswith("allreduce: until")]
    assert [(s.start_ns, s.end_ns) for s in rank0] == [(300, 600)]
    meta = {"ranks": ["rank 0: worker on a", "rank 1: worker on b"], "meta": {}}
    trace = build.trace(arranged, 1.0, meta)
    assert problems(trace) == []
    row = next(r for r in breakdowns(trace) if r.rank == 1)
    assert row.unaccounted == 0 and row.wait == pytest.approx(240e-9)  # 200-320, 580-700
    # without its own measure, rank 1 gets rank 0's frame, and a gap 600-700 it cannot explain
    arranged = build.arrange(_ring_spans(own=False), offsets, "ring", ["worker", "worker"])
    frames = [s for s in arranged if s.rank == 1 and s.name.startswith("allreduce: until")]
    assert [(s.start_ns, s.end_ns) for s in frames] == [(300, 600)]
    row = next(r for r in breakdowns(build.trace(arranged, 1.0, meta)) if r.rank == 1)
    assert row.unaccounted == pytest.approx(100e-9)


def _node(name: str, scheduled_ns: int | None, start_ns: int):
    """An op's step statistics as TensorFlow fills them: the scheduled time in nanoseconds in the
    field named micros, on a clock of its own (here 5 s ahead of the wall clock); 0 when none."""
    return SimpleNamespace(
        node_name=name,
        scheduled_micros=0 if scheduled_ns is None else scheduled_ns + 5_000_000_000,
        all_start_nanos=start_ns,
        all_start_micros=start_ns // 1000,
    )


def test_an_op_ready_before_it_started_waited_for_a_thread_from_its_scheduled_time():
    from archbench.timeline.spans import COMPUTE
    from archbench.timeline.stepstats import MIN_QUEUED_NS, queued

    t0 = 1_000_000_000
    nodes = [
        _node("first", t0, t0 + 3_000),  # the quickest hand-over: the clocks' offset
        _node("waited", t0 + 100_000, t0 + 900_000),  # ready, then 0.8 ms without a thread
        _node("brief", t0 + 1_000_000, t0 + 1_003_000 + MIN_QUEUED_NS // 2),  # ordinary
        _node("untimed", None, t0 + 2_000_000),  # no scheduled time recorded
    ]
    (span,) = queued(nodes, step=7, rank=2)
    assert (span.rank, span.cat, span.args["op"], span.args["step"]) == (2, COMPUTE, "waited", 7)
    # measured from the first op's hand-over: 3 µs of the true 800 µs are taken as the offset
    assert (span.start_ns, span.end_ns) == (t0 + 103_000, t0 + 900_000)
    assert queued([_node("untimed", None, t0)], step=7, rank=2) == []


def test_ps_primes_tracing_on_the_last_warm_up_step_that_is_not_a_probe():
    from archbench.runtime.probes import is_probe
    from archbench.timeline.tracer import _primer_step

    def config(arch: str, warmup: int, probe_every: int = 10) -> SimpleNamespace:
        return SimpleNamespace(arch=arch, warmup_steps=warmup, probe_every=probe_every)

    ps = config("ps", 5)
    steps = traced_steps(30, 5, 10, 3)
    primer = _primer_step(ps, steps)
    assert primer is not None and primer < 5 and not is_probe(primer, 5, 10)
    later = range(primer + 1, 5)  # only probes between the primer and the traced steps
    assert all(is_probe(step, 5, 10) for step in later)
    assert _primer_step(config("ring", 5), steps) is None  # its profiler is not a session run
    assert _primer_step(config("ps", 0), traced_steps(30, 0, 10, 3)) is None  # no warm-up


def test_a_primed_session_run_is_traced_and_its_statistics_dropped():
    from archbench.timeline.recorder import Recorder

    recorder = Recorder(rank=1)
    assert recorder.session_run_options() == {}
    recorder.priming = True
    options = recorder.session_run_options()
    assert options["options"].trace_level == options["options"].FULL_TRACE
    assert recorder.run_metadata == []
    recorder.priming, recorder.active, recorder.step = False, True, 5
    kept = recorder.session_run_options()
    assert recorder.run_metadata == [(5, kept["run_metadata"])]
