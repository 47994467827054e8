"""Not collected (no test_ prefix): test_stack_cleanup.py runs this file in a pytest of its own,
which it kills while the stack this test started runs."""

from __future__ import annotations

import json
import os
import time


def test_holds_a_stack(own_exec_stack):
    stack = own_exec_stack(bots=1)
    pids = {k: v for k, v in stack.pids.items() if isinstance(v, int) and k != "tied_to"}
    with open(os.path.join(stack.pids["pg_data"], "postmaster.pid")) as f:
        pids["postmaster"] = int(f.readline())
    held = os.environ["FARMER_TEST_STACK_HELD"]
    with open(held + ".tmp", "w") as f:
        json.dump(pids, f)
    os.replace(held + ".tmp", held)
    time.sleep(600)  # until killed
