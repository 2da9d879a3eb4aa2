"""A definition's own read roots (``read_paths``): read by its built-in tools and its sandboxed
commands, and held under its parent's (DESIGN rules 13 and 14)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from membrane.config.values import Settings
from membrane.models.base import Message, ModelRequest, ModelResponse, ToolCall
from membrane.runtime import SubagentStartRequest

from .support import codes, runtime_for

pytestmark = pytest.mark.anyio


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """Two folders outside the project: ``data`` (with ``inner``) and ``other``."""
    root = (tmp_path / "outside").resolve()
    (root / "data" / "inner").mkdir(parents=True)
    (root / "other").mkdir()
    (root / "data" / "top.txt").write_text("top\n")
    (root / "data" / "inner" / "deep.txt").write_text("deep\n")
    (root / "other" / "else.txt").write_text("else\n")
    return root


def _agent(project: Path, name: str, tools: str, extra: str = "") -> None:
    (project / ".membrane" / "agents" / f"{name}.md").write_text(
        f"---\nname: {name}\ndescription: {name}.\ntools: {tools}\n{extra}---\nx\n"
    )


async def test_a_definition_names_its_own_read_roots(
    any_sandbox: str, project: Path, outside: Path
) -> None:
    data = outside / "data"
    _agent(project, "archivist", "Read, Bash", f"read_paths: [{data}]\n")
    _agent(project, "plain", "Read, Bash")
    results: dict[str, list[Message]] = {}

    async def answer(request: ModelRequest) -> ModelResponse:
        done = [m for m in request.messages if m.role == "tool"]
        if not done:
            calls = (
                ToolCall("r", "Read", {"file_path": str(data / "top.txt")}),
                ToolCall("b", "Bash", {"command": f"cat {data / 'inner' / 'deep.txt'}"}),
            )
            return ModelResponse(tool_calls=calls, stop_reason="tool_calls")
        results[request.agent] = done
        return ModelResponse(text="done")

    settings = Settings(sandbox=any_sandbox)  # type: ignore[arg-type]
    runtime = runtime_for(project, answer, settings=settings)
    with anyio.fail_after(60):
        async with runtime:
            for agent in ("archivist", "plain"):
                result = await runtime.run(SubagentStartRequest(agent, "read"))
                assert result.status == "completed", result
    read, bash = results["archivist"]
    assert codes([read]) == [None] and "top" in read.content
    assert json.loads(bash.content)["stdout"] == "deep\n"
    read, bash = results["plain"]
    assert codes([read]) == ["path-outside-checkout"]
    if any_sandbox != "guard":  # the shell guard alone confines no read
        assert "deep" not in json.loads(bash.content)["stdout"]


async def test_a_child_reads_only_where_its_parent_could(project: Path, outside: Path) -> None:
    data, other = outside / "data", outside / "other"
    _agent(
        project,
        "lead",
        "Read",
        f"allowed_subagents: [helper]\nread_paths: [{data}]\n",
    )
    _agent(project, "helper", "Read", f"read_paths: [{data / 'inner'}, {other}]\n")
    helper: list[Message] = []
    published: dict[str, tuple[str, dict[str, object]]] = {}

    async def answer(request: ModelRequest) -> ModelResponse:
        done = [m for m in request.messages if m.role == "tool"]
        if request.agent == "lead" and not done:
            call = ToolCall("t", "Task", {"agent": "helper", "task": "read"})
            return ModelResponse(tool_calls=(call,), stop_reason="tool_calls")
        if request.agent == "helper" and not done:
            calls = (
                ToolCall("a", "Read", {"file_path": str(data / "inner" / "deep.txt")}),
                ToolCall("b", "Read", {"file_path": str(other / "else.txt")}),
                ToolCall("c", "Read", {"file_path": str(data / "top.txt")}),
            )
            return ModelResponse(tool_calls=calls, stop_reason="tool_calls")
        if request.agent == "helper":
            helper.extend(done)
        return ModelResponse(text="done")

    runtime = runtime_for(project, answer, settings=Settings(sandbox="guard"))
    with anyio.fail_after(60):
        async with runtime, runtime.events() as events:
            result = await runtime.run(SubagentStartRequest("lead", "delegate"))
            assert result.status == "completed", result
            async for event in events:
                if event.kind == "published":
                    published[event.agent] = (event.run_id, dict(event.data))
                if len(published) == 2 or (event.kind == "completed" and event.agent == "lead"):
                    break
    assert codes(helper) == [None, "path-outside-checkout", "path-outside-checkout"]
    assert "deep" in helper[0].content
    lead_run = published["lead"][0]
    ceiling = published["helper"][1]["ceiling"]
    assert ceiling["read_roots"] == {"value": [str(data)], "source": f"ceiling:{lead_run}"}  # type: ignore[index]


def _explain(project: Path, agent: str, *extra: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "membrane", "explain", agent, "--json",
         "--project", str(project), *extra],
        cwd=project, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_explain_shows_each_read_root_with_its_source(project: Path, outside: Path) -> None:
    data, other = outside / "data", outside / "other"
    (project / ".membrane" / "config.toml").write_text(f'read_paths = ["{other}"]\n')
    _agent(project, "helper", "Read", f"read_paths: [{data / 'inner'}, {other / 'x'}]\n")
    top = _explain(project, "helper")["checkout"]
    assert top["read_roots"] == [  # type: ignore[index]
        {"path": str(other), "source": "settings"},
        {"path": str(data / "inner"), "source": "frontmatter"},
        {"path": str(other / "x"), "source": "frontmatter"},
    ]
    ceiling = {
        "mode": {"value": "default", "source": None},
        "denied": [],
        "allowed": [],
        "rules": [],
        "network": {"value": True, "source": None},
        "read_roots": {"value": [str(data)], "source": "ceiling:lead-run"},
    }
    held = _explain(project, "helper", "--parent", json.dumps({"ceiling": ceiling}))
    assert held["checkout"]["read_roots"] == [  # type: ignore[index]
        {"path": str(other), "source": "settings"},
        {"path": str(data / "inner"), "source": "frontmatter"},
    ]
    assert held["checkout"]["read_roots_left_out"] == {str(other / "x"): "ceiling:lead-run"}  # type: ignore[index]


def test_a_relative_read_root_is_refused(project: Path) -> None:
    _agent(project, "helper", "Read", "read_paths: [data]\n")
    done = subprocess.run(
        [sys.executable, "-m", "membrane", "agents", "validate", "--project", str(project)],
        cwd=project, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert (
        "helper.md:5: definition-invalid: `read_paths` names 'data', which is not an absolute "
        "path" in done.stdout + done.stderr
    )
