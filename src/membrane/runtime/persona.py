"""Personas: strict ``{{name}}`` templates (seed 001, DESIGN rule 6).

A persona is a strict template: ``{{name}}`` placeholders are filled from a fixed set of
variables, and a placeholder that cannot be filled (an unknown name, an unterminated ``{{``, a
stray ``}}``) is ``InvalidPersona`` (``invalid-persona``), never left in the prompt.

The deployment persona is the global prompt section ``deployment:persona``. A start request's
persona is a child-scoped section of the same name that shadows the global one for that child
only (the resolver places it; ``ChildSetup`` renders it); an empty string shadows it with
nothing. Both are rendered with the same variables, so both follow the same strict rules.

``persona_values`` and ``render_sections`` are the one rendering: the runtime's setup renders a
child's sections with them, and ``membrane explain`` renders the same sections the same way, so
the system prompt it prints is the one the child's first request carries.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Final

from membrane.errors import InvalidPersona
from membrane.resolve.prompt import PromptSection

__all__ = [
    "PERSONA_SECTION",
    "PERSONA_VARIABLES",
    "check_persona",
    "join_sections",
    "persona_values",
    "placeholders",
    "render_persona",
    "render_sections",
]

PERSONA_SECTION: Final = "deployment:persona"
#: Every variable a persona may name; all are known by the time a child is set up.
PERSONA_VARIABLES: Final = frozenset(
    {"agent", "agent_type", "cwd", "depth", "model", "parent_id", "project", "run_id"}
)
_PLACEHOLDER = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_persona(template: object, *, where: str) -> str:
    """Validate a persona template's type and every placeholder; return it unchanged."""
    if not isinstance(template, str):
        raise InvalidPersona(
            f"{where} must be a string template, got {type(template).__name__}",
            where=where,
        )
    for match in _PLACEHOLDER.finditer(template):
        name = match.group(1)
        if not _NAME.fullmatch(name):
            raise InvalidPersona(
                f"{where} has the malformed placeholder {match.group(0)!r}; "
                "write {{name}} with a plain identifier",
                where=where,
                placeholder=match.group(0),
            )
        if name not in PERSONA_VARIABLES:
            known = ", ".join(sorted(PERSONA_VARIABLES))
            raise InvalidPersona(
                f"{where} names {{{{{name}}}}}, which cannot be filled; known variables: {known}",
                where=where,
                placeholder=name,
            )
    rest = _PLACEHOLDER.sub("", template)
    for token in ("{{", "}}"):
        if token in rest:
            raise InvalidPersona(
                f"{where} has an unmatched {token!r}; every placeholder is written {{{{name}}}}",
                where=where,
                placeholder=token,
            )
    return template


def render_persona(template: str, values: Mapping[str, str], *, where: str) -> str:
    """Fill every placeholder from ``values``; a missing value is ``InvalidPersona``."""
    check_persona(template, where=where)

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise InvalidPersona(
                f"{where} names {{{{{name}}}}}, which has no value for this child",
                where=where,
                placeholder=name,
            )
        return values[name]

    return _PLACEHOLDER.sub(fill, template)


def persona_values(
    *,
    agent: str,
    agent_type: str,
    cwd: str,
    depth: int,
    model: str | None,
    parent_id: str | None,
    project: str | None,
    run_id: str,
) -> dict[str, str]:
    """The value of every ``PERSONA_VARIABLES`` name for one child (absent ones are ``""``)."""
    return {
        "agent": agent,
        "agent_type": agent_type,
        "cwd": cwd,
        "depth": str(depth),
        "model": model or "",
        "parent_id": parent_id or "",
        "project": project or "",
        "run_id": run_id,
    }


def render_sections(
    sections: Sequence[PromptSection], values: Mapping[str, str]
) -> tuple[PromptSection, ...]:
    """``sections`` with the ``deployment:persona`` one rendered strictly; the others as they
    are. The deployment's persona is refused as ``settings.persona``, a request's as ``persona``."""
    rendered = []
    for section in sections:
        if section.name == PERSONA_SECTION:
            where = "settings.persona" if section.scope == "global" else "persona"
            section = replace(section, text=render_persona(section.text, values, where=where))
        rendered.append(section)
    return tuple(rendered)


def join_sections(sections: Sequence[PromptSection]) -> str:
    """The system prompt made of ``sections``: their texts, empty ones left out."""
    return "\n\n".join(section.text for section in sections if section.text)


def placeholders(template: str) -> frozenset[str]:
    """The variable names ``template`` places (well-formed placeholders only)."""
    return frozenset(match.group(1) for match in _PLACEHOLDER.finditer(template))
