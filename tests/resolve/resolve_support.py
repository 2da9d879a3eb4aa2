"""Builders shared by the resolver tests: tools, definitions, a parent and a deployment."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from membrane.agents.definition import AgentDefinition
from membrane.config.values import Settings
from membrane.resolve import CallParams, Deployment, EffectiveAuthority, ParentContext, resolve
from membrane.tools.spec import Tool, ToolContext

MUTATING_BUILTINS = frozenset({"Bash", "Edit", "Write"})
BUILTIN_NAMES = ("Read", "Glob", "Grep", "Bash", "Edit", "Write")


async def _noop(arguments: Mapping[str, Any], context: ToolContext) -> str:
    return "ok"


def tool(name: str, origin: str = "builtin", *, mutating: bool = False, **flags: Any) -> Tool:
    return Tool(
        name=name,
        description=f"{name} tool",
        input_schema={"type": "object"},
        handler=_noop,
        origin=origin,
        mutating=mutating,
        **flags,
    )


def builtins() -> dict[str, Tool]:
    return {n: tool(n, mutating=n in MUTATING_BUILTINS) for n in BUILTIN_NAMES}


def extension_tools(extension: str, names: Iterable[str], **flags: bool) -> dict[str, Tool]:
    return {n: tool(n, f"extension:{extension}", **flags) for n in names}


def mcp_tools(server: str, names: Iterable[str], **flags: bool) -> dict[str, Tool]:
    return {
        f"mcp__{server}__{n}": tool(f"mcp__{server}__{n}", f"mcp:{server}", **flags) for n in names
    }


def agent(name: str = "worker", *, root: str = "project", **fields: Any) -> AgentDefinition:
    for key in ("tools", "disallowed_tools", "exclude_extensions", "allowed_subagents"):
        if isinstance(fields.get(key), list):
            fields[key] = tuple(fields[key])
    if isinstance(fields.get("extensions"), list):
        fields["extensions"] = tuple(fields["extensions"])
    return AgentDefinition(name=name, root=root, path=f".membrane/agents/{name}.md", **fields)


def tool_fields(
    tools: list[str] | None,
    disallowed: list[str],
    extensions: object,
    excluded: list[str],
    subagents: bool,
) -> dict[str, object]:
    """A definition's tool fields as drawn by the property tests (``None``/empty: left unset)."""
    fields: dict[str, object] = {"disallowed_tools": tuple(disallowed)}
    if tools is not None:
        fields["tools"] = tuple(tools)
    if extensions is not None:
        fields["extensions"] = extensions
    if excluded:
        fields["exclude_extensions"] = tuple(excluded)
    if subagents:
        fields["allowed_subagents"] = ("scout",)
    return fields


def deployment(
    *,
    extensions: Mapping[str, Mapping[str, Tool]] = {},
    settings: Settings | None = None,
    **more: Any,
) -> Deployment:
    registry = builtins()
    for tools in extensions.values():
        registry.update(tools)
    return Deployment(
        settings=settings or Settings(),
        registry_tools=registry,
        extensions={name: frozenset(tools) for name, tools in extensions.items()},
        project="/srv/project",
        **more,
    )


def run(
    definition: AgentDefinition,
    *,
    call: CallParams | None = None,
    parent: ParentContext | None = None,
    deploy: Deployment | None = None,
    **kwargs: Any,
) -> EffectiveAuthority:
    return resolve(
        definition,
        call or CallParams(),
        parent or ParentContext(tools=builtins(), model="parent-model"),
        deploy or deployment(),
        **kwargs,
    )


def assert_complete(authority: EffectiveAuthority, *pools: Mapping[str, Tool]) -> None:
    """Every known tool is callable or left out with exactly one reason, never both."""
    callable_names = set(authority.callable)
    assert not callable_names & set(authority.left_out)
    for pool in pools:
        for name in pool:
            assert name in callable_names or name in authority.left_out, name
