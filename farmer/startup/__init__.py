"""What keeps start-up cheap, in one place; the rules are docs/performance.md#start-up-rules.

Every `farmer` command pays for the modules it imports, and a no-op build is mostly Python
starting, so the modules on a build's way import no standard module whose cost is out of
proportion to what they take from it. The devices that make this possible live here:

- `cheap.py`: stand-ins for `signal`, `heapq`, `array` and `sqlite3`, and the collector
  paused while a block makes many objects;
- `extension.py`: C extension modules (toml_rs's, xxhash's) loaded without their packages'
  Python code, found through the import machinery every interpreter has loaded
  (`_frozen_importlib_external`) rather than the `importlib` package;
- `jsontext.py`: last-build.json's small entries written without `import json`.

One device cannot live here, since it is a line in each module that uses it: a module
whose annotations name types from `typing`, `collections.abc` or another farmer module
imports them under `TYPE_CHECKING = False` / `if TYPE_CHECKING:`. The annotations stay
strings (`from __future__ import annotations`), a type checker reads the imports, and the
interpreter never runs them (`typing` itself imports `re`). The line needs no comment.
"""
