"""Where a no-op through `farmer serve` spends its time, on the server's side: a server made in
this process for an already built project (bench/run.py's generated graph, say), its no-op
timed (--repeat) and profiled (cProfile, the 20 functions with the most cumulative time).
The client's side is an interpreter's start and the client's imports: compare `farmer build`
through a server with `python -c pass` (bench/run.py --only version).

    python bench/profile_serve.py -C bench/work/n10000/farmer all
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from farmer.build.request import BuildRequest  # noqa: E402
from farmer.cli import app  # noqa: E402
from farmer.cli import server  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-C", dest="directory", default=".", help="the project (built once already)")
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("targets", nargs="*")
    args = ap.parse_args()
    os.chdir(args.directory)
    root = os.getcwd()
    srv = server.Server(root, 3600, app.run_served)
    srv.open()
    real, null = sys.stdout, open(os.devnull, "w")
    answered: list[server.Served] = []

    def noop() -> int:
        served = server.Served(srv.workspace, srv.watcher, srv.checker)
        answered.append(served)
        sys.stdout = null
        try:
            return served.build(BuildRequest(list(args.targets), jobs=2))
        finally:
            sys.stdout = real

    def after_answer() -> None:  # what the server does once the client has its answer
        while answered:
            answered.pop().done()

    try:
        assert noop() == 0  # the first: a full check, the proof's index made
        after_answer()
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            assert noop() == 0
            times.append(time.perf_counter() - t0)
            after_answer()
        print(f"server-side no-op: median {statistics.median(times) * 1000:.2f} ms, "
              f"min {min(times) * 1000:.2f} ms ({srv.checker.noops} decided from events, "
              f"{srv.checker.full} full checks)")
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(args.repeat):
            noop()
            profile.disable()
            after_answer()
            profile.enable()
        profile.disable()
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(20)
        print(out.getvalue())
    finally:
        srv.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
