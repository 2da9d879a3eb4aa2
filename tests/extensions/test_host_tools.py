"""A host's own tools: origin ``host``, granted by name in ``tools``, plain ``def`` run off the
event loop."""

from __future__ import annotations

import threading

import pytest

from membrane import parse_definition
from membrane.extensions import function_tool
from membrane.resolve import CallParams, Deployment, ParentContext, resolve
from membrane.tools.spec import ToolContext
from membrane.tools.view import ToolView

pytestmark = pytest.mark.anyio


@function_tool
def lookup(key: str) -> dict[str, str]:
    """Look a key up in the host's table."""
    return {"key": key, "thread": threading.current_thread().name}


async def test_a_plain_def_is_a_host_tool_run_off_the_event_loop() -> None:
    assert lookup.origin == "host"
    loop_thread = threading.current_thread().name
    result = await ToolView.of([lookup]).call("lookup", {"key": "k"}, ToolContext())
    assert isinstance(result, dict) and result["key"] == "k"
    assert result["thread"] != loop_thread


def test_a_host_tool_is_granted_by_its_exact_name_in_tools() -> None:
    tools = {"lookup": lookup}
    deployment = Deployment(registry_tools=tools)
    granted = parse_definition("---\nname: a\ntools: Read, lookup\n---\n", path="a.md", root="p")
    authority = resolve(granted, CallParams(), ParentContext(tools=tools), deployment)
    assert "lookup" in authority.callable
    assert not any("lookup" in w and "assignable" in w for w in authority.warnings)
    other = parse_definition("---\nname: b\ntools: Read\n---\n", path="b.md", root="p")
    authority = resolve(other, CallParams(), ParentContext(tools=tools), deployment)
    assert authority.left_out["lookup"] == "not selected"
    denied = parse_definition(
        "---\nname: c\ntools: lookup\ndisallowed_tools: lookup\n---\n", path="c.md", root="p"
    )
    authority = resolve(denied, CallParams(), ParentContext(tools=tools), deployment)
    assert authority.left_out["lookup"] == "disallowed_tools"
