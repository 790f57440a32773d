"""Slurm on an emulated cluster (`archbench cluster up --slurm`): a munged and a slurmctld of the
cluster's own on the host, one slurmd inside each node.

Everything lives in the cluster's state folder: `slurm.conf` (and `cgroup.conf` beside it, where
Slurm looks for it), munge's key, socket and log under `munge/`, the controller's state, pid and
log and every node's spool, pid and log (`slurm/<node>/`) under `slurm/`. Users point Slurm's
commands at the configuration with `SLURM_CONF` (`archbench cluster env --name NAME`).

Each slurmd starts as the node's sshd does: in the node's network namespace, a UTS namespace
whose hostname is the node's name, and the node's CPU-budget groups, joined before it execs, so
job steps (and the ranks an `mpirun` starts through `srun`) run inside the node's budget. The
daemons are found again by the state folder in their command lines, so `down` stops them also
after an `up` that was killed before it saved their pids.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import subprocess
import time
from pathlib import Path

from archbench.cluster.network import terminate
from archbench.cluster.preflight import find_tool
from archbench.cluster.sshd import pid_alive, start_in_node
from archbench.cluster.state import ClusterState
from archbench.common.errors import RunFailed, UsageError
from archbench.common.safe_text import plain_word

CONF = "slurm.conf"
CGROUP_CONF = "cgroup.conf"
MUNGE_DIR = "munge"
SLURM_DIR = "slurm"
# tool -> Debian package that provides it
TOOLS: dict[str, str] = {
    "munged": "munge",
    "mungekey": "munge",
    "slurmctld": "slurmctld",
    "slurmd": "slurmd",
    "sinfo": "slurm-client",
    "srun": "slurm-client",
    "scontrol": "slurm-client",
}
# slurmctld listens on the host, where the controllers of several clusters may run at once:
# each takes a port of its own, from the cluster's subnet index (1..250), on the cluster's bridge
# address only (CommunicationParameters=NoCtldInAddrAny), not on every address of the host.
CONTROLLER_PORT_BASE = 6900
# The unprivileged accounts Debian's slurmctld and munge packages create: slurmctld drops to
# SlurmUser, munged is started as its own. slurmd stays root: it starts job steps as their users.
SLURM_USER = "slurm"
MUNGE_USER = "munge"
SLURMD_PORT = 6818  # every slurmd has a network namespace of its own
READY_TIMEOUT_S = 60.0
STOP_GRACE_S = 5.0


def unavailable_reason() -> str | None:
    """Why Slurm cannot run on an emulated cluster here (None when it can)."""
    missing = sorted(
        {f"{tool} ({package})" for tool, package in TOOLS.items() if not find_tool(tool)}
    )
    if missing:
        return "Slurm on the emulated cluster needs tools that are missing: " + ", ".join(missing)
    return None


def require_support() -> None:
    reason = unavailable_reason()
    if reason is not None:
        raise UsageError(reason)


def conf_path(directory: Path) -> Path:
    return directory / CONF


def controller_port(state: ClusterState) -> int:
    return CONTROLLER_PORT_BASE + state.subnet_index


def controller_host(state: ClusterState) -> str:
    """The controller's host name. slurmctld runs only where its host name is SlurmctldHost, and
    with NoCtldInAddrAny it listens on the address that name resolves to: it runs in a UTS
    namespace of its own named this, which the cluster's /etc/hosts block maps to the bridge."""
    return f"{state.prefix}ctld"  # node names are the prefix and a number: never this


def node_cpus(state: ClusterState) -> int:
    """CPUs Slurm gives a node: its virtual cores (1 without a total), at least its slots."""
    return max(state.vcpus_per_node or 1, state.slots, 1)


def partition(state: ClusterState) -> str:
    return state.name


def account(name: str) -> str | None:
    """`name` when that user exists on this machine (None: the daemon runs as root)."""
    try:
        pwd.getpwnam(name)
    except KeyError:
        return None
    return name


def _give_to(path: Path, user: str | None) -> None:
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(path, entry.pw_uid, entry.pw_gid)


def conf_text(state: ClusterState) -> str:
    """slurm.conf. Every value is one plain word (UsageError otherwise): slurm.conf reads a
    `Key=value` per line and splits lines at blanks."""
    directory = Path(plain_word(str(state.directory), "the cluster's folder"))
    plain_word(state.name, "cluster name")
    host = plain_word(controller_host(state), "the controller's name")
    for node in state.nodes:
        plain_word(node.name, "node name")
        plain_word(node.address, "node address")
    munge = directory / MUNGE_DIR
    slurm = directory / SLURM_DIR
    lines = [
        f"# Slurm of emulated cluster {state.name} (written by `archbench cluster up --slurm`)",
        f"ClusterName={state.name.lower()}",
        f"SlurmctldHost={host}({state.bridge_address})",
        f"SlurmctldPort={controller_port(state)}",
        # slurmctld binds to the SlurmctldHost address above: the bridge, reached from the nodes
        # and the host alone, not every address of the machine.
        "CommunicationParameters=NoCtldInAddrAny",
        f"SlurmdPort={SLURMD_PORT}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={munge / 'munge.socket'}",
        f"SlurmUser={account(SLURM_USER) or 'root'}",
        "SlurmdUser=root",
        # the controller's own folder, which SlurmUser owns
        f"StateSaveLocation={slurm / 'ctld'}",
        f"SlurmctldPidFile={slurm / 'ctld' / 'slurmctld.pid'}",
        f"SlurmctldLogFile={slurm / 'ctld' / 'slurmctld.log'}",
        # %n: the node's name, so the slurmds of one machine keep apart.
        f"SlurmdSpoolDir={slurm / '%n'}",
        f"SlurmdPidFile={slurm / '%n' / 'slurmd.pid'}",
        f"SlurmdLogFile={slurm / '%n' / 'slurmd.log'}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        f"TaskProlog={slurm / 'task_prolog.sh'}",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "SchedulerType=sched/backfill",
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "JobCompType=jobcomp/none",
        "MpiDefault=none",
        "SwitchType=switch/none",
        "MailProg=/bin/true",
        # A node is idle as soon as its slurmd registers; the configured CPUs count, not the
        # machine's cores that every node sees.
        "ReturnToService=2",
        "SlurmdParameters=config_overrides",
        "KillWait=5",
        "InactiveLimit=0",
    ]
    cpus = node_cpus(state)
    for node in state.nodes:
        lines.append(f"NodeName={node.name} NodeAddr={node.address} CPUs={cpus} State=UNKNOWN")
    lines.append(
        f"PartitionName={partition(state)} Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
    )
    return "\n".join(lines) + "\n"


def cgroup_conf_text() -> str:
    # slurmd initialises its cgroup plugin even with proctrack/linuxproc and task/none; a node
    # has no systemd to ask (cgroup v2).
    return "CgroupPlugin=autodetect\nIgnoreSystemd=yes\n"


def task_prolog_text(node_env: dict[str, str]) -> str:
    """Every task of a job gets what a node's ssh session gets from its sshd: the node library
    (idle-wait naps, thread caps) and the dilation."""
    exports = ""
    for key, value in node_env.items():
        assignment = f"{plain_word(key, 'variable')}={plain_word(value, 'its value')}"
        exports += f"echo 'export {assignment}'\n"
    return (
        "#!/bin/sh\n# Variables every task on an emulated node gets (archbench cluster up --slurm)\n"
        + exports
    )


def _slurmd_mount_script(cgroup_script: str, version: str | None) -> str:
    """The node's cgroup trees for slurmd: the budget's trees, and on cgroup v1 the systemd
    named hierarchy, which Slurm's v1 plugin insists on finding."""
    parts = [cgroup_script] if cgroup_script else []
    if version == "v1":
        parts.append(
            "mkdir -p /sys/fs/cgroup/systemd && "
            "mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd"
        )
    return " && ".join(parts)


def client_env(directory: Path) -> dict[str, str]:
    return {**os.environ, "SLURM_CONF": str(conf_path(directory))}


def start(
    state: ClusterState,
    node_env: dict[str, str],
    cgroup_script: str,
    cgroup_version: str | None,
    timeout_s: float = READY_TIMEOUT_S,
) -> dict:
    """Writes the configuration, starts munged, slurmctld and the slurmds, and waits until every
    node is idle; returns what the state keeps. RunFailed (one line) when it does not get there."""

    directory = state.directory
    munge = directory / MUNGE_DIR
    slurm = directory / SLURM_DIR
    # munged wants its socket's folder open to all, and its key readable by its owner only.
    munge.mkdir(mode=0o755, exist_ok=True)
    munge.chmod(0o755)
    munge_user, slurm_user = account(MUNGE_USER), account(SLURM_USER)
    _give_to(munge, munge_user)
    (slurm / "ctld").mkdir(parents=True, exist_ok=True)
    _give_to(slurm / "ctld", slurm_user)
    for node in state.nodes:
        (slurm / node.name).mkdir(exist_ok=True)
    host = controller_host(state)
    conf = conf_path(directory)
    conf.write_text(conf_text(state))
    (directory / CGROUP_CONF).write_text(cgroup_conf_text())
    prolog = slurm / "task_prolog.sh"
    prolog.write_text(task_prolog_text(node_env))
    prolog.chmod(0o755)
    key = munge / "munge.key"
    _run([find_tool("mungekey") or "mungekey", "--create", f"--keyfile={key}"], "mungekey")
    key.chmod(0o600)
    _give_to(key, munge_user)
    pids: dict[str, int] = {}
    pids["munged"] = _start_daemon(
        [find_tool("munged") or "munged", "--foreground",
         f"--socket={munge / 'munge.socket'}", f"--key-file={key}",
         f"--pid-file={munge / 'munged.pid'}", f"--log-file={munge / 'munged.log'}",
         f"--seed-file={munge / 'munged.seed'}"],
        munge / "munged.out", user=munge_user,
    )  # fmt: skip
    _wait_for(lambda: (munge / "munge.socket").exists(), pids["munged"], "munged",
              munge / "munged.out", 10.0)  # fmt: skip
    # As root, in a UTS namespace named `host` (so it binds to the bridge address); it drops to
    # SlurmUser itself. `unshare` and `sh` exec in place: the pid is slurmctld's.
    pids["slurmctld"] = _start_daemon(
        ["unshare", "--uts", "--", "sh", "-c", 'hostname "$1" && shift && exec "$@"', "sh", host,
         find_tool("slurmctld") or "slurmctld", "-D", "-f", str(conf)],
        slurm / "slurmctld.out",
    )  # fmt: skip
    mount = _slurmd_mount_script(cgroup_script, cgroup_version)
    for node in state.nodes:
        log = slurm / f"{node.name}.out"
        pids[node.name] = start_in_node(
            node.name, node.name,
            [find_tool("slurmd") or "slurmd", "-D", "-N", node.name, "-f", str(conf)],
            log, [Path(path) for path in node.cgroup_dirs], mount,
        )  # fmt: skip
    info = {
        "conf": str(conf),
        "controller": f"{host} ({state.bridge_address}:{controller_port(state)})",
        "partition": partition(state),
        "cpus_per_node": node_cpus(state),
        "users": {"munged": munge_user or "root", "slurmctld": slurm_user or "root"},
        "pids": pids,
    }
    wait_until_idle(state, pids, timeout_s)
    return info


def _run(argv: list[str], what: str) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise RunFailed(f"{what} failed: {detail[-1] if detail else result.returncode}")


def _start_daemon(argv: list[str], output: Path, user: str | None = None) -> int:
    """Starts a daemon in the foreground of its own session, as `user` (None: as this process)."""
    with open(output, "ab") as handle:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            cwd="/",
            user=user,
            group=pwd.getpwnam(user).pw_gid if user is not None else None,
            extra_groups=[] if user is not None else None,
        )
    return process.pid


def _last_error(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines()]
    except OSError:
        return "no log"
    errors = [line for line in lines if "error" in line.lower()]
    return (errors or [line for line in lines if line] or ["no log"])[-1]


def _wait_for(ready, pid: int, what: str, log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if not pid_alive(pid):
            raise RunFailed(f"{what} exited: {_last_error(log)}")
        if time.monotonic() > deadline:
            raise RunFailed(f"{what} was not ready within {timeout_s:.0f} s: {_last_error(log)}")
        time.sleep(0.1)


def node_states(directory: Path, timeout_s: float = 10.0) -> dict[str, str]:
    """{node: Slurm state} as `sinfo` reports it (e.g. idle, alloc, down*); {} when Slurm does
    not answer."""
    try:
        result = subprocess.run(
            [find_tool("sinfo") or "sinfo", "-h", "-N", "-o", "%N %T"],
            capture_output=True, text=True, timeout=timeout_s, env=client_env(directory),
            check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if result.returncode != 0:
        return {}
    states = {}
    for line in result.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2:
            states[parts[0]] = parts[1].lower()
    return states


def wait_until_idle(state: ClusterState, pids: dict[str, int], timeout_s: float) -> None:
    directory = state.directory
    slurm = directory / SLURM_DIR
    deadline = time.monotonic() + timeout_s
    states: dict[str, str] = {}
    while True:
        for what, pid in pids.items():
            if not pid_alive(pid):
                log = {
                    "munged": directory / MUNGE_DIR / "munged.out",
                    "slurmctld": slurm / "slurmctld.out",
                }.get(what, slurm / f"{what}.out")
                name = what if what in ("munged", "slurmctld") else f"slurmd of {what}"
                raise RunFailed(f"{name} exited: {_last_error(log)}")
        states = node_states(directory, timeout_s=5.0)
        if states and all(states.get(node) == "idle" for node in state.node_names):
            return
        if time.monotonic() > deadline:
            seen = ", ".join(f"{n} {states.get(n, 'unknown')}" for n in state.node_names)
            raise RunFailed(
                f"Slurm did not report every node idle within {timeout_s:.0f} s ({seen}); "
                f"see {slurm}/ctld/slurmctld.log and {slurm}/<node>/slurmd.log"
            )
        time.sleep(0.3)


def daemon_pids(directory: Path) -> list[int]:
    """Processes of this cluster's munged, slurmctld and slurmds (and the slurmstepds they run):
    those whose command line names a file of the cluster's state folder and whose program is
    one of them."""
    marker = (str(directory).rstrip("/") + "/").encode()
    names = {"munged", "slurmctld", "slurmd", "slurmstepd"}
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            comm = (entry / "comm").read_text().strip()
            if comm not in names:
                continue
            cmdline = (entry / "cmdline").read_bytes()
            if marker in cmdline or (comm == "slurmstepd" and _stepd_of(entry, directory)):
                found.append(int(entry.name))
    return found


def _stepd_of(entry: Path, directory: Path) -> bool:
    # slurmstepd's argv does not name the configuration; its open files (spool, logs) do.
    with contextlib.suppress(OSError):
        for fd in (entry / "fd").iterdir():
            with contextlib.suppress(OSError):
                if os.readlink(fd).startswith(str(directory) + "/"):
                    return True
    return False


def stop(directory: Path, grace_s: float = STOP_GRACE_S) -> None:
    """TERM, then KILL, this cluster's Slurm and munge daemons; waits until they are gone."""
    pids = daemon_pids(directory)
    left = terminate(lambda: [pid for pid in pids if _alive(pid)], grace_s, kill_wait_s=2.0)
    if left:
        raise RunFailed(f"Slurm daemons {', '.join(map(str, left))} did not stop")


def _alive(pid: int) -> bool:
    return pid_alive(pid)


def _pid_is(pid: int | None, program: str) -> bool:
    try:
        return _alive(pid) and Path(f"/proc/{pid}/comm").read_text().strip() == program
    except (OSError, TypeError):
        return False


def dead_daemons(state: ClusterState) -> list[str]:
    """The daemons `up` started that are no longer running (names as `status` prints them)."""
    pids = (state.slurm or {}).get("pids", {})
    dead = [name for name in ("munged", "slurmctld") if not _pid_is(pids.get(name), name)]
    dead += [
        f"slurmd of {node}" for node in state.node_names if not _pid_is(pids.get(node), "slurmd")
    ]
    return dead


# One status (healthy, then describe) asks sinfo once.
_SNAPSHOT: dict[str, tuple[float, list[str], dict[str, str]]] = {}


def _snapshot(state: ClusterState) -> tuple[list[str], dict[str, str]]:
    key = str(state.directory)
    cached = _SNAPSHOT.get(key)
    if cached is not None and time.monotonic() - cached[0] < 2.0:
        return cached[1], cached[2]
    dead = dead_daemons(state)
    states = {} if "slurmctld" in dead else node_states(state.directory, timeout_s=5.0)
    _SNAPSHOT[key] = (time.monotonic(), dead, states)
    return dead, states


def describe(state: ClusterState) -> list[str]:
    """Lines for `archbench cluster status`."""
    info = state.slurm or {}
    dead, states = _snapshot(state)
    if states:
        answer = ", ".join(f"{node} {states.get(node, 'unknown')}" for node in state.node_names)
    else:
        answer = "slurmctld does not answer"
    if dead:
        answer += f"; NOT RUNNING: {', '.join(dead)}"
    return [
        f"  slurm: partition {info.get('partition')}, controller {info.get('controller')}, "
        f"{info.get('cpus_per_node')} CPUs per node; {answer}",
        f"  export SLURM_CONF={info.get('conf')}",
    ]


def healthy(state: ClusterState) -> bool:
    """Every daemon runs and Slurm reports no node down, drained, failing or not responding."""
    if not state.slurm:
        return True
    dead, states = _snapshot(state)
    return (
        not dead
        and bool(states)
        and all(
            not states.get(node, "down").startswith(("down", "drain", "fail", "unk"))
            and not states.get(node, "").endswith("*")
            for node in state.node_names
        )
    )
