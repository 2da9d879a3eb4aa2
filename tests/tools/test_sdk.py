"""Loading the Code Mode SDK (``membrane.tools.sdk``): every call runs through the scope's live
view, so a tool the scope stops showing cannot be reached."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

from membrane import Restriction, Scope, Tool, ToolContext, ToolRegistry, ToolView
from membrane.errors import ToolNotVisible, ToolSpecError
from membrane.tools import load_sdk

#: ``class`` is a keyword: the SDK's parameter is ``class_``.
SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "class": {"type": "boolean"}},
    "required": ["path"],
}


def test_sdk_calls_run_through_the_view(make_tool: Callable[..., Tool]) -> None:
    registry = ToolRegistry()
    registry.register(make_tool("Read", schema=SCHEMA))
    registry.register(make_tool("Bash"))
    scope = Scope(registry, name="child")
    scope.restrict(Restriction(deny=["Bash"]))
    sdk = load_sdk(scope, ToolContext())
    assert not hasattr(sdk, "Bash")

    async def main() -> Any:
        return await sdk.Read(path="a.txt", class_=True)

    result = anyio.run(main)
    assert result["arguments"] == {"path": "a.txt", "class": True}


def test_sdk_bound_to_a_stale_name_still_cannot_reach_hidden_tools(
    make_tool: Callable[..., Tool],
) -> None:
    view = ToolView.of([make_tool("Read")])
    sdk = load_sdk(lambda: view, ToolContext())

    async def forged() -> Any:
        return await sdk._invoke("Bash", {})

    with pytest.raises(ToolNotVisible):
        anyio.run(forged)


@pytest.mark.parametrize("change", ["removed", "denied"])
def test_sdk_cannot_call_a_tool_the_scope_stopped_showing_after_loading(
    make_tool: Callable[..., Tool], change: str
) -> None:
    registry = ToolRegistry()
    registry.register(make_tool("Read"))
    registry.register(make_tool("Bash"))
    scope = Scope(registry, name="child")
    sdk = load_sdk(scope, ToolContext())
    assert hasattr(sdk, "Bash")
    if change == "removed":
        registry.remove("Bash")
    else:
        scope.restrict(Restriction(deny=["Bash"]))

    async def main() -> Any:
        return await sdk.Bash()

    with pytest.raises(ToolNotVisible) as caught:
        anyio.run(main)
    assert caught.value.code == "tool-not-visible"
    assert anyio.run(lambda: sdk.Read())["tool"] == "Read"


def test_sdk_refuses_a_frozen_view(make_tool: Callable[..., Tool]) -> None:
    with pytest.raises(ToolSpecError) as caught:
        load_sdk(ToolView.of([make_tool("Read")]), ToolContext())  # type: ignore[arg-type]
    assert caught.value.code == "tool-spec-invalid"
    assert "Scope" in caught.value.message
