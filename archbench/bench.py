"""`archbench bench ring-overhead`: archbench's ring step against a bare Horovod loop.

All sides run in the same job, on the same Keras model, batch and world size, with synthetic
data (as Horovod's own tensorflow2_synthetic_benchmark does), in rotated blocks so that drift on a
shared machine hits them alike: the bare loop (one fixed batch), archbench's `RingTrainer.train_step`
on the same fixed batch (the step against the step), and archbench's step fed by its shared tf.data
pipeline (what training really runs; the pipeline's thread competes for the same cores). Prints
img/s and the ratios to the bare loop with their spread over the blocks.
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

from archbench.runtime.launch import detect_place, root_mpi_env, threads_per_process


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
    # deferred: TensorFlow, Horovod's trainer and the data pipeline load only in the ranks
    import tensorflow as tf

    from archbench.runtime.config import TrainConfig
    from archbench.trainers.ring import RingTrainer
    from archbench.workloads.data import BatchPlan, make_synthetic, train_batches
    from archbench.workloads.models import build_model

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
    samples = args.batch_size * place.size * (args.iters * (args.repeats + args.warmup) + 1)
    data = make_synthetic(shape, 10, samples, seed=1)
    trainer = RingTrainer(RingTrainer.settings_from(config), place, data)
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
    fixed_x, fixed_y = next(batches)

    def archbench_step_block() -> float:
        """archbench's ring step on one fixed batch: the same work as the bare loop."""
        start = time.perf_counter()
        for _ in range(args.iters):
            trainer.train_step(fixed_x, fixed_y)
        return time.perf_counter() - start

    def archbench_pipeline_block() -> float:
        """The loop as it trains: the next batch from the shared pipeline, then the step."""
        start = time.perf_counter()
        for _ in range(args.iters):
            x, y = next(batches)
            trainer.train_step(x, y)
        return time.perf_counter() - start

    def bare_block() -> float:
        start = time.perf_counter()
        for _ in range(args.iters):
            bare_step()
        return time.perf_counter() - start

    blocks = {
        "bare": bare_block,
        "archbench": archbench_step_block,
        "archbench_pipeline": archbench_pipeline_block,
    }
    for _ in range(args.warmup):  # trace, fill fusion buffers, warm caches
        for block in blocks.values():
            block()
    rates: dict[str, list[float]] = {name: [] for name in blocks}
    global_batch = args.batch_size * place.size
    names = list(blocks)
    for repeat in range(args.repeats):
        # Rotate the order so that no side always runs first after the same neighbour.
        for name in names[repeat % 3 :] + names[: repeat % 3]:
            elapsed = blocks[name]()
            rates[name].append(global_batch * args.iters / elapsed)
    if place.rank == 0:
        print("RESULT " + json.dumps(rates), flush=True)


def summarize(bare: list[float], other: list[float]) -> dict:
    """Medians and the ratio other/bare over blocks measured back to back."""
    bare_arr, other_arr = np.asarray(bare), np.asarray(other)
    ratios = other_arr / bare_arr
    return {
        "bare_img_s_median": float(np.median(bare_arr)),
        "img_s_median": float(np.median(other_arr)),
        "ratio_median": float(np.median(ratios)),
        "ratio_p25": float(np.quantile(ratios, 0.25)),
        "ratio_p75": float(np.quantile(ratios, 0.75)),
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

    env = {**os.environ, **root_mpi_env(), "TF_CPP_MIN_LOG_LEVEL": "2"}
    print("running: " + " ".join(command), flush=True)
    output = subprocess.run(command, env=env, capture_output=True, text=True)
    lines = [line for line in output.stdout.splitlines() if "RESULT " in line]
    if output.returncode != 0 or not lines:
        sys.stderr.write(output.stdout[-3000:] + output.stderr[-3000:])
        print("archbench bench: the benchmark job failed", file=sys.stderr)
        return 1
    rates, _ = json.JSONDecoder().raw_decode(lines[-1].split("RESULT ", 1)[1])
    step = summarize(rates["bare"], rates["archbench"])
    pipeline = summarize(rates["bare"], rates["archbench_pipeline"])
    print(
        f"model {args.model}, input {args.shape}, batch {args.batch_size}/worker, {args.np} workers, "
        f"{'gloo' if args.gloo else 'mpi'} controller, {step['blocks']} rotated blocks of "
        f"{args.iters} steps per side"
    )
    print(f"  bare Horovod loop          : {step['bare_img_s_median']:10.1f} img/s (median)")
    print(
        f"  archbench ring step        : {step['img_s_median']:10.1f} img/s "
        f"ratio {step['ratio_median']:.3f} (IQR {step['ratio_p25']:.3f}-{step['ratio_p75']:.3f}); target >= 0.97"
    )
    print(
        f"  archbench step + pipeline  : {pipeline['img_s_median']:10.1f} img/s "
        f"ratio {pipeline['ratio_median']:.3f} (IQR {pipeline['ratio_p25']:.3f}-{pipeline['ratio_p75']:.3f})"
    )
    if args.json:
        print(json.dumps({"step": step, "pipeline": pipeline}))
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
