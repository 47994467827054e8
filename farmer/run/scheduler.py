"""The event loop: one scheduling policy for every executor.

A computation becomes *ready* when the last of its producers finishes (a fan-in counter per
consumer); only then is its up-to-date check made, so an output that came out byte-identical
stops the ripple (early cutoff). Whenever capacity frees, the ready computation with the
highest expected latency that fits the CPU budget and its pool starts. Executors differ only
in how a computation runs and how time passes: processes on the wall clock, or estimates on
a simulated clock (`plan --simulate`), driven by this same code.

A world's set-up is a step of the schedule too: a node after its parent world's set-up and
after the computations that make its world's inputs, before its tasks, with its own expected
latency (its estimate plus the largest expected latency among its tasks and its child
worlds' set-ups). It starts when it is the highest-latency ready thing, as early as a slot is
free, and holds one CPU slot until the world is ready. A task of a world still being set up
is checked when its producers finish, as any, and waits off the heap (no slot) for it.
"""

from __future__ import annotations

from farmer.graph.graph import Computation
from farmer.run.executors.base import SETUP_STARTED, SETUP_WARM, Executor, Outcome
from farmer.startup.cheap import heapq

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from farmer.run.executors.simulated import WorldSetups

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


class WorldSpan:
    """A world's set-up as the build saw it: the CPU slots it held (none when a task's start
    began it), its start and end in seconds from the build's start (None for a world kept
    warm from an earlier build), and how it ended ("ok", "failed", "warm", "cancelled")."""

    __slots__ = ("world", "slots", "start_s", "end_s", "status")

    def __init__(self, world: str, slots: tuple[int, ...], start_s: float | None,
                 end_s: float | None, status: str) -> None:
        self.world, self.slots, self.start_s, self.end_s = world, slots, start_s, end_s
        self.status = status

    def __repr__(self) -> str:
        return f"WorldSpan({self.world!r}, {self.slots}, {self.start_s}, {self.end_s}, {self.status!r})"


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
                 hooks: Hooks, worlds: WorldSetups | None = None,
                 world_latency: Mapping[str, float] | None = None) -> None:
        """`worlds`: the worlds to set up as steps of the schedule (their parents, and the
        computations whose outputs their set-up reads); `world_latency`: each one's
        expected latency (plan/latency/critical.py)."""
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
        self.world_spans: list[WorldSpan] = []  # each world set-up, as it ended
        self._setups = _Setups(comps, selected, worlds, world_latency or {}) if worlds else None

    @property
    def done(self) -> int:
        return len(self.settled)

    def run(self) -> dict[int, Settled]:
        setups = self._setups
        if setups is not None:  # the set-ups that wait for nothing are ready first
            for k in setups.initially_ready():
                heapq.heappush(self._ready, setups.item(k))
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
                if setups is not None and self.take_setup_ends():
                    continue  # one ended as it started (it could not): what it freed may start
            if self.executor.running() == 0:
                # (a set-up still running is left to the executor when the build stops)
                if self.stopping or not (self._ready or setups is not None and setups.running):
                    break
            held_back = bool(self._ready) and not self.stopping and bool(self._free_slots)
            self.hooks.idle()
            ended = self.executor.wait(0.5 if held_back else None)
            if setups is not None:
                self.take_setup_ends()
            if ended:
                self._end(ended)
        self._settle_rest()
        return self.settled

    def take_setup_ends(self) -> bool:
        """The world set-ups that ended: their slots free, their tasks ready (also after a
        failed set-up: the executor fails each with the world's reason), their child
        worlds' set-ups released. Once more after the executor closed, for the spans.
        Whether any ended."""
        setups = self._setups
        ended = self.executor.setups_ended()
        for end in ended:
            slots = setups.running.pop(end.world, None) if setups is not None else None
            if slots is not None:
                self._free_slots.extend(slots)
            self.world_spans.append(WorldSpan(end.world, slots or (), end.start_s, end.end_s, end.status))
            if slots is not None:
                self._setup_done(end.world)
        return bool(ended)

    def _setup_done(self, world: str) -> None:
        """`world`'s set-up step is over (or not needed): what waited for it is ready."""
        setups = self._setups
        parked = setups.done(world)
        if not self.stopping:
            for i in parked:
                heapq.heappush(self._ready, (-self.latency.get(i, 0.0), i))
        for k in setups.released_by_world(world):
            heapq.heappush(self._ready, setups.item(k))

    def _start_setup(self, k: int) -> None:
        """Set-up step `k` is the first ready thing and a slot is free."""
        setups = self._setups
        world = setups.names[k]
        if not setups.needed(world, self.settled, self._discarded):
            self._setup_done(world)  # every task of it and below was found up to date
            return
        self._free_slots.sort()
        slot = self._free_slots.pop(0)
        setups.running[world] = (slot,)
        started = self.executor.start_setup(world)
        if started != SETUP_STARTED:
            self._free_slots.append(setups.running.pop(world)[0])
            if started == SETUP_WARM:
                self.world_spans.append(WorldSpan(world, (), None, None, "warm"))
            self._setup_done(world)

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
                self._reasons[i] = reason
                world = self.comps[i].world
                if world is None or self._setups is None or not self._setups.park(world, i):
                    heapq.heappush(self._ready, (-self.latency.get(i, 0.0), i))

    def _release(self, i: int, ran: bool) -> list[int]:
        """Count `i` as finished for each consumer; return the consumers now ready."""
        now_ready = []
        waiting = self._waiting
        if self._setups is not None:  # a world's set-up may read what it made
            for k in self._setups.released_by(i):
                heapq.heappush(self._ready, self._setups.item(k))
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
            if i < 0:  # a world's set-up
                self._start_setup(-1 - i)
                continue
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


class _Setups:
    """The world set-ups of one schedule: each a node numbered `k` (on the ready heap as
    index -1-k, ahead of computations of the same latency), waiting for its parent world's
    set-up and for the computations that make its world's inputs."""

    __slots__ = ("names", "latency", "waiting", "readers", "children", "pending", "parked",
                 "running", "tasks")

    def __init__(self, comps: list[Computation], selected: list[int], worlds: WorldSetups,
                 latency: Mapping[str, float]) -> None:
        self.names = list(worlds.parents)
        self.latency = latency
        at = {name: k for k, name in enumerate(self.names)}
        inside = set(selected)
        self.waiting = [0] * len(self.names)
        self.children: dict[str, list[int]] = {}
        self.readers: dict[int, list[int]] = {}  # computation -> the set-ups reading its outputs
        for k, name in enumerate(self.names):
            parent = worlds.parents[name]
            if parent in at:
                self.children.setdefault(parent, []).append(k)
                self.waiting[k] += 1
            for p in worlds.after.get(name, ()):
                if p in inside:
                    self.readers.setdefault(p, []).append(k)
                    self.waiting[k] += 1
        self.pending = set(self.names)  # set-ups not over yet
        self.parked: dict[str, list[int]] = {}  # world -> its tasks ready to run, waiting for it
        self.running: dict[str, tuple[int, ...]] = {}  # world -> the slot its set-up holds
        # World -> the selected tasks of it and of the worlds below it (whether it is needed).
        self.tasks: dict[str, list[int]] = {name: [] for name in self.names}
        for i in selected:
            world = comps[i].world
            while world is not None and world in self.tasks:
                self.tasks[world].append(i)
                world = worlds.parents.get(world)

    def item(self, k: int) -> tuple[float, int]:
        return (-self.latency.get(self.names[k], 0.0), -1 - k)

    def initially_ready(self) -> list[int]:
        return [k for k, n in enumerate(self.waiting) if n == 0]

    def released_by(self, i: int) -> list[int]:
        """Computation `i` finished: the set-ups now waiting for nothing."""
        ready = []
        for k in self.readers.get(i, ()):
            self.waiting[k] -= 1
            if self.waiting[k] == 0:
                ready.append(k)
        return ready

    def released_by_world(self, world: str) -> list[int]:
        ready = []
        for k in self.children.get(world, ()):
            self.waiting[k] -= 1
            if self.waiting[k] == 0:
                ready.append(k)
        return ready

    def park(self, world: str, i: int) -> bool:
        """Whether task `i` must wait for `world`'s set-up (kept until `done`)."""
        if world not in self.pending:
            return False
        self.parked.setdefault(world, []).append(i)
        return True

    def done(self, world: str) -> list[int]:
        """`world`'s set-up is over: the tasks parked on it."""
        self.pending.discard(world)
        return self.parked.pop(world, [])

    def needed(self, world: str, settled: Mapping[int, object], discarded: set[int]) -> bool:
        """Whether a task of `world` or of a world below it may still run."""
        return any(i not in settled and i not in discarded for i in self.tasks.get(world, ()))
