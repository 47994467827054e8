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

from farmer.report.pages.model import LastBuild


Case = tuple[str, float, "tuple[str, str, str] | None"]  # name, seconds, (message, type, text) if failed


def render(build: LastBuild) -> str:
    suites: dict[str, list[Case]] = {}
    for e in build.entries:
        if e.status in ("ran", "failed"):
            failure = (e.reason, _kind(e.reason), build.log_tail(e)) if e.status == "failed" else None
            suites.setdefault(e.task, []).append((e.id, e.duration_s or 0.0, failure))
    every: list[tuple[str, list[Case]]] = list(suites.items())
    setups = [w for w in build.worlds if w.timed]
    if setups:
        every.append(("world set-up", [
            (w.id, w.duration_s or 0.0,
             (f"world {w.name} setup failed; see .farmer/{w.log}", "setup", build.world_log_tail(w))
             if w.status == "failed" else None) for w in setups]))
    if build.remote_error is not None:
        every.append(("remote", [("remote", 0.0, (build.remote_error, "remote", build.remote_error))]))
    tests = sum(len(cases) for _, cases in every)
    failures = sum(1 for _, cases in every for case in cases if case[2] is not None)
    total_time = sum(case[1] for _, cases in every for case in cases)
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<testsuites name="farmer" tests="{tests}" failures="{failures}" errors="0" '
           f'time="{total_time:.3f}" timestamp={quoteattr(str(build.head.get("started_at", "")))}>']
    for name, cases in every:
        _suite(out, name, cases)
    out.append("</testsuites>")
    return "\n".join(out) + "\n"


def _suite(out: list[str], name: str, cases: list[Case]) -> None:
    """One test suite: a test case each, a failure with its message, type and text."""
    failed = sum(1 for case in cases if case[2] is not None)
    time = sum(case[1] for case in cases)
    suite = quoteattr(_clean(name))
    out.append(f'  <testsuite name={suite} tests="{len(cases)}" failures="{failed}" '
               f'errors="0" skipped="0" time="{time:.3f}">')
    for case, seconds, failure in cases:
        attrs = f'classname={suite} name={quoteattr(_clean(case))} time="{seconds:.3f}"'
        if failure is None:
            out.append(f"    <testcase {attrs}/>")
            continue
        message, kind, text = failure
        out.append(f"    <testcase {attrs}>")
        out.append(f"      <failure message={quoteattr(_clean(message))} type={quoteattr(kind)}>"
                   f"{escape(_clean(text))}</failure>")
        out.append("    </testcase>")
    out.append("  </testsuite>")


def _kind(reason: str) -> str:
    """The reason's first word: exit, signal, timeout, declared, input, interrupted..."""
    return reason.split(" ", 1)[0] if reason else "failed"


def _clean(text: str) -> str:
    """XML 1.0 allows no control characters but tab, newline and carriage return (a
    command's output can hold any byte)."""
    return "".join(c if c >= " " or c in "\t\n\r" else f"\\x{ord(c):02x}" for c in text)
