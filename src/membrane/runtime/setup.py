"""Unpublished setup: the one callback that composes a child before anyone can see it.

``ChildSetup`` installs, in this order, into the child's still-private ``Scope`` and prompt:

1. ``persona``: the ``deployment:persona`` section (the request's shadow, or the deployment's),
   rendered as a strict template;
2. ``restrict:<label>``: each restriction (the definition's, the request's ``toolFilter``, the
   caller's role), through ``Scope.restrict``, so one resolver governs schemas and execution;
3. ``permissions``: the child's permission gate (``Scope.guard``), when its rules or its
   parent's (an inheriting child) govern any call;
4. ``local-tools``: scope-local tools (the delegation tools of a parent that may delegate),
   added after the global filter as seed 001 rule 3 requires;
   ``gate:<label>``: each gate (a workflow's phase gate), through ``Scope.gate``, over global
   and local tools alike;
5. ``structured-output``: when a response schema is asked for, a prompt section that states it
   (the loop validates the final answer against the same schema and asks again when it fails).

Any failure raises ``SetupFailed`` (``setup-failed``) naming the step, chained to the cause; the
runtime then discards the scope and publishes nothing. The first model request is therefore
built from a complete composition, and so is every later one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from membrane.errors import MembraneError, SetupFailed, ToolFilterError
from membrane.resolve.prompt import PromptSection
from membrane.resolve.roles import RoleRestriction
from membrane.runtime.persona import PERSONA_SECTION, join_sections, render_sections
from membrane.runtime.provider import ChildComposition
from membrane.tools.permissions import ToolGate
from membrane.tools.restriction import Restriction, ToolPredicate
from membrane.tools.scope import Scope
from membrane.tools.spec import Tool

__all__ = ["STRUCTURED_SECTION", "ChildSetup", "SetupStep"]

STRUCTURED_SECTION: Final = "output:structured"
#: Called with each step's name just before it runs; raising from it fails that step.
SetupStep = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class ChildSetup:
    """Everything one child's setup installs; calling it with the child's scope installs it.

    ``sections`` are the resolver's prompt sections in order; the ``deployment:persona`` one
    (the request's shadow or the deployment's) is still a template, rendered here strictly with
    ``persona_values``. ``checkout`` replaces the resolver's placeholder checkout path with the
    real one (a worktree is created just before setup). ``on_step`` observes each step.
    """

    run_id: str
    sections: Sequence[PromptSection]
    persona_values: Mapping[str, str]
    restrictions: Sequence[ToolPredicate] = ()
    #: The permission gate (``Scope.guard``) every call of the child passes.
    call_gate: ToolGate | None = None
    local_tools: Sequence[Tool] = ()
    gates: Sequence[ToolPredicate] = ()
    response_schema: Mapping[str, Any] | None = None
    checkout: tuple[str, str] | None = None
    on_step: SetupStep | None = field(default=None, compare=False)

    def __call__(self, scope: Scope) -> ChildComposition:
        if self.checkout is None:
            sections = list(self.sections)
        else:
            sections = [self._placed(section) for section in self.sections]
        with self._step("persona"):
            sections = list(render_sections(sections, self.persona_values))
        for predicate in self.restrictions:
            with self._step(f"restrict:{predicate.label}"):
                if isinstance(predicate, RoleRestriction):
                    predicate.validate(scope.registry, local=[*scope.locals(), *scope.reserved()])
                scope.restrict(predicate, validate=isinstance(predicate, Restriction))
        if self.call_gate is not None:
            with self._step("permissions"):
                scope.guard(self.call_gate)
        if self.local_tools or self.on_step is not None:  # an empty step unobserved: none
            with self._step("local-tools"):
                for tool in self.local_tools:
                    scope.add_local(tool)
        for gate in self.gates:
            with self._step(f"gate:{gate.label}"):
                scope.gate(gate)
        if self.response_schema is not None:
            with self._step("structured-output"):
                text = structured_section(self.response_schema)
                sections.append(PromptSection(STRUCTURED_SECTION, text, "child"))
        persona = next((s.text for s in sections if s.name == PERSONA_SECTION), None)
        return ChildComposition(
            system=join_sections(sections),
            persona=persona,
            sections=tuple((s.name, s.text) for s in sections),
            response_schema=self.response_schema,
        )

    def _placed(self, section: PromptSection) -> PromptSection:
        if self.checkout is None or self.checkout[0] not in section.text:
            return section
        placeholder, real = self.checkout
        return replace(section, text=section.text.replace(placeholder, real))

    def _step(self, name: str) -> _Step:
        return _Step(self, name)


class _Step:
    """Runs one named step: calls the observer, and turns any failure into ``SetupFailed``."""

    __slots__ = ("_name", "_setup")

    def __init__(self, setup: ChildSetup, name: str) -> None:
        self._setup = setup
        self._name = name

    def __enter__(self) -> None:
        if self._setup.on_step is not None:
            try:
                self._setup.on_step(self._name)
            except Exception as exc:
                raise self._failed(exc) from exc

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, Exception) and not isinstance(exc, SetupFailed):
            raise self._failed(exc) from exc

    def _failed(self, exc: Exception) -> SetupFailed:
        code = exc.code if isinstance(exc, MembraneError) else None
        detail = exc.message if isinstance(exc, MembraneError) else f"{type(exc).__name__}: {exc}"
        if isinstance(exc, ToolFilterError) and self._name.startswith("restrict:"):
            # A filter that matched the registry when it was checked no longer does: the
            # registry changed since. The message reaches models and socket callers, who must
            # not learn a hidden tool's name from it; the chained cause keeps the detail.
            detail = (
                f"the {self._name.removeprefix('restrict:')} filter names a tool that is not "
                "registered now; this is a deployment configuration problem, not something "
                "a different call can fix"
            )
        return SetupFailed(
            f"setting up child {self._setup.run_id!r} failed at step {self._name!r}: {detail}; "
            "nothing was published",
            run_id=self._setup.run_id,
            step=self._name,
            cause=code,
        )


def structured_section(schema: Mapping[str, Any]) -> str:
    """The prompt contribution of a response schema."""
    text = json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False)
    return (
        "When you give your final answer, reply with only a JSON value that validates against "
        f"this JSON Schema, and nothing else:\n{text}"
    )
