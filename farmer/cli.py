"""The command line (SPEC §3): parse, call, print. Nothing here decides what a build does."""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
from pathlib import Path

import click

from farmer import __version__
from farmer.errors import LockHeld, UsageError


def _project_options(f):
    f = click.option("-f", "farmfile", default="Farmfile", metavar="FARMFILE",
                     help="The Farmfile, relative to -C DIR (default: Farmfile).")(f)
    f = click.option("-C", "directory", default=None, metavar="DIR",
                     help="Change to DIR before anything else.")(f)
    f = click.option("--ninja", is_flag=True, expose_value=False, callback=_remember_ninja,
                     help="Read FARMFILE as a ninja manifest (default -f: build.ninja).")(f)
    return f


def _remember_ninja(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    ctx.meta["farmer.ninja"] = value
    return value


def _load(directory: str | None, farmfile: str, write_cache: bool = False):
    """Read the Farmfile and traverse it; the project root becomes the working directory."""
    from farmer import ninja, project

    _enter(directory)
    ctx = click.get_current_context()
    if ctx.meta.get("farmer.ninja") or ninja.is_manifest(farmfile):
        # A ninja manifest (docs/ninja.md): `-f build.ninja`, or `--ninja` (build.ninja by default).
        ctx.meta["farmer.ninja_loaded"] = True
        if ctx.get_parameter_source("farmfile") == click.core.ParameterSource.DEFAULT:
            farmfile = "build.ninja"
        return ninja.load(Path(farmfile).absolute(), write_cache)
    return project.load(Path(farmfile).absolute(), write_cache)


def _enter(directory: str | None) -> None:
    """`-C DIR`: change to DIR before anything else."""
    if directory is not None:
        try:
            os.chdir(directory)
        except OSError as e:
            raise UsageError(f"-C {directory}: {e.strerror}") from None


def _jobs(value: int | None) -> int:
    if value is None:
        return -(-5 * (os.cpu_count() or 1) // 4)  # SPEC: ceil(1.25 x CPUs)
    if value < 1:
        raise UsageError(f"-j {value}: the number of jobs must be at least 1")
    return min(value, 4096)  # like make's unlimited -j; slots are lists, not unbounded


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="farmer", message="%(prog)s %(version)s")
def cli() -> None:
    """farmer: a make-like incremental build executor."""


@cli.command()
@click.argument("targets", nargs=-1)
@_project_options
@click.option("-j", "jobs", type=int, default=None, help="CPU slots (default: ceil(1.25 x CPUs)).")
@click.option("-l", "load", type=float, default=None, help="Start nothing new while the load average is above LOAD.")
@click.option("-k", "keep_going", is_flag=True, help="Keep going with what does not depend on a failure.")
@click.option("-n", "dry_run", is_flag=True, help="Print what would run; run nothing.")
@click.option("--explain", is_flag=True, help="Say why each computation runs.")
@click.option("--no-worlds", is_flag=True, help="Run world tasks in fresh interpreters.")
@click.option("--timeout", type=float, default=None, help="Kill any computation after S seconds.")
@click.option("--trace", "trace_file", type=click.Path(dir_okay=False), default=None,
              help="Write a Chrome trace-event JSON of the build to FILE.")
def build(targets, directory, farmfile, jobs, load, keep_going, dry_run, explain, no_worlds,
          timeout, trace_file) -> None:
    """Build TARGETs (task names or output paths); the Farmfile's default, else everything."""
    if timeout is not None and not 0 < timeout <= 1e9:  # nan and inf too
        raise UsageError(f"--timeout {timeout:g}: must be above 0 seconds (and finite)")
    trace_file = os.path.abspath(trace_file) if trace_file else None
    if not dry_run and not trace_file:  # first, the cheap proof that nothing changed
        from farmer import noop

        _enter(directory)
        directory = None
        path = Path(farmfile).absolute()
        farmfile = str(path)  # the full path below starts from the project root
        if path.parent.is_dir():
            os.chdir(path.parent)
            code = noop.try_build(path, list(targets), _jobs(jobs))
            if code is not None:
                sys.exit(code)
    from farmer.build import BuildOptions, run_build

    spec, graph = _load(directory, farmfile, write_cache=not dry_run)
    live = sys.stdout.isatty() and os.environ.get("TERM", "") != "dumb" and not dry_run
    opts = BuildOptions(targets=list(targets), jobs=_jobs(jobs), load=load, keep_going=keep_going,
                        dry_run=dry_run, explain=explain, no_worlds=no_worlds, timeout=timeout,
                        live=live, trace_file=trace_file)
    if click.get_current_context().meta.get("farmer.ninja_loaded") and not dry_run:
        from farmer import ninja  # as ninja: remake the manifest first when an edge makes it

        spec, graph, code = ninja.regenerate(spec, graph, opts)
        if code:
            sys.exit(code)
    sys.exit(run_build(spec, graph, opts))


@cli.command()
@click.argument("targets", nargs=-1)
@_project_options
@click.option("--simulate", is_flag=True, help="Predict the build on a simulated clock.")
@click.option("--from-scratch", is_flag=True, help="Plan a clean build, as if nothing was built.")
@click.option("-j", "jobs", type=int, default=None, help="CPU slots (default: ceil(1.25 x CPUs)).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (SPEC section 4).")
@click.option("--trace", "trace_file", type=click.Path(dir_okay=False), default=None,
              help="Write the simulated schedule as Chrome trace-event JSON to FILE.")
def plan(targets, directory, farmfile, simulate, from_scratch, jobs, as_json, trace_file) -> None:
    """What a build would run and why, in the order the scheduler would consider it."""
    from farmer.planning import run_plan

    trace_file = os.path.abspath(trace_file) if trace_file else None
    spec, g = _load(directory, farmfile)
    sys.exit(run_plan(spec, g, list(targets), _jobs(jobs), simulate, from_scratch, as_json, trace_file))


@cli.command()
@click.argument("targets", nargs=-1)
@_project_options
@click.option("--format", "fmt", type=click.Choice(["dot", "json"]), default="dot")
def graph(targets, directory, farmfile, fmt) -> None:
    """Print the graph of computations (Graphviz dot or JSON)."""
    from farmer import inspect
    from farmer.build import targets_of

    spec, g = _load(directory, farmfile)
    selected = targets_of(spec, g, list(targets))
    click.echo(inspect.graph_dot(g, selected) if fmt == "dot" else inspect.graph_json(g, selected))


@cli.command()
@click.argument("target")
@_project_options
def query(target, directory, farmfile) -> None:
    """Print a computation's task, command, inputs, outputs and consumers."""
    from farmer import inspect

    spec, g = _load(directory, farmfile)
    click.echo(inspect.query(spec, g, target), nl=False)


@cli.command()
@click.argument("targets", nargs=-1)
@_project_options
def clean(targets, directory, farmfile) -> None:
    """Remove the outputs of TARGETs (all if none) and forget their traces."""
    from farmer import inspect

    spec, g = _load(directory, farmfile)
    click.echo(inspect.clean(spec, g, list(targets)))


class _Stopped(BaseException):
    """SIGTERM or SIGHUP outside a build's own handling: the same clean exit as Ctrl-C.
    (Not a KeyboardInterrupt: click would turn that into Abort, exit 130.)"""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _stop(signum: int, frame: object) -> None:
    raise _Stopped(signum)


def main() -> None:
    try:
        for s in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, _stop)
        _main()
    finally:
        # The outcome is decided: a signal now (a second Ctrl-C while farmer exits) must
        # not turn the exit status into a KeyboardInterrupt or a death by signal.
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)


def _interrupted(code: int) -> None:
    """Leave at once with 128 + the signal. (Not through sys.exit: a KeyboardInterrupt that
    passed through an exec() of a string, as dataclasses do while farmer imports, leaves
    CPython 3.11 set to kill itself with SIGINT at exit, whatever the exit status.)"""
    print("farmer: interrupted", file=sys.stderr)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _main() -> None:
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.ClickException as e:
        print(f"farmer: error: {e.format_message().rstrip('.')}; see farmer --help", file=sys.stderr)
        sys.exit(2)
    except click.exceptions.Abort as e:  # click's word for a KeyboardInterrupt
        _interrupted(128 + getattr(e.__cause__, "signum", signal.SIGINT))
    except (UsageError, LockHeld) as e:
        print(f"farmer: error: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
    except OSError as e:
        # The file system said no (read-only, full, permissions): say what and where.
        where = f"{e.filename}: " if e.filename else ""
        print(f"farmer: error: {where}{e.strerror or e}", file=sys.stderr)
        sys.exit(2)
    except sqlite3.Error as e:
        # Full, read-only, I/O: the disk's trouble, and the state is intact; else damage.
        hint = ("check the disk's free space and permissions" if isinstance(e, sqlite3.OperationalError)
                else "remove .farmer/ to start afresh")
        print(f"farmer: error: .farmer/state.db: {e}; {hint}", file=sys.stderr)
        sys.exit(2)
    except (KeyboardInterrupt, _Stopped) as e:
        _interrupted(128 + getattr(e, "signum", signal.SIGINT))
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(1)
