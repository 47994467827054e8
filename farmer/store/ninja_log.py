"""ninja's own records of a build directory, read and written in ninja's formats, so that
farmer adopts a tree ninja built and ninja continues a tree farmer built (docs/ninja.md,
"Switching between ninja and farmer"):

- `.ninja_log`: a text line per command run, `START\tEND\tMTIME\tOUTPUT\tHASH` (start and end
  in ms from that build's start, the output's mtime in ns, the command's hash in hex), after
  a `# ninja log vN` header. v5 (ninja 1.10, 1.11) and v6 (1.12) hash the command with
  MurmurHash64A, v7 (1.13 on) with rapidhash.
- `.ninja_deps`: binary, `# ninjadeps\\n` and the version (4) as a 32-bit integer, then
  records, each a 32-bit size: a path record (the path padded with NULs to 4 bytes and the
  one's complement of its id; ids count up from 0) or, with the size's high bit set, a deps
  record (the output's id, its mtime in ns as two 32-bit halves, the inputs' ids).

Everything is little-endian, as on the machines ninja and farmer run on here.
"""

from __future__ import annotations

import os
import struct

LOG = ".ninja_log"
DEPS = ".ninja_deps"
LOG_HEADER = "# ninja log v"
DEPS_HEADER = b"# ninjadeps\n"
DEPS_VERSION = 4
MURMUR_VERSIONS = (5, 6)  # the log versions whose command hash is MurmurHash64A
KNOWN_VERSIONS = (5, 6, 7)  # those farmer reads and writes (v7: rapidhash)
_MASK = (1 << 64) - 1


def murmur64(data: bytes) -> int:
    """MurmurHash64A with ninja's seed: the command hash of log versions 5 and 6."""
    m = 0xC6A4A7935BD1E995
    h = (0xDECAFBADDECAFBAD ^ (len(data) * m)) & _MASK
    whole = len(data) - len(data) % 8
    for (k,) in struct.iter_unpack("<Q", data[:whole]):
        k = (k * m) & _MASK
        k ^= k >> 47
        k = (k * m) & _MASK
        h ^= k
        h = (h * m) & _MASK
    tail = data[whole:]
    if tail:
        h ^= int.from_bytes(tail, "little")
        h = (h * m) & _MASK
    h ^= h >> 47
    h = (h * m) & _MASK
    h ^= h >> 47
    return h


_RAPID_SEED = 0xBDD89AA982704029
_RAPID_SECRET = (0x2D358DCCAA6C78A5, 0x8BB84B93962EACC9, 0x4B33A62ED433D4A3)


def _mix(a: int, b: int) -> int:
    """rapidhash's mix: the low and high halves of the 128-bit product, xored."""
    product = a * b
    return (product & _MASK) ^ (product >> 64)


def rapidhash(data: bytes) -> int:
    """rapidhash (the version ninja 1.13 vendors), default seed: the command hash of log v7."""
    secret0, secret1, secret2 = _RAPID_SECRET
    n = len(data)
    seed = _RAPID_SEED ^ _mix(_RAPID_SEED ^ secret0, secret1) ^ n

    def r64(at: int) -> int:
        return int.from_bytes(data[at:at + 8], "little")

    def r32(at: int) -> int:
        return int.from_bytes(data[at:at + 4], "little")

    if n <= 16:
        if n >= 4:
            last = n - 4
            delta = (n & 24) >> (n >> 3)
            a = (r32(0) << 32) | r32(last)
            b = (r32(delta) << 32) | r32(last - delta)
        elif n > 0:
            a, b = (data[0] << 56) | (data[n >> 1] << 32) | data[n - 1], 0
        else:
            a = b = 0
    else:
        p, left = 0, n
        if left > 48:
            see1 = see2 = seed
            while left >= 48:  # (the C unrolls this by two; the same steps)
                seed = _mix(r64(p) ^ secret0, r64(p + 8) ^ seed)
                see1 = _mix(r64(p + 16) ^ secret1, r64(p + 24) ^ see1)
                see2 = _mix(r64(p + 32) ^ secret2, r64(p + 40) ^ see2)
                p, left = p + 48, left - 48
            seed ^= see1 ^ see2
        if left > 16:
            seed = _mix(r64(p) ^ secret2, r64(p + 8) ^ seed ^ secret1)
            if left > 32:
                seed = _mix(r64(p + 16) ^ secret2, r64(p + 24) ^ seed)
        a, b = r64(p + left - 16), r64(p + left - 8)
    product = (a ^ secret1) * (b ^ seed)
    a, b = product & _MASK, product >> 64
    return _mix(a ^ secret0 ^ n, b ^ secret1)


def command_hash(version: int, command: str) -> int | None:
    """The hash a log of `version` keeps for `command` (ninja's evaluated command with
    `;rspfile=CONTENT`): MurmurHash64A for v5 and v6, rapidhash for v7; None for another."""
    data = command.encode("utf-8", "surrogateescape")
    if version in MURMUR_VERSIONS:
        return murmur64(data)
    if version == 7:
        return rapidhash(data)
    return None


class LogEntry:
    """One `.ninja_log` line."""

    __slots__ = ("start_ms", "end_ms", "mtime_ns", "output", "hash")

    def __init__(self, start_ms: int, end_ms: int, mtime_ns: int, output: str, hash: int) -> None:
        self.start_ms, self.end_ms, self.mtime_ns = start_ms, end_ms, mtime_ns
        self.output, self.hash = output, hash

    def line(self) -> str:
        return f"{self.start_ms}\t{self.end_ms}\t{self.mtime_ns}\t{self.output}\t{self.hash:x}\n"


def parse_log(text: str) -> tuple[int | None, dict[str, LogEntry]]:
    """A log's version (None: no header) and its entries, the last line of each output
    winning; malformed lines are skipped, as ninja skips them."""
    version = None
    entries: dict[str, LogEntry] = {}
    for line in text.split("\n"):
        if line.startswith(LOG_HEADER):
            digits = line[len(LOG_HEADER):].strip()
            version = int(digits) if digits.isdigit() else None
            continue
        fields = line.split("\t")
        if len(fields) != 5:
            continue
        try:
            entry = LogEntry(int(fields[0]), int(fields[1]), int(fields[2]), fields[3], int(fields[4], 16))
        except ValueError:
            continue
        entries[entry.output] = entry
    return version, entries


def read_log(path: str) -> tuple[int | None, dict[str, LogEntry]]:
    """`parse_log` of the file at `path`; no file: (None, {})."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            return parse_log(f.read())
    except FileNotFoundError:
        return None, {}


def append_log(path: str, version: int, entries: list[LogEntry]) -> None:
    """Entries added at the log's end (a new log starts with the header of `version`)."""
    if not entries:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    with open(fd, "a", encoding="utf-8", errors="surrogateescape") as f:
        if f.tell() == 0:
            f.write(f"{LOG_HEADER}{version}\n")
        f.write("".join(e.line() for e in entries))


def _rewrite_log(path: str, version: int, entries: list[LogEntry]) -> None:
    temp = path + ".recompact"
    with open(temp, "w", encoding="utf-8", errors="surrogateescape") as f:
        f.write(f"{LOG_HEADER}{version}\n")
        f.write("".join(e.line() for e in entries))
    os.replace(temp, path)


def recompact(path: str, keep) -> None:
    """The log rewritten with each output's last entry, of the outputs `keep(path)` holds."""
    version, entries = read_log(path)
    if version is None:
        return
    _rewrite_log(path, version, [e for p, e in entries.items() if keep(p)])


def restat(path: str, outputs: set[str] | None) -> None:
    """The recorded mtimes of `outputs` (None: all) made the files' mtimes now (0: gone)."""
    version, entries = read_log(path)
    if version is None:
        return
    for p, e in entries.items():
        if outputs is None or p in outputs:
            try:
                e.mtime_ns = os.stat(p).st_mtime_ns
            except OSError:
                e.mtime_ns = 0
    _rewrite_log(path, version, list(entries.values()))


# -- .ninja_deps -------------------------------------------------------------------------

class DepsLog:
    """A deps log as read: its paths by id, and each output's (mtime, inputs), the last
    record of each output winning. `valid`: the header was ninja's (else it is started anew)."""

    __slots__ = ("paths", "ids", "deps", "valid")

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.ids: dict[str, int] = {}
        self.deps: dict[str, tuple[int, list[str]]] = {}
        self.valid = False


def parse_deps(data: bytes) -> DepsLog:
    log = DepsLog()
    head = len(DEPS_HEADER)
    if data[:head] != DEPS_HEADER or len(data) < head + 4 \
            or struct.unpack_from("<i", data, head)[0] != DEPS_VERSION:
        return log
    log.valid = True
    at, n = head + 4, len(data)
    while at + 4 <= n:
        (size,) = struct.unpack_from("<I", data, at)
        is_deps, size = size >> 31, size & 0x7FFFFFFF
        body = at + 4
        if body + size > n or size < 4:
            break  # a record cut short (ninja stopped while writing): the rest is dropped
        if is_deps:
            if size % 4 or size < 12:
                break
            out, low, high = struct.unpack_from("<iII", data, body)
            ids = struct.unpack_from(f"<{size // 4 - 3}i", data, body + 12)
            if not (0 <= out < len(log.paths)) or any(not 0 <= i < len(log.paths) for i in ids):
                break
            log.deps[log.paths[out]] = ((high << 32) | low, [log.paths[i] for i in ids])
        else:
            raw = data[body:body + size - 4].rstrip(b"\0")
            (check,) = struct.unpack_from("<I", data, body + size - 4)
            if (~check & 0xFFFFFFFF) != len(log.paths):
                break
            path = raw.decode("utf-8", "surrogateescape")
            log.ids[path] = len(log.paths)
            log.paths.append(path)
        at = body + size
    return log


def read_deps(path: str) -> dict[str, tuple[int, list[str]]]:
    """Each output's (mtime in ns, inputs) as the deps log at `path` records them."""
    return load_deps(path).deps


def load_deps(path: str) -> DepsLog:
    try:
        with open(path, "rb") as f:
            return parse_deps(f.read())
    except FileNotFoundError:
        return DepsLog()


def append_deps(path: str, records: list[tuple[str, int, list[str]]]) -> None:
    """Deps records (output, mtime in ns, inputs) added at the log's end, with a path record
    for each path it has no id for yet (a log that is not ninja's is started anew)."""
    if not records:
        return
    log = load_deps(path)
    chunks: list[bytes] = []
    if not log.valid:
        log = DepsLog()
        chunks.append(DEPS_HEADER + struct.pack("<i", DEPS_VERSION))

    def ident(p: str) -> int:
        i = log.ids.get(p)
        if i is None:
            raw = p.encode("utf-8", "surrogateescape")
            raw += b"\0" * ((4 - len(raw) % 4) % 4)
            i = log.ids[p] = len(log.paths)
            log.paths.append(p)
            chunks.append(struct.pack("<I", len(raw) + 4) + raw + struct.pack("<I", ~i & 0xFFFFFFFF))
        return i

    for out, mtime, inputs in records:
        if log.deps.get(out) == (mtime, inputs):
            continue
        ids = [ident(out)] + [ident(p) for p in inputs]
        size = 4 * (3 + len(inputs))
        chunks.append(struct.pack("<IiII", size | 0x80000000, ids[0], mtime & 0xFFFFFFFF, (mtime >> 32) & 0xFFFFFFFF)
                      + struct.pack(f"<{len(inputs)}i", *ids[1:]))
        log.deps[out] = (mtime, inputs)
    if not chunks:
        return
    flags = os.O_WRONLY | os.O_CLOEXEC | os.O_CREAT | (os.O_APPEND if chunks[0][:len(DEPS_HEADER)] != DEPS_HEADER
                                                       else os.O_TRUNC)
    fd = os.open(path, flags, 0o644)
    with open(fd, "wb") as f:
        f.write(b"".join(chunks))
