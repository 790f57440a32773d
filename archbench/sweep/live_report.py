"""The study's report, refreshed while its sweep runs, so the first comparison is there to read
within minutes rather than at the end.

The driver calls `maybe_refresh` between launches (never while a run trains, so a refresh never
competes with a measurement): in a blocked study after each repetition block, otherwise once
`report_every_s` has passed since the last refresh; `final` once the runs are over. The refresh is
`archbench report <results folder>` in a process of its own, with a time limit: a report that
fails or hangs costs the sweep one line on stderr and at most that limit, never the sweep.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

# The longest a refresh may take before it is stopped (the demo's report takes about 7 s).
REFRESH_LIMIT_S = 120.0
LOG_NAME = "report-refresh.log"


class LiveReport:
    """Refreshes `results_dir/report/` when it is due; `every_s` 0 turns it off."""

    def __init__(
        self,
        results_dir: Path,
        every_s: float,
        say: Callable[[str], None],
        limit_s: float = REFRESH_LIMIT_S,
    ):
        self.results_dir = results_dir
        self.every_s = every_s
        self.say = say
        self.limit_s = limit_s
        self.last = time.monotonic()  # the first refresh waits a period, as a block waits its runs
        self.refreshes = 0

    @property
    def enabled(self) -> bool:
        return self.every_s > 0

    def maybe_refresh(self, block_ended: bool) -> None:
        """Between launches: refresh when a repetition block ended or the period has passed."""
        if self.enabled and (block_ended or time.monotonic() - self.last >= self.every_s):
            self.refresh()

    def final(self) -> None:
        """Once the runs are over: the report holds them all (only where it was refreshed during
        the sweep, so a study that asked for no report gets none)."""
        if self.enabled and self.refreshes:
            self.refresh()

    def refresh(self) -> bool:
        """Writes the report now; False (and one line said) when it could not."""
        self.last = time.monotonic()
        argv = [sys.executable, "-m", "archbench.cli", "report", str(self.results_dir)]
        log = self.results_dir / LOG_NAME
        try:
            with open(log, "wb") as out:
                done = subprocess.run(
                    argv, stdout=out, stderr=subprocess.STDOUT, timeout=self.limit_s, check=False
                )
        except subprocess.TimeoutExpired:
            self.say(f"report refresh stopped after {self.limit_s:g} s (see {log}); going on")
            return False
        except OSError as exc:
            self.say(f"report refresh could not start ({exc.strerror or exc}); going on")
            return False
        finally:
            self.last = time.monotonic()  # the period counts from the refresh's end
        if done.returncode != 0:
            self.say(f"report refresh failed (exit {done.returncode}, see {log}); going on")
            return False
        self.refreshes += 1
        self.say(f"report refreshed: {self.results_dir / 'report' / 'report.html'}")
        return True
