"""C extension modules loaded without their packages' Python code.

A package's `__init__` can cost a build more than the extension module it wraps (see
docs/performance.md#start-up-rules): toml_rs's wrappers import `typing` and `pathlib` for their
annotations; xxhash's give the extension's functions more names, with a version module, in
every build, a no-op's too. `load` finds the extension as `import package.name` would, through
the frozen import machinery every interpreter has loaded (not the `importlib` package, which
imports `warnings`), and registers it in sys.modules: a later `import package` (an error
path's, a test's) uses it, since a PyO3 module cannot be initialised twice in one process.
"""

from __future__ import annotations

import sys


def load(package: str, name: str) -> object | None:
    """The extension module `package.name`; None where the package is no plain directory
    on sys.path, the module no extension, or loading it fails (`import package` then says
    why, or the caller does without)."""
    full = f"{package}.{name}"
    module = sys.modules.get(full)
    if module is not None:
        return module
    machinery = sys.modules.get("_frozen_importlib_external")
    if machinery is None:
        import importlib.machinery as machinery
    ExtensionFileLoader, PathFinder = machinery.ExtensionFileLoader, machinery.PathFinder

    found = PathFinder.find_spec(package)
    if found is None or not found.submodule_search_locations:
        return None
    spec = PathFinder.find_spec(full, found.submodule_search_locations)
    if spec is None or not isinstance(spec.loader, ExtensionFileLoader):
        return None
    try:
        module = spec.loader.create_module(spec)
    except ImportError:  # a broken install
        return None
    sys.modules[full] = module
    spec.loader.exec_module(module)
    return module


def xxhash():
    """xxhash's functions (`xxh3_128`, `xxh3_128_hexdigest`): its extension module, or the
    package where the extension cannot be had alone."""
    module = load("xxhash", "_xxhash")
    if module is None or not hasattr(module, "xxh3_128_hexdigest"):
        import xxhash as module
    return module
