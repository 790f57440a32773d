"""A Gantt chart of one traced step (a `--timeline` trace): a band per rank, a lane per kind of
span (compute, communication, waits, host), time in milliseconds from the step's start on the
earliest rank, so the ranks' offsets show. Where communication ran while the rank computed, the
two lanes overlap in time: that is the overlap the trace measures. The host lane shows only the
time no other span covers (the runtime's frames wrap the ops they run); so does the compute
lane for the step thread's call into the engine (it holds the ops: drawn where none ran)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.patches import Patch

from archbench.analysis import plotting
from archbench.analysis.section import FigureFile
from archbench.timeline import intervals as iv
from archbench.timeline.breakdown import spans_by_step
from archbench.timeline.spans import BACKWARD, COMM, COMPUTE, FORWARD, HOST, STOPPED, UPDATE, WAIT

RANK_LABEL_AT = 0.12  # left of the lanes' labels, in axes widths
LANE_HEIGHT_IN = 0.3
LANES = (  # (label, categories drawn in it)
    ("compute", (FORWARD, BACKWARD, UPDATE, COMPUTE)),
    ("communication", (COMM,)),
    ("wait", (WAIT,)),
    ("host", (HOST,)),
    ("stopped", (STOPPED,)),
)
COLORS = {
    FORWARD: plotting.COMPUTE_COLOR,
    BACKWARD: "#55a868",
    UPDATE: "#8172b3",
    COMPUTE: "#a6c8e0",
    COMM: plotting.COMM_COLOR,
    WAIT: "#c44e52",
    HOST: "#b0b0b0",
    STOPPED: "#404040",
}
LABELS = {
    FORWARD: "forward",
    BACKWARD: "backward",
    UPDATE: "update (optimizer, server)",
    COMPUTE: "in the engine's call, between its ops",
    COMM: "communication",
    WAIT: "waiting on others",
    HOST: "host (Python, runtime)",
    STOPPED: "stopped by the node's CPU budget",
}


def step_extent_ms(trace: dict, step: int) -> float:
    """The step's length in ms, from its earliest start to its latest end over the ranks."""
    frames = [g["frame"] for (_, s), g in spans_by_step(trace).items() if s == step]
    return (
        (max(end for _, end in frames) - min(start for start, _ in frames)) / 1000
        if frames
        else 0.0
    )


def draw_step(ax: Axes, trace: dict, step: int, xmax_ms: float | None = None) -> None:
    """The step on `ax`; `xmax_ms` fixes the time axis (several steps on one scale)."""
    groups = {rank: g for (rank, s), g in spans_by_step(trace).items() if s == step}
    origin = min(g["frame"][0] for g in groups.values())
    names = _process_names(trace)
    ticks, labels, y = [], [], 0.0
    for rank in sorted(groups, reverse=True):
        group = groups[rank]
        low, high = group["frame"]
        band_bottom = y
        busy = iv.union(
            (e["ts"], e["ts"] + e["dur"])
            for e in group["events"]
            if e.get("cat") not in (HOST, COMPUTE)
        )
        hosted = iv.union(
            (e["ts"], e["ts"] + e["dur"]) for e in group["events"] if e.get("cat") == HOST
        )
        for lane, cats in reversed(LANES):
            for cat in cats:
                spans = iv.union(
                    (e["ts"], e["ts"] + e["dur"]) for e in group["events"] if e.get("cat") == cat
                )
                if cat == HOST:  # the runtime's frames wrap the ops: only what nothing else covers
                    spans = iv.subtract(spans, busy)
                if cat == COMPUTE:  # the call holds the ops: only what no other span covers
                    spans = iv.subtract(iv.subtract(spans, busy), hosted)
                bars = [((s - origin) / 1000, (e - s) / 1000) for s, e in spans]
                if bars:
                    ax.broken_barh(bars, (y + 0.1, 0.8), color=COLORS[cat], linewidth=0)
            ticks.append(y + 0.5)
            labels.append(lane)
            y += 1
        ax.broken_barh(
            [((low - origin) / 1000, (high - low) / 1000)], (band_bottom, y - band_bottom),
            facecolor="none", edgecolor="black", linewidth=0.6,
        )  # fmt: skip
        ax.text(
            -RANK_LABEL_AT, (band_bottom + y) / 2, names.get(rank, f"rank {rank}"),
            transform=ax.get_yaxis_transform(), ha="right", va="center", fontsize=8,
            fontweight="bold",
        )  # fmt: skip
        y += 0.5
    ax.set_yticks(ticks)
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_ylim(-0.2, y)
    ax.set_xlim(0, xmax_ms if xmax_ms is not None else step_extent_ms(trace, step) * 1.02)
    ax.set_xlabel("time since the step began (ms, virtual)")
    ax.grid(axis="y", visible=False)


def _process_names(trace: dict) -> dict[int, str]:
    names = {}
    for event in trace.get("traceEvents", []):
        if event.get("ph") == "M" and event.get("name") == "process_name":
            text = event["args"]["name"]  # "rank 0: chief on node1"
            names[event["pid"]] = text.split(" on ")[0].replace(": ", "\n")
    return names


def panel_height_in(ranks: int) -> float:
    return LANE_HEIGHT_IN * ranks * len(LANES) + 1.2


def legend_handles() -> list[Patch]:
    return [Patch(color=COLORS[cat], label=LABELS[cat]) for cat in LABELS]


def plot_step(
    trace: dict, step: int, out_dir: Path, stem: str, title: str, caption: str
) -> FigureFile:
    """One step's Gantt chart as `<stem>.png` and `<stem>.svg` under out_dir."""
    ranks = len({rank for (rank, s) in spans_by_step(trace) if s == step})
    fig, axes = plotting.new_figure(1, panel_size=(9.0, panel_height_in(ranks)))
    draw_step(axes[0], trace, step)
    axes[0].legend(handles=legend_handles(), loc="upper center", bbox_to_anchor=(0.5, -0.18),
                   ncol=3, frameon=False)  # fmt: skip
    plotting.set_title(fig, title)
    return FigureFile(stem, caption, plotting.save(fig, out_dir, stem))
