"""A small MCP server on the SDK's server API, run as a subprocess by the tests.

It changes its own tool list while a client is connected (``add``/``remove`` send
``notifications/tools/list_changed``), returns an image and an error result, and can be
killed in the middle of a call (``crash``) or hang (``hang``).
"""

from __future__ import annotations

import os
import signal
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image

#: The PNG signature and an empty IHDR-less body: bytes enough to check they arrive intact.
PICTURE = b"\x89PNG\r\n\x1a\n" + bytes(range(16))

server = MCPServer("dynamic", subscriptions=False)


@server.tool(description="Add a tool named NAME that echoes its text.")
async def add(name: str, ctx: Context) -> str:
    async def extra(text: str) -> str:
        return f"{name}:{text}"

    server.add_tool(extra, name=name, description=f"Echo text ({name}).")
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


@server.tool(description="Remove the tool named NAME.")
async def remove(name: str, ctx: Context) -> str:
    server.remove_tool(name)
    await ctx.session.send_tool_list_changed()
    return f"removed {name}"


@server.tool(description="Return a picture.")
def picture() -> Image:
    return Image(data=PICTURE, format="png")


@server.tool(description="Always fail.")
def fail(why: str) -> str:
    raise ToolError(f"failed because {why}")


@server.tool(description="Kill this server in the middle of the call.")
def crash() -> str:
    os.kill(os.getpid(), signal.SIGKILL)
    return "unreachable"


@server.tool(description="Never answer.")
async def hang() -> str:
    await anyio.sleep_forever()
    return "unreachable"


if __name__ == "__main__":
    print(f"dynamic server {os.getpid()} starting", file=sys.stderr, flush=True)
    server.run()
