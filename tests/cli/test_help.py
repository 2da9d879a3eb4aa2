"""Help texts: usage lines name the arguments, flags show no fake values, and bracketed words in
help texts are text (never swallowed as markup)."""

from __future__ import annotations

import pytest

from membrane.cli.app import main
from membrane.cli.commands import COMMANDS

COMMAND_LINES = sorted({*COMMANDS, "agents validate", "agents list", "outbox list"})


def _help(capsys: pytest.CaptureFixture[str], words: str) -> str:
    assert main([*words.split(), "--help"]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("words", COMMAND_LINES)
def test_no_help_shows_a_value_for_a_flag(words: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys, words)
    assert text.startswith("Usage: membrane")
    assert "<bool>" not in text


@pytest.mark.parametrize(
    ("words", "usage"),
    [("run", "AGENT TASK"), ("explain", "AGENT"), ("resume", "RUN_ID MESSAGE"),
     ("show", "RUN_ID"), ("lineage", "[RUN_ID]"), ("agents validate", "[PATHS]...")],
)  # fmt: skip
def test_usage_lines_name_the_arguments(
    words: str, usage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _help(capsys, words).splitlines()[0]
    assert first == f"Usage: membrane {words} [OPTIONS] {usage}"


def test_bracketed_words_in_help_are_kept(capsys: pytest.CaptureFixture[str]) -> None:
    text = " ".join(_help(capsys, "run").split())
    assert "[models]/[model_aliases] name" in text
    assert "within the settings' [budget]" in text
