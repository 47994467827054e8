"""The wire format between farmer and its world processes (standard library only: the
driver loads this file by path, without the farmer package).

Every message is one frame: a 3-byte magic, a version byte, a 4-byte big-endian length and
that many bytes of a UTF-8 JSON object whose "t" names the message type. Frames written to a
FIFO are small (one `os.write` below PIPE_BUF is atomic), and each FIFO has one writer, so
frames never interleave.

Anything else on a FIFO is an error, never a hang: a wrong magic byte is reported as soon as
it arrives, a length above `MAX_FRAME` at once, unknown types and missing or mistyped fields
when the frame is complete, and a frame cut short by the end of the stream at `eof()`.

farmer -> world (the world's `.in` FIFO):
  run    {job, args, log, env, mode}   mode "fork": in a forked child; "exec": in the world
                                       itself, which then exits (its last pending future);
                                       optional `reads`: where the task's driver writes what
                                       it read (reads.py)
  world  {job, name, base, setup, env, log}  fork a child world: it runs `setup` and then
                                       serves on the FIFOs `base`.in / `base`.out
  close  {}                            exit; nothing is running
world -> farmer (the world's `.out` FIFO):
  ready  {pid, version, threads}       setup done; `threads` alive after it; optional
                                       `reads`: [BEGAN_NS, [PATH...]], what the setup read and
                                       when it began (reads.py)
  setup-failed {traceback}             setup raised; the world exits
  forked {job, pid}                    a child started, already in its own process group
  done   {job, code, signal, wall, cpu, rss_kb}  a job ended (for a fork: as wait4 saw it)
  error  {message}                     the world could not read a command; it exits
"""

from __future__ import annotations

import json
import struct

MAGIC = b"\xf0FW"
VERSION = 1
HEADER = struct.Struct(">3sBI")
MAX_FRAME = 1 << 20  # far above any real message; a larger length means garbage

_STR, _INT, _NUM, _LIST, _DICT = str, int, (int, float), list, dict
_OPT_INT = (int, type(None))
_OPT_NUM = (int, float, type(None))
FIELDS: dict[str, dict[str, object]] = {
    "run": {"job": _INT, "args": _LIST, "log": _STR, "env": _DICT, "mode": _STR},
    "world": {"job": _INT, "name": _STR, "base": _STR, "setup": _LIST, "env": _DICT, "log": _STR},
    "close": {},
    "ready": {"pid": _INT, "version": _INT, "threads": _INT},
    "setup-failed": {"traceback": _STR},
    "forked": {"job": _INT, "pid": _INT},
    "done": {"job": _INT, "code": _OPT_INT, "signal": _OPT_INT, "wall": _NUM, "cpu": _OPT_NUM,
             "rss_kb": _OPT_INT},
    "error": {"message": _STR},
}


class ProtocolError(Exception):
    """Bytes on a FIFO that are not a valid frame of this protocol version."""


def encode(kind: str, **fields: object) -> bytes:
    if kind not in FIELDS:
        raise ValueError(f"unknown message type {kind!r}")
    payload = json.dumps({"t": kind, **fields}, separators=(",", ":")).encode()
    if len(payload) > MAX_FRAME:
        raise ValueError(f"{kind} message of {len(payload)} bytes is too large")
    return HEADER.pack(MAGIC, VERSION, len(payload)) + payload


def check(msg: object) -> dict:
    """`msg` as a message, or a ProtocolError saying what is wrong with it."""
    if not isinstance(msg, dict) or not isinstance(msg.get("t"), str):
        raise ProtocolError("frame is not a JSON object with a type")
    kind = msg["t"]
    fields = FIELDS.get(kind)
    if fields is None:
        raise ProtocolError(f"unknown message type {kind!r}")
    for name, kinds in fields.items():
        value = msg.get(name, _MISSING)
        if value is _MISSING:
            raise ProtocolError(f"{kind} message without {name!r}")
        if not isinstance(value, kinds) or isinstance(value, bool):  # type: ignore[arg-type]
            raise ProtocolError(f"{kind} message: {name!r} has the wrong type")
    return msg


_MISSING = object()


class Decoder:
    """Frames from a byte stream that arrives in arbitrary pieces."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def feed(self, data: bytes) -> list[dict]:
        buf = self.buf
        buf += data
        out = []
        while True:
            have = min(len(buf), len(MAGIC))
            if buf[:have] != MAGIC[:have]:
                raise ProtocolError(f"not a farmer world frame: {bytes(buf[:24])!r}")
            if len(buf) < HEADER.size:
                return out
            _, version, length = HEADER.unpack_from(buf)
            if version != VERSION:
                raise ProtocolError(f"protocol version {version}, expected {VERSION}")
            if length > MAX_FRAME:
                raise ProtocolError(f"frame length {length} is above the limit of {MAX_FRAME}")
            end = HEADER.size + length
            if len(buf) < end:
                return out
            payload = bytes(buf[HEADER.size:end])
            del buf[:end]
            try:
                msg = json.loads(payload.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                raise ProtocolError(f"frame payload is not JSON: {payload[:40]!r}") from None
            out.append(check(msg))

    def eof(self) -> None:
        """The stream ended: a partial frame left over is an error."""
        if self.buf:
            raise ProtocolError(f"stream ended inside a frame ({len(self.buf)} bytes left)")
