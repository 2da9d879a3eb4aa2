"""Depth is an absolute tree cap (seed 001): validated everywhere, derived from the larger of the
durable header and the runtime's value, and enforced before a child exists."""

from __future__ import annotations

import dataclasses
import math

import anyio
import pytest

from membrane.errors import DepthLimitExceeded, InvalidDepth, UnknownRun
from membrane.models.base import ModelRequest, ModelResponse
from membrane.runtime import DelegationConfig, SubagentStartRequest
from membrane.store import MemoryStore, SessionHeader
from membrane.testing import FunctionModel

from .conftest import Project

BAD_DEPTHS = [
    pytest.param(-1, id="negative"),
    pytest.param(1.5, id="fraction"),
    pytest.param(-0.0, id="negative-zero"),
    pytest.param(math.nan, id="nan"),
    pytest.param(math.inf, id="infinity"),
    pytest.param(-math.inf, id="negative-infinity"),
    pytest.param(2**53, id="unsafe-integer"),
    pytest.param(True, id="boolean-true"),
    pytest.param(False, id="boolean-false"),
    pytest.param("3", id="numeric-string"),
    pytest.param("provider-managed", id="provider-managed-on-a-request"),
    pytest.param([3], id="list"),
]


@pytest.mark.parametrize("value", BAD_DEPTHS)
def test_a_start_request_rejects_every_value_outside_the_safe_integer_domain(value: object) -> None:
    with pytest.raises(InvalidDepth) as caught:
        SubagentStartRequest("worker", "task", max_depth=value)  # type: ignore[arg-type]
    assert caught.value.code == "invalid-depth"


@pytest.mark.parametrize("value", [0, 3, 2**53 - 1, 2.0])
def test_a_start_request_accepts_non_negative_safe_integers(value: int) -> None:
    assert SubagentStartRequest("worker", "task", max_depth=value).max_depth == value


@pytest.mark.parametrize(
    "value", [v for v in BAD_DEPTHS if v.id != "provider-managed-on-a-request"]
)
def test_the_delegation_config_rejects_the_same_values(value: object) -> None:
    with pytest.raises(InvalidDepth):
        DelegationConfig(max_depth=value)  # type: ignore[arg-type]


def test_the_delegation_config_defaults_to_three_and_accepts_provider_managed() -> None:
    assert DelegationConfig().cap == 3
    assert DelegationConfig(max_depth=7).cap == 7
    assert DelegationConfig(max_depth="provider-managed").cap is None


async def _chain(project: Project, runtime: object, length: int, *, cap: int | None) -> list[str]:
    ids: list[str] = []
    for _ in range(length):
        parent = ids[-1] if ids else None
        info = await runtime.start(  # type: ignore[attr-defined]
            SubagentStartRequest("waiter", "wait", parent_id=parent, max_depth=cap)
        )
        ids.append(info.run_id)
    return ids


def _waiting_model() -> FunctionModel:
    """Children that stay running until the runtime closes, so every parent is live."""

    async def wait_forever(request: ModelRequest) -> ModelResponse:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    return FunctionModel(wait_forever)


@pytest.mark.anyio
async def test_top_level_is_zero_and_each_child_is_its_parents_depth_plus_one(
    project: Project,
) -> None:
    project.agent("waiter")
    async with project.runtime(_waiting_model()) as runtime:
        ids = await _chain(project, runtime, 4, cap=3)
        depths = [runtime.get(run_id).depth for run_id in ids]
        stored = [runtime.store.get_header(run_id).delegation_depth for run_id in ids]
    assert depths == [0, 1, 2, 3]
    assert stored == [0, 1, 2, 3]


@pytest.mark.anyio
async def test_a_start_beyond_the_cap_is_rejected_before_the_child_exists(project: Project) -> None:
    project.agent("waiter")
    async with project.runtime(_waiting_model()) as runtime:
        ids = await _chain(project, runtime, 3, cap=2)
        before = runtime.store.list_sessions()
        with pytest.raises(DepthLimitExceeded) as caught:
            await runtime.start(
                SubagentStartRequest("waiter", "wait", parent_id=ids[-1], max_depth=2)
            )
        assert caught.value.code == "depth-limit-exceeded"
        assert caught.value.data["depth"] == 3
        assert caught.value.data["max_depth"] == 2
        assert runtime.store.list_sessions() == before
        assert len(runtime.runs()) == 3


@pytest.mark.anyio
async def test_a_cap_of_zero_admits_only_a_top_level_agent(project: Project) -> None:
    project.agent("waiter")
    async with project.runtime(_waiting_model()) as runtime:
        root = await runtime.start(SubagentStartRequest("waiter", "wait", max_depth=0))
        with pytest.raises(DepthLimitExceeded):
            await runtime.start(
                SubagentStartRequest("waiter", "wait", parent_id=root.run_id, max_depth=0)
            )


@pytest.mark.anyio
async def test_without_a_cap_a_direct_request_leaves_depth_unbounded(project: Project) -> None:
    project.agent("waiter")
    async with project.runtime(_waiting_model()) as runtime:
        ids = await _chain(project, runtime, 6, cap=None)
    assert len(ids) == 6


class _LoweredStore(MemoryStore):
    """A store whose stored depths read lower than the truth (a lost or stale row)."""

    def get_header(self, session_id: str) -> SessionHeader | None:
        header = super().get_header(session_id)
        if header is None:
            return None
        return dataclasses.replace(header, delegation_depth=0)


@pytest.mark.anyio
async def test_the_runtime_depth_wins_when_the_stored_header_is_lower(project: Project) -> None:
    project.agent("waiter")
    async with project.runtime(_waiting_model(), store=_LoweredStore()) as runtime:
        ids = await _chain(project, runtime, 3, cap=2)
        with pytest.raises(DepthLimitExceeded):
            await runtime.start(
                SubagentStartRequest("waiter", "wait", parent_id=ids[-1], max_depth=2)
            )


class _FixedDepthStore(MemoryStore):
    """A store holding one resumed parent whose stored depth is ``depth`` (unchecked)."""

    def __init__(self, depth: object) -> None:
        super().__init__()
        self.depth = depth

    def get_header(self, session_id: str) -> SessionHeader | None:
        if session_id != "resumed":
            return super().get_header(session_id)
        return SessionHeader("resumed", "waiter", None, self.depth, "running")  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_a_stored_parent_depth_counts_for_a_parent_not_running_here(
    project: Project,
) -> None:
    project.agent("waiter")
    async with project.runtime(_waiting_model(), store=_FixedDepthStore(3)) as runtime:
        with pytest.raises(DepthLimitExceeded):
            await runtime.start(
                SubagentStartRequest("waiter", "wait", parent_id="resumed", max_depth=3)
            )
        info = await runtime.start(
            SubagentStartRequest("waiter", "wait", parent_id="resumed", max_depth=4)
        )
        assert info.depth == 4


@pytest.mark.anyio
@pytest.mark.parametrize("stored", [-1, "2", 1.5, True, 2**60])
async def test_a_malformed_stored_parent_depth_is_rejected(
    project: Project, stored: object
) -> None:
    project.agent("waiter")
    async with project.runtime(_waiting_model(), store=_FixedDepthStore(stored)) as runtime:
        with pytest.raises(InvalidDepth):
            await runtime.start(SubagentStartRequest("waiter", "wait", parent_id="resumed"))
        assert runtime.runs() == []


@pytest.mark.anyio
async def test_a_derived_depth_that_would_overflow_is_rejected(project: Project) -> None:
    project.agent("waiter")
    async with project.runtime(_waiting_model(), store=_FixedDepthStore(2**53 - 1)) as runtime:
        with pytest.raises(InvalidDepth) as caught:
            await runtime.start(SubagentStartRequest("waiter", "wait", parent_id="resumed"))
        assert "2**53-1" in caught.value.message


@pytest.mark.anyio
async def test_a_parent_that_is_neither_running_nor_stored_is_unknown(project: Project) -> None:
    project.agent("waiter")
    async with project.runtime(_waiting_model()) as runtime:
        with pytest.raises(UnknownRun):
            await runtime.start(SubagentStartRequest("waiter", "wait", parent_id="nobody"))
