"""Ceilings flow down (DESIGN rule 13): what a host or an ancestor takes away stays taken away.

Each test starts real chains of children on a real runtime (the model is the only double) and
reads what each child was really given: the tools its model was offered, and its ``published``
event (permission mode, network, the sandbox's writable set). The property test draws chains of
permission modes, denials, network choices, roles and ``toolFilter``s, and starts each child
either through its parent's ``Task`` tool or through the Python API under its parent's run id.
"""

from __future__ import annotations

import itertools
import json
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from membrane.builtin_tools import register_builtin_tools
from membrane.config.values import RoleSpec, Settings
from membrane.errors import MembraneError
from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.runtime import SubagentStartRequest
from membrane.store import SQLiteStore
from membrane.testing import FunctionModel
from membrane.tools.registry import ToolRegistry

from .conftest import Project, echo_tool, tool_results

pytestmark = pytest.mark.anyio

#: The permission modes, most restrictive first (DESIGN rule 13).
ORDER = ("plan", "dontAsk", "default", "acceptEdits", "bypassPermissions")
MUTATING = frozenset({"Bash", "Edit", "Write", "send_money", "mcp__bank__pay"})
GLOBAL = ("Read", "Glob", "Grep", "Bash", "Edit", "Write", "lookup", "send_money", "mcp__bank__pay")
ROLES = {
    "reader": RoleSpec(allow=("Read", "Glob", "Grep", "lookup")),
    "no-shell": RoleSpec(deny=("Bash",)),
}


def _registry() -> ToolRegistry:
    registry = ToolRegistry()
    for name in ("Read", "Glob", "Grep"):
        registry.register(echo_tool(name))
    for name in ("Bash", "Edit", "Write"):
        registry.register(echo_tool(name, mutating=True))
    registry.register(echo_tool("lookup", origin="host"))
    registry.register(echo_tool("send_money", origin="host", mutating=True))
    registry.register(echo_tool("mcp__bank__pay", origin="mcp:bank", mutating=True))
    return registry


@dataclass(frozen=True)
class Level:
    """One agent of a chain, as its file writes it."""

    permission: str | None
    tools: tuple[str, ...] | None
    disallowed: tuple[str, ...]
    network: bool | None
    #: How its parent starts it: ``task`` (the parent's Task tool) or ``api`` (the host's
    #: ``runtime.start`` under the parent's run id, while the parent runs).
    via: str = "task"


@dataclass
class Seen:
    """What one started child really had."""

    agent: str
    run_id: str
    offered: frozenset[str]
    event: Mapping[str, Any] = field(default_factory=dict)


def _frontmatter(level: Level, index: int, last: bool) -> dict[str, object]:
    front: dict[str, object] = {}
    if level.permission is not None:
        front["permission"] = level.permission
    if level.tools is not None:
        front["tools"] = "[" + ", ".join(f"'{t}'" for t in level.tools) + "]"
    if level.disallowed:
        front["disallowed_tools"] = "[" + ", ".join(f"'{t}'" for t in level.disallowed) + "]"
    if level.network is not None:
        front["network"] = level.network
    if not last:
        front["allowed_subagents"] = f"[a{index + 1}]"
    return front


async def _run_chain(
    root: Path,
    home: Path,
    levels: Sequence[Level],
    *,
    role: str | None,
    tool_filter: Mapping[str, list[str]] | None,
) -> list[Seen]:
    project = Project(
        root=root, home=home, registry=_registry(), settings=Settings(roles=dict(ROLES))
    )
    for index, level in enumerate(levels):
        project.agent(f"a{index}", **_frontmatter(level, index, index == len(levels) - 1))
    seen: dict[str, Seen] = {}
    runtime_box: list[Any] = []
    ids = itertools.count()

    async def answer(request: ModelRequest) -> ModelResponse:
        index = int(request.agent[1:])
        if request.agent not in seen:
            offered = frozenset(str(t["name"]) for t in request.tools)
            seen[request.agent] = Seen(request.agent, request.run_id, offered)
        if any(m.role == "tool" for m in request.messages) or index + 1 >= len(levels):
            return ModelResponse(text="done")
        child = f"a{index + 1}"
        if levels[index + 1].via == "task":
            arguments = {"agent": child, "task": "go"}
            return ModelResponse(tool_calls=(ToolCall(f"c{next(ids)}", "Task", arguments),))
        runtime = runtime_box[0]
        try:
            info = await runtime.start(
                SubagentStartRequest(child, "go", parent_id=request.run_id, role=role)
            )
            await runtime.wait(info.run_id)
        except MembraneError:
            pass  # a start the ceiling or the depth cap refuses: nothing ran
        return ModelResponse(text="done")

    async with project.runtime(FunctionModel(answer)) as runtime:
        runtime_box.append(runtime)
        with anyio.fail_after(30):
            await runtime.run(SubagentStartRequest("a0", "go", tool_filter=tool_filter, role=role))
        for item in seen.values():
            events = runtime.store.events(session_id=item.run_id)
            item.event = next(e.data for e in events if e.kind == "published")
    return [seen[f"a{i}"] for i in range(len(levels)) if f"a{i}" in seen]


def _denied(token: str, name: str) -> bool:
    if token.endswith("__*"):
        return name.startswith(token[:-1])
    return token == name


def _check(
    chain: Sequence[Seen],
    levels: Sequence[Level],
    *,
    role: str | None,
    tool_filter: Mapping[str, list[str]] | None,
) -> None:
    for depth, child in enumerate(chain):
        tools = child.offered
        assert tools == frozenset(child.event["tools"]), "the model is offered what was published"
        mode = child.event["permission"]["value"]
        writable = child.event["sandbox"]["writable"]
        if tool_filter is not None:
            assert not tools & set(tool_filter.get("deny", ()))
            if "allow" in tool_filter:
                assert tools & set(GLOBAL) <= set(tool_filter["allow"])
        if role == "reader":
            assert tools & set(GLOBAL) <= {"Read", "Glob", "Grep", "lookup"}
        if role == "no-shell":
            assert "Bash" not in tools
        if mode == "plan":
            assert not tools & MUTATING
        for above, ancestor in enumerate(chain[:depth]):
            ancestor_mode = ancestor.event["permission"]["value"]
            assert ORDER.index(mode) <= ORDER.index(ancestor_mode), (above, depth)
            for token in levels[above].disallowed:
                assert not any(_denied(token, name) for name in tools), (token, above, depth)
            if levels[above].network is False:
                assert child.event["network"]["value"] is False
            if ancestor_mode == "plan":
                assert not tools & MUTATING and not writable


MODES = st.sampled_from((None, *ORDER))
TOKENS = ("Read", "Grep", "Bash", "Edit", "Write", "lookup", "send_money", "mcp__bank__pay")
LEVELS = st.builds(
    Level,
    permission=MODES,
    tools=st.none() | st.lists(st.sampled_from((*TOKENS, "mcp__bank__*")), unique=True).map(tuple),
    disallowed=st.lists(
        st.sampled_from((*TOKENS, "mcp__bank__*", "Bash(rm:*)")), unique=True, max_size=3
    ).map(tuple),
    network=st.sampled_from((None, True, False)),
    via=st.sampled_from(("task", "api")),
)
FILTERS = (
    st.none()
    | st.fixed_dictionaries(
        {"deny": st.lists(st.sampled_from(GLOBAL), unique=True, min_size=1, max_size=3)}
    )
    | st.fixed_dictionaries({"allow": st.lists(st.sampled_from(GLOBAL), unique=True, min_size=1)})
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
# The two escapes of issue 32, always tried: a child's own bypassPermissions under a plan
# parent, and a parent's denial of a tool its child lists.
@example(
    levels=[
        Level("plan", ("Read",), (), None),
        Level("bypassPermissions", ("Bash", "Write"), (), None),
    ],
    role=None,
    tool_filter=None,
)
@example(
    levels=[
        Level(None, ("Read",), ("Bash", "mcp__bank__*"), False),
        Level(None, ("Bash", "mcp__bank__pay"), (), True, via="api"),
    ],
    role=None,
    tool_filter={"deny": ["send_money"]},
)
@given(
    levels=st.lists(LEVELS, min_size=2, max_size=3),
    role=st.sampled_from((None, "reader", "no-shell")),
    tool_filter=FILTERS,
)
def test_no_descendant_ever_exceeds_an_ancestors_ceiling(
    isolated_home: Path,
    levels: list[Level],
    role: str | None,
    tool_filter: dict[str, list[str]] | None,
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "project"
        root.mkdir()
        chain = anyio.run(
            lambda: _run_chain(root, isolated_home, levels, role=role, tool_filter=tool_filter)
        )
    assert chain, "the top-level child always runs"
    _check(chain, levels, role=role, tool_filter=tool_filter)


def _published(store: Any, run_id: str) -> list[Mapping[str, Any]]:
    return [e.data for e in store.events(session_id=run_id) if e.kind == "published"]


async def test_a_resumed_child_and_a_child_of_a_stored_parent_keep_the_stored_ceiling(
    isolated_home: Path, tmp_path: Path
) -> None:
    root = tmp_path / "project"
    root.mkdir()
    project = Project(root=root, home=isolated_home, registry=_registry())
    project.agent("lead", tools="[Read]", permission="plan", allowed_subagents="[writer]")
    project.agent("writer", tools="[Read, Bash, Write]", permission="bypassPermissions")
    store = SQLiteStore(tmp_path / "state.db")
    runs: dict[str, str] = {}
    live: list[Any] = []

    async def answer(request: ModelRequest) -> ModelResponse:
        runs.setdefault(request.agent, request.run_id)
        if request.agent == "lead" and not live[1:]:
            # A plan lead has no Task (it is mutating): its host starts the writer under it.
            live.append(request.run_id)
            runtime = live[0]
            info = await runtime.start(
                SubagentStartRequest("writer", "write", parent_id=request.run_id)
            )
            await runtime.wait(info.run_id)
        return ModelResponse(text="done")

    model = FunctionModel(answer)
    async with project.runtime(model, store=store) as runtime:
        live.append(runtime)
        with anyio.fail_after(30):
            lead = await runtime.run(SubagentStartRequest("lead", "plan"))
    writer = runs["writer"]
    first = _published(store, writer)[0]
    assert first["permission"] == {"value": "plan", "source": f"ceiling:{lead.run_id}"}
    assert first["tools"] == ["Read"]

    # A new runtime: neither run is live. The resumed writer is held to its stored ceiling.
    async with project.runtime(model, store=store) as runtime:
        await runtime.resume(writer, "go on")
        assert runtime.view(writer).names == ("Read",)
        with anyio.fail_after(30):
            await runtime.wait(writer)
    assert _published(store, writer)[1]["tools"] == ["Read"]
    store.close()


async def test_an_ancestors_deny_rule_holds_for_a_child_that_lists_the_tool(
    isolated_home: Path, tmp_path: Path
) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "victim.txt").write_text("keep\n")
    registry = ToolRegistry()
    register_builtin_tools(registry)
    project = Project(root=root, home=isolated_home, registry=registry)
    project.agent(
        "lead", tools="[Read]", disallowed_tools="['Bash(rm:*)']", allowed_subagents="[worker]"
    )
    project.agent("worker", tools="[Read, Bash, Write]", permission="bypassPermissions")

    async def answer(request: ModelRequest) -> ModelResponse:
        if any(m.role == "tool" for m in request.messages):
            return ModelResponse(text="done")
        if request.agent == "lead":
            arguments = {"agent": "worker", "task": "clean up"}
            return ModelResponse(tool_calls=(ToolCall("t-1", "Task", arguments),))
        command = {"command": "rm -f victim.txt"}
        return ModelResponse(tool_calls=(ToolCall("b-1", "Bash", command),))

    model = FunctionModel(answer)
    async with project.runtime(model) as runtime:
        with anyio.fail_after(60):
            await runtime.run(SubagentStartRequest("lead", "clean"))
    results = tool_results(model, "worker")
    assert [json.loads(m.content)["error"]["code"] for m in results] == ["tool-call-denied"]
    assert "Bash(rm:*)" in results[0].content
    assert (root / "victim.txt").read_text() == "keep\n"


LEAD_WITH_RULES = """\
---
name: lead
description: Pays.
tools: [send_money]
allowed_subagents: [payer]
rules:
  - tool: send_money
    allow:
      amount: {max: 100}
    reason: at most 100
  - tool: send_money
    deny:
      recipient: {equals: eve}
    reason: never eve
---
Pay.
"""


async def test_an_ancestors_argument_rules_hold_for_a_child_without_rules(
    isolated_home: Path, tmp_path: Path
) -> None:
    root = tmp_path / "project"
    (root / ".membrane" / "agents").mkdir(parents=True)
    (root / ".membrane" / "agents" / "lead.md").write_text(LEAD_WITH_RULES, encoding="utf-8")
    project = Project(root=root, home=isolated_home, registry=_registry())
    project.agent("payer", tools="[send_money]", permission="bypassPermissions")
    payments = [
        {"recipient": "bob", "amount": 50},
        {"recipient": "bob", "amount": 500},
        {"recipient": "eve", "amount": 5},
    ]

    async def answer(request: ModelRequest) -> ModelResponse:
        if any(m.role == "tool" for m in request.messages):
            return ModelResponse(text="done")
        if request.agent == "lead":
            arguments = {"agent": "payer", "task": "pay"}
            return ModelResponse(tool_calls=(ToolCall("t-1", "Task", arguments),))
        calls = tuple(ToolCall(f"p-{i}", "send_money", a) for i, a in enumerate(payments))
        return ModelResponse(tool_calls=calls)

    model = FunctionModel(answer)
    async with project.runtime(model) as runtime:
        with anyio.fail_after(60):
            await runtime.run(SubagentStartRequest("lead", "pay"))
    results = tool_results(model, "payer")
    codes = [json.loads(m.content)["error"]["code"] if m.is_error else None for m in results]
    # bypassPermissions is capped by the lead's default mode, so the ask is not waved through.
    assert codes == [None, "approval-unavailable", "tool-call-denied"]
    assert "never eve" in results[2].content


async def test_a_child_of_a_worktree_child_writes_inside_that_worktree_not_the_main_checkout(
    repo: Project,
) -> None:
    registry = ToolRegistry()
    register_builtin_tools(registry)
    repo.registry = registry
    repo.agent("lead", tools="[Read, Write]", isolation="worktree", allowed_subagents="[writer]")
    repo.agent("writer", tools="[Read, Write]")
    folders: dict[str, str] = {}

    async def answer(request: ModelRequest) -> ModelResponse:
        if any(m.role == "tool" for m in request.messages):
            return ModelResponse(text="done")
        if request.agent == "lead":
            arguments = {"agent": "writer", "task": "write"}
            return ModelResponse(tool_calls=(ToolCall("t-1", "Task", arguments),))
        content = {"file_path": "out.txt", "content": "written\n"}
        return ModelResponse(tool_calls=(ToolCall("w-1", "Write", content),))

    async with repo.runtime(FunctionModel(answer)) as runtime:
        with anyio.fail_after(60):
            lead = await runtime.run(SubagentStartRequest("lead", "delegate"))
        for run_id in (lead.run_id, *[r.run_id for r in runtime.runs(parent_id=lead.run_id)]):
            data = _published(runtime.store, run_id)[0]
            folders[data["agent_type"]] = data["sandbox"]["checkout"]
    assert not (repo.root / "out.txt").exists(), "the main checkout is outside the lead's reach"
    assert folders["writer"] == folders["lead"] != str(repo.root.resolve())


async def test_a_start_requests_rules_hold_for_the_whole_subtree(
    isolated_home: Path, tmp_path: Path
) -> None:
    root = tmp_path / "project"
    root.mkdir()
    project = Project(root=root, home=isolated_home, registry=_registry())
    project.agent("lead", tools="[Read]", allowed_subagents="[payer]")
    project.agent("payer", tools="[send_money]")
    rules = [{"tool": "send_money", "deny": {"amount": {"min": 1000}}, "reason": "no big ones"}]

    async def answer(request: ModelRequest) -> ModelResponse:
        if any(m.role == "tool" for m in request.messages):
            return ModelResponse(text="done")
        if request.agent == "lead":
            arguments = {"agent": "payer", "task": "pay"}
            return ModelResponse(tool_calls=(ToolCall("t-1", "Task", arguments),))
        calls = (
            ToolCall("p-0", "send_money", {"recipient": "bob", "amount": 5000}),
            ToolCall("p-1", "send_money", {"recipient": "bob", "amount": 5}),
        )
        return ModelResponse(tool_calls=calls)

    model = FunctionModel(answer)
    async with project.runtime(model) as runtime:
        with anyio.fail_after(60):
            await runtime.run(SubagentStartRequest("lead", "pay", rules=rules))
    results = tool_results(model, "payer")
    codes = [json.loads(m.content)["error"]["code"] if m.is_error else None for m in results]
    assert codes == ["tool-call-denied", None]
    assert "no big ones" in results[0].content
