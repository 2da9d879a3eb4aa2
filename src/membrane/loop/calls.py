"""One tool call through a scope's live view: veto, ``before_tool_call`` hooks, execution.

This is the only way the agent loop and the mention clone run a tool. The view is resolved
when the call is checked and again right before the handler runs, because an extension's hook
may change the registry in between; a name outside the view at either moment is vetoed. The
result is always a ``tool`` message: failures become error results whose content is
``{"error": {"code", "message"[, "path"]}}``, so the model reads the code and nothing about
tools it cannot see.

Codes in error results: ``tool-not-visible`` (vetoed), ``tool-call-denied`` and
``approval-unavailable`` (vetoed by a permission rule), ``tool-blocked`` (a hook blocked it),
``tool-arguments-invalid`` (with ``path``), ``tool-failed``, any other ``MembraneError`` code a
handler raised (``path-outside-checkout``, ``depth-limit-exceeded`` ...), and ``tool-skipped``
for a call the loop answered without running it (a steer arrived, the turn limit or a stop).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from membrane.errors import (
    MembraneError,
    PermissionRefused,
    ToolBlocked,
    ToolFailed,
    ToolNotVisible,
)
from membrane.extensions.hooks import BeforeToolCall, ExtensionHooks
from membrane.models.base import Message, ToolCall
from membrane.tools.scope import Scope
from membrane.tools.spec import ToolContext, ToolOutput

__all__ = ["SKIPPED", "Emit", "error_code", "error_result", "result_event", "run_tool_call"]

Emit = Callable[[str, Mapping[str, Any]], None]
#: The code of a call answered without being run.
SKIPPED = "tool-skipped"


def _ignore(kind: str, data: Mapping[str, Any]) -> None:
    return None


async def run_tool_call(
    scope: Scope,
    call: ToolCall,
    context: ToolContext,
    *,
    hooks: ExtensionHooks | None = None,
    agent: str = "main",
    run_id: str = "",
    turn: int = 0,
    emit: Emit = _ignore,
) -> Message:
    """Run one call through the scope's live view and answer it with a ``tool`` message.

    The view is resolved when the call is checked and again right before the handler runs (a
    ``before_tool_call`` hook may have changed the registry meanwhile). A vetoed call emits
    ``vetoed_call``; its result names only the requested tool, never what exists. Never raises
    for the call's own failures: they become error results carrying their code.
    """
    if call.name not in scope.view():
        return _vetoed(call, emit, scope)
    if hooks is not None:
        block = await hooks.before_tool_call(BeforeToolCall(agent, run_id, turn, call))
        if block is not None:
            blocked = ToolBlocked(
                f"the call to {call.name!r} was blocked by extension {block.extension!r}: "
                f"{block.reason}",
                tool=call.name,
                extension=block.extension,
                reason=block.reason,
            )
            return error_result(call, blocked.code, blocked.message)
    view = scope.view()
    if call.name not in view:
        return _vetoed(call, emit, scope)
    try:
        value = await view.call(call.name, call.arguments, replace(context, call_id=call.id))
    except PermissionRefused as exc:
        # A permission rule refused it: a vetoed call, with the rule the model can act on.
        data = {"name": call.name, "id": call.id, "code": exc.code}
        emit("vetoed_call", {**data, "rule": exc.data.get("rule")})
        return error_result(call, exc.code, exc.message)
    except MembraneError as exc:
        return error_result(call, exc.code, exc.message, path=exc.data.get("path"))
    except Exception as exc:
        failed = ToolFailed(f"tool {call.name!r} failed: {type(exc).__name__}", tool=call.name)
        return error_result(call, failed.code, failed.message)
    if isinstance(value, ToolOutput):
        return Message(
            role="tool",
            content=_render(value.text if value.text else value.structured),
            tool_call_id=call.id,
            name=call.name,
            attachments=value.attachments,
        )
    return Message(role="tool", content=_render(value), tool_call_id=call.id, name=call.name)


def _vetoed(call: ToolCall, emit: Emit, scope: Scope) -> Message:
    error = ToolNotVisible(
        f"no tool named {call.name!r} is available to this agent", name=call.name
    )
    data: dict[str, Any] = {"name": call.name, "id": call.id, "code": error.code}
    role = _hiding_role(scope, call.name)
    if role is not None:
        # For the operator (the event), never the model: the caller's role leaves it out.
        data["role"] = role
    emit("vetoed_call", data)
    return error_result(call, error.code, error.message)


def _hiding_role(scope: Scope, name: str) -> str | None:
    """The trusted role (a ``role:NAME`` restriction on ``scope``) that leaves out the
    registered tool ``name``, or ``None``."""
    tool = scope.registry.get(name)
    if tool is None:
        return None
    for predicate in scope.restrictions:
        label = getattr(predicate, "label", "")
        if isinstance(label, str) and label.startswith("role:") and not predicate.admits(tool):
            return label.removeprefix("role:")
    return None


def error_result(call: ToolCall, code: str, message: str, *, path: object = None) -> Message:
    """The error ``tool`` message answering ``call``."""
    error: dict[str, Any] = {"code": code, "message": message}
    if path is not None:
        error["path"] = path
    return Message(
        role="tool",
        content=json.dumps({"error": error}, ensure_ascii=False),
        tool_call_id=call.id,
        name=call.name,
        is_error=True,
    )


def error_code(result: Message) -> str | None:
    """The ``code`` of an error tool result produced by the loop, else ``None``."""
    if not result.is_error:
        return None
    try:
        code = json.loads(result.content)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None
    return code if isinstance(code, str) else None


def result_event(call: ToolCall, result: Message) -> dict[str, Any]:
    """The ``tool_result`` event data for ``result``."""
    event: dict[str, Any] = {"name": call.name, "id": call.id, "is_error": result.is_error}
    if result.is_error:
        event["code"] = error_code(result)
    return event


def _render(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)
