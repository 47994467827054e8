"""Where early cutoff applies in a build.ninja: which outputs count by their mtime as well as
their content.

ninja reruns the consumers of an edge that ran, unless the edge has `restat = 1` and left
its outputs' mtimes unchanged. farmer judges by content, which is right for an output that
is all the edge made, and wrong for a stamp: an empty file (`touch`, `cmake -E touch`) or a
marker that stands for outputs the manifest does not declare. So an output's digest covers
its mtime too (ninja's rule) unless the output is a real product:

- an empty output is a stamp, with or without `restat` (an ExternalProject step, a GN
  `stamp`): its mtime always counts;
- a non-empty output of a `restat = 1` edge counts by content (a generator that rewrote
  its files with the same bytes stops the build there: CMake's and Meson's custom
  commands, GN's actions);
- a non-empty output of a compile (`deps = gcc`) counts by content, and so does any output
  whose first bytes say it is an object, an archive or a program (ELF, `ar`, Mach-O,
  PE, LLVM bitcode, WebAssembly): links and archives. A header comment that leaves every
  object byte-identical relinks nothing;
- any other output (a `cp`, a script's text, a marker with content) counts by mtime too.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from farmer.graph.graph import Graph

# The first bytes of what compilers, linkers and archivers write.
_PRODUCT_MAGIC = (
    b"\x7fELF",  # objects, shared libraries, programs (Linux, BSD)
    b"!<arch>\n", b"!<thin>\n",  # static archives, thin ones
    b"\xfe\xed\xfa\xce", b"\xfe\xed\xfa\xcf", b"\xce\xfa\xed\xfe", b"\xcf\xfa\xed\xfe",  # Mach-O
    b"\xca\xfe\xba\xbe",  # Mach-O universal binaries
    b"MZ",  # PE programs and DLLs
    b"BC\xc0\xde",  # LLVM bitcode (-flto objects)
    b"\0asm",  # WebAssembly
)


def is_product(path: str) -> bool:
    """Whether the file's first bytes are an object's, an archive's or a program's."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        head = os.read(fd, 8)
    except OSError:
        return False
    finally:
        os.close(fd)
    return head.startswith(_PRODUCT_MAGIC)


def mtime_counts(graph: Graph) -> Callable[[str, int], bool] | None:
    """`Digests.timed` for a build.ninja's graph: whether the file at a path, of a size,
    counts by its mtime as well as its content (the module's docstring); None for a
    Farmfile, whose outputs are all declared (early cutoff holds everywhere)."""
    if not graph.paths_first:
        return None
    comps, producer = graph.computations, graph.producer

    def timed(path: str, size: int) -> bool:
        i = producer.get(path)
        if i is None:
            return False  # a source
        edge = comps[i].ninja
        if edge is None or comps[i].kind is None:
            return False
        if size == 0:
            return True
        if edge.restat or edge.remove_depfile:
            return False
        return not is_product(path)

    return timed
