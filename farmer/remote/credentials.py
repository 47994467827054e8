"""Credentials for a remote: TLS files and a credential helper's headers.

A credential helper is a program, as Bazel's `--credential_helper` runs one: farmer runs
`CMD get` with `{"uri": URL}` on its standard input, and reads from its standard output
`{"headers": {"Name": ["value", ...]}, "expires": "2026-12-07T21:00:00Z"}` (`expires`
optional). The headers are kept until they expire (a minute early) or the server answers
UNAUTHENTICATED, then asked for again. Nothing the helper prints is ever shown: a failure
says the command and its exit status only.

Plain Python (no grpc).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import threading
import time
from datetime import datetime

HELPER_TIMEOUT_S = 30.0  # a helper may open a browser or ask an agent; not forever
EARLY_S = 60.0  # headers that expire within this are asked for again


class CredentialError(Exception):
    """A credential helper that failed or printed something unusable (its output never shown)."""


def read_file(path: str | None) -> bytes | None:
    """A PEM file's bytes, None without a path (OSError says why it cannot be read)."""
    if not path:
        return None
    with open(path, "rb") as f:
        return f.read()


class CredentialHelper:
    """`command` (a shell-like word list, as typed) run for the headers of `uri`. Thread-safe:
    the build's threads share it, and one of them runs the helper at a time."""

    __slots__ = ("command", "uri", "_headers", "_expires", "_lock", "runs")

    def __init__(self, command: str, uri: str) -> None:
        self.command, self.uri = command, uri
        self._headers: tuple[tuple[str, str], ...] | None = None
        self._expires = 0.0  # time.time() after which the headers are asked for again
        self._lock = threading.Lock()
        self.runs = 0

    def headers(self, fresh: bool = False) -> tuple[tuple[str, str], ...]:
        """The helper's headers (names lower-cased, as gRPC metadata wants them): kept, or
        asked for when there are none yet, they expire, or `fresh` (after UNAUTHENTICATED)."""
        with self._lock:
            if fresh or self._headers is None or time.time() >= self._expires:
                self._headers, self._expires = self._run()
            return self._headers

    def _run(self) -> tuple[tuple[tuple[str, str], ...], float]:
        self.runs += 1
        try:
            argv = [*shlex.split(self.command), "get"]
        except ValueError as e:
            raise CredentialError(f"credential helper {self.command!r}: {e}") from None
        try:
            done = subprocess.run(argv, input=json.dumps({"uri": self.uri}).encode(), capture_output=True,
                                  timeout=HELPER_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            why = "took too long" if isinstance(e, subprocess.TimeoutExpired) else (e.strerror or str(e))
            raise CredentialError(f"credential helper {argv[0]}: {why}") from None
        if done.returncode != 0:
            raise CredentialError(f"credential helper {argv[0]} exited with {done.returncode}")
        return parse_reply(done.stdout, argv[0])


def parse_reply(data: bytes, name: str) -> tuple[tuple[tuple[str, str], ...], float]:
    """The headers and expiry time (time.time(); far away without `expires`) of a helper's reply."""
    try:
        reply = json.loads(data)
        headers = reply["headers"]
        out = tuple((str(k).lower(), str(v)) for k, values in headers.items()
                    for v in (values if isinstance(values, list) else [values]))
    except (ValueError, KeyError, TypeError, AttributeError):
        # its output may hold a token: not echoed
        raise CredentialError(f"credential helper {name} printed no {{\"headers\": {{...}}}} JSON") from None
    expires = float("inf")
    if isinstance(reply.get("expires"), str):
        try:
            expires = datetime.fromisoformat(reply["expires"].replace("Z", "+00:00")).timestamp() - EARLY_S
        except ValueError:
            raise CredentialError(f"credential helper {name}: 'expires' is not an RFC 3339 time") from None
    return out, expires
