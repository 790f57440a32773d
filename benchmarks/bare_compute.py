"""What the bare machine gives the compute-fidelity check: no cluster, no caps, no dilation.

The emulated cluster's fidelity check compares each worker's compute (forward + backward, the
probe's median) with the `single` baseline's and flags more than 10%. This runs the same
measurement with nothing emulated: `single`, and a parameter server with one worker (two
processes on this machine's cores, nothing else running), in alternation for a few rounds, and
prints each run's compute median and engine call (`timing.dispatch_s_per_rank`), how far
`single` moves between identical runs (max ÷ min), and the worker ÷ `single` of each round.
What moves here moves on any cluster built on this machine, and a parameter-server worker's pass
that costs more than `single`'s here costs more on real hosts too (its TensorFlow graph runs
through the distributed runtime's session, not a compiled function).

    python benchmarks/bare_compute.py [--models mlp,cnn] [--rounds 3] [--steps 300]

About 40 s a round for mlp, 60 s for cnn, on a two-core machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from dilation_reference import run_timing


def compute_of(arch: str, model: str, steps: int, out: Path) -> tuple[float, float]:
    """(compute median, engine call median) of one localhost run, in seconds."""
    ranks = 2 if arch == "ps" else 1
    command = [
        "mpirun", "-np", str(ranks), "-H", f"localhost:{ranks}", "--bind-to", "none",
        sys.executable, "-m", "archbench.train", "--arch", arch, "--model", model,
        "--dataset", "fashion_mnist", "--steps", str(steps), "--batch-size", "32",
        "--threads", "1", "--eval-samples", "500", "--out", str(out),
        *(["--num-ps", "1"] if arch == "ps" else []),
    ]  # fmt: skip
    out.unlink(missing_ok=True)
    timing = run_timing(command, out, f"{arch} {model}")
    calls = [value for value in timing.get("dispatch_s_per_rank") or [] if value]
    return timing["compute_s_median"], statistics.median(calls) if calls else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mlp,cnn")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args(argv)
    if args.rounds < 2 or args.steps < 20:
        parser.error("--rounds must be at least 2 and --steps at least 20")
    print("localhost, undilated, uncapped, batch 32, 1 TensorFlow thread a process; ms")
    print(f"{'model':<6}{'round':>6}{'single':>9}{'call':>7}{'ps worker':>11}{'call':>7}"
          f"{'ps ÷ single':>13}")  # fmt: skip
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "run.jsonl"
        for model in args.models.split(","):
            singles, ratios = [], []
            for round_number in range(1, args.rounds + 1):
                single, single_call = compute_of("single", model, args.steps, out)
                worker, worker_call = compute_of("ps", model, args.steps, out)
                singles.append(single)
                ratios.append(worker / single)
                print(f"{model:<6}{round_number:>6}{1e3 * single:>9.3f}{1e3 * single_call:>7.3f}"
                      f"{1e3 * worker:>11.3f}{1e3 * worker_call:>7.3f}{ratios[-1]:>13.2f}")  # fmt: skip
            print(f"{model}: single moved {max(singles) / min(singles):.2f}x (max ÷ min) between "
                  f"identical runs; ps worker ÷ single {min(ratios):.2f}-{max(ratios):.2f} "
                  f"(median {statistics.median(ratios):.2f})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
