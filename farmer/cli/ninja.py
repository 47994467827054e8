"""`farmer ninja` and the `farmer-ninja` script: ninja's command line, for the front ends
that call ninja (`cmake --build`, CMake's try_compile, ctest's build step, `meson
compile`). It reads ninja's flags, builds the manifest with farmer's engine and prints what
ninja prints where scripts read it (report/ninja_status.py); `-t TOOL` runs one of ninja's
tools (cli/ninja_tools.py). Like the quick path of `farmer build` (farmer/__main__.py) it
imports neither click nor the engine before it has to (docs/ninja.md, "A drop-in ninja")."""

from __future__ import annotations

import os
import sys

# The ninja release whose command line, tools and manifest language this front end stands
# for: CMake (>= 1.10: -t restat, recompact, cleandead) and Meson (>= 1.9: compdb -x) turn
# features on by this number.
NINJA_VERSION = "1.12.1"

USAGE = """usage: farmer-ninja [options] [targets...]

if targets are unspecified, builds the 'default' target (see manual).

options:
  --version      print the ninja version farmer stands in for ("{version}")
  -v, --verbose  show all command lines while building
  --quiet        don't show progress status, just command output

  -C DIR   change to DIR before doing anything else
  -f FILE  specify input build file [default=build.ninja]

  -j N     run N jobs in parallel (0 means infinity) [default: ceil(1.25 x CPUs)]
  -k N     keep going until N jobs fail (0 means infinity) [default=1]
  -l N     do not start new jobs if the load average is greater than N
  -n       dry run (don't run commands but act like they succeeded)

  -d MODE  enable debugging (use '-d list' to list modes)
  -t TOOL  run a subtool (use '-t list' to list subtools)
    terminates toplevel options; further flags are passed to the tool
  -w FLAG  adjust warnings (use '-w list' to list warnings)
"""

DEBUG_MODES = """debugging modes:
  stats        print operation counts/timing info
  explain      explain what caused a command to execute
  keepdepfile  don't delete depfiles after they're read by ninja
  keeprsp      don't delete @response files on success
multiple modes can be enabled via -d FOO -d BAR
"""

WARNING_FLAGS = """warning flags:
  phonycycle={err,warn}  phony build statement references itself
"""

_TAKES_VALUE = frozenset("dfjklt wC".replace(" ", ""))
_LONG = {"--help": "h", "--version": "version", "--verbose": "v", "--quiet": "quiet", "--status": "status"}


class Usage(Exception):
    """A command line ninja would refuse: its message (`kind` its word: error, fatal), and
    ninja's exit status 1; `usage`: the usage text follows, as for an unknown option."""

    def __init__(self, message: str, usage: bool = False, kind: str = "error") -> None:
        super().__init__(message)
        self.usage = usage
        self.kind = kind


class NinjaArgs:
    """ninja's command line, read."""

    __slots__ = ("directory", "file", "jobs", "keep_going", "load", "dry_run", "verbose", "quiet",
                 "explain", "stats", "keep", "tool", "tool_args", "targets", "status", "done")

    def __init__(self) -> None:
        self.directory: str | None = None
        self.file = "build.ninja"
        self.jobs: int | None = None
        self.keep_going: int | None = None  # -k N; None: stop at the first failure
        self.load: float | None = None
        self.dry_run = False
        self.verbose = False
        self.quiet = False
        self.explain = False
        self.stats = False
        self.keep: frozenset[str] = frozenset()  # -d keepdepfile / keeprsp: what is not deleted
        self.tool: str | None = None
        self.tool_args: list[str] = []
        self.targets: list[str] = []
        self.status: str | None = None  # --status FMT, NINJA_STATUS's format
        self.done: str | None = None  # printed instead of building: --version, -d list, -w list


def _number(flag: str, value: str, message: str) -> int:
    try:
        return int(value, 10)
    except ValueError:
        raise Usage(message, kind="fatal") from None


def parse(argv: list[str]) -> NinjaArgs:
    """ninja's flags in getopt's way: short options run together (`-nv`), their values
    attached or next (`-j8`, `-j 8`), targets among the options, `--` ending them, and
    `-t TOOL` ending them too (the rest is the tool's)."""
    args = NinjaArgs()
    i, n = 0, len(argv)
    while i < n:
        arg = argv[i]
        i += 1
        if arg == "--":
            args.targets.extend(argv[i:])
            break
        if arg.startswith("--"):
            name, eq, attached = arg.partition("=")
            key = _LONG.get(name)
            if key is None:
                raise Usage(f"unrecognized option '{arg}'", usage=True)
            if key == "status":
                if not eq:
                    if i == n:
                        raise Usage("option '--status' requires an argument", usage=True)
                    attached, i = argv[i], i + 1
                args.status = attached
                continue
            if eq:
                raise Usage(f"option '{name}' doesn't allow an argument", usage=True)
            if key == "version":
                args.done = NINJA_VERSION + "\n"
                return args
            if key == "h":
                raise Usage("", usage=True)
            if key == "v":
                args.verbose = True
            else:
                args.quiet = True
            continue
        if not arg.startswith("-") or arg == "-":
            args.targets.append(arg)
            continue
        k = 1
        while k < len(arg):
            c = arg[k]
            k += 1
            if c not in _TAKES_VALUE:
                if c == "n":
                    args.dry_run = True
                elif c == "v":
                    args.verbose = True
                elif c == "h":
                    raise Usage("", usage=True)
                else:
                    raise Usage(f"invalid option -- '{c}'", usage=True)
                continue
            value = arg[k:]
            if not value:
                if i == n:
                    raise Usage(f"option requires an argument -- '{c}'", usage=True)
                value, i = argv[i], i + 1
            k = len(arg)
            _option(args, c, value)
            if args.done is not None:
                return args
            if c == "t":
                args.tool_args = argv[i:]
                return args
    return args


def _option(args: NinjaArgs, c: str, value: str) -> None:
    if c == "C":
        args.directory = value
    elif c == "f":
        args.file = value
    elif c == "j":
        jobs = _number(c, value, "invalid -j parameter")
        if jobs < 0:
            raise Usage("invalid -j parameter", kind="fatal")
        args.jobs = jobs if jobs > 0 else 4096  # 0: no limit (farmer's most slots)
    elif c == "k":
        count = _number(c, value, "-k parameter not numeric; did you mean -k 0?")
        args.keep_going = max(count, 0)  # 0 and below: no limit
    elif c == "l":
        try:
            args.load = float(value)
        except ValueError:
            raise Usage("-l parameter not numeric: did you mean -l 0.0?", kind="fatal") from None
    elif c == "d":
        if value == "list":
            args.done = DEBUG_MODES
        elif value == "explain":
            args.explain = True
        elif value == "stats":
            args.stats = True
        elif value in ("keepdepfile", "keeprsp"):
            args.keep = args.keep | {value}
        elif value != "nostatcache":
            raise Usage(f"unknown debug setting '{value}'")
    elif c == "w":
        if value == "list":
            args.done = WARNING_FLAGS
        elif value in ("dupbuild=err", "dupbuild=warn", "depfilemulti=err", "depfilemulti=warn"):
            sys.stderr.write(f"ninja: warning: deprecated warning '{value.partition('=')[0]}'\n")
        elif value not in ("phonycycle=err", "phonycycle=warn"):
            raise Usage(f"unknown warning flag '{value}'")
    elif c == "t":
        args.tool = value


def caret_targets(manifest: str, targets: list[str]) -> list[str]:
    """`path^` named: the first output of the first edge that takes `path` as an input (ninja's
    `foo.c^`: the object a source compiles into). The manifest is read only when one is given."""
    if not any(t.endswith("^") for t in targets):
        return targets
    from farmer.manifest.ninja_parser import canonical, parse_manifest

    edges = parse_manifest(manifest).edges
    out = []
    for target in targets:
        if not target.endswith("^"):
            out.append(target)
            continue
        path = canonical(target[:-1])
        edge = next((e for e in edges if path in e.ins), None)
        if edge is None:
            raise Usage(f"'{path}' has no out edge")
        out.append(edge.outs[0])
    return out


def main(argv: list[str]) -> int:
    """`farmer ninja ARGV` (and `farmer-ninja ARGV`): its exit status, ninja's."""
    try:
        args = parse(argv)
    except Usage as e:
        if str(e):
            sys.stderr.write(f"ninja: {e.kind}: {e}\n")
        if e.usage:
            sys.stderr.write(USAGE.format(version=NINJA_VERSION))
        return 1
    if args.done is not None:
        sys.stdout.write(args.done)
        return 0
    if args.directory is not None:
        if args.tool is None and not args.quiet:
            # ninja's wording and quotes: editors follow the directory by this line
            sys.stdout.write(f"ninja: Entering directory `{args.directory}'\n")
            sys.stdout.flush()
        try:
            os.chdir(args.directory)
        except OSError as e:
            sys.stderr.write(f"ninja: fatal: chdir to '{args.directory}' - {e.strerror.lower()}\n")
            return 1
    if args.tool is not None:
        from farmer.cli.ninja_tools import run_tool

        return run_tool(args.tool, args.file, args.tool_args)
    if not os.path.isfile(args.file):  # ninja's words, for the scripts that read them
        sys.stderr.write(f"ninja: error: loading '{args.file}': No such file or directory\n")
        return 1
    if args.status is not None:
        os.environ["NINJA_STATUS"] = args.status
    try:
        targets = caret_targets(args.file, args.targets)
    except Usage as e:
        sys.stderr.write(f"ninja: error: {e}\n")
        return 1
    from farmer.build.request import BuildRequest
    from farmer.build.workspace import Workspace

    request = BuildRequest(targets, farmfile=args.file, farmfile_given=True, ninja=True, jobs=args.jobs,
                           load=args.load, keep_going=args.keep_going, dry_run=args.dry_run,
                           explain=args.explain, verbose=args.verbose, quiet=args.quiet, front="ninja",
                           keep=args.keep)
    if not args.stats:
        return Workspace().build(request)
    import time

    began_ns = time.time_ns()
    began = time.perf_counter()
    code = Workspace().build(request)
    sys.stdout.write(stats_table(time.perf_counter() - began, _commands_run(began_ns)))
    return code


def _commands_run(since_ns: int) -> list[float]:
    """The seconds each command of this build took, as last-build.json tells (none when the
    build wrote none: a no-op's fast path)."""
    import json

    path = os.path.join(".farmer", "last-build.json")
    try:
        if os.stat(path).st_mtime_ns < since_ns:
            return []
        with open(path, encoding="utf-8") as f:
            tasks = json.load(f).get("tasks", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [t.get("duration_s") or 0.0 for t in tasks if isinstance(t, dict) and t.get("status") == "ran"]


def stats_table(build_s: float, commands_s: list[float]) -> str:
    """`-d stats` in ninja's table (`metric`, `count`, `avg (us)`, `total (ms)`, tab
    separated, names padded), with what farmer measures: the whole build, and the commands
    that ran."""
    rows = [("farmer build", 1, build_s)]
    if commands_s:
        rows.append(("command", len(commands_s), sum(commands_s)))
    width = max(len("metric"), *(len(name) for name, _, _ in rows))
    out = [f"{'metric':<{width}}\t{'count':<6}\t{'avg (us)':<9}\t{'total (ms)'}\n"]
    for name, count, seconds in rows:
        micros = seconds * 1e6
        out.append(f"{name:<{width}}\t{count:<6d}\t{micros / count:<8.1f}\t{micros / 1000:.1f}\n")
    return "".join(out)


def _early(signum: int, frame: object) -> None:
    """A signal while Python still imports farmer: nothing has started, leave quietly."""
    os.write(2, b"ninja: interrupted by user\n")
    os._exit(128 + signum)


def run(argv: list[str] | None = None) -> None:
    """The `farmer-ninja` script, and `farmer ninja` (farmer/__main__.py)."""
    from farmer.startup.cheap import signal

    sigint = signal.getsignal(signal.SIGINT)  # SIG_IGN in a background job: kept
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(s) != signal.SIG_IGN:
            signal.signal(s, _early)
    argv = sys.argv[1:] if argv is None else argv
    from farmer.cli import exit as ending

    signal.signal(signal.SIGINT, sigint)
    ending.main(lambda: main(argv), leave_at_once=True)
