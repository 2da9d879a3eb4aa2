"""Seed 003's live tool scope through the runtime, with the definition's real restriction.

A project extension ``alpha`` registers ``alpha_search`` and ``alpha_write_remote`` at the moments
seed 003 names; the agent file selects only ``ext:alpha/alpha_search``. The runtime resolves the
definition, installs its restriction on the child's scope and runs the child on a model that
calls both tools: the selected one runs, the other is vetoed at execution (``tool-not-visible``)
and its handler never runs. Proof gap 1: the tools appear during ``before_agent_start`` and are
called on turn 1. Proof gap 2: an extension timer registers them between later turns.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import anyio
import pytest

from membrane import SubagentRuntime, SubagentStartRequest
from membrane.models.base import Message, ModelRequest, ModelResponse, ToolCall
from membrane.testing import FunctionModel
from membrane.tools.registry import RegistryChange

pytestmark = pytest.mark.anyio

PICKER = """\
---
name: picker
description: Searches with alpha, never writes remotely.
tools: Read, ext:alpha/alpha_search
---
Search with alpha_search.
"""

PREAMBLE = """
import asyncio
from pathlib import Path

from membrane import Tool

LOG = Path(__file__).with_name("alpha.log")


def log(line):
    with LOG.open("a") as handle:
        handle.write(line + "\\n")


def tool(name):
    async def handler(arguments, context):
        log(name + "-ran")
        return name + " ran"

    return Tool(name, "the " + name + " tool", {"type": "object", "properties": {}}, handler)


def register_both(ext):
    ext.register_tool(tool("alpha_search"))
    ext.register_tool(tool("alpha_write_remote"))
"""

AT_AGENT_START = """
def setup(ext):
    ext.on("before_agent_start", lambda event: register_both(ext))
"""

ON_A_TIMER = """
def setup(ext):
    timers = []

    def arm(event):
        # After the first turn, a timer of the event loop registers both tools: they appear
        # between two later provider turns, not at any hook.
        if not timers:
            timers.append(asyncio.get_running_loop().call_later(0, register_both, ext))

    ext.on("turn_end", arm)
"""


def _project(root: Path, extension: str) -> Path:
    agents = root / ".membrane" / "agents"
    agents.mkdir(parents=True)
    (agents / "picker.md").write_text(PICKER, encoding="utf-8")
    folder = root / ".membrane" / "extensions"
    folder.mkdir()
    (folder / "alpha.py").write_text(PREAMBLE + textwrap.dedent(extension), encoding="utf-8")
    (root / "notes.txt").write_text("alpha\n", encoding="utf-8")
    return root


def _calls(*names: str) -> ModelResponse:
    calls = tuple(
        ToolCall(f"c-{name}", name, {"file_path": "notes.txt"} if name == "Read" else {})
        for name in names
    )
    return ModelResponse(tool_calls=calls, stop_reason="tool_calls")


def _offered(request: ModelRequest) -> set[str]:
    return {str(entry["name"]) for entry in request.tools}


def _results(request: ModelRequest) -> dict[str, Message]:
    return {m.name or "": m for m in request.messages if m.role == "tool"}


def _code(message: Message) -> str | None:
    if not message.is_error:
        return None
    return str(json.loads(message.content)["error"]["code"])


def _ran(project: Path) -> list[str]:
    log = project / ".membrane" / "extensions" / "alpha.log"
    return log.read_text(encoding="utf-8").split() if log.exists() else []


async def test_gap_1_tools_registered_at_agent_start_are_narrowed_on_turn_1(
    tmp_path: Path, isolated_home: Path
) -> None:
    project = _project(tmp_path / "project", AT_AGENT_START)

    async def answer(request: ModelRequest) -> ModelResponse:
        if len(model.requests) == 1:
            return _calls("alpha_write_remote", "alpha_search")
        return ModelResponse(text="done")

    model = FunctionModel(answer)
    with anyio.fail_after(60):
        async with SubagentRuntime.open(project, model=model) as runtime:
            result = await runtime.run(SubagentStartRequest(agent_type="picker", task="search"))
    assert result.status == "completed"
    assert _offered(model.requests[0]) == {"Read", "alpha_search"}
    outcome = _results(model.requests[1])
    assert _code(outcome["alpha_write_remote"]) == "tool-not-visible"
    assert _code(outcome["alpha_search"]) is None
    assert _ran(project) == ["alpha_search-ran"]


async def test_gap_2_tools_an_extension_timer_registers_between_later_turns(
    tmp_path: Path, isolated_home: Path
) -> None:
    project = _project(tmp_path / "project", ON_A_TIMER)
    registered = anyio.Event()

    async def answer(request: ModelRequest) -> ModelResponse:
        turn = len(model.requests)
        if turn == 1:
            return _calls("Read")
        if turn == 2:
            # The timer armed at the end of turn 1 fires while this turn is in flight.
            await registered.wait()
            return _calls("Read")
        if turn == 3:
            return _calls("alpha_search", "alpha_write_remote")
        return ModelResponse(text="done")

    model = FunctionModel(answer)
    with anyio.fail_after(60):
        async with SubagentRuntime.open(project, model=model) as runtime:

            def heard(change: RegistryChange) -> None:
                if {"alpha_search", "alpha_write_remote"} <= set(runtime.registry.tools()):
                    registered.set()

            runtime.registry.subscribe(heard)
            result = await runtime.run(SubagentStartRequest(agent_type="picker", task="search"))
    assert result.status == "completed"
    assert _offered(model.requests[0]) == {"Read"}
    # The selected tool surfaces at the next turn; the unselected one never does.
    assert _offered(model.requests[2]) == {"Read", "alpha_search"}
    outcome = _results(model.requests[3])
    assert _code(outcome["alpha_search"]) is None
    assert _code(outcome["alpha_write_remote"]) == "tool-not-visible"
    assert _ran(project) == ["alpha_search-ran"]
