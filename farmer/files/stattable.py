"""One file's stat record, and a flat table of them.

A stat key is what farmer compares to tell whether a file may have changed since its content
was hashed: (mtime_ns, size, inode, ctime_ns). The digests' stat cache keeps one per file
(farmer/files/digests.py); the no-op proof keeps a table of them, FIELDS native int64s per
file in one bytearray, read and written as bytes and compared as one list of ints
(farmer/store/proof_check.py), not as tens of thousands of tuples. A memoryview reads the
table: the array module would import collections, which a no-op build spares.

On every no-op build's path: it imports only os and sys.
"""

from __future__ import annotations

import os
import sys

from farmer.startup.cheap import int64s_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

StatKey = tuple[int, int, int, int]  # mtime_ns, size, inode, ctime_ns

FIELDS = 4  # int64s per file in a table
STAT_BYTES = 8 * FIELDS  # bytes per file in a table


def stat_key(st: os.stat_result) -> StatKey:
    """The stat key of a stat just taken."""
    return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)


def stat_key_of(path: str) -> StatKey | None:
    """The stat key of `path` now; None when it cannot be statted."""
    try:
        return stat_key(os.stat(path))
    except OSError:
        return None


def table(keys: Iterable[StatKey]) -> bytearray:
    """These stat keys laid flat, as the proof's check compares them."""
    flat = bytearray()
    for key in keys:
        flat += packed(key)
    return flat


def packed(key: StatKey) -> bytes:
    """One file's entry in a table."""
    return b"".join(v.to_bytes(8, sys.byteorder, signed=True) for v in key)


def ints(data: bytes | bytearray | memoryview, lo: int = 0, hi: int | None = None) -> list[int]:
    """The native int64s of `data` from the `lo`th to before the `hi`th."""
    with memoryview(data) as raw:
        return int64s_of(raw[8 * lo:None if hi is None else 8 * hi]).tolist()


def stat_of(stats: bytearray, n: int) -> StatKey:
    """The stat key of the table's `n`th file."""
    return tuple(ints(stats, FIELDS * n, FIELDS * n + FIELDS))  # type: ignore[return-value]
