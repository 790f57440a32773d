"""The parameter-server cluster: which rank is which task, and at which host:port it listens.

Ranks 0..K-1 are the parameter servers (`ps` job), ranks K..N-1 the workers (`worker` job; the
first is the chief). Two ways to learn the addresses:

- under an MPI launcher, every rank picks a free port on its own host and the ranks exchange
  host:port over MPI, so the hostfile alone decides where each task runs;
- from a `TF_CONFIG` environment variable, as TensorFlow users write it
  (`{"cluster": {"ps": [...], "worker": [...]}, "task": {"type": "worker", "index": 0}}`; a
  `chief` job, if present, is worker 0).

Nothing here imports TensorFlow.
"""

from __future__ import annotations

import fcntl
import os
import random
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

from archbench.common.archs import CHIEF_ROLE, SERVER_ROLE, WORKER_ROLE
from archbench.common.errors import RunFailed, UsageError
from archbench.common.jsonl import loads

# Ports are picked below the kernel's ephemeral range, so outgoing connections (which take
# ephemeral ports) never grab a port between its pick and the server's bind.
PORT_RANGE = (20000, 32767)
ADDRESS_ENV = "ARCHBENCH_PS_ADDRESS"  # overrides the address this rank advertises
LOOPBACK = "127.0.0.1"
SIOCGIFADDR = 0x8915


@dataclass(frozen=True)
class Task:
    job: str  # "ps" | "worker"
    index: int
    rank: int
    address: str  # host:port

    @property
    def host(self) -> str:
        return self.address.rsplit(":", 1)[0]

    @property
    def port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])

    @property
    def device(self) -> str:
        return f"/job:{self.job}/task:{self.index}"

    def describe(self) -> str:
        name = "parameter server" if self.job == SERVER_ROLE else "worker"
        if self.job == "worker" and self.index == 0:
            name = "chief worker"
        return f"{name} {self.job}/{self.index} (rank {self.rank} at {self.address})"


@dataclass(frozen=True)
class ClusterLayout:
    ps: tuple[str, ...]
    workers: tuple[str, ...]
    rank: int
    source: str  # "mpi" | "tf_config"

    @property
    def num_ps(self) -> int:
        return len(self.ps)

    @property
    def num_workers(self) -> int:
        return len(self.workers)

    @property
    def tasks(self) -> list[Task]:
        """Every task in rank order: servers first, then workers."""
        return [Task("ps", i, i, a) for i, a in enumerate(self.ps)] + [
            Task("worker", i, self.num_ps + i, a) for i, a in enumerate(self.workers)
        ]

    @property
    def me(self) -> Task:
        return self.tasks[self.rank]

    def ps_tasks(self) -> list[Task]:
        return self.tasks[: self.num_ps]

    def worker_tasks(self) -> list[Task]:
        return self.tasks[self.num_ps :]

    def tf_cluster(self) -> dict[str, list[str]]:
        return {"ps": list(self.ps), "worker": list(self.workers)}


def role_of_rank(rank: int, num_ps: int) -> str:
    if rank < num_ps:
        return "ps"
    return "chief" if rank == num_ps else "worker"


# --------------------------------------------------------------------------- liveness


LISTENING, REFUSED, NO_ANSWER = "listening", "refused", "no answer"


def probe(address: str, timeout: float = 1.0) -> str:
    """`listening`; `refused` (the host answered that nothing listens there: the process is
    gone); or `no answer` in time (a busy or shaped link can drop a connection's first packet,
    and the retry comes a second later, so this alone does not say the process is gone)."""
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return LISTENING
    except ConnectionRefusedError:
        return REFUSED
    except OSError:
        return NO_ANSWER


def is_listening(address: str, timeout: float = 1.0) -> bool:
    """True when something accepts TCP connections at host:port (a live server)."""
    return probe(address, timeout) == LISTENING


def unreachable(tasks: list[Task], timeout: float = 1.0) -> list[Task]:
    return [task for task in tasks if not is_listening(task.address, timeout)]


def wait_until_listening(tasks: list[Task], timeout_s: float, what: str) -> None:
    """Waits (bounded) until every task accepts connections; names those that never did."""
    deadline = time.monotonic() + timeout_s
    missing = list(tasks)
    while True:
        missing = unreachable(missing, timeout=min(1.0, timeout_s))
        if not missing:
            return
        if time.monotonic() >= deadline:
            names = "; ".join(task.describe() for task in missing)
            raise RunFailed(f"{what}: {names} did not come up within {timeout_s:g} s")
        time.sleep(0.2)


# --------------------------------------------------------------------------- addresses


def network_identity() -> str:
    """Equal for two processes exactly when they share a host and a network namespace."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            boot = handle.read().strip()
        return f"{boot}/{os.stat('/proc/self/ns/net').st_ino}"
    except OSError:
        return socket.gethostname()


def local_ipv4_addresses() -> list[str]:
    """IPv4 addresses of this network namespace's interfaces, loopback excluded."""
    found = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for _, name in socket.if_nameindex():
            request = struct.pack("256s", name.encode()[:15])
            try:
                reply = fcntl.ioctl(probe.fileno(), SIOCGIFADDR, request)
            except OSError:
                continue  # no IPv4 address on this interface
            address = socket.inet_ntoa(reply[20:24])
            if not address.startswith("127."):
                found.append(address)
    return found


def _bindable(address: str) -> bool:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((address, 0))
        return True
    except OSError:
        return False


def reachable_address() -> str:
    """The address other hosts can reach this process at.

    ARCHBENCH_PS_ADDRESS if set; else what this host's name resolves to, when that is an address
    of this network namespace other than loopback; else the first non-loopback address here.
    """
    override = os.environ.get(ADDRESS_ENV)
    if override:
        return override
    try:
        resolved = socket.gethostbyname(socket.gethostname())
    except OSError:
        resolved = None
    if resolved and not resolved.startswith("127.") and _bindable(resolved):
        return resolved
    addresses = local_ipv4_addresses()
    return addresses[0] if addresses else LOOPBACK


def pick_free_port(rng: random.Random | None = None) -> int:
    """A port nobody listens on now (IPv4 and IPv6 wildcard), outside the ephemeral range."""
    rng = rng or random.Random()
    for _ in range(200):
        port = rng.randint(*PORT_RANGE)
        if _port_free(port):
            return port
    raise RunFailed(f"no free port found in {PORT_RANGE[0]}..{PORT_RANGE[1]}")


def _port_free(port: int) -> bool:
    families = [(socket.AF_INET, "")]
    if socket.has_ipv6:
        families.append((socket.AF_INET6, "::"))
    for family, host in families:
        try:
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                if family == socket.AF_INET6:
                    probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                probe.bind((host, port))
        except OSError as exc:
            if family == socket.AF_INET6 and exc.errno == 97:  # no IPv6 here: fine
                continue
            return False
    return True


def layout_over_mpi(
    allgather: Callable[[object], list], rank: int, num_ps: int, attempts: int = 5
) -> ClusterLayout:
    """Every rank picks a port; the ranks exchange (network, address, port) over MPI (collective).

    Ranks that all share one host and network namespace talk over loopback; otherwise each rank
    advertises its reachable address. A port picked twice on one address is picked again.
    """
    rng = random.Random((os.getpid() << 16) ^ time.time_ns())
    identity, address = network_identity(), reachable_address()
    for _ in range(attempts):
        entries = allgather((identity, address, pick_free_port(rng)))
        one_network = len({entry[0] for entry in entries}) == 1
        addresses = [f"{LOOPBACK if one_network else entry[1]}:{entry[2]}" for entry in entries]
        if len(set(addresses)) == len(addresses):
            return ClusterLayout(tuple(addresses[:num_ps]), tuple(addresses[num_ps:]), rank, "mpi")
    raise RunFailed("could not agree on distinct ports for the parameter-server cluster")


# --------------------------------------------------------------------------- TF_CONFIG


def read_tf_config(text: str | None = None) -> dict:
    """The parsed TF_CONFIG (UsageError when it is not the JSON TensorFlow expects)."""
    text = os.environ.get("TF_CONFIG") if text is None else text
    try:
        value = loads(text or "")
        cluster, task = value["cluster"], value["task"]
        kind, index = str(task["type"]), int(task["index"])
        jobs = {job: list(cluster.get(job, [])) for job in (SERVER_ROLE, CHIEF_ROLE, WORKER_ROLE)}
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"TF_CONFIG is not valid ({exc}): expected {{cluster, task}}") from None
    if not jobs["ps"]:
        raise UsageError("TF_CONFIG lists no ps tasks (--arch ps needs at least one)")
    if len(jobs["chief"]) > 1:
        raise UsageError("TF_CONFIG lists more than one chief")
    if kind not in jobs or not 0 <= index < len(jobs[kind]):
        raise UsageError(f"TF_CONFIG task {kind}/{index} is not in its cluster")
    return {"jobs": jobs, "type": kind, "index": index}


def tf_config_rank_order(jobs: dict[str, list[str]]) -> list[tuple[str, int, str]]:
    """(job, index, address) in archbench's rank order: ps tasks, then chief, then workers."""
    order = [("ps", i, a) for i, a in enumerate(jobs["ps"])]
    order += [("chief", i, a) for i, a in enumerate(jobs["chief"])]
    order += [("worker", i, a) for i, a in enumerate(jobs["worker"])]
    return order


def layout_from_tf_config(num_ps: int, text: str | None = None) -> ClusterLayout:
    parsed = read_tf_config(text)
    jobs = parsed["jobs"]
    if len(jobs["ps"]) != num_ps:
        raise UsageError(f"TF_CONFIG lists {len(jobs['ps'])} ps tasks but --num-ps is {num_ps}")
    order = tf_config_rank_order(jobs)
    rank = next(
        r
        for r, (job, index, _) in enumerate(order)
        if job == parsed["type"] and index == parsed["index"]
    )
    workers = tuple(jobs["chief"] + jobs["worker"])
    if not workers:
        raise UsageError("TF_CONFIG lists no worker or chief tasks")
    return ClusterLayout(tuple(jobs["ps"]), workers, rank, "tf_config")
