"""`farmer build`'s options, declared once: click reads this table for `build` and `watch`
(cli/app.py), and `quick_build_args` reads the common form of `farmer build` (targets, -C,
-f, -j, -k) by hand from it, so that a no-op build, which must finish in a few tens of
milliseconds, never imports click or the build engine. Either way an option means the
same (SPEC §3); anything the quick reader does not take goes to click."""

from __future__ import annotations

# How an option takes its value: a flag takes none; a switch is --NAME/--no-NAME; a choice
# is --NAME (its first choice) or --NAME=CHOICE, never a separate word (which is a target).
# A count is an int that may be left out: a bare `-k` is `-k 0` (`bare_counts`).
FLAG, INT, FLOAT, TEXT, FILE, TEXTS, SWITCH, CHOICE = "flag", "int", "float", "text", "file", "texts", "switch", "choice"
COUNT = "count"
BARE_COUNT = "0"  # what a bare -k means: ninja's -k 0, no limit


class BuildOption:
    """One option of `farmer build`. `flags`: as typed (a switch's first, its --no- form
    second); `dest`: the parameter's name; `quick`: read by `quick_build_args` too (a short
    option of the common form), else only by click; `choices`: a choice's values, the first
    what the bare flag means."""

    __slots__ = ("flags", "dest", "kind", "help", "metavar", "default", "quick", "choices")

    def __init__(self, flags: tuple[str, ...], dest: str, kind: str, help: str,
                 metavar: str | None = None, default: object = None, quick: bool = False,
                 choices: tuple[str, ...] = ()) -> None:
        self.flags = flags
        self.dest = dest
        self.kind = kind
        self.help = help
        self.metavar = metavar
        self.default = default
        self.quick = quick
        self.choices = choices


# In the order `farmer build --help` lists them.
BUILD_OPTIONS = (
    BuildOption(("--ninja",), "ninja", FLAG, "Read FARMFILE as a ninja manifest (default -f: build.ninja)."),
    BuildOption(("-C",), "directory", TEXT, "Change to DIR before anything else.", "DIR", quick=True),
    BuildOption(("-f",), "farmfile", TEXT, "The Farmfile, relative to -C DIR (default: Farmfile).",
                "FARMFILE", "Farmfile", quick=True),
    BuildOption(("-j",), "jobs", INT, "CPU slots (default: ceil(1.25 x CPUs)).", quick=True),
    BuildOption(("-l",), "load", FLOAT, "Start nothing new while the load average is above LOAD."),
    BuildOption(("-k",), "keep_going", COUNT,
                "Keep going with what does not depend on a failure; -k N: until N failed (0, or -k "
                "alone: no limit).", "[N]", quick=True),
    BuildOption(("-n",), "dry_run", FLAG, "Print what would run; run nothing."),
    BuildOption(("-v", "--verbose"), "verbose", FLAG, "Print each command line (plain lines, no live view).",
                quick=True),
    BuildOption(("--quiet",), "quiet", FLAG, "No progress lines: only what commands print, and the summary.",
                quick=True),
    BuildOption(("--explain",), "explain", FLAG, "Say why each computation runs."),
    BuildOption(("--no-worlds",), "no_worlds", FLAG, "Run world tasks in fresh interpreters."),
    BuildOption(("--timeout",), "timeout", FLOAT, "Kill any computation after S seconds."),
    BuildOption(("--trace",), "trace_file", FILE, "Write a Chrome trace-event JSON of the build to FILE."),
    BuildOption(("--check-deps",), "check_deps", CHOICE,
                "Trace each command (strace) and warn of files it reads or writes undeclared; "
                "=strict fails it.", choices=("warn", "strict")),
    BuildOption(("--cache", "--no-cache"), "use_cache", SWITCH,
                "Turn the local output cache on or off (default: FARMER_CACHE, else [cache])."),
    BuildOption(("--cache-dir",), "cache_dir", TEXT,
                "The local cache's directory (default: FARMER_CACHE_DIR, [cache] dir, $XDG_CACHE_HOME/farmer).",
                "DIR"),
    BuildOption(("--base-dir",), "base_dir", TEXT,
                "A build.ninja's absolute paths under DIR become relative (default: FARMER_BASE_DIR; "
                "'auto': a CMake build's source and build directories' parent).", "DIR"),
    # SPEC §5's --remote* flags (docs/remote.md); each overrides FARMER_REMOTE* and [remote].
    BuildOption(("--remote",), "remote_url", TEXT,
                "A REAPI server, grpc://HOST:PORT or grpcs://HOST[:PORT] (remote cache).", "URL"),
    BuildOption(("--remote-instance",), "remote_instance", TEXT, "The remote's instance name.", "NAME"),
    BuildOption(("--remote-header",), "remote_headers", TEXTS,
                "A header sent with every remote call (repeatable; never logged).", "NAME=VALUE"),
    BuildOption(("--remote-exec",), "remote_exec", FLAG, "Run eligible commands on the remote's workers."),
    BuildOption(("--no-remote-upload",), "no_remote_upload", FLAG, "Use the remote cache read-only: upload nothing."),
    BuildOption(("--remote-timeout",), "remote_timeout", FLOAT,
                "Deadline of each remote call, and of a remote action's progress (default 30).", "S"),
    BuildOption(("--remote-cache",), "remote_cache", TEXT, "The remote cache's server, if not --remote's.", "URL"),
    BuildOption(("--remote-executor",), "remote_executor", TEXT,
                "The remote execution server, if not --remote's (implies --remote-exec).", "URL"),
    BuildOption(("--remote-ca",), "remote_ca", TEXT, "PEM file of the CA a grpcs:// server's certificate is "
                "checked against (default: the system's).", "FILE"),
    BuildOption(("--remote-cert",), "remote_cert", TEXT, "PEM client certificate for mTLS (with --remote-key).",
                "FILE"),
    BuildOption(("--remote-key",), "remote_key", TEXT, "PEM private key of --remote-cert.", "FILE"),
    BuildOption(("--remote-credential-helper",), "remote_credential_helper", TEXT,
                "A program that prints the remote's headers as JSON (never logged).", "CMD"),
    BuildOption(("--remote-platform",), "remote_platform", TEXTS,
                "A platform property of remote actions (repeatable; replaces [remote] platform).", "NAME=VALUE"),
    BuildOption(("--remote-salt",), "remote_salt", TEXT, "Salt every remote key (a cache namespace).", "TEXT"),
    BuildOption(("--remote-strict",), "remote_strict", FLAG,
                "A remote problem fails the build (exit 1) instead of a warning."),
    BuildOption(("--remote-refresh",), "remote_refresh", FLAG,
                "Ignore remote cache hits: run, and upload what ran."),
)


def choices_attached(args: list[str]) -> list[str]:
    """`args` with each bare choice option given its first choice (`--check-deps` ->
    `--check-deps=warn`), so that the word after it stays a target, as a flag's would."""
    bare = {option.flags[0]: option.choices[0] for option in BUILD_OPTIONS if option.kind == CHOICE}
    out = []
    for k, arg in enumerate(args):
        if arg == "--":
            return out + args[k:]
        out.append(f"{arg}={bare[arg]}" if arg in bare else arg)
    return out


def quick_build_args(argv: list[str]) -> dict | None:
    """The arguments of `farmer build` in its common form, read without click; None for
    anything else (click then reads it, and says what is wrong with it)."""
    if not argv or argv[0] != "build":
        return None
    quick = {flag: option for option in BUILD_OPTIONS if option.quick for flag in option.flags}
    args: dict = {"targets": []}
    i, n = 1, len(argv)
    while i < n:
        arg = argv[i]
        i += 1
        if arg == "--":
            args["targets"].extend(argv[i:])
            break
        if arg == "-":
            return None  # what a lone dash means is click's to say
        if not arg.startswith("-"):
            args["targets"].append(arg)
            continue
        option = quick.get(arg if arg.startswith("--") else arg[:2])
        if option is None:
            return None
        if option.kind == FLAG:
            if arg not in option.flags:
                return None  # -nj2: short options run together are click's
            args[option.dest] = True
            continue
        if option.kind == COUNT and arg == option.flags[0] and not _is_count(argv[i] if i < n else ""):
            args[option.dest] = int(BARE_COUNT)
            continue
        value = arg[2:] if len(arg) > 2 else (argv[i] if i < n else None)
        i += len(arg) == 2
        if not value or value.startswith("-"):
            return None
        if option.kind in (INT, COUNT):
            if not (value.isascii() and value.isdigit()):
                return None
            value = int(value)
        args[option.dest] = value
    return args


def _is_count(word: str) -> bool:
    return word.isascii() and word.isdigit()


def bare_counts(args: list[str]) -> list[str]:
    """`farmer build`'s arguments with a count option given without its number (`-k`
    alone, or run together with other short flags: `-kn`) made `-k 0`, for click, which
    cannot tell a left-out value from a target that follows. A number after -k is its
    count; `-k app` is -k and the target app."""
    takes_value = {flag for option in BUILD_OPTIONS if option.kind not in (FLAG, SWITCH, COUNT)
                   for flag in option.flags}
    counts = {option.flags[0] for option in BUILD_OPTIONS if option.kind == COUNT}
    out: list[str] = []
    i, n = 0, len(args)
    while i < n:
        arg = args[i]
        i += 1
        out.append(arg)
        if arg == "--":
            out.extend(args[i:])
            break
        if arg in takes_value:
            if i < n:
                out.append(args[i])
                i += 1
            continue
        head = arg[:2]
        if head not in counts:
            continue
        rest = arg[2:]
        if rest == "":
            if not (i < n and _is_count(args[i])):
                out.append(BARE_COUNT)
        elif not _is_count(rest) and rest.isalpha():  # -kn: -k then -n
            out[-1:] = [head, BARE_COUNT, "-" + rest]
    return out
