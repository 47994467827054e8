"""`farmer report --junit FILE`: JUnit XML, the format every CI system reads (GitLab's
`artifacts:reports:junit`, Jenkins, Buildkite, GitHub's test-reporter actions). One test
case per computation that ran or failed, in a test suite per task; a failure carries its
reason and its log's tail. Up-to-date, cached and skipped computations are not test cases
(skipped ones are counted in the suite's `skipped` attribute only when they never ran). Each
world set up in the build is a test case of the suite `world set-up`; a failed one carries the
tail of the world's own log (its setup's traceback). A remote error that failed the build
(--remote-strict) is a failed test case of the suite `remote`, so the CI's test view shows why
the job failed."""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from farmer.report.pages.model import Entry, LastBuild


def render(build: LastBuild) -> str:
    suites: dict[str, list[Entry]] = {}
    for e in build.entries:
        if e.status in ("ran", "failed"):
            suites.setdefault(e.task, []).append(e)
    setups = [w for w in build.worlds if w.timed]
    failures = sum(1 for cases in suites.values() for e in cases if e.status == "failed")
    failures += sum(1 for w in setups if w.status == "failed")
    remote_error = build.remote_error
    failures += remote_error is not None
    tests = sum(len(cases) for cases in suites.values()) + len(setups) + (remote_error is not None)
    total_time = sum(e.duration_s or 0.0 for cases in suites.values() for e in cases)
    total_time += sum(w.duration_s or 0.0 for w in setups)
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<testsuites name="farmer" tests="{tests}" failures="{failures}" errors="0" '
           f'time="{total_time:.3f}" timestamp={quoteattr(str(build.head.get("started_at", "")))}>']
    for task, cases in suites.items():
        failed = sum(1 for e in cases if e.status == "failed")
        time = sum(e.duration_s or 0.0 for e in cases)
        out.append(f'  <testsuite name={quoteattr(_clean(task))} tests="{len(cases)}" failures="{failed}" '
                   f'errors="0" skipped="0" time="{time:.3f}">')
        for e in cases:
            attrs = f'classname={quoteattr(_clean(task))} name={quoteattr(_clean(e.id))} time="{e.duration_s or 0.0:.3f}"'
            if e.status != "failed":
                out.append(f"    <testcase {attrs}/>")
                continue
            tail = build.log_tail(e)
            out.append(f"    <testcase {attrs}>")
            out.append(f"      <failure message={quoteattr(_clean(e.reason))} type={quoteattr(_kind(e.reason))}>"
                       f"{escape(_clean(tail))}</failure>")
            out.append("    </testcase>")
        out.append("  </testsuite>")
    if setups:
        failed = sum(1 for w in setups if w.status == "failed")
        time = sum(w.duration_s or 0.0 for w in setups)
        out.append(f'  <testsuite name="world set-up" tests="{len(setups)}" failures="{failed}" '
                   f'errors="0" skipped="0" time="{time:.3f}">')
        for w in setups:
            attrs = f'classname="world set-up" name={quoteattr(_clean(w.id))} time="{w.duration_s or 0.0:.3f}"'
            if w.status != "failed":
                out.append(f"    <testcase {attrs}/>")
                continue
            message = f"world {w.name} setup failed; see .farmer/{w.log}"
            out.append(f"    <testcase {attrs}>")
            out.append(f"      <failure message={quoteattr(_clean(message))} type=\"setup\">"
                       f"{escape(_clean(build.world_log_tail(w)))}</failure>")
            out.append("    </testcase>")
        out.append("  </testsuite>")
    if remote_error is not None:
        out.append('  <testsuite name="remote" tests="1" failures="1" errors="0" skipped="0" time="0.000">')
        out.append('    <testcase classname="remote" name="remote" time="0.000">')
        out.append(f"      <failure message={quoteattr(_clean(remote_error))} type=\"remote\">"
                   f"{escape(_clean(remote_error))}</failure>")
        out.append("    </testcase>")
        out.append("  </testsuite>")
    out.append("</testsuites>")
    return "\n".join(out) + "\n"


def _kind(reason: str) -> str:
    """The reason's first word: exit, signal, timeout, declared, input, interrupted..."""
    return reason.split(" ", 1)[0] if reason else "failed"


def _clean(text: str) -> str:
    """XML 1.0 allows no control characters but tab, newline and carriage return (a
    command's output can hold any byte)."""
    return "".join(c if c >= " " or c in "\t\n\r" else f"\\x{ord(c):02x}" for c in text)
