"""Progress on stderr: a redrawn bar on a terminal, one plain line per finished run otherwise."""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from archbench.runtime.phases import wall_split


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


class Progress:
    """Runs done / failed out of the total, the run now going, and an ETA from the wall this
    sweep has taken per finished run so far (launches, start-up and report refreshes included,
    so it settles on the time the rest will really take)."""

    def __init__(
        self,
        total: int,
        stream: TextIO | None = None,
        tty: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.clock = clock  # seconds; a test gives its own to see the ETA settle
        self.total = total
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.done = 0
        self.failed = 0
        self.durations: list[float] = []
        self.started = self.clock()
        self._current: str | None = None
        self._current_started = 0.0

    def eta_s(self) -> float | None:
        finished = self.done + self.failed
        remaining = self.total - finished
        if remaining <= 0:
            return 0.0
        if not finished:
            return None
        # the wall per run, not the runs' own durations: what lies between runs costs time too
        return remaining * (self.clock() - self.started) / finished

    def start(self, label: str) -> None:
        self._current = label
        self._current_started = self.clock()
        if self.tty:
            self._draw()
        else:
            finished = self.done + self.failed
            self._line(f"[{finished + 1}/{self.total}] start {label}")

    def finish(self, label: str, status: str, wall_s: float, detail: str = "") -> None:
        self.durations.append(wall_s)
        if status == "ok":
            self.done += 1
        else:
            self.failed += 1
        self._current = None
        finished = self.done + self.failed
        summary = (
            f"[{finished}/{self.total}] {status:<7} {label} {wall_s:.1f}s"
            f"{' - ' + detail if detail else ''} (ok {self.done}, failed {self.failed}, "
            f"ETA {format_duration(self.eta_s())})"
        )
        self._announce(summary)

    def retry(self, label: str, attempt: int, why: str, pause_s: float) -> None:
        """A try of the current run that is not counted: it is started again after a pause."""
        finished = self.done + self.failed
        self._announce(
            f"[{finished + 1}/{self.total}] retry   {label}: attempt {attempt} {why}; "
            f"again in {pause_s:g}s"
        )

    def close(self, records: list[dict[str, Any]] | None = None) -> None:
        """The last lines: the count, and where the wall went by the records this sweep added."""
        if self.tty:
            self._clear()
        wall = self.clock() - self.started
        elapsed = format_duration(wall)
        self._line(f"{self.done} ok, {self.failed} failed, of {self.total} runs in {elapsed}")
        if records:
            self._line(wall_split_line(records, wall))

    def _announce(self, line: str) -> None:
        """One line that stays: above the bar on a terminal."""
        if self.tty:
            self._clear()
            self._line(line)
            self._draw()
        else:
            self._line(line)

    def _draw(self) -> None:
        width = max(10, min(40, shutil.get_terminal_size((80, 20)).columns - 60))
        finished = self.done + self.failed
        filled = int(width * finished / self.total) if self.total else width
        bar = "#" * filled + "." * (width - filled)
        now = f" now {self._current}" if self._current else ""
        text = (
            f"\r[{bar}] {finished}/{self.total} ok {self.done} failed {self.failed} "
            f"ETA {format_duration(self.eta_s())}{now}"
        )
        self.stream.write(text[: shutil.get_terminal_size((120, 20)).columns + 1])
        self.stream.flush()

    def _clear(self) -> None:
        self.stream.write("\r\033[K")
        self.stream.flush()

    def _line(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()


def wall_split_line(records: list[dict[str, Any]], wall_s: float) -> str:
    """One line: the sweep's wall split into the runs' phases (real seconds, summed over
    `launch.phases_s`) and the rest (launching, the cluster, report refreshes)."""
    phases = [
        (record.get("launch") or {}).get("phases_s") or {}
        for record in records
        if isinstance(record.get("launch"), dict)
    ]
    split = wall_split([p for p in phases if isinstance(p, dict)])
    inside = sum(split.values())
    parts = [f"{name} {seconds:.0f} s" for name, seconds in split.items()]
    parts.append(f"launches, cluster and reports {max(0.0, wall_s - inside):.0f} s")
    return f"wall {format_duration(wall_s)}: " + ", ".join(parts)
