"""Runs inside a world's interpreter: setup in the world's globals, then tasks.

Standard library only, so a world starts fast. `python driver.py --setup JSON -- LINE...`
runs the world chain's setup and then one task in a fresh interpreter (`--no-worlds`).
"""

from __future__ import annotations

import json
import os
import runpy
import sys


def run_setup(chain: list[tuple[str, list[str]]], world_globals: dict) -> None:
    """Run each world's setup lines, root world first, in one globals dict."""
    for name, lines in chain:
        for number, line in enumerate(lines, 1):
            code = compile(line, f"<world {name} setup line {number}>", "exec")
            exec(code, world_globals)


def run_task(args: list[str], world_globals: dict) -> None:
    """Run a `python` line (`script.py args`, `-m module args`, `-c code args`) with the
    world's globals visible; exceptions and SystemExit propagate to the caller."""
    if not args:
        raise SystemExit("farmer: empty python line")
    shared = {k: v for k, v in world_globals.items() if k not in ("__name__", "__file__", "__builtins__")}
    if args[0] == "-c":
        if len(args) < 2:
            raise SystemExit("farmer: -c needs code")
        sys.argv = ["-c", *args[2:]]
        g = dict(shared, __name__="__main__")
        exec(compile(args[1], "<string>", "exec"), g)
    elif args[0] == "-m":
        if len(args) < 2:
            raise SystemExit("farmer: -m needs a module name")
        sys.argv = [args[1], *args[2:]]
        sys.path.insert(0, os.getcwd())
        runpy.run_module(args[1], init_globals=shared, run_name="__main__", alter_sys=True)
    else:
        script = args[0]
        sys.argv = list(args)
        sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
        runpy.run_path(script, init_globals=shared, run_name="__main__")


def main(argv: list[str]) -> None:
    # Our own folder must not shadow the user's modules.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    if len(argv) < 3 or argv[0] != "--setup" or argv[2] != "--":
        raise SystemExit("usage: driver.py --setup JSON -- PYTHON-LINE...")
    chain = [(name, lines) for name, lines in json.loads(argv[1])]
    world_globals: dict = {"__name__": "__world__", "__builtins__": __builtins__}
    run_setup(chain, world_globals)
    run_task(argv[3:], world_globals)


if __name__ == "__main__":
    main(sys.argv[1:])
