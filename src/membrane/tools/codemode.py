"""Code Mode: the visible tools as a Python module of typed async functions.

``render_sdk`` writes the module source from a view's tools: one keyword-only async function per
tool, parameter types derived from the tool's JSON Schema, and ``TOOLS`` mapping each function to
the tool it calls. The functions hold no behaviour of their own: ``bind`` routes them through a
callable that the host supplies, and ``membrane.tools.sdk.load_sdk`` binds them to the scope's
*current* view, so code run in Code Mode reaches exactly the tools the scope shows at each call
and nothing else. This module only writes source; it knows nothing of views or scopes.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Container, Iterable, Mapping

from membrane.tools.spec import Tool

__all__ = ["python_name", "render_sdk"]

_HEADER = '''\
"""Typed functions for the tools this agent may call (Code Mode).

Each function calls the tool named in ``TOOLS`` through the agent's tool view; optional
parameters left at ``None`` are not sent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

_call: Callable[[str, dict[str, Any]], Awaitable[Any]] | None = None


def bind(call: Callable[[str, dict[str, Any]], Awaitable[Any]]) -> None:
    """Route every function below through ``call``; the host does this before running code."""
    global _call
    _call = call


async def _invoke(name: str, arguments: dict[str, Any]) -> Any:
    if _call is None:
        raise RuntimeError("this tool SDK is not bound to a tool view")
    return await _call(name, arguments)
'''

#: Module-level names a tool function must not shadow.
_TAKEN = frozenset(
    {"Any", "Awaitable", "Callable", "Literal", "TOOLS", "_call", "_invoke", "annotations", "bind"}
)
#: Names a parameter must not shadow inside a generated function body.
_LOCALS = frozenset({"_invoke", "arguments"})
_MAX_DEPTH = 4
_SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None"}


def python_name(name: str, taken: Container[str] = ()) -> str:
    """A valid, non-keyword Python identifier for ``name``, not in ``taken``."""
    base = re.sub(r"\W", "_", name, flags=re.ASCII) or "_"
    if base[0].isdigit():
        base = "_" + base
    if keyword.iskeyword(base) or keyword.issoftkeyword(base) or base in _TAKEN:
        base += "_"
    if base.startswith("__"):
        base = "t" + base
    candidate, counter = base, 2
    while candidate in taken:
        candidate, counter = f"{base}_{counter}", counter + 1
    return candidate


def render_sdk(tools: Iterable[Tool]) -> str:
    """The module source for ``tools`` (in the order given). It always compiles."""
    parts = [_HEADER]
    mapping: dict[str, str] = {}
    for tool in tools:
        function = python_name(tool.name, mapping)
        mapping[function] = tool.name
        parts.append(_function_source(tool, function))
    entries = "".join(f"    {function!r}: {name!r},\n" for function, name in mapping.items())
    parts.append(f"\nTOOLS: dict[str, str] = {{\n{entries}}}\n")
    return "\n".join(parts)


def _function_source(tool: Tool, function: str) -> str:
    memo_key = f"sdk:{function}"
    cached = tool.memo.get(memo_key)
    if cached is not None:
        return str(cached)
    schema = tool.input_schema
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required_raw = schema.get("required")
    required = (
        {key for key in required_raw if isinstance(key, str)}
        if isinstance(required_raw, list | tuple)
        else set()
    )
    ordered = [key for key in properties if key in required]
    ordered += [key for key in properties if key not in required]
    params: list[str] = []
    body: list[str] = []
    docs: list[str] = []
    taken: set[str] = set()
    for key in ordered:
        param = python_name(str(key), taken | _LOCALS)
        taken.add(param)
        spec = properties[key]
        annotation = _annotation(spec, 0)
        if key in required:
            params.append(f"{param}: {annotation}")
            body.append(f"    arguments[{key!r}] = {param}")
        else:
            if "None" not in _members(annotation) and annotation != "Any":
                annotation += " | None"
            params.append(f"{param}: {annotation} = None")
            body.append(f"    if {param} is not None:\n        arguments[{key!r}] = {param}")
        description = spec.get("description") if isinstance(spec, Mapping) else None
        if isinstance(description, str):
            docs.append(f"{param}: {_one_line(description)}")
    signature = f"*, {', '.join(params)}" if params else ""
    doc = tool.description.strip() or f"Call the tool {tool.name!r}."
    if docs:
        doc += "\n\nArgs:\n" + "\n".join(f"    {line}" for line in docs)
    lines = [
        f"async def {function}({signature}) -> Any:",
        _docstring(doc),
        "    arguments: dict[str, Any] = {}",
        *body,
        f"    return await _invoke({tool.name!r}, arguments)",
        "",
    ]
    source = "\n" + "\n".join(lines)
    tool.memo[memo_key] = source
    return source


def _annotation(schema: object, depth: int) -> str:
    """A Python type for a JSON Schema; ``Any`` wherever the schema says too little or too much."""
    if depth > _MAX_DEPTH or not isinstance(schema, Mapping):
        return "Any"
    if "const" in schema:
        return _literal([schema["const"]])
    enum = schema.get("enum")
    if isinstance(enum, list | tuple) and enum:
        return _literal(list(enum))
    for combinator in ("anyOf", "oneOf"):
        members = schema.get(combinator)
        if isinstance(members, list | tuple) and members:
            return _union(_annotation(member, depth + 1) for member in members)
    kind = schema.get("type")
    if isinstance(kind, list | tuple):
        return _union(_annotation({**schema, "type": item}, depth + 1) for item in kind)
    if kind in _SCALARS:
        return _SCALARS[kind]
    if kind == "array":
        return f"list[{_annotation(schema.get('items'), depth + 1)}]"
    if kind == "object":
        extra = schema.get("additionalProperties")
        value = _annotation(extra, depth + 1) if isinstance(extra, Mapping) else "Any"
        return f"dict[str, {value}]"
    return "Any"


def _literal(values: list[object]) -> str:
    if all(value is None or isinstance(value, str | int | bool) for value in values):
        literal = ", ".join(repr(value) for value in values)
        return f"Literal[{literal}]"
    return "Any"


def _union(members: Iterable[str]) -> str:
    unique: list[str] = []
    for member in members:
        if member == "Any":
            return "Any"
        for part in _members(member):
            if part not in unique:
                unique.append(part)
    return " | ".join(unique) if unique else "Any"


def _members(annotation: str) -> list[str]:
    """The top-level members of a ``A | B`` annotation (``|`` inside brackets stays put)."""
    parts: list[str] = []
    depth, start = 0, 0
    for index, char in enumerate(annotation):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == "|" and depth == 0:
            parts.append(annotation[start:index].strip())
            start = index + 1
    parts.append(annotation[start:].strip())
    return parts


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _docstring(text: str) -> str:
    escaped = "".join(
        char if char.isprintable() or char in "\n\t" else char.encode("unicode_escape").decode()
        for char in text.replace("\\", "\\\\")
    ).replace('"""', '\\"\\"\\"')
    if escaped.endswith('"'):
        escaped += " "
    indented = "\n".join(f"    {line}" if line.strip() else "" for line in escaped.splitlines())
    return f'    """{indented.lstrip()}\n    """'
