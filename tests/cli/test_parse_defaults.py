"""A command line that gives a command no parameter is not parsed: every parameter takes the
value ``argparse`` would give it, for every command of the CLI, and ``argparse`` is not imported
(counted in a fresh interpreter)."""

from __future__ import annotations

from pathlib import Path

import pytest

from membrane.cli.app import main
from membrane.cli.argparse_line import parser_for
from membrane.cli.declare import Command, Group
from membrane.cli.parsing import _defaults, params_of
from process_support import cli_imports


def _commands(group: Group, words: list[str]) -> list[tuple[str, Command]]:
    found: list[tuple[str, Command]] = []
    for word, node in group.commands.items():
        if isinstance(node, Group):
            found += _commands(node, [*words, word])
        else:
            found.append((" ".join([*words, word]), node))
    return found


def test_every_command_given_no_parameter_gets_what_argparse_gives() -> None:
    from membrane.cli.app import app
    from membrane.cli.commands import register

    register(None)
    compared = 0
    for line, command in _commands(app, ["membrane"]):
        params = params_of(command)
        values = _defaults(params)
        if values is None:  # a required parameter: argparse reports it
            assert any(p.required for p in params) or any(
                isinstance(p.default, str) for p in params
            ), line
            continue
        parsed = vars(parser_for(params, line).parse_intermixed_args([]))
        assert values == parsed, line
        assert {k: type(v) for k, v in values.items()} == {k: type(v) for k, v in parsed.items()}
        compared += 1
    assert compared >= 10


def test_a_missing_required_argument_is_still_reported(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agents", "show"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Usage: membrane agents show [OPTIONS] NAME")
    assert "NAME" in err.splitlines()[-1]


def _modules(*args: str, cwd: Path) -> set[str]:
    code, modules, _ = cli_imports(*args, cwd=cwd)
    assert code == 0
    return modules


@pytest.mark.costs
def test_agents_list_without_options_imports_no_parser(tmp_path: Path, isolated_home: Path) -> None:
    project = tmp_path / "project"
    (project / ".membrane" / "agents").mkdir(parents=True)
    assert {"argparse", "gettext", "locale"} & _modules("agents", "list", cwd=project) == set()
    # An option is parsed by argparse, as before.
    assert "argparse" in _modules("agents", "list", "--json", cwd=project)
