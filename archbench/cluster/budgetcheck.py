"""Does every thread of an emulated node get its virtual core? CPU-bound threads started through
the nodes' sshd measure the CPU time each got per second of wall time, against what the
dilation promises (1/D of a core per thread; at most P/D for a process's threads together and
V/D for a node's):

1. one thread on one node, alone;
2. two threads on one node at once, in two processes (each should still get 1/D when V >= 2, not
   half of it);
3. one thread on every node at once (each node still gets its own).

    python -m archbench.cluster.budgetcheck --name emulated --seconds 4

Prints one JSON line per thread (`case`, `node`, `cpus_got`, `cap`, `ratio`) and a summary line
per case. The threads hash a large buffer, which CPython does outside its global lock, so two
threads of one process really run at once. Run it on a quiet machine: other work is held off by
the nodes' weight, but not the host side of the check itself.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys

from archbench.cluster.state import ClusterState, is_up, load_state

# Runs on the node: THREADS threads busy for SECONDS of wall time; prints each thread's CPU
# seconds per wall second. A process started this way is capped from its first instruction
# (the node library places every thread of a program that is not archbench's own).
_LOOP = (
    "import hashlib,sys,threading,time\n"
    "wall=float(sys.argv[1]); count=int(sys.argv[2]); data=bytes(1<<20); got=[0.0]*count\n"
    "def spin(k):\n"
    "    start=time.monotonic(); cpu=time.thread_time()\n"
    "    while time.monotonic()-start<wall: hashlib.sha256(data).digest()\n"
    "    got[k]=(time.thread_time()-cpu)/(time.monotonic()-start)\n"
    "threads=[threading.Thread(target=spin,args=(k,)) for k in range(count)]\n"
    "[t.start() for t in threads]; [t.join() for t in threads]\n"
    "print(' '.join(f'{g:.5f}' for g in got))\n"
)


def remote_loop(seconds: float, threads: int = 1) -> str:
    """The command line, for ssh, of busy threads that print their CPU per wall second."""
    return shlex.join(["python3", "-c", _LOOP, str(seconds), str(threads)])


def _start(node: str, seconds: float, threads: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["ssh", node, remote_loop(seconds, threads)], stdout=subprocess.PIPE, text=True
    )


def _collect(processes: list[tuple[str, subprocess.Popen[str]]]) -> dict[str, list[float]]:
    got: dict[str, list[float]] = {}
    for node, process in processes:
        output, _ = process.communicate(timeout=300)
        if process.returncode != 0:
            raise SystemExit(
                f"budgetcheck: the loop on {node} failed (ssh exit {process.returncode})"
            )
        got.setdefault(node, []).extend(float(v) for v in output.strip().splitlines()[-1].split())
    return got


def thread_cap(state: ClusterState, processes_on_node: int, threads_per_process: int = 1) -> float:
    """What each busy thread of one node should get (cores), with `processes_on_node` processes
    of `threads_per_process` busy threads each."""
    dilation = state.dilation_spec
    assert dilation is not None
    per_process = min(
        threads_per_process / dilation.factor, dilation.vcpus_per_process / dilation.factor
    )
    per_node = min(processes_on_node * per_process, dilation.node_cpus)
    return per_node / (processes_on_node * threads_per_process)


def run_cases(state: ClusterState, seconds: float) -> list[dict]:
    """The three cases, as rows of (case, node, cpus_got, cap, ratio)."""
    first = state.nodes[0].name
    cases = {  # case: [node, ...], a one-thread process per entry
        "one thread alone": [first],
        "two threads on one node, two processes": [first, first],
        "every node at once": [node.name for node in state.nodes],
    }
    rows = []
    for case, layout in cases.items():
        measured = _collect([(node, _start(node, seconds, 1)) for node in layout])
        for node, shares in measured.items():
            cap = thread_cap(state, layout.count(node))
            for got in shares:
                rows.append(
                    {"case": case, "node": node, "cpus_got": round(got, 4),
                     "cap": round(cap, 4), "ratio": round(got / cap, 4)}
                )  # fmt: skip
    return rows


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
    if state.dilation_spec is None:
        print(
            f"budgetcheck: cluster {args.name!r} has no CPU caps (--dilation off)", file=sys.stderr
        )
        return 2
    rows = run_cases(state, args.seconds)
    for row in rows:
        print(json.dumps(row))
    print(f"{len(state.nodes)} nodes, {state.dilation_spec.describe()}:")
    for case in dict.fromkeys(row["case"] for row in rows):
        ratios = [row["ratio"] for row in rows if row["case"] == case]
        print(
            f"  {case}: each thread got {min(ratios):.3f}..{max(ratios):.3f} of its cap "
            f"({rows[[r['case'] for r in rows].index(case)]['cap']:.4g} of a core)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
