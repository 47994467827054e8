"""`farmer watch`'s warm-up: the worlds its selected tasks need, set up between builds.

A watch keeps its worlds warm from one build to the next, but a world is set up only by a
build that runs one of its tasks: after a first build that found everything up to date, the
first save would wait for every set-up. So once a build is over, the watch sets up the worlds
its selected tasks need (and their ancestors) that are not kept warm yet, as a build would
(the same executor, the same fingerprints: the next build adopts them), and hands them to the
workspace. A world whose set-up failed is not tried again until its fingerprint changes.
"""

from __future__ import annotations

import os
import selectors
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from farmer.build.workspace import Workspace


class WarmUp:
    """What one warm-up did: the worlds set up (with the seconds it took), those that were
    warm already, and those whose set-up failed."""

    __slots__ = ("set_up", "warm", "failed", "seconds")

    def __init__(self) -> None:
        self.set_up: list[str] = []
        self.warm: list[str] = []
        self.failed: list[str] = []
        self.seconds = 0.0

    def line(self) -> str | None:
        """The watch's status line for it; None when there was nothing to set up."""
        if not self.set_up and not self.failed:
            return None
        parts = []
        if self.set_up:
            names = ", ".join(self.set_up)
            parts.append(f"world{'s' if len(self.set_up) > 1 else ''} {names} set up in "
                         f"{self.seconds:.2f} s: the next build starts warm")
        if self.failed:
            parts.append(f"the setup of world{'s' if len(self.failed) > 1 else ''} "
                         f"{', '.join(self.failed)} failed (see .farmer/logs/worlds/)")
        return "; ".join(parts)


def worlds_for(ws: Workspace, targets: list[str]) -> list[str]:
    """The worlds the selected tasks of the workspace's graph run in, with their ancestors,
    each after its parent."""
    from farmer.graph.graph import select_targets

    spec, graph = ws.spec, ws.graph
    if spec is None or graph is None or not spec.worlds:
        return []
    comps = graph.computations
    needed: dict[str, None] = {}
    for i in select_targets(spec, graph, targets):
        world = comps[i].world
        chain = []
        while world is not None and world not in needed:
            chain.append(world)
            world = spec.worlds[world].parent
        for name in reversed(chain):
            needed[name] = None
    return list(needed)


def warm_up(ws: Workspace, targets: list[str], failed_before: dict[str, str],
            say: Callable[[str], None]) -> WarmUp:
    """Set up the worlds the watch's selected tasks need that are not warm, and keep them in
    the workspace. `failed_before`: world -> the fingerprint under which its set-up failed
    (updated here): not tried again under it. `say`: the watch's status line."""
    from farmer.files.digests import Digests
    from farmer.plan.session import Session
    from farmer.run.executors.base import SETUP_WARM
    from farmer.run.executors.world import WorldExecutor

    done = WarmUp()
    names = worlds_for(ws, targets)
    if not names or ws.worlds is None:
        return done
    spec, graph = ws.spec, ws.graph
    state = ws.open_state()
    digests = Digests(ws.digests.entries() if ws.digests is not None else state.stat_cache())
    # The fingerprints a build keeps its warm worlds under (its session's declared ones: what
    # a set-up read is checked apart, run/executors/world_warm.py), so that the next build adopts them.
    session = Session(spec, graph, state, digests, {}, False, [], [])
    try:
        prints = {name: session.world_declared_fingerprint(name) for name in names}
    except OSError:  # an input unreadable now: the next build says so
        return done
    names = [n for n in names if failed_before.get(n) != prints[n]]
    if not names:
        return done
    selector = selectors.DefaultSelector()
    t0 = time.monotonic()
    executor = WorldExecutor(spec.worlds, spec.root, os.path.join(spec.root, ".farmer", "logs"), t0, None,
                             selector, graph.computations, [], _warn, ws.worlds, prints.get)
    try:
        pending = set()
        for name in names:
            if executor.start_setup(name) == SETUP_WARM:
                done.warm.append(name)
            else:
                pending.add(name)
        if pending:
            say(f"setting up world{'s' if len(pending) > 1 else ''} "
                f"{', '.join(n for n in names if n in pending)} for the next build")
        while pending:
            for end in executor.setups_ended():
                if end.world in pending:
                    pending.discard(end.world)
                    (done.set_up if end.status == "ok" else done.failed).append(end.world)
            if not pending:
                break
            for key, _ in selector.select(0.1):
                if callable(key.data):
                    key.data(key.fd)
            executor.tick()
    except BaseException:
        executor.stop()
        raise
    finally:
        executor.close()  # the worlds set up go to the workspace, kept warm
        selector.close()
    done.seconds = time.monotonic() - t0
    for name in names:
        if name in done.failed:
            failed_before[name] = prints[name]
        else:
            failed_before.pop(name, None)
    return done


def _warn(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
