"""Errors that end a command with a clear one-line message instead of a traceback."""


class UsageError(Exception):
    """Bad input from the user (command line, Farmfile, graph): exit status 2.

    The message is one line: where (file:line when known), what is wrong, what to do.
    """

    exit_code = 2


class TaskError(UsageError):
    """A graph error that belongs to one task's (or world's) table in the Farmfile. Raised
    where the Farmfile is not at hand; farmfile.locate puts `FILE:LINE:` in front."""

    def __init__(self, message: str, task: str, kind: str = "task") -> None:
        super().__init__(message)
        self.task, self.kind, self.located = task, kind, False


class LockHeld(Exception):
    """Another farmer holds the project's lock: exit status 3."""

    exit_code = 3
