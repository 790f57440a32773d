"""`python -m archbench.train` / `archbench train`: one training run, one run record.

Works unchanged as a plain process, under `mpirun`, and under `horovodrun` (MPI or Gloo). Rank
roles come from the launcher; the chief appends the record to --out, also when the run fails.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
import traceback

from archbench.common.archs import arch as architecture
from archbench.common.errors import Diverged, UsageError
from archbench.common.hosts import hostfile_of
from archbench.record import append_record, build_record, cluster_section, in_virtual_time
from archbench.runtime import mpitransport, scratch, warmgroup
from archbench.runtime.config import TrainConfig, add_train_arguments, config_from_args
from archbench.runtime.emulation import arm_caps, fidelity_probe, virtual
from archbench.runtime.emulation import factor as dilation_factor
from archbench.runtime.environment import (
    environment,
    load_average,
    new_run_id,
    now_iso,
    run_environment,
)
from archbench.runtime.launch import (
    ProcessPlace,
    detect_place,
    launcher_command,
    threads_per_process,
)
from archbench.runtime.localsgd import comm_record
from archbench.runtime.one_line_parser import OneLineArgumentParser
from archbench.runtime.phases import PhaseClock
from archbench.runtime.settings import applies
from archbench.timeline.tracer import for_run as tracer_for_run

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# Exit status of a run that trained but whose record could not be written (a full disk).
RECORD_NOT_WRITTEN = 1
# When the sweep started this run's launcher (epoch seconds): the launch's start-up is measured
# from it.
LAUNCHED_AT_ENV = "ARCHBENCH_LAUNCHED_AT"


def chief_rank(config: TrainConfig) -> int:
    """Rank of the chief worker: the first rank after the parameter servers."""
    return architecture(config.arch).chief_rank(config.num_ps)


def validate_world(config: TrainConfig, place: ProcessPlace) -> None:
    descriptor = architecture(config.arch)
    servers = descriptor.servers(config.num_ps)
    if servers and servers >= place.size:
        raise UsageError(
            f"--num-ps {config.num_ps} needs at least {config.num_ps + 1} processes "
            f"(ranks 0..{config.num_ps - 1} serve, the rest train); this job has {place.size}"
        )
    companions = getattr(config, "companions", 0) or 0
    if not descriptor.multi_process and place.size != 1 + companions:
        with_them = f" and its {companions} companion(s)" if companions else ""
        raise UsageError(
            f"--arch {config.arch} runs as one process{with_them}, {1 + companions} in all; this "
            f"job has {place.size} (use ring, p2p or ps, or --companions {place.size - 1})"
        )


class RunState:
    """What the failure path needs to write a record from any thread, exactly once."""

    def __init__(self, config: TrainConfig, place: ProcessPlace):
        self.config = config
        self.place = place
        self.started_at = now_iso()
        self.start_time = time.time()
        self.env: dict | None = None
        self.load_avg_start: float | None = None  # read when training starts
        self.load_avg_end: float | None = None  # read when training ends
        self.trainer = None
        self.cluster: dict | None = None
        self.model_stats: dict | None = None
        self.lock = threading.Lock()
        self.record_written = False

    @property
    def is_chief(self) -> bool:
        return self.place.rank == chief_rank(self.config)

    def base_cluster(self, hosts: list[str] | None = None, link: str | None = None, **more) -> dict:
        """The record's `cluster`; before the ranks have told their hosts, only this one's."""
        config, place = self.config, self.place
        launcher_argv = launcher_command()
        return cluster_section(
            config.arch,
            place.size,
            config.num_ps,
            hosts or ([place.hostname] * place.size if place.size == 1 else [place.hostname]),
            place.launcher,
            hostfile_of(launcher_argv),
            link,
            launcher_command=" ".join(launcher_argv) if launcher_argv else None,
            # The Slurm job the ranks ran in (srun sets it for every task; null elsewhere).
            slurm_job_id=os.environ.get("SLURM_JOB_ID") or None,
            **more,
        )

    def record_env(self, gpus: list[str] | None = None) -> dict:
        """The record's `env`; a run that fails before training ends reads its end load now."""
        if self.env is None:
            return {}
        end = self.load_avg_end if self.load_avg_end is not None else load_average()
        return run_environment(self.env, self.load_avg_start, end, gpus)

    def write(self, record: dict) -> bool:
        """Appends the record once (all or nothing); False, after saying why in one line, when
        it could not be written."""
        with self.lock:
            if self.record_written or not self.config.out:
                return True
            self.record_written = True  # one try only: a failed write is not retried
            try:
                append_record(self.config.out, record)
            except OSError as exc:
                print(
                    f"archbench train: error: the run record could not be written to "
                    f"{self.config.out} ({exc.strerror or exc}); the file is as it was, "
                    "no record was appended",
                    file=sys.stderr,
                    flush=True,
                )
                return False
            return True

    def failed_record(
        self, status: str, error_type: str, message: str, details: dict | None = None
    ) -> dict:
        cluster = self.cluster or self.base_cluster()
        return build_record(
            run_id=self.config.run_id,
            study=self.config.study,
            status=status,
            started_at=self.started_at,
            finished_at=now_iso(),
            config=self.config.as_record(self.place.size, cluster["num_workers"]),
            cluster=cluster,
            env=self.record_env(),
            model_stats=self.model_stats,
            timing={"wall_s": virtual(time.time() - self.start_time)},
            error={"type": error_type, "message": message, **(details or {})},
            launch=launch_section(None),
        )


class StopSignalWatcher:
    """One thread per process: a stop signal (mpirun tearing the job down) becomes a failed
    record of the run then running (in a warm group, each run in turn).

    The signals are blocked in every other thread, so this works even while the main thread sits
    inside a TensorFlow or MPI call that would never return to run a Python handler.
    """

    def __init__(self) -> None:
        self.state: RunState | None = None
        self._thread: threading.Thread | None = None

    def watch(self, state: RunState) -> None:
        self.state = state
        if self._thread is None:
            signal.pthread_sigmask(signal.SIG_BLOCK, set(STOP_SIGNALS))  # before TF's threads
            self._thread = threading.Thread(target=self._wait, daemon=True, name="stop-signals")
            self._thread.start()

    def _wait(self) -> None:
        received = signal.sigwait(set(STOP_SIGNALS))
        name = signal.Signals(received).name
        # First what takes no time: a launcher that stops a job kills what still runs after its
        # grace period, and on a loaded machine the record below can take longer than that.
        scratch.release()
        state = self.state
        if state is not None and state.is_chief:
            state.write(
                state.failed_record(
                    "failed",
                    "Terminated",
                    f"stopped by {name} (the launcher ended the job: another rank failed or was "
                    "stopped)",
                )
            )
        rank = state.place.rank if state is not None else "?"
        print(f"archbench: rank {rank} stopped by {name}", file=sys.stderr, flush=True)
        os._exit(128 + received)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(prog="archbench train", description=__doc__.splitlines()[0])
    add_train_arguments(parser)
    return parser


def register(subparsers) -> None:
    _block_stop_signals()
    parser = subparsers.add_parser(
        "train",
        help="one training run (same as python -m archbench.train)",
        description=__doc__.splitlines()[0],
    )
    add_train_arguments(parser)
    parser.set_defaults(func=run)


def _configure_tensorflow(config: TrainConfig, place: ProcessPlace):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # deferred: bad flags fail before TensorFlow loads, and it reads the log level on import
    import tensorflow as tf

    threads = threads_per_process(config.threads, place.local_size)
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    return tf


def run(args: argparse.Namespace, watcher: StopSignalWatcher | None = None) -> int:
    """One run; `watcher`: the process's stop-signal watcher when it runs several (warm group)."""
    mpitransport.apply()  # before MPI starts: every run comes here (cold, warm group, CLI)
    scratch.claim()  # before TensorFlow writes its first temporary file
    place = detect_place()
    try:
        config = config_from_args(args)
        validate_world(config, place)
        # deferred: archbench.workloads.data loads numpy; bad flags fail before it
        from archbench.workloads.data import check_available
        from archbench.workloads.model_source import check_model_file
        from archbench.workloads.models import model_source

        check_available(config)
        check_model_file(model_source(config.model))
    except UsageError as exc:
        _say_usage_error(exc, place)
        return UsageError.exit_code
    if config.run_id is None:
        config.run_id = new_run_id()  # each rank makes its own; only the chief's is written

    state = RunState(config, place)
    (watcher or StopSignalWatcher()).watch(state)
    state.env = environment()
    try:
        return _train(config, place, state)
    except UsageError as exc:  # found only once the job was up (e.g. a model that rejects a shape)
        # the chief worker says it: rank 0 may be a parameter server, which builds no model
        if state.is_chief or place.rank == 0:
            for line in str(exc).splitlines():
                print(f"archbench train: error: {line}", file=sys.stderr, flush=True)
        return UsageError.exit_code
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a record
        message = f"{exc}".strip() or type(exc).__name__
        print(
            f"archbench: rank {place.rank} failed: {type(exc).__name__}: {message}",
            file=sys.stderr,
            flush=True,
        )
        if os.environ.get("ARCHBENCH_TRACEBACK"):
            traceback.print_exc()
        if state.is_chief:
            details = {"step": exc.step} if isinstance(exc, Diverged) else None
            state.write(state.failed_record("failed", type(exc).__name__, message[:2000], details))
        if place.size > 1:
            # Leave without MPI_Finalize: the launcher then ends the whole job at once instead
            # of waiting for peers that are blocked on this rank forever.
            sys.stdout.flush()
            sys.stderr.flush()
            scratch.release()
            os._exit(1)
        return 1


def _train(config: TrainConfig, place: ProcessPlace, state: RunState) -> int:
    phases = PhaseClock(state.start_time)
    tf = _configure_tensorflow(config, place)
    # deferred: the training stack (numpy, loop, trainers) loads after TensorFlow is set up, not
    # for --help or bad flags
    from archbench.runtime.loop import quantile, run_training, step_statistics
    from archbench.trainers import make_trainer
    from archbench.workloads.data import load_dataset
    from archbench.workloads.model_source import source_facts
    from archbench.workloads.models import model_source, parameter_stats
    from archbench.workloads.user_data import data_facts

    phases.end("imports")
    data = load_dataset(config)
    phases.end("data")
    trainer = make_trainer(config, place, data)
    state.trainer = trainer
    tracer = tracer_for_run(config, place, data, trainer.num_workers)  # None: no --timeline
    log = (
        (lambda line: print(f"[archbench {config.arch}] {line}", flush=True))
        if trainer.is_chief
        else (lambda line: None)
    )
    trainer.setup()
    if tracer is not None:
        tracer.prepare(trainer)
    state.model_stats = (
        {**parameter_stats(trainer.model), **source_facts(model_source(config.model))}
        if trainer.model is not None
        else None
    )
    phases.end("model")
    hosts = trainer.allgather_object(place.hostname)
    probe = fidelity_probe(hosts) if trainer.is_chief else None
    emulation = probe.state if probe is not None else None
    cluster = state.base_cluster(
        hosts,
        emulation.bandwidth.text if emulation is not None else None,
        dilation=emulation.dilation if emulation is not None else None,
        vcpus_per_node=emulation.vcpus_per_node if emulation is not None else None,
    )
    state.cluster = cluster
    if trainer.is_chief:
        log(
            f"{config.model} on {data.name}: {cluster['num_workers']} worker(s) on "
            f"{', '.join(sorted(set(cluster['hosts'])))}, {state.model_stats['params']:,} parameters, "
            f"launcher {place.launcher}"
        )

    loop_result = None
    phases.end("hosts")
    if trainer.is_worker:
        state.load_avg_start = load_average()
        # The emulation's readings start once every rank's thread caps are armed.
        loop_result = run_training(
            config,
            trainer,
            data,
            log=log,
            on_timed=probe.begin if probe is not None else None,
            tracer=tracer,
        )
        state.load_avg_end = load_average()
        if loop_result.first_step_at:
            warmgroup.started_training(loop_result.first_step_at)
        phases.end_loop(loop_result)
    else:
        arm_caps()  # a server's threads serve the timed steps on virtual cores too
        trainer.serve()
    fidelity = (
        probe.record(loop_result.steps - loop_result.steps_before_window)
        if probe is not None
        else None
    )
    digests = trainer.allgather_object(loop_result.param_digest if loop_result else None)
    compute_per_rank = trainer.allgather_object(
        quantile(loop_result.compute_times, 0.5) if loop_result else None
    )
    dispatch_per_rank = trainer.allgather_object(loop_result.dispatch_s if loop_result else None)
    metered = loop_result.compute_core_shares if loop_result else []
    core_share_per_rank = trainer.allgather_object(
        quantile([share for share in metered if share is not None], 0.5)
    )
    extra = trainer.extra_record()
    timed_median = quantile(loop_result.step_times, 0.5) if loop_result else None
    traced = tracer.finish(trainer, cluster, timed_median) if tracer is not None else None
    trainer.finish()
    if not trainer.is_chief:
        return 0
    phases.end("finish")

    num_workers = cluster["num_workers"]
    global_batch = config.batch_size * num_workers
    steps = step_statistics(loop_result, global_batch, min(config.warmup_steps, loop_result.steps))
    timing = timing_section(
        loop_result,
        steps,
        data.train_size,
        compute_per_rank,
        dispatch_per_rank,
        core_share_per_rank,
        state.start_time,
    )
    comm = {**trainer.comm_stats(loop_result.steps), **extra}
    if applies("sync_every", config.arch):
        comm.update(comm_record(trainer.schedule, trainer.steps_by_kind, comm.get("bytes_total")))
    if applies("data_partition", config.arch):
        comm["partition"] = _partition_record(config, data, num_workers, comm)
    record_config = config.as_record(place.size, num_workers)
    record_config["controller"] = extra.get(
        "controller", architecture(config.arch).default_controller
    )
    record_config["steps_run"] = loop_result.steps
    record_config["dataset_source"] = data.source
    record_config.update(data_facts(config.dataset))
    result = result_section(loop_result, digests, config.target_accuracy)
    dilation = dilation_factor()
    if fidelity is not None and dilation != 1:
        # Every duration below is virtual (real / D); the real ones stay here.
        fidelity["real"] = {"timing": timing, "time_to_target_s": result["time_to_target_s"]}
    record = build_record(
        run_id=config.run_id,
        study=config.study,
        status="ok",
        started_at=state.started_at,
        finished_at=now_iso(),
        config=record_config,
        cluster=cluster,
        env=state.record_env(gpus=_gpus(tf)),
        model_stats=state.model_stats,
        timing=in_virtual_time(timing, dilation),
        comm=in_virtual_time(comm, dilation),
        result=in_virtual_time(result, dilation),
        fidelity=fidelity,
        # real seconds: start-up is uncapped
        launch={**launch_section(loop_result.first_step_at), "phases_s": phases.seconds},
        **({"timeline": traced} if traced is not None else {}),
    )
    if not state.write(record):
        return RECORD_NOT_WRITTEN
    accuracy = loop_result.test_accuracy
    shown = record["timing"]
    in_virtual = f" in virtual time (dilation {dilation:g})" if dilation != 1 else ""
    log(
        f"done: {shown['samples_per_s'] or 0:.0f} samples/s (median step "
        f"{1000 * (shown['step_s_median'] or 0):.1f} ms){in_virtual}, "
        + (f"test accuracy {accuracy:.4f}, " if accuracy is not None else "")
        + f"param norm {loop_result.param_norm:.6f}"
        + (f", record appended to {config.out}" if config.out else "")
    )
    return 0


def timing_section(
    loop_result,
    steps: dict,
    train_size: int,
    compute_per_rank: list,
    dispatch_per_rank: list,
    core_share_per_rank: list,
    started: float,
) -> dict:
    """The record's `timing` of an ok run, in real seconds (archbench.record.keys declares each
    key); `steps`: archbench.runtime.loop.step_statistics of the loop."""
    return {
        "wall_s": time.time() - started,
        "train_s": loop_result.train_s,
        **steps,
        # Equal work: the time one epoch of this data set takes at the median step, so runs
        # with different worker counts (and sample counts) compare on the same amount of data.
        "samples_per_epoch": train_size,
        "epoch_s": train_size / steps["samples_per_s"] if steps["samples_per_s"] else None,
        # Each worker's compute (forward + backward) median, in rank order; null for servers.
        "compute_s_median_per_rank": compute_per_rank,
        # Each worker's engine call with nothing to compute (`Trainer.dispatch_pass`): the part
        # of its compute that is not the model's work; null for servers.
        "dispatch_s_per_rank": dispatch_per_rank,
        # Each worker's virtual cores used while computing (its own threads' CPU seconds over the
        # compute windows' virtual seconds, median over probes; archbench.cluster.cpumeter): with
        # the compute median, what a pass cost in CPU and how much of its core it got. Not a
        # duration: dilation leaves it as it is.
        "compute_core_share_per_rank": core_share_per_rank,
        # before the first step: imports, data, model, connections (warm-up steps: warmup_s)
        "startup_s": loop_result.first_step_at - started if loop_result.first_step_at else None,
        "eval_s": loop_result.eval_s,
        "epochs": loop_result.evaluations,
    }


def result_section(loop_result, digests: list, target_accuracy: float | None) -> dict:
    """The record's `result` of an ok run."""
    return {
        "final_loss": loop_result.final_loss,
        "last_train_loss": loop_result.last_loss,
        "test_accuracy": loop_result.test_accuracy,
        "test_rmse": loop_result.test_rmse,
        "param_norm": loop_result.param_norm,
        "param_digest_per_rank": digests,
        "target_accuracy": target_accuracy,
        "time_to_target_s": loop_result.time_to_target_s,
    }


def _partition_record(config: TrainConfig, data, num_workers: int, comm: dict) -> dict:
    """`comm.partition`: the data partition (method, time, whether the oracle applies) and the
    servers' row placement where the trainer made one (`ps`)."""
    # deferred: archbench.runtime.partition loads numpy
    from archbench.runtime.partition import data_partition

    cut = data_partition(config.data_partition, data, num_workers, config.seed)
    return {**cut.record(data, config.batch_size), **comm.pop("param_partition", {})}


def run_group(path: str) -> int:
    """Runs every run of a warm group (archbench.runtime.warmgroup) in turn; the exit status of the first
    that failed, else 0."""
    try:
        group = warmgroup.read_runs_file(path)
    except UsageError as exc:
        say_usage_error_once(exc)
        return UsageError.exit_code
    warmgroup.enter(group)
    watcher = StopSignalWatcher()
    parser = build_parser()
    for position, entry in enumerate(group.runs, start=1):
        group.position = position
        args = parser.parse_args(entry.argv)  # a bad list exits 2, as a cold run does
        status = run(args, watcher)
        if status != 0:
            return status
        if position < len(group.runs):
            warmgroup.between_runs(group)
    warmgroup.finish_group()
    return 0


def launch_section(first_step_at: float | None) -> dict:
    """The record's `launch`: whether the run shared a launch (a warm group), its position there,
    and the start-up of its launch (from the launcher's start to the launch's first step)."""
    group = warmgroup.current()
    if group is not None:
        return group.launch_record()
    launched_at = os.environ.get(LAUNCHED_AT_ENV)
    try:
        started = float(launched_at) if launched_at else None
    except ValueError:
        started = None
    if started is not None and not 0 < started < 1e11:  # NaN, inf: not a time
        started = None
    return warmgroup.cold_launch_record(started, first_step_at)


def say_usage_error_once(exc: UsageError) -> None:
    _say_usage_error(exc, detect_place())


def _say_usage_error(exc: UsageError, place: ProcessPlace) -> None:
    """Rank 0 alone says it (every rank finds the same problem): one line per problem."""
    if place.rank == 0:
        for line in str(exc).splitlines():
            print(f"archbench train: error: {line}", file=sys.stderr, flush=True)


def _gpus(tf) -> list[str]:
    return [device.name for device in tf.config.list_physical_devices("GPU")]


def _block_stop_signals() -> None:
    """Blocks the stop signals before the argument parser imports numpy: OpenBLAS starts its
    thread pool on import, and a thread that leaves them unblocked would take SIGTERM and die of
    it instead of letting the watcher thread write the failed record."""
    signal.pthread_sigmask(signal.SIG_BLOCK, set(STOP_SIGNALS))


def main(argv: list[str] | None = None) -> int:
    _block_stop_signals()
    words = sys.argv[1:] if argv is None else argv
    if words[:1] == [warmgroup.RUNS_FILE_FLAG]:  # a warm group: several runs, one launch
        if len(words) != 2:
            print(
                f"archbench train: error: {warmgroup.RUNS_FILE_FLAG} FILE takes no other argument",
                file=sys.stderr,
            )
            return UsageError.exit_code
        return run_group(words[1])
    args = build_parser().parse_args(words)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
