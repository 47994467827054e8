"""The ninja manifest reader (farmer/ninja/): manifest texts in, farmer's graph out.

Grouped like a parser test suite: basic syntax, scoping, escapes and paths, phony and
duplicates, errors with line numbers, implicit/order-only/validations, include and
subninja, deps kinds, default. Where ninja itself is installed, a differential test checks
the commands farmer expands against `ninja -t commands`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from helpers import computation_of

from farmer.build import ninja
from farmer.errors import UsageError
from farmer.graph.graph import select
from farmer.plan.uptodate import action_fingerprint


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # load() changes into the manifest's directory; undone after
    return tmp_path


def write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text) if text[:1] == " " else text)
    return path


def load(root: Path, text: str, files: dict[str, str] | None = None):
    """Write the manifest (and other files) and read it."""
    for rel, content in (files or {}).items():
        write(root, rel, content)
    return ninja.load(write(root, "build.ninja", text))


def error(root: Path, text: str, files: dict[str, str] | None = None) -> str:
    with pytest.raises(UsageError) as e:
        load(root, text, files)
    message = str(e.value)
    assert "\n" not in message
    return message


CC = """\
rule cc
  command = gcc -c $in -o $out
  description = CC $out
"""


class TestBasicSyntax:
    def test_rule_and_build(self, root):
        spec, g = load(root, CC + "build a.o: cc a.c\n")
        c = computation_of(g, "a.o")
        assert (c.task, c.kind, c.inputs, c.outputs) == ("cc", "cmd", ["a.c"], ["a.o"])
        assert c.action == "gcc -c a.c -o a.o"
        assert c.argv() == ["/bin/sh", "-c", "gcc -c a.c -o a.o"]
        assert c.ninja.description == "CC a.o"
        assert spec.root == os.fspath(root) and spec.default is None and spec.worlds == {}
        assert c.fingerprint == action_fingerprint(c)

    def test_several_inputs_and_outputs(self, root):
        _, g = load(root, """\
            rule r
              command = tool $in > $out
            build x y: r a b c
            """)
        c = computation_of(g, "x")
        assert c.action == "tool a b c > x y"
        assert c.outputs == ["x", "y"] and g.producer["y"] == c.index

    def test_in_newline(self, root):
        _, g = load(root, "rule r\n  command = printf '%s' '$in_newline' > $out\nbuild o: r a b\n")
        assert computation_of(g, "o").action == "printf '%s' 'a\nb' > o"

    def test_comments_and_blank_lines(self, root):
        _, g = load(root, """\
            # a comment
              # an indented comment

            rule r
              # a comment inside the rule
              command = run $in # not a comment: part of the value
            build o: r i
            """)
        assert computation_of(g, "o").action == "run i # not a comment: part of the value"

    def test_continuation_lines(self, root):
        _, g = load(root, """\
            rule r
              command = cat $
                  $in > $out
            build o: $
                r $
                a b
            """)
        assert computation_of(g, "o").action == "cat a b > o"
        assert computation_of(g, "o").inputs == ["a", "b"]

    def test_crlf_line_endings(self, root):
        _, g = load(root, "rule r\r\n  command = cp $in $out\r\nbuild o: r i\r\n")
        assert computation_of(g, "o").action == "cp i o"

    def test_keyword_prefix_is_an_identifier(self, root):
        _, g = load(root, "builddir = out\nbuildx = 1\nrule r\n  command = echo $buildx $builddir\nbuild o: r\n")
        assert computation_of(g, "o").action == "echo 1 out"

    def test_value_keeps_trailing_spaces(self, root):
        _, g = load(root, "x = a  \nrule r\n  command = echo [$x]\nbuild o: r\n")
        assert computation_of(g, "o").action == "echo [a  ]"

    def test_pools(self, root):
        spec, g = load(root, """\
            pool link
              depth = 2
            pool free
              depth = 0
            rule r
              command = x
              pool = link
            build a: r
            build b: r
              pool = free
            build c: r
              pool = console
            build d: r
              pool =
            """)
        assert spec.pools == {"link": 2, "console": 1}
        assert [computation_of(g, x).pool for x in "abcd"] == ["link", None, "console", None]
        assert computation_of(g, "c").ninja.console and not computation_of(g, "a").ninja.console

    def test_restat_accepted_and_generator(self, root):
        _, g = load(root, """\
            rule gen
              command = ./configure
              generator = 1
              restat = 1
            rule r
              command = x
              restat = 1
            build build.ninja: gen configure
            build o: r
            """)
        gen = computation_of(g, "build.ninja")
        assert gen.ninja.generator and not gen.cache
        assert not computation_of(g, "o").ninja.generator
        changed = type(gen)(**{f: getattr(gen, f) for f in gen.FIELDS})
        changed.action = "./configure --other"
        assert action_fingerprint(changed) == action_fingerprint(gen)

    def test_rspfile(self, root):
        _, g = load(root, """\
            rule link
              command = ld @$out.rsp -o $out
              rspfile = $out.rsp
              rspfile_content = $in
            build app: link a.o b.o
            """)
        c = computation_of(g, "app")
        assert (c.ninja.rspfile, c.ninja.rspfile_content) == ("app.rsp", "a.o b.o")

    def test_required_version(self, root):
        load(root, "ninja_required_version = 1.5\n")
        load(root, "ninja_required_version = 1.11.1\n")
        assert error(root, "ninja_required_version = 1.12\n").startswith("build.ninja:1: ")

    def test_ids_and_tasks(self, root):
        _, g = load(root, CC + "build a.o: cc a.c\nbuild b.o: cc b.c\nbuild | only.h: cc x.c\n")
        assert g.by_task["cc"] == [0, 1, 2]
        assert computation_of(g, "only.h").outputs == ["only.h"]
        assert [g.computations[i].id for i in g.order] == ["a.o", "b.o", "only.h"]


class TestScoping:
    def test_rule_variables_are_evaluated_late(self, root):
        _, g = load(root, """\
            x = 1
            rule r
              command = echo $x $y
            build o: r
              y = $x
            x = 2
            """)
        assert computation_of(g, "o").action == "echo 2 1"

    def test_build_binding_shadows_rule_shadows_file(self, root):
        _, g = load(root, """\
            flags = -file
            rule r
              command = cc $flags $extra
              description = $flags
            build a: r
              flags = -build
            build b: r
              other = 1
            """)
        assert computation_of(g, "a").action == "cc -build " and computation_of(g, "a").ninja.description == "-build"
        assert computation_of(g, "b").action == "cc -file "

    def test_build_bindings_are_evaluated_in_the_file_scope(self, root):
        _, g = load(root, """\
            rule r
              command = echo v=$v w=$w i=$i
            build o: r x
              v = 1
              w = $v
              i = $in
            """)
        assert computation_of(g, "o").action == "echo v=1 w= i="

    def test_paths_see_the_build_bindings(self, root):
        _, g = load(root, "rule r\n  command = x\nbuild $dir/o: r $dir/i\n  dir = sub\n")
        assert computation_of(g, "sub/o").inputs == ["sub/i"]

    def test_edge_without_bindings_sees_file_variables_first(self, root):
        # ninja 1.11 looks an edge without bindings up in the file scope before the rule.
        _, g = load(root, """\
            description = file-level
            rule r
              command = x
              description = rule-level
            build a: r
            build b: r
              z = 1
            """)
        assert computation_of(g, "a").ninja.description == "file-level"
        assert computation_of(g, "b").ninja.description == "rule-level"

    def test_rule_variable_may_use_another(self, root):
        _, g = load(root, """\
            rule r
              command = gcc -MF $depfile -c $in -o $out
              depfile = $out.d
            build a.o: r a.c
            """)
        assert computation_of(g, "a.o").action == "gcc -MF a.o.d -c a.c -o a.o"
        assert computation_of(g, "a.o").depfile == "a.o.d"

    def test_cycle_in_rule_variables(self, root):
        message = error(root, """\
            rule r
              command = $description
              description = $command
            build o: r
            """)
        assert message == "build.ninja:4: cycle in rule variables: command -> description -> command"

    def test_subninja_has_its_own_scope(self, root):
        spec, g = load(root, """\
            x = top
            rule r
              command = echo $x $y
            subninja sub/sub.ninja
            build top: r
            """, files={"sub/sub.ninja": """\
            x = child
            y = only-here
            rule s
              command = child $x
            build sub_o: r
            build sub_s: s
            """})
        assert computation_of(g, "sub_o").action == "echo child only-here"
        assert computation_of(g, "sub_s").action == "child child"
        assert computation_of(g, "top").action == "echo top "

    def test_subninja_rules_stay_in_it(self, root):
        message = error(root, "subninja s.ninja\nbuild o: s\n", files={"s.ninja": "rule s\n  command = x\n"})
        assert message == "build.ninja:2: unknown build rule 's'"

    def test_include_shares_the_scope(self, root):
        _, g = load(root, """\
            x = top
            include vars.ninja
            rule r
              command = echo $x
            build o: r
            """, files={"vars.ninja": "x = included\n"})
        assert computation_of(g, "o").action == "echo included"

    def test_subninja_may_redefine_a_parent_rule_name(self, root):
        _, g = load(root, "rule r\n  command = parent\nsubninja s.ninja\nbuild p: r\n",
                    files={"s.ninja": "rule r\n  command = child\nbuild c: r\n"})
        assert computation_of(g, "p").action == "parent" and computation_of(g, "c").action == "child"


class TestEscapesAndPaths:
    def test_dollar_escapes(self, root):
        _, g = load(root, """\
            rule r
              command = echo $$HOME a$ b c$:d ${x.y}
            x.y = dotted
            build out$ file$:1: r in$ file
            """)
        c = computation_of(g, "out file:1")
        assert c.action == "echo $HOME a b c:d dotted"
        assert c.inputs == ["in file"]

    def test_simple_varname_stops_at_a_dot(self, root):
        _, g = load(root, "ext = o\nrule r\n  command = x\nbuild a.$ext: r\n")
        assert "a.o" in g.by_id
        _, g = load(root, "a = A\nrule r\n  command = echo $a.b\nbuild o: r\n")
        assert computation_of(g, "o").action == "echo A.b"

    def test_in_and_out_are_shell_quoted(self, root):
        _, g = load(root, """\
            rule r
              command = cat $in > $out
              depfile = $out.d
            build it's$ out: r a$ b c,d ok+-_./x
            """)
        c = computation_of(g, "it's out")
        assert c.action == "cat 'a b' 'c,d' ok+-_./x > 'it'\\''s out'"
        assert c.depfile == "it's out.d"  # depfile, rspfile: not quoted

    def test_paths_are_canonical(self, root):
        _, g = load(root, """\
            rule r
              command = echo $in
            build ./out//a/../b: r ./x .//y z/./w ../up/./v //abs/./p dir/ a/b/../../c
            """)
        c = computation_of(g, "out/b")
        assert c.inputs == ["x", "y", "z/w", "../up/v", "/abs/p", "dir", "c"]
        assert c.action == "echo x y z/w ../up/v /abs/p dir c"

    def test_equal_paths_after_canonicalising_are_one_node(self, root):
        _, g = load(root, "rule r\n  command = x\nbuild gen/a.h: r\nbuild o: r ./gen//a.h\n")
        assert computation_of(g, "o").producers == [computation_of(g, "gen/a.h").index]

    def test_colon_and_pipe_inside_values(self, root):
        _, g = load(root, "rule r\n  command = a | b : c || d\nbuild o: r\n")
        assert computation_of(g, "o").action == "a | b : c || d"

    def test_bad_dollar_escape(self, root):
        message = error(root, "rule r\n  command = echo $!\n")
        assert message == "build.ninja:2: bad $-escape (literal $ must be written as $$)"

    def test_non_ascii_text_around_escapes_and_separators(self, root):
        # The lexer finds separators in a byte a character copy of the text: characters
        # outside ASCII (one, two or four bytes in UTF-8) must not shift what follows them.
        _, g = load(root, "# generated — do not edit\nrule r\n  command = echo $v — $in > $out\n"
                          "build ü$ 1.o | é😀.h: r é😀.c naïve$:x || ö\n  v = —$\n    ½$$\n")
        c = computation_of(g, "ü 1.o")
        assert c.inputs == ["é😀.c", "naïve:x"]  # (not the order-only ö)
        assert c.action == "echo —½$ — 'é😀.c' 'naïve:x' > 'ü 1.o'"
        assert c.outputs == ["ü 1.o", "é😀.h"]

    def test_a_comment_after_an_indent_between_statements(self, root):
        _, g = load(root, "x = 1\n   # indented comment\ny = $x\nrule r\n  command = echo $y\nbuild o: r\n")
        assert computation_of(g, "o").action == "echo 1"

    def test_unknown_variable_is_empty(self, root):
        _, g = load(root, "rule r\n  command = echo [$nothing]\nbuild o: r\n")
        assert computation_of(g, "o").action == "echo []"


class TestPhonyAndDuplicates:
    def test_phony_is_an_alias(self, root):
        _, g = load(root, CC + "build a.o: cc a.c\nbuild b.o: cc b.c\nbuild all: phony a.o b.o\n",
                    files={"a.c": "", "b.c": ""})
        alias = computation_of(g, "all")
        assert (alias.kind, alias.action, alias.outputs, alias.task) == (None, None, [], "phony")
        assert alias.inputs == ["a.o", "b.o"]
        assert sorted(alias.producers) == [computation_of(g, "a.o").index, computation_of(g, "b.o").index]
        assert select(g, ["all"]) == [0, 1, 2]

    def test_consumer_of_a_phony_depends_on_what_it_stands_for(self, root):
        _, g = load(root, """\
            rule r
              command = x
            build gen.h: r gen.in
            build headers: phony gen.h other.h
            build more: phony headers
            build o: r o.c | more
            """, files={"gen.in": "", "other.h": ""})
        o = computation_of(g, "o")
        assert o.inputs == ["o.c", "gen.h", "other.h"]
        assert computation_of(g, "gen.h").index in o.producers

    def test_phony_without_inputs_stands_for_its_file(self, root):
        _, g = load(root, """\
            rule r
              command = x
            build CMakeLists.txt: phony
            build FORCE: phony
            build o: r | CMakeLists.txt FORCE
            """, files={"CMakeLists.txt": ""})
        assert computation_of(g, "o").inputs == ["CMakeLists.txt", "FORCE"]
        assert computation_of(g, "o").missing == []  # produced by the phony, even though FORCE is no file
        assert computation_of(g, "o").always  # FORCE is no file: ninja runs its consumers every time
        _, g = load(root, "rule r\n  command = x\nbuild CMakeLists.txt: phony\nbuild o: r | CMakeLists.txt\n")
        assert not computation_of(g, "o").always

    def test_phony_naming_itself_is_dropped_with_a_warning(self, root, capsys):
        _, g = load(root, "rule r\n  command = x\nbuild a: r\nbuild all: phony a all\n")
        assert computation_of(g, "all").inputs == ["a"]
        assert "build.ninja:4: phony target 'all' names itself as an input" in capsys.readouterr().err

    def test_two_edges_one_output(self, root):
        assert error(root, CC + "build a.o: cc a.c\nbuild a.o: cc b.c\n") == \
            "build.ninja:5: multiple rules generate a.o"
        assert error(root, CC + "build x | a.o: cc a.c\nbuild a.o: phony\n") == \
            "build.ninja:5: multiple rules generate a.o"

    def test_one_output_twice_in_an_edge(self, root):
        assert error(root, CC + "build a.o ./a.o: cc a.c\n") == "build.ninja:4: multiple rules generate a.o"

    def test_duplicate_rule_and_pool(self, root):
        assert error(root, CC + CC) == "build.ninja:4: duplicate rule 'cc'"
        assert error(root, "rule phony\n  command = x\n") == "build.ninja:1: duplicate rule 'phony'"
        assert error(root, "pool p\n  depth = 1\npool p\n  depth = 2\n") == "build.ninja:3: duplicate pool 'p'"

    def test_cycle(self, root):
        message = error(root, "rule r\n  command = x\nbuild a: r b\nbuild b: r a\n")
        assert "dependency cycle" in message and "a -> b" in message or "b -> a" in message

    def test_self_loop_of_a_command(self, root):
        assert "dependency cycle" in error(root, "rule r\n  command = x\nbuild a: r a\n")


class TestErrors:
    @pytest.mark.parametrize("text, expected", [
        ("build o: nope\n", "build.ninja:1: unknown build rule 'nope'"),
        ("rule r\n  command = x\nbuild o: r\n  pool = p\n", "build.ninja:3: unknown pool name 'p'"),
        ("rule r\n  description = x\n", "build.ninja:3: expected 'command =' line"),  # as ninja
        ("rule r\n  command = x\n  foo = 1\n", "build.ninja:3: unexpected variable 'foo'"),
        ("rule r\n\tcommand = x\n", "build.ninja:2: expected 'command =' line"),
        ("\tx = 1\n", "build.ninja:1: tabs are not allowed, use spaces"),
        ("rule r\n  command = x\n\n  description = y\n", "build.ninja:4: unexpected indent"),
        ("rule r\n  command = x\nbuild o: r a:b\n", "build.ninja:3: expected newline, got ':'"),
        ("rule r\n  command = x\nbuild o r\n", "build.ninja:3: expected ':', got newline ($ also escapes ':')"),
        ("rule r\n  command = x\nbuild o: r", "build.ninja:3: unexpected EOF"),
        ("rule r\n  command = x\nbuild o: r $", "build.ninja:3: bad $-escape (literal $ must be written as $$)"),
        ("rule r\n  command = x ${in\n", "build.ninja:2: bad $-escape (literal $ must be written as $$)"),
        ("rule r\n  command = x\nbuild o: r a\0b\n", "build.ninja:3: lexing error near '\\x00'"),
        ("rule r\n  command = x\nbuild o: r a\rb\n", "build.ninja:3: lexing error near '\\r'"),
        ("x = a\rb\n", "build.ninja:1: lexing error near '\\r'"),
        ("# ünïcode —\nrule r\n  command = x\nbuild ü: r é\nbuild o2: nope\n", "build.ninja:5: unknown build rule 'nope'"),
        ("rule\n", "build.ninja:1: expected rule name"),
        ("rule r\n  command = x\nbuild: r\n", "build.ninja:3: expected path"),
        ("rule r\n  command = x\nbuild o:\n", "build.ninja:3: expected build command name"),
        ("x y = 1\n", "build.ninja:1: expected '=', got identifier"),
        ("= 1\n", "build.ninja:1: unexpected '='"),
        ("pool p\n", "build.ninja:2: expected 'depth =' line"),
        ("pool p\n  depth = -1\n", "build.ninja:2: invalid pool depth"),
        ("pool p\n  size = 1\n", "build.ninja:2: unexpected variable 'size'"),
        ("rule r\n  command = x\n  rspfile = f\n", "build.ninja:4: rspfile and rspfile_content need to be both specified"),
        ("rule r\n  command = x\nbuild $e: r\n", "build.ninja:3: empty path"),
        ("rule r\n  command = x\nbuild o: r\ndefault nope\n", "build.ninja:4: unknown target 'nope'"),
        ("default\n", "build.ninja:1: expected target name"),
        ("include nope.ninja\n", "build.ninja:1: loading 'nope.ninja': No such file or directory"),
        ("rule r\n  command = x\n  dyndep = dd\nbuild o: r\n", "build.ninja:4: dyndep file 'dd' is not an input"),
    ])
    def test_message_names_file_and_line(self, root, text, expected):
        assert error(root, text).startswith(expected)

    def test_error_in_an_included_file_names_it(self, root):
        message = error(root, "rule r\n  command = x\ninclude rules/more.ninja\n",
                        files={"rules/more.ninja": "\n\nbuild o: nope\n"})
        assert message == "rules/more.ninja:3: unknown build rule 'nope'"

    def test_missing_manifest(self, root):
        with pytest.raises(UsageError, match="build.ninja: cannot read the ninja manifest"):
            ninja.load(root / "build.ninja")

    def test_missing_input_is_an_error_only_when_needed(self, root):
        _, g = load(root, "rule r\n  command = x\nbuild a: r nope.c\nbuild b: r\n")
        assert select(g, ["b"]) == [1]
        with pytest.raises(UsageError, match="missing input 'nope.c'"):
            select(g, ["a"])


class TestImplicitOrderOnlyValidations:
    TEXT = """\
        rule r
          command = tool $in -o $out
        build gen.h: r gen.in
        build lint.stamp: r a.c
        build a.o | a.map: r a.c | extra.h || gen.h order.dir |@ lint.stamp
        """

    def test_groups(self, root):
        _, g = load(root, self.TEXT, files={"gen.in": "", "a.c": "", "extra.h": "", "order.dir/keep": ""})
        a = computation_of(g, "a.o")
        assert a.action == "tool a.c -o a.o"  # $in and $out: the explicit ones only
        assert a.inputs == ["a.c", "extra.h"]  # hashed
        assert a.ninja.order_only == ["gen.h", "order.dir"]  # not hashed
        assert a.outputs == ["a.o", "a.map"] and g.producer["a.map"] == a.index
        assert a.producers == [computation_of(g, "gen.h").index]
        assert a.validates == [computation_of(g, "lint.stamp").index]

    def test_validation_is_built_with_but_not_before(self, root):
        _, g = load(root, self.TEXT, files={"gen.in": "", "a.c": "", "extra.h": "", "order.dir/keep": ""})
        ids = [g.computations[i].id for i in select(g, ["a.o"])]
        assert sorted(ids) == ["a.o", "gen.h", "lint.stamp"]
        assert computation_of(g, "lint.stamp").index not in computation_of(g, "a.o").producers

    def test_order_only_through_a_phony_waits_for_its_producers(self, root):
        _, g = load(root, """\
            rule r
              command = x
            build gen.h: r
            build order_target: phony || gen.h
            build a.o: r a.c || order_target
            """, files={"a.c": ""})
        a = computation_of(g, "a.o")
        assert a.inputs == ["a.c"]
        assert computation_of(g, "gen.h").index in a.producers

    def test_implicit_output_only(self, root):
        _, g = load(root, "rule r\n  command = touch $out\nbuild | side: r\n")
        assert computation_of(g, "side").action == "touch "

    def test_missing_order_only_input(self, root):
        _, g = load(root, "rule r\n  command = x\nbuild a: r || nope\n")
        assert computation_of(g, "a").missing == ["nope"]


class TestIncludeAndSubninja:
    def test_paths_in_included_files_are_relative_to_the_top(self, root):
        _, g = load(root, "include sub/rules.ninja\nbuild o: r sub/i\n",
                    files={"sub/rules.ninja": "rule r\n  command = cp $in $out\n"})
        assert computation_of(g, "o").action == "cp sub/i o"

    def test_include_path_may_use_variables(self, root):
        _, g = load(root, "dir = conf\ninclude $dir/r.ninja\nbuild o: r\n",
                    files={"conf/r.ninja": "rule r\n  command = x\n"})
        assert "o" in g.by_id

    def test_subninja_edges_share_the_graph(self, root):
        _, g = load(root, """\
            rule r
              command = x
            build lib.a: r
            subninja app.ninja
            build all: phony app
            """, files={"app.ninja": "build app: r main.o lib.a\nbuild main.o: r\n"})
        assert sorted(g.computations[p].id for p in computation_of(g, "app").producers) == ["lib.a", "main.o"]

    def test_include_cycle(self, root):
        message = error(root, "include a.ninja\n", files={"a.ninja": "include build.ninja\n"})
        assert message.startswith("a.ninja:1: include cycle")

    def test_missing_subninja(self, root):
        assert error(root, "\nsubninja x/y.ninja\n") == \
            "build.ninja:2: loading 'x/y.ninja': No such file or directory"


class TestDepsKinds:
    def test_deps_gcc_reads_and_removes_the_depfile(self, root):
        _, g = load(root, """\
            rule cc
              command = gcc -MD -MF $out.d -c $in -o $out
              depfile = $out.d
              deps = gcc
            build a.o: cc a.c
            """)
        a = computation_of(g, "a.o")
        assert (a.depfile, a.ninja.remove_depfile) == ("a.o.d", True)

    def test_depfile_without_deps_stays(self, root):
        _, g = load(root, "rule cc\n  command = x\n  depfile = $out.d\nbuild a.o: cc\n")
        assert (computation_of(g, "a.o").depfile, computation_of(g, "a.o").ninja.remove_depfile) == ("a.o.d", False)

    def test_deps_from_a_build_binding(self, root):
        _, g = load(root, "rule cc\n  command = x\n  depfile = $DEP\n  deps = $kind\nbuild a.o: cc\n  DEP = d/a.d\n  kind = gcc\n")
        assert (computation_of(g, "a.o").depfile, computation_of(g, "a.o").ninja.remove_depfile) == ("d/a.d", True)

    def test_deps_msvc_reads_the_output_with_the_rules_prefix(self, root):
        _, g = load(root, "rule cl\n  command = x\n  deps = msvc\n  depfile = ignored.d\nbuild a.obj: cl\n"
                          "build b.obj: cl\n  msvc_deps_prefix = Hinweis: Einlesen der Datei:\n")
        a, b = computation_of(g, "a.obj"), computation_of(g, "b.obj")
        assert (a.depfile, a.ninja.msvc_prefix) == (None, "Note: including file: ")
        assert b.ninja.msvc_prefix == "Hinweis: Einlesen der Datei:"

    def test_no_depfile(self, root):
        _, g = load(root, "rule cc\n  command = x\nbuild a.o: cc\n")
        assert computation_of(g, "a.o").depfile is None

    @pytest.mark.parametrize("text, expected", [
        ("deps = gcc", "deps = gcc needs a depfile"),
        ("deps = clang\n  depfile = x", "unknown deps type 'clang'"),
    ])
    def test_unsupported(self, root, text, expected):
        assert error(root, f"rule cc\n  command = x\n  {text}\nbuild a.o: cc\n") == f"build.ninja:{4 + text.count(chr(10))}: {expected}"


class TestDefault:
    TEXT = """\
        rule r
          command = x
        build a: r
        build b: r
        build c: r
        """

    def test_no_default_builds_everything(self, root):
        spec, _ = load(root, self.TEXT)
        assert spec.default is None

    def test_defaults_accumulate(self, root):
        spec, g = load(root, textwrap.dedent(self.TEXT) + "default a\ndefault c ./b\n")
        assert spec.default == ["a", "c", "b"]

    def test_default_must_be_known_when_written(self, root):
        assert error(root, "default a\n" + textwrap.dedent(self.TEXT)) == "build.ninja:1: unknown target 'a'"

    def test_default_of_a_source_file_builds_nothing(self, root):
        spec, _ = load(root, textwrap.dedent(self.TEXT) + "build d: r src.c\ndefault src.c\n", files={"src.c": ""})
        assert spec.default == []

    def test_default_with_variables(self, root):
        spec, _ = load(root, "t = b\n" + textwrap.dedent(self.TEXT) + "default $t\n")
        assert spec.default == ["b"]

    def test_targets_name_paths_before_rules(self, root):
        _, g = load(root, "rule a\n  command = x\nbuild a: a\nbuild b: a\n")
        assert select(g, ["a"]) == [0]


@pytest.mark.skipif(shutil.which("ninja") is None, reason="ninja is not installed")
class TestSameCommandsAsNinja:
    """Differential: the commands farmer expands are ninja's, byte for byte."""

    MANIFEST = """\
        ninja_required_version = 1.5
        cflags = -O2 -Wall
        x = 1
        rule cc
          command = gcc $cflags $extra -MD -MF $out.d -c $in -o $out # x=$x
          depfile = $out.d
          deps = gcc
          description = CC $out
        rule link
          command = gcc $in -o $out $libs
        rule echo
          command = printf '%s\\n' $in > $out && echo $$HOME ${x}
        build obj/a.o: cc src/a.c | gen.h || order
          extra = -DA=$x -I$ dir
        build obj/b$ c.o: cc ./src//b$ c.c
        build gen.h: echo in$ a in'b in,c
        build order: phony gen.h
        build bin/app: link obj/a.o obj/b$ c.o
          libs = -lm
        subninja sub/sub.ninja
        x = 2
        """
    SUB = """\
        cflags = -O0
        build obj/sub.o: cc sub/../sub/s.c
        """

    def test_commands(self, root):
        write(root, "sub/sub.ninja", self.SUB)
        _, g = load(root, self.MANIFEST)
        ours = sorted(c.action for c in g.computations if c.action is not None)
        out = subprocess.run(["ninja", "-t", "commands"], cwd=root, capture_output=True,
                             text=True, check=True).stdout
        assert ours == sorted(out.splitlines())


def _value_by_characters(text: str) -> list[str]:
    """A value's parts as ninja's grammar reads them one character at a time (the reference
    for the lexer's pieces): `$$`, `$ ` and `$:` are literal, `$` before a newline continues
    the line past the next line's leading spaces, `${name}` and `$name` are variables."""
    parts, literal, pos = [], "", 0
    var = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
    while text[pos] != "\n":
        c = text[pos]
        if c != "$":
            literal += c
            pos += 1
        elif text[pos + 1] in "$ :":
            literal += text[pos + 1]
            pos += 2
        elif text[pos + 1] == "\n":
            pos += 2
            while text[pos] == " ":
                pos += 1
        elif text[pos + 1] == "{":
            end = text.index("}", pos)
            parts += [literal, text[pos + 2:end]]
            literal, pos = "", end + 1
        else:
            end = pos + 1
            while text[end] in var:
                end += 1
            parts += [literal, text[pos + 1:end]]
            literal, pos = "", end
    return parts + [literal]


def test_values_read_in_pieces_as_by_characters():
    """A value with escapes is read a piece at a time (spaces, `:` and `|` inside the
    pieces: Meson's ARGS escape every space of a path as `$ `): the parts are those of a
    reading character by character, over generated values."""
    import random

    from farmer.manifest.ninja_lexer import Lexer

    rng = random.Random(17)
    pieces = ["a", "-I../test", " ", "  ", ":", "|", "||", "$ ", "$$", "$:", "$x", "${y.z}", "$a-b",
              "$\n   ", "'", "é", "😀"]
    for _ in range(5000):
        value = "x" + "".join(rng.choices(pieces, k=rng.randint(0, 14)))  # (leading spaces: the `=`'s)
        lexer = Lexer("build.ninja", f"v = {value}\nrest\n")
        assert lexer.read_ident() == "v" and lexer.read_token()[0] == "="
        assert lexer.read_value() == _value_by_characters(value + "\n"), repr(value)
        assert lexer.read_ident() == "rest"
