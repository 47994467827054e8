"""farmer's own folders (`.farmer/`, `logs/`) and files in them: made 0700 whatever the
umask, never reached through a symlink. Another user who could write into them could plant
`logs/ID.log -> victim`, and farmer would overwrite the victim with a command's output; a
symlinked `.farmer` would send state and logs out of the root."""

from __future__ import annotations

import errno
import os
import stat

from farmer.errors import UsageError

NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


def make_dir(path: str) -> bool:
    """`path` as a folder only its owner can enter; one made with other permissions by an
    older farmer is narrowed. A symlink or a non-folder there is an error. True when the
    folder was made now."""
    try:
        os.mkdir(path, 0o700)  # the umask only takes bits away: 0700 under any umask
        return True
    except FileExistsError:
        pass
    except FileNotFoundError:
        make_dir(os.path.dirname(path))
        return make_dir(path)
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise UsageError(f"{path} is a symlink; farmer keeps its state only in a real folder: "
                         "remove the link")
    if not stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{path} is not a folder; remove it (farmer keeps its state there)")
    if st.st_mode & 0o077 and st.st_uid == os.geteuid():
        os.chmod(path, 0o700)
    return False


# What `.farmer/.gitignore` holds: everything in the folder is farmer's state, none of it
# source, so `git status` never lists it (as pytest keeps its .pytest_cache out).
GITIGNORE = b"# Made by farmer: its state, none of it for version control.\n*\n"


def make_state_dir(path: str) -> None:
    """`.farmer/` as `make_dir` makes it, kept out of git when made now."""
    if make_dir(path):
        keep_out_of_git(path)


def keep_out_of_git(folder: str) -> None:
    """A `.gitignore` holding `*` in farmer's folder unless it has one: one open that fails
    when it is there already (a symlink there counts as there). Never an error: what git
    shows is not worth failing a build for."""
    try:
        fd = os.open(os.path.join(folder, ".gitignore"), os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, 0o644)
    except OSError:
        return
    try:
        os.write(fd, GITIGNORE)
    except OSError:
        pass
    finally:
        os.close(fd)


def unlink_link(path: str) -> None:
    """Remove a symlink at `path` (where farmer is about to write its own file); anything
    else there is left for the writer to replace."""
    try:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            os.unlink(path)
    except FileNotFoundError:
        pass


def open_file(path: str, flags: int, mode: int = 0o600) -> int:
    """os.open without following a symlink at `path` (one found there is removed first)."""
    try:
        return os.open(path, flags | NOFOLLOW, mode)
    except OSError as e:
        if e.errno != errno.ELOOP:  # a symlink
            raise
    unlink_link(path)
    return os.open(path, flags | NOFOLLOW, mode)
