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


@dataclass(slots=True)
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
        # Sections composed before need no rendering (they hold no persona to render).
        plain = _plain_composition(self)
        sections: list[PromptSection] = []
        if plain is not None:
            pass
        elif self.checkout is None:
            sections = list(self.sections)
        else:
            sections = [self._placed(section) for section in self.sections]
        observe = self.on_step
        # The step running now: what a failure (of the step or of its observer) is named by.
        step = "persona"
        try:
            if observe is not None:
                _observe(observe, step, self.run_id)
            if plain is None:
                sections = list(render_sections(sections, self.persona_values))
            for predicate in self.restrictions:
                step = f"restrict:{predicate.label}"
                if observe is not None:
                    _observe(observe, step, self.run_id)
                if isinstance(predicate, RoleRestriction):
                    predicate.validate(scope.registry, local=[*scope.locals(), *scope.reserved()])
                scope.restrict(predicate, validate=isinstance(predicate, Restriction))
            if self.call_gate is not None:
                step = "permissions"
                if observe is not None:
                    _observe(observe, step, self.run_id)
                scope.guard(self.call_gate)
            if self.local_tools or observe is not None:  # an empty step unobserved: none
                step = "local-tools"
                if observe is not None:
                    _observe(observe, step, self.run_id)
                for tool in self.local_tools:
                    scope.add_local(tool)
            for gate in self.gates:
                step = f"gate:{gate.label}"
                if observe is not None:
                    _observe(observe, step, self.run_id)
                scope.gate(gate)
            if self.response_schema is not None:
                step = "structured-output"
                if observe is not None:
                    _observe(observe, step, self.run_id)
                text = structured_section(self.response_schema)
                sections.append(PromptSection(STRUCTURED_SECTION, text, "child"))
        except SetupFailed:
            raise
        except Exception as exc:
            raise _failed(self.run_id, step, exc) from exc
        if plain is not None:
            return plain
        persona = next((s.text for s in sections if s.name == PERSONA_SECTION), None)
        composition = ChildComposition(
            system=join_sections(sections),
            persona=persona,
            sections=tuple((s.name, s.text) for s in sections),
            response_schema=self.response_schema,
        )
        if self.checkout is None and self.response_schema is None and persona is None:
            _remember(self.sections, composition)
        return composition

    def _placed(self, section: PromptSection) -> PromptSection:
        if self.checkout is None or self.checkout[0] not in section.text:
            return section
        placeholder, real = self.checkout
        return replace(section, text=section.text.replace(placeholder, real))


#: The last composition made of a tuple of sections with no persona to render, no checkout to
#: place and no response schema, with that tuple: the same sections compose to the same
#: (frozen) value, so the children of one resolved definition started one after another share
#: one. One entry, so nothing older than the last such composition is kept.
_PLAIN: list[tuple[tuple[PromptSection, ...], ChildComposition]] = []


def _plain_composition(setup: ChildSetup) -> ChildComposition | None:
    """The composition ``setup`` makes, when the last one remembered is of the same sections."""
    if setup.checkout is not None or setup.response_schema is not None or not _PLAIN:
        return None
    sections, composition = _PLAIN[0]
    return composition if sections is setup.sections else None


def _remember(sections: Sequence[PromptSection], composition: ChildComposition) -> None:
    if isinstance(sections, tuple):  # a list may change: its composition is made each time
        _PLAIN[:] = [(sections, composition)]


def _observe(observe: SetupStep, step: str, run_id: str) -> None:
    """Tell the observer that ``step`` starts; what it raises fails that step."""
    try:
        observe(step)
    except Exception as exc:
        raise _failed(run_id, step, exc) from exc


def _failed(run_id: str, step: str, exc: Exception) -> SetupFailed:
    """``SetupFailed`` for ``exc``, raised by the step ``step`` or by its observer."""
    code = exc.code if isinstance(exc, MembraneError) else None
    detail = exc.message if isinstance(exc, MembraneError) else f"{type(exc).__name__}: {exc}"
    if isinstance(exc, ToolFilterError) and step.startswith("restrict:"):
        # A filter that matched the registry when it was checked no longer does: the
        # registry changed since. The message reaches models and socket callers, who must
        # not learn a hidden tool's name from it; the chained cause keeps the detail.
        detail = (
            f"the {step.removeprefix('restrict:')} filter names a tool that is not "
            "registered now; this is a deployment configuration problem, not something "
            "a different call can fix"
        )
    return SetupFailed(
        f"setting up child {run_id!r} failed at step {step!r}: {detail}; nothing was published",
        run_id=run_id,
        step=step,
        cause=code,
    )


def structured_section(schema: Mapping[str, Any]) -> str:
    """The prompt contribution of a response schema."""
    text = json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False)
    return (
        "When you give your final answer, reply with only a JSON value that validates against "
        f"this JSON Schema, and nothing else:\n{text}"
    )
