"""Unit tests for farmer/record/depfile.py: Makefile-style dependency files as `gcc -MD` writes
them (SPEC §1 `depfile`)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from farmer.record.depfile import DepfileError, parse


def test_single_rule():
    assert parse("build/a.o: src/a.c src/a.h\n") == ["src/a.c", "src/a.h"]


def test_backslash_continuations():
    text = "build/a.o: src/a.c \\\n  include/x.h \\\n  include/y.h\n"
    assert parse(text) == ["src/a.c", "include/x.h", "include/y.h"]


def test_continuation_without_space_before_backslash():
    assert parse("a.o: a.c\\\n b.h\n") == ["a.c", "b.h"]


def test_escaped_spaces():
    assert parse("a.o: my\\ file.c dir\\ with\\ spaces/h.h plain.h\n") == [
        "my file.c", "dir with spaces/h.h", "plain.h"]


def test_dollar_dollar():
    assert parse("a.o: cost$$.h a$$$$b.h\n") == ["cost$.h", "a$$b.h"]


def test_escaped_hash():
    assert parse("a.o: weird\\#name.h\n") == ["weird#name.h"]


def test_several_targets_before_colon():
    assert parse("a.o a.d: a.c a.h\n") == ["a.c", "a.h"]


def test_several_targets_with_continuation_in_targets():
    assert parse("a.o \\\n a.d: a.c\n") == ["a.c"]


def test_several_rules_and_mp_empty_rules():
    text = (
        "build/a.o: src/a.c include/x.h \\\n"
        " include/y.h\n"
        "\n"
        "include/x.h:\n"
        "\n"
        "include/y.h:\n"
    )
    assert parse(text) == ["src/a.c", "include/x.h", "include/y.h"]


def test_several_rules_deduplicated_in_first_order():
    assert parse("a.o: z.h a.c\nb.o: a.c b.c z.h\n") == ["z.h", "a.c", "b.c"]


def test_crlf_line_endings():
    text = "a.o: a.c \\\r\n  b.h\r\n\r\nb.h:\r\n"
    assert parse(text) == ["a.c", "b.h"]


def test_tabs_as_separators():
    assert parse("a.o:\ta.c\tb.h\n") == ["a.c", "b.h"]


def test_no_trailing_newline():
    assert parse("a.o: a.c b.h") == ["a.c", "b.h"]


@pytest.mark.parametrize("text", ["", "\n", "\n\n  \n", "a.o:\n", "a.o:"])
def test_empty_or_no_prerequisites(text):
    assert parse(text) == []


def test_rule_without_target_is_an_error():
    with pytest.raises(DepfileError):
        parse(": a.c\n")


def _gcc_depfile(tmp_path, *flags: str) -> list[str]:
    (tmp_path / "inc dir").mkdir()
    (tmp_path / "inc dir" / "sp ace.h").write_text("#define SPACE 1\n")
    (tmp_path / "do$llar.h").write_text("#define DOLLAR 1\n")
    (tmp_path / "plain.h").write_text('#include "do$llar.h"\n')
    (tmp_path / "main.c").write_text(
        '#include "plain.h"\n#include "inc dir/sp ace.h"\nint main(void) { return SPACE + DOLLAR; }\n')
    subprocess.run(["gcc", *flags, "-MD", "-MF", "main.d", "-c", "main.c", "-o", "main.o"],
                   cwd=tmp_path, check=True, capture_output=True)
    # gcc also lists implicit system headers (/usr/include/stdc-predef.h): keep ours.
    return [d for d in parse((tmp_path / "main.d").read_text()) if not d.startswith("/")]


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
def test_real_gcc_md(tmp_path):
    deps = _gcc_depfile(tmp_path)
    assert deps[0] == "main.c"
    assert set(deps) == {"main.c", "plain.h", "do$llar.h", "inc dir/sp ace.h"}
    assert all((tmp_path / d).is_file() for d in deps)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
def test_real_gcc_md_mp(tmp_path):
    deps = _gcc_depfile(tmp_path, "-MP")
    assert set(deps) == {"main.c", "plain.h", "do$llar.h", "inc dir/sp ace.h"}
    assert len(deps) == len(set(deps))


@pytest.mark.parametrize("text", [
    "build/a.o: src/a.c \\\n /usr/include/stdio.h \\\n /usr/include/x86_64-linux-gnu/bits/types.h\n",
    "a.o a.d: a.c\\\r\n b.h\r\n\r\nb.h:\n",  # CRLF, an -MP rule
    "a.o:a.c b:c.h\td.h : e.h\n\nf.o: \\\n\n",  # colons inside words, a lone colon, tabs
    "a.o: x.h", "", "\n\n", ":", "a.o: ü.h ñ/😀.h\n",
    # what gcc writes for Meson's sources, under `test cases/`
    "p.o: \\\n ../test\\ cases/common/2\\ cpp/cpp.C /usr/include/stdio.h \\\n /usr/x.h\n",
    "a\\ :\\ b.h a:\\ b \\ \\ \\\n\\ x\\ ", "a.o: my\\ file.c\r\n\r\nmy\\ file.c:\r\n",
])
def test_plain_texts_read_by_string_methods_as_by_the_character_loop(text, monkeypatch):
    """What gcc writes (line continuations, escaped spaces) is split by string methods; the
    words must be the character loop's, which reads every other text."""
    from farmer.record import depfile
    fast = depfile._plain_words(text)
    assert fast is not None
    monkeypatch.setattr(depfile, "_plain_words", lambda text: None)
    assert fast == depfile._words(text)


def test_string_methods_agree_with_the_character_loop_on_generated_texts(monkeypatch):
    """Texts made of the characters that matter to the grammar: wherever the string
    methods take a text, their words are the character loop's."""
    import random

    from farmer.record import depfile
    rng = random.Random(17)
    pieces = ["a", "b.h", " ", "  ", "\t", ":", "\n", "\r\n", "\\", "\\ ", "\\\n", "\\\r\n", "#", "$",
              "\0", "\\:", "\\\\ "]
    texts = ["".join(rng.choices(pieces, k=rng.randint(0, 12))) for _ in range(20000)]
    fast = [depfile._plain_words(t) for t in texts]
    assert sum(f is not None for f in fast) > 5000  # the generator reaches the fast path
    monkeypatch.setattr(depfile, "_plain_words", lambda text: None)
    for text, words in zip(texts, fast):
        if words is not None:
            assert words == depfile._words(text), repr(text)
