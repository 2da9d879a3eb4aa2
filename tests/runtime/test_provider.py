"""Honest providers: a control the provider does not advertise is rejected before anything
exists (no run, no lifecycle event, no store row, no listing), and a delegation cap a provider
cannot enforce fails when the tool is mounted."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from membrane.config.values import RoleSpec, Settings
from membrane.errors import UnsupportedCapability
from membrane.runtime import (
    ChildSpec,
    CommandProvider,
    DelegationConfig,
    InProcessProvider,
    ProviderChild,
    SubagentCapabilities,
    SubagentStartRequest,
)
from membrane.runtime.provider import SetupCallback
from membrane.testing import ScriptedModel

from .conftest import Project

SCRIPT = Path(__file__).parent / "scripts" / "fake_agent.py"
NOTHING = SubagentCapabilities(persona=False, tool_filter=False, depth_limit=False)


class CountingProvider:
    """An in-process provider that advertises ``capabilities`` and counts ``create`` calls."""

    def __init__(self, capabilities: SubagentCapabilities) -> None:
        self.name = "counting"
        self.capabilities = capabilities
        self.created = 0
        self._inner = InProcessProvider(ScriptedModel({"default": [{"text": "ok"}]}))

    async def create(self, request: ChildSpec, setup: SetupCallback) -> ProviderChild:
        self.created += 1
        return await self._inner.create(request, setup)


def test_the_in_process_provider_supports_every_control() -> None:
    provider = InProcessProvider(ScriptedModel({"default": [{"text": "ok"}]}))
    assert provider.capabilities == SubagentCapabilities(
        True, True, True, structured_output=True, resume=True
    )


def test_a_command_provider_advertises_persona_only_with_a_persona_slot() -> None:
    plain = CommandProvider([sys.executable, str(SCRIPT), "echo", "{task}"])
    slotted = CommandProvider([sys.executable, str(SCRIPT), "echo", "{task}", "{persona}"])
    assert plain.capabilities == SubagentCapabilities(False, False, False)
    assert slotted.capabilities == SubagentCapabilities(True, False, False)


UNSUPPORTED = [
    pytest.param({"persona": "You review."}, "persona", id="persona"),
    pytest.param({"persona": ""}, "persona", id="empty-persona"),
    pytest.param({"tool_filter": {"deny": ["Write"]}}, "tool_filter", id="tool-filter"),
    pytest.param({"max_depth": 2}, "max_depth", id="max-depth"),
    pytest.param({"role": "agent"}, "role", id="role-restriction"),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("controls", "name"), UNSUPPORTED)
async def test_an_unsupported_control_leaves_no_run_event_row_or_listing(
    project: Project, controls: dict[str, object], name: str
) -> None:
    project.agent("worker", tools="Read")
    project.settings = Settings(
        max_depth="provider-managed", roles={"agent": RoleSpec(deny=("Write",))}
    )
    provider = CountingProvider(NOTHING)
    async with project.runtime(provider) as runtime:  # type: ignore[arg-type]
        stream = runtime.events()
        with pytest.raises(UnsupportedCapability) as caught:
            await runtime.start(SubagentStartRequest("worker", "task", **controls))  # type: ignore[arg-type]
        assert caught.value.code == "unsupported-capability"
        assert caught.value.data["controls"] == [name]
        assert provider.created == 0, "no run"
        assert runtime.store.events() == [], "no lifecycle event"
        assert runtime.store.list_sessions() == [], "no store row"
        assert runtime.runs() == [], "no listing"
        # The stream's first event is the next, accepted start's: nothing came before it.
        accepted = await runtime.start(SubagentStartRequest("worker", "task"))
        with anyio.fail_after(5):
            first = await stream.__anext__()
        assert (first.run_id, first.kind) == (accepted.run_id, "published")
        stream.close()


@pytest.mark.anyio
async def test_the_gate_runs_before_validation_and_depth(project: Project) -> None:
    project.agent("worker")
    project.settings = Settings(max_depth="provider-managed")
    provider = CountingProvider(NOTHING)
    request = SubagentStartRequest(
        "worker", "task", tool_filter={"allow": ["NoSuchTool"]}, parent_id="nobody"
    )
    async with project.runtime(provider) as runtime:  # type: ignore[arg-type]
        with pytest.raises(UnsupportedCapability):
            await runtime.start(request)


@pytest.mark.anyio
async def test_supported_controls_pass_the_gate(project: Project) -> None:
    project.agent("worker")
    provider = CountingProvider(SubagentCapabilities(True, True, True))
    request = SubagentStartRequest(
        "worker", "task", persona="P", tool_filter={"deny": ["Write"]}, max_depth=1
    )
    async with project.runtime(provider) as runtime:  # type: ignore[arg-type]
        await runtime.start(request)
    assert provider.created == 1


def test_a_numeric_delegation_cap_on_a_provider_without_depth_limit_fails_at_mount(
    project: Project,
) -> None:
    provider = CommandProvider([sys.executable, str(SCRIPT), "echo", "{task}"])
    with pytest.raises(UnsupportedCapability) as caught:
        project.runtime(provider)
    assert "provider-managed" in caught.value.message
    with pytest.raises(UnsupportedCapability):
        DelegationConfig(max_depth=1).check_provider(provider)


def test_provider_managed_mounts_on_a_provider_without_depth_limit(project: Project) -> None:
    provider = CommandProvider([sys.executable, str(SCRIPT), "echo", "{task}"])
    runtime = project.runtime(provider, delegation=DelegationConfig(max_depth="provider-managed"))
    assert runtime.delegation.cap is None
    project.settings = Settings(max_depth="provider-managed")
    assert project.runtime(provider).delegation.cap is None


def test_a_delegation_persona_or_filter_needs_the_matching_capability(project: Project) -> None:
    provider = CommandProvider([sys.executable, str(SCRIPT), "echo", "{task}"])
    with pytest.raises(UnsupportedCapability):
        DelegationConfig(max_depth="provider-managed", persona="P").check_provider(provider)
