"""Providers: the in-process one (spawn and fork) and a real external command-line agent."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from membrane.config.values import Settings
from membrane.errors import InvalidRequest
from membrane.models.base import Message, ToolCall
from membrane.runtime import CommandProvider, InProcessProvider, SubagentStartRequest
from membrane.runtime.providers.in_process import fork_transcript
from membrane.sandbox import SandboxPolicy
from membrane.testing import ScriptedModel

from .conftest import Project

SCRIPT = Path(__file__).parent / "scripts" / "fake_agent.py"


def _lead_and_worker() -> ScriptedModel:
    return ScriptedModel(
        {
            "agents": {
                "lead": [
                    {"text": "", "tool_calls": [{"name": "Read", "arguments": {"path": "x"}}]},
                    {
                        "tool_calls": [
                            {"name": "Task", "arguments": {"agent": "worker", "task": "sub"}}
                        ]
                    },
                    {"text": "ok"},
                ],
                "worker": [{"text": "w"}],
            }
        }
    )


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["spawn", "fork"])
async def test_spawn_starts_fresh_and_fork_copies_the_parents_conversation(
    project: Project, mode: str
) -> None:
    project.agent("lead", tools="Read", allowed_subagents="[worker]")
    project.agent("worker", tools="Read")
    model = _lead_and_worker()
    async with project.runtime(InProcessProvider(model, mode=mode)) as runtime:  # type: ignore[arg-type]
        await runtime.run(SubagentStartRequest("lead", "lead task"))
    worker = next(r for r in model.requests if r.agent == "worker")
    roles = [(m.role, m.content if m.role == "user" else "") for m in worker.messages]
    if mode == "spawn":
        assert roles == [("user", "sub")]
    else:
        assert roles == [("user", "lead task"), ("assistant", ""), ("tool", ""), ("user", "sub")]
        assert all(not m.tool_calls for m in worker.messages[2:])


def test_a_fork_never_ends_in_unanswered_tool_calls() -> None:
    call = ToolCall("1", "Read", {})
    answered = [
        Message("user", "task"),
        Message("assistant", tool_calls=(call,)),
        Message("tool", "r", tool_call_id="1"),
    ]
    pending = Message(
        "assistant", tool_calls=(ToolCall("2", "Task", {}), ToolCall("3", "Read", {}))
    )
    partial = Message("tool", "r", tool_call_id="3")
    assert fork_transcript(answered) == tuple(answered)
    assert fork_transcript([*answered, pending, partial]) == tuple(answered)
    assert fork_transcript([]) == ()


def test_the_in_process_provider_rejects_an_unknown_mode() -> None:
    with pytest.raises(InvalidRequest):
        InProcessProvider(ScriptedModel({"default": [{"text": "x"}]}), mode="clone")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "command",
    [[], "agent -p {task}", ["agent", "-p"], ["{task}"], ["agent", 3, "{task}"]],
)
def test_a_command_template_must_name_a_program_and_carry_the_task(command: object) -> None:
    with pytest.raises(InvalidRequest):
        CommandProvider(command)  # type: ignore[arg-type]


def _command(project: Project, *parts: str, **options: object) -> object:
    project.settings = Settings(max_depth="provider-managed", persona="Deployment persona.")
    provider = CommandProvider([sys.executable, str(SCRIPT), *parts], **options)  # type: ignore[arg-type]
    return project.runtime(provider)


@pytest.mark.anyio
async def test_a_command_child_gets_the_task_and_persona_and_its_output_is_the_result(
    project: Project,
) -> None:
    project.agent("external")
    async with _command(project, "echo", "{task}", "--persona={persona}") as runtime:  # type: ignore[attr-defined]
        result = await runtime.run(
            SubagentStartRequest("external", "fix the bug", persona="Be {{agent}}.")
        )
        inherited = await runtime.run(SubagentStartRequest("external", "again"))
    output = json.loads(result.text)
    assert result.status == "completed"
    assert output["task"] == "fix the bug"
    assert output["persona"] == "--persona=Be external."
    assert output["run_id"] == result.run_id
    assert output["depth"] == "0"
    assert Path(output["cwd"]).resolve() == project.root.resolve()
    assert json.loads(inherited.text)["persona"] == "--persona=Deployment persona."


@pytest.mark.anyio
async def test_a_command_that_fails_is_an_error_carrying_its_stderr(project: Project) -> None:
    project.agent("external")
    async with _command(project, "fail", "{task}") as runtime:  # type: ignore[attr-defined]
        result = await runtime.run(SubagentStartRequest("external", "x"))
    assert result.status == "error"
    assert result.error is not None
    assert "could not do it" in result.error["message"]
    assert result.error["data"]["exit_code"] == 3


@pytest.mark.anyio
async def test_a_command_that_overruns_its_timeout_is_an_error(project: Project) -> None:
    project.agent("external")
    # The pids go to a folder of the checkout: the child is sandboxed, and Landlock (the
    # sandbox where no bwrap is) lets it write neither outside nor at the checkout's top level.
    (project.root / "out").mkdir()
    pids = project.root / "out" / "pids.json"
    async with _command(project, "hang", "{task}", timeout=0.5, kill_grace=0.5) as runtime:  # type: ignore[attr-defined]
        with anyio.fail_after(20):
            result = await runtime.run(SubagentStartRequest("external", str(pids)))
    assert result.status == "error"
    assert "did not finish" in result.error["message"]  # type: ignore[index]
    assert pids.exists()  # it hung where it waits forever, past writing them


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


@pytest.mark.anyio
async def test_stopping_a_command_child_ends_its_whole_process_group(
    project: Project, tmp_path: Path
) -> None:
    project.agent("external")
    marker = tmp_path / "pids.json"
    # The process group as the host sees it: no PID namespace, and the marker under /tmp.
    guard = SandboxPolicy("guard")
    async with _command(project, "hang", "{task}", kill_grace=1.0, sandbox=guard) as runtime:  # type: ignore[attr-defined]
        info = await runtime.start(SubagentStartRequest("external", str(marker)))
        with anyio.fail_after(20):
            while not marker.exists():
                await anyio.sleep(0.01)
            pids = json.loads(marker.read_text())
            assert _alive(pids["child"]) and _alive(pids["grandchild"])
            stopped = await runtime.stop(info.run_id)
            while _alive(pids["grandchild"]):
                await anyio.sleep(0.01)
    assert stopped.status == "stopped"
    assert not _alive(pids["child"])


@pytest.mark.anyio
async def test_a_model_router_builds_each_childs_model_at_its_start(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from membrane.config.values import ModelEntry
    from membrane.errors import ModelAuthFailed
    from membrane.models.specs import ModelRouter

    monkeypatch.delenv("NO_SUCH_KEY", raising=False)
    other = tmp_path / "other.yaml"
    other.write_text("default:\n  - text: from the other model\n")
    project.agent("routed", model="other")
    project.agent("keyless", model="keyed")
    entries = {
        "other": ModelEntry(provider="scripted", model=str(other)),
        "keyed": ModelEntry(provider="openai", model="m", api_key_env="NO_SUCH_KEY"),
    }
    project.settings = Settings(models=entries)
    router = ModelRouter.from_settings(
        project.settings, ScriptedModel({"default": [{"text": "from the default model"}]})
    )
    async with project.runtime(InProcessProvider(router)) as runtime:
        routed = await runtime.start(SubagentStartRequest("routed", "go"))
        with anyio.fail_after(30):
            assert (await runtime.wait(routed.run_id)).text == "from the other model"
        # The model a child names is built as it starts: a missing key refuses the start.
        with pytest.raises(ModelAuthFailed):
            await runtime.start(SubagentStartRequest("keyless", "go"))
        assert [run.agent for run in runtime.runs()] == ["routed"]
