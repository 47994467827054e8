"""What goes wrong with the local cache: the cache as a whole unusable (the build goes on
without it), or one file or run not stored."""


class CacheError(Exception):
    """The cache as a whole cannot be used (unwritable, locked, not a cache): the build goes
    on without it."""


class CacheFull(CacheError):
    """No room left for a blob (ENOSPC, EDQUOT, EFBIG): nothing more is stored this build."""


class Changed(Exception):
    """A file changed between being digested and being copied into the cache."""


class Unstorable(Exception):
    """A file of a run that the cache does not keep as it is (a symbolic link leading out of
    the project root, which a build refuses as an output): the run is not stored."""
