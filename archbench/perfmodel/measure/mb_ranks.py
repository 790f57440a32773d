"""The rank side of `archbench microbench`: started by mpirun, measures, and rank 0 writes a JSON
list of results to --result-file.

    python -m archbench.perfmodel.measure.mb_ranks mpi      --sizes 8,1024 --result-file R   (2+ ranks)
    python -m archbench.perfmodel.measure.mb_ranks horovod  --sizes 8,1024 --result-file R   (2+ ranks)
    python -m archbench.perfmodel.measure.mb_ranks ps       --sizes 8,1024 --hosts h0,h1 --result-file R
    python -m archbench.perfmodel.measure.mb_ranks compute  --models mlp --batch-sizes 32,64 --result-file R

Every timing is a median over iterations after warm-up; the iteration count adapts to the size
so each size takes about --seconds-per-size.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time
from collections.abc import Callable

WARMUP = 2
TRIALS = 3  # calls timed together to choose the iteration count
MIN_ITERATIONS = 3
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


def _timed(fn: Callable[[], None], comm, budget_s: float) -> tuple[list[float], int]:
    """Times `fn` (which all ranks call together); the count is decided by rank 0."""
    for _ in range(WARMUP):
        fn()
    start = time.perf_counter()
    for _ in range(TRIALS):
        fn()
    trial = (time.perf_counter() - start) / TRIALS
    iterations = comm.bcast(_iterations(trial, budget_s), root=0)
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times, iterations


# --------------------------------------------------------------------------- MPI


def bench_mpi(sizes: list[int], budget_s: float) -> list[dict]:
    """Ping-pong between ranks 0 and 1 (alpha, beta) and MPI_Allreduce over all ranks."""
    import numpy as np
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
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
    for nbytes in sizes:
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
    from archbench.perfmodel.model.formulas import allreduce_bus_bandwidth

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


def bench_horovod(sizes: list[int], budget_s: float) -> list[dict]:
    """hvd.allreduce of one float32 tensor per size over all ranks (Horovod's own controller)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import horovod.tensorflow as hvd
    import tensorflow as tf
    from mpi4py import MPI

    hvd.init()
    comm = MPI.COMM_WORLD
    rows: list[dict] = []
    for nbytes in sizes:
        count = max(nbytes // 4, 1)
        tensor = tf.ones([count], dtype=tf.float32)

        def allreduce(tensor=tensor, name=f"mb_{count}") -> None:
            hvd.allreduce(tensor, op=hvd.Sum, name=name).numpy()

        times, iterations = _timed(allreduce, comm, budget_s)
        slowest = comm.reduce(statistics.median(times), op=MPI.MAX, root=0)
        if hvd.rank() == 0:
            rows.append(
                _allreduce_row("allreduce_horovod", count * 4, hvd.size(), iterations, slowest)
            )
    hvd.shutdown()
    return rows


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


def bench_ps(sizes: list[int], hosts: list[str], budget_s: float) -> list[dict]:
    """Push (assign) and pull (read) of one variable held by a TensorFlow gRPC server.

    Rank 1 runs the server (job ps); rank 0 is a worker of the same cluster whose graph feeds a
    tensor on /job:worker and assigns it to a variable on /job:ps (the worker-to-PS RecvTensor
    path that training uses), then reads it back into a reduction on /job:worker.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    ports = comm.allgather(_free_port())
    cluster = tf.train.ClusterSpec(
        {"worker": [f"{hosts[0]}:{ports[0]}"], "ps": [f"{hosts[1]}:{ports[1]}"]}
    )
    if rank == 1:
        server = tf.distribute.Server(cluster, job_name="ps", task_index=0, start=True)
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
    with graph.as_default():
        ops = []
        for nbytes in sizes:
            count = max(nbytes // 4, 1)
            with tf.device("/job:ps/task:0"):
                variable = tf.compat.v1.get_variable(
                    f"v{count}", [count], tf.float32, tf.compat.v1.zeros_initializer()
                )
            with tf.device("/job:worker/task:0"):
                feed = tf.compat.v1.placeholder(tf.float32, [count])
                local = tf.identity(feed)
            with tf.device("/job:ps/task:0"):
                push = tf.compat.v1.assign(variable, local).op
            with tf.device("/job:worker/task:0"):
                pull = tf.reduce_sum(tf.identity(variable))
            ops.append((count, feed, push, pull))
        init = tf.compat.v1.global_variables_initializer()
    session = tf.compat.v1.Session(server.target, graph=graph)
    session.run(init)

    class _Solo:  # _timed's bcast for a one-rank measurement
        @staticmethod
        def bcast(value, root=0):
            return value

    for count, feed, push, pull in ops:
        data = np.ones(count, dtype=np.float32)
        for bench, fn in (
            ("ps_push", lambda f=feed, p=push, d=data: session.run(p, {f: d})),
            ("ps_pull", lambda q=pull: session.run(q)),
        ):
            times, iterations = _timed(fn, _Solo, budget_s)
            seconds = statistics.median(times)
            rows.append(
                {
                    "bench": bench,
                    "size_bytes": count * 4,
                    "ranks": 2,
                    "iterations": iterations,
                    "time_s": seconds,
                    "bandwidth_Bps": count * 4 / seconds,
                }
            )
    session.close()
    comm.send("done", dest=1, tag=99)
    return rows


# --------------------------------------------------------------------------- compute


def bench_compute(
    models: list[str], batch_sizes: list[int], dataset: str, steps: int, seed: int, threads: int = 0
) -> list[dict]:
    """Forward+backward (and update) time of each model per batch size, measured by the same
    probe the training loop uses (SingleTrainer.probe_step).

    Started as P ranks on one host, all P measure at once (each with the threads a rank of
    its own host would get): rank 0 reports the time under P-fold sharing of the cores.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    from archbench.config import TrainConfig
    from archbench.data import BatchPlan, load_dataset, train_batches
    from archbench.launch import detect_place, threads_per_process
    from archbench.trainers.single import SingleTrainer

    place = detect_place()
    comm = None
    if place.size > 1:
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
            )
            if data is None:
                data = load_dataset(config)
            trainer = SingleTrainer(config, place, data)
            trainer.setup()
            if comm is not None:
                comm.Barrier()  # every sharing process measures at the same time
            plan = BatchPlan(data.train_size, batch, 1, seed)
            compute, apply, fused = [], [], []
            for index, (x, y) in enumerate(
                train_batches(data, plan, 0, 0).take(2 * (steps + WARMUP))
            ):
                if index % 2 == 0:
                    _loss, compute_s, apply_s = trainer.probe_step(x, y)
                    if index >= 2 * WARMUP:
                        compute.append(compute_s)
                        apply.append(apply_s)
                else:
                    start = time.perf_counter()
                    trainer.train_step(x, y)
                    if index >= 2 * WARMUP:
                        fused.append(time.perf_counter() - start)
            rows.append(
                {
                    "bench": "compute",
                    "model": model,
                    "batch_size": batch,
                    "dataset": dataset,
                    "steps": len(compute),
                    "threads": threads,
                    "sharing": place.size,
                    "compute_s_median": statistics.median(compute),
                    "apply_s_median": statistics.median(apply),
                    "step_s_median": statistics.median(fused),
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
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--seconds-per-size", type=float, default=0.3)
    parser.add_argument("--result-file", required=True)
    args = parser.parse_args(argv)
    if args.bench == "compute":
        rows = bench_compute(
            args.models.split(","), args.batch_sizes, args.dataset, args.steps, 1, args.threads
        )
        from archbench.launch import detect_place

        if detect_place().rank == 0:
            _write(args.result_file, rows)
        return 0
    from mpi4py import MPI

    rank = MPI.COMM_WORLD.Get_rank()
    if args.bench == "mpi":
        rows = bench_mpi(args.sizes, args.seconds_per_size)
    elif args.bench == "horovod":
        rows = bench_horovod(args.sizes, args.seconds_per_size)
    else:
        rows = bench_ps(args.sizes, args.hosts.split(","), args.seconds_per_size)
    if rank == 0:
        _write(args.result_file, rows)
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
    os._exit(code)
