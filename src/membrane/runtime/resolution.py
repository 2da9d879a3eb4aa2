"""Resolution of the host's children, memoized: the same definition resolved for the same
deployment with the same call is resolved once.

``resolve()`` is pure: its result depends only on its arguments. A runtime resolves the same
definition for the host again and again (a worker started a thousand times), and its inputs
then differ only in objects that are equal, so ``ResolutionMemo`` keys the result by what the
resolution reads:

* the definition, by identity: the catalog makes a new object when its file changes;
* the deployment, by identity: the runtime makes a new one when the registry, the catalog or
  the definition's memory changed (``SubagentRuntime`` keeps one while none did), and a new
  deployment drops every entry made under the one before;
* the parent's context: only the host's (``parent_key``), which is built from that same
  deployment, the runtime's project and its settings, both fixed for the runtime's life; a
  live parent's context (its view, prompt, transcript) is resolved every time;
* the call's parameters, the persona, the two name filters (by label and names) and the
  depth, by value.

A start whose inputs cannot be keyed (a filter of another kind, an unhashable value) is
resolved as before. The memo holds at most ``limit`` results.
"""

from __future__ import annotations

from collections.abc import Hashable

from membrane.agents.definition import AgentDefinition, Unset
from membrane.resolve import CallParams
from membrane.resolve.authority import Deployment, EffectiveAuthority, ParentContext, resolve
from membrane.resolve.roles import RoleRestriction
from membrane.tools.restriction import Restriction, ToolPredicate

__all__ = ["HOST", "ResolutionMemo"]

#: The ``parent_key`` of a child the host starts.
HOST = "host"

_Key = tuple[Hashable, ...]


class ResolutionMemo:
    """``resolve()`` with its results kept for the current deployment (see the module
    docstring). ``hits`` and ``misses`` count the lookups."""

    __slots__ = ("_deployment", "_known", "_limit", "hits", "misses")

    def __init__(self, *, limit: int = 256) -> None:
        self._deployment: Deployment | None = None
        self._known: dict[_Key, tuple[AgentDefinition, EffectiveAuthority]] = {}
        self._limit = limit
        self.hits = 0
        self.misses = 0

    def resolve(
        self,
        definition: AgentDefinition,
        call: CallParams,
        parent: ParentContext,
        deployment: Deployment,
        *,
        parent_key: str | None,
        persona: str | Unset | None,
        tool_filter: ToolPredicate | None,
        role: ToolPredicate | None,
        depth: int,
    ) -> EffectiveAuthority:
        """``resolve(...)`` of these arguments; ``parent_key`` is ``HOST`` for the host's
        context, ``None`` for a context that is never memoized."""
        key = _key(definition, call, parent_key, persona, tool_filter, role, depth)
        if key is not None:
            if deployment is not self._deployment:
                self._known.clear()
                self._deployment = deployment
            try:
                known = self._known.get(key)  # the one place the key is hashed on a hit
            except TypeError:  # a value in it that cannot be hashed
                key, known = None, None
            if known is not None and known[0] is definition:
                self.hits += 1
                return known[1]
        self.misses += 1
        authority = resolve(
            definition,
            call,
            parent,
            deployment,
            persona=persona,
            tool_filter=tool_filter,
            role=role,
            depth=depth,
        )
        if key is not None:
            if len(self._known) >= self._limit:
                self._known.clear()
            self._known[key] = (definition, authority)
        return authority


def _key(
    definition: AgentDefinition,
    call: CallParams,
    parent_key: str | None,
    persona: str | Unset | None,
    tool_filter: ToolPredicate | None,
    role: ToolPredicate | None,
    depth: int,
) -> _Key | None:
    if parent_key is None:
        return None
    filters = (_filter_key(tool_filter), _filter_key(role))
    if filters[0] is False or filters[1] is False:
        return None
    return (id(definition), parent_key, call, persona, filters, depth)


def _filter_key(predicate: ToolPredicate | None) -> Hashable:
    """A name filter's value (``False`` for a predicate that has none)."""
    if predicate is None:
        return None
    if isinstance(predicate, Restriction):
        return ("filter", predicate.label, predicate.allow, predicate.deny)
    if isinstance(predicate, RoleRestriction):
        # A role's restriction is fixed by its name: the runtime's settings are.
        return ("role", predicate.label)
    return False
