"""The runtime's methods in this process: ``direct_client`` calls ``membrane.server.methods``
directly, with no socket and no framing in between (as the MCP SDK's in-memory transport
does), so a headless command and a runtime-backed one go through the same handlers.

``LocalServer`` is what the methods need from a server (``methods.Server``) for one project
served to one caller: the person's own command (``membrane ... --headless``). A result is what
the socket would carry (its JSON, decoded), and an error the one ``Client`` raises for the same
reply, so a command formats both paths with one formatter.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any, Final, Protocol

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

import membrane
from membrane.errors import CallerRefused, ProjectRefused, UnknownProject
from membrane.json_types import JSONDict
from membrane.server.approval import APPROVAL_TIMEOUT
from membrane.server.client import Handler, remote_error
from membrane.server.connection import InvalidParams, UnknownMethod
from membrane.server.framing import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    Encoded,
    Notification,
    Request,
    Response,
    encode_value,
    parse_frame,
)
from membrane.server.host import ProjectHost, project_id_of
from membrane.server.identity import Caller
from membrane.server.methods import dispatch
from membrane.server.server import Replies
from membrane.workspace import require_folder

__all__ = ["DirectClient", "LocalServer", "Requests", "direct_client"]

_SERVED_HERE: Final = "a headless command serves its one project"


class Requests(Protocol):
    """What a command needs of a client, whichever path it takes: ``Client`` (the socket) or
    ``DirectClient`` (this process)."""

    notifications: MemoryObjectReceiveStream[Notification]

    async def request(self, method: str, params: Mapping[str, Any] | None = None) -> Any: ...

    def answer(self, method: str, handler: Handler) -> None: ...


class LocalServer:
    """One project (``host``), served in this process to ``caller`` alone: the caller every
    ``initialize`` establishes, whatever identity it claims (the person's own command)."""

    def __init__(self, host: ProjectHost, caller: Caller) -> None:
        self.host = host
        self.caller = caller
        self.replies = Replies()
        self.approval_timeout = APPROVAL_TIMEOUT
        self.max_waits_per_connection = host.workspace.settings.server_max_waits_per_connection

    def identify(
        self, identity: JSONDict, client: JSONDict, *, peer_uid: int | None = None
    ) -> Caller:
        return self.caller

    def runtime_info(self, caller: Caller | None = None) -> JSONDict:
        return {
            "version": membrane.__version__,
            "projectRoot": str(self.host.workspace.project),
            "pid": os.getpid(),
            "headless": True,
        }

    async def add_project(self, root: Path, *, caller: Caller) -> ProjectHost:
        folder = require_folder("root", root)
        if project_id_of(folder) != self.host.project_id:
            raise ProjectRefused(
                f"{_SERVED_HERE} ({self.host.workspace.project}), not {folder}",
                reason="headless",
                root=str(folder),
            )
        return self.host

    async def remove_project(self, project_id: str, *, caller: Caller) -> None:
        raise CallerRefused(f"{_SERVED_HERE}; it removes none", project_id=project_id[:80])

    def project(self, project_id: str, caller: Caller) -> ProjectHost:
        if project_id != self.host.project_id:
            raise UnknownProject(
                f"no project {project_id[:80]!r} is served here; {_SERVED_HERE}",
                project_id=project_id[:80],
            )
        return self.host

    def projects(self, caller: Caller) -> list[ProjectHost]:
        return [self.host]

    def watch_actions(
        self, conn: object, host: ProjectHost, caller: Caller, names: tuple[str, ...]
    ) -> None:
        """Nothing: a command's own process hears no ``actions/list_changed``."""

    def stop_for_role(self, caller: Caller, requested: str) -> None:
        raise CallerRefused(f"{_SERVED_HERE}; there is no runtime to stop")

    def stop_for_build(self, caller: Caller, build: str) -> None:
        raise CallerRefused(f"{_SERVED_HERE}; there is no runtime to stop")

    def check_live(self, caller: Caller) -> None:
        self.host.check_live(caller)


class _DirectConnection:
    """The method layer's connection (``connection.Peer``) for a ``DirectClient``: a
    notification goes to the client's stream, and a request of the server's own
    (``approval/request``) to the client's handler, whose answer comes back as a reply."""

    def __init__(self, client: DirectClient, group: TaskGroup) -> None:
        self.state: dict[str, object] = {}
        self.peer_uid: int | None = None
        self.on_response: Callable[[Response], None] | None = None
        self.gone = anyio.Event()
        self._client = client
        self._group = group

    @property
    def group(self) -> TaskGroup:
        return self._group

    async def notify(self, method: str, params: JSONDict) -> None:
        self._client.deliver(Notification(method, params))

    async def send(self, frame: bytes) -> None:
        message = parse_frame(frame)
        if isinstance(message, Notification):
            self._client.deliver(message)
        elif isinstance(message, Request):
            self._group.start_soon(self._answer, message)

    async def _answer(self, request: Request) -> None:
        response = await self._client.answer_request(request)
        if self.on_response is not None:
            self.on_response(response)


class DirectClient:
    """A client of ``methods`` in this process; made by ``direct_client``."""

    def __init__(self, server: LocalServer, group: TaskGroup) -> None:
        self._server = server
        self._ids = itertools.count(1)
        self._handlers: dict[str, Handler] = {}
        send, receive = anyio.create_memory_object_stream[Notification](math.inf)
        self._notes_in: MemoryObjectSendStream[Notification] = send
        self.notifications: MemoryObjectReceiveStream[Notification] = receive
        self._conn = _DirectConnection(self, group)

    async def request(self, method: str, params: Mapping[str, Any] | None = None) -> Any:
        """Call the handler of ``method`` and return its result as the socket would carry it;
        raise the error ``Client.request`` raises for the same reply."""
        request = Request(next(self._ids), method, dict(params or {}))
        try:
            result = await dispatch(self._server, self._conn, request)
        except InvalidParams as exc:
            raise remote_error(
                {"code": INVALID_PARAMS, "message": str(exc), "data": exc.data}
            ) from None
        except UnknownMethod as exc:
            raise remote_error({"code": METHOD_NOT_FOUND, "message": str(exc)}) from None
        return json.loads(result if type(result) is Encoded else encode_value(result))

    def answer(self, method: str, handler: Handler) -> None:
        """Answer the server's requests for ``method`` with ``handler(params)``."""
        self._handlers[method] = handler

    def deliver(self, note: Notification) -> None:
        self._notes_in.send_nowait(note)

    async def answer_request(self, request: Request) -> Response:
        handler = self._handlers.get(request.method)
        if handler is None:
            missing: JSONDict = {
                "code": METHOD_NOT_FOUND,
                "message": f"no handler for {request.method}",
            }
            return Response(request.id, None, missing)
        try:
            return Response(request.id, await handler(request.params), None)
        except Exception as exc:
            failed: JSONDict = {"code": INTERNAL_ERROR, "message": f"{type(exc).__name__}: {exc}"}
            return Response(request.id, None, failed)

    def close(self) -> None:
        self._conn.gone.set()
        self._notes_in.close()


@contextlib.asynccontextmanager
async def direct_client(server: LocalServer) -> AsyncIterator[DirectClient]:
    """A ``DirectClient`` of ``server``; what its calls start (an event subscription) ends
    with it."""
    async with anyio.create_task_group() as group:
        client = DirectClient(server, group)
        try:
            yield client
        finally:
            client.close()
            group.cancel_scope.cancel()
