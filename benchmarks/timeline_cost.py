"""What tracing costs: the same run with and without `--timeline`, in alternation on this
machine (mpirun on localhost: ring and p2p 2 ranks, ps 1 server + 2 workers), so both see the
same load. For each architecture and model it prints the timed-step median without tracing,
the timed-step median of the traced run (its untraced steps: tracing is on only around the
traced steps), and the traced steps' own median, as medians over the pairs.

Usage: python benchmarks/timeline_cost.py [--archs ring p2p ps] [--models mlp cnn]
                                          [--pairs 2] [--steps 40]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

RANKS = {"ring": 2, "p2p": 2, "ps": 3}


def run(arch: str, model: str, steps: int, folder: Path, traced: bool) -> dict:
    out = folder / f"{arch}-{model}-{'traced' if traced else 'plain'}.jsonl"
    command = [
        "mpirun", "-np", str(RANKS[arch]), "--oversubscribe", sys.executable, "-m",
        "archbench.train", "--arch", arch, "--model", model, "--steps", str(steps),
        "--eval-samples", "500", "--out", str(out),
    ]  # fmt: skip
    if traced:
        command += ["--timeline", str(folder / f"{arch}-{model}.json")]
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    subprocess.run(command, check=True, capture_output=True, env=env)
    return json.loads(out.read_text().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="timeline_cost.py")
    parser.add_argument("--archs", nargs="+", default=list(RANKS))
    parser.add_argument("--models", nargs="+", default=["mlp", "cnn"])
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args(argv)
    print("arch model: timed step without | with --timeline (ratio) | traced steps (ratio)")
    with tempfile.TemporaryDirectory() as folder:
        for arch in args.archs:
            for model in args.models:
                plain, untraced, traced = [], [], []
                for _ in range(args.pairs):
                    plain.append(run(arch, model, args.steps, Path(folder), False))
                    record = run(arch, model, args.steps, Path(folder), True)
                    untraced.append(record["timing"]["step_s_median"])
                    traced.append(record["timeline"]["cost"]["traced_step_s_median"])
                base = statistics.median(r["timing"]["step_s_median"] for r in plain)
                with_, during = statistics.median(untraced), statistics.median(traced)
                print(
                    f"{arch} {model}: {1000 * base:.2f} ms | {1000 * with_:.2f} ms "
                    f"({with_ / base:.2f}x) | {1000 * during:.2f} ms ({during / base:.2f}x)"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
