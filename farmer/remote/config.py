"""Where the remote is and how to talk to it: parsed from flags, environment and the Farmfile.

Plain Python (no grpc): the command line builds an Endpoint before anything knows whether a remote
will be consulted at all.
"""

from __future__ import annotations

DEFAULT_TIMEOUT_S = 30.0


class RemoteConfigError(ValueError):
    """A remote URL or header that cannot be used; the message says what to write instead."""


class Endpoint:
    """A REAPI server: its gRPC target, TLS or not, instance name, call headers and timeout;
    with TLS, the files of a private CA (`ca`) and of a client certificate and key (mTLS);
    `helper`, a credential helper's command, whose headers join `headers`; `executor`, the
    URL Execute goes to when it is not this server (the CAS and action cache stay here).

    Headers carry auth tokens: repr() and str() show their names only, never their values.
    """

    __slots__ = ("url", "target", "secure", "instance", "headers", "timeout", "ca", "cert", "key", "helper",
                 "executor")

    def __init__(self, url: str, instance: str = "", headers: tuple[tuple[str, str], ...] = (),
                 timeout: float = DEFAULT_TIMEOUT_S, ca: str | None = None, cert: str | None = None,
                 key: str | None = None, helper: str | None = None, executor: str | None = None) -> None:
        self.url = url
        self.target, self.secure = parse_url(url)
        self.instance = instance
        self.headers = headers
        self.timeout = timeout
        self.ca, self.cert, self.key, self.helper = ca, cert, key, helper
        self.executor = executor if executor and executor != url else None
        if self.executor is not None:
            parse_url(self.executor)

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


def parse_property(text: str) -> tuple[str, str]:
    """`NAME=VALUE` -> (name, value): a platform property."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise RemoteConfigError(f"a remote platform property is not NAME=VALUE (e.g. OSFamily=linux): {text!r}")
    return name.strip(), value


def quiet_grpc() -> None:
    """gRPC's core prints log lines of its own on farmer's stderr (a TLS handshake that failed, a
    GOAWAY from a server going down), whatever GRPC_VERBOSITY a shell or CI image set: farmer says
    every failure itself, once. Called before grpc is first imported (its logging reads the
    variable as it starts); FARMER_GRPC_VERBOSITY, when set, is used instead (to debug gRPC)."""
    import os

    os.environ["GRPC_VERBOSITY"] = os.environ.get("FARMER_GRPC_VERBOSITY") or "NONE"


def require() -> None:
    """RemoteConfigError unless grpc and protobuf are importable (they are an optional extra)."""
    quiet_grpc()
    try:
        import google.protobuf  # noqa: F401
        import grpc  # noqa: F401
    except ImportError:
        raise RemoteConfigError("a remote needs grpcio and protobuf, which are not installed: "
                                "pip install 'farmer-build[remote]'") from None


DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"  # the PATH remote commands get (Bazel's strict env)
DEFAULT_JOBS = 8


class RemoteSettings:
    """What a build does with its remote (SPEC §5): where it is, whether to upload and to execute,
    how many computations run remotely at once, and what goes into every Action."""

    __slots__ = ("endpoint", "upload", "execute", "jobs", "platform", "salt", "path", "base", "strict", "refresh")

    def __init__(self, endpoint: Endpoint, upload: bool = True, execute: bool = False, jobs: int = DEFAULT_JOBS,
                 platform: dict[str, str] | None = None, salt: str = "", path: str = DEFAULT_PATH,
                 strict: bool = False, refresh: bool = False) -> None:
        self.endpoint, self.upload, self.execute, self.jobs = endpoint, upload, execute, jobs
        self.platform, self.salt, self.path = dict(platform or {}), salt, path
        self.base = None  # farmer.graph.basedir.BaseDir: input roots rooted there (a build.ninja's --base-dir)
        self.strict = strict  # a remote problem fails the build (CI)
        self.refresh = refresh  # hits ignored: everything runs, and is uploaded

    def __repr__(self) -> str:
        return (f"RemoteSettings({self.endpoint!r}, upload={self.upload}, execute={self.execute}, "
                f"jobs={self.jobs}, platform={self.platform!r})")


def _flag(text: str, name: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise RemoteConfigError(f"{name}={text!r} is not 1 or 0")


def _file(path: str | None, what: str) -> str | None:
    """`path` made absolute, RemoteConfigError if it cannot be read (said now, not at the first call)."""
    import os

    if not path:
        return None
    if not os.access(path, os.R_OK) or not os.path.isfile(path):
        raise RemoteConfigError(f"{what} {path}: no such readable file")
    return os.path.abspath(path)


def resolve(url: str | None = None, instance: str | None = None, headers: tuple[str, ...] = (),
            execute: bool | None = None, upload: bool | None = None, timeout: float | None = None,
            table: dict | None = None, environ: dict[str, str] | None = None, cache_url: str | None = None,
            executor_url: str | None = None, ca: str | None = None, cert: str | None = None,
            key: str | None = None, credential_helper: str | None = None, platform: tuple[str, ...] = (),
            salt: str | None = None, strict: bool | None = None, refresh: bool | None = None) -> RemoteSettings | None:
    """The build's remote from the command line, then the environment (FARMER_REMOTE,
    FARMER_REMOTE_CACHE, FARMER_REMOTE_EXECUTOR, FARMER_REMOTE_INSTANCE, FARMER_REMOTE_HEADERS as
    NAME=VALUE,..., FARMER_REMOTE_EXEC, FARMER_REMOTE_UPLOAD, FARMER_REMOTE_TIMEOUT, FARMER_REMOTE_JOBS,
    FARMER_REMOTE_CA, FARMER_REMOTE_CERT, FARMER_REMOTE_KEY, FARMER_REMOTE_CREDENTIAL_HELPER,
    FARMER_REMOTE_PLATFORM as NAME=VALUE,..., FARMER_REMOTE_SALT, FARMER_REMOTE_STRICT,
    FARMER_REMOTE_REFRESH), then the Farmfile's [remote] table; None without a URL.
    `--remote` names the cache and the executor; `--remote-cache` and `--remote-executor` each
    one of them (an executor alone is the cache too). RemoteConfigError for a value that cannot
    be used."""
    import os

    env = os.environ if environ is None else environ
    table = table or {}
    url = url or env.get("FARMER_REMOTE") or table.get("url")
    cache_url = cache_url or env.get("FARMER_REMOTE_CACHE") or url
    executor_url = executor_url or env.get("FARMER_REMOTE_EXECUTOR")
    if not cache_url and not executor_url:
        return None
    if executor_url:
        execute = True  # naming an executor asks for remote execution
    cache_url = cache_url or executor_url
    if instance is None:
        instance = env.get("FARMER_REMOTE_INSTANCE", table.get("instance", ""))
    parsed = [parse_header(h) for h in headers]
    if not headers and env.get("FARMER_REMOTE_HEADERS"):
        parsed = [parse_header(h) for h in env["FARMER_REMOTE_HEADERS"].split(",") if h.strip()]
    if timeout is None:
        text = env.get("FARMER_REMOTE_TIMEOUT")
        try:
            timeout = float(text) if text else float(table.get("timeout", DEFAULT_TIMEOUT_S))
        except ValueError:
            raise RemoteConfigError(f"FARMER_REMOTE_TIMEOUT={text!r} is not a number of seconds") from None
    if timeout <= 0:
        raise RemoteConfigError(f"the remote timeout must be positive seconds, not {timeout:g}")
    if execute is None:
        execute = _flag(env["FARMER_REMOTE_EXEC"], "FARMER_REMOTE_EXEC") if "FARMER_REMOTE_EXEC" in env \
            else bool(table.get("execute", False))
    if upload is None:
        upload = _flag(env["FARMER_REMOTE_UPLOAD"], "FARMER_REMOTE_UPLOAD") if "FARMER_REMOTE_UPLOAD" in env \
            else bool(table.get("upload", True))
    if strict is None:
        strict = _flag(env.get("FARMER_REMOTE_STRICT", ""), "FARMER_REMOTE_STRICT")
    if refresh is None:
        refresh = _flag(env.get("FARMER_REMOTE_REFRESH", ""), "FARMER_REMOTE_REFRESH")
    text = env.get("FARMER_REMOTE_JOBS")
    try:
        jobs = int(text) if text else int(table.get("jobs", DEFAULT_JOBS))
    except ValueError:
        raise RemoteConfigError(f"FARMER_REMOTE_JOBS={text!r} is not a number of remote slots") from None
    if jobs < 1:
        raise RemoteConfigError(f"the remote jobs must be at least 1, not {jobs}")
    if not platform and env.get("FARMER_REMOTE_PLATFORM"):
        platform = tuple(p for p in env["FARMER_REMOTE_PLATFORM"].split(",") if p.strip())
    properties = dict(parse_property(p) for p in platform) if platform else table.get("platform")
    if salt is None:
        salt = env.get("FARMER_REMOTE_SALT", str(table.get("salt", "")))
    ca = _file(ca or env.get("FARMER_REMOTE_CA"), "--remote-ca")
    cert = _file(cert or env.get("FARMER_REMOTE_CERT"), "--remote-cert")
    key = _file(key or env.get("FARMER_REMOTE_KEY"), "--remote-key")
    if bool(cert) != bool(key):
        raise RemoteConfigError("--remote-cert and --remote-key go together (a client certificate and its key)")
    helper = credential_helper or env.get("FARMER_REMOTE_CREDENTIAL_HELPER") or None
    endpoint = Endpoint(cache_url, instance, tuple(parsed), timeout, ca=ca, cert=cert, key=key, helper=helper,
                        executor=executor_url)
    if (ca or cert) and not endpoint.secure:
        raise RemoteConfigError(f"--remote-ca and --remote-cert need a grpcs:// URL, not {cache_url}")
    return RemoteSettings(endpoint, upload=upload, execute=execute, jobs=jobs, platform=properties,
                          salt=salt, path=str(table.get("path", DEFAULT_PATH)), strict=strict, refresh=refresh)
