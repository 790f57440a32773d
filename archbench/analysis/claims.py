"""The research notes' claims, checked against this study's own measurements.

Two claims from the notes archbench grew from, each judged only by the data with a 95% bootstrap
confidence interval over repetitions, and with the measurement that explains the verdict:

1. Ordering: for a communication-bound model, ring-allreduce is at least as fast as peer-to-peer,
   and peer-to-peer at least as fast as one synchronous parameter server, as workers grow.
   Judged per workload, link and worker count by throughput ratios (samples/s, equal work).
   Whether the workload is communication-bound is measured, not assumed: the share of the step
   its distributed runs spent in exchange not hidden by overlap. Only networked configurations
   are compared (a PS on a host of its own or beside a worker): a PS with every process on one
   host crosses no link, and claim 2 compares it with the networked ones.
2. Going through gRPC between hosts costs two to four times the training time of running the
   parameter server and every worker on one local server (within that server's cores). Judged
   by the slowdown (one-host ÷ networked throughput) of matched PS runs, one row for each
   networked placement the study ran (a dedicated PS host, a PS beside a worker).
3. With the parameter server on a dedicated host, training is "considerably slower" than with it
   on one of the worker hosts (the notes give no figure for this one). Judged by co-located ÷
   dedicated throughput of matched synchronous and asynchronous PS runs.

A verdict is `agrees` when the interval lies on the claimed side (or inside the claimed range),
`contradicts` when it lies entirely on the other side, `inconclusive` when it straddles; with one
repetition there is no interval and the verdict says so.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from archbench.analysis import arch_rows
from archbench.analysis.fmt import placement_label
from archbench.analysis.load import Study
from archbench.analysis.section import Column, Section, Table
from archbench.analysis.stats import ratio_of_means
from archbench.common.archs import has_servers

KEY, TITLE = "claims", "The research notes' claims, checked"

HOW_TO_READ = (
    "Each row tests one claim of the research notes on one setting of this study. `measured` is "
    "a ratio of mean throughputs (samples/s) with its 95% bootstrap confidence interval over "
    "repetitions; `claimed` is what the notes assert. `agrees`: the interval lies where the "
    "claim says; `contradicts`: it lies entirely on the other side; `inconclusive`: it "
    "straddles. `why` gives the measurements behind it: the share of the step spent in "
    "exchange not hidden by overlap (a communication-bound workload spends most of it there); "
    "for the order, how close each architecture's exchange came to the wire (the busiest "
    "node's bytes per step over the exchange phase, as a share of the link's rate: an "
    "architecture well below it loses to its own implementation as much as to its bytes); "
    "and, for placement, the bytes the PS host's link moved per step (from the link counters). "
    "The order compares networked configurations only (a PS with every process on one host "
    "crosses no link: that is the next claim's comparison). "
    "The notes' 2-4x is the cost of the network (one local server against PS and workers on "
    "hosts of their own); for a dedicated against a co-located PS host they say only "
    "'considerably slower'."
)
COLUMNS = [
    Column("claim", "claim"),
    Column("workload", "workload"),
    Column("setting", "setting"),
    Column("comparison", "throughput ratio"),
    Column("measured", "measured [95% CI]"),
    Column("claimed", "claimed"),
    Column("verdict", "verdict"),
    Column("n", "reps"),
    Column("why", "why"),
]
ORDER = ("ring", "p2p", "ps")
CLAIMED_SLOWDOWN = (2.0, 4.0)  # claim 2: networked PS vs one local server
NETWORKED = ("dedicated", "colocated")  # claim 2's PS placements with a link between hosts
# Claim 3's ratio, as its rows and finding name it.
COLOCATED_OVER_DEDICATED = f"{placement_label('colocated')} ÷ {placement_label('dedicated')}"


def _verdict_above_one(ci_low: float, ci_high: float) -> str:
    if math.isnan(ci_low):
        return "one repetition: no interval"
    if ci_low > 1:
        return "agrees"
    if ci_high < 1:
        return "contradicts"
    return "inconclusive"


def _interval(ratio: dict[str, float]) -> str:
    if math.isnan(ratio["ratio"]):
        return "-"
    if math.isnan(ratio["ci_low"]):
        return f"{ratio['ratio']:.2f}×"
    return f"{ratio['ratio']:.2f}× [{ratio['ci_low']:.2f}, {ratio['ci_high']:.2f}]"


def _exposed_share(runs: pd.DataFrame) -> float:
    share = (runs["exposed_comm_s"] / runs["step_s"]).replace([np.inf, -np.inf], np.nan).dropna()
    return float(share.median()) if len(share) else math.nan


def _link_use_words(arms: dict[str, pd.DataFrame]) -> str:
    """Each arm's median link use during its exchange (where its records metered the links):
    how close it came to the wire, so a reader sees how much of a ratio is the implementation's
    exchange rather than the architecture's bytes."""
    if not all("link_use" in runs for runs in arms.values()):
        return ""
    uses = {name: runs["link_use"].dropna() for name, runs in arms.items()}
    if any(values.empty for values in uses.values()):
        return ""
    listed = ", ".join(f"{name} {values.median():.0%}" for name, values in uses.items())
    return f"; busiest link's use during the exchange: {listed}"


def _arm(ok: pd.DataFrame, name: str, placement: str | None) -> pd.DataFrame:
    if not has_servers(name):
        return ok[ok["arch"] == name]
    ps = ok[(ok["arch"] == name) & (ok["sync_mode"] == "sync") & (ok["num_ps"] == 1)]
    return ps[ps["placement"] == placement] if placement else ps[ps["placement"] != "one-host"]


def ordering_rows(study: Study) -> list[dict]:
    ok = study.ok.dropna(subset=["samples_per_s"])
    rows = []
    keys = ["workload", "link", "workers"]
    # One worker exchanges nothing: the order is a claim about workers that do.
    distributed = ok[ok["arch"].isin(ORDER) & (ok["workers"] > 1)]
    for key, runs in distributed.groupby(keys, dropna=False, sort=True):
        workload, link, workers = key
        share = _exposed_share(runs)
        # Networked configurations only: a PS with every process on one host moves nothing over
        # a link, so it is claim 2's comparison, not this one's.
        placements = sorted(
            placement
            for placement in runs.loc[arch_rows.with_servers(runs), "placement"].dropna().unique()
            if placement in NETWORKED
        )
        placements = placements or [None]
        pairs = [("ring", None, "p2p", None)] + [("p2p", None, "ps", p) for p in placements]
        for better, _, worse, placement in pairs:
            faster, slower = _arm(runs, better, None), _arm(runs, worse, placement)
            if faster.empty or slower.empty:
                continue
            ratio = ratio_of_means(
                faster["samples_per_s"].tolist(), slower["samples_per_s"].tolist()
            )
            worse_name = f"ps ({placement_label(placement)})" if placement else worse
            rows.append(
                {
                    "claim": "ordering",
                    "workload": workload,
                    "setting": f"{int(workers)} workers"
                    + (f", {link}" if isinstance(link, str) else ""),
                    "comparison": f"{better} ÷ {worse_name}",
                    "measured": _interval(ratio),
                    "claimed": "≥ 1× (communication-bound)",
                    "verdict": _verdict_above_one(ratio["ci_low"], ratio["ci_high"]),
                    "why": (
                        f"exchange not hidden by overlap: {share:.0%} of the step"
                        + (
                            " (communication-bound)"
                            if share >= 0.5
                            else " (compute-bound: the claim is about communication-bound models)"
                        )
                        if not math.isnan(share)
                        else "no time split recorded"
                    )
                    + _link_use_words({better: faster, worse_name: slower}),
                    "ratio": ratio["ratio"],
                    "ci_low": ratio["ci_low"],
                    "ci_high": ratio["ci_high"],
                    "exposed_share": share,
                    "n": min(len(faster), len(slower)),
                }
            )
    return rows


def _ps_link_mb(runs: pd.DataFrame) -> float:
    values = runs["ps_link_bytes_per_step"].dropna()
    return float(values.mean()) / 1e6 if len(values) else math.nan


def _slowdown_verdict(ratio: dict[str, float], low: float, high: float) -> str:
    """Whether a slowdown's interval lies inside the claimed range [low, high]."""
    if math.isnan(ratio["ci_low"]):
        return "one repetition: no interval"
    if low <= ratio["ci_low"] and ratio["ci_high"] <= high:
        return "agrees"
    if ratio["ci_high"] < low:
        return "contradicts (smaller cost)"
    if ratio["ci_low"] > high:
        return "contradicts (larger cost)"
    return "inconclusive"


def _placement_row(claim: str, key: tuple, numerator: pd.DataFrame, denominator: pd.DataFrame,
                   comparison: str, claimed: str, verdict_of) -> dict:  # fmt: skip
    workload, link, workers, mode = key
    ratio = ratio_of_means(
        numerator["samples_per_s"].tolist(), denominator["samples_per_s"].tolist()
    )
    why = (
        f"exchange not hidden by overlap: {comparison.split(' ÷ ')[0]} "
        f"{_exposed_share(numerator):.0%}, {comparison.split(' ÷ ')[1]} "
        f"{_exposed_share(denominator):.0%} of the step"
    )
    moved = (_ps_link_mb(denominator), _ps_link_mb(numerator))
    if not any(math.isnan(v) for v in moved):
        why += (
            f"; the PS host's link moved {moved[1]:.2f} MB/step ({comparison.split(' ÷ ')[0]}) "
            f"and {moved[0]:.2f} ({comparison.split(' ÷ ')[1]}): what stays on a host never "
            "crosses a link"
        )
    return {
        "claim": claim,
        "workload": workload,
        "setting": f"{int(workers)} workers, {mode}"
        + (f", {link}" if isinstance(link, str) else ""),
        "comparison": comparison,
        "measured": _interval(ratio),
        "claimed": claimed,
        "verdict": verdict_of(ratio),
        "why": why,
        "ratio": ratio["ratio"],
        "ci_low": ratio["ci_low"],
        "ci_high": ratio["ci_high"],
        "n": min(len(numerator), len(denominator)),
    }


def placement_rows(study: Study) -> list[dict]:
    """Claims 2 (the network against one local server) and 3 (dedicated against co-located)."""
    ok = study.ok.dropna(subset=["samples_per_s"])
    ps = ok[arch_rows.with_servers(ok) & ok["placement"].isin([*NETWORKED, "one-host"])]
    rows = []
    low, high = CLAIMED_SLOWDOWN
    for key, runs in ps.groupby(["workload", "link", "workers", "sync_mode"], dropna=False):
        by_placement = {name: runs[runs["placement"] == name] for name in (*NETWORKED, "one-host")}
        local = by_placement["one-host"]
        for networked in NETWORKED:
            if local.empty or by_placement[networked].empty:
                continue
            rows.append(
                _placement_row(
                    "gRPC between hosts vs one local server",
                    key,
                    local,
                    by_placement[networked],
                    f"one host ÷ {placement_label(networked)}",
                    "2-4× (networked slower)",
                    lambda ratio: _slowdown_verdict(ratio, low, high),
                )  # fmt: skip
            )
        if not by_placement["dedicated"].empty and not by_placement["colocated"].empty:
            rows.append(
                _placement_row(
                    "dedicated PS host slower",
                    key,
                    by_placement["colocated"],
                    by_placement["dedicated"],
                    COLOCATED_OVER_DEDICATED,
                    "> 1× ('considerably slower')",
                    lambda ratio: _verdict_above_one(ratio["ci_low"], ratio["ci_high"]),
                )  # fmt: skip
            )
    return rows


def claims_table(study: Study) -> pd.DataFrame:
    return pd.DataFrame(ordering_rows(study) + placement_rows(study))


def findings(table: pd.DataFrame | None) -> list[str]:
    """One sentence per claim: how many settings agree, contradict or are inconclusive."""
    if table is None or table.empty:
        return []
    sentences = []
    for claim, rows in table.groupby("claim", sort=False):
        counts = rows["verdict"].value_counts()
        tally = ", ".join(f"{n} {verdict}" for verdict, n in counts.items())
        if claim == "ordering":
            bound = rows[rows["exposed_share"] >= 0.5]
            where = (
                f"; on the communication-bound settings ({len(bound)} comparisons): "
                + ", ".join(f"{n} {v}" for v, n in bound["verdict"].value_counts().items())
                if len(bound)
                else "; no setting of this study was communication-bound (exchange ≥ 50% of the step)"
            )
            sentences.append(
                "Claim 'ring ≥ p2p ≥ one PS as workers grow' (research notes), over "
                f"{len(rows)} comparisons: {tally}{where}."
            )
        elif claim == "gRPC between hosts vs one local server":
            sentences.append(
                "Claim 'going through gRPC between hosts takes 2-4× the training time of one local "
                f"server' (research notes), over {len(rows)} matched settings: {tally}; measured "
                "slowdowns " + ", ".join(rows["measured"]) + "."
            )
        else:
            sentences.append(
                "Claim 'with the PS on a dedicated host training is considerably slower than with "
                f"it on a worker host' (research notes), over {len(rows)} matched settings: "
                f"{tally}; measured {COLOCATED_OVER_DEDICATED} " + ", ".join(rows["measured"]) + "."
            )
    return sentences


def build(study: Study, fig_dir: Path) -> Section:
    del fig_dir  # a table, no figure: the placement and scaling figures show the same ratios
    section = Section(KEY, TITLE, how_to_read=HOW_TO_READ)
    table = claims_table(study)
    if table.empty:
        return section.skip(
            "Claims of the research notes",
            "the study has no setting with ring, p2p and ps runs side by side, nor PS runs on "
            "more than one of: a dedicated host, a worker's host, one host for every process",
        )
    section.tables.append(
        Table("claims", "Claims of the research notes against this study", table, COLUMNS)
    )
    section.findings += findings(table)
    return section
