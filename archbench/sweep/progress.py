"""Progress on stderr: a redrawn bar on a terminal, one plain line per finished run otherwise."""

from __future__ import annotations

import shutil
import sys
import time
from typing import TextIO


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
    """Runs done / failed out of the total, and an ETA from the mean duration of this session's runs."""

    def __init__(self, total: int, stream: TextIO | None = None, tty: bool | None = None):
        self.total = total
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.done = 0
        self.failed = 0
        self.durations: list[float] = []
        self.started = time.monotonic()
        self._current: str | None = None
        self._current_started = 0.0

    def eta_s(self) -> float | None:
        remaining = self.total - self.done - self.failed
        if remaining <= 0:
            return 0.0
        if not self.durations:
            return None
        return remaining * sum(self.durations) / len(self.durations)

    def start(self, label: str) -> None:
        self._current = label
        self._current_started = time.monotonic()
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

    def close(self) -> None:
        if self.tty:
            self._clear()
        elapsed = format_duration(time.monotonic() - self.started)
        self._line(f"{self.done} ok, {self.failed} failed, of {self.total} runs in {elapsed}")

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
