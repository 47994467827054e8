"""End-to-end: the headers a depfile lists outside the project (the system's, the source
tree's) are hashed once the run's consumers have started (farmer/record/recorder.py, `_Unhashed`),
and what is recorded of them is still what the run read: a header edited while its compile
runs, or after it ended, is compiled again next build; an interrupt in between keeps the
compile as it was checked. (The build an edit or an interrupt meets runs by the command
line; the builds after it, which only decide what runs again, in-process.)"""

import signal
import time

import pytest

HEADER = "../outside/h.h"  # the project is tmp_path/proj


def compile_and_link(project, wait_in: str) -> None:
    """`obj` reads the header outside the project and lists it in its depfile, as gcc -MD
    would; `app` is its consumer. The step named `wait_in` waits for the file `go`."""
    wait = "touch started; while [ ! -e go ]; do sleep 0.02; done"
    compile_wait, link_wait = (wait, "true") if wait_in == "compile" else ("true", wait)
    project.farmfile(
        f"""
        [task.obj]
        inputs = ["src.c"]
        outputs = ["out/obj"]
        depfile = "out/obj.d"
        cmd = "cat src.c {HEADER} > out/obj; printf 'out/obj: src.c {HEADER}\\\\n' > out/obj.d; {compile_wait}"

        [task.app]
        inputs = ["out/obj"]
        outputs = ["out/app"]
        cmd = "{link_wait}; cp out/obj out/app"
        """
    )
    project.write("src.c", "int main;\n")
    (project.root.parent / "outside").mkdir(exist_ok=True)
    project.write(HEADER, "old\n")
    time.sleep(0.15)  # older than the tick farmer allows for time stamps (grains.RACY_NS)


def run_until_started(project, *args):
    p = project.popen("build", "-j", "2", *args)
    if not project.wait_for("started", timeout=20, proc=p):
        p.kill()
        out, err = p.communicate(timeout=10)
        pytest.fail(f"the waiting step never started; rc={p.returncode}\n{out}\n{err}")
    return p


def warnings_of(text: str) -> list[str]:
    return [l for l in text.splitlines() if l.startswith("farmer: warning:")]


def test_a_header_edited_while_its_compile_runs_is_compiled_again_next_build(project):
    compile_and_link(project, wait_in="compile")
    p = run_until_started(project)
    project.write(HEADER, "new\n")  # after the compile read it, before it ends
    time.sleep(0.3)
    project.write("go", "")
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, (out, err)
    assert project.read("out/app") == "int main;\nold\n"  # what the compile read
    assert warnings_of(out + err) == [f"farmer: warning: input {HEADER} changed while out/obj ran; "
                                      "it will run again next build"], (out, err)

    r = project.build_in_process("--explain")
    assert r.returncode == 0, r
    assert project.statuses() == {"out/obj": "ran", "out/app": "ran"}, r
    assert project.reasons()["out/obj"] == f"input {HEADER} changed", r
    assert warnings_of(r.output) == [], r
    assert project.read("out/app") == "int main;\nnew\n"
    r = project.build_in_process()
    assert r.returncode == 0 and r.summary()["up to date"] == 2, r


def test_a_header_edited_after_its_compile_ended_is_compiled_again_next_build(project):
    compile_and_link(project, wait_in="link")
    p = run_until_started(project)  # the compile has ended: its consumer runs
    project.write(HEADER, "new\n")
    project.write("go", "")
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, (out, err)
    assert project.read("out/app") == "int main;\nold\n"

    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.statuses() == {"out/obj": "ran", "out/app": "ran"}, r
    assert project.reasons()["out/obj"] == f"input {HEADER} changed", r
    assert project.read("out/app") == "int main;\nnew\n"
    r = project.build_in_process()
    assert r.returncode == 0 and r.summary()["up to date"] == 2, r


def test_ctrl_c_while_the_consumer_runs_keeps_the_compile_with_its_header(project):
    compile_and_link(project, wait_in="link")
    p = run_until_started(project)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 130, (out, err)

    project.write("go", "")
    r = project.build_in_process()
    assert r.returncode == 0, r
    # the compile was recorded with the header it read: only the interrupted link runs
    assert project.statuses() == {"out/obj": "up-to-date", "out/app": "ran"}, r
    project.write(HEADER, "new\n")
    r = project.build_in_process()
    assert r.returncode == 0, r
    assert project.statuses() == {"out/obj": "ran", "out/app": "ran"}, r
    assert project.reasons()["out/obj"] == f"input {HEADER} changed", r
