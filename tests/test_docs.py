"""The user's documentation (README.md, docs/*.md, CHANGELOG.md) stands on its own and says
what farmer does today: no pointer to files users do not have, none of the known stale
claims, no install command that fetches someone else's package, no dead link or anchor,
and a reference page that names every command, option, Farmfile key, environment variable
and last-build.json field farmer has."""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

import pytest
from conftest import REPO

PAGES = sorted([REPO / "README.md", REPO / "CHANGELOG.md", *(REPO / "docs").glob("*.md")])
REFERENCE = REPO / "docs" / "reference.md"

# Commands the code has that the reference does not describe yet, because their wording is
# not settled (CHANGELOG.md, Unreleased, names them). Remove a name once reference.md has it.
PENDING_COMMANDS: set[str] = set()


def _ids(paths):
    return [str(p.relative_to(REPO)) for p in paths]


def _prose(text: str) -> str:
    """The text without fenced code blocks (what links and headings are read from)."""
    out, fence = [], None
    for line in text.splitlines():
        stripped = line.lstrip()
        if fence is None and stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
            out.append("")
            continue
        if fence is not None:
            if stripped.startswith(fence):
                fence = None
            out.append("")
            continue
        out.append(line)
    return "\n".join(out)


# ------------------------------------------------------------------ stale claims --

STALE = [
    (re.compile(r"\bSPEC\b"), "a SPEC users do not have: point to docs/reference.md or a guide"),
    (re.compile(r"shared folder", re.I), "a shared folder users do not have"),
    (re.compile(r"\bissue[ -]?#?\d+", re.I), "an issue number: say what the issue was about"),
    (re.compile(r"no output cache( yet)?", re.I), "farmer has an output cache (docs/cache.md)"),
    (re.compile(r"has no effect"), "`cache` works: say what it does"),
    (re.compile(r"no effect in this version"), "`cache` works: say what it does"),
    (re.compile(r"`?cached`? is always 0"), "`cached` counts restores from the caches"),
    (re.compile(r"a few minutes on 2 cores"), "the test run's time, measured"),
    (re.compile(r"read with Python's `tomllib`"), "Farmfiles are read by toml-rs (TOML 1.0)"),
]


@pytest.mark.parametrize("page", PAGES, ids=_ids(PAGES))
def test_no_stale_claims(page):
    found = []
    for n, line in enumerate(page.read_text().splitlines(), 1):
        for pattern, why in STALE:
            if pattern.search(line):
                found.append(f"{page.name}:{n}: {why}: {line.strip()}")
    assert not found, "\n".join(found)


# The PyPI name `farmer` is an unrelated project: no command may install it. A sentence that
# warns against it ("never `pip install farmer`") is fine.
OLD_NAME = re.compile(r"""(?:pip|pipx|uv pip|uv tool) install\s+(?:-[-\w]+\s+)*['"]?farmer(?:\[|['"\s]|$)""")
OLD_EXTRA = re.compile(r"""['"]farmer\[""")


@pytest.mark.parametrize("page", PAGES, ids=_ids(PAGES))
def test_no_install_of_the_other_farmer(page):
    found = []
    lines = page.read_text().splitlines()
    for n, line in enumerate(lines, 1):
        for m in [*OLD_NAME.finditer(line), *OLD_EXTRA.finditer(line)]:
            before = (lines[n - 2] if n > 1 else "") + " " + line[:m.start()]  # the sentence may wrap
            if "never" not in before[-60:].lower():
                found.append(f"{page.name}:{n}: installs PyPI's `farmer`, an unrelated project "
                             f"(the distribution is farmer-build): {line.strip()}")
                break
    assert not found, "\n".join(found)


def test_the_distribution_name():
    text = (REPO / "pyproject.toml").read_text()
    assert re.search(r'^name = "farmer-build"$', text, re.M), "pyproject's [project] name"
    assert "farmer-build" in (REPO / "README.md").read_text()


def test_the_readme_starts_with_a_venv():
    """The README's first commands work on a stock Debian or Ubuntu Python (PEP 668): into a
    venv, never the system's pip; and it says which Python."""
    text = (REPO / "README.md").read_text()
    first_block = re.search(r"```sh\n(.*?)```", text, re.S)[1]
    lines = [l for l in first_block.splitlines() if l.strip()]
    assert lines[0].startswith("python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && "
                               ".venv/bin/farmer build -f Farmfile.example"), lines
    assert lines[1].startswith(".venv/bin/python -m pytest -q"), lines
    assert "python3 -m pip install" not in text
    assert "3.11" in text[:text.index("```sh")], "the Python version, before the first command"


def _summary_pattern() -> re.Pattern:
    """The summary line as farmer writes it today, its numbers as patterns."""
    from farmer.report.lastbuild import Counts, summary_line

    line = summary_line(Counts(), 0.0, 0.0, "ok")
    pattern = re.escape(line).replace("0\\.00", r"\d+\.\d+").replace("0", r"\d+")
    return re.compile(pattern.replace(re.escape("farmer: "), r"farmer:(?: FAILED| INTERRUPTED)? ", 1))


@pytest.mark.parametrize("page", PAGES, ids=_ids(PAGES))
def test_pasted_summary_lines_are_todays(page):
    """A summary line pasted into a page (a console example) has today's fields, in today's
    order: an example from an older farmer is not what a reader sees."""
    today = _summary_pattern()
    stale = [f"{page.name}:{n}: {line.strip()}" for n, line in enumerate(page.read_text().splitlines(), 1)
             if re.search(r"farmer:(?: FAILED| INTERRUPTED)? ran \d+, up to date", line) and not today.search(line)]
    assert not stale, "summary lines of an older farmer (run the example again):\n" + "\n".join(stale)


# ------------------------------------------------------------------ links --

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _inline_code_removed(line: str) -> str:
    return re.sub(r"`[^`]*`", "", line)


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: its text as rendered (code spans keep their
    content, links their text, emphasis loses its markers), lower-cased, with every
    character but letters, digits, spaces, hyphens and underscores dropped, and spaces made
    hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = text.replace("`", "")
    text = re.sub(r"(\*\*|__|\*|(?<!\w)_(?!\w))", "", text)
    text = text.strip().lower()
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in " -_" or cat[0] in "LN":
            out.append("-" if ch == " " else ch)
    return "".join(out)


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    result = set()
    for line in _prose(page.read_text()).splitlines():
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = github_anchor(m[2])
        n = seen.get(base, 0)
        seen[base] = n + 1
        result.add(base if n == 0 else f"{base}-{n}")
    return result


def test_github_anchor():
    assert github_anchor("Absolute paths in CMake manifests: `--base-dir`") == \
        "absolute-paths-in-cmake-manifests---base-dir"
    assert github_anchor("The .farmer directory") == "the-farmer-directory"
    assert github_anchor("cpus, pool, timeout, cost, always, cache, remote") == \
        "cpus-pool-timeout-cost-always-cache-remote"
    assert github_anchor("[task.NAME]") == "taskname"
    assert github_anchor("A walk-through: Farmfile.example") == "a-walk-through-farmfileexample"
    assert github_anchor("What -n and plan cannot know") == "what--n-and-plan-cannot-know"


LINKED_PAGES = [p for p in PAGES if p.name != "CHANGELOG.md"] + [REPO / "CHANGELOG.md"]


@pytest.mark.parametrize("page", LINKED_PAGES, ids=_ids(LINKED_PAGES))
def test_relative_links_resolve(page):
    broken = []
    for n, line in enumerate(_prose(page.read_text()).splitlines(), 1):
        for m in LINK.finditer(_inline_code_removed(line)):
            target = m[1]
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.name}:{n}: {target}: no such file")
                continue
            if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{page.name}:{n}: {target}: no heading with anchor #{anchor} in "
                              f"{dest.relative_to(REPO)}")
    assert not broken, "\n".join(broken)


def test_every_page_is_linked_from_the_index():
    index = (REPO / "docs" / "README.md").read_text()
    unlinked = [p.name for p in sorted((REPO / "docs").glob("*.md"))
                if p.name != "README.md" and f"]({p.name})" not in index]
    assert not unlinked, f"docs/README.md does not link {unlinked}"
    readme = (REPO / "README.md").read_text()
    assert "](docs/reference.md)" in readme


# ------------------------------------------------------------------ the reference page --

def _walk(command, path):
    import click

    yield path, command
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _walk(sub, path + [name])


def test_reference_names_every_command_and_option():
    from farmer.cli.app import cli

    text = REFERENCE.read_text()
    headings = [l for l in text.splitlines() if l.startswith("#")]
    missing = []
    for path, command in _walk(cli, ["farmer"]):
        if len(path) == 2 and path[1] not in PENDING_COMMANDS:
            if not any(f"farmer {path[1]}" in h for h in headings):
                missing.append(f"a heading for {' '.join(path)}")
        if len(path) > 1 and path[1] in PENDING_COMMANDS:
            continue
        for param in command.params:
            for opt in [*param.opts, *param.secondary_opts]:
                if opt.startswith("-") and not re.search(re.escape(f"`{opt}") + r"[`\s=/]", text):
                    missing.append(f"{' '.join(path)} {opt}")
    assert not missing, "docs/reference.md does not name: " + ", ".join(missing)


def test_reference_names_every_farmfile_key():
    from farmer.manifest import farmfile

    text = REFERENCE.read_text()
    missing = [f"[{t}]" for t in farmfile.TOP_KEYS if f"[{t}" not in text]
    for table, keys in (("task", farmfile.TASK_KEYS), ("world", farmfile.WORLD_KEYS),
                        ("cache", farmfile.CACHE_KEYS), ("remote", farmfile.REMOTE_KEYS),
                        ("farmer", farmfile.FARMER_KEYS)):
        missing += [f"{table}.{k}" for k in keys if f"| `{k}` |" not in text]
    assert not missing, "docs/reference.md has no table row for: " + ", ".join(sorted(missing))


def test_reference_names_every_environment_variable():
    names = set()
    for source in (REPO / "farmer").rglob("*.py"):
        if "protos" in source.parts:
            continue
        names |= set(re.findall(r"""["'](_?FARMER_[A-Z_]+)["']""", source.read_text()))
    names.discard("FARMER_KEY")  # a variable of remote Actions (docs/remote.md), not read by farmer
    text = REFERENCE.read_text()
    missing = sorted(n for n in names if f"`{n}`" not in text)
    assert not missing, "docs/reference.md's environment variables lack: " + ", ".join(missing)


def test_reference_names_every_last_build_field(project):
    project.write("Farmfile", """
        [task.a]
        outputs = ["a.txt"]
        cmd = "echo a > a.txt"
    """)
    assert project.build().returncode == 0
    data = json.loads(project.path(".farmer/last-build.json").read_text())
    text = REFERENCE.read_text()
    section = text[text.index("## last-build.json"):]
    fields = set(data) | {k for t in data["tasks"] for k in t}
    missing = sorted(f for f in fields if f"`{f}`" not in section)
    assert not missing, "docs/reference.md's last-build.json lacks: " + ", ".join(missing)
