"""The event loop: one scheduling policy for every executor.

A computation becomes *ready* when the last of its producers finishes (a fan-in counter per
consumer); only then is its up-to-date check made, so an output that came out byte-identical
stops the ripple (early cutoff). Whenever capacity frees, the ready computation with the
highest expected latency that fits the CPU budget and its pool starts. Executors differ only
in how a computation runs and how time passes: processes on the wall clock, or estimates on
a simulated clock (`plan --simulate`), driven by this same code.
"""

from __future__ import annotations

from farmer.graph.graph import Computation
from farmer.run.executors.base import Executor, Outcome
from farmer.startup.cheap import heapq

UP_TO_DATE = "up-to-date"
RAN = "ran"
FAILED = "failed"
SKIPPED = "skipped"
CACHED = "cached"


_LOOK_AHEAD = 64  # computations `Scheduler._first_released` looks at, at most
_AHEAD = (float("-inf"), -1)  # ahead of every ready computation in the heap's order


class Hooks:
    """What the scheduler asks and tells around each run; a real build's are the recorder's
    (farmer/record/recorder.py), a simulation's take the plan's verdicts as they are."""

    __slots__ = ()

    def check(self, index: int, producers_ran: bool) -> str | None:
        """Why a ready computation must run, or None when it is up to date."""
        raise NotImplementedError

    def starting(self, index: int, reason: str) -> Outcome | None:
        """`index` is about to be handed to the executor. An Outcome instead: it is done
        without running (its outputs restored from a cache), and settles at once."""
        return None

    def finished(self, outcome: Outcome) -> Outcome:
        """Record a finished run; may turn success into failure (a declared output missing)."""
        return outcome

    def will_succeed(self, outcome: Outcome) -> bool:
        """Whether `finished` will keep `outcome` a success, asked before it is recorded: True
        lets the scheduler start what is ready in the meantime. A hook whose `finished` can
        fail a run must say so here, or a build without -k starts one more after it."""
        return outcome.ok

    def interrupted(self) -> int | None:
        """The signal that asks the build to stop, if one arrived."""
        return None

    def idle(self) -> None:
        """Everything that can start has started, and the scheduler is about to wait: the
        moment for work that need not come before the first commands."""


class Span:
    """Where and when a computation ran: its CPU slots (the first names its row in a
    timeline) and its start and end, in seconds from the build's start."""

    __slots__ = ("index", "slots", "start_s", "end_s")

    def __init__(self, index: int, slots: list[int], start_s: float, end_s: float) -> None:
        self.index, self.slots, self.start_s, self.end_s = index, slots, start_s, end_s

    def __repr__(self) -> str:
        return f"Span({self.index}, {self.slots}, {self.start_s}, {self.end_s})"

    @property
    def slot(self) -> int:
        return self.slots[0]


class Settled:
    """How a computation settled, and why. A value, never changed: computations that settled
    alike share one."""

    __slots__ = ("status", "reason")

    def __init__(self, status: str, reason: str) -> None:
        self.status, self.reason = status, reason

    def __repr__(self) -> str:
        return f"Settled({self.status!r}, {self.reason!r})"


class Scheduler:
    def __init__(self, comps: list[Computation], selected: list[int], latency: dict[int, float],
                 jobs: int, pools: dict[str, int], keep_going: bool | int, executor: Executor,
                 hooks: Hooks) -> None:
        self.comps = comps
        self.selected = selected
        self.latency = latency
        self.jobs = max(1, jobs)
        self.pools = pools
        # keep_going: True, or ninja's -k N as a number: the failures that stop the build (0:
        # none, 1: the first, as False)
        self._stop_at = 1 if keep_going is False else 0 if keep_going is True else keep_going
        self._failures = 0
        self.keep_going = self._stop_at != 1
        self.executor = executor
        self.hooks = hooks
        self.settled: dict[int, Settled] = {}
        self.signal: int | None = None
        self.stopping = False
        self.start_order: list[int] = []
        inside = set(selected)
        # Fan-in counters: producers outside `selected` count as finished already.
        self._waiting = {i: sum(1 for p in comps[i].producers if p in inside) for i in selected}
        self._producers_ran: set[int] = set()
        self._ready: list[tuple[float, int]] = []  # (-expected latency, index): a max-heap
        self._reasons: dict[int, str] = {}  # why each ready or running computation runs
        self._pool_used = dict.fromkeys(pools, 0)
        self._slots: dict[int, tuple[int, ...]] = {}  # CPU slots each running computation holds
        self._free_slots = list(range(self.jobs))
        self._slot_sets: dict[tuple[int, ...], tuple[int, ...]] = {}
        self.slots_of: dict[int, tuple[int, ...]] = {}  # the slots each computation ran in (timelines)
        self._same: dict[tuple[str, str], Settled] = {}  # Settled values met often, shared
        self._discarded: set[int] = set()  # told to the executor as never starting
        self._ended: set[int] = set()  # ended, vacated, not yet recorded (`_end`)

    @property
    def done(self) -> int:
        return len(self.settled)

    def run(self) -> dict[int, Settled]:
        # Taken before any check: an up-to-date computation releases its consumers at once.
        for i in [i for i in self.selected if self._waiting[i] == 0]:
            self._make_ready(i)
        while True:
            signal = self.hooks.interrupted()
            if signal is not None and self.signal is None:
                self.signal = signal
                self.stopping = True
                self.executor.stop()
            if not self.stopping:
                self._start_what_fits()
            if self.executor.running() == 0:
                if self.stopping or not self._ready:
                    break
            held_back = bool(self._ready) and not self.stopping and bool(self._free_slots)
            self.hooks.idle()
            ended = self.executor.wait(0.5 if held_back else None)
            if ended:
                self._end(ended)
        self._settle_rest()
        return self.settled

    def _end(self, ended: list[Outcome]) -> None:
        """Runs ended: what they held is free, and what is ready starts before they are
        recorded (their outputs' digests, traces and lines: about half a millisecond of
        farmer's one thread each, which a CPU would otherwise wait for), if it is what would
        start after it: ahead of every consumer they may make ready, and only when each is
        sure to stay a success (without -k a failure starts nothing more) and no signal came."""
        for outcome in ended:
            self._vacate(outcome.index)
        self._ended.update(o.index for o in ended)
        if not self.stopping and self._ready and self._free_slots and self._may_go_on(ended) \
                and self.hooks.interrupted() is None:
            self._start_what_fits(before=self._first_released(ended))
        for outcome in ended:
            self._ended.discard(outcome.index)
            self._complete(outcome)

    def _may_go_on(self, ended: list[Outcome]) -> bool:
        """Whether recording `ended` cannot stop the build: no failure among them, or fewer
        than -k N allows (-k 0: any number)."""
        if self._stop_at == 0:
            return True
        failing = sum(1 for o in ended if not self.hooks.will_succeed(o))
        return self._failures + failing < self._stop_at

    def _first_released(self, ended: list[Outcome]) -> tuple[float, int] | None:
        """The first in the ready heap's order of the computations that recording `ended`
        may make ready: the consumers waiting for nothing else, and theirs in turn (one found
        up to date releases its own at once). None: none; where there are more than
        `_LOOK_AHEAD` to look at, a place ahead of everything (nothing starts before)."""
        waiting, latency, settled, comps = self._waiting, self.latency, self.settled, self.comps
        first = None
        released: dict[int, int] = {}  # consumer -> its producers among those that may settle
        stack = [o.index for o in ended]
        while stack:
            for c in comps[stack.pop()].consumers:
                n = waiting.get(c)
                if n is None or c in settled:
                    continue
                k = released[c] = released.get(c, 0) + 1
                if k == n:
                    if len(released) > _LOOK_AHEAD:
                        return _AHEAD
                    item = (-latency.get(c, 0.0), c)
                    if first is None or item < first:
                        first = item
                    stack.append(c)
        return first

    def _settled(self, status: str, reason: str) -> Settled:
        """Settled(status, reason), one value for each pair met often ("never built", "up to
        date"), not one object per computation (see
        bench/results/performance-notes.md#figures-from-code-comments)."""
        key = (status, reason)
        same = self._same.get(key)
        if same is None:
            same = Settled(status, reason)
            if len(self._same) < 64:  # reasons naming a path are many, and met once each
                self._same[key] = same
        return same

    # -- readiness --------------------------------------------------------------------

    def _make_ready(self, first: int) -> None:
        """Check `first`; an up-to-date computation settles at once and may make its
        consumers ready in turn (iteratively: chains can be long)."""
        stack = [first]
        while stack:
            i = stack.pop()
            reason = self.hooks.check(i, i in self._producers_ran)
            if reason is None:
                self.settled[i] = self._settled(UP_TO_DATE, "up to date")
                self._discard([i])
                stack.extend(self._release(i, ran=False))
            else:
                heapq.heappush(self._ready, (-self.latency.get(i, 0.0), i))
                self._reasons[i] = reason

    def _release(self, i: int, ran: bool) -> list[int]:
        """Count `i` as finished for each consumer; return the consumers now ready."""
        now_ready = []
        waiting = self._waiting
        for c in self.comps[i].consumers:
            if c in waiting:
                if ran:
                    self._producers_ran.add(c)
                waiting[c] -= 1
                if waiting[c] == 0:
                    now_ready.append(c)
        return now_ready

    # -- starting ---------------------------------------------------------------------

    def _start_what_fits(self, before: tuple[float, int] | None = None) -> None:
        """Start the ready computations in the heap's order while they fit; with `before`,
        only those ahead of it in that order."""
        passed_over = []
        while self._ready and self._free_slots:
            if not self.executor.can_start():  # the load limit (-l), say
                break
            if before is not None and self._ready[0] >= before:
                break
            item = heapq.heappop(self._ready)
            i = item[1]
            comp = self.comps[i]
            cpus = min(comp.cpus, self.jobs)
            pool = comp.pool
            if cpus > len(self._free_slots) or (pool is not None and self._pool_used[pool] >= self.pools[pool]):
                passed_over.append(item)
                continue
            self._free_slots.sort()
            slots = tuple(self._free_slots[:cpus])
            # One tuple for each set of slots, shared by every computation that ran in it.
            self._slots[i] = self.slots_of[i] = self._slot_sets.setdefault(slots, slots)
            del self._free_slots[:cpus]
            if pool is not None:
                self._pool_used[pool] += 1
            self.start_order.append(i)
            done = self.hooks.starting(i, self._reasons[i])
            if done is None:
                self.executor.start(comp)
            else:
                self._discard([i])  # it will not start
                self._vacate(i)
                self._complete(done)
                if self.stopping:
                    break
        for item in passed_over:
            heapq.heappush(self._ready, item)

    # -- finishing --------------------------------------------------------------------

    def _vacate(self, i: int) -> None:
        """`i` no longer runs: its CPU slots and its pool's place are free."""
        self._free_slots.extend(self._slots.pop(i))
        pool = self.comps[i].pool
        if pool is not None:
            self._pool_used[pool] -= 1

    def _complete(self, outcome: Outcome) -> None:
        """Record how `outcome`'s computation ended (its slots vacated already), and release
        its consumers."""
        i = outcome.index
        outcome = self.hooks.finished(outcome)
        reason = self._reasons.pop(i)
        if outcome.ok:
            self.settled[i] = self._settled(CACHED if outcome.origin.restored else RAN, reason)
            for c in self._release(i, ran=True):
                if not self.stopping:  # once stopping, what becomes ready is skipped
                    self._make_ready(c)
        else:
            self.settled[i] = Settled(FAILED, outcome.reason or "failed")
            self._failures += 1
            if self._stop_at and self._failures >= self._stop_at:
                self.stopping = True
            self._discard_after_failure(i)

    def _discard(self, indices: list[int]) -> None:
        for i in indices:
            if i not in self._discarded:
                self._discarded.add(i)
                self.executor.discard(i)

    def _discard_after_failure(self, failed: int) -> None:
        """What will never start now: when the build stops, everything not running; with
        -k, everything that needs what failed."""
        if self.stopping:
            self._discard([j for j in self.selected if j not in self.settled and j not in self._slots
                           and j not in self._ended])
            return
        doomed: dict[int, None] = {}  # ordered, for a predictable order of calls
        stack = list(self.comps[failed].consumers)
        while stack:
            c = stack.pop()
            if c in self._waiting and c not in self.settled and c not in self._discarded \
                    and c not in doomed:
                doomed[c] = None
                stack.extend(self.comps[c].consumers)
        self._discard(list(doomed))

    def _settle_rest(self) -> None:
        """Everything that never ran is skipped: because an input failed, or the build stopped."""
        for i in self.selected:
            if i in self.settled:
                continue
            reason = "build stopped"
            comp = self.comps[i]
            for p in comp.producers:
                s = self.settled.get(p)
                if s is not None and s.status in (FAILED, SKIPPED) and s.reason != "build stopped":
                    path = next((x for x in comp.inputs if x in self.comps[p].outputs), self.comps[p].id)
                    reason = f"input {path} failed"
                    break
            self.settled[i] = Settled(SKIPPED, reason)
