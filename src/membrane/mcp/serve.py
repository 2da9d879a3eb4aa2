"""Serve one view as an MCP server (``membrane mcp serve``).

The server offers exactly the tools one caller may call: a ``Scope`` over the deployment's live
registry restricted by a trusted role (``settings.roles``) and/or an agent's effective authority
(its definition resolved as a top-level agent), so ``tools/list`` is that scope's view and
``tools/call`` runs through it (the same call-time veto as a child's: a name outside the view
fails as ``tool-not-visible``, naming only what was asked). The role comes from the operator who
starts the server (``--role``, or ``MEMBRANE_ROLE`` in its environment, DESIGN rule 11); what an
MCP client says about itself in ``initialize`` changes nothing.

When the view changes (a tool registered or removed, a mounted server's ``list_changed``), every
connected client that has listed tools gets ``notifications/tools/list_changed``.
"""

from __future__ import annotations

import base64
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from membrane.agents.definition import AgentDefinition
from membrane.config.values import RoleSpec
from membrane.errors import InvalidRequest
from membrane.json_types import JSONObject
from membrane.loop.calls import run_tool_call
from membrane.mcp.sdk import require
from membrane.models.base import Message, ToolCall
from membrane.resolve import CallParams
from membrane.resolve.authority import Deployment, EffectiveAuthority, ParentContext, resolve
from membrane.resolve.ceiling import Ceiling
from membrane.resolve.roles import RoleRestriction
from membrane.tools.registry import ToolRegistry
from membrane.tools.restriction import ToolPredicate
from membrane.tools.scope import Scope
from membrane.tools.spec import ToolContext

__all__ = ["BearerGuard", "ServedView", "view_scope"]


def view_scope(
    registry: ToolRegistry,
    *,
    role: str | None,
    roles: Mapping[str, RoleSpec],
    restriction: ToolPredicate | None = None,
    name: str = "mcp-serve",
) -> Scope:
    """The scope whose view is served: the registry, narrowed by the trusted ``role`` (its
    ``settings.roles`` entry) and by ``restriction`` (an agent's definition restriction)."""
    scope = Scope(registry, name=name)
    if role is not None:
        spec = roles.get(role)
        if spec is None:
            known = ", ".join(sorted(roles)) or "none configured"
            raise InvalidRequest(
                f"unknown role {role!r}; roles in settings: {known}", field="role", role=role
            )
        scope.restrict(RoleRestriction(role, spec), validate=False)
    if restriction is not None:
        scope.restrict(restriction)
    return scope


def agent_authority(
    definition: AgentDefinition, registry: ToolRegistry, deployment: Deployment, *, cwd: Path
) -> EffectiveAuthority:
    """The effective authority of ``definition`` as a top-level agent (depth 0): its
    ``restriction`` narrows the served view, its ``delegation_tools`` say whether it delegates.
    The deployment's ceiling holds here as at any top-level start (``plan`` caps it)."""
    parent = ParentContext(
        tools=registry.tools(),
        cwd=str(cwd),
        live=registry.tools,
        live_stamp=lambda: registry.version,
        ceiling=Ceiling.from_settings(deployment.settings.permission_mode),
    )
    return resolve(definition, CallParams(), parent, deployment, depth=0)


@dataclass
class ServedView:
    """The MCP server over ``scope``: build it, then ``run_stdio()`` or ``run_http(port)``."""

    scope: Scope
    context: ToolContext
    name: str = "membrane"

    def __post_init__(self) -> None:
        self._sessions: list[Any] = []
        self._announced: tuple[str, ...] = self.scope.view().names
        self._dirty = anyio.Event()
        self._unsubscribe = self.scope.registry.subscribe(self._on_change)

    def _on_change(self, change: object) -> None:
        if self.scope.view().names != self._announced:
            self._dirty.set()

    def server(self) -> Any:
        """The SDK's low-level ``Server`` answering ``tools/list`` and ``tools/call``."""
        lowlevel = require("mcp.server.lowlevel")
        types = require("mcp.types")

        async def list_tools(ctx: Any, params: Any) -> Any:
            self._remember(ctx.session)
            view = self.scope.view()
            return types.ListToolsResult(
                tools=[
                    types.Tool(name=tool.name, description=tool.description, input_schema=schema)
                    for tool, schema in zip(
                        view.tools(), (s["input_schema"] for s in view.schemas()), strict=True
                    )
                ]
            )

        async def call_tool(ctx: Any, params: Any) -> Any:
            self._remember(ctx.session)
            arguments: JSONObject = dict(params.arguments or {})
            call = ToolCall(id=str(ctx.request_id or "call"), name=params.name, arguments=arguments)
            message = await run_tool_call(self.scope, call, self.context)
            return _result(types, message)

        return lowlevel.Server(self.name, on_list_tools=list_tools, on_call_tool=call_tool)

    def _remember(self, session: Any) -> None:
        if session is not None and all(s is not session for s in self._sessions):
            self._sessions.append(session)

    async def _announce(self) -> None:
        """Send ``tools/list_changed`` to every session each time the view's names move."""
        while True:
            await self._dirty.wait()
            self._dirty = anyio.Event()
            names = self.scope.view().names
            if names == self._announced:
                continue
            self._announced = names
            for session in list(self._sessions):
                try:
                    await session.send_tool_list_changed()
                except Exception:  # a session that went away
                    self._sessions.remove(session)

    async def run_stdio(self) -> None:
        mcp = require()
        lowlevel = require("mcp.server.lowlevel")
        server = self.server()
        options = server.create_initialization_options(
            lowlevel.NotificationOptions(tools_changed=True)
        )
        async with anyio.create_task_group() as group:
            group.start_soon(self._announce)
            async with mcp.stdio_server() as (read, write):
                await server.run(read, write, options)
            group.cancel_scope.cancel()

    async def run_http(self, port: int, *, token: str, host: str = "127.0.0.1") -> None:
        """Streamable HTTP on loopback only (``host`` must be a loopback address), for callers
        that send ``Authorization: Bearer TOKEN`` and no ``Origin`` but the server's own
        (``BearerGuard``): any local process can reach a loopback port, so the port alone
        proves nothing about who calls."""
        if host not in ("127.0.0.1", "::1", "localhost"):
            raise InvalidRequest(
                f"--http serves on loopback only, not {host!r}", field="host", host=host
            )
        if len(token) < 16:
            raise InvalidRequest("the --http token must be at least 16 characters", field="token")
        uvicorn = require("uvicorn", package="uvicorn")
        app = BearerGuard(self.server().streamable_http_app(host=host), token=token, port=port)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
        async with anyio.create_task_group() as group:
            group.start_soon(self._announce)
            await uvicorn.Server(config).serve()
            group.cancel_scope.cancel()

    def close(self) -> None:
        self._unsubscribe()


class BearerGuard:
    """An ASGI wrapper that answers an HTTP request ``401`` unless it carries
    ``Authorization: Bearer TOKEN``, and ``403`` when it names an ``Origin`` other than the
    loopback address and port served (a web page the user visits is such an origin)."""

    def __init__(self, app: Any, *, token: str, port: int) -> None:
        self._app = app
        self._expected = b"Bearer " + token.encode()
        self._origins = frozenset(
            f"http://{name}:{port}".encode() for name in ("127.0.0.1", "localhost", "[::1]")
        )

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            headers = dict(scope.get("headers") or ())
            origin = headers.get(b"origin")
            if origin is not None and origin not in self._origins:
                await _refuse(send, 403, "this origin may not call the served view")
                return
            if not hmac.compare_digest(headers.get(b"authorization", b""), self._expected):
                await _refuse(send, 401, "send Authorization: Bearer TOKEN (printed at start)")
                return
        await self._app(scope, receive, send)


async def _refuse(send: Any, status: int, why: str) -> None:
    body = why.encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"www-authenticate", b"Bearer")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _result(types: Any, message: Message) -> Any:
    content: list[Any] = [types.TextContent(type="text", text=message.content)]
    for attachment in message.attachments:
        data = base64.b64encode(attachment.data).decode("ascii")
        if attachment.mime_type.startswith("image/"):
            content.append(
                types.ImageContent(type="image", data=data, mime_type=attachment.mime_type)
            )
        elif attachment.mime_type.startswith("audio/"):
            content.append(
                types.AudioContent(type="audio", data=data, mime_type=attachment.mime_type)
            )
    return types.CallToolResult(content=content, is_error=message.is_error)
