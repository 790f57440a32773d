"""Errors that end a command with one clear line.

This module imports nothing of archbench, so that every module can import its errors.
"""


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit status 2, nothing written."""

    exit_code = 2


class RunFailed(Exception):
    """A run that started but could not finish (a peer died, a timeout, a server vanished)."""


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
