"""Fixtures for the tests that run whole builds.

Every test gets a fresh project directory under ``tmp_path`` (`project`). It drives the real
command line, ``python -m farmer ...``, through the one runner here (`run_farmer`,
`start_farmer`, `Project.farmer`, `Project.popen`), with stdout/stderr captured (so stdout is
not a terminal and farmer prints its plain output); or, where only the build's decisions are
checked, runs the build in this process with a fake executor (`Project.build_in_process`).
Helpers that are not fixtures are in helpers.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

SUMMARY_WORDS = ("ran", "up to date", "cached", "failed", "interrupted", "skipped")
PROGRESS_RE = re.compile(r"^\[(\d+)/(\d+)\] (\S+) (.+)$")


def farmer_env(extra: dict | None = None, unset: tuple[str, ...] = ()) -> dict:
    """The environment a farmer under test runs with: this one, with the repository first on
    PYTHONPATH and without what would change its behaviour (FARMER_JOBS, GitHub's
    annotations, and any variable starting with one of `unset`), then `extra`."""
    env = {k: v for k, v in os.environ.items() if not (unset and k.startswith(unset))}
    pp = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + pp if pp else "")
    env.pop("FARMER_JOBS", None)
    for name in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY"):  # tests run in Actions too: no annotations
        env.pop(name, None)
    if extra:
        env.update(extra)
    return env


def farmer_command(*args) -> list[str]:
    return [sys.executable, "-m", "farmer", *map(str, args)]


def run_farmer(cwd: Path | str, *args, env: dict | None = None, unset: tuple[str, ...] = (),
               timeout: float | None = 60, **run_options) -> "Result":
    """`python -m farmer ARGS` in `cwd`, to its end, with its output captured as text:
    the one runner every test that starts farmer and waits for it uses. `env` and `unset` as
    for farmer_env; `run_options` go to subprocess.run (input=..., preexec_fn=...)."""
    if "input" not in run_options:
        run_options["stdin"] = subprocess.DEVNULL
    t0 = time.monotonic()
    cp = subprocess.run(farmer_command(*args), cwd=cwd, capture_output=True, text=True, timeout=timeout,
                        env=farmer_env(env, unset), **run_options)
    return Result(cp, args, time.monotonic() - t0)


def start_farmer(cwd: Path | str, *args, env: dict | None = None, unset: tuple[str, ...] = (),
                 **popen_options) -> subprocess.Popen:
    """`python -m farmer ARGS` started in `cwd` and left running, its output in text pipes
    unless `popen_options` say otherwise."""
    options = {"stdin": subprocess.DEVNULL, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE,
               "text": True, **popen_options}
    return subprocess.Popen(farmer_command(*args), cwd=cwd, env=farmer_env(env, unset), **options)


class Result:
    """A finished farmer invocation."""

    def __init__(self, cp: subprocess.CompletedProcess, args, elapsed: float):
        self.cp = cp
        self.args = [str(a) for a in args]
        self.returncode = cp.returncode
        self.stdout = cp.stdout
        self.stderr = cp.stderr
        self.elapsed = elapsed

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def __repr__(self) -> str:  # shows up in assertion messages
        return (
            f"<farmer {' '.join(self.args)} -> rc={self.returncode} "
            f"({self.elapsed:.2f}s)\n--- stdout ---\n{self.stdout}"
            f"--- stderr ---\n{self.stderr}>"
        )

    # -- plain output -------------------------------------------------------
    def finished(self) -> list[tuple[int, int, str, str]]:
        """[(done, total, task, id)] for every `[done/total] TASK ID` line: one per
        computation that ran or failed, printed as it finished (SPEC section 3)."""
        out = []
        for line in self.stdout.splitlines():
            m = PROGRESS_RE.match(line.rstrip())
            if m:
                out.append((int(m[1]), int(m[2]), m[3], m[4]))
        return out

    def finished_ids(self) -> list[str]:
        return [s[3] for s in self.finished()]

    def finished_lines(self) -> list[str]:
        """What each `[done/total]` line says after its count: `TASK ID`, or the description
        of a build.ninja edge that has one."""
        return [f"{task} {what}" for _, _, task, what in self.finished()]

    def summary_line(self) -> str:
        lines = [l for l in self.stdout.splitlines() if l.strip()]
        assert lines, f"no stdout at all: {self!r}"
        last = lines[-1]
        assert last.startswith("farmer: "), f"last stdout line is not the summary: {self!r}"
        return last

    def summary(self) -> dict[str, int]:
        line = self.summary_line()
        counts = {}
        for word in SUMMARY_WORDS:
            m = re.search(r"\b" + re.escape(word) + r"\D{0,3}(\d+)", line)
            assert m, f"summary line lacks {word!r} N: {line!r}"
            counts[word] = int(m.group(1))
        return counts


class Project:
    """A temporary farmer project."""

    def __init__(self, root: Path):
        self.root = root
        self.procs: list[subprocess.Popen] = []
        self.markers: list[str] = []

    # -- files ----------------------------------------------------------------
    def path(self, rel: str) -> Path:
        return self.root / rel

    def write(self, rel: str, text: str, dedent: bool = True) -> Path:
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if dedent:
            text = textwrap.dedent(text)
        p.write_text(text)
        return p

    def farmfile(self, text: str, name: str = "Farmfile") -> Path:
        return self.write(name, text)

    def read(self, rel: str) -> str:
        return (self.root / rel).read_text()

    def exists(self, rel: str) -> bool:
        return (self.root / rel).exists()

    def remove(self, rel: str) -> None:
        (self.root / rel).unlink()

    def touch_later(self, rel: str, seconds: float = 100.0) -> None:
        """Change only the timestamps of a file (content unchanged)."""
        p = self.root / rel
        st = p.stat()
        os.utime(p, ns=(st.st_atime_ns + int(seconds * 1e9), st.st_mtime_ns + int(seconds * 1e9)))

    # -- farmer -------------------------------------------------------------
    def farmer(self, *args, cwd: Path | None = None, timeout: float = 60, env: dict | None = None,
               **run_options) -> Result:
        return run_farmer(cwd or self.root, *args, env=env, timeout=timeout, **run_options)

    def build(self, *args, **kw) -> Result:
        return self.farmer("build", *args, **kw)

    def build_in_process(self, *args: str, runner=None, **options) -> Result:
        """`farmer build ARGS` in this process with a fake executor (tests/fakes.py), as
        a workspace runs it: the no-op check, the lock, the real scheduler and recorder.
        ARGS: targets and the options -f FILE, -j N (1 unless given), -k, -n, --explain, -l N,
        --no-worlds; `options`: BuildRequest's keywords (`use_cache` for its `cache`:
        --cache), and `cache`, a run cache handed to the workspace. The result's `runner`
        says what ran. A usage error (a graph error...) is raised, not printed: the command
        line's own words for it are its tests' to check."""
        from fakes import FakeRunner

        from farmer.build.request import BuildRequest
        from farmer.build.workspace import Engines, Workspace

        flags = {"-k": "keep_going", "--keep-going": "keep_going", "-n": "dry_run",
                 "--dry-run": "dry_run", "--explain": "explain", "--no-worlds": "no_worlds"}
        valued = {"-j": ("jobs", int), "--jobs": ("jobs", int), "-l": ("load", float),
                  "-f": ("farmfile", str)}
        targets, words = [], list(map(str, args))
        while words:
            word = words.pop(0)
            if word in flags:
                options[flags[word]] = True
            elif word in valued:
                name, kind = valued[word]
                options[name] = kind(words.pop(0))
            elif word.startswith("-"):
                raise AssertionError(f"build_in_process does not take {word}: use project.build")
            else:
                targets.append(word)

        runner = runner or FakeRunner(self.root)
        cwd = os.getcwd()
        handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        out, err = io.StringIO(), io.StringIO()
        t0 = time.monotonic()
        try:
            os.chdir(self.root)
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                engines = Engines(executor=runner, cache=options.pop("cache", None))
                if "use_cache" in options:
                    options["cache"] = options.pop("use_cache")
                request = BuildRequest(targets, farmfile_given="farmfile" in options, **{"jobs": 1, **options})
                code = Workspace(engines).build(request)
        finally:
            os.chdir(cwd)
            for s, handler in handlers.items():  # a build leaves its signals ignored
                signal.signal(s, handler)
        cp = subprocess.CompletedProcess(["build", *args], code, out.getvalue(), err.getvalue())
        result = Result(cp, cp.args, time.monotonic() - t0)
        result.runner = runner
        return result

    def popen(self, *args, env: dict | None = None, **popen_options) -> subprocess.Popen:
        """Start farmer in the background, in its own session (so the test can signal it alone);
        cleanup() kills it if it is still running."""
        p = start_farmer(self.root, *args, env=env, start_new_session=True, **popen_options)
        self.procs.append(p)
        return p

    def unique_sleep(self, seconds: int = 30) -> str:
        """A `sleep` command line unique to this test, findable in /proc."""
        frac = str(uuid.uuid4().int % 10**9).rjust(9, "1")
        marker = f"sleep {seconds}.{frac}"
        self.markers.append(marker)
        return marker

    def wait_for(self, rel: str, timeout: float = 15.0, proc: subprocess.Popen | None = None) -> bool:
        """Wait until `rel` exists; give up early if `proc` (a farmer) has already exited."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.exists(rel):
                return True
            if proc is not None and proc.poll() is not None:
                return self.exists(rel)
            time.sleep(0.02)
        return False

    # -- last-build.json ----------------------------------------------------
    def last_build(self) -> dict:
        return json.loads(self.read(".farmer/last-build.json"))

    def tasks(self) -> dict[str, dict]:
        return {t["id"]: t for t in self.last_build()["tasks"]}

    def statuses(self) -> dict[str, str]:
        return {t["id"]: t["status"] for t in self.last_build()["tasks"]}

    def reasons(self) -> dict[str, str]:
        return {t["id"]: t["reason"] for t in self.last_build()["tasks"]}

    # -- cleanup ------------------------------------------------------------
    def cleanup(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
            for stream in (p.stdout, p.stderr):
                if stream:
                    stream.close()
        for marker in self.markers:
            for pid in pids_matching(marker):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        # anything farmer started for this project (commands, worlds) runs in its root
        for pid in processes_in(self.root):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def pids_matching(marker: str) -> list[int]:
    """Live (non-zombie) processes whose command line contains `marker`."""
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            found.append(int(entry))
    return found


def processes_in(root: Path) -> list[int]:
    """Live (non-zombie) processes whose working directory is `root` or below it."""
    root_s = str(Path(root).resolve())
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and (cwd == root_s or cwd.startswith(root_s + "/")):
            found.append(int(entry))
    return found


def wait_no_process_under(root: Path, timeout: float = 3.0) -> list[int]:
    """Wait until no process runs in `root` or below it; what is left after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        left = processes_in(root)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.02)


def wait_no_process_in(project: "Project", timeout: float = 3.0) -> list[int]:
    return wait_no_process_under(project.root, timeout)


def wait_no_process(marker: str, timeout: float = 3.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while True:
        left = pids_matching(marker)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def assert_error(r: Result, *words: str, code: int = 2) -> str:
    """farmer failed with a one-line `farmer: error: ...` message naming `words`."""
    assert r.returncode == code, r
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout, r
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, f"expected exactly one stderr line: {r!r}"
    msg = lines[0]
    assert msg.startswith("farmer: error: "), r
    for w in words:
        assert w in msg, f"error message does not name {w!r}: {msg!r}"
    return msg


class HarnessCounts:
    """How much the fault-injection harnesses tried in this session (kill points, fuzz
    examples, exit codes...): a report for pytest's terminal summary, never a check."""

    __slots__ = ("by_harness",)

    def __init__(self) -> None:
        self.by_harness: dict[str, Counter] = {}

    def add(self, harness: str, what: str, n: int = 1) -> None:
        self.by_harness.setdefault(harness, Counter())[what] += n

    def lines(self) -> list[str]:
        return [f"[{harness}] " + ", ".join(f"{what} {n}" for what, n in counts.items())
                for harness, counts in sorted(self.by_harness.items())]


HARNESS_COUNTS = pytest.StashKey[HarnessCounts]()


@pytest.fixture(scope="session")
def harness_counts(pytestconfig) -> HarnessCounts:
    return pytestconfig.stash.setdefault(HARNESS_COUNTS, HarnessCounts())


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    counts = config.stash.get(HARNESS_COUNTS, None)
    if counts is not None and counts.by_harness:
        terminalreporter.section("what the fault harnesses tried")
        for line in counts.lines():
            terminalreporter.write_line(line)


def pytest_sessionstart(session) -> None:
    """pytest's own SIGTERM (a cancelled CI job, `timeout`, `kill`) ends the run as Ctrl-C
    does, so the fixtures' teardowns stop the servers and processes they started (after a
    SIGKILL, tools/reapi_stack.py's watchdog stops the REAPI stacks)."""
    main = os.getpid()

    def interrupted(signum: int, frame) -> None:
        if os.getpid() != main:  # a fork of pytest (an executor's child): as without this handler
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupted)


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    """No test touches the user's real cache (~/.cache/farmer): every farmer a test starts
    inherits these (farmer_env copies os.environ), and the cache stays off unless a test
    turns it on."""
    where = tmp_path_factory.mktemp("farmer-cache")
    monkeypatch.setenv("FARMER_CACHE_DIR", str(where / "farmer"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(where / "xdg"))
    monkeypatch.delenv("FARMER_CACHE", raising=False)
    return where / "farmer"


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    proj = Project(root)
    try:
        yield proj
    finally:
        proj.cleanup()
