"""Explicit extension paths in ``extensions:`` (seed 003: "an array keeps matching canonical names
and adds explicit paths"), through the workspace, ``membrane explain`` and a real run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from membrane import SubagentRuntime, SubagentStartRequest
from membrane.cli.app import main
from membrane.errors import ExtensionError
from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.testing import FunctionModel

AUDIT = """\
from membrane import Tool


async def _audit(arguments, context):
    return "audited"


def setup(ext):
    ext.register_tool(Tool("audit_file", "Audit a file.", {"type": "object"}, _audit))
"""
NOTES = """\
from membrane import Tool


async def _note(arguments, context):
    return "noted"


def setup(ext):
    ext.register_tool(Tool("note", "Take a note.", {"type": "object"}, _note))
"""


def _agent(project: Path, name: str, extensions: str) -> None:
    path = project / ".membrane" / "agents" / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\nextensions: {extensions}\n---\nWork.\n", encoding="utf-8")


@pytest.fixture
def project(tmp_path: Path, isolated_home: Path) -> Path:
    root = tmp_path / "project"
    (root / ".membrane" / "extensions").mkdir(parents=True)
    (root / ".membrane" / "extensions" / "notes.py").write_text(NOTES, encoding="utf-8")
    (root / "tools").mkdir()
    (root / "tools" / "audit.py").write_text(AUDIT, encoding="utf-8")
    _agent(project=root, name="auditor", extensions="[notes, tools/audit.py]")
    _agent(project=root, name="everyone", extensions="true")
    return root


def _explain(capsys: pytest.CaptureFixture[str], agent: str, project: Path) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["explain", agent, "--project", str(project), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert isinstance(out, dict)
    return out


def test_a_path_adds_that_extension_for_the_definition_that_names_it(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    auditor = _explain(capsys, "auditor", project)
    assert auditor["extensions"] == {"loaded": ["audit", "notes"], "excluded": []}
    assert auditor["tools"]["callable"] == ["Glob", "Grep", "Read", "audit_file", "note"]
    # Discovered only for the definition that names its path: `extensions: true` elsewhere
    # keeps the discovered set, which does not hold it.
    everyone = _explain(capsys, "everyone", project)
    assert everyone["extensions"] == {"loaded": ["notes"], "excluded": []}
    assert everyone["tools"]["left_out"]["audit_file"] == "extension not loaded"


def test_a_path_to_a_discovered_extension_is_that_extension(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _agent(project, "noter", "[./.membrane/extensions/notes.py]")
    noter = _explain(capsys, "noter", project)
    assert noter["extensions"] == {"loaded": ["notes"], "excluded": []}


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ("tools/missing.py", "is not a Python file"),
        ("./tools", "is not a Python file"),
        ("tools/empty.py", "has no setup(ext) function"),
    ],
)
def test_a_path_that_is_not_an_extension_refuses_the_definition(
    project: Path, capsys: pytest.CaptureFixture[str], entry: str, why: str
) -> None:
    (project / "tools" / "empty.py").write_text("VALUE = 1\n", encoding="utf-8")
    _agent(project, "broken", f"[{entry}]")
    capsys.readouterr()
    assert main(["explain", "broken", "--project", str(project), "--json"]) == 2
    error = json.loads(capsys.readouterr().err)["error"]
    assert error["code"] == "extension-invalid"
    assert f"extensions: {entry!r} is not an extension" in error["message"]
    assert why in error["message"]

    async def run() -> None:
        model = FunctionModel(lambda request: _done())
        async with SubagentRuntime.open(project, model=model) as runtime:
            with pytest.raises(ExtensionError):
                await runtime.start(SubagentStartRequest(agent_type="broken", task="x"))
            assert runtime.runs() == []
            assert model.requests == []

    anyio.run(run)


async def _done() -> ModelResponse:
    return ModelResponse(text="done")


def test_a_run_calls_the_tool_of_an_extension_named_by_path(project: Path) -> None:
    async def answer(request: ModelRequest) -> ModelResponse:
        if len(model.requests) == 1:
            return ModelResponse(tool_calls=(ToolCall("a1", "audit_file", {}),))
        return ModelResponse(text="done")

    model = FunctionModel(answer)

    async def run() -> None:
        with anyio.fail_after(60):
            async with SubagentRuntime.open(project, model=model) as runtime:
                result = await runtime.run(SubagentStartRequest(agent_type="auditor", task="x"))
        assert result.status == "completed"

    anyio.run(run)
    assert "audit_file" in {str(entry["name"]) for entry in model.requests[0].tools}
    results = [m for m in model.requests[1].messages if m.role == "tool"]
    assert [(m.name, m.content, m.is_error) for m in results] == [("audit_file", "audited", False)]
