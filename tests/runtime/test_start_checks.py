"""Checks that reject bad input before anything starts: response schemas whose references
point nowhere, malformed depth caps, and settings the runtime cannot run with."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from membrane.errors import InvalidDepth, InvalidRequest
from membrane.runtime import SubagentStartRequest
from membrane.runtime.depth import check_cap
from membrane.testing import ScriptedModel

from .conftest import Project


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#/definitions/missing"},
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/nowhere"}}},
        {"$ref": "https://example.invalid/schema.json"},
    ],
)
def test_a_response_schema_whose_ref_points_nowhere_is_refused(schema: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequest) as refused:
        SubagentStartRequest("worker", "t", response_schema=schema)
    assert refused.value.data["field"] == "response_schema"
    assert "$ref" in refused.value.data["path"]


def test_a_response_schema_with_a_resolvable_ref_is_accepted() -> None:
    schema = {"$defs": {"n": {"type": "integer"}}, "$ref": "#/$defs/n"}
    assert SubagentStartRequest("worker", "t", response_schema=schema).response_schema == schema


@pytest.mark.anyio
async def test_a_dangling_ref_is_refused_at_start_and_nothing_is_published(
    project: Project,
) -> None:
    project.agent("worker")
    request = SubagentStartRequest("worker", "t")
    bad = {"type": "object", "properties": {"a": {"$ref": "#/$defs/gone"}}}
    async with project.runtime(ScriptedModel({"default": [{"text": "{}"}]})) as runtime:
        with pytest.raises(InvalidRequest):
            # Past the constructor's check: start() checks the request again.
            forged = dataclasses.replace(request)
            object.__setattr__(forged, "response_schema", bad)
            await runtime.start(forged)
        assert runtime.runs() == [] and runtime.store.list_sessions() == []


@pytest.mark.parametrize("cap", [True, False, math.nan, math.inf, "3", -1, 1.5, -0.0])
def test_check_cap_refuses_a_malformed_cap_as_invalid_depth(cap: object) -> None:
    with pytest.raises(InvalidDepth):
        check_cap(1, cap, agent="worker", parent_id=None)


def test_check_cap_refuses_a_malformed_depth_as_invalid_depth() -> None:
    with pytest.raises(InvalidDepth):
        check_cap(True, 3, agent="worker", parent_id=None)


def test_check_cap_accepts_an_integral_float_cap_and_no_cap() -> None:
    check_cap(3, 3.0, agent="worker", parent_id=None)
    check_cap(10**6, None, agent="worker", parent_id=None)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("grace_turns", -1),
        ("grace_turns", True),
        ("grace_turns", 1.5),
        ("default_max_turns", 0),
        ("default_max_turns", "5"),
    ],
)
def test_settings_the_loop_cannot_run_with_are_refused_where_they_are_built(
    project: Project, field: str, value: object
) -> None:
    with pytest.raises(InvalidRequest) as refused:
        dataclasses.replace(project.settings, **{field: value})
    assert refused.value.data["field"] == field
    assert field in refused.value.message
