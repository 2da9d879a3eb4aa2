"""Tool-call arguments read leniently, as models (small local ones above all) really write them.

A model writes a call's arguments as text (OpenAI's ``arguments`` string, a streamed Anthropic
``input_json_delta``), and that text is not always strict JSON. ``read_arguments`` accepts what
a reader can take without guessing:

* control characters (a raw newline or tab) inside a string;
* a trailing comma before ``}`` or ``]``;
* the object inside a Markdown code fence (```` ```json ... ``` ````);
* an object encoded twice (a JSON string whose text is the object);
* nothing at all (no arguments: ``{}``).

Anything else (text that is still not JSON, JSON that is not an object, ``NaN``) is not run:
``read_arguments`` returns empty arguments and the problem, the converter puts the problem in
``ModelResponse.invalid_arguments``, and the agent loop answers the call with a
``tool-arguments-invalid`` error result while the run goes on. Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["read_arguments"]

_FENCE = re.compile(r"\A```[A-Za-z0-9_-]*[ \t]*\n?(?P<body>.*?)\n?[ \t]*```\Z", re.DOTALL)
#: How much of unreadable arguments a problem quotes back to the model.
_QUOTE = 200


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON value")


def _loads(text: str) -> object:
    # strict=False: control characters inside strings are taken as they are.
    return json.loads(text, strict=False, parse_constant=_no_constant)


def _without_trailing_commas(text: str) -> str:
    """``text`` without the commas that stand right before a closing ``}`` or ``]`` (outside
    strings)."""
    out: list[str] = []
    in_string = escaped = False
    for index, char in enumerate(text):
        if in_string:
            out.append(char)
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char == ",":
            rest = text[index + 1 :].lstrip()
            if rest[:1] in ("}", "]"):
                continue
        out.append(char)
    return "".join(out)


def _kind(value: object) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def read_arguments(raw: object) -> tuple[dict[str, Any], str | None]:
    """The arguments ``raw`` holds (a JSON object's text, or an already decoded value), and
    ``None``; or empty arguments and what was wrong with them."""
    value = raw
    if isinstance(raw, str):
        text = raw.strip()
        if not text:
            return {}, None
        value, problem = _decoded(text)
        if problem is not None:
            quoted = text if len(text) <= _QUOTE else text[:_QUOTE] + "..."
            return {}, f"the arguments are not valid JSON ({problem}): {quoted}"
        if isinstance(value, str) and value.strip().startswith("{"):
            twice, problem = _decoded(value.strip())  # an object encoded twice
            value = value if problem is not None else twice
    if isinstance(value, Mapping):
        return dict(value), None
    return {}, f"the arguments are {_kind(value)}, not a JSON object"


def _decoded(text: str) -> tuple[object, str | None]:
    first: ValueError | None = None
    fenced = _FENCE.match(text)
    for attempt in (text, fenced.group("body").strip() if fenced else None):
        if attempt is None:
            continue
        for candidate in (attempt, _without_trailing_commas(attempt)):
            try:
                return _loads(candidate), None
            except ValueError as exc:
                first = first or exc
    return None, str(first)
