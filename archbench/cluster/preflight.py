"""Checks made before touching the machine: root, and the tools the cluster is built with."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable

from archbench.common.errors import UsageError

# tool -> Debian package that provides it
REQUIRED_TOOLS: dict[str, str] = {
    "ip": "iproute2",
    "tc": "iproute2",
    "sshd": "openssh-server",
    "ssh": "openssh-client",
    "ssh-keygen": "openssh-client",
    "unshare": "util-linux",
    "hostname": "hostname",
}
# sshd and ip live in sbin, which is not on every user's PATH.
_SBIN_DIRS = "/usr/local/sbin:/usr/sbin:/sbin"


def find_tool(name: str) -> str | None:
    """Absolute path of a tool on PATH or in the sbin directories."""
    search_path = os.environ.get("PATH", "") + os.pathsep + _SBIN_DIRS
    return shutil.which(name, path=search_path)


def cluster_unavailable_reason(
    euid: int | None = None, find: Callable[[str], str | None] = find_tool
) -> str | None:
    """Why an emulated cluster cannot be built here (None when it can)."""
    euid = os.geteuid() if euid is None else euid
    if euid != 0:
        return (
            f"the emulated cluster needs root (network namespaces, veth links, sshd); "
            f"running as uid {euid}"
        )
    missing = [f"{tool} ({package})" for tool, package in REQUIRED_TOOLS.items() if not find(tool)]
    if missing:
        return "the emulated cluster needs tools that are missing: " + ", ".join(missing)
    return None


def require_cluster_support(
    euid: int | None = None, find: Callable[[str], str | None] = find_tool
) -> None:
    reason = cluster_unavailable_reason(euid, find)
    if reason is not None:
        raise UsageError(reason)
