"""Number domains (``membrane.limits``): every public entry that takes a depth refuses the same
values with ``invalid-depth`` (seed 001: "every public entry validates the domain"), and every
count the same way with ``invalid-request``."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from membrane import (
    AgentDefinition,
    CallParams,
    Deployment,
    ParentContext,
    Settings,
    SubagentStartRequest,
    load_settings,
    resolve,
)
from membrane.errors import InvalidDepth, InvalidRequest, SettingsError
from membrane.limits import MAX_SAFE_INT, check_count, check_depth, check_depth_cap

NOT_DEPTHS = [
    pytest.param(True, id="true"),
    pytest.param(False, id="false"),
    pytest.param(0.5, id="fraction"),
    pytest.param(math.nan, id="nan"),
    pytest.param("3", id="numeric-string"),
    pytest.param(math.inf, id="infinity"),
    pytest.param(-1, id="negative"),
    pytest.param(-0.0, id="negative-zero"),
    pytest.param(MAX_SAFE_INT + 1, id="unsafe"),
]


def _worker() -> AgentDefinition:
    return AgentDefinition(name="worker", root="project", path=".membrane/agents/worker.md")


@pytest.mark.parametrize("value", NOT_DEPTHS)
def test_settings_refuse_a_max_depth_outside_the_domain(value: object) -> None:
    with pytest.raises(InvalidDepth) as caught:
        Settings(max_depth=value)  # type: ignore[arg-type]
    assert caught.value.code == "invalid-depth"


@pytest.mark.parametrize("value", NOT_DEPTHS)
def test_a_replaced_setting_is_checked_again(value: object) -> None:
    with pytest.raises(InvalidDepth):
        dataclasses.replace(Settings(), max_depth=value)


@pytest.mark.parametrize("value", NOT_DEPTHS)
def test_a_parent_context_refuses_a_depth_outside_the_domain(value: object) -> None:
    with pytest.raises(InvalidDepth) as caught:
        ParentContext(depth=value)  # type: ignore[arg-type]
    assert caught.value.code == "invalid-depth"


@pytest.mark.parametrize("value", NOT_DEPTHS)
def test_resolve_refuses_an_agent_depth_outside_the_domain(value: object) -> None:
    with pytest.raises(InvalidDepth):
        resolve(_worker(), CallParams(), ParentContext(), Deployment(), depth=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", NOT_DEPTHS)
def test_a_start_request_refuses_the_same_values(value: object) -> None:
    with pytest.raises(InvalidDepth):
        SubagentStartRequest("worker", "task", max_depth=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["true", "0.5", "nan", '"3"', "inf", "-1"])
def test_a_config_file_refuses_the_same_values(
    tmp_path: Path, isolated_home: Path, text: str
) -> None:
    config = tmp_path / ".membrane" / "config.toml"
    config.parent.mkdir()
    config.write_text(f"max_depth = {text}\n")
    with pytest.raises(SettingsError) as caught:
        load_settings(project=tmp_path)
    assert caught.value.data["key"] == "max_depth"


def test_provider_managed_is_a_cap_and_no_depth() -> None:
    assert check_depth_cap("provider-managed") is None
    assert Settings(max_depth="provider-managed").max_depth == "provider-managed"
    with pytest.raises(InvalidDepth):
        check_depth("provider-managed", what="depth")


def test_an_integral_float_is_a_depth_only_where_a_json_number_may_carry_it() -> None:
    assert check_depth(2.0, what="max_depth") == 2
    assert Settings(max_depth=2.0).max_depth == 2  # type: ignore[arg-type]
    with pytest.raises(InvalidDepth):
        check_depth(2.0, what="stored depth", exact=True)
    with pytest.raises(InvalidDepth):
        ParentContext(depth=2.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [True, 1.5, "2", -1, MAX_SAFE_INT + 1, None])
def test_a_count_outside_its_range_names_its_field(value: object) -> None:
    with pytest.raises(InvalidRequest) as caught:
        check_count(value, what="settings.grace_turns", minimum=0)
    assert caught.value.data["field"] == "grace_turns"
    assert check_count(None, what="max_turns", minimum=1, optional=True) is None
    assert check_count(MAX_SAFE_INT, what="max_turns", minimum=1) == MAX_SAFE_INT
