"""The link rate between pairs of hosts, measured with archbench.cluster.linkprobe (both
directions at once, payload only) and held against the rate the user claims.

With three or more hosts every host is measured with its two neighbours in hostfile order (a
ring of pairs), so a host whose own link is slow shows in both of its pairs and is named."""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from collections.abc import Sequence

from archbench.common.bandwidth import Bandwidth
from archbench.common.hosts import HostSlots
from archbench.common.jsonl import loads
from archbench.common.mpirun import mpirun_argv
from archbench.common.process_group import run_in_group
from archbench.doctor.problems import Problem
from archbench.runtime.launch import root_mpi_env

# linkprobe counts payload only: TCP/IP headers and framing take a few percent of the wire rate,
# so a link is slower than claimed when its payload rate falls below this share of the claim.
LINK_SHARE = 0.8
# Enough bytes for about a tenth of a second at the claimed rate: long against tbf's burst (2 ms)
# and TCP's start-up, short beside a study.
SECONDS_PER_EXCHANGE = 0.1
DEFAULT_MEGABYTES = 8.0
MAX_MEGABYTES = 32.0
PROBE_TIMEOUT_S = 120.0


def rate_text(bits_per_s: float) -> str:
    """Whole Mbit/s: the measurement is not finer than that."""
    return f"{bits_per_s / 1e6:,.0f} Mbit/s"


def pairs(hosts: Sequence[str]) -> list[tuple[str, str]]:
    if len(hosts) < 2:
        return []
    if len(hosts) == 2:
        return [(hosts[0], hosts[1])]
    return [(hosts[i], hosts[(i + 1) % len(hosts)]) for i in range(len(hosts))]


def megabytes_for(claim: Bandwidth | None) -> float:
    """The payload per direction: a tenth of a second at the claimed rate, 1 to 32 MB (a link
    far slower than claimed takes that much longer, so the payload stays modest)."""
    if claim is None:
        return DEFAULT_MEGABYTES
    return min(MAX_MEGABYTES, max(1.0, claim.bits_per_s * SECONDS_PER_EXCHANGE / 8 / 1e6))


def probe_argv(pair: tuple[str, str], python: str, megabytes: float) -> list[str]:
    program = [python, "-m", "archbench.cluster.linkprobe", "--megabytes", f"{megabytes:g}"]
    return mpirun_argv(2, [HostSlots(pair[0], 1), HostSlots(pair[1], 1)], program)


def measure(pair: tuple[str, str], python: str, cwd: str, megabytes: float) -> float | str:
    """Bits per second one way with both directions busy, or why it could not be measured."""
    argv = probe_argv(pair, python, megabytes)
    env = {**os.environ, **root_mpi_env()}
    try:
        done = run_in_group(argv, timeout_s=PROBE_TIMEOUT_S, env=env, cwd=cwd, merge_stderr=True)
    except subprocess.TimeoutExpired:
        return f"did not finish within {PROBE_TIMEOUT_S:g} s"
    for line in done.stdout.splitlines():
        if line.startswith("{") and "mbit_per_s" in line:
            try:  # another host's output: bounded, and a bad line is no measurement
                return float(loads(line)["mbit_per_s"]) * 1e6
            except (ValueError, KeyError, TypeError):
                continue
    last = done.stdout.strip().splitlines()[-1:] or [f"status {done.returncode}"]
    return f"failed ({last[0]})"


def link_problems(
    hosts: Sequence[str], python: str, cwd: str, claim: Bandwidth | None
) -> tuple[list[Problem], str]:
    """The slow or unmeasurable links, and a line with every rate measured."""
    megabytes = megabytes_for(claim)
    rates = {pair: measure(pair, python, cwd, megabytes) for pair in pairs(hosts)}
    problems = [
        Problem(
            f"{a}-{b}",
            f"the link could not be measured: linkprobe {why}",
            f"run `{' '.join(probe_argv((a, b), python, megabytes))}` to see why",
        )  # fmt: skip
        for (a, b), why in rates.items()
        if isinstance(why, str)
    ]
    measured = {pair: bits for pair, bits in rates.items() if not isinstance(bits, str)}
    return problems + slow_links(list(hosts), measured, claim), _rates_line(measured, claim)


def _rates_line(measured: dict[tuple[str, str], float], claim: Bandwidth | None) -> str:
    shown = ", ".join(f"{a}-{b} {rate_text(bits)}" for (a, b), bits in measured.items())
    return f"{shown} (claimed {claim})" if claim is not None else shown


def slow_links(
    hosts: list[str], measured: dict[tuple[str, str], float], claim: Bandwidth | None
) -> list[Problem]:
    """A line for each host whose link is slower than claimed, or each pair where no one host
    explains it."""
    if claim is None:
        return []
    problems = []
    fix = (
        "check the NICs, cables and switch ports of {host} (ethtool), or claim what was "
        "measured (--bandwidth, the study's bandwidth)"
    )
    slow = {pair: bits for pair, bits in measured.items() if bits < LINK_SHARE * claim.bits_per_s}
    # A host in two slow pairs of the ring is the one whose link is slow; when every pair is
    # slow, it is the network (or the claim), and each pair is said.
    counts = Counter(host for pair in slow for host in pair)
    culprits = set()
    if len(hosts) >= 3 and len(slow) < len(measured):
        culprits = {host for host, count in counts.items() if count >= 2}
    for host in sorted(culprits, key=hosts.index):
        theirs = {pair: bits for pair, bits in slow.items() if host in pair}
        rates_text = ", ".join(
            f"{rate_text(bits)} to {b if a == host else a}" for (a, b), bits in theirs.items()
        )
        problems.append(Problem(
            host, f"its link measured {rates_text}, below {LINK_SHARE:.0%} of the {claim} claimed",
            fix.format(host=host),
        ))  # fmt: skip
    for (a, b), bits in slow.items():
        if not culprits & {a, b}:
            problems.append(Problem(
                f"{a}-{b}", f"the link measured {rate_text(bits)}, below {LINK_SHARE:.0%} of "
                f"the {claim} claimed", fix.format(host=f"{a} and {b}"),
            ))  # fmt: skip
    return problems
