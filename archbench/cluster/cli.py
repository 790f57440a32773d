"""`archbench cluster up|down|status`: the emulated multi-node cluster."""

from __future__ import annotations

import argparse
import json
import sys

from archbench.cluster.spec import (
    DEFAULT_BANDWIDTH,
    DEFAULT_NAME,
    DEFAULT_PREFIX,
    check_name,
    make_spec,
)
from archbench.cluster.state import ClusterState, is_up, list_states, load_state
from archbench.common.errors import RunFailed, UsageError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "cluster",
        help="bring an emulated multi-node cluster (namespaces, sshd, shaped links) up or down",
        description=(
            "An emulated cluster on this machine: nodes node1..nodeN are network namespaces "
            "with their own sshd and hostname, joined by veth links shaped with tc tbf. Needs root."
        ),
    )
    commands = parser.add_subparsers(dest="cluster_command", metavar="ACTION")
    commands.required = True

    up = commands.add_parser("up", help="create the cluster and write hostfiles/<name>.txt|.hosts")
    up.add_argument("--nodes", type=int, required=True, help="number of nodes")
    up.add_argument(
        "--bandwidth",
        default=DEFAULT_BANDWIDTH,
        help=f"rate of every node link, each direction, as tc reads it (default {DEFAULT_BANDWIDTH})",
    )
    _name_argument(up)
    up.add_argument(
        "--prefix",
        default=DEFAULT_PREFIX,
        help=f"node name prefix (default {DEFAULT_PREFIX}: {DEFAULT_PREFIX}1, {DEFAULT_PREFIX}2, ...)",
    )
    up.add_argument(
        "--slots", type=int, default=1, help="slots per node in the written hostfiles (default 1)"
    )
    up.add_argument(
        "--dilation",
        default=None,
        metavar="D",
        help="time dilation: every thread of a node runs at 1/D of a core and every link at B/D, "
        "so that in virtual time (real / D) the nodes are hosts with whole cores and links of B; "
        "'auto' (default) picks the smallest D at which the nodes' busy threads fit in this "
        "machine's cores; 'off': no caps (the nodes share the machine's cores)",
    )
    up.add_argument(
        "--vcpus-per-node",
        type=int,
        default=None,
        metavar="V",
        help="virtual cores per node: the node's threads together get at most V/D of a core, "
        "each at most 1/D (default 4)",
    )
    up.add_argument(
        "--vcpus-per-process",
        type=int,
        default=None,
        metavar="P",
        help="virtual cores per process: a process's threads together get at most P/D of a core "
        "(default 1: a process's threads hand work to each other, and CFS would let such a chain "
        "use a core per thread)",
    )
    up.add_argument(
        "--cfs-period-ms",
        type=float,
        default=None,
        metavar="MS",
        help="CFS period over which the caps are enforced (default 10, longer where a thread's "
        "quota, period / D, would be under 2.5 ms)",
    )
    up.add_argument(
        "--cpus-per-node", default=None, help=argparse.SUPPRESS
    )  # replaced by --dilation: refused with a line saying so
    up.add_argument(
        "--idle-nap-us",
        type=int,
        default=None,
        metavar="US",
        help="an idle wait on a node (Open MPI's polling) sleeps this long instead of spinning "
        "on the node's CPU budget (default 100; 0: spin)",
    )
    up.add_argument(
        "--slurm",
        action="store_true",
        help="also run Slurm on the nodes: munged and slurmctld on the host, a slurmd in each "
        "node, one partition with every node (use it with SLURM_CONF: `archbench cluster env`)",
    )
    up.add_argument(
        "--latency",
        default=None,
        help="not supported: links are shaped by bandwidth only (tc netem is not available)",
    )
    up.set_defaults(func=run_up)

    shape = commands.add_parser("shape", help="change the bandwidth of a cluster that is up")
    shape.add_argument("--bandwidth", required=True, help="new rate of every node link")
    _name_argument(shape)
    shape.set_defaults(func=run_shape)

    down = commands.add_parser("down", help="remove everything the cluster made (safe to repeat)")
    target = down.add_mutually_exclusive_group()
    _name_argument(target)
    target.add_argument("--all", action="store_true", help="every emulated cluster that is up")
    down.set_defaults(func=run_down)

    env = commands.add_parser(
        "env", help="print the shell lines that point Slurm's commands at a cluster (--slurm)"
    )
    _name_argument(env)
    env.set_defaults(func=run_env)

    status = commands.add_parser("status", help="show the emulated clusters that are up")
    status.add_argument("--name", default=None, type=cluster_name, help="only this cluster")
    status.add_argument("--json", action="store_true", help="print the state files as JSON")
    status.set_defaults(func=run_status)


def _name_argument(parser: argparse.ArgumentParser | argparse._MutuallyExclusiveGroup) -> None:
    parser.add_argument(
        "--name",
        default=DEFAULT_NAME,
        type=cluster_name,
        help=f"cluster name (default {DEFAULT_NAME})",
    )


def cluster_name(text: str) -> str:
    """--name, checked for every action: a name is a folder under the clusters' state folder, so
    `../..` would reach other clusters' files and daemons."""
    try:
        return check_name(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def run_up(args: argparse.Namespace) -> int:
    # deferred: the lifecycle (subprocess, the node tools) loads only for the command that runs
    from archbench.cluster.lifecycle import bring_up
    from archbench.cluster.preflight import require_cluster_support

    if args.latency is not None:
        raise UsageError(
            "--latency is not supported: links are shaped by bandwidth (tc tbf) only, "
            "because tc netem is not available on this kernel"
        )
    if args.cpus_per_node is not None:
        raise UsageError(
            "--cpus-per-node is gone: nodes are capped by time dilation now (--dilation auto|D|off, "
            "--vcpus-per-node V for a total of V/D of a core per node)"
        )
    require_cluster_support()
    if args.slurm:
        # deferred: the Slurm module (subprocess) loads only for `up --slurm`
        from archbench.cluster.slurm import require_support

        require_support()
    spec = make_spec(
        args.name, args.nodes, args.bandwidth, args.prefix, args.slots, args.dilation,
        args.vcpus_per_node, args.cfs_period_ms, args.idle_nap_us, slurm=args.slurm,
        vcpus_per_process=args.vcpus_per_process,
    )  # fmt: skip
    try:
        result = bring_up(spec)
    except RunFailed as exc:
        return _failed(f"could not bring cluster {spec.name!r} up (nothing left behind): {exc}")
    state = result.state
    if result.already_up:
        print(f"cluster {state.name!r} is already up; nothing changed")
    else:
        print(f"cluster {state.name!r} is up")
    print(describe(state))
    return 0


def run_env(args: argparse.Namespace) -> int:

    state = load_state(args.name)
    if state is None or not is_up(state):
        raise UsageError(f"cluster {args.name!r} is not up")
    if not state.slurm:
        raise UsageError(
            f"cluster {args.name!r} runs no Slurm; bring it up with `archbench cluster up --slurm`"
        )
    print(f"export SLURM_CONF={state.slurm['conf']}")
    return 0


def run_shape(args: argparse.Namespace) -> int:
    # deferred: the lifecycle (subprocess, the node tools) loads only for the command that runs
    from archbench.cluster.lifecycle import set_bandwidth
    from archbench.cluster.preflight import require_cluster_support

    spec = make_spec(args.name, 1, args.bandwidth, DEFAULT_PREFIX, 1)  # validates the rate
    require_cluster_support()
    try:
        state = set_bandwidth(args.name, spec.bandwidth)
    except RunFailed as exc:
        return _failed(str(exc))
    print(f"cluster {state.name!r}: links now {state.bandwidth} each way")
    return 0


def run_down(args: argparse.Namespace) -> int:
    # deferred: the lifecycle (subprocess, the node tools) loads only for the command that runs
    from archbench.cluster.lifecycle import tear_down
    from archbench.cluster.preflight import require_cluster_support

    require_cluster_support()
    names = [state.name for state in list_states()] if args.all else [args.name]
    if not names:
        print("no emulated cluster is up")
    for name in names:
        try:
            state = tear_down(name)
        except RunFailed as exc:
            return _failed(f"{exc}; run `archbench cluster down --name {name}` again")
        if state is None:
            print(f"cluster {name!r} is not up; nothing to remove")
        else:
            print(f"cluster {name!r} is down ({', '.join(state.node_names)} removed)")
    return 0


def run_status(args: argparse.Namespace) -> int:
    if args.name is not None:
        state = load_state(args.name)
        states = [state] if state is not None else []
    else:
        states = list_states()
    if args.json:
        print(json.dumps([{**s.as_dict(), "up": is_up(s)} for s in states], indent=2))
    elif not states:
        print(
            "no emulated cluster is up" if args.name is None else f"cluster {args.name!r} is not up"
        )
    else:
        print("\n".join(describe(state) for state in states))
    # Non-zero when a cluster is half there (an sshd died, a namespace vanished).
    return 0 if all(healthy(state) for state in states) else 1


def _failed(message: str) -> int:
    print(f"archbench cluster: error: {message}", file=sys.stderr)
    return 1


def healthy(state: ClusterState) -> bool:
    # deferred: sshd and Slurm (subprocess) load only when there is a cluster to look at
    from archbench.cluster import slurm
    from archbench.cluster.sshd import pid_is_sshd

    return (
        is_up(state)
        and all(pid_is_sshd(node.sshd_pid) for node in state.nodes)
        and slurm.healthy(state)
    )


def describe(state: ClusterState) -> str:
    # deferred: sshd (subprocess) loads only when there is a cluster to describe
    from archbench.cluster.sshd import pid_is_sshd

    condition = "up" if healthy(state) else f"DEGRADED ({state.status})"
    dilation = state.dilation_spec
    if dilation is None:
        caps = "no CPU caps (the nodes share the machine's cores: not faithful)"
        links = f"links {state.bandwidth} each way"
    else:
        caps = f"{dilation.describe()} (cgroup {state.cgroup})"
        links = f"links {state.bandwidth} each way in virtual time (tc {state.link_rate})"
    waits = f"idle waits nap {state.idle_nap_us} us" if state.idle_nap_us else "idle waits spin"
    if state.idle_poll_ns:
        waits += f", idle cores poll {state.idle_poll_ns / 1e6:g} ms before halting"
    elif state.idle_pollers:
        waits += f", idle cores kept polling by {state.idle_pollers} lowest-priority processes"
    if state.cap_cost_ratio is not None:
        waits += (
            f", a capped thread's 2 MB working set cost {state.cap_cost_ratio:.2f}x its uncapped "
            "CPU at up (its caches refilled after each stop)"
        )
    lines = [
        f"{state.name}: {condition}, {len(state.nodes)} nodes, {links}, {caps}, {waits}, "
        f"subnet {state.subnet} on bridge {state.bridge} (host {state.bridge_address})"
    ]
    for node in state.nodes:
        sshd_state = "running" if pid_is_sshd(node.sshd_pid) else "NOT RUNNING"
        lines.append(f"  {node.name:<8} {node.address:<15} sshd pid {node.sshd_pid} {sshd_state}")
    if state.hostfiles:
        lines.append(f"  hostfiles: {' '.join(_relative(path) for path in state.hostfiles)}")
    if state.slurm:
        # deferred: the Slurm module (subprocess) loads only for a cluster that runs Slurm
        from archbench.cluster import slurm

        lines.extend(slurm.describe(state))
    return "\n".join(lines)


def _relative(path: str) -> str:
    from pathlib import Path

    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


if __name__ == "__main__":
    from archbench.cli import main

    sys.exit(main(["cluster", *sys.argv[1:]]))
