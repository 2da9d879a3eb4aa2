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

Resolution is incremental. The filtered global layer is kept with the registry version it was
built at; when only the registry moved, the layer is brought forward by replaying the registry's
change log (each changed name is re-admitted or dropped), so one hot registration costs a handful
of predicate calls and a copy, not a re-filter of every tool. A new predicate, or a predicate
whose ``stamp`` moved, rebuilds the layer; set algebra keeps that fast for ``Restriction``.
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_left
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import compress
from operator import and_
from types import MappingProxyType

from membrane.errors import ToolSpecError
from membrane.json_types import JSONDict
from membrane.tools.permissions import ToolGate
from membrane.tools.registry import RegistryChange, ToolRegistry, check_tool, retag, wire_schema
from membrane.tools.restriction import Restriction, ToolPredicate
from membrane.tools.spec import Tool
from membrane.tools.view import ToolView

__all__ = ["Scope"]

#: Replay the change log while it is shorter than this share of the layer; rebuild otherwise.
_REPLAY_SHARE = 4


@dataclass(frozen=True, slots=True)
class _GlobalLayer:
    """Admitted global tools at one registry version, for one predicate configuration.

    ``tools`` and ``names`` are never mutated once built; views share them.
    """

    registry_version: int
    filter_key: tuple[int, tuple[Hashable, ...]]
    tools: Mapping[str, Tool]
    names: tuple[str, ...] | None  # sorted; None when not needed since the last replay
    #: The wire entries of ``names`` in order, taken from the registry's; None after a replay.
    wires: tuple[JSONDict, ...] | None = None


class Scope:
    """One agent's tool composition over a shared ``ToolRegistry``."""

    def __init__(self, registry: ToolRegistry, *, name: str) -> None:
        self.registry = registry
        self.name = name
        #: Bumps on every change to this scope (restriction, local or reserved tool).
        self.version = 0
        self._filter_version = 0
        self._restrictions: tuple[ToolPredicate, ...] = ()
        self._locals: dict[str, Tool] = {}
        self._reserved: dict[str, Tool] = {}
        self._layer: _GlobalLayer | None = None
        self._view: ToolView | None = None
        self._view_version = -1
        self._view_overlay: frozenset[str] = frozenset()
        self._gates: tuple[ToolPredicate, ...] = ()
        self._view_gates: tuple[Hashable, ...] = ()
        self._call_gate: ToolGate | None = None

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
        if not isinstance(predicate, ToolPredicate):
            raise ToolSpecError(
                f"scope {self.name!r}: gate() needs a ToolPredicate (label, admits, stamp), "
                f"got {type(predicate).__name__}",
                scope=self.name,
            )
        self._gates = (*self._gates, predicate)
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
        if not isinstance(predicate, ToolPredicate):
            raise ToolSpecError(
                f"scope {self.name!r}: restrict() needs a ToolPredicate (label, admits, stamp), "
                f"got {type(predicate).__name__}",
                scope=self.name,
            )
        if validate and isinstance(predicate, Restriction):
            predicate.validate(self.registry, local=[*self._locals, *self._reserved])
        self._restrictions = (*self._restrictions, predicate)
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
        # The requirements in force count as one more stamp: a backend coming or going
        # re-resolves the view.
        stamps = (
            *[predicate.stamp() for predicate in self._restrictions],
            self.registry.requirements.version,
        )
        gates = tuple([gate.stamp() for gate in self._gates])
        key = (self.registry.version, self.version, stamps, gates)
        previous = self._view
        if previous is not None and previous.key == key:
            return previous
        layer, moved = self._global_layer(self.registry.version, stamps)
        overlay = frozenset(self._locals) | frozenset(self._reserved)
        if previous is None or moved is None or gates != self._view_gates:
            view = self._compose(layer, key)
        elif not moved and self._view_version == self.version:
            view = previous.rekeyed(key, gate=self._call_gate)
        else:
            touched = moved | overlay | self._view_overlay
            resolve = partial(self._resolve_one, layer)
            view = previous.derive(touched, resolve, key=key, gate=self._call_gate)
        self._view = view
        self._view_version = self.version
        self._view_overlay = overlay
        self._view_gates = gates
        return view

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

    def _global_layer(
        self, registry_version: int, stamps: tuple[Hashable, ...]
    ) -> tuple[_GlobalLayer, frozenset[str] | None]:
        """The admitted global layer now, and the names whose tool moved since the last one
        (``None`` when it was rebuilt rather than brought forward)."""
        filter_key = (self._filter_version, stamps)
        layer = self._layer
        if layer is not None and layer.filter_key == filter_key:
            if layer.registry_version == registry_version:
                return layer, frozenset()
            changes = self.registry.changes_since(layer.registry_version)
            if changes is not None and len(changes) * _REPLAY_SHARE <= len(layer.tools) + 64:
                layer, moved = self._replay(layer, changes, registry_version)
                self._layer = layer
                return layer, moved
        layer = self._rebuild(registry_version, filter_key)
        self._layer = layer
        return layer, None

    def _admits(self, tool: Tool) -> bool:
        if tool.requires and not self.registry.requirements.admits(tool):
            return False
        return all(p.admits(tool) for p in self._restrictions)

    def _rebuild(
        self, registry_version: int, filter_key: tuple[int, tuple[Hashable, ...]]
    ) -> _GlobalLayer:
        registry = self.registry
        order = registry.sorted_names()
        # One flag per registered name, in name order: the allow-lists intersected by one
        # C-level pass each, the (few) denied and requiring names cleared one by one.
        keep: list[bool] | None = None
        denied: set[str] = set()
        others: list[ToolPredicate] = []
        for predicate in self._restrictions:
            if type(predicate) is not Restriction:
                others.append(predicate)
                continue
            denied |= predicate.deny
            allow = predicate.allow
            if allow is not None:
                flags = map(allow.__contains__, order)
                keep = list(flags) if keep is None else list(map(and_, keep, flags))
        if keep is None:
            keep = [True] * len(order)
        everything = registry.tools()
        requirements = registry.requirements
        for name in registry.requiring_names():
            if not requirements.admits(everything[name]):
                denied.add(name)
        for name in denied:
            index = bisect_left(order, name)
            if index < len(order) and order[index] == name:
                keep[index] = False
        if others:
            for index in compress(range(len(order)), keep):
                tool = everything[order[index]]
                keep[index] = all(p.admits(tool) for p in others)
        names = tuple(compress(order, keep))
        tools = dict(zip(names, compress(registry.sorted_tools(), keep), strict=True))
        wires = tuple(compress(registry.sorted_wires(), keep))
        return _GlobalLayer(registry_version, filter_key, tools, names, wires)

    def _replay(
        self, layer: _GlobalLayer, changes: Sequence[RegistryChange], registry_version: int
    ) -> tuple[_GlobalLayer, frozenset[str]]:
        """``layer`` brought forward over ``changes``, and the names whose admitted tool moved."""
        tools: dict[str, Tool] | None = None
        moved: list[str] = []
        for name in dict.fromkeys(change.name for change in changes):
            current = self.registry.get(name)
            held = (tools if tools is not None else layer.tools).get(name)
            admitted = current is not None and self._admits(current)
            if held is current or (held is None and not admitted):
                continue
            if tools is None:
                tools = dict(layer.tools)
            moved.append(name)
            if admitted:
                assert current is not None
                tools[name] = current
            else:
                del tools[name]
        if tools is None:
            return dataclasses.replace(layer, registry_version=registry_version), frozenset()
        # Names are sorted again only if a later rebuild-free compose needs them.
        return _GlobalLayer(registry_version, layer.filter_key, tools, None), frozenset(moved)

    def _resolve_one(self, layer: _GlobalLayer, name: str) -> Tool | None:
        """What ``name`` resolves to in this scope: reserved, then local, then admitted global."""
        if name in self._reserved:
            return self._reserved[name]
        tool = self._locals.get(name) or layer.tools.get(name)
        return tool if tool is None or self._opened(tool) else None

    def _opened(self, tool: Tool) -> bool:
        return all(gate.admits(tool) for gate in self._gates)

    def _compose(self, layer: _GlobalLayer, key: Hashable) -> ToolView:
        names = layer.names if layer.names is not None else tuple(sorted(layer.tools))
        wires = layer.wires if layer.names is not None else None
        limiter = self.registry.rate_limits
        if not self._locals and not self._reserved and not self._gates:
            return ToolView(
                layer.tools,
                names,
                key=key,
                limiter=limiter,
                gate=self._call_gate,
                schemas=wires,
            )
        tools = dict(layer.tools)
        ordered = list(names)
        shown = None if wires is None else list(wires)

        def put(name: str, tool: Tool) -> None:
            index = bisect_left(ordered, name)
            if name not in tools:
                ordered.insert(index, name)
                if shown is not None:
                    shown.insert(index, wire_schema(tool))
            elif shown is not None:
                shown[index] = wire_schema(tool)
            tools[name] = tool

        for name, tool in self._locals.items():
            put(name, tool)
        if self._gates:
            for name in [n for n, t in tools.items() if not self._opened(t)]:
                index = bisect_left(ordered, name)
                del tools[name], ordered[index]
                if shown is not None:
                    del shown[index]
        for name, tool in self._reserved.items():
            put(name, tool)
        return ToolView(
            tools,
            tuple(ordered),
            key=key,
            limiter=limiter,
            gate=self._call_gate,
            schemas=None if shown is None else tuple(shown),
        )

    def __repr__(self) -> str:
        return (
            f"Scope({self.name!r}, restrictions={len(self._restrictions)}, "
            f"locals={sorted(self._locals)!r}, reserved={sorted(self._reserved)!r})"
        )
