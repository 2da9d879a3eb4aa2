"""An echo agent on the ACP SDK's agent API, run as a subprocess by the ACP provider's tests.

It echoes the prompt back. Words in the prompt make it use the client's services, as a real
coding agent would: ``read PATH``, ``write PATH TEXT``, ``run COMMAND...`` (a terminal),
``mcp`` (connect to each stdio MCP server the client gave in ``session/new``, list its tools);
``touch PATH`` writes the file itself, as an agent that ignores the client would. It reports
each as a tool call update and writes ``$ECHO_AGENT_MARKER`` when it starts.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from acp import (
    PROTOCOL_VERSION,
    Agent,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    RequestError,
    run_agent,
    start_tool_call,
    update_agent_message_text,
    update_tool_call,
)
from acp.interfaces import Client
from mcp import ClientSession, StdioServerParameters, stdio_client


class EchoAgent(Agent):
    def __init__(self) -> None:
        self.client: Client | None = None
        self.cwd = ""
        self.servers: list[Any] = []

    def on_connect(self, conn: Client) -> None:
        self.client = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(protocol_version=PROTOCOL_VERSION)

    async def new_session(
        self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> NewSessionResponse:
        self.cwd = cwd
        self.servers = list(mcp_servers or [])
        return NewSessionResponse(session_id="echo-1")

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        assert self.client is not None
        text = " ".join(getattr(block, "text", "") for block in prompt)
        say = self.client.session_update
        await say(session_id, update_agent_message_text(f"echo: {text} (in {self.cwd})"))
        for number, line in enumerate(text.splitlines()):
            words = line.split()
            if not words:
                continue
            call = f"call-{number}"
            await say(session_id, start_tool_call(call, line, kind="other", status="in_progress"))
            try:
                outcome = await self._act(session_id, words)
                status = "completed"
            except RequestError as exc:
                outcome = f"refused: {exc.data or exc}"
                status = "failed"
            await say(session_id, update_tool_call(call, status=status))
            await say(session_id, update_agent_message_text(f"\n{words[0]} -> {outcome}"))
        return PromptResponse(stop_reason="end_turn")

    async def _act(self, session_id: str, words: list[str]) -> str:
        assert self.client is not None
        if words[0] == "read":
            read = await self.client.read_text_file(session_id=session_id, path=words[1])
            return read.content.strip()
        if words[0] == "write":
            await self.client.write_text_file(
                session_id=session_id, path=words[1], content=" ".join(words[2:])
            )
            return "written"
        if words[0] == "run":
            made = await self.client.create_terminal(
                session_id=session_id, command=words[1], args=words[2:]
            )
            done = await self.client.wait_for_terminal_exit(
                session_id=session_id, terminal_id=made.terminal_id
            )
            output = await self.client.terminal_output(
                session_id=session_id, terminal_id=made.terminal_id
            )
            await self.client.release_terminal(session_id=session_id, terminal_id=made.terminal_id)
            return f"exit {done.exit_code}: {output.output.strip()}"
        if words[0] == "mcp":
            listed = [await _list_tools(server) for server in self.servers]
            return "; ".join(listed) or "no servers"
        if words[0] == "touch":
            try:
                with open(os.path.join(self.cwd, words[1]), "a", encoding="utf-8") as out:
                    out.write("touched\n")
            except OSError as exc:
                return f"failed: {exc.strerror}"
            return "touched"
        return "said"


async def _list_tools(server: Any) -> str:
    """Connect to a stdio MCP server the client gave, as a real agent would, and list it."""
    env = {variable.name: variable.value for variable in server.env} or None
    params = StdioServerParameters(command=server.command, args=list(server.args), env=env)
    with open(os.devnull, "w", encoding="utf-8") as quiet:
        async with (
            stdio_client(params, errlog=quiet) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            names = sorted(tool.name for tool in (await session.list_tools()).tools)
    return f"{server.name}: {', '.join(names)}"


if __name__ == "__main__":
    marker = os.environ.get("ECHO_AGENT_MARKER")
    if marker:
        with open(marker, "a", encoding="utf-8") as out:
            out.write(f"{os.getpid()}\n")
    print("echo agent starting", file=sys.stderr, flush=True)
    asyncio.run(run_agent(EchoAgent()))
