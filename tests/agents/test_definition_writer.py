"""The writer keeps key order, comments, quoting, list style and the ``inherit`` token."""

from __future__ import annotations

from pathlib import Path

import pytest

from membrane import UNSET, parse_definition
from membrane.agents import render_definition
from membrane.errors import DefinitionError
from membrane.lowlevel import update_definition_text, write_definition

SOURCE = """---
# The reviewer our CI calls.
name: reviewer   # keep it short
description: "Reviews: diffs only"
tools: inherit  # seed 000: opt in to the parent's catalog
disallowedTools:
  - Bash
  - Write
skills: [lint, typing]
model: sonnet
---
Review the diff.
"""


def test_an_empty_update_changes_nothing() -> None:
    assert update_definition_text(SOURCE, {}) == SOURCE


def test_write_and_read_back_keeps_inherit_and_comments(tmp_path: Path) -> None:
    path = tmp_path / "reviewer.md"
    path.write_text(SOURCE)
    saved = write_definition(path, {"model": "opus", "max_turns": 12})
    text = path.read_text()
    assert "tools: inherit  # seed 000: opt in to the parent's catalog" in text
    assert "# The reviewer our CI calls." in text
    assert "name: reviewer   # keep it short" in text
    assert 'description: "Reviews: diffs only"' in text
    assert saved.inherits_tools and saved.tools == ("inherit",)
    assert (saved.model, saved.max_turns) == ("opus", 12)
    reread = parse_definition(text, path=str(path), root="project")
    assert reread.tools == ("inherit",) and reread.disallowed_tools == ("Bash", "Write")
    assert list(reread.lines) == [
        "name",
        "description",
        "tools",
        "disallowed_tools",
        "skills",
        "model",
        "max_turns",
    ]


def test_changed_lists_keep_their_style() -> None:
    text = update_definition_text(
        SOURCE, {"tools": ("inherit", "Bash"), "disallowed_tools": ("Write",), "skills": ("lint",)}
    )
    assert "tools: inherit, Bash" in text
    assert "disallowedTools:\n  - Write\nskills:" in text
    assert "skills: [lint]" in text


def test_unset_removes_a_key_and_body_replaces_the_prompt() -> None:
    text = update_definition_text(SOURCE, {"model": UNSET, "body": "Only security."})
    definition = parse_definition(text, path="r.md", root="project")
    assert definition.model is UNSET
    assert definition.body == "Only security."
    assert "tools: inherit" in text


def test_emptying_tools_writes_none_which_reads_as_no_tools() -> None:
    text = update_definition_text(SOURCE, {"tools": ()})
    assert parse_definition(text, path="r.md", root="project").tools == ()


def test_crlf_and_byte_order_mark_are_kept() -> None:
    source = "\ufeff---\r\nname: a\r\ntools: Read\r\n---\r\nBody\r\n"
    text = update_definition_text(source, {"tools": ("Read", "Grep")})
    assert text == "\ufeff---\r\nname: a\r\ntools: Read, Grep\r\n---\r\nBody\r\n"


def test_an_update_that_would_make_the_file_unusable_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "reviewer.md"
    path.write_text(SOURCE)
    with pytest.raises(DefinitionError) as caught:
        write_definition(path, {"isolation": "maybe"})
    assert caught.value.data["field"] == "isolation"
    assert path.read_text() == SOURCE


def test_an_unknown_field_is_refused() -> None:
    with pytest.raises(DefinitionError, match="not a definition field"):
        update_definition_text(SOURCE, {"allowed_tools": ("Bash",)})


def test_render_then_parse_gives_the_same_definition() -> None:
    original = parse_definition(SOURCE, path="r.md", root="project")
    again = parse_definition(render_definition(original), path="r.md", root="project")
    # Only the spelling of the keys may differ (``disallowedTools`` is written as the field).
    assert again.to_json() | {"lines": {}, "keys": {}} == original.to_json() | {
        "lines": {},
        "keys": {},
    }
