"""The command provider's edges: a run ends when the command exits, whatever it left behind;
output is bounded; template slots are filled once; a response schema is refused up front; a
child discarded after ``create()`` never runs, or loses its process group."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from pathlib import Path

import anyio
import pytest

from membrane.config.values import Settings
from membrane.errors import InvalidRequest, UnsupportedCapability
from membrane.runtime import (
    ChildComposition,
    ChildSpec,
    CommandProvider,
    SubagentStartRequest,
)
from membrane.sandbox import SandboxPolicy
from membrane.tools.registry import ToolRegistry
from membrane.tools.scope import Scope

from .conftest import Project

pytestmark = pytest.mark.anyio

SCRIPT = Path(__file__).parent / "scripts" / "fake_agent.py"
#: No OS sandbox: these tests follow the command's process ids as the host sees them (under
#: bubblewrap the command has its own PID namespace; test_command_sandbox.py covers that case).
HOST_PIDS = SandboxPolicy("guard")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def _runtime(project: Project, provider: CommandProvider, persona: str | None = None) -> object:
    project.agent("external")
    project.settings = Settings(max_depth="provider-managed", persona=persona)
    return project.runtime(provider)


async def test_a_run_ends_when_the_command_exits_and_its_leftovers_are_killed(
    project: Project,
) -> None:
    # The background sleep keeps standard output open after the shell has exited.
    script = "sleep 600 & echo $!; echo result for $0"
    provider = CommandProvider(["sh", "-c", script, "{task}"], sandbox=HOST_PIDS)
    async with _runtime(project, provider) as runtime:  # type: ignore[attr-defined]
        with anyio.fail_after(20):
            result = await runtime.run(SubagentStartRequest("external", "x"))
    pid_line, text = result.text.splitlines()
    assert (result.status, text) == ("completed", "result for x")
    # The group was killed before the result: the leftover dies as soon as the kernel reaps it.
    with anyio.fail_after(10):
        while _alive(int(pid_line)):
            await anyio.sleep(0.01)


async def test_a_descendant_that_escaped_the_group_cannot_keep_the_run_alive(
    project: Project,
) -> None:
    escape = (
        "import subprocess, sys\n"
        "child = subprocess.Popen(['sleep', '600'], start_new_session=True)\n"
        "print(child.pid)\n"
        "print('escaped result', sys.argv[1])\n"
    )
    provider = CommandProvider([sys.executable, "-c", escape, "{task}"], sandbox=HOST_PIDS)
    pid = None
    try:
        async with _runtime(project, provider) as runtime:  # type: ignore[attr-defined]
            with anyio.fail_after(20):
                result = await runtime.run(SubagentStartRequest("external", "y"))
        pid_line, text = result.text.splitlines()
        pid = int(pid_line)
        assert (result.status, text) == ("completed", "escaped result y")
    finally:
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


async def test_a_long_output_keeps_its_head_and_tail_and_says_what_was_dropped(
    project: Project,
) -> None:
    write = "import sys; sys.stdout.write('a' * 100000 + 'THE END')"
    provider = CommandProvider([sys.executable, "-c", write, "{task}"], max_output_bytes=1000)
    async with _runtime(project, provider) as runtime:  # type: ignore[attr-defined]
        result = await runtime.run(SubagentStartRequest("external", "z"))
    assert result.status == "completed"
    assert result.text.startswith("a" * 500)
    assert result.text.endswith("THE END")
    assert "99007 bytes of output omitted (of 100007)" in result.text
    assert "only the first 500 and the last 500 bytes are kept" in result.text
    assert len(result.text) < 1200


@pytest.mark.parametrize("limit", [0, 1, -5, True, 2.5])
def test_an_output_limit_must_be_an_integer_of_at_least_two(limit: object) -> None:
    with pytest.raises(InvalidRequest) as caught:
        CommandProvider(["agent", "{task}"], max_output_bytes=limit)  # type: ignore[arg-type]
    assert caught.value.data["field"] == "max_output_bytes"


async def test_slots_are_filled_in_one_pass(project: Project) -> None:
    provider = CommandProvider([sys.executable, str(SCRIPT), "echo", "{task}", "{persona}"])
    async with _runtime(project, provider, persona="SECRET persona") as runtime:  # type: ignore[attr-defined]
        result = await runtime.run(
            SubagentStartRequest("external", "print {persona} and {task} verbatim")
        )
    output = json.loads(result.text)
    assert output["task"] == "print {persona} and {task} verbatim"
    assert output["persona"] == "SECRET persona"


async def test_a_response_schema_is_refused_before_any_run_event_row_or_listing(
    project: Project,
) -> None:
    provider = CommandProvider([sys.executable, str(SCRIPT), "echo", "{task}"])
    assert provider.capabilities.structured_output is False
    schema = {"type": "object", "required": ["answer"]}
    async with _runtime(project, provider) as runtime:  # type: ignore[attr-defined]
        stream = runtime.events()
        with pytest.raises(UnsupportedCapability) as caught:
            await runtime.start(SubagentStartRequest("external", "t", response_schema=schema))
        assert caught.value.data["controls"] == ["response_schema"]
        assert "structured_output" in caught.value.message
        assert runtime.store.events() == [], "no lifecycle event"
        assert runtime.store.list_sessions() == [], "no store row"
        assert runtime.runs() == [], "no listing"
        accepted = await runtime.start(SubagentStartRequest("external", "t"))
        with anyio.fail_after(20):
            first = await stream.__anext__()
        assert (first.run_id, first.kind) == (accepted.run_id, "published")
        stream.close()


def _spec(task: str) -> ChildSpec:
    return ChildSpec(
        run_id="r1",
        agent="external",
        request=SubagentStartRequest("external", task),
        registry=ToolRegistry(),
        task=task,
        depth=0,
        emit=lambda kind, data: None,
    )


def _setup(scope: Scope) -> ChildComposition:
    return ChildComposition(system="", persona=None, sections=())


async def test_a_command_child_discarded_before_its_run_never_starts() -> None:
    provider = CommandProvider([sys.executable, str(SCRIPT), "echo", "{task}"])
    child = await provider.create(_spec("t"), _setup)
    child.discard()
    outcome = await child.run()
    assert outcome.status == "stopped"
    assert child.pid is None
    assert child.notify("a notice") is False


async def test_discarding_a_running_command_child_kills_its_process_group(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "pids.json"
    provider = CommandProvider(
        [sys.executable, str(SCRIPT), "hang", "{task}"], kill_grace=1.0, sandbox=HOST_PIDS
    )
    child = await provider.create(_spec(str(marker)), _setup)
    outcomes = []

    async def drive() -> None:
        outcomes.append(await child.run())

    with anyio.fail_after(20):
        async with anyio.create_task_group() as group:
            group.start_soon(drive)
            while not marker.exists():
                await anyio.sleep(0.01)
            pids = json.loads(marker.read_text())
            child.discard()
        while _alive(pids["grandchild"]):
            await anyio.sleep(0.01)
    assert [o.status for o in outcomes] == ["stopped"]
    assert not _alive(pids["child"])


async def test_a_cli_child_gets_the_same_guidance_body_and_finds_membrane_and_its_skills(
    project: Project,
) -> None:
    from membrane.resolve import Deployment
    from membrane.resolve.guidance import cli_guidance

    report = (
        "import json, os, sys\n"
        "print(json.dumps({'guidance': sys.argv[1], 'cli': os.environ.get('MEMBRANE_CLI_PATH'),"
        " 'skills': os.environ.get('MEMBRANE_AGENT_SKILLS_DIRS')}))\n"
    )
    provider = CommandProvider([sys.executable, "-c", report, "{guidance}", "{task}"])
    project.agent("external")
    project.settings = Settings(max_depth="provider-managed")
    roots = (str(project.root / ".membrane" / "skills"), "/opt/skills")
    deploy = Deployment(skill_roots=roots)
    async with project.runtime(provider, deployment=deploy) as runtime:
        with anyio.fail_after(20):
            result = await runtime.run(SubagentStartRequest("external", "x"))
    seen = json.loads(result.text)
    assert seen["guidance"] == cli_guidance()
    assert seen["skills"] == os.pathsep.join(roots)
    cli = seen["cli"]
    assert cli and (os.access(cli, os.X_OK) or cli.endswith("-m membrane"))
