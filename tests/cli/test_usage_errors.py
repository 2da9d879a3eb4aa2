"""Usage errors: a wrong command line exits 2 with the usage line, what is wrong and, when one
is close, the command or option that was meant; with --json, one JSON object on stderr."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from membrane.cli.app import main


def _fails(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(list(args)) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err


def test_a_missing_argument_names_it_under_the_usage_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _fails(capsys, "run", "only-an-agent")
    lines = err.splitlines()
    assert lines[0] == "Usage: membrane run [OPTIONS] AGENT TASK"
    assert lines[1] == "Try 'membrane run --help' for help."
    assert "TASK" in lines[-1] and lines[-1].startswith("Error: ")


def test_an_unknown_command_suggests_the_closest(capsys: pytest.CaptureFixture[str]) -> None:
    err = _fails(capsys, "agnets", "list")
    assert "No such command 'agnets'. Did you mean 'agents'?" in err
    err = _fails(capsys, "agents", "lst")
    assert err.startswith("Usage: membrane agents [OPTIONS] COMMAND [ARGS]...")
    assert "Did you mean 'list'?" in err


def test_an_unknown_option_suggests_the_closest(capsys: pytest.CaptureFixture[str]) -> None:
    err = _fails(capsys, "agents", "list", "--jsn")
    assert "--jsn" in err and "Did you mean '--json'?" in err


def test_a_value_of_the_wrong_type_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    err = _fails(capsys, "show", "some-run", "--width", "wide")
    assert "--width" in err and "'wide'" in err


def test_a_flag_takes_no_value(capsys: pytest.CaptureFixture[str]) -> None:
    err = _fails(capsys, "agents", "list", "--json=yes")
    assert "--json" in err


def test_with_json_a_usage_error_is_one_json_object(capsys: pytest.CaptureFixture[str]) -> None:
    err = _fails(capsys, "run", "--json", "only-an-agent")
    document = json.loads(err)
    assert document["exit_code"] == 2
    assert document["error"]["code"] == "usage-error"
    assert document["error"]["data"]["usage"] == "Usage: membrane run [OPTIONS] AGENT TASK"


def test_a_group_without_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    assert capsys.readouterr().out.startswith("Usage: membrane [OPTIONS] COMMAND [ARGS]...")
    assert "Missing command." in _fails(capsys, "outbox")


def test_options_and_arguments_mix_in_any_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["agents", "validate", "--json", str(tmp_path), "--project", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out)["files"] == 0


def test_a_missing_required_argument_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    err = _fails(capsys, "agents", "show")
    assert err.startswith("Usage: membrane agents show [OPTIONS] NAME")
    assert "NAME" in err.splitlines()[-1]
