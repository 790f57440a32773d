"""Does every emulated node get its CPU budget? A CPU-bound loop started through each node's sshd,
first on one node alone, then on every node at once, measures the CPU time it got per second of
wall time; the ratio to the node's budget should be 1 (the kernel caps it above; the groups'
weight keeps other work from pushing it below).

    python -m archbench.cluster.budgetcheck --name emulated --seconds 4

Prints one JSON line per loop (`node`, `together`, `cpus_got`, `budget`, `ratio`) and a summary.
Run it on a quiet machine: other work is held off by the weight, but not the sweep's own host.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys

from archbench.cluster.state import is_up, load_state

# Runs on the node: spin for SECONDS of wall time, print CPU seconds got per wall second.
_LOOP = (
    "import time,sys\n"
    "wall=float(sys.argv[1]); start=time.monotonic(); cpu=time.process_time()\n"
    "while time.monotonic()-start<wall: pass\n"
    "print((time.process_time()-cpu)/(time.monotonic()-start))\n"
)


def remote_loop(seconds: float) -> str:
    """The command line, for ssh, of a busy loop that prints its CPU per wall second."""
    return shlex.join(["python3", "-c", _LOOP, str(seconds)])


def _start(node: str, seconds: float) -> subprocess.Popen[str]:
    return subprocess.Popen(["ssh", node, remote_loop(seconds)], stdout=subprocess.PIPE, text=True)


def _collect(processes: dict[str, subprocess.Popen[str]]) -> dict[str, float]:
    got = {}
    for node, process in processes.items():
        output, _ = process.communicate(timeout=120)
        if process.returncode != 0:
            raise SystemExit(
                f"budgetcheck: the loop on {node} failed (ssh exit {process.returncode})"
            )
        got[node] = float(output.strip().splitlines()[-1])
    return got


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m archbench.cluster.budgetcheck")
    parser.add_argument(
        "--name", default="emulated", help="the emulated cluster (default emulated)"
    )
    parser.add_argument("--seconds", type=float, default=4.0, help="wall time of each loop")
    args = parser.parse_args(argv)
    state = load_state(args.name)
    if state is None or not is_up(state):
        print(f"budgetcheck: cluster {args.name!r} is not up", file=sys.stderr)
        return 2
    if state.cpus_per_node is None:
        print(
            f"budgetcheck: cluster {args.name!r} has no CPU budget (--cpus-per-node off)",
            file=sys.stderr,
        )
        return 2
    budget = state.cpus_per_node
    rows = []
    alone = _collect({state.nodes[0].name: _start(state.nodes[0].name, args.seconds)})
    together = _collect({node.name: _start(node.name, args.seconds) for node in state.nodes})
    for label, measured in (("alone", alone), ("together", together)):
        for node, cpus in measured.items():
            row = {"node": node, "together": label == "together", "cpus_got": round(cpus, 4),
                   "budget": budget, "ratio": round(cpus / budget, 4)}  # fmt: skip
            rows.append(row)
            print(json.dumps(row))
    worst = min(rows, key=lambda row: row["ratio"])
    print(
        f"{len(state.nodes)} nodes at {budget:g} CPUs: one loop alone got {rows[0]['ratio']:.3f} of "
        f"its budget; all at once, each got {min(r['ratio'] for r in rows[1:]):.3f}.."
        f"{max(r['ratio'] for r in rows[1:]):.3f} (worst {worst['node']})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
