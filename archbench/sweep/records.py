"""The record a sweep keeps for a run: the train command's own record when there is one, or one
built from what the driver saw (a crash, a timeout, a configuration the command refused), always
with the run's sweep details and, for a failure, the tail of its log."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path
from typing import Any

from archbench.common.archs import arch as architecture
from archbench.common.jsonl import read_json
from archbench.record import build_record, cluster_section, complete, read_records
from archbench.runtime.environment import environment, now_iso
from archbench.sweep.kinds import KINDS
from archbench.sweep.launch_failures import LAUNCH_FAILED, launcher_start_failure
from archbench.sweep.plan import PlannedRun
from archbench.sweep.runner import ProcessOutcome

LOG_TAIL_LINES = 40
LOG_TAIL_CHARS = 4000
LOG_READ_BYTES = 64 * 1024
_USAGE_LINE = re.compile(r"archbench \w+: error: (.*)")


def read_log(log_path: Path) -> str:
    """The end of a run's log (its last 64 KiB: where launchers and ranks say why they stopped)."""
    try:
        data = log_path.read_bytes()[-LOG_READ_BYTES:]
    except OSError:
        return ""
    return data.decode(errors="replace")


def log_tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    """The last lines of a log, as a failed run's record keeps them."""
    return "\n".join(text.splitlines()[-lines:])[-LOG_TAIL_CHARS:]


def train_record(path: Path, run_id: str) -> dict[str, Any] | None:
    """The record the chief wrote for this run (the last one, if a rank wrote twice)."""
    mine = [r for r in read_records(str(path)) if r.get("run_id") == run_id]
    return mine[-1] if mine else None


def _usage_message(tail: str) -> str | None:
    for line in reversed(tail.splitlines()):
        match = _USAGE_LINE.search(line)
        if match:
            return match.group(1).strip()
    return None


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def classify(
    outcome: ProcessOutcome, own: dict[str, Any] | None, log_text: str, timeout_s: float
) -> tuple[str, dict | None]:
    """(status, error) of a run from how it ended, what it wrote and the end of its log.

    An ok record from the chief counts even when the run then overran its timeout: the record is
    written whole after training, so only the teardown was cut (sweep.timed_out says so).
    """
    if own is not None and own.get("status") == "ok":
        return "ok", None
    if outcome.timed_out:
        return "timeout", {
            "type": "Timeout",
            "message": f"no result after the run's {timeout_s:g} s timeout; its process tree was stopped "
            "(SIGTERM, then SIGKILL)",
        }
    if own is not None and own.get("error"):
        return "failed", dict(own["error"])
    launch = launcher_start_failure(outcome, own, log_text)
    if launch is not None:
        reason, line = launch
        return "failed", {
            "type": LAUNCH_FAILED,
            "message": f"the launcher could not start, no rank ran ({reason}): {line}",
            "reason": reason,
        }
    code = outcome.returncode
    if code == 2:
        message = (
            _usage_message(log_text)
            or "the training command rejected its arguments (exit status 2)"
        )
        return "failed", {"type": "InvalidConfiguration", "message": message}
    if code < 0:
        return "failed", {"type": "Killed", "message": f"killed by {_signal_name(-code)}"}
    if code > 128 and code - 128 < 65:
        return "failed", {
            "type": "Killed",
            "message": f"exit status {code} ({_signal_name(code - 128)})",
        }
    if code == 0:
        return "failed", {
            "type": "MissingRecord",
            "message": "the command ended without writing a run record",
        }
    last = next((line.strip() for line in reversed(log_text.splitlines()) if line.strip()), "")
    return "failed", {
        "type": "Crashed",
        "message": f"exit status {code}" + (f": {last}" if last else ""),
    }


def _record_config(run: PlannedRun) -> dict[str, Any]:
    """The config object of the record contract, from the planned configuration."""
    # deferred: archbench.runtime.config loads only for a run that wrote no record of its own
    from archbench.runtime.config import TrainConfig

    fields = TrainConfig.__dataclass_fields__
    values = {k: v for k, v in run.config.items() if k in fields and k != "extra"}
    if "synthetic_shape" in values:
        values["synthetic_shape"] = tuple(int(d) for d in str(values["synthetic_shape"]).split("x"))
    config = TrainConfig(**values)
    if config.epochs is None and config.steps is None:
        config.epochs = 1
    record = config.as_record(run.world_size, run.num_workers)
    record["controller"] = run.config.get("controller", architecture(run.arch).default_controller)
    return record


def _record_cluster(run: PlannedRun, hostfile: str | None) -> dict[str, Any]:
    return cluster_section(
        run.arch,
        run.world_size,
        run.num_ps,
        [host for host, ranks in run.layout for _ in range(ranks)],
        run.config.get("launcher", "mpirun") if run.launched else "none",
        hostfile,
        run.config.get("bandwidth"),
    )


def build(
    run: PlannedRun,
    study: str,
    outcome: ProcessOutcome,
    run_dir: Path,
    command: str,
    hostfile: str | None,
    started_at: str,
    finished_at: str,
    attempt: int,
    cluster_kind: str,
    launch: dict[str, Any] | None = None,
    cluster_link: str | None = None,
) -> dict[str, Any]:
    """The one record results.jsonl keeps for this run; `launch`: how the driver launched it
    (warm_launch, cold_launch; what the run's own record says about it wins); `cluster_link`:
    the rate the study's cluster states for its links (a hostfile cluster's, measured by
    `archbench init` or stated)."""
    log_path = run_dir / "log.txt"
    own = train_record(run_dir / "record.jsonl", run.run_id)
    log_text = read_log(log_path)
    tail = log_tail(log_text)
    status, error = classify(outcome, own, log_text, run.timeout_s)
    if own is not None:
        record = dict(own)
    else:
        record = build_record(
            run_id=run.run_id,
            study=study,
            status=status,
            started_at=started_at,
            finished_at=finished_at,
            config=_record_config(run),
            cluster=_record_cluster(run, hostfile),
            env=environment(),
            timing={"wall_s": outcome.wall_s},
        )
    record["run_id"], record["study"], record["status"] = run.run_id, study, status
    if error is not None:
        record["error"] = {**error, "log_tail": tail}
    cluster = record.setdefault("cluster", {})
    if isinstance(cluster, dict) and not cluster.get("hostfile"):
        cluster["hostfile"] = hostfile  # remote ranks cannot see the launcher's command line
    link = run.config.get("bandwidth") or cluster_link
    if isinstance(cluster, dict) and not cluster.get("link") and link:
        # Every kind records its link in one place: an emulated node's ranks read their shaped
        # link themselves; the rate a hostfile cluster states is known here, not to its ranks.
        cluster["link"] = link
    if isinstance(cluster, dict):
        KINDS[cluster_kind].record_facts(cluster)
    config = record.setdefault("config", {})
    for key in ("workers", "placement", "bandwidth", "launcher"):
        if key in run.config:
            config.setdefault(key, run.config[key])
    complete(record)
    if launch is not None:
        record["launch"] = _launch_section(record, launch)
    record["sweep"] = {
        "factors": run.factors,
        "repetition": run.repetition,
        "attempt": attempt,
        "launch_failures": [],  # earlier tries whose launcher could not start (the driver fills it)
        "config": run.config,
        "command": command,
        "hostfile": hostfile,
        "log": str(log_path),
        "exit_status": outcome.returncode,
        "timed_out": outcome.timed_out,
        "timeout_s": run.timeout_s,
        "driver_wall_s": round(outcome.wall_s, 3),
        "stragglers_killed": outcome.stragglers_killed,
        "cluster": cluster_kind,
        "recorded_at": now_iso(),
    }
    return record


def warm_launch(group: str, position: int, size: int) -> dict[str, Any]:
    """The driver's side of `launch` for a run of a warm group."""
    return {
        "warm": size > 1,
        "group": group,
        "position": position,
        "group_size": size,
        "group_startup_s": None,
    }


def cold_launch(launched_at: float) -> dict[str, Any]:
    """The driver's side of `launch` for a run with a launch of its own."""
    return {
        "warm": False,
        "group": None,
        "position": 1,
        "group_size": 1,
        "group_startup_s": None,
        "launched_at": launched_at,
    }


def _launch_section(record: dict[str, Any], driver: dict[str, Any]) -> dict[str, Any]:
    """The run's own `launch` over the driver's; a cold run's start-up (launch to first step)
    from when the driver started its launcher and when the run's first step began."""
    launched_at = driver.pop("launched_at", None)
    own = record.get("launch") if isinstance(record.get("launch"), dict) else {}
    merged = {**driver, **{key: value for key, value in own.items() if value is not None}}
    if merged.get("group_startup_s") is None and launched_at is not None:
        first_step = _first_step_at(record)
        if first_step is not None:
            merged["group_startup_s"] = max(0.0, first_step - launched_at)
    return merged


def _first_step_at(record: dict[str, Any]) -> float | None:
    """When the run's first step began (epoch seconds), from its start and its real start-up."""
    from datetime import datetime

    startup = real_seconds(record, "startup_s", None)
    try:
        started = datetime.fromisoformat(str(record.get("started_at"))).timestamp()
    except ValueError:
        return None
    return None if startup is None else started + startup


def real_seconds(record: dict[str, Any], key: str, default: Any = 0.0) -> Any:
    """A `timing` duration in real seconds (a dilated run keeps its real timing under
    `fidelity.real`); `default` where the record has none."""
    fidelity = record.get("fidelity") if isinstance(record.get("fidelity"), dict) else {}
    real = (fidelity.get("real") or {}).get("timing") if fidelity else None
    timing = real if isinstance(real, dict) else record.get("timing") or {}
    value = timing.get(key) if isinstance(timing, dict) else None
    return value if isinstance(value, int | float) and not isinstance(value, bool) else default


def write_outcome(
    run_dir: Path, outcome: ProcessOutcome, started_at: str, finished_at: str
) -> None:
    """How the run ended, written before its record goes to results.jsonl (for recovery)."""
    target = run_dir / "outcome.json"
    scratch = run_dir / ".outcome.json.tmp"
    scratch.write_text(
        json.dumps(
            {
                "returncode": outcome.returncode,
                "timed_out": outcome.timed_out,
                "wall_s": outcome.wall_s,
                "stragglers_killed": outcome.stragglers_killed,
                "started_at": started_at,
                "finished_at": finished_at,
            }
        )
    )
    scratch.replace(target)


def read_outcome(run_dir: Path) -> tuple[ProcessOutcome, str, str] | None:
    try:
        data = read_json(run_dir / "outcome.json", max_bytes=1 << 20)
        outcome = ProcessOutcome(
            int(data["returncode"]),
            bool(data["timed_out"]),
            float(data["wall_s"]),
            int(data.get("stragglers_killed", 0)),
        )
        return outcome, data["started_at"], data["finished_at"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
