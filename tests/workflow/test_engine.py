"""The gated-phase primitive: definitions are checked when built, loading never advances a
phase (a state past approval without its stamp locks every gated tool), each write is the state
and an event in one transaction, and a stale writer never overwrites a newer state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from membrane.cli.app import main
from membrane.errors import StoreError, WorkflowInvalid, WorkflowRefused
from membrane.store import SessionHeader, SQLiteStore
from membrane.tools.registry import ToolRegistry
from membrane.tools.scope import Scope
from membrane.tools.spec import Tool, ToolContext
from membrane.workflow import (
    PLANNING,
    Phase,
    PlanningControl,
    PlanningWorkflow,
    Transition,
    WorkflowDefinition,
    WorkflowEngine,
)


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    found = SQLiteStore(tmp_path / "state.db")
    found.create_session(SessionHeader("lead", "lead", None, 0, "running"))
    return found


def test_a_malformed_definition_is_refused_when_built() -> None:
    with pytest.raises(WorkflowInvalid, match="cannot be reached"):
        WorkflowDefinition("w", "a", (Phase("a"), Phase("b")), ())
    with pytest.raises(WorkflowInvalid, match="unknown step"):
        WorkflowDefinition(
            "w", "a", (Phase("a"), Phase("b")), (Transition("t", ("a",), "b", ("x",)),)
        )
    with pytest.raises(WorkflowInvalid, match="terminal"):
        WorkflowDefinition(
            "w", "a", (Phase("a", terminal=True), Phase("b")), (Transition("t", ("a",), "b"),)
        )


def test_loading_never_advances_a_phase_and_a_state_past_approval_without_it_locks_all(
    store: SQLiteStore,
) -> None:
    engine = WorkflowEngine(store, PLANNING)
    # Junk around a real phase: normalized, the phase kept as stored.
    store.put_workflow(
        "lead",
        workflow="planning",
        state={
            "phase": "planning",
            "waived_rounds": ["extras", "nonsense", 3],
            "auto_skipped_rounds": ["extras", "ui"],
            "steps": {"intake": {"summary": "s"}, "bad": "not an object"},
            "decisions": {"finishing": "maybe"},
        },
        expected_version=0,
    )
    state = engine.state("lead")
    assert state.phase == "planning"
    assert state.waived_rounds == ("extras",) and state.auto_skipped_rounds == ("ui",)
    assert set(state.steps) == {"intake"} and state.decisions == {}
    # A phase past the approval with no approval stamp: refused, never guessed at.
    store.put_workflow(
        "lead", workflow="planning", state={"phase": "developing"}, expected_version=1
    )
    with pytest.raises(StoreError, match="approved_at"):
        engine.state("lead")
    bound = PlanningWorkflow().bind("lead", store)
    scope = Scope(ToolRegistry(), name="lead")

    async def spawn(arguments: object, context: ToolContext) -> str:
        return "spawned"

    scope.add_local(Tool("Task", "spawn", {"type": "object"}, spawn, origin="scope"))
    scope.gate(bound.gate)
    assert "Task" not in scope.view()  # fail closed
    store.close()


def test_each_write_is_the_state_and_its_event_together_and_a_stale_writer_is_refused(
    store: SQLiteStore,
) -> None:
    control = PlanningControl(store)
    with pytest.raises(WorkflowRefused) as refused:
        control.approve("lead")
    assert refused.value.data["phase"] == "intake"
    assert store.get_workflow("lead") is None and store.events(session_id="lead") == []
    state = control.engine.record(
        "lead", {"intake": {"touches_ui_surface": False}}, auto_skip=("ui",), then="begin_planning"
    )
    (event,) = store.events(session_id="lead")
    assert event.kind == "workflow" and event.data["phase"] == "planning"
    assert event.data["version"] == state.version == 1
    # Another writer moved the state meanwhile: a write from the old version is refused.
    with pytest.raises(StoreError):
        store.put_workflow(
            "lead", workflow="planning", state={"phase": "intake"}, expected_version=0
        )
    assert control.state("lead").phase == "planning"
    store.close()


def test_explain_shows_the_phase_and_what_each_phase_unlocks(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agents = tmp_path / ".membrane" / "agents"
    agents.mkdir(parents=True)
    (agents / "lead.md").write_text(
        "---\nname: lead\ndescription: l\nallowed_subagents: [worker]\nworkflow: planning\n"
        "---\nLead.\n",
        encoding="utf-8",
    )
    (agents / "worker.md").write_text("---\nname: worker\ndescription: w\n---\nW.\n")
    assert main(["explain", "lead", "--top-level", "--json", "--project", str(tmp_path)]) == 0
    view = json.loads(capsys.readouterr().out)["workflow"]
    assert view["name"] == "planning" and view["phase"] == "intake"
    assert view["unlocked"] == ["recordCodebaseIntake"]
    assert view["locked"]["Task"] == ["developing", "finishing"]
    phases = {p["name"]: p["unlocks"] for p in view["phases"]}
    assert "Task" in phases["developing"] and "requestPlanApproval" in phases["ready"]
    assert main(["explain", "lead", "--top-level", "--project", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "Task: locked until developing or finishing" in text
    # The tools table shows the gated Task as locked, never as callable.
    [row] = [line for line in text.splitlines() if line.strip("│ ").startswith("Task ")]
    assert "locked until developing or finishing" in row and "callable" not in row
