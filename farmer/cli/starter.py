"""`farmer init [--python | --c]`: a commented starter Farmfile in the current directory, for
a Python data pipeline or a C program. It builds as written once the files it names are
there (tests/test_cli_init.py makes them and builds); it never replaces a Farmfile."""

from __future__ import annotations

import os

from farmer.errors import UsageError

PYTHON = """\
# A Farmfile: what farmer builds, in TOML. This one, from `farmer init --python`, is a
# small data pipeline; make it yours. Every path is relative to this file's folder, the
# project root, where every command runs. `farmer build` builds it, `farmer plan` says
# what would run and why, `farmer watch` builds again on every change.
#
# It needs three files of yours: data/measurements.csv (with a header row), and the two
# scripts below. Each script runs with the world's globals (csv, statistics, ROWS)
# already there and its arguments in sys.argv; scripts/summary.py could be:
#
#   import json, sys
#   values = [float(row["value"]) for row in ROWS]
#   with open(sys.argv[1], "w") as f:
#       json.dump({"rows": len(ROWS), "mean": statistics.mean(values)}, f)

[farmer]
default = ["report"]      # what a bare `farmer build` builds, with all it needs

# A world: one Python process that runs `setup` once per build and is then forked for
# each task that names it, so imports and loading the data are paid once, not per task.
[world.data]
inputs = ["data/measurements.csv"]   # what setup reads: when it changes, the world's tasks run again
setup = [                            # Python statements, run in order in the world's globals
  "import csv",
  "import statistics",
  "ROWS = list(csv.DictReader(open('data/measurements.csv', newline='')))",
]

# A task: a command and the files it reads and writes. It runs again only when its
# command, an input or its world changed; an output that comes out the same as before
# leaves what reads it alone.
[task.summary]
world = "data"                        # runs in a fork of the world named here
outputs = ["out/summary.json"]        # what it writes (folders are made); also a target: farmer build out/summary.json
python = "scripts/summary.py {outputs}"   # a script and its arguments for farmer's Python; the script is an input too

[task.report]
world = "data"
inputs = ["out/summary.json"]         # what it reads: summary's output, so summary runs first
outputs = ["out/report.md"]
python = "scripts/report.py {inputs} {outputs}"   # {inputs} and {outputs}: the paths above, quoted for you
"""

C = """\
# A Farmfile: what farmer builds, in TOML. This one, from `farmer init --c`, compiles a C
# program, links it and runs it; make it yours. Every path is relative to this file's
# folder, the project root, where every command runs. `farmer build` builds it, `farmer
# plan` says what would run and why, `farmer query build/program` shows one step.
#
# It needs your C sources in src/ (one of them with main()), and their headers beside them.

[farmer]
default = ["run"]         # what a bare `farmer build` builds, with all it needs

[vars]                    # {cc} and {cflags} in the commands below
cc = "cc"
cflags = "-O2 -Wall"

# A task: a command and the files it reads and writes. It runs again only when its
# command or an input changed; an output that comes out the same as before (a comment
# edited) leaves what reads it alone.
[task.objects]
foreach = "src/{name}.c"              # one computation per file that matches: {name} is the part that varies
inputs = ["src/{name}.c"]             # what it reads
outputs = ["build/{name}.o"]          # what it writes (folders are made); also a target: farmer build build/main.o
depfile = "build/{name}.d"            # the headers the compiler read, listed by -MD: inputs from then on
cmd = "{cc} {cflags} -MD -MF {depfile} -c {inputs} -o {outputs}"   # run by /bin/sh; paths quoted for you

[task.program]
inputs = ["@objects"]                 # @TASK: every output of that task's computations
outputs = ["build/program"]
cmd = "{cc} {inputs} -o {outputs}"

[task.run]
inputs = ["@program"]
outputs = ["build/output.txt"]        # what the program printed
cmd = "./{inputs} > {outputs}"
"""

# What each is, and the files of the user's it needs.
STARTERS = {"python": (PYTHON, "a Python data pipeline",
                       "data/measurements.csv, scripts/summary.py and scripts/report.py"),
            "c": (C, "a C program", "your C sources in src/ (one with main)")}


def write_starter(kind: str, name: str = "Farmfile") -> str:
    """Write the starter Farmfile of `kind` (`python` or `c`) as `name` in the current
    directory; what to tell the user. An existing file of that name is a usage error."""
    text, what, needs = STARTERS[kind]
    try:
        with open(name, "x", encoding="utf-8") as f:
            f.write(text)
    except FileExistsError:
        raise UsageError(f"{os.path.abspath(name)} exists already; farmer init writes a new one only "
                         "(move it away first)") from None
    except OSError as e:
        raise UsageError(f"cannot write {os.path.abspath(name)}: {e.strerror}") from None
    other = "for a C program: farmer init --c" if kind == "python" else "for Python: farmer init --python"
    return f"farmer: wrote {name}, a starter for {what} ({other})\nfarmer: add {needs}, then run farmer build"
