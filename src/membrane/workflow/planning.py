"""Seed 002's planning gate, shipped as the built-in ``planning`` workflow.

Phases (each unlocks only its own tools; the delegation tools are locked until approval)::

    intake --recordCodebaseIntake--> planning --finishPlanning--> ready
       `--(low risk, single worker, the host accepts)--> light_plan --finishPlanning--> ready
       `--(low risk, single worker, no callback)--> light_offer
    light_offer --(the host accepts)--> light_plan;  --(the host declines)--> planning
    ready --(the host approves)--> developing --finishDevelopment--> finishing
    finishing --completeWorkflow--> done

* ``intake``: ``recordCodebaseIntake`` records the lead's intake. ``touches_ui_surface: false``
  auto-skips the UI round (``auto_skipped_rounds``, system-derived, distinct from a round the
  user waived). A goal the lead calls ``low_risk`` and ``single_worker`` is offered to the host
  as a light plan; only when the host accepts does the run take ``intake -> light_plan``.
  With no ``accept_light_plan`` callback (a lead run by ``membrane run`` or ``membrane
  serve``), the offer waits in ``light_offer``, which unlocks nothing gated, until the host
  answers through ``PlanningControl`` (``membrane workflow accept-light|decline-light``, or
  ``workflow/answer`` over the socket): accepted, ``light_plan``; declined, ``planning``.
* ``planning``: the functional, UI and extras rounds (``askPlanningRound``), validation steps
  (``proposeValidationSteps``) and model routing (``recordModelRouting``) must all be settled
  before ``finishPlanning`` moves to ``ready``. A round the user waives is the host's call
  (``PlanningControl.waive``). ``light_plan`` collapses the three rounds into one plain
  two-step plan (``recordLightPlan``) and keeps the rest, and the same approval gate.
* ``ready``: ``requestPlanApproval`` asks the host; plan approval (``approve_plan``, stamping
  ``approved_at`` with the phase in one write) is the only way into ``developing``, and it also
  waits for the finishing decision (``askFinishingDecision`` asks the host: ``stop`` at
  validated code in the worktree, or spawn a ``finishing_worker``).
* ``developing``: the delegation tools (``Task`` ...) and ``finishDevelopment`` (records the
  validation result; a failed validation stays in ``developing``).
* ``finishing``: ``completeWorkflow``; ``Task`` is unlocked here only when the decision was
  ``finishing_worker``. A child the lead starts then is the **finishing worker** (push the
  branch, open or update the PR, update the attached issue): it gets ``registerEvidence``, which
  adds a ``pr_link``, ``linear_issue`` or ``deeplink`` asset (its URL, a title, the worker's run
  id) to the lead's workflow state, shown by ``membrane workflow show`` and ``workflow/get``.

The approval, the light-plan acceptance and the finishing decision come from the host, through
``PlanningHost`` callbacks or ``PlanningControl`` (what ``membrane workflow`` and an RPC method
call), never from the model: the model's tools can only ask.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from membrane.errors import StoreError
from membrane.json_types import JSONDict, JSONObject
from membrane.store.base import Store
from membrane.tools.spec import Tool, ToolContext
from membrane.vocabulary import DELEGATION_TOOLS
from membrane.workflow.definition import Phase, Transition, WorkflowDefinition, round_step
from membrane.workflow.engine import Commit, WorkflowEngine, WorkflowState
from membrane.workflow.gate import WorkflowGate

__all__ = [
    "EVIDENCE_KINDS",
    "FINISHING_CHOICES",
    "PLANNING",
    "PLANNING_TOOLS",
    "PlanningControl",
    "PlanningHost",
    "PlanningWorkflow",
    "builtin_workflows",
    "planning_tools",
]

ROUNDS: Final = ("functional", "ui", "extras")
FINISHING_CHOICES: Final = ("stop", "finishing_worker")
#: Seed 002's evidence assets, registered by the finishing worker.
EVIDENCE_KINDS: Final = ("pr_link", "linear_issue", "deeplink")
_REGISTER = "registerEvidence"
_SPAWN = tuple(DELEGATION_TOOLS)
_PLAN_STEPS = (*(round_step(r) for r in ROUNDS), "validation", "routing")
_ASK_FINISHING = "askFinishingDecision"
PLANNING_TOOLS: Final = (
    "recordCodebaseIntake",
    "askPlanningRound",
    "recordLightPlan",
    "proposeValidationSteps",
    "recordModelRouting",
    "finishPlanning",
    _ASK_FINISHING,
    "requestPlanApproval",
    "finishDevelopment",
    "completeWorkflow",
)

PLANNING: Final = WorkflowDefinition(
    name="planning",
    description="seed 002's planning gate: intake, planning rounds, approval, development",
    initial="intake",
    rounds=ROUNDS,
    decisions={"finishing": FINISHING_CHOICES},
    evidence=EVIDENCE_KINDS,
    phases=(
        Phase("intake", steps=("intake",), unlocks=("recordCodebaseIntake",)),
        Phase(
            "planning",
            steps=_PLAN_STEPS,
            unlocks=(
                "askPlanningRound",
                "proposeValidationSteps",
                "recordModelRouting",
                _ASK_FINISHING,
                "finishPlanning",
            ),
        ),
        Phase("light_offer"),
        Phase(
            "light_plan",
            steps=("light_plan", "validation", "routing"),
            unlocks=(
                "recordLightPlan",
                "proposeValidationSteps",
                "recordModelRouting",
                _ASK_FINISHING,
                "finishPlanning",
            ),
        ),
        Phase("ready", unlocks=(_ASK_FINISHING, "requestPlanApproval")),
        Phase("developing", steps=("validated",), unlocks=(*_SPAWN, "finishDevelopment")),
        Phase(
            "finishing",
            steps=("finished",),
            unlocks=("completeWorkflow",),
            unlocks_when={name: ("finishing", "finishing_worker") for name in _SPAWN},
        ),
        Phase("done", terminal=True),
    ),
    transitions=(
        Transition("begin_planning", ("intake",), "planning", requires=("intake",)),
        Transition("offer_light_plan", ("intake",), "light_offer", requires=("intake",)),
        Transition(
            "take_light_plan",
            ("intake", "light_offer"),
            "light_plan",
            requires=("intake",),
            privileged=True,
        ),
        Transition(
            "decline_light_plan",
            ("light_offer",),
            "planning",
            requires=("intake",),
            privileged=True,
        ),
        Transition("finish_planning", ("planning",), "ready", requires=_PLAN_STEPS),
        Transition(
            "finish_light_plan",
            ("light_plan",),
            "ready",
            requires=("light_plan", "validation", "routing"),
        ),
        Transition(
            "approve_plan",
            ("ready",),
            "developing",
            privileged=True,
            stamp="approved_at",
            decided=("finishing",),
        ),
        Transition("begin_finishing", ("developing",), "finishing", requires=("validated",)),
        Transition("complete", ("finishing",), "done", requires=("finished",)),
    ),
)


@dataclass(frozen=True, slots=True)
class PlanningHost:
    """The host's answers, each an async callback given the run id and what the lead sent.

    ``approve_plan`` and ``accept_light_plan`` return whether the user agrees;
    ``finishing_decision`` returns ``stop``, ``finishing_worker`` or ``None`` (not yet). A
    callback left out means the question waits for ``PlanningControl`` (``membrane workflow``).
    """

    approve_plan: Callable[[str, JSONDict], Awaitable[bool]] | None = None
    accept_light_plan: Callable[[str, JSONDict], Awaitable[bool]] | None = None
    finishing_decision: Callable[[str, JSONDict], Awaitable[str | None]] | None = None


class PlanningControl:
    """The host's privileged methods over runs' planning state (no model reaches these)."""

    def __init__(self, store: Store, *, commit: Commit | None = None) -> None:
        self.engine = WorkflowEngine(store, PLANNING, commit=commit)

    def state(self, run_id: str) -> WorkflowState:
        return self.engine.state(run_id)

    def approve(self, run_id: str) -> WorkflowState:
        """Approve the plan: ``ready -> developing`` with ``approved_at``, in one write."""
        return self.engine.host_advance(run_id, "approve_plan")

    def accept_light_plan(self, run_id: str) -> WorkflowState:
        """Accept the light plan offered at intake: ``light_offer -> light_plan``."""
        return self.engine.host_advance(run_id, "take_light_plan")

    def decline_light_plan(self, run_id: str) -> WorkflowState:
        """Decline the light plan offered at intake: ``light_offer -> planning`` (all rounds)."""
        return self.engine.host_advance(run_id, "decline_light_plan")

    def waive(self, run_id: str, round_name: str) -> WorkflowState:
        return self.engine.waive(run_id, round_name)

    def decide_finishing(self, run_id: str, choice: str) -> WorkflowState:
        return self.engine.decide(run_id, "finishing", choice)


@dataclass(frozen=True, slots=True)
class BoundPlanning:
    """What a run that opts into the workflow gets: its tools, its gate and a prompt section."""

    name: str
    tools: tuple[Tool, ...]
    gate: WorkflowGate
    prompt: str


class PlanningWorkflow:
    """The binding a runtime installs for ``workflow: planning`` (``RuntimeOptions.workflows``)."""

    name = "planning"
    definition = PLANNING

    def __init__(self, host: PlanningHost | None = None) -> None:
        self.host = host or PlanningHost()

    def bind(self, run_id: str, store: Store, commit: Commit | None = None) -> BoundPlanning:
        engine = WorkflowEngine(store, PLANNING, commit=commit)
        return BoundPlanning(
            name=self.name,
            tools=planning_tools(engine, run_id, self.host),
            gate=WorkflowGate(engine, run_id),
            prompt=_PROMPT,
        )

    def worker_tools(
        self, parent_id: str, run_id: str, store: Store, commit: Commit | None = None
    ) -> tuple[Tool, ...]:
        """``registerEvidence`` for a child the lead ``parent_id`` starts while it is finishing
        under ``finishing_worker`` (its finishing worker); nothing for any other child."""
        engine = WorkflowEngine(store, PLANNING, commit=commit)
        try:
            state = engine.state(parent_id)
        except StoreError:
            return ()  # a state that cannot be read grants nothing
        if _finishing_problem(state) is not None:
            return ()
        return (_evidence_tool(engine, parent_id, run_id),)


def _finishing_problem(state: WorkflowState) -> str | None:
    """Why evidence cannot be registered in ``state`` now (``None``: it can)."""
    if state.phase != "finishing" or state.decisions.get("finishing") != "finishing_worker":
        return "evidence is registered by the finishing worker while the run is finishing"
    return None


def _evidence_tool(engine: WorkflowEngine, lead: str, worker: str) -> Tool:
    async def register(arguments: Mapping[str, Any], context: ToolContext) -> JSONDict:
        asset = {
            "kind": str(arguments["kind"]),
            "url": str(arguments["url"]),
            "title": str(arguments.get("title", "")),
            "run_id": worker,
        }
        state = engine.add_evidence(lead, asset, when=_finishing_problem)
        return {"registered": asset, "evidence": len(state.evidence)}

    properties: JSONObject = {
        "kind": {"enum": list(EVIDENCE_KINDS)},
        "url": {"type": "string", "pattern": "^[A-Za-z][A-Za-z0-9+.-]*://[^\\s]+$"},
        "title": {"type": "string"},
    }
    return _tool(
        _REGISTER,
        "Register an evidence asset of the finished work on the lead's plan: the pull "
        "request (pr_link), the issue it updates (linear_issue) or a deep link (deeplink).",
        properties,
        ["kind", "url"],
        register,
    )


_PROMPT = (
    "# Planning workflow\n"
    "You lead this run through a gated plan. Your tools unlock phase by phase: record the "
    "codebase intake, run the functional, UI and extras planning rounds, propose validation "
    "steps and record the model routing, then finish planning and request approval. Spawning "
    "workers unlocks only once the user approves the plan. A low-risk, single-worker goal may "
    "be offered to the user as a light plan (two plain steps instead of the three rounds); "
    "while the offer waits for their answer, nothing of the plan is unlocked."
)


class _PlanningSteps:
    """The handlers of one run's planning tools; each writes only through ``engine`` and
    answers with the phase and what is unlocked now (``done``)."""

    def __init__(self, engine: WorkflowEngine, run_id: str, host: PlanningHost) -> None:
        self.engine = engine
        self.run_id = run_id
        self.host = host

    def done(self, state: WorkflowState, **extra: Any) -> JSONDict:
        return {"phase": state.phase, "unlocked": sorted(self.engine.unlocked(state)), **extra}

    def record(self, steps: Mapping[str, JSONObject], *, then: str | None = None) -> JSONDict:
        return self.done(self.engine.record(self.run_id, steps, then=then))

    async def intake(self, arguments: Mapping[str, Any], context: ToolContext) -> JSONDict:
        engine, run_id, host = self.engine, self.run_id, self.host
        data = dict(arguments)
        skip = () if data["touches_ui_surface"] else ("ui",)
        light = bool(data.get("low_risk")) and bool(data.get("single_worker"))
        if light and host.accept_light_plan is None:
            # No one to ask in this process: the offer waits for the host's command.
            state = engine.record(run_id, {"intake": data}, auto_skip=skip, then="offer_light_plan")
            return self.done(
                state,
                path="offered",
                auto_skipped_rounds=list(state.auto_skipped_rounds),
                note="the light plan is offered to the user; wait for their answer",
            )
        accepted = light and host.accept_light_plan is not None
        if accepted:
            assert host.accept_light_plan is not None
            accepted = bool(await host.accept_light_plan(run_id, data))
        if accepted:
            engine.record(run_id, {"intake": data}, auto_skip=skip)
            return self.done(engine.host_advance(run_id, "take_light_plan"), path="light")
        state = engine.record(run_id, {"intake": data}, auto_skip=skip, then="begin_planning")
        return self.done(state, path="full", auto_skipped_rounds=list(state.auto_skipped_rounds))

    async def ask_round(self, arguments: Mapping[str, Any], context: ToolContext) -> JSONDict:
        name = str(arguments["round"])
        step = {"questions": list(arguments["questions"]), "answers": arguments["answers"]}
        return self.record({round_step(name): step})

    async def light_plan(self, arguments: Mapping[str, Any], context: ToolContext) -> JSONDict:
        return self.record({"light_plan": {"steps": list(arguments["steps"])}})

    async def validation(self, arguments: Mapping[str, Any], context: ToolContext) -> JSONDict:
        return self.record({"validation": {"steps": list(arguments["steps"])}})

    async def routing(self, arguments: Mapping[str, Any], context: ToolContext) -> JSONDict:
        routes = {str(route["role"]): str(route["model"]) for route in arguments["routes"]}
        return self.record({"routing": {"routes": routes}})

    async def finish_planning(self, arguments: Mapping[str, Any], context: ToolContext) -> JSONDict:
        phase = self.engine.state(self.run_id).phase
        name = "finish_light_plan" if phase == "light_plan" else "finish_planning"
        return self.done(self.engine.advance(self.run_id, name))

    async def ask_finishing(self, arguments: Mapping[str, Any], context: ToolContext) -> JSONDict:
        engine, run_id, host = self.engine, self.run_id, self.host
        state = engine.state(run_id)
        if "finishing" in state.decisions or host.finishing_decision is None:
            decided = state.decisions.get("finishing", "waiting for the host")
            return self.done(state, finishing=decided)
        choice = await host.finishing_decision(run_id, dict(arguments))
        if choice is None:
            return self.done(state, finishing="waiting for the host")
        return self.done(engine.decide(run_id, "finishing", choice), finishing=choice)

    async def approval(self, arguments: Mapping[str, Any], context: ToolContext) -> JSONDict:
        engine, run_id, host = self.engine, self.run_id, self.host
        state = engine.state(run_id)
        missing = engine.missing(state, "approve_plan")
        if missing or state.phase != "ready" or host.approve_plan is None:
            why = f"waits for {', '.join(missing)}" if missing else "waiting for the host"
            return self.done(state, approved=False, note=why)
        plan = {"summary": arguments["summary"], "plan": state.to_dict()}
        if not await host.approve_plan(run_id, plan):
            return self.done(engine.state(run_id), approved=False, note="the user did not approve")
        return self.done(engine.host_advance(run_id, "approve_plan"), approved=True)

    async def finish_development(
        self, arguments: Mapping[str, Any], context: ToolContext
    ) -> JSONDict:
        result: JSONDict = {
            "passed": bool(arguments["passed"]),
            "summary": str(arguments["summary"]),
        }
        if not result["passed"]:
            state = self.engine.state(self.run_id)
            return self.done(state, note="validation failed: keep developing")
        return self.record({"validated": result}, then="begin_finishing")

    async def complete(self, arguments: Mapping[str, Any], context: ToolContext) -> JSONDict:
        return self.record({"finished": {"summary": str(arguments["summary"])}}, then="complete")


_TEXT_LIST: Final[JSONDict] = {
    "type": "array",
    "items": {"type": "string", "minLength": 1},
    "minItems": 1,
}
_Handler = Callable[[_PlanningSteps, Mapping[str, Any], ToolContext], Awaitable[JSONDict]]
#: Each planning tool: its name, description, input properties, required keys and handler.
_DECLARED: Final[tuple[tuple[str, str, JSONObject, tuple[str, ...], _Handler], ...]] = (
    (
        "recordCodebaseIntake",
        "Record the codebase intake: what the goal touches and how risky it is.",
        {
            "summary": {"type": "string", "minLength": 1},
            "touches_ui_surface": {"type": "boolean"},
            "low_risk": {"type": "boolean"},
            "single_worker": {"type": "boolean"},
        },
        ("summary", "touches_ui_surface"),
        _PlanningSteps.intake,
    ),
    (
        "askPlanningRound",
        "Record one planning round (functional, ui or extras): its questions and answers.",
        {
            "round": {"enum": list(ROUNDS)},
            "questions": _TEXT_LIST,
            "answers": {"type": "string", "minLength": 1},
        },
        ("round", "questions", "answers"),
        _PlanningSteps.ask_round,
    ),
    (
        "recordLightPlan",
        "Record the light plan: two plain-language steps.",
        {"steps": {**_TEXT_LIST, "maxItems": 2, "minItems": 2}},
        ("steps",),
        _PlanningSteps.light_plan,
    ),
    (
        "proposeValidationSteps",
        "Record how the work will be validated.",
        {"steps": _TEXT_LIST},
        ("steps",),
        _PlanningSteps.validation,
    ),
    (
        "recordModelRouting",
        "Record which model each worker role uses.",
        {
            # A list of closed objects, not a free map: a map of free keys is a schema
            # neither OpenAI's strict mode nor llama.cpp's grammar conversion can take.
            "routes": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "properties": {
                        "role": {"type": "string", "minLength": 1},
                        "model": {"type": "string", "minLength": 1},
                    },
                    "required": ["role", "model"],
                    "additionalProperties": False,
                },
            }
        },
        ("routes",),
        _PlanningSteps.routing,
    ),
    (
        "finishPlanning",
        "Finish planning: the plan is ready.",
        {},
        (),
        _PlanningSteps.finish_planning,
    ),
    (
        _ASK_FINISHING,
        "Ask the user how the run finishes: stop at validated code, or a finishing worker.",
        {"question": {"type": "string"}},
        (),
        _PlanningSteps.ask_finishing,
    ),
    (
        "requestPlanApproval",
        "Ask the user to approve the plan.",
        {"summary": {"type": "string", "minLength": 1}},
        ("summary",),
        _PlanningSteps.approval,
    ),
    (
        "finishDevelopment",
        "Report the validation result of the developed work.",
        {"passed": {"type": "boolean"}, "summary": {"type": "string"}},
        ("passed", "summary"),
        _PlanningSteps.finish_development,
    ),
    (
        "completeWorkflow",
        "Close the run's workflow.",
        {"summary": {"type": "string"}},
        ("summary",),
        _PlanningSteps.complete,
    ),
)


def planning_tools(engine: WorkflowEngine, run_id: str, host: PlanningHost) -> tuple[Tool, ...]:
    """The lead's planning tools for ``run_id``; each writes only through ``engine``."""
    steps = _PlanningSteps(engine, run_id, host)
    return tuple(
        _tool(name, description, properties, list(required), partial(handler, steps))
        for name, description, properties, required, handler in _DECLARED
    )


def _tool(
    name: str,
    description: str,
    properties: JSONObject,
    required: list[str],
    handler: Callable[[Mapping[str, Any], ToolContext], Awaitable[JSONDict]],
) -> Tool:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": dict(properties),
        "required": required,
        "additionalProperties": False,
    }
    return Tool(name, description, schema, handler, origin="scope", mutating=True)


def builtin_workflows(host: PlanningHost | None = None) -> dict[str, PlanningWorkflow]:
    """The workflows Membrane ships, by the name a definition's ``workflow:`` gives."""
    return {"planning": PlanningWorkflow(host)}
