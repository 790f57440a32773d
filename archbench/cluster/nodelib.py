"""The library preloaded into every process of an emulated node (`native/nodelib.c`), and the
environment a node's sessions get through its sshd.

The library makes idle waits nap instead of spinning (`archbench.cluster.idlewait`) and, on a
time-dilated cluster, keeps every thread in a CFS group of its own capped at 1/D of a core
(`archbench.cluster.threadcaps`). `cluster up` compiles it with the machine's C compiler.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from archbench.cluster.dilation import Dilation
from archbench.cluster.idlewait import NAP_VARIABLE
from archbench.common.errors import RunFailed
from archbench.runtime import virtualtime
from archbench.runtime.virtualtime import LIBRARY_NAME

SOURCE = Path(__file__).resolve().parent / "native" / "nodelib.c"
CAPS_VARIABLE = "ARCHBENCH_THREAD_CAPS"
QUOTA_VARIABLE = "ARCHBENCH_THREAD_QUOTA_US"
PROCESS_QUOTA_VARIABLE = "ARCHBENCH_PROCESS_QUOTA_US"
CGROUP_VARIABLE = "ARCHBENCH_CGROUP"


def build_library(directory: Path) -> Path:
    """Compiles the node library into `directory` (a cluster's own folder); returns its path."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RunFailed(
            "no C compiler (cc) to build the emulated nodes' library (idle naps and thread caps); "
            "install gcc"
        )
    target = directory / LIBRARY_NAME
    built = subprocess.run(
        [compiler, "-O2", "-shared", "-fPIC", "-o", str(target), str(SOURCE), "-ldl"],
        capture_output=True, text=True,
    )  # fmt: skip
    if built.returncode != 0:
        reason = (built.stderr.strip().splitlines() or ["no message"])[-1]
        raise RunFailed(f"building the emulated nodes' library failed: {reason}")
    return target


def node_environment(
    library: Path,
    nap_us: int,
    dilation: Dilation | None = None,
    cluster_group: Path | None = None,
    cgroup: str | None = None,
) -> dict[str, str]:
    """The variables a node's sessions get: the preloaded library, how idle waits nap, and on a
    dilated cluster D, the node's virtual cores and the cluster's cgroup, in which the library
    finds its node's group by the host name (the same variables serve every node)."""
    # The nap is a virtual duration too: D times longer in real time.
    factor = dilation.factor if dilation is not None else 1.0
    env = {"LD_PRELOAD": str(library), NAP_VARIABLE: str(int(round(nap_us * factor)))}
    if dilation is not None and cluster_group is not None:
        env.update(
            {
                virtualtime.DILATION_VARIABLE: f"{dilation.factor:g}",
                virtualtime.PERIOD_VARIABLE: str(dilation.cfs_period_us),
                CAPS_VARIABLE: str(cluster_group),
                QUOTA_VARIABLE: str(dilation.thread_quota_us),
                PROCESS_QUOTA_VARIABLE: str(dilation.process_quota_us),
                CGROUP_VARIABLE: cgroup or "v1",
            }
        )
        env[virtualtime.VCPUS_VARIABLE] = str(dilation.vcpus_per_node)
        env[virtualtime.PROCESS_VCPUS_VARIABLE] = str(dilation.vcpus_per_process)
    return env
