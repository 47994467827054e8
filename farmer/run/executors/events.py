"""The build's one event loop: descriptors to read, each with what to do when it is ready.

What `selectors.EpollSelector` does for a build, for reading only. `selectors` is costly to
import (its namedtuple, `math`, `collections.abc`), and its register, unregister and select
cost more than epoll's own, every run: each run's pidfd is registered and unregistered (see
bench/results/issue17-passes.md#clean-builds-the-first-command-the-1k-clean-build-the-meson-series,
442894c). The interface is the part of selectors' that the executors use (register, unregister,
select, close; keys with `fd` and `data`), so a world keeper's selector and this loop take each
other's descriptors. Where there is no epoll: selectors'.
"""

from __future__ import annotations

import select

READ = 1  # selectors.EVENT_READ


class Key:
    __slots__ = ("fd", "data")

    def __init__(self, fd: int, data: object) -> None:
        self.fd, self.data = fd, data


class EventLoop:
    __slots__ = ("_epoll", "_keys")

    def __init__(self) -> None:
        self._epoll = select.epoll()  # close-on-exec
        self._keys: dict[int, Key] = {}

    def register(self, fd: int, events: int, data: object = None) -> Key:
        if fd in self._keys:
            raise KeyError(f"{fd} is already registered")
        self._epoll.register(fd, select.EPOLLIN)
        key = self._keys[fd] = Key(fd, data)
        return key

    def unregister(self, fd: int) -> Key:
        key = self._keys.pop(fd)
        try:
            self._epoll.unregister(fd)
        except OSError:  # closed already, as selectors allows
            pass
        return key

    def select(self, timeout: float | None = None) -> list[tuple[Key, int]]:
        """The keys whose descriptors are ready to read (or hung up), after at most
        `timeout` seconds (None: until one is)."""
        if timeout is None:
            timeout = -1
        elif timeout <= 0:
            timeout = 0
        else:  # rounded up to epoll's milliseconds, as selectors does: no busy loop
            timeout = -(-timeout * 1000 // 1) / 1000
        keys = self._keys
        return [(keys[fd], READ) for fd, _ in self._epoll.poll(timeout, max(len(keys), 1)) if fd in keys]

    def close(self) -> None:
        self._epoll.close()
        self._keys.clear()


def event_loop():
    """An EventLoop, or selectors' DefaultSelector where there is no epoll."""
    if hasattr(select, "epoll"):
        return EventLoop()
    import selectors

    return selectors.DefaultSelector()
