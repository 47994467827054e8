"""First-build estimates (issue 16 item 11): a computation never measured is guessed from the
project's measured computations of the same program, then of all; with nothing measured it
has "no history yet"; an ETA never reads 0 while work runs."""

from __future__ import annotations

from helpers import computation

from farmer.plan.latency import estimates
from farmer.plan.latency.predict import predict
from farmer.store.state import Sample


def sample(cid: str, task: str, wall: float) -> Sample:
    return Sample(cid, task, 0.0, wall, None, None, None)


def test_program_of_commands_and_python_lines():
    assert estimates.program(computation(0, "CC=1 /usr/bin/gcc -c a.c -o a.o", task="t")) == "gcc"
    assert estimates.program(computation(0, "tools/make.py out", task="t", kind="python")) == "python tools/make.py"
    assert estimates.program(computation(0, "-m pkg.mod out", task="t", kind="python")) == "python -m pkg.mod"
    assert estimates.program(computation(0, "-c 'pass'", task="t", kind="python")) is None


def test_nothing_measured_is_no_history_yet_not_a_made_up_number():
    comps = [computation(i, f"gcc -c {i}.c", task="cc") for i in range(3)] + [computation(3, "ld", task="link", cost=2.0)]
    est = estimates.estimate(comps, [0, 1, 2, 3], {}, None,
                             lambda: estimates.Prior.of([], lambda cid: None))
    assert est.unknown == {0, 1, 2}
    assert est[3] == 2.0  # a cost is known
    p = predict(comps, [0, 1, 2, 3], {i: "never built" for i in range(4)}, est, 2, {})
    assert not p.known and p.unknown == {0, 1, 2}


def test_a_new_task_is_guessed_from_the_same_program_then_from_all():
    old = [computation(0, "gcc -c a.c", task="objects"), computation(1, "gcc -c b.c", task="objects"),
           computation(2, "pandoc x.md", task="docs")]
    new = [computation(3, "gcc -c t.c", task="tests"), computation(4, "python3 r.py", task="report")]
    comps = old + new
    measured = [sample("out/0", "objects", 0.2), sample("out/1", "objects", 0.4),
                sample("out/2", "docs", 9.0)]
    by_id = {c.id: c for c in comps}
    prior = lambda: estimates.Prior.of(measured, lambda cid: estimates.program(by_id[cid]))  # noqa: E731
    est = estimates.estimate(comps, [3, 4], {}, None, prior)
    assert abs(est[3] - 0.3) < 1e-9  # gcc: the median of 0.2 and 0.4
    assert est[4] == 0.4  # no python3 measured: the median of all three
    assert not est.unknown


def test_the_prior_is_not_made_when_every_computation_has_an_estimate():
    comps = [computation(0, "gcc", task="t", cost=1.5)]
    def fail():
        raise AssertionError("prior made for nothing")
    assert estimates.estimate(comps, [0], {}, None, fail) == {0: 1.5}


def test_remaining_of_a_running_computation_never_reaches_zero():
    assert estimates.remaining_s(4.0, 1.0) == 3.0
    for elapsed in (3.9, 4.0, 10.0, 100.0):
        assert estimates.remaining_s(4.0, elapsed) > 0
    assert estimates.remaining_s(4.0, 10.0) < estimates.remaining_s(4.0, 20.0)


def test_unknown_estimates_are_filled_from_what_this_build_measured():
    comps = [computation(i, f"gcc -c {i}.c", task="cc") for i in range(4)] + [computation(4, "zip x", task="other")]
    est = {i: 1.0 for i in range(5)}
    filled = estimates.fill_unknown(est, {1, 2, 3, 4}, comps, {0: 0.05})
    assert filled[1] == filled[2] == filled[3] == 0.05
    assert filled[4] == 0.05  # nothing of its task or program: the median of all measured
    assert estimates.fill_unknown(est, {1}, comps, {}) is est


def test_the_live_countdown_never_reads_zero_while_work_runs():
    import io

    from rich.console import Console

    from farmer.report.console import LiveReporter

    live = LiveReporter(3)
    live.start()
    try:
        live.progress(1, 3, [computation(0, "sleep 9", task="t")], 4.0)
        live.eta_at -= 60  # a minute without a new estimate: the countdown has run out
        console = Console(record=True, width=100, file=io.StringIO())
        console.print(live.__rich__())
        text = console.export_text()
    finally:
        live.close()
    assert "ETA 1.0 s" in text, text  # a quarter of the last ETA, not 0.0
