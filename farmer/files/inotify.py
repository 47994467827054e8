"""What changed under a folder since last asked, from the kernel (inotify), for `farmer serve`.

One inotify descriptor watches every folder under the root (not following symlinks, not in
`.farmer/` nor `.git/`). The server reads it while idle and, before each build, until it is
empty: the kernel queues an event before the write, create, rename or delete that caused it
returns, so once the queue reads empty every change made before the client started is in
`dirty` (a path) or `dirty_dirs` (a folder made, moved or removed: everything below it).
Read here, through ctypes, and not through watchfiles: watchfiles drops the kernel's
queue-overflow event (it has no path) and hands events over from a thread of its own, with
no way to know that all of them have arrived.

`lost`: the watcher may have missed something (the kernel's queue overflowed, a watched
folder was moved, a folder could not be watched): the caller checks everything and
`reset`s it. Changes the kernel does not report: writes through a memory mapping, writes
through another hard link of a file from outside the watched tree, files on network file
systems (`reliable` says whether the root's file system is one inotify sees whole).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF, IN_UNMOUNT, IN_Q_OVERFLOW, IN_IGNORED = 0x400, 0x800, 0x2000, 0x4000, 0x8000
IN_ONLYDIR, IN_DONT_FOLLOW, IN_EXCL_UNLINK, IN_ISDIR = 0x1000000, 0x2000000, 0x4000000, 0x40000000
_MASK = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
         | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK)
_HEAD = 16  # struct inotify_event: wd, mask, cookie, len; then len bytes of name
SKIP = (".farmer", ".git")
# Folders outside the tree watched, with those on the way to them, beyond which their files
# are checked at every build instead (the user's fs.inotify.max_user_watches is shared).
OUTSIDE_LIMIT = 4096
_MANY = 200_000  # paths remembered as changed, beyond which the watcher gives up and says `lost`
# File systems whose changes made elsewhere (another machine, the host of a VM) inotify does
# not see: on these the server checks every file.
_REMOTE = ("nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "virtiofs", "vboxsf", "afs", "ceph", "glusterfs",
           "lustre", "gpfs", "sshfs")


class Unavailable(OSError):
    """No inotify here (not Linux, no libc, out of instances)."""


def _libc():
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "inotify_init1"):
        raise Unavailable("no inotify in this C library")
    return libc, ctypes


class Watcher:
    """Every folder under `root`, watched; the paths (relative to `root`) that changed."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._libc, self._ctypes = _libc()
        self.fd = -1
        self.wds: dict[int, str] = {}  # watch descriptor -> folder, relative ("" for the root)
        self.watched: set[str] = set()
        # Folders outside the tree (`watch_outside`): watch descriptor -> the spellings it is
        # watched under, and -> the names in it a path to one of them goes through.
        self.outside: dict[int, list[str]] = {}
        self.passages: dict[int, set[str]] = {}
        self.outside_watched: set[str] = set()
        self.generation = 0  # bumped whenever `watched` changes
        self.dirty: set[str] = set()
        self.dirty_dirs: set[str] = set()
        self.lost = False
        self.fresh = True
        self.reliable = filesystem_seen_whole(root)
        self.reset()

    def fileno(self) -> int:
        return self.fd

    def reset(self) -> None:
        """A new descriptor and every folder watched anew; nothing dirty, nothing lost."""
        self.close()
        fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            raise Unavailable(self._ctypes.get_errno(), "inotify_init1 failed")
        self.fd = fd
        self.wds, self.watched = {}, set()
        self.outside, self.passages, self.outside_watched = {}, {}, set()
        self.dirty, self.dirty_dirs, self.lost = set(), set(), False
        # What changed before now is not known: until a build has checked every file, no
        # decision rests on the events alone (the caller clears it).
        self.fresh = True
        self.generation += 1
        self._add_tree("")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def clear(self) -> None:
        """What is dirty now has been checked."""
        self.dirty, self.dirty_dirs = set(), set()

    def _add_tree(self, rel: str) -> None:
        stack = [rel]
        while stack:
            folder = stack.pop()
            path = os.path.join(self.root, folder) if folder else self.root
            wd = self._libc.inotify_add_watch(self.fd, os.fsencode(path), _MASK)
            if wd < 0:
                if os.path.isdir(path):  # out of watches (fs.inotify.max_user_watches), say
                    self.lost = True
                continue
            self.wds[wd] = folder
            self.watched.add(folder)
            self.generation += 1
            try:
                with os.scandir(path) as entries:
                    for e in entries:
                        if e.is_dir(follow_symlinks=False) and not (folder == "" and e.name in SKIP):
                            stack.append(os.path.join(folder, e.name) if folder else e.name)
            except OSError:
                pass  # gone or unreadable: its parent's events say so

    def drain(self) -> None:
        """Read every event queued now."""
        while self.fd >= 0:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return
            except InterruptedError:
                continue
            at = 0
            while at + _HEAD <= len(data):
                wd = int.from_bytes(data[at:at + 4], "little", signed=True)
                mask = int.from_bytes(data[at + 4:at + 8], "little")
                size = int.from_bytes(data[at + 12:at + 16], "little")
                name = data[at + _HEAD:at + _HEAD + size].rstrip(b"\0")
                at += _HEAD + size
                self._event(wd, mask, os.fsdecode(name))

    def watch_outside(self, folders: Iterable[str], limit: int = OUTSIDE_LIMIT) -> set[str]:
        """Watch these folders outside the tree too (as their paths are spelled, relative
        to the root or absolute), each with every folder a path to it goes through (a
        rename or a symlink replaced on the way is a change of its files): the changes of
        their files come as those of the tree's, under the same spellings. Those of
        `folders` watched now (some may have been already); the others (missing, not
        watchable, or past `limit` watches) are left out."""
        done: set[str] = set()
        for folder in folders:
            if folder in self.outside_watched:
                done.add(folder)
                continue
            if len(self.outside) + len(self.passages) >= limit:
                continue
            path = os.path.join(self.root, folder)
            steps = passage(path)
            if steps is None:
                continue
            wd = self._libc.inotify_add_watch(self.fd, os.fsencode(path), _MASK)
            if wd < 0:
                continue
            self.outside.setdefault(wd, []).append(folder)
            for parent, name in steps:
                pwd = self._libc.inotify_add_watch(self.fd, os.fsencode(parent), _MASK)
                if pwd < 0:
                    self.lost = True  # its way is not watched whole: start again, all checked
                    break
                self.passages.setdefault(pwd, set()).add(name)
            self.outside_watched.add(folder)
            done.add(folder)
        return done

    def _outside_event(self, wd: int, mask: int, name: str) -> None:
        if mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT):
            self.lost = True  # a folder outside gone, moved or unmounted: watched anew
            return
        for folder in self.outside.get(wd, ()):
            self.dirty.add(os.path.join(folder, name))
        if len(self.dirty) > _MANY:
            self.lost = True
            self.dirty = set()
        if name in self.passages.get(wd, ()):
            self.lost = True  # a folder on the way to those watched moved, removed or replaced

    def _event(self, wd: int, mask: int, name: str) -> None:
        if mask & IN_Q_OVERFLOW:
            self.lost = True
            return
        if wd in self.outside or wd in self.passages:
            self._outside_event(wd, mask, name)
        folder = self.wds.get(wd)
        if folder is None:
            return
        if mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT):
            self.dirty_dirs.add(folder)
            if mask & (IN_MOVE_SELF | IN_UNMOUNT) or folder == "":
                self.lost = True  # its watch now names another place, or none
            if mask & IN_IGNORED:
                del self.wds[wd]
                self.watched.discard(folder)
                self.generation += 1
            return
        if folder == "" and name in SKIP:
            return
        rel = os.path.join(folder, name) if folder else name
        if mask & IN_ISDIR:
            if mask & (IN_MOVED_FROM | IN_MOVED_TO):
                self.lost = True  # the watches under it name the old place
            self.dirty_dirs.add(rel)
            if mask & (IN_CREATE | IN_MOVED_TO):
                self._add_tree(rel)
            return
        self.dirty.add(rel)
        if len(self.dirty) > _MANY:  # a flood of files (a checkout, a generator): check them all
            self.lost = True
            self.dirty = set()


def passage(path: str) -> list[tuple[str, str]] | None:
    """The folders a path to the folder `path` goes through, and the name it takes in each
    (symlinks followed as the kernel follows them, their own folders included); None when
    the path does not lead to a folder, or loops."""
    steps: list[tuple[str, str]] = []
    left = [p for p in path.split("/") if p][::-1]
    at, links = "/", 0
    while left:
        name = left.pop()
        if name == ".":
            continue
        if name == "..":
            at = os.path.dirname(at)
            continue
        steps.append((at, name))
        here = os.path.join(at, name)
        try:
            target = os.readlink(here)
        except OSError:
            if not os.path.isdir(here):
                return None
            at = here
            continue
        links += 1
        if links > 40:
            return None
        if target.startswith("/"):
            at = "/"
        left += [p for p in target.split("/") if p][::-1]
    return steps


def filesystem_seen_whole(root: str) -> bool:
    """Whether `root` is on a local file system, whose every change inotify reports (not a
    network or host-shared one, changed from elsewhere)."""
    best, kind = "", ""
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                fields = line.split()
                if len(fields) >= 3:
                    point = fields[1].replace("\\040", " ")
                    if (root == point or root.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
                        best, kind = point, fields[2]
    except OSError:
        return False
    return kind not in _REMOTE and not kind.startswith("fuse")
