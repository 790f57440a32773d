"""One sshd per node, started inside the node's network namespace and a UTS namespace of its
own (so `hostname` there prints the node name), with a key pair made for this cluster."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from archbench.cluster.cgroups import join_groups
from archbench.cluster.preflight import find_tool
from archbench.common.errors import RunFailed
from archbench.common.safe_text import plain_word

CLIENT_KEY = "id_ed25519"
HOST_KEY = "ssh_host_ed25519_key"
PRIVSEP_DIR = Path("/run/sshd")  # sshd refuses to start without it
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def project_root() -> Path:
    return Path(__file__).resolve().parents[2]


def python_bin_dir() -> Path:
    """The directory of the project's interpreter: the repository's .venv, else this one's."""
    venv_bin = project_root() / ".venv" / "bin"
    if (venv_bin / "python").exists():
        return venv_bin
    return Path(sys.executable).parent


def make_keys(directory: Path, cluster: str) -> None:
    keygen = find_tool("ssh-keygen") or "ssh-keygen"
    for key_name in (CLIENT_KEY, HOST_KEY):
        subprocess.run(
            [keygen, "-q", "-t", "ed25519", "-N", "", "-C", f"archbench-{cluster}",
             "-f", str(directory / key_name)],
            check=True, capture_output=True,
        )  # fmt: skip
    os.chmod(directory / CLIENT_KEY, 0o600)
    os.chmod(directory / HOST_KEY, 0o600)
    (directory / "authorized_keys").write_text((directory / f"{CLIENT_KEY}.pub").read_text())
    os.chmod(directory / "authorized_keys", 0o600)


def remote_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Variables every ssh session on a node gets (sshd SetEnv).

    PATH puts the project's interpreter first so ranks that mpirun or horovodrun start as
    `python` find the venv, and orted is found in /usr/bin. SHLVL=1 stops bash from sourcing
    ~/.bashrc for ssh commands (it does so only for a top-level shell), which on this kind of
    machine would put other interpreters (pyenv shims) ahead of the venv.
    """
    return {
        "PATH": f"{python_bin_dir()}:{SYSTEM_PATH}",
        "SHLVL": "1",
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        **(extra or {}),
    }


def sshd_config_text(
    directory: Path, node: str, pid_file: Path, extra_env: dict[str, str] | None = None
) -> str:
    """A node's sshd_config. Every value is one plain word (UsageError otherwise): sshd reads a
    directive per line and splits values at blanks and quotes."""
    setenv = " ".join(
        f'"{plain_word(key, "variable")}={plain_word(value, f"the value of {key}")}"'
        for key, value in remote_environment(extra_env).items()
    )
    folder = plain_word(str(directory), "the cluster's folder")
    node = plain_word(node, "node name")
    return "\n".join(
        [
            f"# sshd of emulated node {node} (written by `archbench cluster up`)",
            "Port 22",
            "AddressFamily inet",
            "ListenAddress 0.0.0.0",
            f"HostKey {folder}/{HOST_KEY}",
            f"PidFile {plain_word(str(pid_file), 'the pid file')}",
            f"AuthorizedKeysFile {folder}/authorized_keys",
            "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "PrintMotd no",
            "PrintLastLog no",
            "X11Forwarding no",
            "UseDNS no",
            # mpirun and horovodrun open many sessions at once.
            "MaxStartups 100:30:200",
            "MaxSessions 100",
            "LogLevel ERROR",
            f"SetEnv {setenv}",
            "Subsystem sftp internal-sftp",
            "",
        ]
    )


def ensure_privsep_dir() -> bool:
    """Create /run/sshd when missing; returns whether it was created."""
    if PRIVSEP_DIR.is_dir():
        return False
    PRIVSEP_DIR.mkdir(mode=0o755, parents=True)
    return True


def start_sshd(
    namespace: str,
    hostname: str,
    config: Path,
    log: Path,
    cgroup_dirs: list[Path] | None = None,
    mount_script: str = "",
) -> int:
    """Start sshd in the foreground inside the node; the returned pid is sshd's own
    (`ip netns exec`, `unshare` and `sh -c 'exec ...'` all exec in place). With `cgroup_dirs`
    the shell joins the node's CPU-budget groups before it becomes sshd, so sshd and everything
    it starts (sessions, orted, ranks) run inside the budget from their first instruction;
    `mount_script` runs in the node's mount namespace first (the cgroup trees, so that ranks
    can read their budget)."""
    sshd = find_tool("sshd")
    if sshd is None:
        raise RunFailed("sshd not found")
    return start_in_node(
        namespace, hostname, [sshd, "-D", "-f", str(config), "-E", str(log)], log,
        cgroup_dirs, mount_script,
    )  # fmt: skip


def start_in_node(
    namespace: str,
    hostname: str,
    argv: list[str],
    log: Path,
    cgroup_dirs: list[Path] | None = None,
    mount_script: str = "",
) -> int:
    """Start a daemon in the foreground inside a node: its network namespace, a UTS namespace
    named `hostname`, a mount namespace where `mount_script` ran, and its CPU-budget groups
    (joined before exec). Returns the daemon's own pid; its stderr goes to `log`."""
    command = [
        "ip", "netns", "exec", namespace, "unshare", "--uts", "--",
        "sh", "-c", (mount_script + " && " if mount_script else "")
        + 'hostname "$1" && shift && exec "$@"', "sh", hostname, *argv,
    ]  # fmt: skip
    with open(log, "ab") as log_handle:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log_handle,
            start_new_session=True,
            close_fds=True,
            # Joined in the child before exec, from the host's view of /sys (`ip netns exec`
            # mounts a /sys without the cgroup trees): no instant outside the budget.
            preexec_fn=(lambda: join_groups(cgroup_dirs)) if cgroup_dirs else None,
        )
    return process.pid


def wait_until_listening(address: str, pid: int, log: Path, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            detail = log.read_text().strip() if log.exists() else ""
            raise RunFailed(f"sshd for {address} exited: {detail or 'no log'}")
        with contextlib.suppress(OSError), socket.create_connection((address, 22), timeout=0.5):
            return
        time.sleep(0.05)
    raise RunFailed(f"sshd at {address}:22 did not answer within {timeout_s:.0f} s")


def pid_alive(pid: int | None) -> bool:
    """Running (a zombie counts as gone)."""
    if not pid:
        return False
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return status.rsplit(")", 1)[1].split()[0] != "Z"


def pid_is_sshd(pid: int | None) -> bool:
    try:
        return pid_alive(pid) and Path(f"/proc/{pid}/comm").read_text().strip() == "sshd"
    except OSError:
        return False
