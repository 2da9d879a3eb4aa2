"""Start requests validate their own inputs: persona templates, tool filters, the other fields."""

from __future__ import annotations

import pytest

from membrane.agents.definition import UNSET
from membrane.errors import (
    EmptyToolFilter,
    InvalidPersona,
    InvalidRequest,
    ToolFilterError,
    UnknownToolInFilter,
)
from membrane.resolve import CallParams
from membrane.runtime import SubagentStartRequest
from membrane.testing import ScriptedModel
from membrane.tools.restriction import Restriction

from .conftest import Project


@pytest.mark.parametrize(
    "persona",
    [
        "You are {{nobody}}.",
        "You are {{ agent.name }}.",
        "An unterminated {{agent",
        "A stray }} brace",
        "{{}}",
    ],
)
def test_a_persona_placeholder_that_cannot_be_filled_is_rejected(persona: str) -> None:
    with pytest.raises(InvalidPersona) as caught:
        SubagentStartRequest("worker", "task", persona=persona)
    assert caught.value.code == "invalid-persona"


def test_a_persona_must_be_a_string() -> None:
    with pytest.raises(InvalidPersona):
        SubagentStartRequest("worker", "task", persona=42)  # type: ignore[arg-type]


def test_persona_defaults_to_unset_and_none_means_the_same() -> None:
    assert SubagentStartRequest("worker", "task").persona is UNSET
    assert SubagentStartRequest("worker", "task", persona=None).persona is None


def test_a_mapping_tool_filter_becomes_a_restriction_labelled_tool_filter() -> None:
    request = SubagentStartRequest("worker", "task", tool_filter={"deny": ["Write"]})
    assert isinstance(request.tool_filter, Restriction)
    assert request.tool_filter.label == "toolFilter"
    assert request.tool_filter.deny == frozenset({"Write"})


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("agent_type", ""),
        ("task", "   "),
        ("call", {"model": "x"}),
        ("parent_id", ""),
        ("request_id", 3),
        ("background", "yes"),
        ("response_schema", {"type": "no-such-type"}),
        ("response_schema", "object"),
        ("tool_filter", ["Read"]),
    ],
)
def test_malformed_fields_are_invalid_requests(field: str, value: object) -> None:
    arguments: dict[str, object] = {"agent_type": "worker", "task": "task", field: value}
    with pytest.raises(InvalidRequest):
        SubagentStartRequest(**arguments)  # type: ignore[arg-type]


def test_a_filter_mapping_with_an_unknown_key_is_a_tool_filter_error() -> None:
    with pytest.raises(ToolFilterError):
        SubagentStartRequest("worker", "task", tool_filter={"allow": ["Read"], "only": ["Grep"]})


def test_background_that_contradicts_the_call_is_rejected() -> None:
    with pytest.raises(InvalidRequest):
        SubagentStartRequest(
            "worker", "task", call=CallParams(run_in_background=False), background=True
        )


def _model() -> ScriptedModel:
    return ScriptedModel({"default": [{"text": "ok"}]})


@pytest.mark.anyio
async def test_a_filter_with_neither_allow_nor_deny_is_rejected_at_start(project: Project) -> None:
    project.agent("worker", tools="Read, Grep")
    request = SubagentStartRequest("worker", "task", tool_filter=Restriction())
    async with project.runtime(_model()) as runtime:
        with pytest.raises(EmptyToolFilter) as caught:
            await runtime.start(request)
        assert caught.value.code == "empty-tool-filter"
        assert runtime.runs() == []


@pytest.mark.anyio
async def test_a_filter_naming_an_unknown_tool_is_rejected_with_a_suggestion(
    project: Project,
) -> None:
    project.agent("worker", tools="Read, Grep")
    request = SubagentStartRequest("worker", "task", tool_filter={"allow": ["Reed"]})
    async with project.runtime(_model()) as runtime:
        with pytest.raises(UnknownToolInFilter) as caught:
            await runtime.start(request)
        assert caught.value.data["suggestion"] == "Read"
        assert runtime.store.list_sessions() == []


@pytest.mark.anyio
async def test_a_filter_naming_a_scope_local_delegation_tool_is_rejected(
    project: Project,
) -> None:
    project.agent("worker", tools="Read")
    request = SubagentStartRequest("worker", "task", tool_filter={"deny": ["Task"]})
    async with project.runtime(_model()) as runtime:
        with pytest.raises(UnknownToolInFilter):
            await runtime.start(request)


@pytest.mark.anyio
async def test_the_filter_is_checked_against_the_live_registry(project: Project) -> None:
    from .conftest import echo_tool

    project.agent("worker", tools="Read")
    request = SubagentStartRequest("worker", "task", tool_filter={"deny": ["Search"]})
    async with project.runtime(_model()) as runtime:
        with pytest.raises(UnknownToolInFilter):
            await runtime.start(request)
        project.registry.register(echo_tool("Search", origin="extension:web"))
        info = await runtime.start(request)
        assert info.agent == "worker"


@pytest.mark.anyio
async def test_start_validates_a_request_that_bypassed_its_constructor(project: Project) -> None:
    project.agent("worker")
    request = SubagentStartRequest("worker", "task")
    object.__setattr__(request, "persona", "{{missing}}")
    async with project.runtime(_model()) as runtime:
        with pytest.raises(InvalidPersona):
            await runtime.start(request)
        with pytest.raises(InvalidRequest):
            await runtime.start({"agent_type": "worker", "task": "x"})  # type: ignore[arg-type]
