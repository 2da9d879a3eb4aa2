"""``ToolView``: the one resolved answer for a scope.

The same view produces the wire schemas, the lookup, the execution path and the Code Mode SDK,
so what a model is shown and what it can run are the same set. Nothing executes a tool except
``ToolView.call``; a name outside the view fails with ``tool-not-visible`` whatever is sent.

A view is immutable. Everything derived from it (sorted schemas, the SDK) is computed on first
use, and everything derived from one tool (its wire schema, its compiled validator) is memoised
on that tool object, so views that share tools share that work.

A view holds its names twice: ``names``, sorted, for everything shown in order, and
``visible``, a plain built-in ``frozenset``, for the per-call visibility check: ``call`` checks
``name in self.visible`` before anything else, one C-level set lookup, as cheap as a dict's (a
``frozenset`` subclass would not be: CPython reaches the lookup of a subclass defined in Python
through a method call). ``name in view`` asks the same set. A view compares and hashes by
identity and iterates its names in sorted order.

A view holds no name-to-tool map of its own: it looks a visible name up in its ``overlay`` (the
scope's local and reserved tools) and then in a shared table of global tools (the registry's
table at that version), which may hold names the view does not show. So a scope's view over
10,000 global tools costs its names, its set and its wire entries, not another 10,000-entry map.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Awaitable, Callable, Hashable, Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Any, Final, Protocol, cast

import anyio
from jsonschema.exceptions import best_match
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

from membrane.errors import (
    MembraneError,
    ToolArgumentsInvalid,
    ToolFailed,
    ToolNotVisible,
    ToolSpecError,
)
from membrane.json_types import JSONDict, JSONObject
from membrane.tools.codemode import render_sdk
from membrane.tools.permissions import ToolGate, ToolObserver
from membrane.tools.registry import check_tool, json_schema, retag, wire_schema, wires_of
from membrane.tools.spec import Tool, ToolContext

__all__ = ["ToolView", "anthropic_schema", "openai_schema", "openai_tool", "wire_schema"]

_SHOWN = 200
_NO_TOOLS: Final[Mapping[str, Tool]] = MappingProxyType({})


class _Limiter(Protocol):
    """What a view needs of the deployment's ``RateLimiter``."""

    def __bool__(self) -> bool: ...

    def acquire(self, session: str, tool: str, *, shared: str | None = None) -> None: ...


#: Gate classes already asked whether they are a ``ToolObserver``: a runtime-checkable
#: protocol's ``isinstance`` looks up its members every time, and a view is built per child.
_OBSERVERS: dict[type, bool] = {}


def _after_of(
    gate: ToolGate | None,
) -> Callable[[Tool, JSONObject, ToolContext, object], Awaitable[object]] | None:
    """The gate's ``after`` when it is a ``ToolObserver``, else ``None``."""
    if gate is None:
        return None
    kind = type(gate)
    observes = _OBSERVERS.get(kind)
    if observes is None:
        observes = _OBSERVERS[kind] = isinstance(gate, ToolObserver)
    return cast(ToolObserver, gate).after if observes else None


class ToolView:
    """Visible tools of one scope at one resolution, keyed by exact name.

    ``names`` is sorted and ``visible`` is the same names as a built-in ``frozenset``. ``key``
    identifies the resolution (registry version, scope version, predicate stamps); two views
    with equal keys from one scope are the same object. ``gate`` checks every call's arguments
    (the scope's permission rules) before its handler runs.
    """

    __slots__ = (
        "_after",
        "_gate",
        "_limiter",
        "_overlay",
        "_schemas",
        "_sdk",
        "_tools",
        "key",
        "names",
        "visible",
    )

    #: Holds the tool of every visible name not in ``_overlay``; may hold other names too.
    _tools: Mapping[str, Tool]
    #: Visible tools that win over ``_tools`` (a scope's local and reserved tools).
    _overlay: Mapping[str, Tool]
    _limiter: _Limiter | None
    _gate: ToolGate | None
    #: The gate's ``after`` when it is a ``ToolObserver`` (asked once, not on every call).
    _after: Callable[[Tool, JSONObject, ToolContext, object], Awaitable[object]] | None
    names: tuple[str, ...]
    visible: frozenset[str]
    key: Hashable
    _schemas: tuple[JSONDict, ...] | None
    _sdk: str | None

    def __init__(
        self,
        tools: Mapping[str, Tool],
        names: tuple[str, ...] | None = None,
        *,
        key: Hashable = None,
        limiter: _Limiter | None = None,
        gate: ToolGate | None = None,
        schemas: tuple[JSONDict, ...] | None = None,
        overlay: Mapping[str, Tool] | None = None,
        visible: frozenset[str] | None = None,
    ) -> None:
        """Without ``names`` the view shows exactly ``tools``. With them it shows ``names``
        (sorted): each is found in ``overlay`` first, then in ``tools``, which may hold more.
        ``schemas``, when given, are the wire entries of ``names`` in order (the scope took
        them from the registry's); otherwise they are computed on first use. ``visible``, when
        given, is ``frozenset(names)`` already built (views of one resolution share it)."""
        if names is None:
            names = tuple(sorted(tools))
            visible = frozenset(tools)
        self._tools = tools
        self._overlay = _NO_TOOLS if overlay is None else overlay
        self._limiter = limiter
        self._gate = gate
        self._after = _after_of(gate)
        self.names = names
        self.visible = frozenset(names) if visible is None else visible
        self.key = key
        self._schemas = schemas
        self._sdk = None

    @classmethod
    def of(cls, tools: Iterable[Tool]) -> ToolView:
        """A view over exactly ``tools`` (names must be distinct), outside any scope."""
        by_name: dict[str, Tool] = {}
        for tool in tools:
            if check_tool(tool).name in by_name:
                raise ToolSpecError(
                    f"two tools are named {tool.name!r}; a view needs distinct names",
                    name=tool.name,
                )
            by_name[tool.name] = tool
        return cls(MappingProxyType(by_name))

    def rekeyed(self, key: Hashable, *, gate: ToolGate | None = None) -> ToolView:
        """The same resolution under a new key (and ``gate``), sharing everything derived."""
        view = ToolView(
            self._tools,
            self.names,
            key=key,
            limiter=self._limiter,
            gate=gate,
            schemas=self._schemas,
            overlay=self._overlay,
            visible=self.visible,
        )
        view._sdk = self._sdk
        return view

    def derive(
        self,
        touched: Iterable[str],
        resolve: Callable[[str], Tool | None],
        *,
        key: Hashable,
        tools: Mapping[str, Tool],
        overlay: Mapping[str, Tool],
        gate: ToolGate | None = None,
    ) -> ToolView:
        """A new view equal to this one except at ``touched`` names, which ``resolve`` answers.

        ``tools`` and ``overlay`` are where the new view looks its names up (see ``__new__``);
        they must agree with ``resolve`` on every name the new view shows. Costs one copy of
        the names and of the set plus work per touched name; schemas already rendered for this
        view are carried over, not rendered again.
        """
        names = list(self.names)
        members = set(self.visible)
        schemas = None if self._schemas is None else list(self._schemas)
        for name in sorted(touched):
            new, old = resolve(name), self.find(name)
            if new is old:
                continue
            index = bisect_left(names, name)
            if new is None:
                del names[index]
                members.discard(name)
                if schemas is not None:
                    del schemas[index]
                continue
            if old is None:
                names.insert(index, name)
                members.add(name)
                if schemas is not None:
                    schemas.insert(index, wire_schema(new))
            elif schemas is not None:
                schemas[index] = wire_schema(new)
        return ToolView(
            tools,
            tuple(names),
            key=key,
            limiter=self._limiter,
            gate=gate,
            schemas=None if schemas is None else tuple(schemas),
            overlay=overlay,
            visible=frozenset(members),
        )

    def __contains__(self, name: object) -> bool:
        return name in self.visible

    def __len__(self) -> int:
        return len(self.names)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def get(self, name: str) -> Tool:
        """The visible tool ``name``; ``ToolNotVisible`` otherwise."""
        tool = self.find(name)
        if tool is None:
            raise _not_visible(name)
        return tool

    def find(self, name: str) -> Tool | None:
        """The visible tool ``name`` or ``None``."""
        if name not in self.visible:
            return None
        return self._overlay.get(name) or self._tools[name]

    def tools(self) -> tuple[Tool, ...]:
        """Visible tools in name order."""
        names = self.names
        found = list(map(self._tools.get, names))
        for name, tool in self._overlay.items():
            found[bisect_left(names, name)] = tool
        return tuple(found)  # type: ignore[arg-type]  # every visible name has its tool

    def schemas(self) -> list[JSONDict]:
        """``[{"name", "description", "input_schema"}]`` sorted by name.

        Entries are shared between views and calls: treat them as read-only.
        """
        if self._schemas is None:
            self._schemas = tuple(wires_of(self.tools()))
        return list(self._schemas)

    def wire_schemas(self) -> tuple[JSONDict, ...]:
        """``schemas()`` as the view's own tuple, shared by everyone who asks (a model request
        per turn of every child holding the view), not a copy per call. Read-only."""
        if self._schemas is None:
            self._schemas = tuple(wires_of(self.tools()))
        return self._schemas

    def anthropic_tools(self) -> list[JSONDict]:
        """The Anthropic Messages API ``tools`` list (same shape as ``schemas()``)."""
        return self.schemas()

    def openai_tools(self) -> list[JSONDict]:
        """The OpenAI ``tools`` list: ``{"type": "function", "function": {...}}`` per tool."""
        return [openai_schema(tool) for tool in self.tools()]

    def code_sdk(self) -> str:
        """Source of a Python module with one typed async function per visible tool."""
        if self._sdk is None:
            self._sdk = render_sdk(self.tools())
        return self._sdk

    async def call(self, name: str, arguments: JSONObject, context: ToolContext) -> object:
        """Run the visible tool ``name`` with ``arguments`` validated against its schema, and
        return what its handler returns (any value; the caller renders it for the model).

        Raises ``ToolNotVisible`` (naming only ``name``), ``ToolArgumentsInvalid`` (with the JSON
        path of the first problem), ``ToolSpecError`` when the tool's own schema cannot be
        applied, ``ToolCallDenied``/``ApprovalUnavailable`` when the scope's permission rules
        refuse the call, ``RateLimited`` when the call exceeds the tool's window for the
        context's session (both checked after the arguments, before the handler), or
        ``ToolFailed`` wrapping a handler's non-Membrane error.
        """
        # A name that is not a string (a model's malformed call) names no tool; the check of
        # a string is one lookup in the built-in set of visible names.
        if not isinstance(name, str) or name not in self.visible:
            raise _not_visible(name)
        tool = self._overlay.get(name) or self._tools[name]
        if tool.deferred and tool.loader is not None:
            tool = await _loaded(tool)
        if type(arguments) is dict:
            values = arguments
        elif isinstance(arguments, Mapping):
            values = dict(arguments)
        else:
            raise ToolArgumentsInvalid(
                f"arguments for tool {name!r} must be a JSON object, "
                f"got {type(arguments).__name__}",
                tool=name,
                path="$",
                reason="not an object",
            )
        validator = tool.memo.get("validator", _UNSET)
        if validator is _UNSET:
            validator = _validator(tool)
        try:
            error = None if validator is None else best_match(validator.iter_errors(values))
        except Exception as exc:
            # The schema passed registration but the validator still failed on it (a
            # reference or keyword it could not follow): the tool's spec is at fault.
            raise ToolSpecError(
                f"tool {name!r}: its input_schema could not be applied to these arguments "
                f"({type(exc).__name__}: {_clip(str(exc))}); fix the tool's schema",
                name=name,
            ) from exc
        if error is not None:
            reason = _clip(error.message)
            raise ToolArgumentsInvalid(
                f"arguments for tool {name!r} are invalid at {error.json_path}: {reason}",
                tool=name,
                path=error.json_path,
                reason=reason,
            )
        if self._gate is not None:
            await self._gate.check(tool, values, context)
        limiter = self._limiter
        if limiter:
            limiter.acquire(
                context.session or context.run_id or context.agent,
                name,
                shared=context.rate_shared,
            )
        try:
            result = await tool.handler(values, context)
        except MembraneError:
            raise
        except Exception as exc:
            raise ToolFailed(
                f"tool {name!r} failed: {type(exc).__name__}: {_clip(str(exc))}", tool=name
            ) from exc
        if self._after is not None:
            result = await self._after(tool, values, context, result)
        return result

    def __repr__(self) -> str:
        shown = ", ".join(self.names[:8]) + (", ..." if len(self.names) > 8 else "")
        return f"ToolView({len(self.names)} tools: {shown})"


def anthropic_schema(tool: Tool) -> JSONDict:
    """The Anthropic tool format: ``{"name", "description", "input_schema"}``."""
    return wire_schema(tool)


def openai_schema(tool: Tool) -> JSONDict:
    """The OpenAI tool format (memoised on the tool)."""
    entry = tool.memo.get("openai")
    if entry is None:
        entry = tool.memo["openai"] = openai_tool(wire_schema(tool))
    return entry


def openai_tool(wire: Mapping[str, Any]) -> JSONDict:
    """A tool in the Anthropic (and ``ToolView.schemas()``) shape, ``{"name", "description",
    "input_schema"}``, in OpenAI's: ``{"type": "function", "function": {"name", "description",
    "parameters"}}``. The one place that format is written (the ``openai`` adapter sends it)."""
    return {
        "type": "function",
        "function": {
            "name": wire["name"],
            "description": wire.get("description", ""),
            "parameters": dict(wire["input_schema"]),
        },
    }


#: ``Tool.memo`` holds no validator yet (``None`` there means the schema admits any object).
_UNSET: Final = object()

#: Schema keys that constrain nothing (annotations), beside ``type`` and an empty ``properties``.
_ANNOTATIONS: Final = frozenset({"$schema", "$id", "$comment", "title", "description"})


def _validator(tool: Tool) -> Validator | None:
    """The tool's schema validator; ``None`` when the schema admits every JSON object
    (``{"type": "object"}``, with at most annotations and an empty ``properties``), so that the
    object check before it is the whole validation."""
    memo = tool.memo
    if "validator" not in memo:
        schema = json_schema(tool)
        rest = set(schema) - _ANNOTATIONS - {"type", "properties"}
        admits_any = (
            not rest and schema.get("type") == "object" and schema.get("properties", {}) == {}
        )
        memo["validator"] = None if admits_any else validator_for(schema)(schema)
    validator: Validator | None = memo["validator"]
    return validator


async def _loaded(tool: Tool) -> Tool:
    """The full tool behind a deferred entry, loaded once per entry object."""
    loaded: Tool | None = tool.memo.get("loaded")
    if loaded is not None:
        return loaded
    lock: anyio.Lock = tool.memo.setdefault("load-lock", anyio.Lock())
    async with lock:
        loaded = tool.memo.get("loaded")
        if loaded is None:
            assert tool.loader is not None
            try:
                result = check_tool(await tool.loader())
            except Exception as exc:
                raise ToolFailed(
                    f"deferred tool {tool.name!r} could not be loaded: {type(exc).__name__}: "
                    f"{_clip(str(exc))}",
                    tool=tool.name,
                ) from exc
            if result.name != tool.name:
                raise ToolFailed(
                    f"deferred tool {tool.name!r} loaded a tool named {result.name!r}",
                    tool=tool.name,
                )
            loaded = tool.memo["loaded"] = retag(
                result, origin=tool.origin, reserved=tool.reserved, deferred=False, loader=None
            )
    return loaded


def _not_visible(name: object) -> ToolNotVisible:
    shown = _clip(str(name))
    return ToolNotVisible(f"no tool named {shown!r} is visible to this agent", name=shown)


def _clip(text: str) -> str:
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."
