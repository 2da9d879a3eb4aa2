"""The planning gate in a real runtime (seed 002): a lead whose definition says
``workflow: planning`` cannot see or call ``Task`` until the host approves its plan, the UI round
is auto-skipped when intake says no UI is touched, the finishing decision is honoured, the state
survives in the store, and a workflow the runtime was not given fails closed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from membrane.cli.app import main
from membrane.errors import UnknownWorkflow
from membrane.json_types import JSONDict, JSONValue
from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.runtime import InProcessProvider, SubagentStartRequest
from membrane.store import SQLiteStore
from membrane.testing import FunctionModel
from membrane.workflow import PlanningControl, PlanningHost, builtin_workflows

from .conftest import Project

pytestmark = pytest.mark.anyio

#: The lead's calls in order; each is made once the previous one has answered.
PLAN: list[tuple[str, dict[str, JSONValue]]] = [
    ("Task", {"agent": "worker", "task": "too early"}),
    ("recordCodebaseIntake", {"summary": "a cli flag", "touches_ui_surface": False}),
    ("askPlanningRound", {"round": "ui", "questions": ["which screen?"], "answers": "none"}),
    ("askPlanningRound", {"round": "functional", "questions": ["what flag?"], "answers": "-v"}),
    ("requestPlanApproval", {"summary": "too early"}),
    ("askPlanningRound", {"round": "extras", "questions": ["docs?"], "answers": "yes"}),
    ("proposeValidationSteps", {"steps": ["run the tests"]}),
    ("recordModelRouting", {"routes": [{"role": "worker", "model": "default"}]}),
    ("askFinishingDecision", {}),
    ("finishPlanning", {}),
    ("requestPlanApproval", {"summary": "add -v"}),
    ("Task", {"agent": "worker", "task": "add the flag"}),
    ("finishDevelopment", {"passed": True, "summary": "tests pass"}),
    ("Task", {"agent": "worker", "task": "push it"}),
    ("completeWorkflow", {"summary": "validated code in the worktree"}),
]


def _lead(seen: list[tuple[list[str], str]]) -> FunctionModel:
    async def answer(request: ModelRequest) -> ModelResponse:
        if request.agent != "lead":
            return ModelResponse(text="flag added")
        offered = sorted(str(t["name"]) for t in request.tools)
        last = request.messages[-1]
        seen.append((offered, str(last.content)))
        n = sum(1 for m in request.messages if m.role == "assistant")
        if n < len(PLAN):
            name, arguments = PLAN[n]
            return ModelResponse(tool_calls=(ToolCall(f"c{n}", name, arguments),))
        return ModelResponse(text="lead done")

    return FunctionModel(answer)


async def test_the_lead_spawns_only_after_the_host_approves_its_plan(
    project: Project, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project.agent("lead", allowed_subagents="[worker]", workflow="planning")
    project.agent("worker")
    asked: list[JSONDict] = []

    async def approve(run_id: str, plan: JSONDict) -> bool:
        asked.append(plan)
        return True

    async def finishing(run_id: str, question: JSONDict) -> str:
        return "stop"

    host = PlanningHost(approve_plan=approve, finishing_decision=finishing)
    db = tmp_path / "state.db"
    store = SQLiteStore(db)
    seen: list[tuple[list[str], str]] = []
    runtime = project.runtime(
        InProcessProvider(_lead(seen)), store=store, workflows=builtin_workflows(host)
    )
    async with runtime:
        with anyio.fail_after(30):
            lead = await runtime.run(SubagentStartRequest("lead", "add a -v flag"))
    assert lead.text == "lead done", lead.error

    results: list[Any] = [json.loads(text) for _, text in seen[1:]]
    offered = [tools for tools, _ in seen]
    # Intake: Task is neither offered nor callable.
    assert "Task" not in offered[0] and "recordCodebaseIntake" in offered[0]
    assert results[0]["error"]["code"] == "tool-not-visible"
    assert results[1]["phase"] == "planning" and results[1]["auto_skipped_rounds"] == ["ui"]
    assert results[2]["error"]["code"] == "workflow-refused"  # the auto-skipped round
    assert "auto-skipped" in results[2]["error"]["message"]
    assert results[4]["error"]["code"] == "tool-not-visible"  # no approval before ready
    assert "Task" not in offered[9]
    assert results[10]["approved"] is True and results[10]["phase"] == "developing"
    assert len(asked) == 1  # the host was asked once, when the plan was ready
    assert "Task" in offered[11] and results[11]["status"] == "completed"
    assert results[12]["phase"] == "finishing"
    # The finishing decision was `stop`: no finishing worker can be spawned.
    assert "Task" not in offered[13] and results[13]["error"]["code"] == "tool-not-visible"
    assert results[14]["phase"] == "done"
    assert [h.agent for h in store.list_sessions()] == ["lead", "worker"]

    state = PlanningControl(store).state(lead.run_id)
    assert state.phase == "done" and state.auto_skipped_rounds == ("ui",)
    assert state.waived_rounds == () and "approved_at" in state.stamps
    events = [e.data for e in store.events(session_id=lead.run_id) if e.kind == "workflow"]
    (approval,) = [e for e in events if e["phase"] == "developing"]
    assert (approval["from"], approval["transition"]) == ("ready", "approve_plan")
    assert events[-1]["version"] == state.version
    store.close()

    assert main(["workflow", "show", lead.run_id, "--json", "--state", str(db)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["phase"] == "done" and shown["auto_skipped_rounds"] == ["ui"]


async def test_the_host_approves_through_its_command_and_the_lead_sees_it_next_turn(
    project: Project, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project.agent("lead", allowed_subagents="[worker]", workflow="planning")
    project.agent("worker")
    db = tmp_path / "state.db"
    store = SQLiteStore(db)
    codes: dict[str, int] = {}
    offered: list[list[str]] = []

    def host(*args: str) -> int:
        """The user at a terminal: ``membrane workflow ...`` on the same state file."""
        return main(["workflow", *args, "--state", str(db)])

    async def answer(request: ModelRequest) -> ModelResponse:
        if request.agent != "lead":
            return ModelResponse(text="done")
        offered.append(sorted(str(t["name"]) for t in request.tools))
        n = sum(1 for m in request.messages if m.role == "assistant")
        run = request.run_id
        if n == 6:  # finishPlanning was refused: extras is neither run nor waived
            codes["early approve"] = host("approve", run)
            codes["waive"] = host("waive", run, "extras")
            codes["decide"] = host("decide", run, "stop")
        if n == 8:  # requestPlanApproval had no host callback: the user approves now
            codes["approve"] = host("approve", run)
        steps: list[tuple[str, dict[str, JSONValue]]] = [
            ("recordCodebaseIntake", {"summary": "s", "touches_ui_surface": True}),
            *(
                ("askPlanningRound", {"round": r, "questions": ["q"], "answers": "a"})
                for r in ("functional", "ui")
            ),
            ("proposeValidationSteps", {"steps": ["test"]}),
            ("recordModelRouting", {"routes": [{"role": "worker", "model": "default"}]}),
            ("finishPlanning", {}),
            ("finishPlanning", {}),
            ("requestPlanApproval", {"summary": "the plan"}),
            ("Read", {"file_path": "README.md"}),
            ("Task", {"agent": "worker", "task": "build it"}),
        ]
        if n < len(steps):
            name, arguments = steps[n]
            return ModelResponse(tool_calls=(ToolCall(f"c{n}", name, arguments),))
        return ModelResponse(text="planned")

    runtime = project.runtime(
        InProcessProvider(FunctionModel(answer)), store=store, workflows=builtin_workflows()
    )
    async with runtime:
        with anyio.fail_after(30):
            lead = await runtime.run(SubagentStartRequest("lead", "plan"))
    capsys.readouterr()
    assert codes == {"early approve": 3, "waive": 0, "decide": 0, "approve": 0}
    assert "Task" not in offered[8] and "Task" in offered[9]  # seen at the next turn
    state = PlanningControl(store).state(lead.run_id)
    assert state.phase == "developing" and state.waived_rounds == ("extras",)
    assert state.auto_skipped_rounds == ()  # a waived round is not an auto-skipped one
    assert [h.agent for h in store.list_sessions()] == ["lead", "worker"]
    store.close()


async def test_a_workflow_the_runtime_was_not_given_fails_closed(project: Project) -> None:
    project.agent("lead", allowed_subagents="[worker]", workflow="planning")
    project.agent("rogue", workflow="nonesuch")
    model = FunctionModel(lambda request: ModelResponse(text="never"))  # type: ignore[arg-type,return-value]
    async with project.runtime(InProcessProvider(model)) as runtime:
        with pytest.raises(UnknownWorkflow) as raised:
            await runtime.start(SubagentStartRequest("lead", "plan"))
        assert raised.value.data["workflow"] == "planning"
        assert runtime.runs() == []
    async with project.runtime(InProcessProvider(model), workflows=builtin_workflows()) as rt:
        with pytest.raises(UnknownWorkflow):
            await rt.start(SubagentStartRequest("rogue", "go"))
        assert rt.runs() == [] and rt.store.list_sessions() == []
