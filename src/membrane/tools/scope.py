"""``Scope``: where one agent's tool composition lives, and its one resolver.

A scope's view is, in this order (seed 001, DESIGN rule 5):

1. every global tool that all installed predicates admit (allow before deny within each
   ``Restriction``; several predicates intersect) and whose requirements (``Tool.requires``)
   the registry's ``requirements`` provide now. The registry holds no reserved tool, so
   nothing global gets past the filters;
2. the scope's local tools, which may shadow an admitted global tool;
3. the scope's reserved tools (``run_code``), outside every filter.

A **gate** (``Scope.gate``: a workflow's phase) is a predicate over the global and the local
tools of steps 1 and 2 alike; a tool it refuses is in neither the view nor any call path.

Scopes are flat: a child scope knows nothing of its parent's locals or restrictions.

Resolution is incremental. A view remembers the registry version, the scope version and the
predicate stamps it was resolved at. When only the registry or the scope's own tools moved, the
next view is derived from it by re-resolving just the names the registry's change log (or the
scope) touched, so one hot registration costs a handful of predicate calls and a copy, not a
re-filter of every tool. A new predicate, or a predicate whose ``stamp`` moved, resolves from
scratch: for ``Restriction``s that is a few C-level passes over the registry's names and wire
entries in name order (one membership pass per allow-list, one pass each to keep the admitted
names and their entries), with Python code only per denied name and per scope-local tool. A
predicate that can name what it admits (``NamedAdmission``: a definition's) counts as one more
allow-list; any other predicate is asked per tool. A
``Restriction`` never changes, so an unchanged view is found by comparing three versions.

Scopes of one registry whose view depends on nothing of their own (no local, reserved or gate
tool) share it: the same predicates and call gate (by identity) at the same key resolve to one
view object, so the many children of one definition hold one view, name set and schema tuple
between them, not one each (objects the garbage collector's full passes would visit per child).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Hashable, Mapping
from collections.abc import Set as AbstractSet
from contextlib import suppress
from itertools import compress
from operator import and_, is_
from types import MappingProxyType
from typing import Final, cast

from membrane.errors import ToolSpecError
from membrane.json_types import JSONDict
from membrane.tools.permissions import ToolGate
from membrane.tools.registry import ToolRegistry, check_tool, retag, wire_schema
from membrane.tools.restriction import Restriction, ToolPredicate
from membrane.tools.spec import Tool
from membrane.tools.view import ToolView

__all__ = ["Scope"]

#: Replay the change log while it is shorter than this share of the layer; rebuild otherwise.
_REPLAY_SHARE = 4

#: Classes whose instances passed the ``ToolPredicate`` check (a runtime-checkable protocol's
#: ``isinstance`` looks up every member each time: the cost of a start's whole restriction).
_PREDICATE_TYPES: set[type] = set()


#: The shared views at one registry version (see the module's docstring; an index of the
#: registry's, so a new version starts with none), by view key, predicate ids and call gate id.
#: Each entry holds its predicates and gate, so no id is reused while it lives. Cleared when
#: it reaches ``_SHARED_MOST`` entries.
_Shared = tuple[tuple[ToolPredicate, ...], ToolGate | None, ToolView]
_SHARED: Final = "membrane.tools.scope:shared-views"
_SHARED_MOST = 64


def _no_views(table: Mapping[str, Tool]) -> dict[Hashable, _Shared]:
    return {}


def _is_predicate(value: object) -> bool:
    kind = type(value)
    if kind in _PREDICATE_TYPES:
        return True
    if isinstance(value, ToolPredicate):
        _PREDICATE_TYPES.add(kind)
        return True
    return False


class Scope:
    """One agent's tool composition over a shared ``ToolRegistry``."""

    def __init__(self, registry: ToolRegistry, *, name: str) -> None:
        self.registry = registry
        self.name = name
        #: Bumps on every change to this scope (restriction, local or reserved tool).
        self.version = 0
        self._filter_version = 0
        self._restrictions: tuple[ToolPredicate, ...] = ()
        #: The installed predicates whose ``stamp`` must be read (all but ``Restriction``s).
        self._stamped: tuple[ToolPredicate, ...] = ()
        self._locals: dict[str, Tool] = {}
        self._reserved: dict[str, Tool] = {}
        self._view: ToolView | None = None
        #: What ``_view`` was resolved at: registry version, scope version, filter key.
        self._view_registry = -1
        self._view_version = -1
        self._view_requirements = -1
        #: No installed predicate has a stamp to read (only ``Restriction``s, no gate).
        self._plain = True
        #: ``_filter_version`` when ``_view`` was last resolved from scratch (a view derived
        #: from it keeps the same filter: the predicates' stamps in its key).
        self._view_filter = -1
        self._view_own: Mapping[str, Tool] = {}
        self._gates: tuple[ToolPredicate, ...] = ()
        self._call_gate: ToolGate | None = None
        #: Run at the start of every ``view()`` (``follow``).
        self._follows: tuple[Callable[[Scope], None], ...] = ()

    @property
    def restrictions(self) -> tuple[ToolPredicate, ...]:
        return self._restrictions

    @property
    def gates(self) -> tuple[ToolPredicate, ...]:
        return self._gates

    def gate(self, predicate: ToolPredicate) -> None:
        """Install ``predicate`` as a gate: unlike a restriction it applies to this scope's
        local tools as well as its global ones (a workflow's phase locks a delegation tool);
        only reserved tools are outside it. Its ``stamp`` is read at every resolution."""
        if not _is_predicate(predicate):
            raise ToolSpecError(
                f"scope {self.name!r}: gate() needs a ToolPredicate (label, admits, stamp), "
                f"got {type(predicate).__name__}",
                scope=self.name,
            )
        self._gates = (*self._gates, predicate)
        self._plain = False
        self.version += 1

    def locals(self) -> Mapping[str, Tool]:
        """This scope's local tools (read-only)."""
        return MappingProxyType(self._locals)

    def reserved(self) -> Mapping[str, Tool]:
        """This scope's reserved tools (read-only)."""
        return MappingProxyType(self._reserved)

    def restrict(self, predicate: ToolPredicate, *, validate: bool = True) -> None:
        """Install ``predicate``; every global tool in this scope's view must pass it.

        A ``Restriction`` is validated against the registry first unless ``validate`` is false
        (``EmptyToolFilter``, ``UnknownToolInFilter``).
        """
        plain = type(predicate) is Restriction
        if not plain and not _is_predicate(predicate):
            raise ToolSpecError(
                f"scope {self.name!r}: restrict() needs a ToolPredicate (label, admits, stamp), "
                f"got {type(predicate).__name__}",
                scope=self.name,
            )
        if validate and isinstance(predicate, Restriction):
            predicate.validate(self.registry, local=[*self._locals, *self._reserved])
        self._restrictions = (*self._restrictions, predicate)
        if not plain:
            stamped = (*self._stamped, predicate)
            # Every installed predicate has a stamp (a child's usual one): one tuple for both.
            same = len(stamped) == len(self._restrictions)
            self._stamped = self._restrictions if same else stamped
            self._plain = False
        self._filter_version += 1
        self.version += 1

    @property
    def call_gate(self) -> ToolGate | None:
        """The permission gate every call through this scope's view passes, if any."""
        return self._call_gate

    def guard(self, gate: ToolGate) -> None:
        """Install ``gate``: every call through this scope's view is checked by it (after the
        arguments, before the handler). One call gate per scope; a second one is refused."""
        if not isinstance(gate, ToolGate):
            raise ToolSpecError(
                f"scope {self.name!r}: guard() needs a ToolGate (async check), "
                f"got {type(gate).__name__}",
                scope=self.name,
            )
        if self._call_gate is not None:
            raise ToolSpecError(f"scope {self.name!r} already has a call gate", scope=self.name)
        self._call_gate = gate
        self.version += 1

    def follow(self, refresh: Callable[[Scope], None]) -> None:
        """Run ``refresh(self)`` at the start of every ``view()``: it may swap a local tool
        whose shape follows state outside the registry (the delegation tools' ``agent`` names
        follow the agent catalog), so the view, and the next model request, carry the new
        shape. It must be cheap and must not call ``view()``."""
        self._follows = (*self._follows, refresh)

    def add_local(self, tool: Tool, *, replace: bool = False) -> None:
        """Add a scope-local tool (origin ``scope``); it may shadow an admitted global tool."""
        check_tool(tool)
        self._claim(tool.name, self._locals, replace=replace, kind="local")
        self._locals[tool.name] = retag(tool, origin="scope", reserved=False)
        self.version += 1

    def remove_local(self, name: str) -> None:
        if self._locals.pop(name, None) is None:
            raise ToolSpecError(
                f"scope {self.name!r} has no local tool named {name!r}", name=name, scope=self.name
            )
        self.version += 1

    def add_reserved(self, tool: Tool, *, replace: bool = False) -> None:
        """Add a reserved tool (``run_code``): always visible here, outside every filter."""
        check_tool(tool)
        self._claim(tool.name, self._reserved, replace=replace, kind="reserved")
        self._reserved[tool.name] = retag(tool, origin="scope", reserved=True)
        self.version += 1

    def remove_reserved(self, name: str) -> None:
        if self._reserved.pop(name, None) is None:
            raise ToolSpecError(
                f"scope {self.name!r} has no reserved tool named {name!r}",
                name=name,
                scope=self.name,
            )
        self.version += 1

    def view(self) -> ToolView:
        """The current resolution, cached by (registry version, scope version, stamps)."""
        for refresh in self._follows:
            refresh(self)
        registry = self.registry
        view = self._view
        # A ``Restriction``'s stamp never moves, so with nothing else installed three versions
        # say whether the view is current: the registry's, the scope's and the requirements'
        # (a backend coming or going re-resolves the view).
        if (
            view is not None
            and self._plain
            and self._view_registry == registry.version
            and self._view_version == self.version
            and self._view_requirements == registry.requirements.version
        ):
            return view
        if not self._plain:
            key: tuple[Hashable, ...] = (
                registry.version,
                self.version,
                registry.requirements.version,
                tuple([predicate.stamp() for predicate in self._stamped]),
                tuple([gate.stamp() for gate in self._gates]),
            )
        else:
            key = (registry.version, self.version, registry.requirements.version)
        previous = self._view
        if previous is not None and previous.key == key:
            return previous
        shares = not self._locals and not self._reserved and not self._gates
        view = self._shared(key) if shares else None
        if view is None:
            view = self._resolve(key, previous)
            if shares:
                self._share(key, view)
        else:
            self._view_filter = self._filter_version
            self._view_own = {}
        self._view = view
        self._view_registry = registry.version
        self._view_version = self.version
        self._view_requirements = registry.requirements.version
        return view

    def _shared_key(self, key: tuple[Hashable, ...]) -> Hashable:
        call_gate = self._call_gate
        return (
            key,
            tuple(map(id, self._restrictions)),
            None if call_gate is None else id(call_gate),
        )

    def _shared(self, key: tuple[Hashable, ...]) -> ToolView | None:
        """The view another scope of this registry resolved at ``key`` through the same
        predicates and call gate, if one did."""
        try:
            entry = self.registry.index(_SHARED, _no_views).get(self._shared_key(key))
        except TypeError:  # a predicate's stamp that cannot be hashed: nothing is shared
            return None
        if entry is None:
            return None
        predicates, call_gate, view = entry
        mine = self._restrictions
        if call_gate is not self._call_gate or len(predicates) != len(mine):
            return None
        if not all(map(is_, predicates, mine)):
            return None
        # The entry's tuple of the same predicates serves for ours (one object less per scope).
        if self._stamped is mine:
            self._stamped = predicates
        self._restrictions = predicates
        return view

    def _share(self, key: tuple[Hashable, ...], view: ToolView) -> None:
        views = self.registry.index(_SHARED, _no_views)
        if len(views) >= _SHARED_MOST:
            views.clear()
        with suppress(TypeError):  # a predicate's stamp that cannot be hashed: not shared
            views[self._shared_key(key)] = (self._restrictions, self._call_gate, view)

    def _claim(self, name: str, own: dict[str, Tool], *, replace: bool, kind: str) -> None:
        other = self._reserved if own is self._locals else self._locals
        if name in other:
            raise ToolSpecError(
                f"scope {self.name!r}: {name!r} is already a "
                f"{'reserved' if kind == 'local' else 'local'} tool here",
                name=name,
                scope=self.name,
            )
        if name in own and not replace:
            raise ToolSpecError(
                f"scope {self.name!r} already has a {kind} tool named {name!r}; "
                "pass replace=True to swap it",
                name=name,
                scope=self.name,
            )

    def _resolve(self, key: tuple[Hashable, ...], previous: ToolView | None) -> ToolView:
        """A fresh view under ``key``: derived from ``previous`` when only the registry or the
        scope's own tools moved (and the registry's log reaches back), resolved otherwise."""
        registry = self.registry
        overlay = self._overlay()
        # Every tool of the scope's own, shut by a gate or not: it shadows the global one.
        own = {**self._locals, **self._reserved}
        before, self._view_own = self._view_own, own
        if (
            previous is not None
            and self._view_filter == self._filter_version
            and cast(tuple[Hashable, ...], previous.key)[2:] == key[2:]
        ):
            changes = registry.changes_since(self._view_registry)
            if changes is not None and len(changes) * _REPLAY_SHARE <= len(previous) + 64:
                touched = {change.name for change in changes}
                touched.update(
                    name
                    for name in before.keys() | own.keys()
                    if before.get(name) is not own.get(name)
                )
                if not touched:
                    return previous.rekeyed(key, gate=self._call_gate)
                return previous.derive(
                    touched,
                    self._resolve_one,
                    key=key,
                    tools=registry.table(),
                    overlay=overlay,
                    gate=self._call_gate,
                )
        self._view_filter = self._filter_version
        return self._rebuild(key, overlay)

    def _overlay(self) -> dict[str, Tool]:
        """The scope's visible own tools: the local tools every gate opens, and the reserved."""
        if self._gates:
            overlay = {name: tool for name, tool in self._locals.items() if self._opened(tool)}
        else:
            overlay = dict(self._locals)
        overlay.update(self._reserved)
        return overlay

    def _admits(self, tool: Tool) -> bool:
        if tool.requires and not self.registry.requirements.admits(tool):
            return False
        return all(p.admits(tool) for p in self._restrictions)

    def _opened(self, tool: Tool) -> bool:
        return all(gate.admits(tool) for gate in self._gates)

    def _resolve_one(self, name: str) -> Tool | None:
        """What ``name`` resolves to in this scope: reserved, then local, then admitted global."""
        tool = self._reserved.get(name)
        if tool is not None:
            return tool
        tool = self._locals.get(name)
        if tool is None:
            tool = self.registry.get(name)
            if tool is None or not self._admits(tool):
                return None
        return tool if self._opened(tool) else None

    def _rebuild(self, key: Hashable, overlay: Mapping[str, Tool]) -> ToolView:
        """The view resolved from scratch, in passes over the registry's sorted arrays."""
        registry = self.registry
        order = registry.sorted_names()
        # One flag per registered name, in name order: the allow-lists intersected by one
        # C-level pass each, the (few) denied, requiring and shadowed names cleared one by one.
        keep: list[bool] | None = None
        denied: set[str] = set()
        others: list[ToolPredicate] = []
        for predicate in self._restrictions:
            if type(predicate) is Restriction:
                denied |= predicate.deny
                allow: AbstractSet[str] | None = predicate.allow
            elif (admitted := getattr(predicate, "admitted_names", None)) is not None:
                # A ``NamedAdmission``, found by its method: ``isinstance`` against a runtime
                # protocol walks the protocol's members on every call.
                allow = admitted(registry)
            else:
                others.append(predicate)
                continue
            if allow is not None:
                flags = map(allow.__contains__, order)
                keep = list(flags) if keep is None else list(map(and_, keep, flags))
        if keep is None:
            keep = [True] * len(order)
        table = registry.table()
        requirements = registry.requirements
        for name in registry.requiring_names():
            if not requirements.admits(table[name]):
                denied.add(name)
        # A scope's own tool shadows the global of its name (or, when a gate shuts it, hides it).
        denied.update(self._locals, self._reserved)
        for name in denied:
            index = bisect_left(order, name)
            if index < len(order) and order[index] == name:
                keep[index] = False
        others.extend(self._gates)
        if others:
            for index in compress(range(len(order)), keep):
                tool = table[order[index]]
                keep[index] = all(p.admits(tool) for p in others)
        names = tuple(compress(order, keep))
        wires = tuple(compress(registry.sorted_wires(), keep))
        if overlay:
            names, wires = _merged(names, wires, overlay)
        return ToolView(
            table,
            names,
            key=key,
            limiter=registry.rate_limits,
            gate=self._call_gate,
            schemas=wires,
            overlay=overlay,
        )

    def __repr__(self) -> str:
        return (
            f"Scope({self.name!r}, restrictions={len(self._restrictions)}, "
            f"locals={sorted(self._locals)!r}, reserved={sorted(self._reserved)!r})"
        )


def _merged(
    names: tuple[str, ...], wires: tuple[JSONDict, ...], extra: Mapping[str, Tool]
) -> tuple[tuple[str, ...], tuple[JSONDict, ...]]:
    """``names`` and their ``wires`` with ``extra``'s tools (names not among ``names``) put in
    name order: one copy of each, whatever the number of extra tools."""
    merged_names: list[str] = []
    merged_wires: list[JSONDict] = []
    start = 0
    for name in sorted(extra):
        index = bisect_left(names, name, start)
        merged_names += names[start:index]
        merged_names.append(name)
        merged_wires += wires[start:index]
        merged_wires.append(wire_schema(extra[name]))
        start = index
    merged_names += names[start:]
    merged_wires += wires[start:]
    return tuple(merged_names), tuple(merged_wires)
