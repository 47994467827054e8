"""Errors that end a command with a clear one-line message instead of a traceback."""


class UsageError(Exception):
    """Bad input from the user (command line, Farmfile, graph): exit status 2.

    The message is one line: where (file:line when known), what is wrong, what to do.
    """

    exit_code = 2


class LockHeld(Exception):
    """Another farmer holds the project's lock: exit status 3."""

    exit_code = 3
