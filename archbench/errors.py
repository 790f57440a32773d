"""Errors that end a command with one clear line."""

import argparse


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit status 2, nothing written."""

    exit_code = 2


class RunFailed(Exception):
    """A run that started but could not finish (a peer died, a timeout, a server vanished)."""


class OneLineArgumentParser(argparse.ArgumentParser):
    """argparse that reports bad input as one line (no usage dump) with exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")
