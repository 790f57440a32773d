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
        from archbench.launch import detect_place

        # Under mpirun every rank parses the same arguments: rank 0 alone says what is wrong.
        quiet = detect_place().rank != 0
        self.exit(2, None if quiet else f"{self.prog}: error: {message} (see --help)\n")


class Diverged(RunFailed):
    """Training produced a non-finite loss or non-finite parameters: the run is failed, not ok."""

    def __init__(self, step: int, what: str):
        super().__init__(f"{what} at step {step}")
        self.step = step


class DamagedDataFile(RunFailed):
    """A data file that passed the up-front checks (header, size) but whose contents turned out
    damaged while the run read them: the run fails, with the file named."""


class StopError(Exception):
    """The environment stops a command (a file that cannot be written, a program that is not
    there): printed as one line naming it and what to do, exit status 1."""

    exit_code = 1
