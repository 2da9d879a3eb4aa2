"""``function_tool``: a ``Tool`` from a plain or ``async`` function (imported by the code that
decorates one: loading an extension that builds its ``Tool`` objects itself never needs it)."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, cast, overload

from membrane.errors import ToolSpecError
from membrane.json_types import JSONObject
from membrane.tools.registry import check_tool
from membrane.tools.spec import Tool, ToolContext

if TYPE_CHECKING:  # a function tool's signature is read with ``inspect``, imported for it only
    import inspect

__all__ = ["ToolFunction", "function_tool"]

AsyncFunction = Callable[..., Awaitable[object]]
#: What ``function_tool`` decorates: an ``async def``, or a plain ``def`` (run in a thread).
ToolFunction = Callable[..., object]


@overload
def function_tool(name: ToolFunction, /) -> Tool: ...


@overload
def function_tool(
    name: str | None = None,
    *,
    description: str | None = None,
    schema: JSONObject | None = None,
    mutating: bool = False,
    sequential: bool = False,
) -> Callable[[ToolFunction], Tool]: ...


def function_tool(
    name: str | ToolFunction | None = None,
    *,
    description: str | None = None,
    schema: JSONObject | None = None,
    mutating: bool = False,
    sequential: bool = False,
) -> Tool | Callable[[ToolFunction], Tool]:
    """Decorator: a ``Tool`` (origin ``host``) from a function taking its arguments as keyword
    parameters: an ``async def``, or a plain ``def``, which runs in a worker thread.

    Use it bare (``@function_tool``) or called (``@function_tool("name", mutating=True)``).
    The name defaults to the function's, the description to its docstring, and the schema is
    derived from the parameters' annotations unless given. A parameter named ``context``
    receives the ``ToolContext`` and is not part of the schema. ``sequential=True``: a call of
    it never runs beside another writing call of the same turn (the calls of a turn otherwise
    run concurrently).
    """
    if callable(name):
        return function_tool()(name)
    if name is not None and not isinstance(name, str):
        raise ToolSpecError(
            f"function_tool(name) takes a tool name or decorates an async function, "
            f"got {type(name).__name__}",
            name=str(name),
        )

    def build(function: ToolFunction) -> Tool:
        import inspect

        label = name or str(getattr(function, "__name__", ""))
        if not callable(function):
            raise ToolSpecError(f"tool {label!r}: decorate a function", name=label)
        parameters = inspect.signature(function).parameters
        wants_context = "context" in parameters
        input_schema = schema if schema is not None else _derived_schema(label, parameters)
        is_async = inspect.iscoroutinefunction(function)

        async def handler(arguments: JSONObject, context: ToolContext) -> object:
            values: dict[str, object] = dict(arguments)
            if wants_context:
                values["context"] = context
            if is_async:
                return await cast(AsyncFunction, function)(**values)
            # A plain ``def`` runs in a worker thread, so it never blocks the event loop.
            import anyio.to_thread

            return await anyio.to_thread.run_sync(functools.partial(function, **values))

        text = (inspect.getdoc(function) or "") if description is None else description
        # A host's own tool; an extension's live map retags it ``extension:NAME``.
        tool = Tool(
            label,
            text,
            input_schema,
            handler,
            origin="host",
            mutating=mutating,
            sequential=sequential,
        )
        return check_tool(tool)

    return build


def _derived_schema(label: str, parameters: Mapping[str, inspect.Parameter]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for parameter in parameters.values():
        if parameter.name == "context":
            continue
        if parameter.kind in (
            parameter.VAR_POSITIONAL,
            parameter.VAR_KEYWORD,
            parameter.POSITIONAL_ONLY,
        ):
            raise ToolSpecError(
                f"tool {label!r}: parameter {parameter.name!r} must be passable by keyword",
                name=label,
            )
        annotation = Any if parameter.annotation is parameter.empty else parameter.annotation
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (annotation, default)
    import pydantic  # only a function tool without a schema pays for it

    try:
        derived = pydantic.create_model(f"{label}_arguments", **fields).model_json_schema()
    except (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError, TypeError) as exc:
        raise ToolSpecError(
            f"tool {label!r}: cannot derive a JSON Schema from its parameters ({exc}); "
            "pass schema=...",
            name=label,
        ) from exc
    return _untitled(derived)  # type: ignore[no-any-return]


def _untitled(value: Any) -> Any:
    """Drop pydantic's generated ``title`` keys, which only repeat the names."""
    if isinstance(value, dict):
        return {
            k: _untitled(v) for k, v in value.items() if not (k == "title" and isinstance(v, str))
        }
    if isinstance(value, list):
        return [_untitled(item) for item in value]
    return value
