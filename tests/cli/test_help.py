"""Help texts, for every command: usage lines name the arguments as written (``AGENT TASK``),
flags show no value, no sentence is cut by a hard wrap, every default is written one way
(``(default: X)``), every command takes ``--json``, and bracketed words are text."""

from __future__ import annotations

import re

import pytest
from cli_support import cli_commands

from membrane.cli.app import main
from membrane.cli.helptext import params_of

COMMANDS, GROUPS = cli_commands()


def _help(capsys: pytest.CaptureFixture[str], words: str) -> str:
    assert main([*words.split(), "--help"]) == 0
    return capsys.readouterr().out


def _one_line(text: str) -> str:
    return " ".join(text.split())


def test_every_command_is_covered() -> None:
    assert {"run", "explain", "agents validate", "mcp serve", "workflow decide"} <= set(COMMANDS)
    assert len(COMMANDS) >= 25


@pytest.mark.parametrize("words", sorted(COMMANDS))
def test_usage_line_names_the_arguments_as_written(
    words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _help(capsys, words).splitlines()[0]
    assert first.startswith(f"Usage: membrane {words} [OPTIONS]")
    assert not re.search(r"[{}<>]", first)
    for param in params_of(COMMANDS[words]):
        if not param.is_option:
            shown = param.metavar if param.required else f"[{param.metavar}]"
            assert shown in first.split()[4:] or shown + "..." in first.split()[4:]


@pytest.mark.parametrize(
    ("words", "usage"),
    [("run", "AGENT TASK"), ("explain", "AGENT"), ("resume", "RUN_ID MESSAGE"),
     ("show", "RUN_ID"), ("lineage", "[RUN_ID]"), ("agents validate", "[PATHS]...")],
)  # fmt: skip
def test_usage_lines_of_the_common_commands(
    words: str, usage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _help(capsys, words).splitlines()[0]
    assert first == f"Usage: membrane {words} [OPTIONS] {usage}"


@pytest.mark.parametrize("words", sorted(COMMANDS))
def test_flags_show_no_value_and_values_show_their_kind(
    words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _help(capsys, words)
    assert "<bool>" not in text and "<str>" not in text
    lines = text.splitlines()
    for param in params_of(COMMANDS[words]):
        if not param.is_option or param.hidden:
            continue
        line = next(line for line in lines if line.lstrip().startswith(param.flags[0]))
        term = re.split(r"\s{2,}", line.strip())[0]
        if param.is_flag:
            # "--json", or "--start / --no-start": flag names only, no value.
            assert all(word.startswith("--") or word == "/" for word in term.split()), term
        else:
            assert term.split()[1] in ("TEXT", "PATH", "INTEGER", "NUMBER") or param.metavar


@pytest.mark.parametrize("words", sorted(COMMANDS))
def test_no_sentence_is_cut_by_a_hard_wrap(words: str, capsys: pytest.CaptureFixture[str]) -> None:
    # Piped (as here), each paragraph of the command's text and each option's help is one line.
    lines = [_one_line(line) for line in _help(capsys, words).splitlines()]
    command = COMMANDS[words]
    for paragraph in (command.help or "").split("\n\n"):
        if paragraph.strip():
            assert _one_line(paragraph) in lines, paragraph
    for param in params_of(command):
        if param.help and not param.hidden:
            assert any(_one_line(param.help) in line for line in lines), param.help


@pytest.mark.parametrize("words", sorted(COMMANDS))
def test_defaults_are_written_one_way(words: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys, words)
    assert "[default" not in text and "[required]" not in text
    assert not re.search(r"[Dd]efaults? to\b", text)
    for found in re.finditer(r"default:", text):
        assert text[found.start() - 1] == "(", text[found.start() - 40 : found.end() + 20]
    lines = text.splitlines()
    for param in params_of(COMMANDS[words]):
        shown = param.default not in (None, False, (), [])
        if param.is_option and not param.hidden and not param.required and shown:
            line = next(line for line in lines if line.lstrip().startswith(param.flags[0]))
            assert "(default: " in line, line


def test_a_default_is_shown_as_its_value(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys, "show")
    assert any("--width INTEGER" in line and "(default: 400)" in line for line in text.split("\n"))
    assert "(default: the current directory)" in text


@pytest.mark.parametrize("words", sorted(COMMANDS))
def test_every_command_takes_json(words: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert any(line.strip().startswith("--json") for line in _help(capsys, words).splitlines())


@pytest.mark.parametrize("words", GROUPS)
def test_group_help_lists_whole_first_sentences(
    words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _help(capsys, words)
    assert text.startswith(f"Usage: {' '.join(['membrane', *words.split()])} [OPTIONS] COMMAND")
    assert "..." not in text.split("Commands:")[1]


def test_bracketed_words_in_help_are_kept(capsys: pytest.CaptureFixture[str]) -> None:
    text = " ".join(_help(capsys, "run").split())
    assert "[models]/[model_aliases] name" in text
    assert "within the settings' [budget]" in text


def test_on_a_terminal_help_is_wrapped_to_its_width(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setenv("COLUMNS", "60")
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    text = _help(capsys, "run")
    # Only a word longer than the room (a path) overflows: it is never broken.
    assert all(len(line) <= 60 or len(line.split()) == 1 for line in text.splitlines())
    assert "$MEMBRANE_HOME/projects/<project-id>/state.db)." in text.split()
    assert "[models]/[model_aliases] name" in " ".join(text.split())
