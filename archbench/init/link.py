"""The link rate the starter study claims: the one given, the emulated cluster's, or the payload
rate doctor's link check measures between the first two hosts."""

from __future__ import annotations

import os
import sys

from archbench.common.bandwidth import Bandwidth
from archbench.init.hosts import Hosts


def link_rate(hosts: Hosts, given: str | None, python: str | None = None) -> tuple[str | None, str]:
    """(rate for the spec, or None, and a sentence on where it came from)."""
    if given is not None:
        return str(Bandwidth.parse(given)), "given with --bandwidth"
    if hosts.bandwidth:
        return hosts.bandwidth, f"the {hosts.source}'s shaped links"
    if len(hosts.hosts) < 2:
        return None, "one host: no link between hosts"
    # deferred: the link probe (ctypes, subprocess) loads only when a link is measured
    from archbench.doctor.link import DEFAULT_MEGABYTES, measure

    pair = (hosts.hosts[0].name, hosts.hosts[1].name)
    measured = measure(pair, python or sys.executable, os.getcwd(), DEFAULT_MEGABYTES)
    if isinstance(measured, str):
        return None, f"could not be measured between {pair[0]} and {pair[1]}: {measured}"
    mbit = max(1, int(measured / 1e6))
    return f"{mbit}mbit", f"measured between {pair[0]} and {pair[1]} (payload, both ways at once)"
