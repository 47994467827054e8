"""The command line: parse, call, print. Nothing here decides what a build does."""

from __future__ import annotations

import os
import signal
import sys

import click

from farmer import __version__
from farmer.build import command
from farmer.build.request import BuildRequest, job_slots
from farmer.cli import completion
from farmer.cli import exit as ending
from farmer.cli.quick import (BUILD_OPTIONS, CHOICE, COUNT, FILE, FLAG, FLOAT, INT, SWITCH, TEXTS, BuildOption,
                              bare_counts, choices_attached)
from farmer.errors import UsageError


def _option(option: BuildOption, **settings):
    """click's declaration of one of the build options' table (cli/quick.py)."""
    kind = option.kind
    names = ("/".join(option.flags),) if kind == SWITCH else option.flags
    if kind == FLAG:
        settings["is_flag"] = True
    elif kind == TEXTS:
        settings["multiple"] = True
    elif kind == CHOICE:  # (its bare form is made --NAME=FIRST before click reads it: _BuildCommand)
        settings["type"] = click.Choice(option.choices)
        settings["default"] = option.default
    else:
        settings["default"] = option.default
        if kind in (INT, FLOAT, COUNT):
            settings["type"] = float if kind == FLOAT else click.IntRange(min=0) if kind == COUNT else int
        elif kind == FILE:
            settings["type"] = click.Path(dir_okay=False)
    if option.metavar is not None:
        settings["metavar"] = option.metavar
    return click.option(*names, option.dest, help=option.help, **settings)


class _BuildCommand(click.Command):
    """`farmer build` and `farmer watch`: before click reads the line, a bare -k is -k 0
    (quick.bare_counts) and a choice option's bare form (`--check-deps`) is given its first
    choice (quick.choices_attached), so the word after either is a target."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, choices_attached(bare_counts(args)))


def _build_options(f):
    """Every option of `farmer build` (and `farmer watch`), from the one table."""
    for option in reversed(BUILD_OPTIONS):
        f = _option(option)(f)
    return f


_PROJECT = {option.dest: option for option in BUILD_OPTIONS if option.dest in ("ninja", "directory", "farmfile")}


def _project_options(f):
    """-f, -C and --ninja, as `build` declares them, for the commands that read a project."""
    f = _option(_PROJECT["farmfile"])(f)
    f = _option(_PROJECT["directory"])(f)
    return _option(_PROJECT["ninja"])(f)


def _farmfile_given() -> bool:
    """Whether -f was given: without it, the manifest is found (build/command.py)."""
    return click.get_current_context().get_parameter_source("farmfile") != click.core.ParameterSource.DEFAULT


def _served():
    """What a server that runs this command for a client shares with it (cli/server.py's
    `Served`: its workspace, its warm graph); None in a farmer of its own."""
    return click.get_current_context().find_root().obj


def _load(directory: str | None, farmfile: str, ninja: bool):
    """Read the Farmfile (or the ninja manifest) and traverse it; the project root becomes
    the working directory."""
    served = _served()
    if served is not None:
        return served.load(directory, farmfile, ninja, _farmfile_given())
    return command.load_project(directory, farmfile, False, ninja, _farmfile_given())


def _remote_flags(given: dict) -> dict | None:
    """The --remote* flags given (taken out of `given`), as farmer.remote.config.resolve
    takes them (checked now: a bad one is a usage error before anything runs)."""
    flags = {"url": given.pop("remote_url"), "instance": given.pop("remote_instance"),
             "headers": tuple(given.pop("remote_headers")),
             "execute": True if given.pop("remote_exec") else None,
             "upload": False if given.pop("no_remote_upload") else None, "timeout": given.pop("remote_timeout"),
             "cache_url": given.pop("remote_cache"), "executor_url": given.pop("remote_executor"),
             "ca": given.pop("remote_ca"), "cert": given.pop("remote_cert"), "key": given.pop("remote_key"),
             "credential_helper": given.pop("remote_credential_helper"),
             "platform": tuple(given.pop("remote_platform")), "salt": given.pop("remote_salt"),
             "strict": True if given.pop("remote_strict") else None,
             "refresh": True if given.pop("remote_refresh") else None}
    if not any(v for v in flags.values() if v is not None):
        return None
    from farmer.remote import config

    try:
        for url in (flags["url"], flags["cache_url"], flags["executor_url"]):
            if url:
                config.parse_url(url)
        for h in flags["headers"]:
            config.parse_header(h)
        for p in flags["platform"]:
            config.parse_property(p)
        if flags["timeout"] is not None and not 0 < flags["timeout"] <= 1e6:
            raise config.RemoteConfigError(f"--remote-timeout {flags['timeout']:g}: must be above 0 seconds")
    except config.RemoteConfigError as e:
        raise click.UsageError(str(e)) from None
    return flags


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="farmer", message="%(prog)s %(version)s")
def cli() -> None:
    """farmer: a make-like incremental build executor."""


def _request(targets: tuple[str, ...], options: dict) -> BuildRequest:
    """The build request of `farmer build`'s (or `farmer watch`'s) arguments."""
    given = _farmfile_given()
    remote = _remote_flags(options)
    return BuildRequest(list(targets), farmfile_given=given, cache=options.pop("use_cache"), remote=remote,
                        **options)


@cli.command(cls=_BuildCommand)
@click.argument("targets", nargs=-1, shell_complete=completion.targets)
@_build_options
def build(targets, **options) -> None:
    """Build TARGETs (task names or output paths); the Farmfile's default, else everything."""
    served = _served()
    if served is not None:  # the server's workspace: its lock, state and warm graph and worlds
        sys.exit(served.build(_request(targets, options)))
    from farmer.build.workspace import Workspace

    sys.exit(Workspace().build(_request(targets, options)))


def _watch(targets, **options) -> None:
    from farmer.cli.watch import watch

    sys.exit(watch(_request(targets, options), run_served))


cli.add_command(_BuildCommand(
    "watch", callback=_watch, params=build.params, context_settings=build.context_settings,
    help="Build TARGETs, then build again whenever one of their inputs changes; worlds stay "
         "warm between builds. Takes the options of build.",
    short_help="Build, then rebuild on every change."))


@cli.command()
@click.option("--idle", default="3h", metavar="DURATION", show_default=True,
              help="Exit after this long without a command: 90s, 30m, 3h or seconds.")
@click.option("--stop", is_flag=True, help="Stop the project's server (exit 0 also when none runs).")
@click.option("--status", is_flag=True, help="Say whether a server runs and what it holds (exit 1: none).")
@_option(_PROJECT["directory"])
@click.option("-f", "farmfile", default=None, metavar="FARMFILE", help="The Farmfile, relative to -C DIR.")
def serve(idle, stop, status, directory, farmfile) -> None:
    """Keep a farmer running for the project: build, plan, query and graph are answered by it,
    with the graph, the state and the worlds kept warm (docs/serve.md)."""
    from farmer.cli import serve as server

    if stop and status:
        raise UsageError("serve takes one of --stop and --status")
    if stop:
        sys.exit(server.stop(directory, farmfile))
    if status:
        sys.exit(server.status(directory, farmfile))
    sys.exit(server.start(directory, farmfile, idle, run_served))


@cli.command()
@click.argument("targets", nargs=-1, shell_complete=completion.targets)
@_project_options
@click.option("--simulate", is_flag=True, help="Predict the build on a simulated clock.")
@click.option("--from-scratch", is_flag=True, help="Plan a clean build, as if nothing was built.")
@click.option("-j", "jobs", type=int, default=None, help="CPU slots (default: ceil(1.25 x CPUs)).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the fields are in docs/reference.md).")
@click.option("--trace", "trace_file", type=click.Path(dir_okay=False), default=None,
              help="Write the simulated schedule as Chrome trace-event JSON to FILE.")
def plan(targets, ninja, directory, farmfile, simulate, from_scratch, jobs, as_json, trace_file) -> None:
    """What a build would run and why, in the order the scheduler would consider it."""
    from farmer.cli.plan import run_plan

    trace_file = os.path.abspath(trace_file) if trace_file else None
    spec, g = _load(directory, farmfile, ninja)
    sys.exit(run_plan(spec, g, list(targets), job_slots(jobs), simulate, from_scratch, as_json, trace_file))


@cli.command()
@click.argument("targets", nargs=-1, shell_complete=completion.targets)
@_project_options
@click.option("--format", "fmt", type=click.Choice(["dot", "json"]), default="dot")
def graph(targets, ninja, directory, farmfile, fmt) -> None:
    """Print the graph of computations (Graphviz dot or JSON)."""
    from farmer.cli import inspection
    from farmer.graph.graph import select_targets

    spec, g = _load(directory, farmfile, ninja)
    selected = select_targets(spec, g, list(targets))
    click.echo(inspection.graph_dot(g, selected) if fmt == "dot" else inspection.graph_json(g, selected))


@cli.command()
@click.argument("target", shell_complete=completion.targets)
@click.option("--remote", "remote", is_flag=True,
              help="Also the remote Action digest the last build looked up, and what came of it.")
@_project_options
def query(target, remote, ninja, directory, farmfile) -> None:
    """Print a computation's task, command, inputs, outputs and consumers."""
    from farmer.cli import inspection

    spec, g = _load(directory, farmfile, ninja)
    click.echo(inspection.query(spec, g, target, remote), nl=False)


@cli.command()
@click.argument("targets", nargs=-1, shell_complete=completion.targets)
@click.option("--dead", is_flag=True,
              help="Remove only stale outputs: files earlier builds wrote that nothing declares now.")
@_project_options
def clean(targets, dead, ninja, directory, farmfile) -> None:
    """Remove the outputs of TARGETs (all if none) and forget their traces."""
    if dead:
        from farmer.plan import stale

        if targets:
            raise UsageError("clean --dead takes no targets: it removes every stale output")
        farmfile, given = command.named_manifest(directory, farmfile, _farmfile_given(), ninja)
        if command.is_ninja(farmfile, ninja):  # ninja's cleandead: what .ninja_log names and the manifest no more
            from farmer.cli.ninja_tools import run_tool

            sys.exit(run_tool("cleandead", farmfile if given else command.NINJA_MANIFEST, []))
        spec, g = command.load_project(None, farmfile, False, ninja, given)
        path = os.fspath(spec.path)
        click.echo(stale.clean_dead(spec, g, lambda: command.load_project(None, path, False)))
        return
    from farmer.cli import inspection

    spec, g = _load(directory, farmfile, ninja)
    click.echo(inspection.clean(spec, g, list(targets)))


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False,
                               "help_option_names": []})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def ninja(args) -> None:
    """Take ninja's command line: -C -f -j -k -l -n -v -d -t -w, targets (docs/ninja.md)."""
    from farmer.cli.ninja import main as ninja_main

    sys.exit(ninja_main(list(args)))


@cli.command()
@click.option("--python", "python", is_flag=True, help="A Python data pipeline with a world (the default).")
@click.option("--c", "c", is_flag=True, help="A C program: compile with depfiles, link, run.")
@_option(_PROJECT["directory"])
def init(python, c, directory) -> None:
    """Write a commented starter Farmfile here (never over an existing one)."""
    from farmer.cli.starter import write_starter

    if python and c:
        raise UsageError("init takes one of --python and --c")
    command.enter(directory)
    click.echo(write_starter("c" if c else "python"))


@cli.group()
def cache() -> None:
    """The local output cache: stats, gc, clear (docs/cache.md)."""


def _cache_options(f):
    f = _project_options(f)
    return click.option("--cache-dir", "cache_dir", default=None, metavar="DIR",
                        help="The cache directory (default: FARMER_CACHE_DIR, [cache] dir, "
                             "$XDG_CACHE_HOME/farmer).")(f)


@cache.command("stats")
@_cache_options
def cache_stats(ninja, directory, farmfile, cache_dir) -> None:
    """Print the cache's location, entries, bytes and limit."""
    from farmer.cli import cache as commands

    click.echo(commands.stats(commands.settings_for(directory, farmfile, cache_dir)), nl=False)


@cache.command("gc")
@_cache_options
@click.option("--max-size", "max_size", default=None, metavar="SIZE",
              help="Evict least recently used entries down to SIZE (default: the limit).")
def cache_gc(ninja, directory, farmfile, cache_dir, max_size) -> None:
    """Evict least recently used entries until the cache fits its limit."""
    from farmer.cli import cache as commands

    click.echo(commands.gc(commands.settings_for(directory, farmfile, cache_dir), max_size), nl=False)


@cache.command("clear")
@_cache_options
def cache_clear(ninja, directory, farmfile, cache_dir) -> None:
    """Remove every entry of the cache."""
    from farmer.cli import cache as commands

    click.echo(commands.clear(commands.settings_for(directory, farmfile, cache_dir)), nl=False)


@cli.command()
@click.option("--remote", "url", required=True, envvar="FARMER_REMOTE", metavar="URL",
              help="The BuildGrid server, grpc://HOST:PORT or grpcs://HOST[:PORT].")
@click.option("--remote-instance", "instance", default="", envvar="FARMER_REMOTE_INSTANCE", metavar="NAME")
@click.option("--remote-header", "headers", multiple=True, metavar="NAME=VALUE", help="A call header (repeatable).")
@click.option("--remote-ca", "ca", default=None, envvar="FARMER_REMOTE_CA", metavar="FILE",
              help="PEM file of the CA the server's certificate is checked against.")
@click.option("--remote-cert", "cert", default=None, envvar="FARMER_REMOTE_CERT", metavar="FILE",
              help="PEM client certificate (mTLS), with --remote-key.")
@click.option("--remote-key", "key", default=None, envvar="FARMER_REMOTE_KEY", metavar="FILE",
              help="PEM private key of --remote-cert.")
@click.option("--remote-credential-helper", "helper", default=None, envvar="FARMER_REMOTE_CREDENTIAL_HELPER",
              metavar="CMD", help="A program that prints the calls' headers as JSON.")
@click.option("--bot-id", default=None, help="The bot's name (default: farmer-HOST-PID).")
@click.option("--workdir", default=None, metavar="DIR", help="Where actions run, each in its own folder.")
def worker(url, instance, headers, ca, cert, key, helper, bot_id, workdir) -> None:
    """Run remote actions for a BuildGrid server, as one of its bots (docs/remote.md)."""
    from farmer.remote import config

    try:
        config.require()
        # (the environment is click's to read: envvar= above)
        endpoint = config.resolve(url=url, instance=instance, headers=headers, ca=ca, cert=cert, key=key,
                                  credential_helper=helper, environ={}).endpoint
    except config.RemoteConfigError as e:
        raise click.UsageError(str(e)) from None
    from farmer.remote.worker import main as serve

    sys.exit(serve(endpoint, bot_id, workdir))


@cli.command()
@_project_options
@click.option("--html", "html_file", type=click.Path(dir_okay=False), default=None,
              help="Write a self-contained HTML page of the last build to FILE.")
@click.option("--junit", "junit_file", type=click.Path(dir_okay=False), default=None,
              help="Write JUnit XML (a test case per computation that ran or failed) to FILE.")
@click.option("--markdown", is_flag=True, help="Print a markdown summary (the default with no option).")
def report(ninja, directory, farmfile, html_file, junit_file, markdown) -> None:
    """Report on the last build, without building (docs/reports.md)."""
    from farmer.cli.report import report as run_report

    html_file, junit_file = (os.path.abspath(f) if f else None for f in (html_file, junit_file))
    sys.exit(run_report(lambda: _load(directory, farmfile, ninja), html_file, junit_file, markdown))


def _hint(e: click.ClickException) -> str:
    """What to do: options given before the command belong after it."""
    ctx = getattr(e, "ctx", None)
    option = getattr(e, "option_name", None)
    if isinstance(e, click.NoSuchOption) and ctx is not None and ctx.command is cli and option:
        args = sys.argv[1:]
        command = next((a for a in args if a in cli.commands), None)
        if command is not None:
            before = args[: args.index(command)]
            return f"options go after the command: farmer {command} {' '.join(before)}"
    return "see farmer --help"


def main() -> None:
    ending.main(_main)


def run_served(argv: list[str], served) -> int:
    """A client's command (`argv`: its words after `farmer`) run by a server (cli/server.py) as
    `main` runs it, with the server's `served` in click's context: its exit status, where
    `main` would exit with it."""

    def command() -> int:
        try:
            return _main(argv, served)
        except SystemExit as e:
            return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)

    return ending.guarded(command, served.interrupted)


def _main(argv: list[str] | None = None, served=None) -> int:
    try:
        cli.main(args=argv, obj=served, standalone_mode=False, prog_name="farmer",
                 complete_var="_FARMER_COMPLETE")
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.exceptions.NoArgsIsHelpError as e:  # a bare `farmer`: its help, as click does
        print(e.ctx.get_help() if e.ctx else cli.get_help(click.Context(cli)), file=sys.stderr)
        return 2
    except click.ClickException as e:
        print(f"farmer: error: {e.format_message().rstrip('.')}; {_hint(e)}", file=sys.stderr)
        return 2
    except click.exceptions.Abort as e:  # click's word for a KeyboardInterrupt
        if served is not None:  # the server goes on: `run_served` says it
            stop = KeyboardInterrupt()
            stop.signum = getattr(e.__cause__, "signum", signal.SIGINT)  # type: ignore[attr-defined]
            raise stop from None
        ending.interrupted(128 + getattr(e.__cause__, "signum", signal.SIGINT))
    return 0
