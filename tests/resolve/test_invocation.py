"""Spawn-time fields: ``frontmatter ?? call ?? default``, each with its source."""

from __future__ import annotations

import dataclasses

import pytest
from resolve_support import agent, builtins, deployment, run

from membrane.config.values import Settings
from membrane.errors import InvalidRequest
from membrane.resolve import CallParams, Checkout, ParentContext, Sourced


def test_file_model_and_background_lock_beat_the_call() -> None:
    # Seed 003 microcheck "two independent locks".
    definition = agent(model="openai:file-model", run_in_background=False)
    authority = run(definition, call=CallParams(model="call-model", run_in_background=True))
    assert authority.invocation["model"] == Sourced("openai:file-model", "frontmatter")
    assert authority.invocation["run_in_background"] == Sourced(False, "frontmatter")


def test_call_fills_fields_the_file_leaves_out() -> None:
    call = CallParams(thinking="low", max_turns=4, inherit_context=True, isolated=True)
    authority = run(agent(), call=call)
    assert authority.invocation["thinking"] == Sourced("low", "call")
    assert authority.invocation["max_turns"] == Sourced(4, "call")
    assert authority.invocation["inherit_context"] == Sourced(True, "call")
    assert authority.invocation["isolated"] == Sourced(True, "call")
    assert authority.invocation["run_in_background"] == Sourced(False, "default")


def test_explicit_false_in_frontmatter_is_not_missing() -> None:
    authority = run(agent(isolated=False, inherit_context=False), call=CallParams(isolated=True))
    assert authority.invocation["isolated"] == Sourced(False, "frontmatter")
    assert authority.invocation["inherit_context"] == Sourced(False, "frontmatter")


def test_default_max_turns_comes_from_the_deployment_when_set() -> None:
    deploy = deployment(settings=Settings(default_max_turns=12))
    assert run(agent(), deploy=deploy).invocation["max_turns"] == Sourced(12, "deployment")
    assert run(agent()).invocation["max_turns"] == Sourced(None, "default")


@pytest.mark.parametrize(
    ("file_model", "call_model"),
    [("inherit", "call-model"), (None, None), (None, "inherit")],
)
def test_model_inherit_or_absent_means_the_parent_model(
    file_model: str | None, call_model: str | None
) -> None:
    definition = agent(model=file_model) if file_model else agent()
    call = CallParams(model=call_model) if call_model else CallParams()
    authority = run(definition, call=call)
    assert authority.invocation["model"] == Sourced("parent-model", "parent")


def test_isolation_off_in_frontmatter_vetoes_a_callers_worktree() -> None:
    authority = run(agent(isolation="off"), call=CallParams(isolation="worktree"))
    assert authority.invocation["isolation"] == Sourced("off", "frontmatter")
    assert authority.checkout.kind == "main"
    assert authority.checkout.path == "/srv/project"


def test_an_allowed_and_requested_worktree_is_a_worktree_checkout() -> None:
    authority = run(agent(), call=CallParams(isolation="worktree"))
    assert authority.invocation["isolation"] == Sourced("worktree", "call")
    assert authority.checkout == Checkout(
        "worktree",
        "/srv/project/.membrane/worktrees/<run-id>",
        "/srv/project/.membrane/worktrees",
    )
    assert "/srv/project/.membrane/worktrees/<run-id>" in authority.system_prompt


def test_a_project_below_the_repository_top_works_in_its_place_inside_the_worktree() -> None:
    deploy = deployment(project_subfolder="services/api/")
    authority = run(agent(isolation="worktree"), deploy=deploy)
    assert authority.checkout.worktrees == "/srv/project/.membrane/worktrees"
    assert authority.checkout.path == "/srv/project/.membrane/worktrees/<run-id>/services/api"
    assert "Working folder: /srv/project/.membrane/worktrees/<run-id>/services/api" in (
        authority.system_prompt
    )


def test_a_worktree_without_a_project_warns_that_the_start_will_fail() -> None:
    deploy = dataclasses.replace(deployment(), project=None)
    authority = run(agent(isolation="worktree"), deploy=deploy)
    assert authority.checkout.worktrees == "<project>/.membrane/worktrees"
    assert any("fails with worktree-unavailable" in w for w in authority.warnings)


def test_a_worktree_in_a_deployment_without_worktrees_runs_in_main_with_a_warning() -> None:
    deploy = deployment(settings=Settings(worktrees_enabled=False))
    authority = run(agent(isolation="worktree"), deploy=deploy)
    assert authority.invocation["isolation"] == Sourced("off", "deployment")
    assert authority.checkout.kind == "main"
    assert any("worktrees_enabled = false" in w for w in authority.warnings)


def test_permission_inherit_follows_the_parent_session_and_a_pin_wins() -> None:
    parent = ParentContext(tools=builtins(), permission_mode="acceptEdits")
    inheriting = run(agent(permission="inherit"), parent=parent)
    assert inheriting.invocation["permission"] == Sourced("acceptEdits", "parent")
    assert run(agent(), parent=parent).invocation["permission"] == Sourced("acceptEdits", "parent")
    pinned = run(agent(permission="plan"), parent=parent)
    assert pinned.invocation["permission"] == Sourced("plan", "frontmatter")
    assert "Permission mode: plan" in pinned.system_prompt


def test_call_params_from_json_keeps_null_as_not_given() -> None:
    call = CallParams.from_mapping({"model": "m", "max_turns": 3, "isolated": None})
    assert call == CallParams(model="m", max_turns=3)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ([], "call: expected a JSON object of call parameters, got a list"),
        ({"max_turn": 2}, "call: unknown call parameter 'max_turn'; did you mean 'max_turns'?"),
        (
            {"max_turns": 0},
            "call.max_turns: expected a whole number from 1 to 2**53-1, got the number 0",
        ),
        (
            {"max_turns": True},
            "call.max_turns: expected a whole number from 1 to 2**53-1, got a boolean",
        ),
        (
            {"max_turns": 2**53},
            "call.max_turns: expected a whole number from 1 to 2**53-1, got the number 9007",
        ),
        (
            {"max_turns": 3.0},
            "call.max_turns: expected a whole number from 1 to 2**53-1, got the number 3.0",
        ),
        ({"isolated": "yes"}, "call.isolated: expected true or false, got the string 'yes'"),
        ({"isolation": "sandbox"}, 'call.isolation: expected "off" or "worktree", got the string'),
        ({"model": ""}, "call.model: expected a non-empty string, got the string ''"),
    ],
)
def test_bad_call_parameters_fail_with_a_precise_message(payload: object, message: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        CallParams.from_mapping(payload)
    assert caught.value.code == "invalid-request"
    assert str(caught.value).startswith(message)


def test_a_call_takes_the_spawn_time_fields_and_a_description() -> None:
    from membrane.resolve.call_params import CallTable
    from membrane.vocabulary import SPAWN_FIELDS

    assert tuple(CallTable.model_fields) == (*SPAWN_FIELDS, "description")
