"""Bring an emulated cluster up and take it down again, leaving the machine as it was."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from archbench.cluster import (
    blocks,
    capcost,
    cgroups,
    hostfiles,
    idlepollers,
    idlestates,
    network,
    nodelib,
    slurm,
    sshd,
)
from archbench.cluster.spec import ClusterSpec
from archbench.cluster.state import (
    ClusterState,
    NodeState,
    cluster_dir,
    cluster_lock,
    is_up,
    link_rate,
    list_states,
    load_state,
    save_state,
)
from archbench.common.bandwidth import Bandwidth
from archbench.common.errors import RunFailed, UsageError
from archbench.common.safe_text import plain_word
from archbench.runtime import cgroupread
from archbench.runtime.virtualtime import LIBRARY_NAME

HOSTS_FILE = Path("/etc/hosts")
# Open MPI reads per-user MCA parameters from here, on the host and (same $HOME) in the nodes.
MCA_BLOCK = "emulated clusters"
ALL_CLUSTER_SUBNETS = f"{network.SUBNET_PREFIX}.0.0/16"


@dataclass(frozen=True)
class UpResult:
    state: ClusterState
    already_up: bool


def ssh_config_path() -> Path:
    return Path.home() / ".ssh" / "config"


def mca_params_path() -> Path:
    return Path.home() / ".openmpi" / "mca-params.conf"


def _cluster_block(name: str) -> str:
    return f"cluster {name}"


def _same_shape(state: ClusterState, spec: ClusterSpec) -> bool:
    return (
        state.node_names == spec.node_names
        # as written, not by value: the records name the link by this text
        and state.bandwidth.text == spec.bandwidth.text
        and state.slots == spec.slots
        and state.dilation_spec == spec.dilation
        and state.idle_nap_us == spec.idle_nap_us
        and (state.slurm is not None) == spec.slurm
    )


def _pick_subnet_index() -> int:
    taken = {state.subnet_index for state in list_states()} | network.used_subnet_indexes()
    for index in network.SUBNET_INDEXES:
        if index not in taken:
            return index
    raise UsageError(f"no free subnet left in {ALL_CLUSTER_SUBNETS}; bring a cluster down first")


def _check_names_free(spec: ClusterSpec) -> None:
    existing = network.namespaces()
    for other in list_states():
        clash = set(other.node_names) & set(spec.node_names)
        if clash:
            raise UsageError(
                f"cluster {other.name!r} already has nodes {', '.join(sorted(clash))}; "
                f"run `archbench cluster down --name {other.name}` first or use another --prefix"
            )
    clash = sorted(set(spec.node_names) & existing)
    if clash:
        raise UsageError(
            f"network namespaces {', '.join(clash)} already exist and are not archbench's; "
            "use another --prefix"
        )


def _new_state(spec: ClusterSpec) -> ClusterState:
    index = _pick_subnet_index()
    base = f"{network.SUBNET_PREFIX}.{index}"
    nodes = [
        NodeState(name=node, address=f"{base}.{k}", host_veth=f"ab{index}n{k}")
        for k, node in enumerate(spec.node_names, start=1)
    ]
    return ClusterState(
        name=spec.name,
        status="starting",
        bandwidth=spec.bandwidth,
        prefix=spec.prefix,
        slots=spec.slots,
        subnet_index=index,
        subnet=f"{base}.0/24",
        # Named after the prefix, not the subnet: horovodrun caches the interface it found for a
        # host list (~/.horovod, an hour), so node1,node2 must always be on the same name.
        bridge=f"ab-{spec.prefix}",
        bridge_address=f"{base}.{network.BRIDGE_HOST_OCTET}",
        nodes=nodes,
        hosts_file=str(HOSTS_FILE),
        ssh_config=str(ssh_config_path()),
        mca_params=str(mca_params_path()),
        created_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        host_netns=os.stat("/proc/self/ns/net").st_ino,
        dilation=spec.dilation.factor if spec.dilation is not None else None,
        vcpus_per_node=spec.dilation.vcpus_per_node if spec.dilation is not None else None,
        vcpus_per_process=spec.dilation.vcpus_per_process if spec.dilation is not None else None,
        cfs_period_us=spec.dilation.cfs_period_us if spec.dilation is not None else None,
        idle_nap_us=spec.idle_nap_us,
        cgroup=_hierarchy_for(spec).version if spec.dilation is not None else None,
        slurm={} if spec.slurm else None,
    )


def _hierarchy_for(spec: ClusterSpec) -> cgroupread.Hierarchy:
    hierarchy = cgroupread.detect()
    if hierarchy is None:
        raise UsageError(
            f"{cgroups.unavailable_reason()}; bring the cluster up with --dilation off "
            "to accept nodes that share the machine's cores"
        )
    return hierarchy


def _hosts_lines(state: ClusterState) -> list[str]:
    """The /etc/hosts block: every node, and with Slurm the controller's name on the bridge."""
    names = [(node.address, node.name) for node in state.nodes]
    if state.slurm is not None:
        names.append((state.bridge_address, slurm.controller_host(state)))
    return [
        f"{plain_word(address, 'address')} {plain_word(name, 'host name')}"
        for address, name in names
    ]


def _ssh_config_lines(state: ClusterState) -> list[str]:
    """The ~/.ssh/config block: ssh reads a directive per line and splits values at blanks, so
    every value is one plain word (UsageError otherwise)."""
    names = [plain_word(name, "node name") for name in state.node_names]
    key = plain_word(str(state.directory / sshd.CLIENT_KEY), "the cluster's key")
    return [
        f"Host {' '.join(names)}",
        f"    IdentityFile {key}",
        "    IdentitiesOnly yes",
        "    BatchMode yes",
        # The nodes' host key is made afresh by every `up`: nothing to verify it against.
        "    StrictHostKeyChecking no",
        "    UserKnownHostsFile /dev/null",
        "    LogLevel ERROR",
        # Whatever followed in the user's file applied to every host; keep it that way.
        "Host *",
    ]


def _mca_lines() -> list[str]:
    return [
        "# Open MPI traffic stays on the emulated clusters' subnet while one is up.",
        f"btl_tcp_if_include = {ALL_CLUSTER_SUBNETS}",
        f"oob_tcp_if_include = {ALL_CLUSTER_SUBNETS}",
        "# The nodes share this machine's cores: a rank waiting on MPI yields instead of spinning.",
        "mpi_yield_when_idle = 1",
        "# Every node's first rank would be bound to core 0 (each node's orted sees all the",
        "# machine's cores), so all nodes' ranks would share one core; the kernel places them.",
        "hwloc_base_binding_policy = none",
    ]


def _node_environment(
    state: ClusterState, library: Path, hierarchy: cgroupread.Hierarchy | None
) -> dict[str, str]:
    """What every session and task on a node gets (archbench.cluster.nodelib)."""
    return nodelib.node_environment(
        library, state.idle_nap_us, state.dilation_spec,
        cgroups.cluster_dirs(hierarchy, state.name)[0] if hierarchy is not None else None, state.cgroup,
    )  # fmt: skip


def _check_generated_text(state: ClusterState) -> None:
    """Writes every file `up` generates, in memory only: a value that one of them cannot hold (a
    folder with a blank in its path, say) is refused before anything is built."""
    hierarchy = cgroupread.detect() if state.dilation_spec is not None else None
    placeholder = _node_environment(state, state.directory / LIBRARY_NAME, hierarchy)
    for node in state.nodes:
        node_dir = state.directory / node.name
        sshd.sshd_config_text(state.directory, node.name, node_dir / "sshd.pid", placeholder)
    blocks.with_block("", _cluster_block(state.name), _hosts_lines(state))
    blocks.with_block("", _cluster_block(state.name), _ssh_config_lines(state))
    hostfiles.texts(state.node_names, state.slots)
    if state.slurm is not None:
        slurm.conf_text(state)
        slurm.task_prolog_text(placeholder)


def _build(state: ClusterState) -> None:
    directory = state.directory
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o755)
    sshd.make_keys(directory, state.name)
    network.create_bridge(state.bridge, f"{state.bridge_address}/24")
    for node in state.nodes:
        network.create_node(
            node.name, node.host_veth, state.bridge, f"{node.address}/24", state.bridge,
            state.link_rate,
        )  # fmt: skip
    save_state(state)
    blocks.insert_block(Path(state.hosts_file), _cluster_block(state.name), _hosts_lines(state))
    blocks.insert_block(
        Path(state.ssh_config), _cluster_block(state.name), _ssh_config_lines(state),
        file_mode=0o600, dir_mode=0o700,
    )  # fmt: skip
    blocks.insert_block(Path(state.mca_params), MCA_BLOCK, _mca_lines())
    if sshd.ensure_privsep_dir():
        blocks.remember_created(sshd.PRIVSEP_DIR)
    dilation = state.dilation_spec
    hierarchy = cgroupread.detect() if dilation is not None else None
    if dilation is not None:  # bursts of 1/D of a period: no halted core between them
        state.idle_poll_ns = idlestates.hold()
        if state.idle_poll_ns is None:  # no haltpoll to set: the cores poll in user space
            state.idle_pollers = idlepollers.start(hierarchy)
        save_state(state)
    state.node_library = str(nodelib.build_library(directory))
    save_state(state)
    node_env = _node_environment(state, Path(state.node_library), hierarchy)
    for node in state.nodes:
        node_dir = directory / node.name
        node_dir.mkdir(exist_ok=True)
        if hierarchy is not None and dilation is not None:
            # Before sshd starts: it joins the group itself, so every session inherits it.
            node.cgroup_dirs = [
                str(path)
                for path in cgroups.create_node_group(
                    hierarchy,
                    state.name,
                    node.name,
                    dilation.node_quota_us,
                    dilation.cfs_period_us,
                )  # fmt: skip
            ]
            save_state(state)
        config = node_dir / "sshd_config"
        config.write_text(
            sshd.sshd_config_text(directory, node.name, node_dir / "sshd.pid", node_env)
        )
        node.sshd_pid = sshd.start_sshd(
            node.name, node.name, config, node_dir / "sshd.log",
            [Path(path) for path in node.cgroup_dirs],
            cgroups.node_mount_script(hierarchy) if hierarchy is not None else "",
        )  # fmt: skip
        save_state(state)
    if hierarchy is not None and dilation is not None:
        # what a stop costs a capped thread here (its caches refilled after each): the
        # condition every record of this cluster carries
        state.cap_cost_ratio = capcost.measure(
            dilation.factor, dilation.cfs_period_us, cgroups.cluster_dirs(hierarchy, state.name)[0]
        )
        save_state(state)
    for node in state.nodes:
        sshd.wait_until_listening(node.address, node.sshd_pid, directory / node.name / "sshd.log")
    state.hostfiles = [
        str(path) for path in hostfiles.write_hostfiles(state.name, state.node_names, state.slots)
    ]
    if state.slurm is not None:
        # Always with the trees of the cpu controller: slurmd will not start without them.
        mounts = cgroupread.detect()
        state.slurm = slurm.start(
            state,
            node_env,
            cgroups.node_mount_script(mounts) if mounts is not None else "",
            mounts.version if mounts is not None else None,
        )
    state.status = "up"
    save_state(state)


def bring_up(spec: ClusterSpec) -> UpResult:
    """Build the cluster; if one of that name is already up with the same shape, say so."""
    with cluster_lock():
        existing = load_state(spec.name)
        if existing is not None and is_up(existing):
            if _same_shape(existing, spec):
                return UpResult(existing, already_up=True)
            with_slurm = " with Slurm" if existing.slurm is not None else " without Slurm"
            raise UsageError(
                f"cluster {spec.name!r} is already up with {len(existing.nodes)} nodes at "
                f"{existing.bandwidth}{with_slurm if spec.slurm != (existing.slurm is not None) else ''}; "
                f"run `archbench cluster down --name {spec.name}` first"
            )
        if existing is not None:
            _tear_down(existing)  # left half-built by an interrupted `up`
        _check_names_free(spec)
        hostfiles.check_hostfiles_free(spec.name)
        state = _new_state(spec)
        _check_generated_text(state)
        save_state(state)
        try:
            _build(state)
        except BaseException:
            # Whatever went wrong (or Ctrl-C), leave nothing half-built behind.
            _tear_down(state)
            raise
        return UpResult(state, already_up=False)


def _wait_until_gone(pids: list[int], timeout_s: float = 5.0) -> None:
    # A killed sshd stays in the process table until its parent (init, once `up` has exited)
    # reaps it; wait for that so "no sshd left" holds when `down` returns.
    deadline = time.monotonic() + timeout_s
    while any(Path(f"/proc/{pid}").exists() for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)


def _tear_down(state: ClusterState) -> None:
    """Undo every part of `up`, carrying on past failures; the state (and with it the keys)
    is removed only when everything else went, so a failed `down` can simply be repeated."""
    failures: list[str] = []

    def attempt(step: Callable[[], object]) -> None:
        try:
            step()
        except (RunFailed, OSError) as exc:
            failures.append(str(exc))

    # Always tried: a killed `up` may have started them before it saved their pids.
    attempt(lambda: slurm.stop(state.directory))
    for node in state.nodes:
        attempt(lambda node=node: network.stop_namespace_processes(node.name))
        attempt(lambda node=node: network.delete_namespace(node.name))
        attempt(lambda node=node: network.delete_link(node.host_veth))
    _wait_until_gone([node.sshd_pid for node in state.nodes if node.sshd_pid])
    # Always tried: a killed `up` may have made the groups before it saved them in the state.
    attempt(lambda: cgroups.remove_cluster_groups(cgroupread.detect(), state.name))
    if not _other_dilated(state.name):  # also after a killed `up` that held them unsaved
        attempt(idlestates.release)
        attempt(idlepollers.stop)
    attempt(lambda: network.delete_link(state.bridge))
    key = _cluster_block(state.name)
    attempt(lambda: blocks.remove_block(Path(state.hosts_file), key))
    if state.ssh_config:
        attempt(lambda: blocks.remove_block(Path(state.ssh_config), key))
    if state.mca_params and not [other for other in list_states() if other.name != state.name]:
        attempt(lambda: blocks.remove_block(Path(state.mca_params), MCA_BLOCK))
        attempt(lambda: blocks.remove_created_dir(sshd.PRIVSEP_DIR))
    attempt(lambda: hostfiles.remove_hostfiles(state.name, state.node_names, state.slots))
    if failures:
        raise RunFailed(f"cluster {state.name!r} was not fully removed: " + "; ".join(failures))
    shutil.rmtree(state.directory, ignore_errors=True)


def _other_dilated(name: str) -> bool:
    """Whether a dilated cluster other than `name` is up (it still needs idle cores polling)."""
    return any(other.name != name and other.dilation is not None for other in list_states())


def tear_down(name: str) -> ClusterState | None:
    """Remove everything the cluster made; returns its state (None when it was not up).
    Safe to run twice."""
    with cluster_lock():
        state = load_state(name)
        if state is None:
            _remove_leftover_blocks(name)
            with contextlib.suppress(RunFailed, OSError):
                slurm.stop(cluster_dir(name))
            with contextlib.suppress(RunFailed, OSError):
                cgroups.remove_cluster_groups(cgroupread.detect(), name)
            if not _other_dilated(name):
                idlestates.release()
                with contextlib.suppress(OSError):
                    idlepollers.stop()
            return None
        _tear_down(state)
        return state


def set_bandwidth(name: str, bandwidth: Bandwidth) -> ClusterState:
    """Re-shape every link of a cluster that is up (tc qdisc replace: no ssh, no namespace is
    touched, running connections stay)."""
    with cluster_lock():
        state = load_state(name)
        if state is None or not is_up(state):
            raise UsageError(f"cluster {name!r} is not up")
        for node in state.nodes:
            network.shape_link(
                node.name, node.host_veth, state.bridge, link_rate(bandwidth, state.dilation)
            )
        state.bandwidth = bandwidth
        save_state(state)
        return state


def _remove_leftover_blocks(name: str) -> None:
    # Without a state file (e.g. /run was cleared) the file blocks may still be there.
    with contextlib.suppress(OSError):
        blocks.remove_block(HOSTS_FILE, _cluster_block(name))
        blocks.remove_block(ssh_config_path(), _cluster_block(name))
    if not list_states():
        with contextlib.suppress(OSError):
            blocks.remove_block(mca_params_path(), MCA_BLOCK)
