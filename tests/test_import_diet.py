"""An incremental build (graph cache warm, no-op proof present, one source edited) imports
only what it needs (docs/performance.md, "Where the time goes"): none of the standard
library's heavier modules, which farmer imports only where really needed (parsing a
Farmfile, worlds, ninja manifests, python tasks, `plan`, errors)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import xxhash
from conftest import REPO, Result, farmer_env

# `signal` is the Python wrapper (it imports enum); farmer uses `_signal`, the C module under it.
NOT_ON_AN_INCREMENTAL_BUILD = {
    "re", "enum", "signal", "json", "shlex", "pathlib", "urllib.parse", "ipaddress", "fnmatch",
    "ntpath", "typing", "dataclasses", "inspect", "tomllib", "toml_rs",
    "sqlite3", "datetime",  # state.py opens state.db through _sqlite3, the C module
    # farmer's own: the Farmfile's parser and traversal run on a cold graph cache only
    "farmer.manifest.farmfile", "farmer.manifest.template", "farmer.graph.traversal", "farmer.graph.expander", "click", "rich",
    "farmer.record.depfile",  # no computation here has a depfile
    "heapq",  # the scheduler's ready queue is _heapq's, the C module under it
    "xxhash",  # its extension module, loaded without the package (farmer/startup/extension.py)
    # the engines a build has not turned on (farmer/build/compose.py): no cache, no remote
    "farmer.record.cache.engine", "farmer.record.cache.use", "farmer.remote.engine", "farmer.remote.runcache",
}

# Nor before the first command of a first build (no .farmer/) of a Farmfile written out in
# full, one [task] per step, as a generator writes it: parsing and traversing it take string
# methods, toml_rs's extension without its package (which imports typing and pathlib).
# Nor SQLite (there is no state.db to read: it is made by the first write, once commands
# run) with the functools it imports, nor the importlib package (toml_rs's extension is
# found through the frozen machinery every interpreter has), nor `array` with the
# `collections` it imports (the stat table and the prediction's seconds are memoryviews),
# `math`, the simulation of the plan (made once the first commands run), the sweep of
# dead farmers' world folders or the graph cache (its write: both done then).
NOT_BEFORE_THE_FIRST_COMMAND = NOT_ON_AN_INCREMENTAL_BUILD - {
    "farmer.manifest.farmfile", "farmer.manifest.template", "farmer.graph.traversal", "farmer.graph.expander"} | {
    "contextlib", "toml_rs._lib", "difflib", "_sqlite3", "functools", "importlib",
    "importlib.machinery", "array", "collections", "collections.abc", "math",
    "farmer.plan.latency.simulate", "farmer.run.executors.simulated", "farmer.run.worlds",
    "farmer.run.worlds.sweep", "farmer.graph.cache"}

FARMFILE = """
[task.compile]
foreach = "src/{stem}.c"
inputs = ["src/{stem}.c"]
outputs = ["out/{stem}.o"]
cmd = "cat {inputs} > {outputs}"

[task.link]
inputs = ["out/a.o", "out/b.o", "out/c.o"]
outputs = ["out/app"]
cmd = "cat out/a.o out/b.o out/c.o > out/app && echo linked"

[task.stamp]
inputs = ["out/app"]
outputs = ["out/stamp"]
env = { WHO = "farmer" }
cmd = "printf '%s\\n' \\"$WHO\\" > out/stamp"
"""


def imported_modules(stderr: str) -> set[str]:
    return {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


def build_without_site(project, *args: str) -> Result:
    """`farmer build` with -X importtime, without the site module: what it imports at start-up
    (an editable install's finder imports pathlib; other .pth files more) would hide what
    farmer imports. farmer and xxhash are found through PYTHONPATH instead."""
    path = os.pathsep.join([str(REPO), os.path.dirname(os.path.dirname(xxhash.__file__))])
    # The worlds' FIFO folder of its own: a dead farmer's left in the shared one (another
    # test's, a moment ago) is removed with shutil, which imports fnmatch: rare, but not this.
    runtime = project.root.parent / "runtime"
    runtime.mkdir(exist_ok=True)
    env = farmer_env({"PYTHONPROFILEIMPORTTIME": "1", "PYTHONPATH": path,
                      "XDG_RUNTIME_DIR": str(runtime)})
    cmd = [sys.executable, "-S", "-m", "farmer", "build", *args]
    cp = subprocess.run(cmd, cwd=project.root, stdin=subprocess.DEVNULL, capture_output=True,
                        text=True, timeout=60, env=env)
    return Result(cp, ["build", *args], 0.0)


def test_an_incremental_build_imports_no_heavy_module(project):
    project.farmfile(FARMFILE)
    for stem in "abc":
        project.write(f"src/{stem}.c", f"{stem}\n")
    assert project.build().returncode == 0  # writes the graph cache and the no-op proof
    assert project.build().summary()["ran"] == 0
    project.write("src/b.c", "b, edited\n")
    r = build_without_site(project, "-j", "2")
    assert r.returncode == 0, r
    assert r.summary()["ran"] == 3, r
    assert project.read("out/app") == "a\nb, edited\nc\n"
    assert project.read("out/stamp") == "farmer\n"
    assert "linked" in r.stdout
    modules = imported_modules(r.stderr)
    assert {"farmer.store.proof", "farmer.build.run", "farmer.graph.cache", "farmer.graph.matching"} <= modules, sorted(modules)
    assert not NOT_ON_AN_INCREMENTAL_BUILD & modules, sorted(NOT_ON_AN_INCREMENTAL_BUILD & modules)
    tasks = project.tasks()
    assert tasks["out/b.o"]["status"] == "ran" and tasks["out/a.o"]["status"] == "up-to-date"
    assert project.build().summary()["ran"] == 0  # and the proof it left holds


# Nor, in a build that finds nothing to run, what runs computations or simulates the plan.
RUN_PHASE = {"farmer.record.recorder", "farmer.build.hooks", "farmer.run.executors.process",
             "farmer.run.executors.events", "farmer.plan.latency.simulate", "farmer.run.executors.simulated"}


def test_a_build_that_finds_nothing_to_run_imports_nothing_that_runs(project):
    """A Farmfile edited without changing a computation (a comment): the no-op proof no
    longer holds, the build takes the full path and finds everything up to date."""
    project.farmfile(FARMFILE)
    for stem in "abc":
        project.write(f"src/{stem}.c", f"{stem}\n")
    assert project.build().summary()["ran"] == 5
    project.farmfile("# reviewed\n" + FARMFILE)
    r = build_without_site(project, "-j", "2")
    assert r.returncode == 0, r
    assert r.summary()["ran"] == 0, r
    modules = imported_modules(r.stderr)
    assert {"farmer.build.run", "farmer.plan.session", "farmer.graph.traversal"} <= modules, sorted(modules)
    assert not RUN_PHASE & modules, sorted(RUN_PHASE & modules)
    assert project.last_build()["status"] == "ok"
    assert project.build().summary()["ran"] == 0  # the proof it left holds
    project.write("src/c.c", "c, edited\n")
    r = build_without_site(project, "-j", "2")  # and one that runs something imports them
    assert r.summary()["ran"] == 3, r
    assert {"farmer.record.recorder", "farmer.run.executors.process"} <= imported_modules(r.stderr)


def modules_at_the_first_command(project, *args: str) -> set[str]:
    """What `farmer build` (without the site module, as above) has imported when it starts
    its first command: a wrapper of posix_spawn writes sys.modules to stderr."""
    path = os.pathsep.join([str(REPO), os.path.dirname(os.path.dirname(xxhash.__file__))])
    script = (
        "import os, sys\n"
        "real = os.posix_spawn, os.posix_spawnp\n"
        "def spawning(spawn):\n"
        "    def first(*a, **k):\n"
        "        os.write(2, ('MODULES ' + ' '.join(sorted(sys.modules)) + '\\n').encode())\n"
        "        os.posix_spawn, os.posix_spawnp = real\n"
        "        return spawn(*a, **k)\n"
        "    return first\n"
        "os.posix_spawn, os.posix_spawnp = map(spawning, real)\n"
        "sys.argv = ['farmer', 'build', *sys.argv[1:]]\n"
        "from farmer.__main__ import run\n"
        "run()\n")
    cp = subprocess.run([sys.executable, "-S", "-c", script, *args], cwd=project.root,
                        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
                        env=farmer_env({"PYTHONPATH": path}))
    assert cp.returncode == 0, cp.stderr
    return set(next(line for line in cp.stderr.splitlines() if line.startswith("MODULES ")).split()[1:])


def test_a_first_build_of_a_generated_farmfile_imports_no_heavy_module_before_its_first_command(project):
    steps = [f'[task.s{k}]\ninputs = ["src/s{k}.txt"]\noutputs = ["out/s{k}.txt"]\n'
             f'cmd = "cat src/s{k}.txt > out/s{k}.txt"\n' for k in range(20)]
    roots = "".join(f'  "out/s{k}.txt",\n' for k in range(20))
    project.farmfile("# generated — do not edit\n" + "\n".join(steps) + f"\n[task.all]\ninputs = [\n{roots}]\n")
    for k in range(20):
        project.write(f"src/s{k}.txt", f"{k}\n")
    modules = modules_at_the_first_command(project, "-j", "2", "all")
    assert {"farmer.manifest.farmfile", "farmer.graph.traversal", "farmer.build.run", "xxhash._xxhash"} <= modules, sorted(modules)
    assert not NOT_BEFORE_THE_FIRST_COMMAND & modules, sorted(NOT_BEFORE_THE_FIRST_COMMAND & modules)
    try:
        import toml_rs  # noqa: F401
    except ImportError:
        pass
    else:
        assert "toml_rs._toml_rs" in modules  # parsed by toml_rs, not by tomllib
    assert project.read("out/s7.txt") == "7\n"
    assert project.build().summary()["ran"] == 0


def test_without_the_site_module_the_heavy_modules_are_not_imported_at_start_up():
    """What the test above rests on: a bare interpreter started as it starts farmer has none
    of these modules yet (else -X importtime would not list farmer's import of them)."""
    path = os.pathsep.join([str(REPO), os.path.dirname(os.path.dirname(xxhash.__file__))])
    cp = subprocess.run([sys.executable, "-S", "-c", "import sys; print(*sys.modules, sep='\\n')"],
                        capture_output=True, text=True, env=farmer_env({"PYTHONPATH": path}))
    assert cp.returncode == 0, cp.stderr
    assert "sys" in cp.stdout.split()
    assert not NOT_ON_AN_INCREMENTAL_BUILD & set(cp.stdout.split()), cp.stdout


def test_a_build_that_runs_no_world_task_starts_no_world(project):
    """A project with worlds, where nothing a world task reads is out of date: no world
    starts, and the executor that drives worlds is not even imported."""
    project.farmfile(FARMFILE + """
[world.py]
setup = ["import os"]

[task.report]
world = "py"
inputs = ["notes.txt"]
outputs = ["out/report.txt"]
python = "report.py"
""")
    project.write("report.py", "open('out/report.txt', 'w').write(open('notes.txt').read().upper())\n")
    project.write("notes.txt", "farmer\n")
    for stem in "abc":
        project.write(f"src/{stem}.c", f"{stem}\n")
    assert project.build().summary()["ran"] == 6
    assert project.read("out/report.txt") == "FARMER\n"
    project.write("src/a.c", "a, edited\n")
    r = build_without_site(project)
    assert r.returncode == 0, r
    assert r.summary()["ran"] == 3, r
    assert project.tasks()["out/report.txt"]["status"] == "up-to-date"
    assert not {"farmer.run.executors.composite", "farmer.run.executors.world"} & imported_modules(r.stderr)
    project.write("notes.txt", "worlds\n")
    r = build_without_site(project)  # now the world task is out of date: its world runs it
    assert r.returncode == 0 and r.summary()["ran"] == 1, r
    assert project.read("out/report.txt") == "WORLDS\n"
    assert "farmer.run.executors.composite" in imported_modules(r.stderr)


def test_the_output_cache_is_imported_only_by_a_build_that_uses_it(project, private_cache):
    """With `[cache]`, a no-op build imports nothing of farmer/record/cache/ (nor sqlite3 through
    it); without it, neither does a build that runs something."""
    project.farmfile("[cache]\n" + FARMFILE)
    for stem in "abc":
        project.write(f"src/{stem}.c", f"{stem}\n")
    r = build_without_site(project)
    assert r.returncode == 0 and r.summary()["ran"] == 5, r
    assert "farmer.record.cache.use" in imported_modules(r.stderr)
    r = build_without_site(project)
    assert r.returncode == 0 and r.summary()["ran"] == 0, r
    assert not {m for m in imported_modules(r.stderr) if m.startswith("farmer.record.cache")}, r.stderr
    project.farmfile(FARMFILE)
    project.write("src/b.c", "b, edited\n")
    r = build_without_site(project)
    assert r.returncode == 0 and r.summary()["ran"] == 3, r
    assert not {m for m in imported_modules(r.stderr) if m.startswith("farmer.record.cache")}, r.stderr


# A ninja manifest is read by string methods (farmer/manifest/ninja_lexer.py): no `re`, no `enum`; its
# compilers' depfiles are read after each command.
NOT_ON_A_FIRST_MANIFEST_BUILD = NOT_ON_AN_INCREMENTAL_BUILD - {"farmer.record.depfile"}


def configured_manifest(project) -> None:
    """A build.ninja as a generator just made it (`meson setup`, `cmake -G Ninja`): a compile
    rule with a gcc depfile, escapes, a comment, edge bindings, the regeneration edge."""
    project.write("meson.build", "project('x')\n")
    project.write("src.txt", "alpha\n")
    project.write("build.ninja", "# generated\nrule cat\n  command = cat $in > $out\n"
                                 "rule cc\n  command = cat $in > $out && echo \"$out: $in\" > $DEPFILE\n"
                                 "  deps = gcc\n  depfile = $DEPFILE\n"
                                 "rule regen\n  command = echo regenerated > build.ninja\n  generator = 1\n"
                                 "build out.txt: cat src.txt\nbuild obj$ dir/a.o: cc src.txt | out.txt\n"
                                 "  DEPFILE = a.o.d\n"
                                 "build build.ninja: regen meson.build\n")
    os.utime(project.root / "meson.build", (1_000_000_000,) * 2)  # older than build.ninja
    time.sleep(0.2)  # a manifest changed just now (its ctime) is not vouched for: grains.RACY_NS


def test_a_first_build_of_a_configured_manifest_imports_no_heavy_module(project):
    """The first build of a build.ninja just made by a generator: the manifest is parsed, the
    generator taken as run, the commands run, without pathlib (and its fnmatch,
    urllib.parse, ipaddress), typing or the Farmfile's modules."""
    configured_manifest(project)
    r = build_without_site(project, "-f", "build.ninja", "-j", "2")
    assert r.returncode == 0 and r.summary()["ran"] == 2, r
    assert project.read("out.txt") == "alpha\n" and project.read("build.ninja") != "regenerated\n"
    assert project.read("obj dir/a.o") == "alpha\n"
    modules = imported_modules(r.stderr)
    assert {"farmer.manifest.ninja_parser", "farmer.build.run"} <= modules, sorted(modules)
    assert not NOT_ON_A_FIRST_MANIFEST_BUILD & modules, sorted(NOT_ON_A_FIRST_MANIFEST_BUILD & modules)


def test_a_first_build_of_a_configured_manifest_starts_before_sqlite_is_imported(project):
    """Nor, before its first command, SQLite and functools (state.db is made at the first
    write), nor the depfile reader."""
    configured_manifest(project)
    modules = modules_at_the_first_command(project, "-f", "build.ninja", "-j", "2")
    assert {"farmer.manifest.ninja_parser", "farmer.build.run"} <= modules, sorted(modules)
    unwanted = NOT_ON_AN_INCREMENTAL_BUILD | {"_sqlite3", "functools", "contextlib"}
    assert not unwanted & modules, sorted(unwanted & modules)
    assert project.read("obj dir/a.o") == "alpha\n"
    assert project.build("-f", "build.ninja").summary()["ran"] == 0
