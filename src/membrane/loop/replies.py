"""A model's reply made safe before the loop uses it: anything a model returns is checked here.

A model adapter (or a hostile test double) may hand back a ``ModelResponse`` whose fields are
not what their types promise: a call whose ``arguments`` is ``None``, a list or a string, a name
that is not a string, an id that is missing or repeated, arguments that are not JSON, or
something that is not a ``ToolCall`` at all. Stored as is, such a reply would fail far from its
cause (saving the transcript, rendering an event) and take the runtime with it. So:

* a reply that is not a ``ModelResponse``, whose text is not a string or whose calls are not a
  sequence, is a ``ModelError``: the run ends with ``error``, and nothing else does;
* each call the adapter could not read the arguments of (``ModelResponse.invalid_arguments``)
  and each malformed call is replaced by a well-formed stand-in (a string id that is unique in the
  reply, the name when it is a string, else ``"(invalid)"``, and empty arguments), and its
  problem is returned by id, for the loop to answer it with a ``tool-arguments-invalid`` error
  result without running anything.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence

from membrane.errors import ModelError
from membrane.models.base import ModelResponse, ToolCall

__all__ = ["INVALID_NAME", "checked_response"]

#: The name given to a call whose name was not a string.
INVALID_NAME = "(invalid)"


def _problem(call: object) -> str | None:
    if not isinstance(call, ToolCall):
        return f"the tool call is a {type(call).__name__}, not a tool call"
    if not isinstance(call.name, str):
        return f"the tool name is {type(call.name).__name__}, not a string"
    if not isinstance(call.arguments, Mapping):
        return f"the arguments are {type(call.arguments).__name__}, not a JSON object"
    if not all(isinstance(key, str) for key in call.arguments):
        return "the arguments have a key that is not a string"
    try:
        json.dumps(call.arguments, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return f"the arguments are not JSON data ({exc})"
    return None


def checked_response(response: object, *, model: str) -> tuple[ModelResponse, dict[str, str]]:
    """``response`` with every call well formed, and the problem of each call that was not,
    keyed by the id of its stand-in. Raises :class:`ModelError` for a reply it cannot use."""
    if not isinstance(response, ModelResponse):
        raise ModelError(
            f"the model {model!r} returned {type(response).__name__}, not a ModelResponse",
            model=model,
        )
    if not isinstance(response.text, str):
        raise ModelError(
            f"the model {model!r} returned text of type {type(response.text).__name__}",
            model=model,
        )
    raw = response.tool_calls
    if isinstance(raw, (str, bytes)) or not isinstance(raw, Sequence):
        raise ModelError(
            f"the model {model!r} returned tool calls of type {type(raw).__name__}, not a list",
            model=model,
        )
    unread = response.invalid_arguments
    if not isinstance(unread, Mapping):
        unread = {}
    calls: list[ToolCall] = []
    problems: dict[str, str] = {}
    seen: set[str] = set()
    for index, call in enumerate(raw):
        raw_id = getattr(call, "id", None)
        call_id = raw_id if isinstance(raw_id, str) and raw_id and raw_id not in seen else ""
        if not call_id:
            call_id = f"call-{index}"
            while call_id in seen:
                call_id += "-"
        seen.add(call_id)
        problem = _problem(call)
        if problem is None and isinstance(raw_id, str):
            problem = unread.get(raw_id)  # the adapter could not read its arguments
        if problem is None:
            assert isinstance(call, ToolCall)
            calls.append(call if call.id == call_id else dataclasses.replace(call, id=call_id))
            continue
        name = getattr(call, "name", None)
        calls.append(ToolCall(call_id, name if isinstance(name, str) else INVALID_NAME, {}))
        problems[call_id] = problem
    if tuple(calls) == response.tool_calls and not problems:
        return response, problems
    return dataclasses.replace(response, tool_calls=tuple(calls)), problems
