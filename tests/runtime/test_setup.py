"""Unpublished setup: the child's composition is complete before anyone can see it, and a
failure at any step rolls everything back."""

from __future__ import annotations

import pytest

from membrane.config.values import RoleSpec, Settings
from membrane.errors import InvalidPersona, SetupFailed, UnknownToolInFilter
from membrane.runtime import SubagentStartRequest
from membrane.testing import ScriptedModel

from .conftest import Project

SCHEMA = {
    "type": "object",
    "properties": {"verdict": {"enum": ["approve", "reject"]}},
    "required": ["verdict"],
}


def _model(text: str = "ok") -> ScriptedModel:
    return ScriptedModel({"default": [{"text": text}]})


@pytest.mark.anyio
async def test_the_first_model_request_already_has_the_persona_and_the_filtered_tools(
    project: Project,
) -> None:
    project.agent("worker", tools="Read, Grep, Write")
    model = _model()
    request = SubagentStartRequest(
        "worker",
        "task",
        persona="You are {{agent}} ({{agent_type}}), depth {{depth}}.",
        tool_filter={"deny": ["Write"]},
    )
    async with project.runtime(model) as runtime:
        await runtime.run(request)
    first = model.requests[0]
    assert first.system.startswith("You are worker (worker), depth 0.")
    assert [tool["name"] for tool in first.tools] == ["Grep", "Read"]


@pytest.mark.anyio
async def test_an_omitted_persona_inherits_the_deployment_persona(project: Project) -> None:
    project.agent("worker")
    project.settings = Settings(persona="Deployment voice for {{agent}}.")
    model = _model()
    async with project.runtime(model) as runtime:
        await runtime.run(SubagentStartRequest("worker", "task"))
    assert model.requests[0].system.startswith("Deployment voice for worker.")


@pytest.mark.anyio
async def test_an_empty_persona_shadows_the_deployment_persona_with_nothing(
    project: Project,
) -> None:
    project.agent("worker")
    project.settings = Settings(persona="Deployment voice.")
    model = _model()
    async with project.runtime(model) as runtime:
        await runtime.run(SubagentStartRequest("worker", "task", persona=""))
        await runtime.run(SubagentStartRequest("worker", "task", persona="Reviewer voice."))
    assert "Deployment voice" not in model.requests[0].system
    assert model.requests[1].system.startswith("Reviewer voice.")
    assert "Deployment voice" not in model.requests[1].system


@pytest.mark.anyio
async def test_children_of_one_definition_share_a_prompt_only_where_nothing_differs(
    project: Project,
) -> None:
    project.agent("worker")
    model = _model('{"verdict": "approve"}')
    async with project.runtime(model) as runtime:
        for _ in range(2):
            await runtime.run(SubagentStartRequest("worker", "task"))
        named = [
            await runtime.run(SubagentStartRequest("worker", "task", persona="Run {{run_id}}."))
            for _ in range(2)
        ]
        await runtime.run(SubagentStartRequest("worker", "task", response_schema=SCHEMA))
        await runtime.run(SubagentStartRequest("worker", "task"))
    systems = [request.system for request in model.requests]
    assert systems[0] == systems[1] == systems[5]
    assert [system.split("\n")[0] for system in systems[2:4]] == [
        f"Run {result.run_id}." for result in named
    ]
    assert "JSON Schema" in systems[4] and "JSON Schema" not in systems[5]
    assert systems[4].startswith(systems[0])


def test_an_unfillable_deployment_persona_fails_when_the_runtime_is_built(
    project: Project,
) -> None:
    project.settings = Settings(persona="Hello {{user}}")
    with pytest.raises(InvalidPersona):
        project.runtime(_model())


@pytest.mark.anyio
async def test_setup_runs_its_steps_in_order(project: Project) -> None:
    project.agent("lead", tools="Read, Grep", allowed_subagents="[worker]")
    project.settings = Settings(roles={"agent": RoleSpec(deny=("Write",))})
    steps: list[str] = []
    request = SubagentStartRequest(
        "lead",
        "task",
        tool_filter={"deny": ["Grep"]},
        role="agent",
        response_schema=SCHEMA,
        persona="P",
    )
    model = _model('{"verdict": "approve"}')
    async with project.runtime(model, on_setup_step=steps.append) as runtime:
        info = await runtime.start(request)
        assert sorted(runtime.view(info.run_id).names) == [
            "Read",
            "Task",
            "TaskList",
            "TaskMessage",
            "TaskStop",
            "TaskWait",
        ]
    assert steps == [
        "persona",
        "restrict:definition",
        "restrict:toolFilter",
        "restrict:role:agent",
        "local-tools",
        "structured-output",
    ]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "failing",
    [
        "persona",
        "restrict:definition",
        "restrict:toolFilter",
        "restrict:role:agent",
        "local-tools",
        "structured-output",
    ],
)
async def test_a_failure_at_any_setup_step_publishes_nothing(
    project: Project, failing: str
) -> None:
    project.agent("lead", tools="Read, Grep", allowed_subagents="[worker]")
    project.settings = Settings(roles={"agent": RoleSpec(deny=("Write",))})

    def fail_at(step: str) -> None:
        if step == failing:
            raise RuntimeError(f"injected failure at {step}")

    model = _model()
    request = SubagentStartRequest(
        "lead", "task", tool_filter={"deny": ["Grep"]}, role="agent", response_schema=SCHEMA
    )
    async with project.runtime(model, on_setup_step=fail_at) as runtime:
        stream = runtime.events()
        with pytest.raises(SetupFailed) as caught:
            await runtime.start(request)
        assert caught.value.code == "setup-failed"
        assert caught.value.data["step"] == failing
        assert isinstance(caught.value.__cause__, RuntimeError)
        assert runtime.runs() == []
        assert runtime.store.list_sessions() == []
        assert runtime.store.events() == []
        stream.close()
    assert model.requests == []


@pytest.mark.anyio
async def test_a_role_restriction_naming_an_unknown_tool_fails_setup_chained(
    project: Project,
) -> None:
    project.agent("worker")
    project.settings = Settings(roles={"agent": RoleSpec(allow=("Raed",))})
    async with project.runtime(_model()) as runtime:
        with pytest.raises(SetupFailed) as caught:
            await runtime.start(SubagentStartRequest("worker", "task", role="agent"))
        assert isinstance(caught.value.__cause__, UnknownToolInFilter)
        assert caught.value.data["cause"] == "unknown-tool-in-filter"
        assert runtime.runs() == []


@pytest.mark.anyio
async def test_a_structured_answer_is_validated_and_returned(project: Project) -> None:
    project.agent("worker")
    model = _model('{"verdict": "approve"}')
    async with project.runtime(model) as runtime:
        result = await runtime.run(SubagentStartRequest("worker", "task", response_schema=SCHEMA))
    assert result.structured == {"verdict": "approve"}
    assert '"verdict"' in model.requests[0].system
    assert model.requests[0].response_schema == SCHEMA


@pytest.mark.anyio
async def test_a_final_answer_that_never_matches_the_schema_is_an_error(
    project: Project,
) -> None:
    project.agent("worker")
    model = ScriptedModel({"default": [{"text": "looks fine"}] * 5})
    async with project.runtime(model) as runtime:
        result = await runtime.run(SubagentStartRequest("worker", "task", response_schema=SCHEMA))
    assert result.status == "error"
    assert result.error is not None
    assert result.error["code"] == "structured-output-invalid"
