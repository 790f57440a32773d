"""A problem doctor found: one line naming the host, what is wrong and what to do."""

from __future__ import annotations

from typing import NamedTuple

from archbench.common.safe_text import shown


class Problem(NamedTuple):
    host: str  # the host it is on (or "h1-h2" for a link between two)
    what: str
    fix: str

    def line(self) -> str:
        # shown(): text read back from a host stays on one line
        return shown(f"{self.host}: {self.what}; {self.fix}")
