"""What one build is asked to do: `farmer build`'s targets and options (`BuildRequest`), as
the command line, a test or `farmer watch` gives them, and -j made into slots."""

from __future__ import annotations

import os

from farmer.errors import UsageError


def job_slots(value: int | None) -> int:
    """-j as given (None: not given) -> the scheduler's CPU slots."""
    if value is None:
        return -(-5 * (os.cpu_count() or 1) // 4)  # SPEC: ceil(1.25 x CPUs)
    if value < 1:
        raise UsageError(f"-j {value}: the number of jobs must be at least 1")
    return min(value, 4096)  # like make's unlimited -j; slots are lists, not unbounded


def failures_allowed(keep_going: bool | int | None) -> int:
    """-k as given -> the failures that stop a build, 0 for none (ninja's -k N: `-k 0` and a
    bare `-k` keep going past every failure; without -k, the first failure stops it)."""
    if keep_going is None or keep_going is False:
        return 1
    if keep_going is True:
        return 0
    if keep_going < 0:
        raise UsageError(f"-k {keep_going}: the number of failures must be 0 (no limit) or more")
    return keep_going


class BuildRequest:
    """`farmer build`'s arguments. `checked` makes the copy a build runs with: `jobs` in
    slots, `trace_file` absolute, each value checked; the build then sets `live` and makes
    `cache_dir` absolute from the project root."""

    __slots__ = ("targets", "directory", "farmfile", "farmfile_given", "ninja", "jobs", "load",
                 "keep_going", "dry_run", "explain", "no_worlds", "timeout", "trace_file", "cache",
                 "cache_dir", "remote", "base_dir", "live", "verbose", "quiet", "front", "jobserver", "check_deps",
                 "keep")

    def __init__(self, targets: list[str], directory: str | None = None, farmfile: str = "Farmfile",
                 farmfile_given: bool = True, ninja: bool = False, jobs: int | None = None,
                 load: float | None = None, keep_going: bool | int | None = False, dry_run: bool = False,
                 explain: bool = False, no_worlds: bool = False, timeout: float | None = None,
                 trace_file: str | None = None, cache: bool | None = None, cache_dir: str | None = None,
                 remote: dict | None = None, base_dir: str | None = None, live: bool = False,
                 verbose: bool = False, quiet: bool = False, front: str = "farmer",
                 jobserver: bool | None = None, check_deps: str | None = None,
                 keep: frozenset[str] = frozenset()) -> None:
        self.targets = targets
        self.directory = directory  # -C
        self.farmfile = farmfile  # -f, else the default name, found upwards (`farmfile_given`)
        self.farmfile_given = farmfile_given
        self.ninja = ninja  # --ninja: the manifest is a build.ninja (so is any *.ninja)
        self.jobs = jobs  # -j as given; the slots once `checked`
        self.load = load
        # -k: True keeps going past every failure, False stops at the first; a number is
        # ninja's -k N, the failures that stop the build (0: none). `checked` makes it a number.
        self.keep_going = keep_going
        self.dry_run = dry_run
        self.explain = explain
        self.no_worlds = no_worlds
        self.timeout = timeout
        self.trace_file = trace_file
        self.cache = cache  # --cache (True), --no-cache (False), neither (None)
        self.cache_dir = cache_dir
        self.remote = remote or {}  # --remote* flags, for farmer.remote.config.resolve
        self.base_dir = base_dir  # --base-dir (farmer/graph/basedir.py); None: FARMER_BASE_DIR
        self.live = live  # the live view on a terminal (set by the build)
        self.verbose = verbose  # -v: each command line as its computation ends, plain lines
        self.quiet = quiet  # --quiet: no progress lines, only what commands print
        self.front = front  # "ninja": what ninja prints at the end (`farmer ninja`, cli/ninja.py)
        # a client of make's jobserver when MAKEFLAGS names one (run/jobserver.py); None:
        # `checked` decides, yes unless -j was given (as ninja)
        self.jobserver = jobserver
        self.check_deps = check_deps  # --check-deps: "warn" or "strict"; None: the Farmfile's
        # `farmer ninja -d keepdepfile / keeprsp`: the depfiles and response files a build.ninja
        # build would delete once read, kept
        self.keep = keep

    def replace(self, **changes) -> BuildRequest:
        """A copy with `changes` (option names as keywords) made."""
        return BuildRequest(**{**{name: getattr(self, name) for name in self.__slots__}, **changes})

    def checked(self) -> BuildRequest:
        """The request as a build runs it; a bad value is a usage error before the build
        takes the lock. (Again on a checked request: the same.)"""
        if self.timeout is not None and not 0 < self.timeout <= 1e9:  # nan and inf too
            raise UsageError(f"--timeout {self.timeout:g}: must be above 0 seconds (and finite)")
        slots = job_slots(self.jobs)
        if self.check_deps is not None:  # no tracer: a usage error before the lock, even for a no-op
            if self.check_deps not in ("warn", "strict"):
                raise UsageError(f"--check-deps={self.check_deps}: use --check-deps or --check-deps=strict")
            from farmer.run.tracer import strace

            strace.require()
        if os.environ.get("FARMER_CACHE"):
            from farmer.record.cache.settings import cache_switch

            cache_switch(os.environ)
        return self.replace(jobs=slots, trace_file=os.path.abspath(self.trace_file) if self.trace_file else None,
                            keep_going=failures_allowed(self.keep_going),
                            jobserver=self.jobs is None if self.jobserver is None else self.jobserver)

    def ending(self) -> str:
        """What a no-op build prints at its end (build/noop.py's `try_build`)."""
        if self.front == "ninja":
            return "" if self.quiet else "ninja"
        return "summary"

    def is_ninja(self) -> bool:
        return self.ninja or self.farmfile.endswith(".ninja")
