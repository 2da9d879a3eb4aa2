"""Restrictions: predicates over global tools that a scope installs.

A scope's global tools are those every installed predicate admits. ``Restriction`` is the name
based one (a ``toolFilter``): ``allow`` applies before ``deny``. Other predicates (a definition's
origin-aware selectors, a caller's role) implement ``ToolPredicate`` and are installed the same way.

Live semantics follow from evaluating a predicate against the registry as it is now: a deny-only
restriction admits a global tool registered later unless it names it; an allow-list excludes a
later tool unless it names it.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import Protocol, final, runtime_checkable

from membrane.errors import EmptyToolFilter, ToolFilterError, UnknownToolInFilter
from membrane.tools.registry import ToolRegistry
from membrane.tools.spec import Tool

__all__ = ["NamedAdmission", "Restriction", "ToolPredicate", "closest_name"]


@runtime_checkable
class ToolPredicate(Protocol):
    """Anything ``Scope.restrict`` accepts.

    ``admits`` is asked about global tools only (none of them is reserved). ``stamp`` must
    change whenever ``admits`` may answer differently for the same tool; views are cached on it.
    """

    label: str

    def admits(self, tool: Tool) -> bool: ...

    def stamp(self) -> Hashable: ...


@runtime_checkable
class NamedAdmission(Protocol):
    """A ``ToolPredicate`` that also says in one call which global tools it admits now.

    ``admitted_names(registry)`` must be exactly the names of the registry's tools that
    ``admits`` accepts at this moment. A scope resolving from scratch then intersects that set
    with the others in one C-level pass instead of asking ``admits`` about every tool.
    """

    def admitted_names(self, registry: ToolRegistry) -> AbstractSet[str]: ...


@final
class Restriction:
    """A name-based filter: a global tool passes when ``allow`` (if given) names it and ``deny``
    does not. ``allow=[]`` is valid and hides every global tool.

    Immutable; its ``stamp`` never changes.
    """

    __slots__ = ("_order", "_stamp", "allow", "deny", "label")

    allow: frozenset[str] | None
    deny: frozenset[str]

    def __init__(
        self,
        *,
        allow: Iterable[str] | None = None,
        deny: Iterable[str] | None = None,
        label: str = "toolFilter",
    ) -> None:
        allowed = None if allow is None else _names(allow, field="allow", label=label)
        denied = () if deny is None else _names(deny, field="deny", label=label)
        self.label = label
        self.allow = None if allowed is None else frozenset(allowed)
        self.deny = frozenset(denied)
        #: Entries in the order given, for error messages that name the first bad one.
        self._order = tuple(("allow", name) for name in allowed or ()) + tuple(
            ("deny", name) for name in denied
        )
        self._stamp = (self.allow, self.deny)

    @classmethod
    def from_mapping(cls, data: Mapping[str, object], *, label: str = "toolFilter") -> Restriction:
        """Build from untrusted ``{"allow": [...], "deny": [...]}``, e.g. a request's toolFilter."""
        if not isinstance(data, Mapping):
            raise ToolFilterError(
                f"{label} must be a mapping with 'allow' and/or 'deny', got {type(data).__name__}",
                label=label,
            )
        unknown = sorted(str(key) for key in data if key not in ("allow", "deny"))
        if unknown:
            raise ToolFilterError(
                f"{label} has unknown key {unknown[0]!r}; only 'allow' and 'deny' are accepted",
                label=label,
                key=unknown[0],
            )
        allow, deny = data.get("allow"), data.get("deny")
        return cls(allow=_list(allow, "allow", label), deny=_list(deny, "deny", label), label=label)

    def admits(self, tool: Tool) -> bool:
        name = tool.name
        return (self.allow is None or name in self.allow) and name not in self.deny

    def stamp(self) -> Hashable:
        return self._stamp

    def narrow(self, names: AbstractSet[str]) -> AbstractSet[str]:
        """The subset of ``names`` this restriction admits, by set algebra (no per-tool call)."""
        kept = names if self.allow is None else names & self.allow
        return kept - self.deny if self.deny else kept

    def validate(
        self,
        registry: ToolRegistry,
        *,
        local: Iterable[str] = (),
        visible: Iterable[str] | None = None,
    ) -> None:
        """Check this restriction against the names it may mention now.

        Raises ``EmptyToolFilter`` when it has neither ``allow`` nor ``deny`` and
        ``UnknownToolInFilter`` for the first entry it cannot name. Every such entry gets the
        same wording whatever the reason (not registered, scope-local, reserved, not visible),
        so the error reveals nothing about tools the caller cannot see.

        ``visible`` is what the caller may see (a parent's view). When given, only the global
        tools in it may be named and only they are offered as suggestions; an untrusted caller
        must pass it. When omitted (trusted, in-process callers), every global tool counts.
        ``local`` (the installing scope's own names) changes nothing: a scope-local name is
        refused like any other unless a global tool of that name exists, which the filter then
        restricts (the local tool shadows it in the view either way).
        """
        if self.allow is None and not self.deny:
            raise EmptyToolFilter(
                f"{self.label} gives neither 'allow' nor 'deny'; it would restrict nothing. "
                "Give 'allow' (an empty list hides every global tool) or 'deny'",
                label=self.label,
            )
        nameable = registry.restrictable_names()
        if visible is not None:
            nameable = nameable & frozenset(visible)
        for field, name in self._order:
            if name in nameable:
                continue
            suggestion = closest_name(name, nameable)
            hint = f"; did you mean {suggestion!r}?" if suggestion else ""
            raise UnknownToolInFilter(
                f"{self.label}.{field} names {name!r}, which is not a tool this filter can name "
                f"(filters name global tools; scope-local and reserved tools are outside "
                f"them){hint}",
                name=name,
                suggestion=suggestion,
                field=field,
                label=self.label,
            )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Restriction):
            return NotImplemented
        return (self.allow, self.deny, self.label) == (other.allow, other.deny, other.label)

    def __hash__(self) -> int:
        return hash((self.allow, self.deny, self.label))

    def __repr__(self) -> str:
        allow = "None" if self.allow is None else repr(sorted(self.allow))
        return f"Restriction(allow={allow}, deny={sorted(self.deny)!r}, label={self.label!r})"


def closest_name(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate closest to ``name``: an exact case-insensitive match first, then difflib's."""
    by_fold: dict[str, str] = {}
    for candidate in sorted(candidates, reverse=True):
        by_fold[candidate.casefold()] = candidate
    folded = name.casefold()
    if folded in by_fold:
        return by_fold[folded]
    import difflib  # only for a name that is not there, as the other close-match finders

    matches = difflib.get_close_matches(folded, list(by_fold), n=1, cutoff=0.6)
    return by_fold[matches[0]] if matches else None


def _names(values: Iterable[str], *, field: str, label: str) -> tuple[str, ...]:
    if isinstance(values, str | bytes):
        raise ToolFilterError(
            f"{label}.{field} must be a list of tool names, not a single string {values!r}",
            label=label,
            field=field,
        )
    names = tuple(values)
    for name in names:
        if not isinstance(name, str) or not name:
            raise ToolFilterError(
                f"{label}.{field} holds {name!r}; every entry must be a non-empty tool name",
                label=label,
                field=field,
            )
    return names


def _list(value: object, field: str, label: str) -> Iterable[str] | None:
    if value is None:
        return None
    if not isinstance(value, list | tuple):
        raise ToolFilterError(
            f"{label}.{field} must be a list of tool names, got {type(value).__name__}",
            label=label,
            field=field,
        )
    return _names(value, field=field, label=label)
