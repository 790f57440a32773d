"""Namespaces, the bridge, veth links and their tbf shaping, driven through `ip` and `tc`."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable

from archbench.common.bandwidth import Bandwidth
from archbench.common.errors import RunFailed

SUBNET_PREFIX = "10.213"  # archbench's own private range: 10.213.<index>.0/24 per cluster
SUBNET_INDEXES = range(1, 251)
BRIDGE_HOST_OCTET = 254
# How long tbf may queue a packet before dropping it: deep enough for TCP to fill the link.
TBF_LATENCY = "50ms"


def run(*command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        detail = (result.stderr or result.stdout).strip()
        raise RunFailed(f"`{' '.join(command)}` failed: {detail}")
    return result


def namespaces() -> set[str]:
    listing = run("ip", "netns", "list").stdout
    return {line.split()[0] for line in listing.splitlines() if line.strip()}


def link_exists(name: str) -> bool:
    return run("ip", "link", "show", "dev", name, check=False).returncode == 0


def used_subnet_indexes() -> set[int]:
    """Indexes of 10.213.X.0/24 already carrying an address or a route on the host."""
    text = run("ip", "-4", "-o", "addr", "show").stdout + run("ip", "-4", "route", "show").stdout
    used = set()
    for token in text.split():
        if token.startswith(SUBNET_PREFIX + "."):
            with contextlib.suppress(IndexError, ValueError):
                used.add(int(token.split(".")[2]))
    return used


def tbf_burst_bytes(rate: Bandwidth) -> int:
    """The tbf bucket of a link shaped to `rate`."""
    # About 2 ms at line rate, and never below a few full-size packets.
    return max(int(rate.bits_per_s / 8 / 500), 32 * 1024)


def _shape(device: str, rate: Bandwidth, namespace: str | None) -> None:
    prefix = ("tc", "-n", namespace) if namespace else ("tc",)
    run(
        *prefix,
        "qdisc",
        "replace",
        "dev",
        device,
        "root",
        "tbf",
        "rate",
        rate.text,
        "burst",
        str(tbf_burst_bytes(rate)),
        "latency",
        TBF_LATENCY,
    )


def create_bridge(bridge: str, address_cidr: str) -> None:
    # Bridged frames must not be sent through the host's iptables (br_netfilter may be loaded).
    run(
        "ip", "link", "add", "name", bridge, "type", "bridge",
        "nf_call_iptables", "0", "nf_call_ip6tables", "0", "nf_call_arptables", "0",
    )  # fmt: skip
    run("ip", "addr", "add", address_cidr, "dev", bridge)
    run("ip", "link", "set", "dev", bridge, "up")


def create_node(
    namespace: str, host_veth: str, interface: str, address_cidr: str, bridge: str, rate: Bandwidth
) -> None:
    """A namespace joined to the bridge by a veth pair shaped in both directions."""
    run("ip", "netns", "add", namespace)
    run(
        "ip", "link", "add", "name", host_veth, "type", "veth",
        "peer", "name", interface, "netns", namespace,
    )  # fmt: skip
    run("ip", "link", "set", "dev", host_veth, "master", bridge)
    run("ip", "link", "set", "dev", host_veth, "up")
    run("ip", "-n", namespace, "link", "set", "dev", "lo", "up")
    run("ip", "-n", namespace, "addr", "add", address_cidr, "dev", interface)
    run("ip", "-n", namespace, "link", "set", "dev", interface, "up")
    shape_link(namespace, host_veth, interface, rate)


def shape_link(namespace: str, host_veth: str, interface: str, rate: Bandwidth) -> None:
    """Both directions of a node's link: host->node on the host end, node->rest on the node end.
    `rate` is what tc is given (a tc rate; on a dilated cluster B / D: ClusterState.link_rate)."""
    _shape(host_veth, rate, None)
    _shape(interface, rate, namespace)


def namespace_pids(namespace: str) -> list[int]:
    result = run("ip", "netns", "pids", namespace, check=False)
    return [int(pid) for pid in result.stdout.split() if pid.isdigit()]


def signal_pids(pids: list[int], signum: int) -> None:
    """Send `signum` to each pid that still exists (others are skipped)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def reap_pids(pids: list[int]) -> None:
    """Collect those of `pids` that are this process's exited children (sshd or a Slurm daemon
    started by an `up` that ran in this process), so no zombie is left."""
    for pid in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


def terminate(live: Callable[[], list[int]], grace_s: float, kill_wait_s: float = 0.0) -> list[int]:
    """TERM every process `live()` lists, wait up to `grace_s` for them to go, KILL the rest and
    wait up to `kill_wait_s` for those; returns the pids still alive."""
    pids = live()
    signal_pids(pids, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while pids and time.monotonic() < deadline:
        time.sleep(0.05)
        reap_pids(pids)
        pids = live()
    signal_pids(pids, signal.SIGKILL)
    reap_pids(pids)
    deadline = time.monotonic() + kill_wait_s
    while pids and time.monotonic() < deadline:
        time.sleep(0.05)
        reap_pids(pids)
        pids = live()
    return pids


def stop_namespace_processes(namespace: str, grace_s: float = 3.0) -> None:
    """TERM, then KILL, every process living in the namespace (sshd, its sessions, ranks)."""
    terminate(lambda: namespace_pids(namespace), grace_s)


def delete_namespace(namespace: str) -> None:
    if namespace in namespaces():
        run("ip", "netns", "delete", namespace)


def delete_link(name: str) -> None:
    # A veth whose peer sat in a deleted namespace disappears on its own, a moment later.
    result = run("ip", "link", "delete", "dev", name, check=False)
    if result.returncode != 0 and link_exists(name):
        raise RunFailed(f"`ip link delete dev {name}` failed: {result.stderr.strip()}")
