"""Does the time-dilated cluster match real hosts? A reference this machine can build, against it.

The reference: two undilated nodes, each pinned to a whole core of its own (so each is a real
one-core host) with links at the full rate B. The emulation: the same two nodes dilated by D
(every thread at 1/D of a core, the node's threads together at V/D, links at B/D), read in
virtual time. Each architecture trains the same run on both (two workers; ps with its server
beside worker 0), and the table prints the virtual step (median over blocks, and mean), compute
and throughput of each dilated setting as a ratio to the reference. A faithful emulation gives
ratios of 1. A two-core machine can build this reference only for one-core hosts, so V = 1 is the
setting it can check; other V are printed to show what per-thread caps alone give.

    python benchmarks/dilation_reference.py [--settings 2:1 4:1 2:-] [--archs single,ring,p2p,ps]
        [--model mlp] [--steps 300] [--bandwidth 1gbit]

A setting is D:V (V '-' for no total per node). Takes about a minute per setting and arch.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

NAME, PREFIX = "dref", "dr"
ROOT = Path(__file__).resolve().parents[1]
ENV = {
    **os.environ,
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "TF_CPP_MIN_LOG_LEVEL": "2",
}


def cluster(*args: str) -> None:
    command = [sys.executable, "-m", "archbench.cli", "cluster", *args]
    done = subprocess.run(command, cwd=ROOT, env=ENV, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"`archbench cluster {' '.join(args)}` failed: {done.stderr.strip()}")


def pin_nodes() -> None:
    """The reference: node k's sshd (and so everything it starts) on core k - 1 alone."""
    from archbench.cluster.state import load_state

    state = load_state(NAME)
    assert state is not None
    for core, node in enumerate(state.nodes):
        subprocess.run(["taskset", "-a", "-p", "-c", str(core), str(node.sshd_pid)],
                       check=True, capture_output=True)  # fmt: skip


def run_timing(command: list[str], out: Path, what: str) -> dict:
    """The `timing` of the record a training command appends to `out` (its last one); exits
    with the command's own error when it fails or writes none."""
    done = subprocess.run(command, cwd=ROOT, env=ENV, capture_output=True, text=True)
    records = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    if done.returncode != 0 or not records:
        raise SystemExit(f"{what} failed: {(done.stderr or done.stdout)[-800:]}")
    return records[-1]["timing"]


def train(arch: str, model: str, steps: int, out: Path) -> dict:
    hosts = f"{PREFIX}1:2,{PREFIX}2:1" if arch == "ps" else f"{PREFIX}1:1,{PREFIX}2:1"
    ranks = {"single": 1, "ps": 3}.get(arch, 2)
    extra = ["--num-ps", "1"] if arch == "ps" else []
    command = [
        "mpirun", "-np", str(ranks), "-H", hosts, "--map-by", "slot", "--bind-to", "none",
        sys.executable, "-m", "archbench.train", "--arch", arch, "--model", model,
        "--steps", str(steps), "--batch-size", "32", "--threads", "1", "--eval-samples", "500",
        "--out", str(out), *extra,
    ]  # fmt: skip
    timing = run_timing(command, out, arch)
    return {
        "step_median": timing["step_s_median"],
        "step_mean": timing["step_s_mean"],
        "compute": timing["compute_s_median"],
        "samples_per_s": timing["samples_per_s"],
    }


def measure(setting: str, archs: list[str], args: argparse.Namespace, folder: Path) -> dict:
    cluster("down", "--name", NAME)
    if setting == "ref":
        cluster("up", "--name", NAME, "--prefix", PREFIX, "--nodes", "2",
                "--bandwidth", args.bandwidth, "--dilation", "off")  # fmt: skip
        pin_nodes()
    else:
        dilation, vcpus = setting.split(":")
        options = ["--dilation", dilation] + (["--vcpus-per-node", vcpus] if vcpus != "-" else [])
        cluster("up", "--name", NAME, "--prefix", PREFIX, "--nodes", "2",
                "--bandwidth", args.bandwidth, *options)  # fmt: skip
    try:
        return {
            arch: train(arch, args.model, args.steps, folder / f"{setting}-{arch}.jsonl")
            for arch in archs
        }
    finally:
        cluster("down", "--name", NAME)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", nargs="+", default=["2:1", "4:1", "2:-"])
    parser.add_argument("--archs", default="single,ring,p2p,ps")
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--bandwidth", default="1gbit")
    args = parser.parse_args(argv)
    archs = args.archs.split(",")
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        results = {"ref": measure("ref", archs, args, folder)}
        for setting in args.settings:
            results[setting] = measure(setting, archs, args, folder)
    print(
        f"{args.model}, 2 workers (ps: server beside worker 0), {args.bandwidth}; reference: "
        "undilated one-core nodes. Dilated settings D:V as a ratio to the reference (virtual time)"
    )
    print(f"{'arch':<7}{'reference step median / mean / compute (ms)':>45}  " + "  ".join(
        f"{s + ' step med/mean/compute':>30}" for s in args.settings))  # fmt: skip
    for arch in archs:
        ref = results["ref"][arch]
        row = f"{arch:<7}{1e3 * ref['step_median']:>23.3f} / {1e3 * ref['step_mean']:.3f} / {1e3 * (ref['compute'] or 0):.3f}"
        for setting in args.settings:
            got = results[setting][arch]
            ratios = [got[key] / ref[key] if ref[key] and got[key] else float("nan")
                      for key in ("step_median", "step_mean", "compute")]  # fmt: skip
            row += f"  {'':>12}{ratios[0]:5.2f} / {ratios[1]:5.2f} / {ratios[2]:5.2f}"
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
