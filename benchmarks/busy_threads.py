"""How many virtual cores does a training node keep busy? The figure `--dilation auto` sizes D by
(`archbench.cluster.dilation.BUSY_THREADS_PER_NODE`).

Brings up a dilated cluster of its own (`busy`, nodes bz1..bz3) with enough virtual cores per node
that no node total holds a rank back, trains each architecture on it and prints, per node that
trained, the CPU its threads used per second of virtual time (`fidelity.nodes[*].busy_vcpus`:
1.0 = one thread busy all the time on its virtual core) and its busiest thread's share.

Usage: python benchmarks/busy_threads.py [--models mlp,cnn] [--dilation 4] [--steps 200]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

NAME, PREFIX = "busy", "bz"
ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
       "TF_CPP_MIN_LOG_LEVEL": "2"}  # fmt: skip
JOBS = {  # arch: (ranks, hosts)
    "single": (1, f"{PREFIX}1:1"),
    "ring": (2, f"{PREFIX}1:1,{PREFIX}2:1"),
    "p2p": (2, f"{PREFIX}1:1,{PREFIX}2:1"),
    "ps": (3, f"{PREFIX}1:1,{PREFIX}2:1,{PREFIX}3:1"),
}


def cluster(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "archbench.cli", "cluster", *args],
                          cwd=ROOT, env=ENV, capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"`archbench cluster {' '.join(args)}` failed: {done.stderr.strip()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mlp,cnn")
    parser.add_argument("--dilation", default="4")
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args(argv)
    cluster("down", "--name", NAME)
    cluster("up", "--name", NAME, "--prefix", PREFIX, "--nodes", "3", "--dilation", args.dilation,
            "--vcpus-per-node", "8")  # fmt: skip
    print(
        f"{'model':<6} {'arch':<7} {'node':<5} {'role':<8} {'busy vcpus':>10} {'busiest thread':>14}"
    )
    try:
        with tempfile.TemporaryDirectory() as scratch:
            for model in args.models.split(","):
                for arch, (ranks, hosts) in JOBS.items():
                    out = Path(scratch) / f"{model}-{arch}.jsonl"
                    command = [
                        "mpirun", "-np", str(ranks), "-H", hosts, "--bind-to", "none",
                        sys.executable, "-m", "archbench.train", "--arch", arch, "--model", model,
                        "--steps", str(args.steps), "--batch-size", "32", "--threads", "1",
                        "--eval-samples", "500", "--out", str(out),
                    ]  # fmt: skip
                    done = subprocess.run(
                        command, cwd=ROOT, env=ENV, capture_output=True, text=True
                    )
                    if done.returncode != 0 or not out.exists():
                        print(f"{model} {arch}: failed: {done.stderr[-500:]}", file=sys.stderr)
                        continue
                    record = json.loads(out.read_text().splitlines()[-1])
                    roles = dict(zip(record["cluster"]["hosts"], record["cluster"]["roles"]))
                    for node, figures in sorted(record["fidelity"]["nodes"].items()):
                        print(f"{model:<6} {arch:<7} {node:<5} {roles.get(node, '?'):<8} "
                              f"{figures.get('busy_vcpus') or 0:>10.2f} "
                              f"{(figures.get('busiest_thread_cpus') or 0) * record['fidelity']['dilation']:>14.2f}")  # fmt: skip
    finally:
        cluster("down", "--name", NAME)
    return 0


if __name__ == "__main__":
    sys.exit(main())
