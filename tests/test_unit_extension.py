"""farmer/startup/extension.py: C extension modules loaded without their packages' Python code."""

from __future__ import annotations

import subprocess
import sys

import xxhash

from farmer.startup import extension


def test_xxhash_s_functions_are_its_extension_s():
    module = extension.xxhash()
    assert module.xxh3_128_hexdigest(b"farmer") == xxhash.xxh3_128_hexdigest(b"farmer")
    assert module.xxh3_128(b"farmer").hexdigest() == xxhash.xxh3_128(b"farmer").hexdigest()


def test_what_is_no_extension_module_is_not_loaded():
    assert extension.load("farmer", "no_such_module") is None
    assert extension.load("no_such_package_here", "x") is None
    code = ("import sys\n"
            "from farmer.startup import extension\n"
            "assert extension.load('json', 'decoder') is None  # a Python module\n"
            "assert 'json.decoder' not in sys.modules and 'json' not in sys.modules\n")
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr


def test_the_package_imported_afterwards_uses_the_loaded_extension():
    """Loaded alone first (as a build does), then the package, as an error path or a test
    imports it: one extension module, the package's names over it."""
    code = ("import sys\n"
            "from farmer.startup import extension\n"
            "alone = extension.xxhash()\n"
            "assert 'xxhash' not in sys.modules, sorted(sys.modules)\n"
            "import xxhash\n"
            "assert sys.modules['xxhash._xxhash'] is alone\n"
            "assert xxhash.xxh128_hexdigest(b'a') == alone.xxh3_128_hexdigest(b'a')\n")
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
