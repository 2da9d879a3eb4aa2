"""Tool schemas every model server can use: OpenAI's strict structured outputs and llama.cpp's
JSON-schema-to-grammar conversion (the constrained decoding of local servers).

Both accept only part of JSON Schema. OpenAI's strict mode refuses a schema with a keyword it does
not support (``minLength``, ``uniqueItems``, ``default``, ...) and wants every object closed with
``additionalProperties: false``; llama.cpp's converter skips what it does not support without a
word (``uniqueItems``, bounds on a ``number``, an unanchored ``pattern``, most ``format``s), so
the grammar it builds lets the model write what the schema refuses.

``portable_schema`` is the form a tool's input schema is offered to a model in (``wire_schema``):
each keyword outside the common part is taken out and said in the node's ``description`` instead
(``minLength: 1`` becomes "(non-empty)"). The tool's own schema is unchanged, and a call's
arguments are still validated against all of it: the wire form only says less, in words.
``portability_problems`` lists what keeps a schema from that common part; the built-in tools'
wire schemas have none (a test checks them all).

One rule of strict mode is not in the portable form: it also wants every property listed in
``required``, an optional argument made nullable instead. ``strict_schema`` takes a portable
schema there (the ``openai`` adapter sends it, with ``strict: true``, for a model entry with
``strict_tools = true``), and ``drop_optional_nulls`` takes a call's arguments back: a ``null``
the model was made to write for an optional argument is the argument left out, so the call is
validated and run against the tool's own schema as if strict mode had never been asked for.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["drop_optional_nulls", "portability_problems", "portable_schema", "strict_schema"]

#: The keywords both accept, wherever they appear (the rest of their rules are checked below).
_COMMON: Final = frozenset(
    {
        "type",
        "description",
        "title",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "anyOf",
        "$ref",
        "$defs",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minItems",
        "maxItems",
    }
)
#: The string formats both know.
_FORMATS: Final = frozenset({"date", "time", "date-time", "uuid"})
_BOUNDS: Final = ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")
_BOUND_WORDS: Final = {
    "minimum": "at least",
    "exclusiveMinimum": "more than",
    "maximum": "at most",
    "exclusiveMaximum": "less than",
}
#: Keywords whose values are schemas, and those whose values map names to schemas.
_SUBSCHEMA: Final = ("items", "additionalProperties")
_SUBSCHEMA_MAPS: Final = ("properties", "$defs")


def portable_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` with every keyword outside the common part of OpenAI's strict mode and
    llama.cpp's converter moved into the node's ``description`` (a new value; ``schema`` is
    not changed). A schema that is already portable comes back equal to itself."""
    return _portable(schema)


def portability_problems(schema: Mapping[str, Any]) -> list[str]:
    """What keeps ``schema`` from being usable by OpenAI's strict mode (but for its
    every-property-required rule) and by llama.cpp's converter: one line per problem, each
    with the JSON path of its node. Empty when there is none."""
    problems: list[str] = []
    if schema.get("type") != "object" or "anyOf" in schema:
        problems.append("$: the root must be an object schema, not a union")
    _check(schema, "$", problems)
    return problems


def _types(node: Mapping[str, Any]) -> set[str]:
    declared = node.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return {t for t in declared if isinstance(t, str)}
    return set()


def _is_object(node: Mapping[str, Any]) -> bool:
    return "object" in _types(node) or "properties" in node


def _unanchored(pattern: object) -> bool:
    return not (isinstance(pattern, str) and pattern.startswith("^") and pattern.endswith("$"))


def _check(node: object, path: str, problems: list[str]) -> None:
    if not isinstance(node, Mapping):
        return
    for keyword in node:
        if keyword not in _COMMON:
            problems.append(f"{path}: {keyword!r} is not supported")
    if _is_object(node):
        if node.get("additionalProperties") is not False:
            problems.append(f"{path}: an object must set additionalProperties: false")
        if "anyOf" in node:
            problems.append(f"{path}: an object cannot mix properties with anyOf")
    if "number" in _types(node) and any(bound in node for bound in _BOUNDS):
        problems.append(f"{path}: bounds apply only to integers, not to a number")
    if "pattern" in node and _unanchored(node["pattern"]):
        problems.append(f"{path}: a pattern must start with ^ and end with $")
    if "format" in node and node["format"] not in _FORMATS:
        problems.append(f"{path}: format {node['format']!r} is not supported")
    for keyword in _SUBSCHEMA:
        if isinstance(node.get(keyword), Mapping):
            _check(node[keyword], f"{path}.{keyword}", problems)
    for keyword in _SUBSCHEMA_MAPS:
        children = node.get(keyword)
        if isinstance(children, Mapping):
            for name, child in children.items():
                _check(child, f"{path}.{keyword}.{name}", problems)
    for index, option in enumerate(node.get("anyOf") or ()):
        _check(option, f"{path}.anyOf[{index}]", problems)


def _unions_rewritten(node: Mapping[str, Any]) -> Mapping[str, Any]:
    """``node`` with the combinators both can take in another form: ``oneOf`` as ``anyOf``
    (a call is still validated against the ``oneOf``), and an ``allOf`` of one schema (what
    pydantic writes around a ``$ref``) merged into the node."""
    if "oneOf" not in node and not (
        isinstance(node.get("allOf"), list) and len(node["allOf"]) == 1
    ):
        return node
    rewritten = dict(node)
    if "oneOf" in rewritten and "anyOf" not in rewritten:
        rewritten["anyOf"] = rewritten.pop("oneOf")
    only = rewritten.get("allOf")
    if isinstance(only, list) and len(only) == 1 and isinstance(only[0], Mapping):
        del rewritten["allOf"]
        for keyword, value in only[0].items():
            rewritten.setdefault(keyword, value)
    return rewritten


def _portable(node: Mapping[str, Any]) -> dict[str, Any]:
    node = _unions_rewritten(node)
    out: dict[str, Any] = {}
    said: list[str] = []
    numeric = "number" in _types(node)
    for keyword, value in node.items():
        if keyword in _SUBSCHEMA and isinstance(value, Mapping):
            out[keyword] = _portable(value)
        elif keyword in _SUBSCHEMA_MAPS and isinstance(value, Mapping):
            out[keyword] = {
                name: _portable(child) if isinstance(child, Mapping) else child
                for name, child in value.items()
            }
        elif keyword == "anyOf" and isinstance(value, list):
            out[keyword] = [_portable(o) if isinstance(o, Mapping) else o for o in value]
        elif keyword in _BOUNDS and numeric:
            said.append(f"{_BOUND_WORDS[keyword]} {value}")
        elif keyword == "pattern" and _unanchored(value):
            said.append(f"matching the regular expression {value}")
        elif keyword == "format" and value not in _FORMATS:
            said.append(f"format: {value}")
        elif keyword in _COMMON:
            out[keyword] = value
        else:
            said.append(_words(keyword, value))
    if said:
        text = "(" + "; ".join(said) + ")"
        before = out.get("description")
        out["description"] = f"{before} {text}" if isinstance(before, str) and before else text
    return out


def _words(keyword: str, value: object) -> str:
    """One dropped keyword, said in words."""
    if keyword == "minLength":
        return "non-empty" if value == 1 else f"at least {value} characters"
    if keyword == "maxLength":
        return f"at most {value} characters"
    if keyword == "uniqueItems":
        return "no item repeated" if value else "items may repeat"
    return f"{keyword}: {json.dumps(value, default=str)}"


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A portable ``schema`` in the form OpenAI's strict mode requires: every object lists all
    of its properties in ``required``, and one that was optional also accepts ``null`` (a new
    value; ``schema`` is not changed)."""
    return _strict(schema)


def drop_optional_nulls(arguments: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """``arguments`` without the ``null`` values a strict-mode model wrote for the arguments
    ``schema`` (the schema before ``strict_schema``) does not require, at every depth."""
    out = _without_nulls(arguments, schema)
    return out if isinstance(out, dict) else dict(arguments)


def _nullable(node: Mapping[str, Any]) -> dict[str, Any]:
    if "$ref" in node or "anyOf" in node or "type" not in node:
        options = list(node.get("anyOf") or [{k: v for k, v in node.items() if k != "description"}])
        if not any(isinstance(o, Mapping) and o.get("type") == "null" for o in options):
            options.append({"type": "null"})
        out = {"anyOf": options}
        if "description" in node:
            out["description"] = node["description"]
        return out
    out = dict(node)
    declared = node["type"]
    types = [declared] if isinstance(declared, str) else list(declared)
    if "null" not in types:
        out["type"] = [*types, "null"]
    if isinstance(node.get("enum"), list) and None not in node["enum"]:
        out["enum"] = [*node["enum"], None]
    return out


def _strict(node: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = dict(node)
    for keyword in _SUBSCHEMA:
        if isinstance(node.get(keyword), Mapping):
            out[keyword] = _strict(node[keyword])
    if isinstance(node.get("$defs"), Mapping):
        out["$defs"] = {
            name: _strict(child) if isinstance(child, Mapping) else child
            for name, child in node["$defs"].items()
        }
    if isinstance(node.get("anyOf"), list):
        out["anyOf"] = [_strict(o) if isinstance(o, Mapping) else o for o in node["anyOf"]]
    properties = node.get("properties")
    if isinstance(properties, Mapping):
        required = set(node.get("required") or ())
        out["properties"] = {
            name: _strict(child) if name in required else _nullable(_strict(child))
            for name, child in properties.items()
            if isinstance(child, Mapping)
        }
        out["required"] = list(out["properties"])
    return out


def _without_nulls(value: Any, node: Mapping[str, Any]) -> Any:
    if isinstance(value, Mapping) and isinstance(node.get("properties"), Mapping):
        required = set(node.get("required") or ())
        properties = node["properties"]
        out: dict[str, Any] = {}
        for key, item in value.items():
            if item is None and key in properties and key not in required:
                continue
            child = properties.get(key)
            out[key] = _without_nulls(item, child) if isinstance(child, Mapping) else item
        return out
    if isinstance(value, list) and isinstance(node.get("items"), Mapping):
        return [_without_nulls(item, node["items"]) for item in value]
    return value
