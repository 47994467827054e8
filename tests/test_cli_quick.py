"""`farmer build`'s options are declared once (farmer/cli/quick.py): click reads the table for
`build` and `watch`, and the quick reader of the no-op path takes what the table marks as
quick and sends everything else to click; where it reads a command line, it reads what
click would."""

import click
import pytest

from farmer.cli.app import cli
from farmer.cli.quick import BUILD_OPTIONS, COUNT, FLAG, INT, SWITCH, quick_build_args


def _click_flags(command: str) -> set[str]:
    params = [p for p in cli.commands[command].params if isinstance(p, click.Option)]
    return {flag for p in params for flag in (*p.opts, *p.secondary_opts)}


@pytest.mark.parametrize("command", ["build", "watch"])
def test_every_option_click_knows_comes_from_the_one_table(command):
    assert _click_flags(command) == {flag for option in BUILD_OPTIONS for flag in option.flags}


@pytest.mark.parametrize("option", BUILD_OPTIONS, ids=lambda o: o.flags[0])
def test_each_option_is_read_by_hand_or_explicitly_sent_to_click(option):
    for flag in option.flags:
        argv = ["build", flag] if option.kind in (FLAG, SWITCH) else ["build", flag, "3"]
        read = quick_build_args(argv)
        if not option.quick:
            assert read is None, f"{flag} is click's: the quick reader must leave it alone"
            continue
        assert read == {"targets": [], option.dest: True if option.kind == FLAG else
                        3 if option.kind in (INT, COUNT) else "3"}
        clicked = cli.commands["build"].make_context("build", argv[1:]).params
        assert clicked[option.dest] == read[option.dest]


@pytest.mark.parametrize("argv", [
    ["build"], ["build", "all", "-k", "-j", "2"], ["build", "-j4", "-Csub", "-fF", "t"],
    ["build", "--", "-odd-name"], ["build", "-j", "3", "-j", "5"],
    ["build", "-k", "0", "t"], ["build", "-k", "t"], ["build", "-k2", "-v", "--quiet"], ["build", "--verbose", "-k"],
])
def test_what_the_quick_reader_reads_click_reads_the_same(argv):
    read = quick_build_args(argv)
    clicked = cli.commands["build"].make_context("build", argv[1:]).params
    assert list(clicked.pop("targets")) == read.pop("targets")
    assert {name: clicked[name] for name in read} == read
