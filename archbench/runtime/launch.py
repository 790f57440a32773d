"""Who am I in the job: rank, world size and launcher, read from the environment the launcher set.

Nothing here imports TensorFlow, Horovod or MPI: the backends decide which communication library
to initialise, and this module only says what the launcher told the process.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

from archbench.common.archs import CHIEF_ROLE, SERVER_ROLE, WORKER_ROLE
from archbench.common.jsonl import loads
from archbench.runtime.emulation import (
    cap_period_s,
    factor,
    node_vcpus,
    process_budget,
    process_vcpus,
    usable_cores,
)

# (rank, size, local rank, local size) variables, by launcher family
_ENV_LAYOUTS = (
    ("horovodrun", "HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE"),
    (
        "mpirun",
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_SIZE",
    ),
    ("mpirun", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    ("slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"),
)


@dataclass(frozen=True)
class ProcessPlace:
    rank: int
    size: int
    local_rank: int
    local_size: int
    launcher: str  # "horovodrun" | "mpirun" | "slurm" | "tf_config" | "none"
    hostname: str

    @property
    def under_mpi(self) -> bool:
        return "OMPI_COMM_WORLD_RANK" in os.environ or "PMI_RANK" in os.environ


def _started_by_horovodrun() -> bool:
    """horovodrun's Gloo mode sets HOROVOD_RANK; its MPI mode execs an mpirun it marks with
    `-x NCCL_SOCKET_IFNAME=...`, visible in the launcher's command line."""
    if "HOROVOD_RANK" in os.environ:
        return True
    argv = launcher_command() or []
    return any("horovodrun" in arg or arg.startswith("NCCL_SOCKET_IFNAME=") for arg in argv)


def detect_place() -> ProcessPlace:
    hostname = socket.gethostname()
    for launcher, rank_var, size_var, local_rank_var, local_size_var in _ENV_LAYOUTS:
        if rank_var in os.environ and size_var in os.environ:
            rank = int(os.environ[rank_var])
            size = int(os.environ[size_var])
            local_rank = int(os.environ.get(local_rank_var, "0"))
            local_size_text = os.environ.get(local_size_var, "1").split("(")[0].split(",")[0]
            local_size = int(local_size_text or 1)
            if launcher == "mpirun" and _started_by_horovodrun():
                launcher = "horovodrun"
            return ProcessPlace(rank, size, local_rank, local_size, launcher, hostname)
    from_tf_config = _tf_config_place(hostname)
    if from_tf_config is not None:
        return from_tf_config
    return ProcessPlace(0, 1, 0, 1, "none", hostname)


def _tf_config_place(hostname: str) -> ProcessPlace | None:
    """Rank and size from TF_CONFIG (TensorFlow's own cluster description, no launcher).

    Ranks follow the parameter-server order: ps tasks, then the chief (if listed), then workers.
    A TF_CONFIG that does not parse is left to the backend to report.
    """
    text = os.environ.get("TF_CONFIG")
    if not text:
        return None
    try:
        value = loads(text)
        cluster, task = value["cluster"], value["task"]
        order = [
            (job, index, str(address))
            for job in (SERVER_ROLE, CHIEF_ROLE, WORKER_ROLE)
            for index, address in enumerate(cluster.get(job, []))
        ]
        rank = [(job, index) for job, index, _ in order].index((task["type"], int(task["index"])))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    host = order[rank][2].rsplit(":", 1)[0]
    on_my_host = [r for r, entry in enumerate(order) if entry[2].rsplit(":", 1)[0] == host]
    return ProcessPlace(
        rank, len(order), on_my_host.index(rank), len(on_my_host), "tf_config", hostname
    )


def host_cpus() -> float:
    """The CPUs this process may use: its affinity, or less where a cgroup CPU budget (a
    container's, a job's) caps it; on a time-dilated node, the virtual cores its ranks may use
    together (V, or P per rank where that is less)."""
    cores = float(usable_cores())
    vcpus = node_vcpus()
    if vcpus is not None:
        return float(vcpus)
    budget = process_budget()
    return min(cores, budget.cpus) if budget is not None else cores


# A probe's compute phase on a CPU-budgeted process spans this many CFS periods (see
# compute_window_s).
COMPUTE_WINDOW_PERIODS = 10


def compute_window_s(requested_ms: float | None) -> float:
    """How long a probe repeats its compute phase (seconds; 0: one pass).

    Under a CFS quota a core runs at full speed until the period's quota is spent, then stalls
    until the next period: one forward + backward pass shorter than a period or two takes
    0.6 ms or 6 ms depending on where in the period it started, and a rank that waited on the
    network starts with a fresh quota while a busy one does not. Passes repeated over ten
    periods measure what the budget delivers, within a tenth of a period. Without a quota (a
    host of its own) one pass is exact."""
    if requested_ms is not None:
        return requested_ms / 1000 * factor()  # a virtual duration, like every one a user gives
    period_s = cap_period_s()  # a dilated node: the threads' caps
    if period_s is not None:
        return COMPUTE_WINDOW_PERIODS * period_s
    budget = process_budget()
    return COMPUTE_WINDOW_PERIODS * budget.period_us / 1e6 if budget is not None else 0.0


# Steps are summarised over blocks this many of a dilated node's CFS periods long (see
# archbench.runtime.loop.step_blocks).
STEP_BLOCK_PERIODS = 4


def step_block_s() -> float:
    """Real seconds a block of steps spans on a time-dilated node (0 elsewhere: single steps)."""
    period_s = cap_period_s()
    return STEP_BLOCK_PERIODS * period_s if period_s is not None else 0.0


def threads_per_process(requested: int, local_size: int) -> int:
    """TensorFlow threads per process: `requested`, else this host's CPUs split between the ranks
    on it, so ranks do not fight for cores (on a dilated node, at most the process's own virtual
    cores)."""
    if requested > 0:
        return requested
    threads = max(1, round(host_cpus() / max(1, local_size)))
    per_process = process_vcpus()
    return min(threads, per_process) if per_process is not None else threads


LAUNCHER_NAMES = ("mpirun", "mpiexec", "orterun", "horovodrun", "srun", "prun")


def _argv_of(pid: int) -> list[str]:
    with open(f"/proc/{pid}/cmdline", "rb") as handle:
        return [part.decode(errors="replace") for part in handle.read().split(b"\0") if part]


def _is_launcher(argv: list[str]) -> bool:
    return any(os.path.basename(arg) in LAUNCHER_NAMES for arg in argv[:2])


def launcher_command() -> list[str] | None:
    """The argv of the launcher that started this process, where this host can see it.

    First up the process tree (ranks mpirun forked itself), then through a remote daemon.
    """
    pid = os.getppid()
    for _ in range(8):
        try:
            argv = _argv_of(pid)
            if _is_launcher(argv):
                return argv
            pid = _parent_pid(pid)
        except (OSError, ValueError, IndexError):
            break
        if pid <= 1:
            break
    return _launcher_of_remote_daemon()


def _parent_pid(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as handle:
        return int(handle.read().rsplit(")", 1)[1].split()[1])


def _launcher_of_remote_daemon() -> list[str] | None:
    """mpirun starts a rank's daemon on another host with `ssh HOST orted ... <hnp uri>`; where
    this host shares the launcher's process table (the emulated cluster), that ssh's parent is
    the launcher. Elsewhere nothing matches and the answer is None."""
    hnp_uri = os.environ.get("OMPI_MCA_orte_hnp_uri", "")
    job = hnp_uri.split(";", 1)[0].encode()
    if not job:
        return None
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read()
            first_arg = cmdline.split(b"\0", 1)[0]
            if b"orted" not in cmdline or job not in cmdline or not first_arg.endswith(b"ssh"):
                continue
            argv = _argv_of(_parent_pid(int(entry)))
        except (OSError, ValueError, IndexError):
            continue
        if _is_launcher(argv):
            return argv
    return None


def root_mpi_env() -> dict[str, str]:
    """Open MPI refuses to run as root without these."""
    if os.geteuid() != 0:
        return {}
    return {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
