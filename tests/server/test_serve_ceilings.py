"""Ceilings flow down (DESIGN rule 13) out of process too: random chains of agents started
through a real ``membrane serve`` (``runs/start`` over its Unix socket, each child through its
parent's ``Task``) and through ``membrane mcp serve --agent`` (the official MCP client calls the
served agent's ``Task``). What each run was given is read from its ``published`` event in the
project's store; no descendant ever gets back what an ancestor took away: permission mode,
denied tools, the rules it passes down, the network and the writable paths.

The in-process property (with roles, ``toolFilter`` and host tools) is
tests/runtime/test_ceilings.py; these keep few examples, each a real server round trip.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from server_support import START_BOUND, Running, owner

from membrane.server import Client
from membrane.store.location import locate_state
from membrane.store.sqlite import SQLiteStore
from project_support import agent_file

#: The permission modes, most restrictive first.
ORDER = ("plan", "dontAsk", "default", "acceptEdits", "bypassPermissions")
MUTATING = frozenset({"Bash", "Edit", "Write"})
TOKENS = ("Read", "Grep", "Bash", "Edit", "Write")
CLI = "from membrane.cli.app import run; run()"


@dataclass(frozen=True)
class Level:
    """One agent of a chain, as its file writes it."""

    permission: str | None
    tools: tuple[str, ...] | None
    disallowed: tuple[str, ...]
    network: bool | None


LEVELS = st.builds(
    Level,
    permission=st.sampled_from((None, *ORDER)),
    tools=st.none() | st.lists(st.sampled_from(TOKENS), unique=True).map(tuple),
    disallowed=st.lists(st.sampled_from((*TOKENS, "Bash(rm:*)")), unique=True, max_size=2).map(
        tuple
    ),
    network=st.sampled_from((None, True, False)),
)
#: The two escapes of issue 32, always tried: a child's own bypassPermissions under a plan
#: parent, and a parent's denial of a tool its child lists (with its network off).
ESCAPES = (
    [Level("acceptEdits", ("Read",), (), None), Level("bypassPermissions", ("Bash",), (), None)],
    [
        Level(None, ("Read", "Bash"), ("Write", "Bash(rm:*)"), False),
        Level("bypassPermissions", ("Bash", "Write"), (), True),
        Level(None, ("Bash", "Edit"), (), None),
    ],
)
SETTINGS = settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _project(root: Path, levels: Sequence[Level]) -> Path:
    """A project with the chain's agents ``a0``..``aN`` (each may start the next one) and a
    script in which each starts the next through ``Task``, then ends."""
    for index, level in enumerate(levels):
        front: dict[str, object] = {}
        if level.permission is not None:
            front["permission"] = level.permission
        if level.tools is not None:
            front["tools"] = "[" + ", ".join(level.tools) + "]"
        if level.disallowed:
            front["disallowed_tools"] = "[" + ", ".join(f"'{t}'" for t in level.disallowed) + "]"
        if level.network is not None:
            front["network"] = level.network
        if index + 1 < len(levels):
            front["allowed_subagents"] = f"[a{index + 1}]"
        agent_file(root, f"a{index}", **front)
    agents: dict[str, list[dict[str, Any]]] = {}
    for index in range(len(levels)):
        turns: list[dict[str, Any]] = [{"text": "done"}]
        if index + 1 < len(levels):
            call = {"name": "Task", "arguments": {"agent": f"a{index + 1}", "task": "go"}}
            turns.insert(0, {"tool_calls": [call]})
        agents[f"a{index}"] = turns
    script = root / "script.json"
    script.write_text(json.dumps({"agents": agents}))
    return script


def _published(store_path: Path) -> dict[str, Mapping[str, Any]]:
    """Each run's ``published`` event, by the agent it ran."""
    store = SQLiteStore(store_path)
    try:
        return {str(e.data["agent_type"]): e.data for e in store.events() if e.kind == "published"}
    finally:
        store.close()


def _check(
    published: Mapping[str, Mapping[str, Any]],
    levels: Sequence[Level],
    *,
    modes: Mapping[int, str],
) -> None:
    """No run exceeds the ceiling of any agent above it. ``modes``: the effective mode of each
    ancestor that ran as no run of this store (the served agent of ``mcp serve``)."""
    for depth in range(len(levels)):
        child = published.get(f"a{depth}")
        if child is None:
            continue
        tools = set(child["tools"])
        mode = child["permission"]["value"]
        writable = child["sandbox"]["writable"]
        rules = {rule["rule"] for rule in child["ceiling"]["rules"]}
        if mode == "plan":
            assert not tools & MUTATING and not writable, child
        for above in range(depth):
            level = levels[above]
            ancestor = published.get(f"a{above}")
            above_mode = modes.get(above) or (ancestor or {}).get("permission", {}).get("value")
            assert above_mode is not None, f"a{above} started a{depth} without running"
            assert ORDER.index(mode) <= ORDER.index(above_mode), (above, depth, mode)
            for token in level.disallowed:
                if "(" in token:
                    assert token in rules, (token, above, depth)
                else:
                    assert token not in tools, (token, above, depth)
            if level.network is False:
                assert child["network"]["value"] is False, (above, depth)
                assert child["sandbox"]["network"] is False, (above, depth)
            if above_mode == "plan":
                assert not tools & MUTATING and not writable, (above, depth)


# -- membrane serve: runs/start over the socket ------------------------------------------------


async def _start_over_socket(running: Running, project: Path, script: Path) -> None:
    with anyio.fail_after(START_BOUND * 2):
        async with Client.connect(running.socket) as client:
            await client.request("initialize", {"identity": owner(running.home)})
            reply = await client.request("projects/add", {"root": str(project)})
            ids = {"projectId": reply["projectId"]}
            start = {**ids, "agent": "a0", "task": "go", "model": f"scripted:{script}"}
            run_id = (await client.request("runs/start", start))["run"]["run_id"]
            done = (await client.request("runs/wait", {**ids, "runId": run_id}))["run"]
    assert done["status"] == "completed", done


@SETTINGS
@example(levels=ESCAPES[0])
@example(levels=ESCAPES[1])
@given(levels=st.lists(LEVELS, min_size=2, max_size=3))
def test_no_run_started_through_the_socket_exceeds_an_ancestors_ceiling(
    runtime: Running, levels: list[Level]
) -> None:
    with tempfile.TemporaryDirectory(dir=runtime.home.parent) as folder:
        project = Path(folder) / "project"
        project.mkdir()
        script = _project(project, levels)
        anyio.run(_start_over_socket, runtime, project, script)
        published = _published(locate_state(project, home=runtime.home).path)
    assert "a0" in published, "the top-level run always starts"
    _check(published, levels, modes={})


# -- membrane mcp serve --agent a0: the served agent's Task -----------------------------------


@contextmanager
def _home() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as folder:
        yield Path(folder)


async def _task_over_mcp(project: Path, home: Path, script: Path, state: Path) -> bool:
    """Call the served ``a0``'s ``Task`` for ``a1``; whether ``Task`` was offered."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    argv = ["-c", CLI, "mcp", "serve", "--agent", "a0", "--model", f"scripted:{script}"]
    argv += ["--state", str(state), "--project", str(project)]
    params = StdioServerParameters(
        command=sys.executable, args=argv, env={"MEMBRANE_HOME": str(home)}
    )
    with (home / "serve.stderr").open("w", encoding="utf-8") as log, anyio.fail_after(90):
        async with (
            stdio_client(params, errlog=log) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            names = {tool.name for tool in (await session.list_tools()).tools}
            if "Task" not in names:
                return False
            done = await session.call_tool("Task", {"agent": "a1", "task": "go"})
            assert not done.is_error, done.content
            return True


def _served_mode(level: Level) -> str:
    """The served agent's effective mode: its own, or the default the settings leave it."""
    return level.permission if level.permission is not None else "default"


@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@example(levels=ESCAPES[0])
@example(levels=ESCAPES[1])
@given(levels=st.lists(LEVELS, min_size=2, max_size=3))
def test_no_run_an_mcp_served_agent_starts_exceeds_its_ceiling(levels: list[Level]) -> None:
    with _home() as base:
        project, home = base / "project", base / "home"
        project.mkdir()
        home.mkdir()
        script = _project(project, levels)
        state = base / "served.db"
        offered = anyio.run(_task_over_mcp, project, home, script, state)
        published = _published(state) if state.exists() else {}
    if not offered:
        assert not published
        return
    assert "a1" in published, "the served agent's Task started a1"
    _check(published, levels, modes={0: _served_mode(levels[0])})
