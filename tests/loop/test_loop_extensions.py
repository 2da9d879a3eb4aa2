"""Live scope with real extensions: narrowing on every turn and veto at execution.

Each test writes ``<project>/.membrane/extensions/foo.py`` and loads it with the real loader, so
tools are registered by the extension's own ``setup`` and hooks at the moments seed 003 names.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import pytest

from membrane.extensions.hooks import ExtensionHooks
from membrane.extensions.load import discover_extensions, load_extension
from membrane.loop.agent_loop import AgentLoop
from membrane.loop.outcome import ChildOutcome
from membrane.models.base import Message, ModelRequest, ModelResponse, ToolCall
from membrane.testing import FunctionModel
from membrane.tools.registry import ToolRegistry
from membrane.tools.scope import Scope
from membrane.tools.spec import Tool, ToolContext

pytestmark = pytest.mark.anyio

PREAMBLE = """
from pathlib import Path

from membrane.tools.spec import Tool

LOG = Path(__file__).with_name("foo.log")


def tool(name, on_call=None):
    async def handler(arguments, context):
        if on_call is not None:
            on_call()
        return name + " ran"

    return Tool(
        name=name,
        description="the " + name + " tool",
        input_schema={"type": "object", "properties": {}},
        handler=handler,
    )


def log(line):
    with LOG.open("a") as handle:
        handle.write(line + "\\n")
"""


class Select:
    """The definition's ``ext:foo/TOOL`` selectors as a live predicate (label ``definition``)."""

    label = "definition"

    def __init__(self, extension: str, *tools: str) -> None:
        self.origin = f"extension:{extension}"
        self.tools = frozenset(tools)

    def admits(self, tool: Tool) -> bool:
        return tool.origin == self.origin and (not self.tools or tool.name in self.tools)

    def stamp(self) -> Hashable:
        return (self.origin, self.tools)


class Child:
    """A project with extension ``foo`` loaded into a registry, and a scope over it."""

    def __init__(self, project: Path, body: str, *selected: str) -> None:
        folder = project / ".membrane" / "extensions"
        folder.mkdir(parents=True)
        (folder / "foo.py").write_text(PREAMBLE + textwrap.dedent(body))
        self.log_path = folder / "foo.log"
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.registry = ToolRegistry()
        sources = discover_extensions(project, installed=False)
        self.extensions = [load_extension(sources["foo"], self.registry)]
        self.scope = Scope(self.registry, name="child")
        if selected:
            self.scope.restrict(Select("foo", *selected))

    def hooks(self) -> ExtensionHooks:
        return ExtensionHooks.from_extensions(self.extensions)

    def log(self) -> list[str]:
        return self.log_path.read_text().split() if self.log_path.exists() else []

    def loop(
        self, model: FunctionModel, *, messages: Sequence[Message] = (), task: str = "work"
    ) -> AgentLoop:
        return AgentLoop(
            model=model,
            scope=self.scope,
            agent="child",
            run_id="run-1",
            system="system",
            task=task,
            messages=messages,
            context=ToolContext(agent="child", run_id="run-1"),
            max_turns=10,
            hooks=self.hooks(),
            emit=self.record,
        )

    def record(self, kind: str, data: Any) -> None:
        self.events.append((kind, dict(data)))


def script(*turns: Sequence[str] | str) -> FunctionModel:
    """Each turn is a list of tool names to call, or a final text."""
    queue = list(turns)

    async def answer(request: ModelRequest) -> ModelResponse:
        turn = queue.pop(0)
        if isinstance(turn, str):
            return ModelResponse(text=turn)
        calls = tuple(
            ToolCall(id=f"t{len(model.requests)}-{i}", name=name, arguments={})
            for i, name in enumerate(turn)
        )
        return ModelResponse(tool_calls=calls, stop_reason="tool_calls")

    model = FunctionModel(answer)
    return model


def offered(request: ModelRequest) -> set[str]:
    return {entry["name"] for entry in request.tools}


def results(result: ChildOutcome) -> dict[str, Message]:
    return {m.name or "": m for m in result.messages if m.role == "tool"}


def code(message: Message) -> str | None:
    if not message.is_error:
        return None
    return str(json.loads(message.content)["error"]["code"])


async def test_a_tool_registered_during_session_start_is_active_on_turn_1(tmp_path: Path) -> None:
    child = Child(
        tmp_path,
        """
        def setup(ext):
            ext.on("session_start", lambda event: ext.register_tool(tool("foo_started")))
        """,
    )
    assert "foo_started" not in child.registry
    model = script(["foo_started"], "done")
    result = await child.loop(model).run()
    assert "foo_started" in offered(model.requests[0])
    assert results(result)["foo_started"].content == "foo_started ran"
    assert result.status == "completed"


@pytest.mark.parametrize("moment", ["tool handler", "turn_end hook"])
async def test_a_tool_registered_after_binding_is_active_on_the_next_turn(
    tmp_path: Path, moment: str
) -> None:
    body = {
        "tool handler": """
            def setup(ext):
                ext.register_tool(tool("foo_arm", lambda: ext.register_tool(tool("foo_next"))))
            """,
        "turn_end hook": """
            def setup(ext):
                ext.register_tool(tool("foo_arm"))

                async def later(event):
                    if event.turn == 1:
                        ext.register_tool(tool("foo_next"))

                ext.on("turn_end", later)
            """,
    }[moment]
    child = Child(tmp_path, body)
    model = script(["foo_arm"], ["foo_next"], "done")
    result = await child.loop(model).run()
    assert offered(model.requests[0]) == {"foo_arm"}
    assert offered(model.requests[1]) == {"foo_arm", "foo_next"}
    assert code(results(result)["foo_next"]) is None


LATE = """
def setup(ext):
    ext.register_tool(tool("foo_search", lambda: ext.register_tool(tool("foo_late"))))
"""


async def test_an_unselected_late_tool_stays_inactive_and_its_call_is_vetoed(
    tmp_path: Path,
) -> None:
    child = Child(tmp_path, LATE, "foo_search")
    model = script(["foo_search"], ["foo_late"], "done")
    result = await child.loop(model).run()
    assert "foo_late" in child.registry
    assert offered(model.requests[1]) == {"foo_search"}
    vetoed = results(result)["foo_late"]
    assert code(vetoed) == "tool-not-visible"
    assert "foo_search" not in vetoed.content
    assert ("vetoed_call", {"name": "foo_late", "id": "t2-0", "code": "tool-not-visible"}) in (
        child.events
    )
    assert result.status == "completed"


async def test_the_late_tool_stays_vetoed_after_a_resume(tmp_path: Path) -> None:
    child = Child(tmp_path, LATE, "foo_search")
    first = await child.loop(script(["foo_search"], "paused")).run()
    assert "foo_late" in child.registry
    # A resume: a new loop (and a new scope with the same definition) over the prior messages.
    child.scope = Scope(child.registry, name="child-resumed")
    child.scope.restrict(Select("foo", "foo_search"))
    model = script(["foo_late"], "done")
    resumed = await child.loop(model, messages=first.messages, task="continue").run()
    assert offered(model.requests[0]) == {"foo_search"}
    assert model.requests[0].messages[: len(first.messages)] == first.messages
    assert code(results(resumed)["foo_late"]) == "tool-not-visible"


async def test_a_tool_registered_while_the_request_is_in_flight_is_vetoed_at_execution(
    tmp_path: Path,
) -> None:
    child = Child(
        tmp_path,
        """
        def setup(ext):
            ext.register_tool(tool("foo_search"))
        """,
        "foo_search",
    )
    extension = child.extensions[0]

    async def racing(request: ModelRequest) -> ModelResponse:
        if len(model.requests) == 1:
            extension.api.register_tool(_plain_tool("foo_write_remote"))
            call = ToolCall(id="r1", name="foo_write_remote", arguments={})
            return ModelResponse(tool_calls=(call,))
        return ModelResponse(text="done")

    model = FunctionModel(racing)
    result = await child.loop(model).run()
    assert "foo_write_remote" not in offered(model.requests[0])
    assert code(results(result)["foo_write_remote"]) == "tool-not-visible"


async def test_an_existing_before_call_hook_still_runs_for_in_scope_tools(tmp_path: Path) -> None:
    child = Child(
        tmp_path,
        """
        def setup(ext):
            ext.register_tool(tool("foo_search"))
            ext.register_tool(tool("foo_danger", lambda: log("danger-ran")))
            ext.register_tool(tool("foo_hidden", lambda: log("hidden-ran")))

            def guard(event):
                log("hook-saw-" + event.tool_name)
                if event.tool_name == "foo_danger":
                    return {"block": True, "reason": "not on a Friday"}

            ext.on("before_tool_call", guard)
        """,
        "foo_search",
        "foo_danger",
    )
    model = script(["foo_search", "foo_danger", "foo_hidden"], "done")
    result = await child.loop(model).run()
    # The veto comes first: the hook never hears of the out-of-scope call.
    assert child.log() == ["hook-saw-foo_search", "hook-saw-foo_danger"]
    by_name = results(result)
    assert code(by_name["foo_search"]) is None
    blocked = by_name["foo_danger"]
    assert code(blocked) == "tool-blocked"
    assert "not on a Friday" in blocked.content and "'foo'" in blocked.content
    assert code(by_name["foo_hidden"]) == "tool-not-visible"


async def test_a_tool_removed_by_its_extension_is_gone_from_the_next_turn(tmp_path: Path) -> None:
    child = Child(
        tmp_path,
        """
        def setup(ext):
            ext.register_tool(tool("foo_once", lambda: ext.remove_tool("foo_once")))
        """,
    )
    model = script(["foo_once"], ["foo_once"], "done")
    result = await child.loop(model).run()
    assert offered(model.requests[1]) == set()
    assert [code(m) for m in result.messages if m.role == "tool"] == [None, "tool-not-visible"]


def _plain_tool(name: str) -> Tool:
    async def handler(arguments: Any, context: ToolContext) -> str:
        raise AssertionError(f"{name} must never run")

    return Tool(name=name, description=name, input_schema={"type": "object"}, handler=handler)
