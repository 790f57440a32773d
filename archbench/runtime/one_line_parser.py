"""argparse that reports bad input as one line (no usage dump) with exit status 2.

It lives apart from `archbench.common.errors` because it asks `archbench.runtime.launch` which rank it runs on,
and `archbench.common.errors` must stay free of imports: every module may import its errors.
"""

import argparse

from archbench.runtime.launch import detect_place


class OneLineArgumentParser(argparse.ArgumentParser):
    """argparse that reports bad input as one line (no usage dump) with exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        # Under mpirun every rank parses the same arguments: rank 0 alone says what is wrong.
        quiet = detect_place().rank != 0
        self.exit(2, None if quiet else f"{self.prog}: error: {message} (see --help)\n")
