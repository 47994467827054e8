"""Where the remote is and how to talk to it: parsed from flags, environment and the Farmfile.

Plain Python (no grpc): the command line builds an Endpoint before anything knows whether a remote
will be consulted at all.
"""

from __future__ import annotations

DEFAULT_TIMEOUT_S = 30.0


class RemoteConfigError(ValueError):
    """A remote URL or header that cannot be used; the message says what to write instead."""


class Endpoint:
    """A REAPI server: its gRPC target, TLS or not, instance name, call headers and timeout.

    Headers carry auth tokens: repr() and str() show their names only, never their values.
    """

    __slots__ = ("url", "target", "secure", "instance", "headers", "timeout")

    def __init__(self, url: str, instance: str = "", headers: tuple[tuple[str, str], ...] = (),
                 timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.url = url
        self.target, self.secure = parse_url(url)
        self.instance = instance
        self.headers = headers
        self.timeout = timeout

    def __repr__(self) -> str:
        names = ",".join(k for k, _ in self.headers)
        return f"Endpoint({self.url!r}, instance={self.instance!r}, headers=[{names}], timeout={self.timeout})"

    __str__ = __repr__


def parse_url(url: str) -> tuple[str, bool]:
    """`grpc://host:port` -> ("host:port", False); `grpcs://host[:port]` -> (.., True)."""
    for scheme, secure, port in (("grpc://", False, 80), ("grpcs://", True, 443)):
        if url.startswith(scheme):
            rest = url[len(scheme):].rstrip("/")
            if not rest or "/" in rest:
                break
            if ":" not in rest.rsplit("]", 1)[-1]:
                rest = f"{rest}:{port}"
            return rest, secure
    raise RemoteConfigError(f"remote URL {url!r} is not grpc://HOST:PORT or grpcs://HOST[:PORT]")


def parse_header(text: str) -> tuple[str, str]:
    """`NAME=VALUE` -> (name lower-cased, as gRPC metadata wants it, value)."""
    name, sep, value = text.partition("=")
    name = name.strip().lower()
    if not sep or not name:
        # the text may be a token pasted without its name: never echo it
        raise RemoteConfigError("a remote header is not NAME=VALUE (e.g. authorization=Bearer TOKEN)")
    return name, value


def require() -> None:
    """RemoteConfigError unless grpc and protobuf are importable (they are an optional extra)."""
    try:
        import google.protobuf  # noqa: F401
        import grpc  # noqa: F401
    except ImportError:
        raise RemoteConfigError("a remote needs grpcio and protobuf, which are not installed: "
                                "pip install 'farmer[remote]'") from None
