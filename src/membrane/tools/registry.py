"""The live, deployment-global tool registry.

Every change (register, replace, remove) bumps ``version`` by exactly one and is appended to a
bounded change log, so a scope that resolved its view at version ``v`` can bring that view up to
date by replaying only ``changes_since(v)`` instead of re-filtering every tool. Listeners hear
about each change after it is applied.

Extensions own live tool maps inside the registry (``registry.extension(NAME)``): the map is
the set of global tools whose origin is ``extension:NAME``, so a tool an extension registers
after setup, or removes later, is seen by every view at its next resolution.
"""

from __future__ import annotations

import re
from bisect import bisect_left, insort
from collections import deque
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import fields as declared_fields
from itertools import repeat
from operator import attrgetter, is_
from types import MappingProxyType
from typing import Any, Literal, TypeVar

from membrane.errors import ToolSpecError
from membrane.tools.portable import portable_schema
from membrane.tools.ratelimit import RateLimiter
from membrane.tools.requirements import Requirements
from membrane.tools.schemas import schema_problem
from membrane.tools.spec import Tool

__all__ = [
    "ExtensionTools",
    "RegistryChange",
    "ToolRegistry",
    "check_tool",
    "json_schema",
    "plain_json",
    "retag",
]

#: 1-128 letters, digits, ``_``, ``-`` or ``.``: no spaces or separators a wire format would reject.
TOOL_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
#: How many changes the log keeps; a view older than that is rebuilt from scratch.
CHANGE_LOG_SIZE = 4096

ChangeKind = Literal["registered", "replaced", "removed"]
_Index = TypeVar("_Index")


@dataclass(frozen=True, slots=True)
class RegistryChange:
    """One change to the registry. ``tool`` is the new tool (``None`` after a removal)."""

    version: int
    kind: ChangeKind
    name: str
    tool: Tool | None
    previous: Tool | None


@dataclass(frozen=True, slots=True)
class _Checked:
    """What ``check_tool`` proved about one tool, kept in its ``memo``. Only ``check_tool``
    makes one, and it holds the very objects it checked, so a ``memo`` filled by hand (or a
    field changed afterwards) is never taken for a check: the tool is checked again."""

    fields: tuple[object, ...]
    schema: dict[str, Any]

    def covers(self, tool: Tool) -> bool:
        return all(map(is_, self.fields, _fields(tool)))


#: The fields a check proves something about, read in one C-level call.
_CHECKED_FIELDS = attrgetter("name", "description", "handler", "origin", "input_schema", "requires")
#: The fields ``Tool(...)`` takes, for ``retag``.
_INIT_FIELDS = tuple(field.name for field in declared_fields(Tool) if field.init)
_INIT_VALUES = attrgetter(*_INIT_FIELDS)


def _fields(tool: Tool) -> tuple[object, ...]:
    fields: tuple[object, ...] = _CHECKED_FIELDS(tool)
    return fields


def check_tool(tool: object) -> Tool:
    """Return ``tool`` when it is a well-formed ``Tool``; raise ``ToolSpecError`` saying why not.

    The input schema is checked against its JSON Schema meta-schema, and every ``$ref`` in it
    is resolved, here (memoised on the tool object, and cached per distinct schema text), so
    that a bad schema fails at registration and never at a model's call. The JSON-shaped copy
    of the schema made for the check is kept for the wire. Only a proof this function left in
    the tool's ``memo`` skips the checks: pre-filling ``memo`` skips nothing.
    """
    if isinstance(tool, Tool):
        mark = tool.memo.get("checked")
        if type(mark) is _Checked and mark.covers(tool):
            return tool
    if not isinstance(tool, Tool):
        raise ToolSpecError(
            f"expected a Tool, got {type(tool).__name__}; build one with membrane.Tool(...)",
            name=None,
        )
    _check_fields(tool)
    name, schema = tool.name, tool.input_schema
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        raise ToolSpecError(
            f'tool {name!r}: input_schema must be a JSON Schema object with "type": "object"',
            name=name,
        )
    plain = plain_json(schema)
    problem = schema_problem(plain)
    if problem is not None:
        raise ToolSpecError(
            f"tool {name!r}: input_schema is not valid JSON Schema at {problem.where}: "
            f"{problem.what}",
            name=name,
            path=problem.where,
        )
    tool.memo["checked"] = _Checked(_fields(tool), plain)
    return tool


def _check_fields(tool: Tool) -> None:
    name = tool.name
    if not isinstance(name, str) or TOOL_NAME.fullmatch(name) is None:
        raise ToolSpecError(
            f"tool name {name!r} is invalid: use 1-128 letters, digits, '_', '-' or '.'",
            name=str(name),
        )
    if not isinstance(tool.description, str):
        raise ToolSpecError(f"tool {name!r}: description must be a string", name=name)
    if not callable(tool.handler):
        raise ToolSpecError(f"tool {name!r}: handler must be an async callable", name=name)
    if not isinstance(tool.origin, str) or not tool.origin:
        raise ToolSpecError(f"tool {name!r}: origin must be a non-empty string", name=name)
    requires = tool.requires
    if not isinstance(requires, frozenset) or not all(
        isinstance(item, str) and item for item in requires
    ):
        raise ToolSpecError(
            f"tool {name!r}: requires must be a frozenset of non-empty names", name=name
        )


def retag(tool: Tool, **changes: Any) -> Tool:
    """``replace(tool, **changes)``, keeping the checked schema if it is unchanged."""
    mark = check_tool(tool).memo["checked"]
    fields = dict(zip(_INIT_FIELDS, _INIT_VALUES(tool), strict=True))
    fields.update(changes)
    changed = Tool(**fields)
    if changed.input_schema is tool.input_schema:
        _check_fields(changed)
        changed.memo["checked"] = _Checked(_fields(changed), mark.schema)
        return changed
    return check_tool(changed)


def json_schema(tool: Tool) -> dict[str, Any]:
    """The tool's input schema as plain JSON data (checked and memoised on the tool)."""
    mark: _Checked = check_tool(tool).memo["checked"]
    return mark.schema


def wire_schema(tool: Tool) -> dict[str, Any]:
    """``{"name", "description", "input_schema"}`` for ``tool`` (memoised on the tool): the
    form a model is offered, its schema made portable (``membrane.tools.portable``: keywords
    that OpenAI's strict mode or llama.cpp's grammar conversion cannot use are said in the
    descriptions instead). Calls are validated against the tool's whole schema."""
    entry: dict[str, Any] | None = tool.memo.get("wire")
    if entry is None:
        entry = tool.memo["wire"] = {
            "name": tool.name,
            "description": tool.description,
            "input_schema": portable_schema(json_schema(tool)),
        }
    return entry


_MEMO = attrgetter("memo")


def wires_of(tools: Sequence[Tool]) -> list[dict[str, Any]]:
    """``wire_schema`` of each of ``tools``, in order: the memoised entries in C-level passes,
    and only the tools that have none yet (found by C-level searches) rendered in Python."""
    wires: list[dict[str, Any] | None] = list(map(dict.get, map(_MEMO, tools), repeat("wire")))
    index = -1
    while True:
        try:
            index = wires.index(None, index + 1)
        except ValueError:
            break
        wires[index] = wire_schema(tools[index])
    return wires  # type: ignore[return-value]  # no None is left


def plain_json(value: Any) -> Any:
    """A JSON-shaped copy: mappings become dicts, tuples and lists become lists."""
    if isinstance(value, Mapping):
        return {str(key): plain_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain_json(item) for item in value]
    return value


class ToolRegistry:
    """The live set of deployment-global tools, keyed by exact (case-sensitive) name.

    Not thread-safe: it belongs to one event loop, like the scopes that read it.

    ``rate_limits`` is the deployment's one limiter: every view over this registry asks it
    before a handler runs (``RateLimiter.configure`` sets the windows from the settings).
    ``requirements`` says which of the things tools may require (``Tool.requires``) are
    present; every scope leaves out the tools that need something absent.
    """

    def __init__(self) -> None:
        self.version = 0
        self.rate_limits = RateLimiter()
        self.requirements = Requirements()
        self._tools: dict[str, Tool] = {}
        self._by_origin: dict[str, set[str]] = {}
        self._log: deque[RegistryChange] = deque(maxlen=CHANGE_LOG_SIZE)
        self._listeners: list[Callable[[RegistryChange], None]] = []
        self._extensions: dict[str, ExtensionTools] = {}
        self._snapshot: Mapping[str, Tool] | None = None
        self._table: dict[str, Tool] | None = None
        self._indexes: dict[Hashable, object] = {}
        self._restrictable: frozenset[str] | None = None
        #: Every name in sorted order, kept up to date name by name; ``_ordered`` is the
        #: tuple handed out, rebuilt (one C-level copy) after the names changed.
        self._order: list[str] = []
        self._ordered: tuple[str, ...] | None = None
        self._ordered_tools: tuple[Tool, ...] | None = None
        self._ordered_wires: tuple[dict[str, Any], ...] | None = None
        #: Names whose tool has ``requires``.
        self._requiring: set[str] = set()

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def register(self, tool: Tool, *, replace: bool = False) -> None:
        """Add ``tool``; with ``replace``, a tool of the same name is swapped out.

        A ``reserved`` tool is refused: reserved tools sit outside every filter, so one in the
        registry would reach every scope past its restrictions. Only ``Scope.add_reserved``
        makes them, for one scope.
        """
        check_tool(tool)
        if tool.reserved:
            raise _reserved_error(tool.name)
        previous = self._tools.get(tool.name)
        if previous is not None and not replace:
            raise ToolSpecError(
                f"a tool named {tool.name!r} is already registered (origin {previous.origin}); "
                "pass replace=True to swap it",
                name=tool.name,
            )
        if previous is not None:
            self._by_origin[previous.origin].discard(tool.name)
        else:
            insort(self._order, tool.name)
        self._tools[tool.name] = tool
        self._by_origin.setdefault(tool.origin, set()).add(tool.name)
        if tool.requires:
            self._requiring.add(tool.name)
        else:
            self._requiring.discard(tool.name)
        self._commit("registered" if previous is None else "replaced", tool.name, tool, previous)

    def remove(self, name: str) -> None:
        """Remove the tool ``name`` from the registry and so from every view."""
        previous = self._tools.pop(name, None)
        if previous is None:
            raise ToolSpecError(f"no global tool named {name!r} to remove", name=name)
        self._by_origin[previous.origin].discard(name)
        del self._order[bisect_left(self._order, name)]
        self._requiring.discard(name)
        self._commit("removed", name, None, previous)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def tools(self) -> Mapping[str, Tool]:
        """A read-only snapshot of the global tools (built once per version)."""
        if self._snapshot is None:
            self._snapshot = MappingProxyType(self.table())
        return self._snapshot

    def table(self) -> Mapping[str, Tool]:
        """The global tools at this version: a plain dict, built once per version and never
        changed afterwards, so views share it and look names up in it at C speed. Read it;
        never change it."""
        if self._table is None:
            self._table = dict(self._tools)
        return self._table

    def index(self, key: Hashable, build: Callable[[Mapping[str, Tool]], _Index]) -> _Index:
        """``build(self.table())``, computed once per registry version for ``key``: an index a
        higher layer keeps over the global tools (the resolver's names by extension), shared
        by every scope that resolves at this version. ``build`` must not change the table."""
        if key not in self._indexes:
            self._indexes[key] = build(self.table())
        index: _Index = self._indexes[key]  # type: ignore[assignment]  # built by ``build``
        return index

    def restrictable_names(self) -> frozenset[str]:
        """Names a filter may mention: every global tool (none is reserved)."""
        if self._restrictable is None:
            self._restrictable = frozenset(self._tools)
        return self._restrictable

    def sorted_names(self) -> tuple[str, ...]:
        """Every global tool name, sorted."""
        if self._ordered is None:
            self._ordered = tuple(self._order)
        return self._ordered

    def sorted_tools(self) -> tuple[Tool, ...]:
        """Every global tool, in the order of ``sorted_names()``."""
        if self._ordered_tools is None:
            self._ordered_tools = tuple(map(self._tools.__getitem__, self._order))
        return self._ordered_tools

    def sorted_wires(self) -> tuple[dict[str, Any], ...]:
        """``wire_schema`` of every global tool, in the order of ``sorted_names()`` (built
        once per version; scopes take their share of it instead of each looking up every
        tool's entry)."""
        if self._ordered_wires is None:
            self._ordered_wires = tuple(wires_of(self.sorted_tools()))
        return self._ordered_wires

    def requiring_names(self) -> frozenset[str]:
        """Names of the global tools that require something (``Tool.requires``)."""
        return frozenset(self._requiring)

    def names_of_origin(self, origin: str) -> frozenset[str]:
        """Global tool names whose origin is exactly ``origin`` (e.g. ``extension:alpha``)."""
        return frozenset(self._by_origin.get(origin, ()))

    def changes_since(self, version: int) -> tuple[RegistryChange, ...] | None:
        """Changes after ``version``, oldest first; ``None`` when the log no longer reaches back."""
        if version == self.version:
            return ()
        if version > self.version or not self._log or self._log[0].version > version + 1:
            return None
        skip = version + 1 - self._log[0].version
        return tuple(self._log)[skip:]

    def subscribe(self, listener: Callable[[RegistryChange], None]) -> Callable[[], None]:
        """Call ``listener`` after every change; returns the function that unsubscribes it.

        Every listener hears every change; if some raise, the first error is re-raised after all
        were called (the change itself stays applied).
        """
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def extension(self, name: str) -> ExtensionTools:
        """The live tool map of extension ``name`` (created on first use)."""
        tools = self._extensions.get(name)
        if tools is None:
            if not name or not isinstance(name, str):
                raise ToolSpecError(f"extension name {name!r} is invalid", name=str(name))
            tools = self._extensions[name] = ExtensionTools(name, self)
        return tools

    def _commit(
        self, kind: ChangeKind, name: str, tool: Tool | None, previous: Tool | None
    ) -> None:
        self.version += 1
        self._snapshot = None
        self._table = None
        self._indexes = {}
        self._ordered_tools = None
        self._ordered_wires = None
        if tool is None or previous is None:
            self._restrictable = None
            self._ordered = None
        change = RegistryChange(self.version, kind, name, tool, previous)
        self._log.append(change)
        errors: list[BaseException] = []
        for listener in list(self._listeners):
            try:
                listener(change)
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise errors[0]


class ExtensionTools:
    """The live tool map owned by one extension; every tool in it has origin ``extension:NAME``.

    Names are exact and case-sensitive. A name held by another origin cannot be taken over.
    """

    __slots__ = ("_registry", "name", "origin")

    def __init__(self, name: str, registry: ToolRegistry) -> None:
        self.name = name
        self.origin = f"extension:{name}"
        self._registry = registry

    def register_tool(self, tool: Tool) -> None:
        """Add or replace ``tool`` in this extension's map (its origin is set to this extension).

        A ``reserved`` tool is refused, as by ``ToolRegistry.register``.
        """
        if check_tool(tool).reserved:
            raise _reserved_error(tool.name, extension=self.name)
        owned = retag(tool, origin=self.origin)
        existing = self._registry.get(owned.name)
        if existing is not None and existing.origin != self.origin:
            raise ToolSpecError(
                f"extension {self.name!r} cannot register {owned.name!r}: that name belongs to "
                f"{existing.origin}; choose another name",
                name=owned.name,
                extension=self.name,
            )
        self._registry.register(owned, replace=existing is not None)

    def remove_tool(self, name: str) -> None:
        """Remove ``name`` from this extension's map (and so from every view)."""
        if name not in self.names():
            raise ToolSpecError(
                f"extension {self.name!r} has no tool named {name!r} to remove",
                name=name,
                extension=self.name,
            )
        self._registry.remove(name)

    def names(self) -> frozenset[str]:
        return self._registry.names_of_origin(self.origin)

    def __repr__(self) -> str:
        return f"ExtensionTools({self.name!r}, {sorted(self.names())!r})"


def _reserved_error(name: str, **data: str) -> ToolSpecError:
    by = f"extension {data['extension']!r} cannot register" if data else "cannot register"
    return ToolSpecError(
        f"{by} {name!r} as a reserved tool: reserved tools are scope-local and sit outside "
        "every filter; use Scope.add_reserved on the scope that should see it, or register "
        "it with reserved=False",
        name=name,
        **data,
    )
