"""The rank side of `archbench microbench`: started by mpirun, measures, and rank 0 writes a JSON
list of results to --result-file.

    python -m archbench.perfmodel.measure.mb_ranks mpi      --sizes 8,1024 --result-file R   (2+ ranks)
    python -m archbench.perfmodel.measure.mb_ranks horovod  --sizes 8,1024 --result-file R   (2+ ranks)
    python -m archbench.perfmodel.measure.mb_ranks ps       --sizes 8,1024 --hosts h0,h1 --result-file R
    python -m archbench.perfmodel.measure.mb_ranks compute  --models mlp --batch-sizes 32,64 --result-file R

Every timing is a median over iterations after warm-up; the iteration count adapts to the size
so each size takes about --seconds-per-size. On a time-dilated node each rank arms its thread
caps before its first timed call (as a training rank does before its first timed step) and
every timing is virtual: real / D (`archbench.runtime.emulation`); each row says its D.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from itertools import islice

from archbench.perfmodel.model.formulas import allreduce_bus_bandwidth
from archbench.runtime import mpitransport, scratch
from archbench.runtime.config import TrainConfig
from archbench.runtime.emulation import arm_caps, factor
from archbench.runtime.launch import compute_window_s, detect_place, threads_per_process
from archbench.runtime.settings import SETTINGS

WARMUP = 2
TRIALS = 3  # calls timed together to choose the iteration count
# A median of 3 follows one slow call of the 3: the two-rank allreduce of 4 MiB once measured
# 52.9 ms where a repeat gave 36.4, and the slope between the two largest sizes came out 1.62
# times the link's instead of about 1.0. A median of 7 outlasts three slow calls.
MIN_ITERATIONS = 7
MAX_ITERATIONS = 1000


def _iterations(trial_s: float, budget_s: float) -> int:
    if trial_s <= 0:
        return MAX_ITERATIONS
    return int(min(max(budget_s / trial_s, MIN_ITERATIONS), MAX_ITERATIONS))


def _write(path: str, rows: list[dict]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(rows, handle)
    os.replace(tmp, path)


def on_virtual_cores() -> float:
    """Arms this process's thread caps (a no-op off a dilated node) and returns its dilation
    factor D: every timing of the rank is divided by it."""

    arm_caps()
    return factor()


def _timed(
    fn: Callable[[], None], comm, budget_s: float, before: Callable[[], None] | None = None
) -> tuple[list[float], int]:
    """Times `fn` (which all ranks call together) in virtual seconds; the count is decided by
    rank 0 (the budget per size is real time). `before` runs untimed ahead of every call."""

    def untimed() -> None:
        if before is not None:
            before()

    for _ in range(WARMUP):
        untimed()
        fn()
    start = time.perf_counter()
    for _ in range(TRIALS):
        untimed()
        fn()
    trial = (time.perf_counter() - start) / TRIALS
    iterations = comm.bcast(_iterations(trial, budget_s), root=0)
    times = []
    for _ in range(iterations):
        untimed()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    dilation = factor()
    return [t / dilation for t in times], iterations


# --------------------------------------------------------------------------- MPI


def bench_mpi(sizes: list[int], budget_s: float, allreduce: bool = True) -> list[dict]:
    """Ping-pong between ranks 0 and 1 (alpha, beta) and MPI_Allreduce over all ranks (unless
    `allreduce` is False)."""
    # deferred: each bench loads only its own stack; importing mpi4py.MPI initialises MPI
    import numpy as np
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    on_virtual_cores()
    rows: list[dict] = []
    for nbytes in sizes:
        buffer = np.zeros(max(nbytes, 1), dtype=np.uint8)

        def ping_pong(buffer=buffer) -> None:
            if rank == 0:
                comm.Send(buffer, dest=1, tag=7)
                comm.Recv(buffer, source=1, tag=7)
            elif rank == 1:
                comm.Recv(buffer, source=0, tag=7)
                comm.Send(buffer, dest=0, tag=7)

        # Only ranks 0 and 1 exchange; the others still take part in the bcast of the count.
        times, iterations = _timed(ping_pong, comm, budget_s)
        if rank == 0:
            one_way = statistics.median(times) / 2
            rows.append(
                {
                    "bench": "pt2pt",
                    "size_bytes": nbytes,
                    "ranks": 2,
                    "iterations": iterations,
                    "one_way_s": one_way,
                    "bandwidth_Bps": nbytes / one_way,
                    "one_way_s_p10": float(np.quantile(times, 0.1)) / 2,
                    "one_way_s_p90": float(np.quantile(times, 0.9)) / 2,
                }
            )
        comm.Barrier()
    for nbytes in sizes if allreduce else []:
        count = max(nbytes // 4, 1)
        send = np.ones(count, dtype=np.float32)
        recv = np.empty_like(send)

        def allreduce(send=send, recv=recv) -> None:
            comm.Allreduce(send, recv, op=MPI.SUM)

        times, iterations = _timed(allreduce, comm, budget_s)
        slowest = comm.reduce(statistics.median(times), op=MPI.MAX, root=0)
        if rank == 0:
            rows.append(_allreduce_row("allreduce_mpi", count * 4, size, iterations, slowest))
    return rows


def _allreduce_row(bench: str, nbytes: int, ranks: int, iterations: int, seconds: float) -> dict:
    algbw = nbytes / seconds
    return {
        "bench": bench,
        "size_bytes": nbytes,
        "ranks": ranks,
        "iterations": iterations,
        "time_s": seconds,
        "algbw_Bps": algbw,
        "busbw_Bps": allreduce_bus_bandwidth(algbw, ranks),
    }


# --------------------------------------------------------------------------- Horovod


def bench_horovod(sizes: list[int], budget_s: float, algorithm: str = "ring") -> list[dict]:
    """hvd.allreduce of one float32 tensor per size over all ranks (Horovod's own controller),
    set up as the ring trainer sets it up: the MPI allreduce algorithm of the study's runs
    (`--allreduce-algorithm`), the default fusion threshold and cycle time (a virtual duration:
    D times longer in real time).

    Each call is made at a random point of Horovod's cycle, as a training step's allreduce is
    (it is submitted when the backward pass ends, wherever the background loop then is): called
    back to back, a call starts just after the previous one ended and so always at the same
    point of the cycle, and its time is a whole number of cycles that flips between one and two
    from one calibration to the next (the fixed cost of a 4-host call measured 1.7 and 2.3 ms).
    Every rank waits the same seeded fraction of a cycle, untimed, before each call: ranks
    leave an allreduce together and start the next together, as training ranks do."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # deferred: each bench loads only its own stack (the ring trainer's module loads numpy)
    from archbench.trainers.ring import allreduce_algorithm_run, mpi_allreduce_environment

    os.environ["HOROVOD_FUSION_THRESHOLD"] = str(
        int(SETTINGS["fusion_threshold_mb"].default * 1024 * 1024)
    )
    cycle_real_ms = SETTINGS["cycle_time_ms"].default * factor()
    os.environ["HOROVOD_CYCLE_TIME"] = str(cycle_real_ms)
    os.environ.update(mpi_allreduce_environment(algorithm))
    # deferred: Horovod reads the environment set above; TensorFlow and mpi4py load with it
    import horovod.tensorflow as hvd
    import tensorflow as tf
    from mpi4py import MPI

    hvd.init()
    ran = allreduce_algorithm_run("mpi" if hvd.mpi_enabled() else "gloo")
    on_virtual_cores()
    comm = MPI.COMM_WORLD
    rows: list[dict] = []
    phases = random.Random(CYCLE_PHASE_SEED)  # the same fractions of a cycle on every rank
    for nbytes in sizes:
        count = max(nbytes // 4, 1)
        tensor = tf.ones([count], dtype=tf.float32)

        def allreduce(tensor=tensor, name=f"mb_{count}") -> None:
            hvd.allreduce(tensor, op=hvd.Sum, name=name).numpy()

        times, iterations = _timed(
            allreduce, comm, budget_s, partial(_sleep, phases, cycle_real_ms / 1000)
        )
        slowest = comm.reduce(statistics.median(times), op=MPI.MAX, root=0)
        if hvd.rank() == 0:
            row = _allreduce_row("allreduce_horovod", count * 4, hvd.size(), iterations, slowest)
            rows.append({**row, "algorithm": ran, "setting": algorithm})
    hvd.shutdown()
    return rows


CYCLE_PHASE_SEED = 7


def _sleep(phases: random.Random, cycle_s: float) -> None:
    """Waits a random fraction of one cycle (real seconds)."""
    time.sleep(phases.random() * cycle_s)


# --------------------------------------------------------------------------- TensorFlow PS


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


def _idle_until_released(comm) -> None:
    """Wait for rank 0's message without spinning (MPI waits busy-poll a core)."""
    request = comm.irecv(source=0, tag=99)
    while True:
        done, _ = request.test()
        if done:
            return
        time.sleep(0.05)


# Tensors per request-ladder step: each variable of a pushed or pulled set is its own RecvTensor
# call, so the slope of time over the count is the cost of one request.
REQUEST_COUNTS = (1, 8, 32, 96)
REQUEST_FLOATS = 4


def bench_ps(sizes: list[int], hosts: list[str], budget_s: float) -> list[dict]:
    """A TensorFlow gRPC parameter server as the PS trainer uses it, timed from a worker.

    Rank 1 runs the server (job ps); rank 0 is a worker of the same cluster. For each size:
    push (a tensor fed on /job:worker assigned to a variable on /job:ps: the worker-to-PS
    RecvTensor path of training), pull (the variable read back into a reduction on the worker),
    and the server's update of a shard of that size from a gradient already on the server (one
    ConditionalAccumulator apply, take and Keras momentum step: the synchronous trainer's ops;
    `ps_accumulate` is the apply alone). Then, per count n of REQUEST_COUNTS, one push and one
    pull of n tiny variables: 2n tensor requests (`ps_requests`).
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # deferred: each bench loads only its own stack (TensorFlow, mpi4py, the PS graph)
    import numpy as np
    import tensorflow as tf
    from mpi4py import MPI

    from archbench.ps.graph import _accumulator, _apply_momentum

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    ports = comm.allgather(_free_port())
    cluster = tf.train.ClusterSpec(
        {"worker": [f"{hosts[0]}:{ports[0]}"], "ps": [f"{hosts[1]}:{ports[1]}"]}
    )
    if rank == 1:
        server = tf.distribute.Server(cluster, job_name="ps", task_index=0, start=True)
        on_virtual_cores()  # the server's threads answer on virtual cores, as in training
        comm.send("up", dest=0, tag=98)
        _idle_until_released(comm)
        del server
        return []
    if rank != 0:
        return []
    comm.recv(source=1, tag=98)
    tf.compat.v1.disable_eager_execution()
    server = tf.distribute.Server(cluster, job_name="worker", task_index=0, start=True)
    rows: list[dict] = []
    graph = tf.Graph()
    ps_device, worker_device = "/job:ps/task:0", "/job:worker/task:0"
    with graph.as_default():
        ops = []
        for index, nbytes in enumerate(sizes):
            count = max(nbytes // 4, 1)
            with tf.device(ps_device):
                variable = tf.compat.v1.get_variable(
                    f"v{count}", [count], tf.float32, tf.compat.v1.zeros_initializer()
                )
                slot = tf.compat.v1.get_variable(
                    f"m{count}", [count], tf.float32, tf.compat.v1.zeros_initializer()
                )
                gradient = tf.compat.v1.get_variable(
                    f"g{count}", [count], tf.float32, tf.compat.v1.ones_initializer()
                )
                accumulator = _accumulator(tf, tf.float32, [count], index, 0, sparse=False)
                step = tf.compat.v1.placeholder(tf.int64, [])
                accumulate = accumulator.apply_grad(gradient.read_value(), local_step=step)
                with tf.control_dependencies([accumulate]):
                    average = accumulator.take_grad(1)
                update = _apply_momentum(tf, variable, slot, average, 0.01, 0.9)
            with tf.device(worker_device):
                feed = tf.compat.v1.placeholder(tf.float32, [count])
                local = tf.identity(feed)
            with tf.device(ps_device):
                push = tf.compat.v1.assign(variable, local).op
            with tf.device(worker_device):
                pull = tf.reduce_sum(tf.identity(variable))
            ops.append((count, feed, push, pull, step, accumulate, update))
        request_ops = []
        for n in REQUEST_COUNTS:
            with tf.device(ps_device):
                tiny = [
                    tf.compat.v1.get_variable(
                        f"r{n}_{i}", [REQUEST_FLOATS], tf.float32, tf.compat.v1.zeros_initializer()
                    )
                    for i in range(n)
                ]
            with tf.device(worker_device):
                feeds = [tf.compat.v1.placeholder(tf.float32, [REQUEST_FLOATS]) for _ in tiny]
                sent = [tf.identity(f) for f in feeds]
            with tf.device(ps_device):
                pushed = tf.group(*[tf.compat.v1.assign(v, x).op for v, x in zip(tiny, sent)])
            with tf.device(worker_device), tf.control_dependencies([pushed]):
                pulled = tf.add_n([tf.reduce_sum(tf.identity(v)) for v in tiny])
            request_ops.append((n, feeds, pulled))
        init = tf.compat.v1.global_variables_initializer()
    session = tf.compat.v1.Session(server.target, graph=graph)
    session.run(init)
    on_virtual_cores()

    class _Solo:  # _timed's bcast for a one-rank measurement
        @staticmethod
        def bcast(value, root=0):
            return value

    def row(bench: str, size: int, times: list[float], iterations: int, **more) -> dict:
        seconds = statistics.median(times)
        return {
            "bench": bench, "size_bytes": size, "ranks": 2, "iterations": iterations,
            "time_s": seconds, "bandwidth_Bps": size / seconds, **more,
        }  # fmt: skip

    for count, feed, push, pull, step, accumulate, update in ops:
        data = np.ones(count, dtype=np.float32)
        local_step = iter(range(1, 1 << 62))
        for bench, fn in (
            ("ps_push", lambda f=feed, p=push, d=data: session.run(p, {f: d})),
            ("ps_pull", lambda q=pull: session.run(q)),
            ("ps_accumulate", lambda a=accumulate, s=step: session.run(a, {s: 0})),
            (
                "ps_update",
                lambda u=update, s=step, n=local_step: session.run(u, {s: next(n)}),
            ),
        ):
            times, iterations = _timed(fn, _Solo, budget_s)
            rows.append(row(bench, count * 4, times, iterations))
    for n, feeds, pulled in request_ops:
        values = {f: np.ones(REQUEST_FLOATS, dtype=np.float32) for f in feeds}
        times, iterations = _timed(lambda q=pulled, v=values: session.run(q, v), _Solo, budget_s)
        rows.append(row("ps_requests", n * REQUEST_FLOATS * 4, times, iterations, requests=2 * n))
    session.close()
    comm.send("done", dest=1, tag=99)
    return rows


# --------------------------------------------------------------------------- compute


def bench_compute(
    models: list[str],
    batch_sizes: list[int],
    dataset: str,
    steps: int,
    seed: int,
    threads: int = 0,
    data_settings: dict | None = None,
) -> list[dict]:
    """Forward+backward (and update) time of each model per batch size, measured by the same
    probe the training loop uses (SingleTrainer.probe_step).

    Started as P ranks on one host, all P measure at once (each with the threads a rank of
    its own host would get): rank 0 reports the time under P-fold sharing of the cores.

    Each timing repeats its pass over the training loop's compute window (ten CFS periods
    on a capped node, one pass elsewhere), as the loop's probes do: under a cap one pass of
    a millisecond runs at full speed or stalls for most of a period depending on where in the
    period it starts, so single passes give a median of whichever happened more often.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # deferred: each bench loads only its own stack (TensorFlow, the data, the trainer and
    # the loop's probe windows)
    import tensorflow as tf

    from archbench.runtime.loop import repeated_pass, steady_compute
    from archbench.trainers.single import SingleTrainer
    from archbench.workloads.data import BatchPlan, load_dataset, train_batches

    place = detect_place()
    comm = None
    if place.size > 1:
        # deferred: importing mpi4py.MPI initialises MPI, which one process does not need
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
    # 0: what a rank alone on its host gets (archbench.train's default)
    threads = threads_per_process(threads, 1)
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    rows: list[dict] = []
    data = None
    for model in models:
        for batch in batch_sizes:
            config = TrainConfig(
                arch="single",
                model=model,
                dataset=dataset,
                batch_size=batch,
                steps=steps + WARMUP,
                seed=seed,
                **(data_settings or {}),
            )
            if data is None:
                data = load_dataset(config)
            trainer = SingleTrainer(SingleTrainer.settings_from(config), place, data)
            trainer.setup()
            dilation = on_virtual_cores()
            window_s = compute_window_s(None)  # after the caps are armed: their period
            if comm is not None:
                comm.Barrier()  # every sharing process measures at the same time
            plan = BatchPlan(data.train_size, batch, 1, seed)
            compute, apply, fused, passes = [], [], [], []
            for index, (x, y) in enumerate(
                islice(train_batches(data, plan, 0, 0), 2 * (steps + WARMUP))
            ):
                if index % 2 == 0:
                    _loss, compute_s, apply_s = trainer.probe_step(x, y)
                    if index >= 2 * WARMUP:
                        mean_s, count = steady_compute(trainer, x, y, compute_s, window_s)
                        compute.append(mean_s)
                        passes.append(count)
                        apply.append(apply_s)
                else:
                    start = time.perf_counter()
                    trainer.train_step(x, y)
                    first_s = time.perf_counter() - start
                    if index >= 2 * WARMUP:
                        fused.append(
                            repeated_pass(partial(trainer.train_step, x, y), first_s, window_s)[0]
                        )
            rows.append(
                {
                    "bench": "compute",
                    "model": model,
                    "batch_size": batch,
                    "dataset": dataset,
                    "steps": len(compute),
                    "threads": threads,
                    "sharing": place.size,
                    "compute_s_median": statistics.median(compute) / dilation,
                    # one pass's apply, unwindowed (a throttled period shows in it whole):
                    # the calibration's update is the windowed step less the compute
                    "apply_s_median": statistics.median(apply) / dilation,
                    "step_s_median": statistics.median(fused) / dilation,
                    # what each timing averaged over (virtual seconds; 0: one pass)
                    "compute_window_s": window_s / dilation,
                    "compute_passes_median": statistics.median(passes),
                }
            )
    return rows


# --------------------------------------------------------------------------- entry point


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mb_ranks")
    parser.add_argument("bench", choices=("mpi", "horovod", "ps", "compute"))
    parser.add_argument("--sizes", type=_ints, default=[])
    parser.add_argument("--hosts", default="localhost,localhost")
    parser.add_argument("--models", default="mlp")
    parser.add_argument("--batch-sizes", type=_ints, default=[32])
    parser.add_argument("--dataset", default="fashion_mnist")
    # a user's data: the settings that shape its samples (a JSON object of setting -> value)
    parser.add_argument("--data-settings", type=json.loads, default=None)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--seconds-per-size", type=float, default=0.3)
    parser.add_argument("--allreduce-algorithm", default="ring")
    parser.add_argument("--no-allreduce", action="store_true", help="mpi: the ping-pong only")
    parser.add_argument("--result-file", required=True)
    args = parser.parse_args(argv)
    mpitransport.apply()  # the transport the runs it prices use, before MPI starts
    scratch.claim()  # TensorFlow's temporary files, removed on the os._exit below too
    if args.bench == "compute":
        rows = bench_compute(
            args.models.split(","), args.batch_sizes, args.dataset, args.steps, 1, args.threads,
            args.data_settings,
        )  # fmt: skip

        if detect_place().rank == 0:
            _write(args.result_file, [{**row, "dilation": factor()} for row in rows])
        return 0
    # mpi4py initialises MPI on import: the Horovod bench sets the allreduce algorithm first
    if args.bench == "mpi":
        rows = bench_mpi(args.sizes, args.seconds_per_size, not args.no_allreduce)
    elif args.bench == "horovod":
        rows = bench_horovod(args.sizes, args.seconds_per_size, args.allreduce_algorithm)
    else:
        rows = bench_ps(args.sizes, args.hosts.split(","), args.seconds_per_size)
    # deferred: importing mpi4py.MPI initialises MPI, after the bench above set what it reads
    from mpi4py import MPI

    if MPI.COMM_WORLD.Get_rank() == 0:
        _write(args.result_file, [{**row, "dilation": factor()} for row in rows])
    sys.stdout.flush()
    MPI.COMM_WORLD.Barrier() if args.bench != "ps" else None
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # TensorFlow's gRPC server threads can keep a finished process alive; leave MPI cleanly
    # and exit at once.
    if "mpi4py.MPI" in sys.modules:
        sys.modules["mpi4py.MPI"].Finalize()
    scratch.release()
    os._exit(code)
