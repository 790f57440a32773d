"""Typed accessors over one run record: what its consumers (analysis, the performance model, the
sweep) need, read one way. Works on records of every schema version the reader migrates."""

from __future__ import annotations

from typing import Any

from archbench.common.archs import ARCHS
from archbench.common.bandwidth import Bandwidth
from archbench.record.schema import is_server_role, number_or_none, placement_of
from archbench.runtime.settings import SETTINGS


class RunRecord:
    """One record, read through its accessors (`raw` is the record itself)."""

    def __init__(self, raw: dict[str, Any]):
        self.raw = raw

    def get(self, dotted: str, default: Any = None) -> Any:
        value: Any = self.raw
        for part in dotted.split("."):
            if not isinstance(value, dict) or part not in value:
                return default
            value = value[part]
        return value

    def _section(self, name: str) -> dict[str, Any]:
        value = self.raw.get(name)
        return value if isinstance(value, dict) else {}

    @property
    def config(self) -> dict[str, Any]:
        return self._section("config")

    @property
    def cluster(self) -> dict[str, Any]:
        return self._section("cluster")

    @property
    def arch(self) -> str | None:
        return self.config.get("arch")

    @property
    def ok(self) -> bool:
        return self.raw.get("status") == "ok"

    @property
    def has_servers(self) -> bool:
        return self.arch in ARCHS and ARCHS[self.arch].has_servers

    @property
    def roles(self) -> list[str] | None:
        roles = self.cluster.get("roles")
        return [str(r) for r in roles] if isinstance(roles, list) else None

    @property
    def hosts(self) -> list[str] | None:
        hosts = self.cluster.get("hosts")
        return [str(h) for h in hosts] if isinstance(hosts, list) else None

    @property
    def world_size(self) -> int | None:
        world = number_or_none(self.cluster.get("world_size"))
        return int(world) if world is not None else None

    @property
    def servers(self) -> int:
        """Parameter-server processes (0 for architectures without them)."""
        if not self.has_servers:
            return 0
        return int(self.cluster.get("num_ps") or self.config.get("num_ps") or 0)

    @property
    def multi_process(self) -> bool:
        """Whether the architecture runs workers under a launcher (not a one-process baseline)."""
        return self.arch in ARCHS and ARCHS[self.arch].multi_process

    @property
    def workers(self) -> float | None:
        """cluster.num_workers, else counted from roles, else world size less servers, else 1
        for the single-process baseline."""
        value = number_or_none(self.cluster.get("num_workers"))
        if value is not None:
            return value
        roles = self.roles
        if roles:
            return float(sum(not is_server_role(r) for r in roles))
        world = number_or_none(self.cluster.get("world_size"))
        if world is not None:
            return world - (number_or_none(self.cluster.get("num_ps")) or 0.0)
        one_process = self.arch in ARCHS and not ARCHS[self.arch].multi_process
        return 1.0 if one_process else None

    @property
    def placement(self) -> str | None:
        """dedicated / colocated / spread as stored at write time (or worked out on migration)."""
        if "placement" in self.cluster:
            return self.cluster["placement"]
        return placement_of(self.cluster.get("hosts"), self.cluster.get("roles"))

    @property
    def sync_mode(self) -> str | None:
        """`sync` / `async` for architectures with servers; None for the others (always sync)."""
        if not self.has_servers:
            return None
        sync = self.config.get("sync")
        if isinstance(sync, str):
            return "async" if "async" in sync.lower() else "sync"
        if sync is None:
            return None
        return "sync" if sync else "async"

    @property
    def is_sync(self) -> bool:
        return self.sync_mode != "async"

    @property
    def factors(self) -> dict[str, Any]:
        """The factor levels the record lists: top-level `factors`, or the sweep's."""
        for value in (self.raw.get("factors"), self.get("sweep.factors")):
            if isinstance(value, dict):
                return value
        return {}

    @property
    def link(self) -> Any:
        """The link as the run named it: the cluster's shaped link, else the configured or
        factor bandwidth; None on an unshaped path."""
        for value in (
            self.cluster.get("link"),
            self.config.get("bandwidth"),
            self.factors.get("bandwidth"),
        ):
            if value:
                return value
        return None

    @property
    def link_bits(self) -> float | None:
        """Bits per second of the link between hosts the record names: shaped on the emulated
        cluster, stated (or measured by `archbench init`) for a hostfile one; None: none named."""
        rate = Bandwidth.of_link(self.cluster.get("link"))
        return rate.bits_per_s if rate is not None else None

    @property
    def emulated(self) -> bool:
        """Whether the run ran on archbench's emulated cluster, as its fidelity probe found
        (records from before the probe: only the emulated cluster recorded a link then)."""
        fidelity = self.raw.get("fidelity")
        if isinstance(fidelity, dict) and "emulated" in fidelity:
            return bool(fidelity["emulated"])
        return bool(self.cluster.get("emulated")) or bool(self.cluster.get("link"))

    @property
    def settings(self) -> dict[str, Any]:
        """The settings that applied to this run's architecture, as recorded."""
        arch = self.arch
        return {
            name: value
            for name, value in self.config.items()
            if name not in SETTINGS or arch is None or SETTINGS[name].applies(arch)
        }
