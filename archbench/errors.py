"""Errors that end a command with one clear line."""


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit status 2, nothing written."""

    exit_code = 2


class RunFailed(Exception):
    """A run that started but could not finish (a peer died, a timeout, a server vanished)."""
