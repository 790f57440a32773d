"""The sweep itself: run every pending run of a plan, one at a time, keeping one record for each.

Resumable: a run whose id already has an ok record is skipped; a failed or timed-out one is run
again only with `retry_failed`. If a previous driver was killed, its leftover processes are
stopped first, and a run it had finished but not yet recorded is recorded from its run folder.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from archbench.errors import StopError
from archbench.hosts import hostfile_text
from archbench.launch import root_mpi_env
from archbench.record import now_iso
from archbench.settings import PLACEMENT_POLICIES, SETTINGS
from archbench.sweep import preflight, records
from archbench.sweep.commands import (
    default_python,
    launch_argv,
    shell_line,
    train_argv,
)
from archbench.sweep.emulated import EmulatedCluster
from archbench.sweep.hosts import resolve_target
from archbench.sweep.launch_failures import LAUNCH_FAILED
from archbench.sweep.plan import PlannedRun, StudyPlan, build_plan, check_only, describe
from archbench.sweep.progress import Progress
from archbench.sweep.runner import GRACE_S, RunningProcess, kill_marked
from archbench.sweep.spec import StudySpec
from archbench.sweep.store import ResultStore, StudyLock

# `timeline: true`: the spelling of --timeline that horovodrun lets through to the command.
TIMELINE_FLAG = SETTINGS["timeline"].alias
# Variables every rank needs, forwarded to remote ranks with mpirun -x.
RUN_ENV = {"ARCHBENCH_TRACEBACK": "1", "PYTHONUNBUFFERED": "1"}
# Before trying again a run whose launcher could not start: time for a busy sshd to catch up.
LAUNCH_RETRY_PAUSE_S = 2.0


@dataclass
class SweepOptions:
    dry_run: bool = False
    retry_failed: bool = False
    cluster: str | None = None  # overrides the spec's cluster.kind
    strict: bool = False  # exit status 1 when any run of the study is not ok
    only: dict[str, list[Any]] | None = None  # run only the runs with one of these levels of each
    grace_s: float = GRACE_S
    launch_retry_pause_s: float = LAUNCH_RETRY_PAUSE_S


@dataclass
class PreparedRun:
    run: PlannedRun
    run_dir: Path
    record_path: Path
    hostfile: str | None
    argv: list[str]
    env_shown: dict[str, str]

    @property
    def command(self) -> str:
        return shell_line(self.argv, self.env_shown)

    @property
    def marker(self) -> str:
        # Only this run's launcher and ranks have `--out <this path>` as two words of argv.
        return f"--out\0{self.record_path}"


class Sweep:
    def __init__(
        self,
        spec: StudySpec,
        options: SweepOptions,
        out: TextIO | None = None,
        err: TextIO | None = None,
    ):
        self.spec = spec
        self.options = options
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.results_dir = spec.results_dir.resolve()
        self.runs_dir = self.results_dir / "runs"
        self.store = ResultStore(self.results_dir)
        self.python = spec.python or default_python()
        self.plan: StudyPlan | None = None
        self.cluster: EmulatedCluster | None = None
        self.current: RunningProcess | None = None

    def say(self, line: str) -> None:
        print(f"archbench sweep: {line}", file=self.err, flush=True)

    # ----------------------------------------------------------------- preparing

    def prepare(self, run: PlannedRun) -> PreparedRun:
        run_dir = self.runs_dir / run.run_id
        record_path = run_dir / "record.jsonl"
        hostfile = None
        if run.launched:
            placement = run.config.get("placement")
            if placement is not None and placement not in PLACEMENT_POLICIES:
                hostfile = os.path.abspath(placement)
            else:
                hostfile = str(run_dir / "hostfile.txt")
        train = train_argv(run.config, self.python, str(record_path), run.run_id, self.spec.name)
        if self.spec.timeline:  # the run's trace beside its record
            train += [TIMELINE_FLAG, str(run_dir / "timeline.json")]
        forward = [*self.spec.env, *RUN_ENV]
        argv = launch_argv(
            run.config, train, hostfile if run.launched else None, run.world_size,
            self.spec.launcher_args, forward,
        )  # fmt: skip
        env_shown = dict(self.spec.env)
        if run.launched:
            env_shown.update(root_mpi_env())
        return PreparedRun(run, run_dir, record_path, hostfile, argv, env_shown)

    def pending(self) -> list[PlannedRun]:
        assert self.plan is not None
        todo = []
        for run in self.plan.runs:
            if self.options.only and not all(
                run.config.get(name) in levels for name, levels in self.options.only.items()
            ):
                continue
            status = self.store.status_of(run.run_id)
            if status is None or (status != "ok" and self.options.retry_failed):
                todo.append(run)
        return todo

    # ----------------------------------------------------------------- the sweep

    def run(self) -> int:
        target = resolve_target(self.spec, self.options.cluster)
        self.plan = build_plan(self.spec, target)
        check_only(self.plan, self.options.only)
        if self.options.dry_run:
            return self._dry_run()
        preflight.check_python(self.python, from_spec=self.spec.python is not None)
        preflight.check_launchers(self._launchers())
        try:
            with StudyLock(self.results_dir):
                return self._run_locked()
        except OSError as exc:
            kept = len(self.store.records)
            raise StopError(preflight.io_problem(exc, self.store.path, kept)) from None

    def _launchers(self) -> set[str]:
        """The launcher programs the plan's runs start (the first word of their commands)."""
        assert self.plan is not None
        return {self.prepare(run).argv[0] for run in self.plan.runs if run.launched}

    def _summary_line(self, todo: int) -> str:
        assert self.plan is not None
        plan = self.plan
        done = sum(1 for run in plan.runs if self.store.status_of(run.run_id) == "ok")
        failed = sum(1 for run in plan.runs if self.store.status_of(run.run_id) not in (None, "ok"))
        return (
            f"study {self.spec.name}: {plan.configurations} configurations x {self.spec.repetitions} "
            f"repetition(s) = {len(plan.runs)} runs on {plan.target.describe()}; {done} ok, {failed} failed "
            f"already recorded; {todo} to run"
        )

    def _dry_run(self) -> int:
        self.store.load(repair=False)
        todo = self._block_by_bandwidth(self.pending())
        for note in self.plan.notes if self.plan else []:
            self.say(note)
        self.say(self._summary_line(len(todo)))
        links = None
        for run in todo:
            if run.config.get("bandwidth", links) != links:
                links = run.config["bandwidth"]
                print(f"# emulated cluster links at {links} from here on", file=self.out)
            print(self.prepare(run).command, file=self.out)
        return 0

    def _run_locked(self) -> int:
        assert self.plan is not None
        # A driver killed earlier may have left a run's processes behind: stop them before
        # anything here touches their run folders.
        stale = kill_marked(f"--out\0{self.runs_dir}/", self.options.grace_s)
        if stale:
            self.say(f"stopped {stale} process(es) left by an earlier sweep of this study")
        self.store.load()
        recovered = self._recover()
        if recovered:
            self.say(f"recorded {recovered} run(s) that an interrupted sweep had finished")
        todo = self._block_by_bandwidth(self.pending())
        for note in self.plan.notes:
            self.say(note)
        self.say(self._summary_line(len(todo)))
        owner_file = self.results_dir / ".cluster-owner"
        if self.plan.target.kind == "emulated" and (todo or owner_file.exists()):
            cluster_spec = self.spec.cluster
            self.cluster = EmulatedCluster(
                self.plan.target,
                cluster_spec.name,
                cluster_spec.prefix,
                owner_file=owner_file,
                log=self.say,
                dilation=cluster_spec.dilation,
                vcpus_per_node=cluster_spec.vcpus_per_node,
                vcpus_per_process=cluster_spec.vcpus_per_process,
                idle_nap_us=cluster_spec.idle_nap_us,
            )
            self.cluster.check_ready(
                {r.config["bandwidth"] for r in todo if "bandwidth" in r.config}
            )
        previous_handlers = _stop_signals_raise_interrupt()
        progress = Progress(len(todo), stream=self.err)
        try:
            for run in todo:
                if self.cluster is not None:
                    # every run, also `single` (no link setting): it runs on a node
                    self.cluster.ensure(run.config.get("bandwidth"))
                label = f"{run.run_id} ({describe(run.config)})"
                progress.start(label)
                record = self._execute(run, progress)
                progress.finish(
                    run.run_id,
                    record["status"],
                    record["sweep"]["driver_wall_s"],
                    _progress_detail(record),
                )
        finally:
            if self.current is not None:
                self.current.stop(self.options.grace_s)
                self.current = None
            if self.cluster is not None:
                self.cluster.close()
            _restore(previous_handlers)
        progress.close()
        return self._finish()

    def _finish(self) -> int:
        assert self.plan is not None
        statuses = [self.store.status_of(run.run_id) for run in self.plan.runs]
        bad = [s for s in statuses if s not in ("ok", None)]
        self.say(
            f"study {self.spec.name}: {statuses.count('ok')} ok, {bad.count('failed')} failed, "
            f"{bad.count('timeout')} timeout, {statuses.count(None)} not run; records in "
            f"{self.store.path}"
        )
        if bad:
            self.say("run again with --retry-failed to retry the failed and timed-out runs")
        return 1 if self.options.strict and (bad or None in statuses) else 0

    def _block_by_bandwidth(self, runs: list[PlannedRun]) -> list[PlannedRun]:
        """On the emulated cluster each bandwidth change re-shapes every link: run each bandwidth as
        one block (blocks in the order they first appear in the shuffled list, runs keep their order
        inside)."""
        if self.plan is None or self.plan.target.kind != "emulated":
            return runs
        blocks: dict[Any, list[PlannedRun]] = {}
        current = None
        for run in runs:
            current = run.config.get("bandwidth", current)
            blocks.setdefault(current, []).append(run)
        if None in blocks and len(blocks) > 1:  # single runs before any bandwidth was seen
            first_real = next(key for key in blocks if key is not None)
            blocks[first_real] = blocks.pop(None) + blocks[first_real]
        return [run for block in blocks.values() for run in block]

    def _attempt(self, run: PlannedRun) -> int:
        previous = self.store.records.get(run.run_id)
        return int((previous or {}).get("sweep", {}).get("attempt", 0)) + 1

    def _execute(self, run: PlannedRun, progress: Progress) -> dict[str, Any]:
        """Runs it, and again (up to `launch_retries` times) while its launcher cannot start; records
        the last try, with the earlier ones' reasons in sweep.launch_failures."""
        attempt = self._attempt(run)
        failures: list[dict[str, Any]] = []
        while True:
            record = self._try(run, attempt)
            error = record.get("error") or {}
            if error.get("type") != LAUNCH_FAILED or len(failures) >= self.spec.launch_retries:
                break
            if self.cluster is not None:
                self.cluster.require_healthy()  # a dead node: name it rather than try again
            failures.append({"attempt": attempt, "reason": error["reason"]})
            pause = self.options.launch_retry_pause_s
            progress.retry(run.run_id, attempt, f"failed to launch ({error['reason']})", pause)
            time.sleep(pause)
            attempt += 1
        record["sweep"]["launch_failures"] = failures
        self.store.add(record)
        return record

    def _try(self, run: PlannedRun, attempt: int) -> dict[str, Any]:
        """One try of a run in a fresh run folder; its record, not yet kept."""
        prepared = self.prepare(run)
        if prepared.run_dir.exists():
            shutil.rmtree(prepared.run_dir)
        prepared.run_dir.mkdir(parents=True)
        if prepared.hostfile and prepared.hostfile.startswith(str(prepared.run_dir)):
            Path(prepared.hostfile).write_text(hostfile_text(run.layout))
        (prepared.run_dir / "command.txt").write_text(prepared.command + "\n")
        (prepared.run_dir / "attempt").write_text(f"{attempt}\n")
        env = {**os.environ, **self.spec.env, **RUN_ENV}
        if run.launched:
            env.update(root_mpi_env())
        started_at = now_iso()
        self.current = RunningProcess(
            prepared.argv,
            env=env,
            cwd=os.getcwd(),
            log_path=prepared.run_dir / "log.txt",
            marker=prepared.marker,
        )
        outcome = self.current.wait(run.timeout_s, self.options.grace_s)
        self.current = None
        finished_at = now_iso()
        records.write_outcome(prepared.run_dir, outcome, started_at, finished_at)
        record = records.build(
            run,
            self.spec.name,
            outcome,
            prepared.run_dir,
            prepared.command,
            prepared.hostfile,
            started_at,
            finished_at,
            attempt,
            self.plan.target.kind,
        )
        return record

    def _recover(self) -> int:
        """Records runs that ended (outcome written, or an ok record from training) but whose
        record never reached results.jsonl because the driver died in between."""
        assert self.plan is not None
        count = 0
        for run in self.plan.runs:
            if self.store.status_of(run.run_id) == "ok":
                continue
            run_dir = self.runs_dir / run.run_id
            if not run_dir.is_dir():
                continue
            try:
                attempt = int((run_dir / "attempt").read_text())
            except (OSError, ValueError):
                continue
            if run.run_id in self.store.records and attempt <= self._attempt(run) - 1:
                continue  # that attempt's record is already the one in results.jsonl
            ended = records.read_outcome(run_dir)
            if ended is None:
                own = records.train_record(run_dir / "record.jsonl", run.run_id)
                if own is None or own.get("status") != "ok":
                    continue  # it was still running: it runs again
                wall = float((own.get("timing") or {}).get("wall_s") or 0.0)
                ended = (
                    records.ProcessOutcome(0, False, wall, 0),
                    own.get("started_at", ""),
                    own.get("finished_at", ""),
                )
            outcome, started_at, finished_at = ended
            prepared = self.prepare(run)
            record = records.build(
                run,
                self.spec.name,
                outcome,
                run_dir,
                prepared.command,
                prepared.hostfile,
                started_at,
                finished_at,
                attempt,
                self.plan.target.kind,
            )
            record["sweep"]["recovered"] = True
            if self.store.add(record):
                count += 1
        return count


def _progress_detail(record: dict[str, Any]) -> str:
    """What a run's progress line adds to its status: the error type, and any launch retries."""
    parts = [] if record["status"] == "ok" else [(record.get("error") or {}).get("type", "")]
    retries = len(record["sweep"].get("launch_failures", []))
    if retries:
        plural = "retry" if retries == 1 else "retries"
        parts.append(f"attempt {record['sweep']['attempt']} after {retries} launch {plural}")
    return ", ".join(part for part in parts if part)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _stop_signals_raise_interrupt() -> dict[int, Any]:
    """SIGTERM/SIGHUP stop the sweep like Ctrl-C: the current run is torn down, nothing recorded."""
    previous = {}
    for signum in (signal.SIGTERM, signal.SIGHUP):
        previous[signum] = signal.signal(signum, _raise_interrupt)
    return previous


def _restore(previous: dict[int, Any]) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, handler)


def run_sweep(
    spec: StudySpec, options: SweepOptions, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    return Sweep(spec, options, out, err).run()
