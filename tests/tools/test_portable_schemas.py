"""Every built-in tool is offered to a model in a form both OpenAI's strict structured outputs
and llama.cpp's JSON-schema-to-grammar conversion accept; calls are still validated against the
tool's whole schema."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import pytest

from membrane.builtin_tools import builtin_tools
from membrane.builtin_tools import declarations as declared
from membrane.builtin_tools.code_mode import code_mode_tool
from membrane.builtin_tools.skill import skill_tool
from membrane.durable.schedule_actions import schedule_tools
from membrane.durable.schedules import ScheduleBook
from membrane.errors import ToolArgumentsInvalid
from membrane.runtime.delegation import DelegationConfig, delegation_tools
from membrane.store.memory import MemoryStore
from membrane.tools import Scope, ToolContext, ToolRegistry
from membrane.tools.portable import (
    drop_optional_nulls,
    portability_problems,
    portable_schema,
    strict_schema,
)
from membrane.tools.registry import wire_schema
from membrane.tools.spec import Tool
from membrane.workflow.engine import WorkflowEngine
from membrane.workflow.planning import PLANNING, PlanningHost, planning_tools


class _Host:
    """Enough of a delegation host to build the tools (none is called here)."""

    def startable(self, allowed: Collection[str]) -> tuple[str, ...]:
        return ("reader", "writer")

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"not called here: {name}")


def every_builtin_tool() -> list[Tool]:
    tools = list(builtin_tools())
    tools.append(declared.browser_preview_tool("chromium"))
    registry = ToolRegistry()
    tools.append(code_mode_tool(Scope(registry, name="probe").view))
    tools.append(skill_tool({}))
    tools += delegation_tools(
        _Host(),  # type: ignore[arg-type]
        parent_id="lead",
        allowed=["reader", "writer"],
        config=DelegationConfig(),
    )
    store = MemoryStore()
    tools += planning_tools(WorkflowEngine(store, PLANNING), "lead", PlanningHost())
    tools += schedule_tools(ScheduleBook(store))
    return tools


def names(tools: Sequence[Tool]) -> list[str]:
    return [tool.name for tool in tools]


@pytest.mark.parametrize("tool", every_builtin_tool(), ids=names(every_builtin_tool()))
def test_every_builtin_wire_schema_is_strict_and_grammar_ready(tool: Tool) -> None:
    assert portability_problems(wire_schema(tool)["input_schema"]) == []


def _all_required(node: Any, path: str = "$") -> list[str]:
    """Strict mode's last rule: every object lists all of its properties in ``required``."""
    problems: list[str] = []
    if not isinstance(node, dict):
        return problems
    properties = node.get("properties")
    if isinstance(properties, dict):
        if sorted(node.get("required") or ()) != sorted(properties):
            problems.append(f"{path}: not every property is required")
        for name, child in properties.items():
            problems += _all_required(child, f"{path}.{name}")
    for keyword in ("items", "additionalProperties"):
        problems += _all_required(node.get(keyword), f"{path}.{keyword}")
    for index, option in enumerate(node.get("anyOf") or ()):
        problems += _all_required(option, f"{path}.anyOf[{index}]")
    return problems


@pytest.mark.parametrize("tool", every_builtin_tool(), ids=names(every_builtin_tool()))
def test_every_builtin_strict_form_meets_every_rule_of_strict_mode(tool: Tool) -> None:
    portable = wire_schema(tool)["input_schema"]
    strict = strict_schema(portable)
    assert portability_problems(strict) == []
    assert _all_required(strict) == []
    # A strict model writes null for every optional argument: left out again, nothing else.
    optional = set(portable.get("properties", {})) - set(portable.get("required", ()))
    nulls = dict.fromkeys(optional)
    assert drop_optional_nulls(nulls, portable) == {}


def test_the_check_finds_what_strict_mode_or_llama_cpp_cannot_use() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "pattern": "a+"},
            "ids": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            "seconds": {"type": "number", "exclusiveMinimum": 0},
            "when": {"type": "string", "format": "uri", "default": "now"},
            "nested": {"type": "object", "properties": {"x": {"type": "integer"}}},
        },
        "additionalProperties": False,
    }
    problems = portability_problems(schema)
    assert problems == [
        "$.properties.name: 'minLength' is not supported",
        "$.properties.name: a pattern must start with ^ and end with $",
        "$.properties.ids: 'uniqueItems' is not supported",
        "$.properties.seconds: bounds apply only to integers, not to a number",
        "$.properties.when: 'default' is not supported",
        "$.properties.when: format 'uri' is not supported",
        "$.properties.nested: an object must set additionalProperties: false",
    ]
    portable = portable_schema(schema)
    assert portability_problems(portable) == [
        "$.properties.nested: an object must set additionalProperties: false"
    ]
    assert portable["properties"]["name"] == {
        "type": "string",
        "description": "(non-empty; matching the regular expression a+)",
    }
    assert portable["properties"]["seconds"]["description"] == "(more than 0)"
    assert schema["properties"]["name"]["minLength"] == 1  # the tool's own schema is unchanged


@pytest.mark.anyio
async def test_a_call_is_still_validated_against_the_whole_schema(tmp_path: Any) -> None:
    registry = ToolRegistry()
    for tool in builtin_tools():
        registry.register(tool)
    view = Scope(registry, name="probe").view()
    [edit] = [entry for entry in view.schemas() if entry["name"] == "Edit"]
    assert "minLength" not in str(edit["input_schema"])  # the model is told in words ...
    assert "(non-empty)" in edit["input_schema"]["properties"]["old_string"]["description"]
    arguments = {"file_path": "a.txt", "old_string": "", "new_string": "x"}
    with pytest.raises(ToolArgumentsInvalid) as refused:  # ... and the call is still refused
        await view.call("Edit", arguments, ToolContext(agent="probe", cwd=tmp_path))
    assert refused.value.data["path"] == "$.old_string"


def test_one_of_becomes_any_of_and_a_lone_all_of_is_merged() -> None:
    # What pydantic and many MCP servers write: a union as oneOf, a reference wrapped in allOf.
    schema = {
        "type": "object",
        "properties": {
            "target": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            "mode": {"allOf": [{"$ref": "#/$defs/Mode"}], "description": "How."},
        },
        "$defs": {"Mode": {"type": "string", "enum": ["fast", "slow"]}},
        "additionalProperties": False,
    }
    portable = portable_schema(schema)
    assert portable["properties"]["target"] == {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert portable["properties"]["mode"] == {"$ref": "#/$defs/Mode", "description": "How."}
    assert portability_problems(portable) == []
