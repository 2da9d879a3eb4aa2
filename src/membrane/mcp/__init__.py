"""MCP both ways: mount MCP servers as extensions (``McpServers``) and serve a role-filtered view
as an MCP server (``membrane mcp serve``). Needs the optional extra ``membrane[mcp]``; nothing
here imports the SDK until a server is started or served."""

from membrane.mcp.client import McpServer, ServerState, mcp_tool_name
from membrane.mcp.mount import McpServers, servers_named
from membrane.mcp.results import map_result

__all__ = [
    "McpServer",
    "McpServers",
    "ServerState",
    "map_result",
    "mcp_tool_name",
    "servers_named",
]
