from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import membrane
from membrane.builtin_tools import builtin_tools, register_builtin_tools
from membrane.tools.spec import Tool
from membrane.vocabulary import (
    ASSIGNABLE_TOOLS,
    BUILTIN_TOOL_NAMES,
    MUTATING_TOOLS,
    canonical_builtin_name,
)


class RecordingRegistry:
    def __init__(self) -> None:
        self.calls: list[tuple[str, bool]] = []

    def register(self, tool: Tool, *, replace: bool = False) -> None:
        self.calls.append((tool.name, replace))


def _path_with_only(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    monkeypatch.setenv("PATH", str(folder))


def test_assignable_tools_are_the_seven_of_seed_000() -> None:
    assert ASSIGNABLE_TOOLS == (
        "Read",
        "Glob",
        "Grep",
        "BrowserPreview",
        "Bash",
        "Edit",
        "Write",
    )
    assert set(BUILTIN_TOOL_NAMES) == set(ASSIGNABLE_TOOLS)


def test_bash_edit_and_write_are_the_mutating_tools() -> None:
    assert {tool.name for tool in builtin_tools() if tool.mutating} == MUTATING_TOOLS
    assert frozenset({"Bash", "Edit", "Write"}) == MUTATING_TOOLS


def test_every_tool_is_builtin_with_a_strict_valid_schema() -> None:
    for tool in builtin_tools():
        schema: dict[str, Any] = dict(tool.input_schema)
        jsonschema.Draft202012Validator.check_schema(schema)
        assert tool.origin == "builtin"
        assert schema["type"] == "object"
        assert schema["additionalProperties"] is False
        assert schema["required"]
        assert set(schema["required"]) <= set(schema["properties"])
        assert len(tool.description) > 80
        assert not tool.reserved and not tool.deferred


def test_schemas_reject_unknown_and_missing_arguments() -> None:
    read = next(tool for tool in builtin_tools() if tool.name == "Read")
    validator = jsonschema.Draft202012Validator(dict(read.input_schema))
    assert not validator.is_valid({"file_path": "a", "bogus": 1})
    assert not validator.is_valid({})
    assert validator.is_valid({"file_path": "a", "offset": 3, "limit": 10})


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        ("read", "Read"),
        ("READ", "Read"),
        (" Glob ", "Glob"),
        ("browserpreview", "BrowserPreview"),
        ("bash", "Bash"),
        ("Task", None),
        ("mcp__x__read", None),
        ("", None),
    ],
)
def test_canonical_builtin_name_matches_case_insensitively(
    token: str, expected: str | None
) -> None:
    assert canonical_builtin_name(token) == expected


def test_browser_preview_is_absent_without_a_browser(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _path_with_only(monkeypatch, tmp_path)
    names = [tool.name for tool in builtin_tools()]
    assert names == ["Read", "Glob", "Grep", "Bash", "Edit", "Write"]


def test_browser_preview_is_registered_when_a_chromium_is_on_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = tmp_path / "chromium"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    _path_with_only(monkeypatch, tmp_path)
    tools = builtin_tools()
    assert [tool.name for tool in tools] == list(BUILTIN_TOOL_NAMES)
    preview = next(tool for tool in tools if tool.name == "BrowserPreview")
    assert preview.mutating is False


def test_register_builtin_tools_registers_each_tool_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _path_with_only(monkeypatch, tmp_path)
    registry = RecordingRegistry()
    registered = register_builtin_tools(registry, replace=True)
    assert registry.calls == [(tool.name, True) for tool in registered]
    assert [name for name, _ in registry.calls] == ["Read", "Glob", "Grep", "Bash", "Edit", "Write"]


def test_the_package_re_exports_the_entry_points() -> None:
    # The subpackage keeps its name; only the registration entry point is re-exported.
    assert membrane.register_builtin_tools is register_builtin_tools
    assert "register_builtin_tools" in membrane.__all__
    assert callable(membrane.builtin_tools.builtin_tools)
