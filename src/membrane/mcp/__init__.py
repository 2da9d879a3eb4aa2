"""MCP both ways: mount MCP servers as extensions (``McpServers``) and serve a role-filtered view
as an MCP server (``membrane mcp serve``). Needs the optional extra ``membrane[mcp]``; nothing
here imports the SDK until a server is started or served."""

from __future__ import annotations

import typing

from membrane._lazy import lazy_exports as _lazy_exports

if typing.TYPE_CHECKING:
    from membrane.mcp.client import McpServer, ServerState, mcp_tool_name
    from membrane.mcp.mount import McpServers
    from membrane.mcp.named import servers_named
    from membrane.mcp.results import map_result

__all__ = [
    "McpServer",
    "McpServers",
    "ServerState",
    "map_result",
    "mcp_tool_name",
    "servers_named",
]

# Nothing is imported until a name is first used, so importing the package (and the CLI's
# start) pays only for what is touched.
__getattr__, __dir__ = _lazy_exports(
    __name__,
    {
        "McpServer": "membrane.mcp.client",
        "ServerState": "membrane.mcp.client",
        "mcp_tool_name": "membrane.mcp.client",
        "McpServers": "membrane.mcp.mount",
        "servers_named": "membrane.mcp.named",
        "map_result": "membrane.mcp.results",
    },
    globals(),
)
