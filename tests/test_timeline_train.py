"""`--timeline` on real runs: ring under horovodrun, p2p under mpirun, ps under mpirun (one
server), each traced once (a module fixture); the trace must follow the Trace Event Format
rules, show every rank, align the ranks' clocks, and hold each architecture's own spans; the
record keeps `timeline.*` and leaves the traced steps out of its step statistics; `archbench
timeline` and the report read the traces; bad input gets one line and exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cluster_fixture import launcher_env
from conftest import REPO, run_train

from archbench.timeline.breakdown import breakdowns, spans_by_step
from archbench.timeline.traceformat import problems

STEPS = 12  # warm-up 5 (its last step a probe), traced 5-7, timed 8-11 (a probe at 14: none)
RUN = ["--model", "mlp", "--steps", str(STEPS), "--eval-samples", "200"]
LAUNCH = {"ring": ("horovodrun", 2), "p2p": ("mpirun", 2), "ps": ("mpirun", 3)}


def _trace_each(folder: Path, warm: bool) -> dict[str, tuple[dict, dict, Path]]:
    """arch -> (record, trace, trace path) of one traced run per architecture, all records in
    one results.jsonl. Warm: the traced run is the second of a warm group (a runs file) whose
    first trained something else (traced too for ring: Horovod records a timeline only when told
    at its initialisation, so the sweep groups traced ring runs with traced ones only)."""
    out = folder / "results.jsonl"
    runs = {}
    for arch, (launcher, np) in LAUNCH.items():
        path = folder / f"{arch}.json"
        if warm:
            first = ["--timeline", str(folder / f"{arch}-first.json")] if arch == "ring" else []
            group = [
                ["--arch", arch, *RUN, "--seed", "5", "--lr", "0.2", *first],
                ["--arch", arch, *RUN, "--timeline", str(path)],
            ]
            runs_file = folder / f"{arch}-group.json"
            runs_file.write_text(json.dumps({"group": f"traced-{arch}", "runs": [
                {"run_id": f"{arch}-{n}", "argv": [*words, "--out", str(out), "--run-id",
                                                   f"{arch}-{n}"]}
                for n, words in enumerate(group)
            ]}))  # fmt: skip
            proc, records = run_train(
                ["--runs-file", str(runs_file)], out=None, launcher=launcher, np=np
            )
            records = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
            assert [r["launch"]["position"] for r in records[-2:]] == [1, 2]
        else:
            flag = "--timeline-file" if launcher == "horovodrun" else "--timeline"  # see settings
            proc, records = run_train(
                ["--arch", arch, *RUN, flag, str(path)], out=out, launcher=launcher, np=np
            )
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
        runs[arch] = (records[-1], json.loads(path.read_text()), path)
    return runs


@pytest.fixture(scope="module")
def traced(tmp_path_factory) -> dict[str, tuple[dict, dict, Path]]:
    """One traced run per architecture, each a launch of its own."""
    return _trace_each(tmp_path_factory.mktemp("traced"), warm=False)


@pytest.fixture(scope="module")
def traced_warm(tmp_path_factory) -> dict[str, tuple[dict, dict, Path]]:
    """One traced run per architecture, each following another run in a warm group's launch."""
    return _trace_each(tmp_path_factory.mktemp("traced-warm"), warm=True)


@pytest.fixture(params=["cold", "warm"])
def traced_any(request) -> dict[str, tuple[dict, dict, Path]]:
    """A traced run alone, and one in a warm group: each must trace the same way."""
    return request.getfixturevalue("traced" if request.param == "cold" else "traced_warm")


@pytest.mark.parametrize("arch", list(LAUNCH))
def test_the_trace_follows_the_format_and_shows_every_rank(traced_any, arch):
    record, trace, _ = traced_any[arch]
    assert problems(trace) == []
    names = {
        e["pid"]: e["args"]["name"]
        for e in trace["traceEvents"]
        if e["ph"] == "M" and e["name"] == "process_name"
    }
    world = record["cluster"]["world_size"]
    assert sorted(names) == list(range(world))
    ranks_with_spans = {e["pid"] for e in trace["traceEvents"] if e["ph"] == "X"}
    assert ranks_with_spans == set(range(world)), "a track per rank, servers included"
    meta = trace["otherData"]
    assert meta["dilation_factor_D"] == 1.0 and "virtual" in meta["time"]
    assert meta["traced_steps"] == [5, 6, 7] == record["timeline"]["steps"]


@pytest.mark.parametrize("arch", list(LAUNCH))
def test_traced_steps_are_left_out_of_the_step_statistics(traced_any, arch):
    record, _, path = traced_any[arch]
    timing, timeline = record["timing"], record["timeline"]
    assert timing["timed_steps"] == STEPS - 5 - 3  # warm-up and traced steps out, as probes
    assert timeline["file"] == str(path)
    assert timeline["traced_steps"] == 3
    assert timeline["cost"]["timed_step_s_median"] == timing["step_s_median"]
    assert timeline["cost"]["traced_step_s_median"] > 0
    for key in ("overlap", "comm_s", "comm_hidden_s", "comm_exposed_s", "wait_s", "compute_s"):
        assert key in timeline
    assert 0 <= timeline["overlap"] <= 1
    assert 0 < timeline["coverage_min"] <= 1
    assert timeline["critical_path"], "the median step's critical path"


@pytest.mark.parametrize("arch", list(LAUNCH))
def test_the_ranks_clocks_are_aligned(traced_any, arch):
    """A synchronous step ends with an exchange every worker takes part in, so after alignment
    each step's frames on the workers overlap in time (by more than the clock bound)."""
    record, trace, _ = traced_any[arch]
    clock = trace["otherData"]["clock"]
    assert clock["offset_us"][0] == 0 and len(clock["bound_us"]) == record["cluster"]["world_size"]
    bound_us = max(clock["bound_us"])
    assert record["timeline"]["clock_bound_s"] == pytest.approx(bound_us / 1e6, rel=1e-3)
    workers = [r for r, role in enumerate(record["cluster"]["roles"]) if role != "ps"]
    frames = spans_by_step(trace)
    for step in record["timeline"]["steps"]:
        starts = [frames[(rank, step)]["frame"][0] for rank in workers]
        ends = [frames[(rank, step)]["frame"][1] for rank in workers]
        assert max(starts) + bound_us < min(ends), f"step {step}: {starts} {ends}"


def _spans(trace: dict, rank: int, cat: str | None = None) -> list[dict]:
    return [
        e
        for e in trace["traceEvents"]
        if e["ph"] == "X" and e["pid"] == rank and (cat is None or e["cat"] == cat)
    ]


def test_ring_spans_merge_horovods_timeline_on_every_rank(traced_any):
    _, trace, _ = traced_any["ring"]
    for rank in (0, 1):
        layers = {e["args"].get("layer") for e in _spans(trace, rank, "backward")}
        assert {"hidden", "logits"} <= layers, "backward per layer"
        assert _spans(trace, rank, "forward")
        horovod = [e for e in _spans(trace, rank, "comm") if "horovod" in e["args"]["source"]]
        assert any(e["args"]["activity"].endswith("_ALLREDUCE") for e in horovod)
        assert sum(e["args"]["bytes"] or 0 for e in horovod) > 0
    negotiations = [e for e in _spans(trace, 0, "wait") if e["name"].startswith("negotiate")]
    assert negotiations, "Horovod negotiates on rank 0 (its coordinator)"
    # rank 1 waits in a negotiation only where rank 0's timeline marked its readiness (a tensor
    # outside Horovod's response cache); a cached tensor's negotiation is the coordinator's bar
    for event in _spans(trace, 1, "wait"):
        if event["name"].startswith("negotiate"):
            assert "rank 1's readiness mark" in event["args"]["source"]
    # when each rank's result was back is its own: its profiler's ops, not rank 0's frames
    for rank in (0, 1):
        own = [e for e in _spans(trace, rank, "wait") if "this rank's clock" in e["args"]["source"]]
        assert {e["args"]["step"] for e in own} == {5, 6, 7}
        assert all(e["args"]["type"] == "HorovodAllreduce" for e in own)
    assert not [
        e
        for e in _spans(trace, 1, "wait")
        if e["name"].endswith("until the result is back") and "rank 0" in e["args"]["source"]
    ]


def test_p2ps_compute_call_holds_its_ops(traced_any):
    _, trace, _ = traced_any["p2p"]
    slack_us = 50.0  # the profiler's events are placed on the wall clock within a few µs
    for rank in (0, 1):
        calls = _spans(trace, rank, "compute")
        assert sorted(e["args"]["step"] for e in calls) == [5, 6, 7], "one call per step"
        for call in calls:
            ops = [
                e
                for e in _spans(trace, rank)
                if e["cat"] in ("forward", "backward") and e["args"]["step"] == call["args"]["step"]
            ]
            assert ops
            for op in ops:
                assert call["ts"] - slack_us <= op["ts"]
                assert op["ts"] + op["dur"] <= call["ts"] + call["dur"] + slack_us


def test_p2p_spans_are_each_send_receive_and_wait(traced_any):
    record, trace, _ = traced_any["p2p"]
    shard_bytes = record["comm"]["shard_plan"]
    for rank, peer in ((0, 1), (1, 0)):
        comm = _spans(trace, rank, "comm")
        for kind in ("gradient", "parameters"):
            sends = [e for e in comm if e["name"] == f"send {kind} to rank {peer}"]
            receives = [e for e in comm if e["name"] == f"receive {kind} from rank {peer}"]
            assert len(sends) == len(receives) == 3, "one of each per traced step"
            assert all(e["args"]["bytes"] > 0 and e["args"]["peer"] == peer for e in sends)
            assert {e["args"]["bytes"] for e in receives} == {
                e["args"]["bytes"]
                for e in _spans(trace, peer, "comm")
                if e["name"] == f"send {kind} to rank {rank}"
            }
        assert [e for e in _spans(trace, rank, "wait") if "receives" in e["name"]]
        assert [e for e in _spans(trace, rank, "update") if "SGD" in e["name"]]
    assert shard_bytes  # the plan the messages carry


def test_ps_spans_hold_pushes_pulls_and_the_servers_work(traced_any):
    _, trace, _ = traced_any["ps"]
    server = _spans(trace, 0)
    assert {e["cat"] for e in server} >= {"comm", "update", "wait"}
    assert any(e["name"].startswith("aggregate") for e in server)
    for worker in (1, 2):
        comm = _spans(trace, worker, "comm")
        pushes = [e for e in comm if e["name"] == "push to ps rank 0"]
        pulls = [e for e in comm if e["name"] == "pull from ps rank 0"]
        assert pushes and pulls
        assert max(e["args"]["bytes"] for e in pushes) == 128 * 784 * 4  # hidden kernel
        assert {e["args"]["step"] for e in pulls} == {5, 6, 7}
        pushed_from = {e["args"]["from_rank"] for e in server if e["name"].startswith("push from")}
        assert worker in pushed_from, "the server's track shows each worker's pushes"
    assert [r for r in breakdowns(trace) if r.role == "ps"], "servers have a breakdown too"


def test_archbench_timeline_prints_a_step_and_draws_its_gantt(traced, tmp_path):
    _, _, path = traced["ring"]
    proc = subprocess.run(
        [sys.executable, "-m", "archbench.cli", "timeline", str(path), "--step", "6",
         "--out-dir", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("ring mlp, step 6")
    assert "comm hidden" in lines[1] and "comm exposed" in lines[1] and "waits" in lines[1]
    assert any(line.split()[:2] == ["1", "worker"] for line in lines[2:4])
    assert "critical path" in proc.stdout
    assert (tmp_path / f"{path.stem}-step6.png").stat().st_size > 0
    assert (tmp_path / f"{path.stem}-step6.svg").stat().st_size > 0


def test_the_report_section_checks_the_overlap_claim(traced, tmp_path):
    from archbench.analysis.report import write_report

    _, _, path = traced["ring"]
    report = write_report(path.parent / "results.jsonl", tmp_path / "report")
    section = next(s for s in report.sections if s.key == "timelines")
    table = section.table("timeline_overlap")
    assert set(table["arch"]) == {"ring", "p2p", "ps"}
    claims = section.table("timeline_claim")
    assert set(claims["comparison"]) == {"ring vs p2p", "ring vs ps"}
    assert (claims["verdict"] == "one repetition: no interval").all()
    assert any("seed 002" in line for line in report.findings)
    assert [f for f in section.figures if f.stem == "timeline_gantt"]


@pytest.mark.parametrize(
    "args, says",
    [
        (["--steps", "20", "--timeline", "/no/such/folder/t.json"], "folder /no/such/folder does not exist"),
        (["--steps", "20", "--timeline", "/dev/null"], "is not a regular file"),
        (["--steps", "8", "--timeline", "{tmp}/t.json"], "too short"),
        (["--dataset", "synthetic", "--synthetic-samples", "256", "--batch-size", "32",
          "--epochs", "1", "--timeline", "{tmp}/t.json"], "a run of 8 steps is too short"),
    ],
)  # fmt: skip
def test_bad_timeline_input_is_one_line_and_exit_2(tmp_path, args, says):
    out = tmp_path / "r.jsonl"
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    proc, records = run_train(["--arch", "single", "--model", "mlp", *args], out=out)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("archbench train: error:") and says in lines[0]
    assert records == [] and not (tmp_path / "t.json").exists()


def test_a_run_too_short_to_trace_under_mpirun_says_it_once(tmp_path):
    out = tmp_path / "r.jsonl"
    proc, records = run_train(
        ["--arch", "p2p", "--steps", "6", "--timeline", str(tmp_path / "t.json")],
        out=out, launcher="mpirun", np=2,
    )  # fmt: skip
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if "archbench train: error" in line]
    assert len(errors) == 1 and "too short" in errors[0], proc.stderr
    assert records == []


def test_a_bad_trace_file_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "ts": 0, "dur": -1, "pid": 0, "tid": 0}]}')
    proc = subprocess.run(
        [sys.executable, "-m", "archbench.cli", "timeline", str(bad)],
        cwd=REPO, capture_output=True, text=True, timeout=60, env=launcher_env(),
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "not a valid Trace Event Format file" in proc.stderr


def test_ps_workers_ops_wait_for_a_thread_only_inside_their_steps(traced_any):
    """The waits from an op's scheduling to its start are drawn on the worker whose executor ran
    it, inside the traced step that ran it (their clock is TensorFlow's own, aligned by the
    device's quickest hand-over: a wrong alignment puts them outside the step)."""
    record, trace, _ = traced_any["ps"]
    frames = spans_by_step(trace)
    queued = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["name"].startswith("queued")]
    assert queued, "three ranks on this machine's cores: some op waited for a thread"
    workers = {r for r, role in enumerate(record["cluster"]["roles"]) if role != "ps"}
    slack_us = 50.0
    for event in queued:
        assert event["pid"] in workers and event["cat"] == "compute"
        start, end = frames[(event["pid"], event["args"]["step"])]["frame"]
        assert start - slack_us <= event["ts"] and event["ts"] + event["dur"] <= end + slack_us
