"""The error tree: families a caller catches, the ``retryable`` marker, and the drawing in
``membrane.errors``' docstring that lists every class with its code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from membrane import Catalog, Settings, errors
from membrane.errors import (
    MembraneError,
    NotFound,
    PermissionRefused,
    RunError,
    ToolCallError,
    error_class,
)
from membrane.lowlevel import PermissionGate, PermissionRule
from membrane.tools.registry import ToolRegistry
from membrane.tools.scope import Scope
from membrane.tools.spec import Tool, ToolContext

_FAMILIES = {"NotFound": NotFound, "PermissionRefused": PermissionRefused}


def _classes() -> dict[str, type[MembraneError]]:
    return {
        name: value
        for name in errors.__all__
        if isinstance(value := getattr(errors, name), type) and issubclass(value, MembraneError)
    }


def _drawn() -> dict[str, tuple[str, str]]:
    """Each class the docstring's tree draws: its code and what follows it on the line."""
    assert errors.__doc__ is not None
    drawn: dict[str, tuple[str, str]] = {}
    for line in errors.__doc__.splitlines():
        found = re.search(r"[├└]── (\w+) \.+ ([a-z-]+)\s*(.*)$", line)
        if found is not None:
            drawn[found[1]] = (found[2], found[3].strip())
    return drawn


def test_the_docstring_draws_every_class_with_its_code_and_its_families() -> None:
    drawn = _drawn()
    bases = {"MembraneError", "ConfigError", "RunError", "NotFound", "PermissionRefused"}
    assert set(drawn) == set(_classes()) - bases
    for name, (code, notes) in drawn.items():
        cls = _classes()[name]
        assert cls.code == code, name
        named = {word for word in notes.split() if word in _FAMILIES}
        assert named == {family for family, kind in _FAMILIES.items() if issubclass(cls, kind)}, (
            name
        )
        assert ("retryable" in notes.split()) is cls.retryable, name


def test_every_code_names_one_class_and_leads_back_to_it() -> None:
    classes = _classes()
    assert len({cls.code for cls in classes.values()}) == len(classes)
    for cls in classes.values():
        assert error_class(cls.code) is cls
    assert error_class("no-such-code") is None


def test_only_a_request_that_may_succeed_later_unchanged_is_retryable() -> None:
    retryable = sorted(cls.code for cls in _classes().values() if cls.retryable)
    assert retryable == [
        "model-rate-limited",
        "queue-unavailable",
        "rate-limited",
        "request-pending",
        "run-leased",
        "too-many-buffered-bytes",
        "too-many-connections",
        "too-many-waits",
    ]


def test_the_families_keep_each_class_in_its_branch() -> None:
    # The branch decides the CLI's exit code: an unknown agent is still the developer's mistake.
    assert issubclass(errors.UnknownAgent, errors.ConfigError)
    assert issubclass(errors.UnknownRun, RunError)
    assert issubclass(errors.UnknownProject, errors.ServerError)
    assert issubclass(errors.TokenInvalid, errors.ServerError)


def test_an_unknown_subagent_is_caught_as_not_found(tmp_path: Path) -> None:
    catalog = Catalog(project=tmp_path, settings=Settings(fallback_subagent="none"))
    with pytest.raises(NotFound) as caught:
        catalog.dispatch("nobody")
    assert caught.value.code == "unknown-subagent"


async def _ran(arguments: object, context: ToolContext) -> str:
    return "ran"


def _scope(rules: list[PermissionRule]) -> Scope:
    registry = ToolRegistry()
    schema = {"type": "object", "properties": {"command": {"type": "string"}}}
    registry.register(Tool(name="Bash", description="run", input_schema=schema, handler=_ran))
    scope = Scope(registry, name="child")
    scope.guard(PermissionGate(rules))
    return scope


@pytest.mark.anyio
async def test_a_refused_call_is_a_tool_call_error_and_a_denial_also_a_permission_refusal(
    tmp_path: Path,
) -> None:
    view = _scope([PermissionRule("Bash", "rm:*", "deny", "Bash(rm:*)", "disallowed_tools")]).view()
    context = ToolContext(cwd=tmp_path)
    with pytest.raises(ToolCallError) as hidden:
        await view.call("Nope", {}, context)
    assert hidden.value.code == "tool-not-visible"
    assert not isinstance(hidden.value, PermissionRefused)
    with pytest.raises(ToolCallError) as bad:
        await view.call("Bash", {"command": 3}, context)
    assert bad.value.code == "tool-arguments-invalid"
    with pytest.raises(PermissionRefused) as denied:
        await view.call("Bash", {"command": "rm -rf /"}, context)
    assert denied.value.code == "tool-call-denied" and isinstance(denied.value, ToolCallError)
