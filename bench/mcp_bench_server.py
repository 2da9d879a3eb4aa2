"""The MCP server ``bench_mcp.py`` measures: one process on streamable HTTP (loopback), so that
Membrane's mounted client and a bare SDK client reach the very same process.

``echo`` answers at once; ``add``/``remove`` change the tool list and send
``notifications/tools/list_changed``, returning the wall-clock time just before sending it.
"""

from __future__ import annotations

import sys
import time

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("bench", subscriptions=False)


@server.tool(description="Echo the text.")
def echo(text: str) -> str:
    return text


@server.tool(description="Add a tool NAME; returns when the notice was sent.")
async def add(name: str, ctx: Context) -> str:
    async def extra(text: str) -> str:
        return text

    server.add_tool(extra, name=name, description="added")
    sent = time.time()
    await ctx.session.send_tool_list_changed()
    return repr(sent)


@server.tool(description="Remove the tool NAME; returns when the notice was sent.")
async def remove(name: str, ctx: Context) -> str:
    server.remove_tool(name)
    sent = time.time()
    await ctx.session.send_tool_list_changed()
    return repr(sent)


if __name__ == "__main__":
    server.run(transport="streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
