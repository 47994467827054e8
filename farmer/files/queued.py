"""The writer threads' one way of taking work from a queue: wait for the first item, then
take what else is queued, so that what arrived together is written or sent together (one
transaction, one batch of calls). `None` on the queue is the end.
"""

from __future__ import annotations

import queue


def take_queued(q: queue.SimpleQueue | queue.Queue, most: int | None = None) -> tuple[list, bool]:
    """Wait for one item of `q`, then take the others queued now, at most `most` in all: the
    items, and whether the end (None) came after them."""
    items = []
    item = q.get()
    while item is not None:
        items.append(item)
        if most is not None and len(items) >= most:
            break
        try:
            item = q.get_nowait()
        except queue.Empty:
            break
    return items, item is None
