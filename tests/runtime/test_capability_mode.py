"""Each run's session log records its capability mode: ``full_tooling`` when the child reaches
Membrane's actions, ``fallback`` when the bridge is unavailable (seed 002)."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from membrane.config.values import Settings
from membrane.runtime import LifecycleEvent, SubagentStartRequest
from membrane.runtime.environment import socket_address
from membrane.runtime.providers.command import CommandProvider
from membrane.store.memory import MemoryStore
from membrane.testing import ScriptedModel

from .conftest import Project

pytestmark = pytest.mark.anyio

ECHO = [sys.executable, "-c", "import sys; print(sys.argv[1])", "{task}"]


def _modes(store: MemoryStore) -> dict[str, object]:
    return {h.agent: h.meta.get("capability_mode") for h in store.list_sessions()}


async def test_an_in_process_child_runs_with_full_tooling(project: Project) -> None:
    project.agent("worker")
    store = MemoryStore()
    model = ScriptedModel("default:\n  - text: done\n")
    async with project.runtime(model, store=store) as rt, rt.events() as stream:
        result = await rt.run(SubagentStartRequest("worker", "go"))
        published = [e async for e in _until(stream, "published")]
    assert result.status == "completed"
    assert _modes(store) == {"worker": "full_tooling"}
    assert published[0].data["capability_mode"] == "full_tooling"


async def test_a_command_child_without_a_bridge_is_in_fallback(project: Project) -> None:
    project.agent("worker")
    project.settings = Settings(max_depth="provider-managed")
    store = MemoryStore()
    async with project.runtime(CommandProvider(ECHO), store=store) as runtime:
        result = await runtime.run(SubagentStartRequest("worker", "hello"))
    assert result.status == "completed" and result.text.strip() == "hello"
    assert _modes(store) == {"worker": "fallback"}


@pytest.mark.parametrize("deep", [False, True], ids=["short-path", "path-over-107-bytes"])
async def test_a_command_child_with_a_token_and_a_live_socket_has_full_tooling(
    project: Project, tmp_path: Path, deep: bool
) -> None:
    project.agent("worker")
    project.settings = Settings(max_depth="provider-managed")
    folder = tmp_path / "sock"
    while deep and len(os.fsencode(str(folder))) <= 110:
        folder = folder / ("d" * 40)
    path = folder / "m.sock"
    path.parent.mkdir(mode=0o700, parents=True)

    def env(run_id: str, cwd: Path | None) -> dict[str, str]:
        return {"MEMBRANE_SOCKET": str(path), "MEMBRANE_TOKEN": f"mt1.{run_id}"}

    store = MemoryStore()
    async with project.runtime(CommandProvider(ECHO), store=store, child_env=env) as runtime:
        # No runtime answers there yet: the token alone reaches nothing.
        await runtime.run(SubagentStartRequest("worker", "first"))
        assert set(_modes(store).values()) == {"fallback"}
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            with socket_address(path) as address:  # a path over 107 bytes through its folder
                listener.bind(address)
            listener.listen()
            await runtime.run(SubagentStartRequest("worker", "second"))
    modes = sorted(str(h.meta.get("capability_mode")) for h in store.list_sessions())
    assert modes == ["fallback", "full_tooling"]
    assert os.path.exists(path)


async def _until(stream: AsyncIterator[LifecycleEvent], kind: str) -> AsyncIterator[LifecycleEvent]:
    async for event in stream:
        if event.kind == kind:
            yield event
            return
