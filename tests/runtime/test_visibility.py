"""Visibility is not authority (seed 001): composition is live and flat, not a grant lattice."""

from __future__ import annotations

import anyio
import pytest

from membrane.models.base import ModelRequest, ModelResponse
from membrane.runtime import SubagentStartRequest
from membrane.testing import FunctionModel

from .conftest import Project, echo_tool


def _idle() -> FunctionModel:
    async def wait(request: ModelRequest) -> ModelResponse:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    return FunctionModel(wait)


@pytest.mark.anyio
async def test_a_scope_local_child_tool_may_be_absent_from_the_parents_view(
    project: Project,
) -> None:
    project.agent("plain", tools="Read")
    project.agent("sublead", tools="Read", allowed_subagents="[plain]")
    async with project.runtime(_idle()) as runtime:
        parent = await runtime.start(SubagentStartRequest("plain", "parent"))
        child = await runtime.start(
            SubagentStartRequest("sublead", "child", parent_id=parent.run_id)
        )
        parent_view, child_view = runtime.view(parent.run_id), runtime.view(child.run_id)
    assert "Task" not in parent_view
    assert "Task" in child_view
    assert child_view.get("Task").origin == "scope"


@pytest.mark.anyio
async def test_a_deny_only_child_sees_later_global_tools_and_an_allow_list_does_not(
    project: Project,
) -> None:
    web = project.registry.extension("web")
    web.register_tool(echo_tool("search"))
    # `extensions: true`: the extension tools surface without a selector (DESIGN rule 2).
    project.agent("worker", tools="Read", extensions="true")
    async with project.runtime(_idle()) as runtime:
        deny_only = await runtime.start(
            SubagentStartRequest("worker", "a", tool_filter={"deny": ["Write"]})
        )
        allow_list = await runtime.start(
            SubagentStartRequest("worker", "b", tool_filter={"allow": ["Read", "search"]})
        )
        assert "fetch" not in runtime.view(deny_only.run_id)
        web.register_tool(echo_tool("fetch"))
        assert "fetch" in runtime.view(deny_only.run_id)
        assert "fetch" not in runtime.view(allow_list.run_id)
        assert "search" in runtime.view(allow_list.run_id)
        project.registry.remove("search")
        assert "search" not in runtime.view(allow_list.run_id)
        assert "search" not in runtime.view(deny_only.run_id)


@pytest.mark.anyio
async def test_a_childs_filter_does_not_narrow_its_siblings_or_its_parent(
    project: Project,
) -> None:
    project.agent("worker", tools="Read, Grep")
    async with project.runtime(_idle()) as runtime:
        parent = await runtime.start(SubagentStartRequest("worker", "p"))
        narrow = await runtime.start(
            SubagentStartRequest(
                "worker", "n", parent_id=parent.run_id, tool_filter={"allow": ["Read"]}
            )
        )
        sibling = await runtime.start(SubagentStartRequest("worker", "s", parent_id=parent.run_id))
        assert runtime.view(narrow.run_id).names == ("Read",)
        assert runtime.view(sibling.run_id).names == ("Grep", "Read")
        assert runtime.view(parent.run_id).names == ("Grep", "Read")
