"""The MCP servers an ACP child is given in ``session/new`` (``mcpServers``).

ACP lets the client name MCP servers that the agent connects to itself. The agent then talks
to the server directly, past Membrane's view, so an ACP child gets a mounted server only when
its view holds that server *wholesale*: every tool the server has registered now, and any it
may add later (a fresh name of origin ``mcp:NAME`` passes every restriction on the child's
scope). A server the child may use only in part (``tools: mcp__time__get_current_time``, a
``disallowed_tools`` entry, a role or ``toolFilter`` naming some of its tools), or not at all,
is left out, because Membrane could not narrow what the agent sees. So is a server whose
tools are not known yet (not started, and no cached list): what it holds cannot be checked.
The servers considered are the extensions the resolver loaded for the child (none for an
``isolated`` child).

A stdio server is given as ``{name, command, args, env}``, which every ACP agent takes; one
with a ``cwd`` is left out (ACP has no field for it). An HTTP server is given only to an
agent that advertises ``mcpCapabilities.http``. What was left out, and why, is reported in
an ``agent_update`` event (``kind: mcp_servers``).
"""

from __future__ import annotations

import secrets
from collections.abc import Collection, Mapping
from typing import Any

from membrane.config.values import McpServerSpec
from membrane.json_types import JSONObject
from membrane.tools.scope import Scope
from membrane.tools.spec import Tool, ToolContext

__all__ = ["acp_mcp_servers", "wholesale_problem"]

PARTIAL = "the child's view does not hold every tool of this server"
UNKNOWN = "its tools are not known yet (it has not listed them, and no list is cached)"


async def _never(arguments: JSONObject, context: ToolContext) -> object:
    raise AssertionError("a probe is never called")


def wholesale_problem(scope: Scope, server: str) -> str | None:
    """Why ``scope``'s view does not hold every tool of ``server``, now and later, or ``None``."""
    origin = f"mcp:{server}"
    registered = scope.registry.names_of_origin(origin)
    if not registered:
        return UNKNOWN
    probe = Tool(
        name=f"mcp__{server}__probe_{secrets.token_hex(8)}",
        description="",
        input_schema={"type": "object"},
        handler=_never,
        origin=origin,
        deferred=True,
    )
    if not all(restriction.admits(probe) for restriction in scope.restrictions):
        return PARTIAL
    view = scope.view()
    if any(name not in view for name in registered):
        return PARTIAL
    return None


def acp_mcp_servers(
    schema: Any,
    scope: Scope,
    loaded: Collection[str],
    servers: Mapping[str, McpServerSpec],
    *,
    http: bool,
) -> tuple[list[Any], dict[str, str]]:
    """The ``mcpServers`` entries (``acp.schema`` values) for a child whose resolver loaded the
    extensions ``loaded``, and the servers left out with the reason."""
    given: list[Any] = []
    left_out: dict[str, str] = {}
    for name in sorted(set(loaded) & set(servers)):
        spec = servers[name]
        problem = wholesale_problem(scope, name)
        if problem is None:
            entry, problem = _entry(schema, spec, http=http)
            if entry is not None:
                given.append(entry)
                continue
        left_out[name] = problem or PARTIAL
    return given, left_out


def _entry(schema: Any, spec: McpServerSpec, *, http: bool) -> tuple[Any, str | None]:
    if spec.url is not None:
        if not http:
            return None, "the agent does not take HTTP MCP servers (mcpCapabilities.http)"
        headers = [schema.HttpHeader(name=k, value=v) for k, v in sorted(spec.headers.items())]
        return schema.HttpMcpServer(
            type="http", name=spec.name, url=spec.url, headers=headers
        ), None
    if spec.cwd is not None:
        return None, "its cwd cannot be passed to an ACP agent"
    env = [schema.EnvVariable(name=k, value=v) for k, v in sorted(spec.env.items())]
    entry = schema.McpServerStdio(
        name=spec.name, command=spec.command or "", args=list(spec.args), env=env
    )
    return entry, None
