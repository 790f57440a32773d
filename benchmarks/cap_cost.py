"""What a stop costs a capped thread: the CPU of the same work capped at 1/D of a core against
uncapped, in one process, per CFS period.

A time-dilated node runs each thread for period / D of every CFS period and stops it for the
rest. On a host of its own the same thread never stops. If the machine's caches keep the
thread's data over a stop, the capped work costs the CPU it costs uncapped and the node computes
like the host it stands for; where they do not (a last-level cache shared with other work, on
this machine or beside it on the same hardware), each stop is followed by refilling them, and
the capped work costs more. This measures that cost directly: one process alternates windows
uncapped and capped (each period at the same D) over the same work, `--rounds` times, so the
machine's speed of the moment is in both sides of every ratio. The work: a gather at random
over working sets of several sizes (numpy; data and indices together), and a model's forward +
backward pass (TensorFlow, one thread each for intra- and inter-op work, as archbench's ranks
run; `--model none` leaves it out).

Printed per work and period: the CPU one unit cost uncapped and capped (medians over the
rounds), their ratio, and the extra CPU per stop (the difference spread over the stops the cap
made: one per quota of CPU). A ratio near 1 at the cluster's period (`cluster up
--cfs-period-ms`; `cluster status` shows it) means the dilated nodes compute as the hosts would.
Where the extra CPU per stop grows with the period, the caches decay while a thread is stopped
(a longer stop loses more of them, up to all): a longer period then costs less in all, fewer
stops each dearer, but lets a thread run its whole quota (period / D) at full speed before it
stops, which a step shorter than that does not average out.

Needs root and a cgroup cpu controller (v1, or v2 for whole processes); run it on a quiet
machine (no cluster up). Usage:
python benchmarks/cap_cost.py [--dilation 5] [--periods-ms 5,12.5,50,100] [--model mlp]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
from collections.abc import Callable

import numpy as np

from archbench.cluster import cgroups
from archbench.cluster.capcost import alternate, gather_work
from archbench.cluster.dilation import Dilation
from archbench.common.errors import UsageError
from archbench.runtime import cgroupread

WORKING_SETS_MB = (0.25, 2.0, 8.0)


def model_pass(model: str) -> Callable[[], None]:
    """One unit: the model's forward + backward pass on a batch of 32 (28x28x1), tf.function."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    from archbench.workloads.models import build_model

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    network = build_model(model, (28, 28, 1), 10, seed=1)
    x = tf.constant(np.random.default_rng(1).random((32, 28, 28, 1), dtype=np.float32))
    y = tf.constant(np.arange(32) % 10)
    loss_of = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def forward_backward(x, y):
        with tf.GradientTape() as tape:
            loss = loss_of(y, network(x, training=True))
        return loss, tape.gradient(loss, network.trainable_variables)

    return lambda: float(forward_backward(x, y)[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dilation", type=float, default=5.0)
    parser.add_argument("--periods-ms", default="5,12.5,50,100")
    parser.add_argument("--model", default="mlp", help="a model of archbench, or none")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--window-s", type=float, default=0.3, help="real seconds uncapped")
    args = parser.parse_args(argv)
    try:
        periods = [float(text) for text in args.periods_ms.split(",")]
    except ValueError:
        print(f"cap_cost: --periods-ms {args.periods_ms!r} is not a list of numbers")
        return 2
    if args.dilation <= 1:
        print("cap_cost: --dilation must exceed 1")
        return 2
    caps = {}  # period ms: (period, quota) in µs
    for period in periods:
        period_us = int(period * 1000)
        caps[period] = (period_us, Dilation(args.dilation, 1, period_us).thread_quota_us)
        try:
            cgroups.check_period(*caps[period])
        except UsageError as exc:
            print(f"cap_cost: {exc}")
            return 2
    hierarchy = cgroupread.detect()
    if hierarchy is None:
        print("cap_cost: no cgroup cpu controller on this machine")
        return 2
    works = {f"gather {size:g} MB": gather_work(size) for size in WORKING_SETS_MB}
    if args.model != "none":
        works[f"{args.model} pass"] = model_pass(args.model)
    print(f"cap 1/{args.dilation:g} of a core; {args.rounds} rounds, windows alternating")
    print(
        f"{'work':<16} {'period ms':>9} {'uncapped us':>11} {'capped us':>9} {'ratio':>6} "
        f"{'extra us/stop':>13}"
    )
    with contextlib.ExitStack() as stack:
        groups = {}
        for period in periods:
            period_us, quota_us = caps[period]
            groups[period] = stack.enter_context(
                cgroups.capped_group(hierarchy, quota_us, period_us, "archbench-capcost-")
            )
        for name, work in works.items():
            uncapped, capped = alternate(
                hierarchy, work, groups, args.dilation, args.rounds, args.window_s
            )
            base = statistics.median(uncapped)
            for period, values in capped.items():
                cost = statistics.median(values)
                units_per_stop = period / 1000 / args.dilation / cost  # a quota's worth of CPU
                extra = (cost - base) * units_per_stop
                print(
                    f"{name:<16} {period:>9g} {1e6 * base:>11.1f} {1e6 * cost:>9.1f} "
                    f"{cost / base:>6.2f} {1e6 * extra:>13.0f}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
