"""GNU make's jobserver, both ways (docs/ninja.md, "GNU make jobserver").

A jobserver is a pipe (or a named FIFO) holding one byte per job that may run besides the
one every process may run on its own. A client takes a byte before each job beyond its
first and writes it back when that job ends.

- **Client**: under `make -jN`, a recipe's `farmer build` finds `--jobserver-auth=R,W`
  (make's pipe, inherited as descriptors R and W) or `--jobserver-auth=fifo:PATH` (make
  4.4's named FIFO) in MAKEFLAGS. farmer's first job runs on its own token, each further
  one only with a byte taken, so make's -jN holds across everything it runs. A -j given to
  farmer itself wins, as in ninja.
- **Pool**: otherwise, a build with more than one slot is a jobserver for the commands it
  runs: a pipe with slots - 1 bytes, passed to every command (MAKEFLAGS `-jN
  --jobserver-auth=R,W`, the descriptors inherited), which farmer draws on for its own
  jobs too. A recursive `make` in a step then shares farmer's -j instead of adding its own.
  (A pipe, not a FIFO: make before 4.4, Debian 12's 4.3 for one, stops at a `fifo:` it
  cannot read.)

Both sit in front of the build's executor (`Jobserved`): its `can_start`, which the
scheduler asks before each start, is where a token is taken; its `wait` gives back what
ended jobs held. No token is ever kept past the build: `close` writes back every one.
"""

from __future__ import annotations

import os

from farmer.run.executors.base import Executor, InFront

TYPE_CHECKING = False
if TYPE_CHECKING:
    from farmer.graph.graph import Computation
    from farmer.run.executors.base import Outcome

_STARVED_WAIT_S = 0.05  # how often a build waiting for a token looks again


def auth_of(makeflags: str) -> str | None:
    """The last `--jobserver-auth=` (or make 4.1's `--jobserver-fds=`) value in MAKEFLAGS."""
    found = None
    for word in makeflags.split():
        for prefix in ("--jobserver-auth=", "--jobserver-fds="):
            if word.startswith(prefix):
                found = word[len(prefix):]
    return found


class Jobserver:
    """Where tokens are taken (`read_fd`, non-blocking, farmer's own) and given back
    (`write_fd`). `owned`: farmer's pool, whose pipe and MAKEFLAGS it undoes at `close`."""

    __slots__ = ("read_fd", "write_fd", "owned", "saved_makeflags", "child_fds")

    def __init__(self, read_fd: int, write_fd: int, owned: bool = False) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd
        self.owned = owned
        self.saved_makeflags: str | None = None
        self.child_fds: tuple[int, int] | None = None  # the pool's, inherited by commands

    def take(self) -> bytes | None:
        """A token, or None when none is free now."""
        try:
            data = os.read(self.read_fd, 1)
        except (BlockingIOError, InterruptedError):
            return None
        return data or None

    def give(self, token: bytes) -> None:
        try:
            os.write(self.write_fd, token)
        except OSError:
            pass  # the server has gone: nobody to give it to

    def close(self) -> None:
        for fd in {self.read_fd, self.write_fd, *(self.child_fds or ())}:
            try:
                os.close(fd)
            except OSError:
                pass
        if self.owned:
            if self.saved_makeflags is None:
                os.environ.pop("MAKEFLAGS", None)
            else:
                os.environ["MAKEFLAGS"] = self.saved_makeflags


def connect(auth: str) -> Jobserver:
    """A client of the jobserver `auth` names (MAKEFLAGS's value); OSError or ValueError
    when it cannot be used."""
    flags = os.O_CLOEXEC
    if auth.startswith("fifo:"):
        path = auth[5:]
        read_fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | flags)
        try:
            write_fd = os.open(path, os.O_WRONLY | flags)
        except OSError:
            os.close(read_fd)
            raise
        return Jobserver(read_fd, write_fd)
    r, w = (int(x) for x in auth.split(","))
    if r < 0 or w < 0:
        raise ValueError(f"no descriptors in {auth}")
    for fd in (r, w):
        import stat

        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            raise ValueError(f"descriptor {fd} is not a pipe")
    # The pipe is shared with make, blocking: reading it through a description of farmer's
    # own, non-blocking, never waits and changes nothing for make.
    read_fd = os.open(f"/proc/self/fd/{r}", os.O_RDONLY | os.O_NONBLOCK | flags)
    return Jobserver(read_fd, os.dup(w))


def pool(slots: int) -> Jobserver:
    """farmer's own jobserver: `slots` - 1 tokens in a pipe that every command inherits,
    named in MAKEFLAGS (the environment the build's commands start from)."""
    r, w = os.pipe()
    for fd in (r, w):  # inherited: every command is spawned with them
        os.set_inheritable(fd, True)
    os.write(w, b"+" * (slots - 1))
    own = Jobserver(os.open(f"/proc/self/fd/{r}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), os.dup(w), owned=True)
    own.child_fds = (r, w)
    own.saved_makeflags = os.environ.get("MAKEFLAGS")
    mine = f" -j{slots} --jobserver-auth={r},{w}"
    os.environ["MAKEFLAGS"] = (own.saved_makeflags or "") + mine
    return own


def for_build(slots: int, client: bool, warn) -> Jobserver | None:
    """The jobserver a build runs on: make's, named in MAKEFLAGS (when `client`: no -j was
    given), else a pool of its own when it has more than one slot; None: neither, or
    FARMER_JOBSERVER=0 (commands then get farmer's environment as it is)."""
    if os.environ.get("FARMER_JOBSERVER", "").strip().lower() in ("0", "false", "no", "off"):
        return None
    auth = auth_of(os.environ.get("MAKEFLAGS", "")) if client else None
    if auth is not None:
        try:
            return connect(auth)
        except (OSError, ValueError) as e:
            detail = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            warn(f"farmer: warning: MAKEFLAGS names a jobserver farmer cannot use ({auth}: {detail}); "
                 "running with its own -j (mark the recipe with + so make passes its jobserver)")
    if slots <= 1:
        return None
    try:
        return pool(slots)
    except OSError:
        return None


class Jobserved(InFront):
    """`inner` under a jobserver: one job on farmer's own token, each further one on a
    token taken in `can_start` and given back once a `wait` reports its end."""

    def __init__(self, inner: Executor, server: Jobserver) -> None:
        super().__init__(inner)
        self.server = server
        self.held: list[bytes] = []
        self.starved = False

    def can_start(self) -> bool:
        if not self.inner.can_start():
            return False
        if len(self.held) >= self.inner.running():  # the next start's token is there (the first: farmer's own)
            return True
        token = self.server.take()
        if token is None:
            self.starved = True
            return False
        self.held.append(token)
        return True

    def start(self, comp: Computation) -> None:
        self.starved = False
        self.inner.start(comp)

    def _give_back(self) -> None:
        """Tokens beyond what the running jobs need, written back."""
        keep = max(self.inner.running() - 1, 0)
        while len(self.held) > keep:
            self.server.give(self.held.pop())

    def wait(self, timeout: float | None) -> list[Outcome]:
        self._give_back()  # (one taken for a start the scheduler then passed over, too)
        if self.starved:
            timeout = _STARVED_WAIT_S if timeout is None else min(timeout, _STARVED_WAIT_S)
            self.starved = False
        ended = self.inner.wait(timeout)
        self._give_back()
        return ended

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            while self.held:
                self.server.give(self.held.pop())
            self.server.close()
