"""What resolving a view and checking a name cost, counted in Python-level calls: the
per-call check (a lookup in the view's built-in ``visible`` set, what ``call`` checks) runs no
Python code, and a cold resolution of a scope whose restrictions are ``Restriction``s makes as
many calls over 1,000 tools as over 100."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from membrane import Restriction, Scope, Tool, ToolContext, ToolRegistry, ToolView


async def _handler(arguments: Mapping[str, Any], context: ToolContext) -> str:
    return "ok"


def _tool(name: str, **options: Any) -> Tool:
    return Tool(name, f"{name}.", {"type": "object"}, _handler, **options)


def python_calls(action: Callable[[], object]) -> int:
    """Python functions entered while ``action`` runs (itself excluded)."""
    calls = 0

    def profile(frame: object, event: str, arg: object) -> None:
        nonlocal calls
        if event == "call":
            calls += 1

    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
    return calls - 1


@pytest.mark.costs
def test_the_visibility_check_runs_no_python_code() -> None:
    registry = ToolRegistry()
    for i in range(50):
        registry.register(_tool(f"t{i:03d}"))
    scope = Scope(registry, name="child")
    scope.restrict(Restriction(deny=["t007"]))
    scope.add_local(_tool("mine"))
    view = scope.view()
    # A built-in set, not a subclass: CPython reaches a subclass's lookup through a method call.
    assert type(view.visible) is frozenset
    assert python_calls(lambda: "t008" in view.visible) == 0
    assert python_calls(lambda: "t007" in view.visible) == 0
    assert view.visible == {f"t{i:03d}" for i in range(50)} - {"t007"} | {"mine"}
    assert "t008" in view and "t007" not in view and "T008" not in view and "mine" in view
    assert len(view) == 50 and list(view) == sorted(view) == list(view.names)
    # Views of one resolution share the set: a rekeyed view builds none.
    scope.guard(_AllowAll())
    assert scope.view() is not view and scope.view().visible is view.visible


class _AllowAll:
    async def check(self, tool: Tool, arguments: Mapping[str, Any], context: ToolContext) -> None:
        return None


def test_a_view_holds_its_names_and_compares_by_identity() -> None:
    registry = ToolRegistry()
    for name in ("b", "a", "c"):
        registry.register(_tool(name))
    first, second = Scope(registry, name="one"), Scope(registry, name="two")
    second.restrict(Restriction(allow=["a", "b", "c"]))
    one, two = first.view(), second.view()
    assert set(one) == {"a", "b", "c"} and list(one) == ["a", "b", "c"] == list(two)
    # Equal names are not the same resolution: views compare and hash by identity.
    assert one != two and one == one and len({one, two}) == 2
    # Scopes with nothing of their own, under the same predicates, share one resolution.
    assert Scope(registry, name="three").view() is one
    # Its wire schemas are one tuple for every request, equal to the copies schemas() gives.
    assert one.wire_schemas() is one.wire_schemas()
    assert list(one.wire_schemas()) == one.schemas() and one.schemas() is not one.schemas()
    assert ToolView.of([_tool("x")]) != ToolView.of([_tool("x")])
    registry.register(_tool("d"))
    later = first.view()
    assert "d" in later and "d" not in one and list(later) == ["a", "b", "c", "d"]


@pytest.mark.costs
def test_a_cold_resolution_makes_the_same_calls_at_any_registry_size() -> None:
    def cold_calls(size: int) -> int:
        registry = ToolRegistry()
        names = [f"tool_{i:05d}" for i in range(size)]
        for name in names:
            registry.register(_tool(name))
        registry.register(_tool("needs", requires=frozenset({"backend"})))
        restrictions = [
            Restriction(deny=names[1::97][:3], label="toolFilter"),
            Restriction(allow=[*names[: size * 9 // 10], "needs"], label="definition"),
            Restriction(deny=names[2::89][:2], label="role:worker"),
        ]

        def configured() -> Scope:
            scope = Scope(registry, name="child")
            for restriction in restrictions:
                scope.restrict(restriction, validate=False)
            for i in range(3):
                scope.add_local(_tool(f"local_{i}"))
            return scope

        configured().view().schemas()  # every tool's wire entry rendered once
        scope = configured()
        calls = python_calls(lambda: scope.view().schemas())
        view = scope.view()
        assert "needs" not in view and names[1] not in view and "local_0" in view
        denied = {*names[1::97][:3], *names[2::89][:2]}
        admitted = {n for n in names[: size * 9 // 10] if n not in denied}
        assert set(view) == admitted | {"local_0", "local_1", "local_2"}
        return calls

    assert cold_calls(100) == cold_calls(1_000)
