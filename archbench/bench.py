"""`archbench bench ring-overhead`: archbench's ring step against a bare Horovod loop.

Both run in the same job, on the same Keras model, batch and world size, with synthetic data (as
Horovod's own tensorflow2_synthetic_benchmark does), in interleaved blocks so that drift on a
shared machine hits both alike. The archbench side is the real training path: the shared tf.data
pipeline, `RingTrainer.train_step` and the loop's per-step timing. Prints img/s for both and the
ratio (archbench / bare) with its spread over the blocks.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np


def _bare_horovod_step(hvd, tf, model, optimizer, loss_fn, images, labels):
    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return step


def worker(args: argparse.Namespace) -> None:
    """Runs inside every rank of the horovodrun job."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    from archbench.config import TrainConfig
    from archbench.data import BatchPlan, make_synthetic, train_batches
    from archbench.launch import detect_place, threads_per_process
    from archbench.models import build_model
    from archbench.trainers.ring import RingTrainer

    place = detect_place()
    threads = threads_per_process(0, place.local_size)
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    shape = tuple(int(d) for d in args.shape.split("x"))
    config = TrainConfig(
        arch="ring",
        model=args.model,
        dataset="synthetic",
        synthetic_shape=shape,
        batch_size=args.batch_size,
        steps=1,
        lr=0.01,
        momentum=0.9,
    )
    # One pipeline for the whole benchmark, as the loop has one per epoch.
    samples = args.batch_size * place.size * args.iters * (args.repeats + args.warmup)
    data = make_synthetic(shape, 10, samples, seed=1)
    trainer = RingTrainer(config, place, data)
    trainer.setup()
    hvd = trainer.hvd

    # The bare loop: Horovod's synthetic benchmark, verbatim in spirit (one fixed batch).
    bare_model = build_model(args.model, shape, 10, seed=1)
    bare_opt = tf.keras.optimizers.SGD(0.01, momentum=0.9)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    images = tf.random.uniform((args.batch_size, *shape))
    labels = tf.random.uniform((args.batch_size,), maxval=10, dtype=tf.int32)
    bare_step = _bare_horovod_step(hvd, tf, bare_model, bare_opt, loss_fn, images, labels)
    hvd.broadcast_variables(bare_model.variables, root_rank=0)

    plan = BatchPlan(data.train_size, args.batch_size, place.size, seed=1)

    batches = iter(train_batches(data, plan, 0, place.rank))

    def archbench_block() -> float:
        step_times = []
        start = time.perf_counter()
        for _ in range(args.iters):
            x, y = next(batches)
            step_start = time.perf_counter()
            trainer.train_step(x, y)
            step_times.append(time.perf_counter() - step_start)
        return time.perf_counter() - start

    def bare_block() -> float:
        start = time.perf_counter()
        for _ in range(args.iters):
            bare_step()
        return time.perf_counter() - start

    for _ in range(args.warmup):  # trace, fill fusion buffers, warm caches
        bare_block()
        archbench_block()
    bare_rates, archbench_rates = [], []
    global_batch = args.batch_size * place.size
    for repeat in range(args.repeats):
        order = (bare_block, archbench_block) if repeat % 2 == 0 else (archbench_block, bare_block)
        for block in order:
            elapsed = block()
            rate = global_batch * args.iters / elapsed
            (bare_rates if block is bare_block else archbench_rates).append(rate)
    if place.rank == 0:
        print(
            "RESULT " + json.dumps({"bare": bare_rates, "archbench": archbench_rates}), flush=True
        )


def summarize(bare: list[float], archbench: list[float]) -> dict:
    bare_arr, arch_arr = np.asarray(bare), np.asarray(archbench)
    ratios = arch_arr / bare_arr  # pairs measured back to back
    return {
        "bare_img_s_median": float(np.median(bare_arr)),
        "archbench_img_s_median": float(np.median(arch_arr)),
        "ratio_median": float(np.median(ratios)),
        "ratio_min": float(ratios.min()),
        "ratio_max": float(ratios.max()),
        "blocks": len(ratios),
    }


def run(args: argparse.Namespace) -> int:
    if args.worker:
        worker(args)
        return 0
    horovodrun = shutil.which("horovodrun") or os.path.join(
        os.path.dirname(sys.executable), "horovodrun"
    )
    command = [horovodrun, "-np", str(args.np), "-H", f"localhost:{args.np}"]
    if args.gloo:
        command.append("--gloo")
    command += [
        sys.executable,
        "-m",
        "archbench.cli",
        "bench",
        "ring-overhead",
        "--worker",
        "--model",
        args.model,
        "--shape",
        args.shape,
        "--batch-size",
        str(args.batch_size),
        "--iters",
        str(args.iters),
        "--repeats",
        str(args.repeats),
        "--warmup",
        str(args.warmup),
    ]
    env = dict(
        os.environ,
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        TF_CPP_MIN_LOG_LEVEL="2",
    )
    print("running: " + " ".join(command), flush=True)
    output = subprocess.run(command, env=env, capture_output=True, text=True)
    lines = [line for line in output.stdout.splitlines() if "RESULT " in line]
    if output.returncode != 0 or not lines:
        sys.stderr.write(output.stdout[-3000:] + output.stderr[-3000:])
        print("archbench bench: the benchmark job failed", file=sys.stderr)
        return 1
    rates, _ = json.JSONDecoder().raw_decode(lines[-1].split("RESULT ", 1)[1])
    summary = summarize(rates["bare"], rates["archbench"])
    print(
        f"model {args.model}, input {args.shape}, batch {args.batch_size}/worker, {args.np} workers, "
        f"{'gloo' if args.gloo else 'mpi'} controller, {summary['blocks']} interleaved blocks of {args.iters} steps"
    )
    print(f"  bare Horovod loop : {summary['bare_img_s_median']:10.1f} img/s (median)")
    print(f"  archbench ring    : {summary['archbench_img_s_median']:10.1f} img/s (median)")
    print(
        f"  ratio archbench/bare: {summary['ratio_median']:.3f} (min {summary['ratio_min']:.3f}, "
        f"max {summary['ratio_max']:.3f}); target >= 0.97"
    )
    if args.json:
        print(json.dumps(summary))
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("bench", help="benchmarks of archbench's own overhead")
    parser.add_argument("name", choices=["ring-overhead"], help="which benchmark")
    parser.add_argument("--model", default="cnn")
    parser.add_argument("--shape", default="32x32x3", help="synthetic input shape")
    parser.add_argument("--batch-size", type=int, default=32, help="per worker")
    parser.add_argument("--np", type=int, default=2, help="workers")
    parser.add_argument("--iters", type=int, default=20, help="steps per timed block")
    parser.add_argument("--repeats", type=int, default=10, help="timed blocks per side")
    parser.add_argument("--warmup", type=int, default=2, help="untimed blocks per side")
    parser.add_argument("--gloo", action="store_true", help="Gloo controller instead of MPI")
    parser.add_argument("--json", action="store_true", help="also print the summary as JSON")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.set_defaults(func=run)
