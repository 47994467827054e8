"""`python -m farmer`, and the `farmer` script: the command line (farmer/cli/app.py)."""

import os
import sys


def _early(signum: int, frame: object) -> None:
    """A signal while Python still imports farmer: nothing has started, leave quietly."""
    os.write(2, b"farmer: interrupted\n")
    os._exit(128 + signum)


def run() -> None:
    if sys.argv[1:] == ["--version"]:  # what click would print, without importing click
        from farmer import __version__

        sys.stdout.write(f"farmer {__version__}\n")
        return
    if sys.argv[1:2] == ["ninja"]:  # ninja's command line, read by hand as farmer-ninja's
        from farmer.cli.ninja import run as ninja

        ninja(sys.argv[2:])
    from farmer.startup.cheap import signal

    sigint = signal.getsignal(signal.SIGINT)  # SIG_IGN in a background job: kept
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(s) != signal.SIG_IGN:
            signal.signal(s, _early)
    from farmer.cli.client import served

    code = served(sys.argv[1:])  # a server of this farmer runs for the project: it runs the command
    if code is not None:
        if sys.stdout is not None:  # (None: started with stdout closed)
            sys.stdout.flush()
        os._exit(code)
    from farmer.cli.quick import quick_build_args

    args = quick_build_args(sys.argv[1:])
    if args is None:  # anything but the common form of `farmer build`: click reads it
        from farmer.cli.app import main

        signal.signal(signal.SIGINT, sigint)
        main()
    from farmer.build.request import BuildRequest
    from farmer.build.workspace import Workspace
    from farmer.cli import exit as ending

    signal.signal(signal.SIGINT, sigint)
    request = BuildRequest(**args, farmfile_given="farmfile" in args)
    # leave_at_once: a build ends without the interpreter's teardown (cli/exit.py's `leave` says why)
    ending.main(lambda: Workspace().build(request), leave_at_once=True)


if __name__ == "__main__":
    run()
