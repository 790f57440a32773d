"""The sweep itself: run every pending run of a plan, one at a time, keeping one record for each.

Runs that share a process layout share a launch (a warm group, archbench.sweep.groups): its
ranks run them one after another, each with its own record, timeout and failure; a run that does
not end ok ends the launch, and the group's remaining runs go on in a fresh one. `cold` (the
`--cold` flag, or `warm: false` in the spec) gives each run a launch of its own.

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

from archbench.common.errors import StopError
from archbench.common.hosts import hostfile_text
from archbench.common.study_state import write_plan
from archbench.runtime.environment import now_iso
from archbench.runtime.launch import root_mpi_env
from archbench.runtime.settings import SETTINGS
from archbench.runtime.warmgroup import RUNS_FILE_FLAG
from archbench.sweep import preflight, records, user_files
from archbench.sweep.commands import (
    default_python,
    launch_argv,
    shell_line,
    train_argv,
)
from archbench.sweep.groups import cold_groups, warm_groups
from archbench.sweep.kinds import SRUN, ClusterKind, kind_of, resolve_target
from archbench.sweep.kinds import describe as describe_target
from archbench.sweep.kinds.base import ClusterManager
from archbench.sweep.launch_failures import LAUNCH_FAILED
from archbench.sweep.live_report import LiveReport
from archbench.sweep.plan import PlannedRun, StudyPlan, build_plan, check_only, describe
from archbench.sweep.progress import Progress
from archbench.sweep.runner import GRACE_S, RunningProcess, kill_marked
from archbench.sweep.spec import StudySpec
from archbench.sweep.store import ResultStore, StudyLock
from archbench.sweep.warm import GroupLaunch, GroupMember, group_id, write_runs_file

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
    cold: bool = False  # one launch per run, whatever the spec says


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
        self.groups_dir = self.results_dir / "groups"  # one folder per warm launch
        self.store = ResultStore(self.results_dir)
        self.python = spec.python or default_python()
        self.plan: StudyPlan | None = None
        self.cluster: ClusterManager | None = None
        self.current: RunningProcess | GroupLaunch | None = None
        self.started = time.monotonic()
        self.recorded: list[dict[str, Any]] = []  # the records this driver added
        self.launches = 0

    def say(self, line: str) -> None:
        print(f"archbench sweep: {line}", file=self.err, flush=True)

    # ----------------------------------------------------------------- preparing

    def prepare(self, run: PlannedRun) -> PreparedRun:
        run_dir = self.runs_dir / run.run_id
        record_path = run_dir / "record.jsonl"
        hostfile = _hostfile_for(run, run_dir)
        train = train_argv(run.config, self.python, str(record_path), run.run_id, self.spec.name)
        if run.traced:  # the run's trace beside its record
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

    @property
    def kind(self) -> ClusterKind:
        """What the study's kind of cluster does for the sweep (archbench.sweep.kinds)."""
        return kind_of(self.plan.target)

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

    @property
    def warm(self) -> bool:
        return self.spec.warm and not self.options.cold

    @property
    def blocked(self) -> bool:
        """`order: blocked`: a launch holds runs of one repetition only."""
        return self.spec.order == "blocked"

    def groups(self, runs: list[PlannedRun]) -> list[list[PlannedRun]]:
        """The launches the runs go in, in run order."""
        if not self.warm:
            return cold_groups(runs)
        return warm_groups(runs, by_repetition=self.blocked)

    def _launches_text(self, groups: list[list[PlannedRun]]) -> str:
        """` in L launch(es) (warm: …)` for the summary line; empty with nothing to run."""
        if not groups:
            return ""
        how = "cold"
        if self.warm:
            how = "warm: runs sharing a process layout share a launch"
            if self.blocked:
                how += " within a repetition"
        return f" in {len(groups)} launch(es) ({how})"

    def _launchers(self) -> set[str]:
        """The launcher programs the plan's runs start (the first word of their commands)."""
        assert self.plan is not None
        return {self.prepare(run).argv[0] for run in self.plan.runs if run.launched}

    def _summary_line(self, todo: int) -> str:
        assert self.plan is not None
        plan = self.plan
        done = sum(1 for run in plan.runs if self.store.status_of(run.run_id) == "ok")
        failed = sum(1 for run in plan.runs if self.store.status_of(run.run_id) not in (None, "ok"))
        shape = f"{plan.configurations} configurations x {self.spec.repetitions} repetition(s)"
        if self.spec.also:  # a block may repeat its configurations another number of times
            shape = f"{plan.configurations} configurations ({len(self.spec.also)} in also: blocks)"
        return (
            f"study {self.spec.name}: {shape} = {len(plan.runs)} runs on "
            f"{describe_target(plan.target)}; {done} ok, {failed} failed already recorded; {todo} to run"
        )

    def _load_records(self, repair: bool = True) -> None:
        """The study's records, read once before it runs; UsageError when a user's model or data
        file changed since they were made (the study would mix two versions)."""
        assert self.plan is not None
        self.store.load(repair=repair)
        user_files.check_unchanged(self.plan.runs, self.store.records.values())

    def _dry_run(self) -> int:
        self._load_records(repair=False)
        groups = self.groups(self._block_by_bandwidth(self.pending()))
        todo = [run for group in groups for run in group]
        for note in self.plan.notes if self.plan else []:
            self.say(note)
        self.say(self._summary_line(len(todo)) + self._launches_text(groups))
        imported = user_files.imported_files(todo)
        if imported:
            self.say(
                f"model files this study imports (code you chose to run): {', '.join(imported)}"
            )
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
        stale += kill_marked(f"{RUNS_FILE_FLAG}\0{self.groups_dir}/", self.options.grace_s)
        if stale:
            self.say(f"stopped {stale} process(es) left by an earlier sweep of this study")
        self._load_records()
        recovered = self._recover()
        if recovered:
            self.say(f"recorded {recovered} run(s) that an interrupted sweep had finished")
        groups = self.groups(self._block_by_bandwidth(self.pending()))
        todo = [run for group in groups for run in group]
        for note in self.plan.notes:
            self.say(note)
        self.say(self._summary_line(len(todo)) + self._launches_text(groups))
        owner_file = self.results_dir / ".cluster-owner"
        manager = self.kind.manager(self.plan.target, self.spec, owner_file, self.say)
        if manager is not None and (todo or owner_file.exists()):
            self.cluster = manager
            self.cluster.check_ready(
                {r.config["bandwidth"] for r in todo if "bandwidth" in r.config}
            )
        # what the report counts its runs against while the study runs
        write_plan(self.results_dir, self.spec.name, [run.run_id for run in self.plan.runs])
        live = LiveReport(self.results_dir, self.spec.report_every_s, self.say)
        previous_handlers = _stop_signals_raise_interrupt()
        progress = Progress(len(todo), stream=self.err)
        # how this kind's hosts are checked before the first run (never on localhost)
        checks = self.kind.host_checks(
            bool(user_files.user_models(todo) or user_files.user_data(todo))
        )
        hosts_checked = checks is None
        try:
            for index, group in enumerate(groups):
                if index:  # between launches: nothing trains while the report is written
                    block_ended = self.blocked and (
                        group[0].repetition != groups[index - 1][0].repetition
                    )
                    live.maybe_refresh(block_ended)
                left = list(group)
                while left:
                    if self.cluster is not None:
                        # every launch, also `single` (no link setting): it runs on a node
                        self.cluster.ensure(left[0].config.get("bandwidth"))
                    if not hosts_checked:  # once the hosts are there (an emulated one is up)
                        hosts = [name for name, _ in self.plan.target.hosts]
                        preflight.check_hosts(
                            hosts, self.python, self.say,
                            user_files.user_models(todo), user_files.user_data(todo),
                            through_srun=checks == SRUN,
                        )  # fmt: skip
                        hosts_checked = True
                    if len(left) == 1:
                        self._execute_alone(left[0], progress)
                        left = []
                    else:
                        left = self._execute_group(left, progress)
        finally:
            if self.current is not None:
                self.current.stop(self.options.grace_s)
                self.current = None
            if self.cluster is not None:
                self.cluster.close()
            _restore(previous_handlers)
        progress.close(self.recorded)
        live.final()
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
        if self.recorded:
            self.say(self._throughput_line())
        if bad:
            self.say("run again with --retry-failed to retry the failed and timed-out runs")
        return 1 if self.options.strict and (bad or None in statuses) else 0

    def _block_by_bandwidth(self, runs: list[PlannedRun]) -> list[PlannedRun]:
        """On the emulated cluster each bandwidth change re-shapes every link: run each bandwidth as
        one block (blocks in the order they first appear in the shuffled list, runs keep their order
        inside)."""
        if self.plan is None or not self.kind.shapes_links:
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

    def _throughput_line(self) -> str:
        """How much of this sweep's wall time its runs spent training (real seconds)."""
        wall = time.monotonic() - self.started
        trained = sum(records.real_seconds(record, "train_s") for record in self.recorded)
        share = trained / wall if wall > 0 else 0.0
        return (
            f"this sweep: {len(self.recorded)} run(s) in {self.launches} launch(es), trained "
            f"{trained:.1f} s of {wall:.1f} s wall ({100 * share:.1f}% training)"
        )

    def _keep(self, record: dict[str, Any], progress: Progress) -> None:
        """Adds a run's record to the study and says how the run ended."""
        self.store.add(record)
        self.recorded.append(record)
        progress.finish(
            record["run_id"],
            record["status"],
            record["sweep"]["driver_wall_s"],
            _progress_detail(record),
        )

    def _execute_alone(self, run: PlannedRun, progress: Progress) -> None:
        progress.start(f"{run.run_id} ({describe(run.config)})")
        self._keep(self._execute(run, progress), progress)

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
        return record

    def _try(self, run: PlannedRun, attempt: int) -> dict[str, Any]:
        """One try of a run in a fresh run folder; its record, not yet kept."""
        prepared = self.prepare(run)
        self._prepare_folder(prepared, attempt, prepared.command)
        env = self._launch_env(run)
        started_at = now_iso()
        launched_at = time.time()
        self.launches += 1
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
            launch=records.cold_launch(launched_at),
            cluster_link=self.plan.target.bandwidth,
        )
        return record

    def _launch_env(self, run: PlannedRun) -> dict[str, str]:
        env = {**os.environ, **self.spec.env, **RUN_ENV}
        if run.launched:
            env.update(root_mpi_env())
        return env

    # ----------------------------------------------------------------- warm groups

    def _prepare_folder(self, prepared: PreparedRun, attempt: int, command: str) -> None:
        """A fresh run folder: its hostfile (when it has its own), command and attempt."""
        if prepared.run_dir.exists():
            shutil.rmtree(prepared.run_dir)
        prepared.run_dir.mkdir(parents=True)
        if prepared.hostfile and prepared.hostfile.startswith(str(prepared.run_dir)):
            Path(prepared.hostfile).write_text(hostfile_text(prepared.run.layout))
        (prepared.run_dir / "command.txt").write_text(command + "\n")
        (prepared.run_dir / "attempt").write_text(f"{attempt}\n")

    def _execute_group(self, runs: list[PlannedRun], progress: Progress) -> list[PlannedRun]:
        """One launch for these runs (one process layout); returns the runs it did not reach.

        Its first run is tried again, like a cold run, while the launcher cannot start."""
        attempts = {run.run_id: self._attempt(run) for run in runs}
        failures: list[dict[str, Any]] = []
        progress.start(f"{runs[0].run_id} ({describe(runs[0].config)}) [warm group of {len(runs)}]")
        while True:
            ended, retry = self._launch_group(runs, attempts, failures, progress)
            if not retry:
                return runs[ended:]
            pause = self.options.launch_retry_pause_s
            first = runs[0].run_id
            progress.retry(first, attempts[first], f"failed to launch ({retry})", pause)
            time.sleep(pause)
            attempts[first] += 1

    def _launch_group(
        self,
        runs: list[PlannedRun],
        attempts: dict[str, int],
        failures: list[dict[str, Any]],
        progress: Progress,
    ) -> tuple[int, str | None]:
        """(runs ended, None), or (0, the reason) when the launcher could not start and it may
        be tried again (the first run's try is then in `failures`)."""
        assert self.plan is not None
        name = group_id()
        folder = self.groups_dir / name
        folder.mkdir(parents=True)
        first = runs[0]
        hostfile = _hostfile_for(first, folder)
        if hostfile == str(folder / "hostfile.txt"):  # generated for this launch
            Path(hostfile).write_text(hostfile_text(first.layout))
        runs_file = folder / "runs.json"
        program = [self.python, "-m", "archbench.train", RUNS_FILE_FLAG, str(runs_file)]
        forward = [*self.spec.env, *RUN_ENV]
        argv = launch_argv(
            first.config, program, hostfile, first.world_size, self.spec.launcher_args, forward
        )
        env_shown = dict(self.spec.env)
        if first.launched:
            env_shown.update(root_mpi_env())
        command = shell_line(argv, env_shown)
        (folder / "command.txt").write_text(command + "\n")
        members, prepared_by_id = [], {}
        for position, run in enumerate(runs, start=1):
            prepared = self.prepare(run)
            prepared_by_id[run.run_id] = prepared
            shown = f"{command}  # run {position} of {len(runs)}: {shell_line(prepared.argv)}"
            self._prepare_folder(prepared, attempts[run.run_id], shown)
            train_args = prepared_train_args(prepared.argv)
            members.append(
                GroupMember(
                    run.run_id, prepared.run_dir, prepared.record_path, run.timeout_s, train_args
                )
            )
        launched_at = time.time()
        write_runs_file(runs_file, name, launched_at, members)
        self.launches += 1
        launch = GroupLaunch(
            argv,
            members,
            env=self._launch_env(first),
            cwd=os.getcwd(),
            log_path=folder / "log.txt",
            marker=f"{RUNS_FILE_FLAG}\0{runs_file}",
            grace_s=self.options.grace_s,
        )
        self.current = launch
        by_id = {run.run_id: run for run in runs}
        ended = 0
        try:
            for position, member_ended in enumerate(launch.runs(), start=1):
                run = by_id[member_ended.member.run_id]
                prepared = prepared_by_id[run.run_id]
                outcome = member_ended.outcome
                records.write_outcome(
                    prepared.run_dir, outcome, member_ended.started_at, member_ended.finished_at
                )
                record = records.build(
                    run,
                    self.spec.name,
                    outcome,
                    prepared.run_dir,
                    command,
                    hostfile,
                    member_ended.started_at,
                    member_ended.finished_at,
                    attempts[run.run_id],
                    self.plan.target.kind,
                    launch=records.warm_launch(name, position, len(runs)),
                    cluster_link=self.plan.target.bandwidth,
                )
                error = record.get("error") or {}
                if position == 1 and error.get("type") == LAUNCH_FAILED:
                    if len(failures) < self.spec.launch_retries:
                        if self.cluster is not None:
                            self.cluster.require_healthy()
                        failures.append(
                            {"attempt": attempts[run.run_id], "reason": error["reason"]}
                        )
                        return 0, error["reason"]
                record["sweep"]["launch_failures"] = failures if position == 1 else []
                record["sweep"]["warm_group"] = name
                self._keep(record, progress)
                ended += 1
                if ended < len(runs):
                    nxt = runs[ended]
                    progress.start(f"{nxt.run_id} ({describe(nxt.config)}) [warm]")
        finally:
            self.current = None
            launch.stop()  # nothing is left of an ended launch; an interrupted one is torn down
        return ended, None

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
                cluster_link=self.plan.target.bandwidth,
            )
            record["sweep"]["recovered"] = True
            if self.store.add(record):
                count += 1
        return count


def prepared_train_args(argv: list[str]) -> list[str]:
    """The flags of `python -m archbench.train` in a run's cold command."""
    index = argv.index("archbench.train")
    return argv[index + 1 :]


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


def _hostfile_for(run: PlannedRun, folder: Path) -> str | None:
    """The hostfile a launched run's launcher reads: `hostfile.txt` in `folder`, written from the
    run's layout; None for a plain process. A placement's hostfile too: the launcher reads the
    host names the plan checked, never the user's file, which could change after the check."""
    if not run.launched:
        return None
    return str(folder / "hostfile.txt")
