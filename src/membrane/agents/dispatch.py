"""Dispatch: the definition an agent type runs (with the ``fallback_subagent`` policy), and
the definition a top-level run requires, from a ``Catalog``'s winners.

Kept apart from the catalog, which a listing imports and which never dispatches.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from membrane.agents.definition import AgentDefinition, Dispatch
from membrane.errors import DefinitionError, UnknownAgent, UnknownSubagent

if TYPE_CHECKING:
    from membrane.config.values import Settings

__all__ = ["DEFAULT_FALLBACK", "Winners", "dispatch", "require", "startable"]


class Winners(Protocol):
    """What dispatch reads of a catalog (``membrane.agents.catalog.Catalog``, which calls it):
    the winner a name finds, every winner, the files that could not be used, the settings."""

    @property
    def settings(self) -> Settings: ...

    @property
    def errors(self) -> list[DefinitionError]: ...

    def definitions(self) -> Mapping[str, AgentDefinition]: ...

    def lookup(self, name: str) -> tuple[AgentDefinition | None, str]: ...


DEFAULT_FALLBACK = "general-purpose"


def _cannot_use(error: DefinitionError) -> str:
    """Why a name whose file exists but cannot be read is unusable: a broken file is never
    reported as unknown."""
    return f"is defined by {error.data['path']}, which cannot be used: {error}"


def _names_file(error: DefinitionError, name: str) -> bool:
    """Whether the unusable file of ``error`` is the one a run of ``name`` meant: its file
    name (or its ``opencode.json`` entry) is ``name``, in any case."""
    path = str(error.data.get("path", ""))
    stem = path.rpartition("#")[2] if "#" in path else Path(path).stem
    return stem.casefold() == name.casefold()


def dispatch(catalog: Winners, agent_type: str, *, child: bool = True) -> Dispatch:
    """Resolve an agent type, following ``fallback_subagent`` when it is unknown, disabled
    or ambiguous. ``UnknownSubagent`` when the policy is ``none`` or the fallback is missing.

    ``child``: the agent is started by another agent (a ``Task`` call), so a definition with
    ``mode: primary`` (top level only) counts as unusable; ``False`` for a top-level start.
    """
    found, why = catalog.lookup(agent_type)
    if found is None:
        broken = next((e for e in catalog.errors if _names_file(e, agent_type)), None)
        if broken is not None:
            why = _cannot_use(broken)
    if found is not None and child and found.mode == "primary":
        why = f"is a primary agent (mode: primary in {found.path}), run only at the top level"
    elif found is not None and found.is_enabled:
        note = None
        if found.name != agent_type:
            note = f"`{agent_type}` matched `{found.name}` (names match case-insensitively)"
        return Dispatch(found, agent_type, note)
    elif found is not None:
        why = f"is disabled ({found.path})"
    policy = catalog.settings.fallback_subagent
    if policy is not None and policy.strip().lower() == "none":
        raise _unknown(catalog, agent_type, why, "fallback_subagent is `none`, which fails closed")
    target = policy if policy is not None else DEFAULT_FALLBACK
    fallback, fallback_why = catalog.lookup(target)
    if fallback is not None and child and fallback.mode == "primary":
        fallback, fallback_why = None, "is a primary agent (mode: primary)"
    if fallback is None or not fallback.is_enabled:
        fallback_why = fallback_why or "is disabled"
        raise _unknown(catalog, agent_type, why, f"the fallback `{target}` {fallback_why}")
    if policy is None:
        note = (
            f"agent type `{agent_type}` {why}; using `{fallback.name}`, the default fallback "
            '(set fallback_subagent = "none" to fail instead)'
        )
    else:
        note = f"agent type `{agent_type}` {why}; using `{fallback.name}` (fallback_subagent)"
    return Dispatch(fallback, agent_type, note, fallback=True)


def require(catalog: Winners, name: str) -> AgentDefinition:
    """The usable definition ``name`` names for a top-level run (exact, else the one
    case-insensitive match), never a fallback: ``UnknownAgent`` with the closest names, and
    the file's own error when a file by that name exists but cannot be read."""
    found, why = catalog.lookup(name)
    if found is not None and found.is_enabled:
        return found
    if found is not None:
        why = f"is disabled (enabled: false in {found.path})"
    broken = next((e for e in catalog.errors if _names_file(e, name)), None)
    if broken is not None:
        why = _cannot_use(broken)
    import difflib  # only for a name that is not there

    known = sorted(n for n, d in catalog.definitions().items() if d.is_enabled)
    closest = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    hint = (
        f"did you mean {', '.join(f'`{c}`' for c in closest)}?"
        if closest
        else "`membrane agents list` shows the agents"
    )
    raise UnknownAgent(
        f"agent `{name}` {why}; {hint}",
        requested=name,
        reason=why,
        closest=closest,
        file_error=None if broken is None else broken.to_dict(),
    )


def startable(
    definitions: Mapping[str, AgentDefinition],
    allowed: Collection[str],
    *,
    fallback: str | None = DEFAULT_FALLBACK,
) -> tuple[str, ...]:
    """The agent types a parent whose ``allowed_subagents`` is ``allowed`` may start, as the
    catalog ``definitions`` stand now (what its ``Task`` offers as the ``agent`` enum).

    Each listed name that finds an enabled definition a ``Task`` call can start (exact, else
    the one case-insensitive match; not ``mode: primary``) gives that definition's name, in
    the list's order. A listed name that finds none would dispatch to ``fallback`` (``None``:
    the policy fails closed); it counts, as written, only when that fallback is usable and
    ``allowed`` admits it, as a start would be refused otherwise. ``*`` adds every usable
    definition that is not ``hidden``, sorted. No other name of the catalog is ever given."""

    def usable(definition: AgentDefinition | None) -> AgentDefinition | None:
        if definition is None or not definition.is_enabled or definition.mode == "primary":
            return None
        return definition

    folded: dict[str, list[AgentDefinition]] = {}
    for name, definition in definitions.items():
        folded.setdefault(name.casefold(), []).append(definition)

    def find(name: str) -> AgentDefinition | None:
        found = definitions.get(name)
        if found is None and len(folded.get(name.casefold(), ())) == 1:
            found = folded[name.casefold()][0]
        return found

    admitted = {name.casefold() for name in allowed}
    spare = usable(find(fallback)) if fallback is not None else None
    falls_back = spare is not None and ("*" in admitted or spare.name.casefold() in admitted)
    names: dict[str, None] = {}
    for name in allowed:
        if name == "*":
            continue
        found = usable(find(name))
        if found is not None:
            names[found.name] = None
        elif falls_back:
            names[name] = None
    if "*" in admitted:
        for name, definition in sorted(definitions.items()):
            if usable(definition) is not None and definition.hidden is not True:
                names[name] = None
    return tuple(names)


def _unknown(catalog: Winners, agent_type: str, why: str, policy: str) -> UnknownSubagent:
    import difflib  # only for a name that is not there

    known = sorted(name for name, d in catalog.definitions().items() if d.is_enabled)
    close = difflib.get_close_matches(agent_type, known, n=1)
    hint = f"did you mean `{close[0]}`?" if close else "known: " + ", ".join(known)
    return UnknownSubagent(
        f"agent type `{agent_type}` {why}, and {policy}; {hint}",
        requested=agent_type,
        reason=why,
        known=known,
        suggestion=close[0] if close else None,
    )
