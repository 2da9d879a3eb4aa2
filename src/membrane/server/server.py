"""``Server``: the machine runtime behind ``membrane serve``.

One server per machine user serves many projects over one socket. Its life:

1. bind: the private socket and its lock (``transport.bind_socket``);
2. serve: accept connections (peer uid checked), start the background services;
3. on SIGTERM/SIGINT, ``shutdown()``, or ``idle_exit`` seconds with no connection and no run
   in flight (a runtime a command started in the background): stop accepting, let in-flight
   calls finish (at most ``drain_seconds``), close every connection, close every project
   (which stops its runs), remove the socket and release the lock.

Background services are started in one place, ``Server.services``: each is an async callable
that gets the server and runs until the server cancels it at shutdown.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
import signal
import socket
import tempfile
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Final

import anyio
from anyio.abc import TaskGroup, TaskStatus

import membrane
from membrane.config.load import load_settings
from membrane.config.values import DEFAULT_ROLE
from membrane.errors import (
    CallerRefused,
    MembraneError,
    ProjectRefused,
    RuntimeBuildMismatch,
    RuntimeRoleMismatch,
    SettingsError,
    TokenInvalid,
    TooManyConnections,
    UnknownProject,
)
from membrane.json_types import JSONDict
from membrane.sandbox.paths import protected_part, real_path
from membrane.server.approval import APPROVAL_TIMEOUT
from membrane.server.connection import BufferBudget, Connection, Peer
from membrane.server.framing import MAX_FRAME_BYTES, Encoded, membrane_error_frame
from membrane.server.host import ModelFactory, ProjectHost, project_id_of
from membrane.server.identity import Caller, TokenBook
from membrane.server.methods import dispatch
from membrane.server.owner import ensure_owner_token, same
from membrane.server.transport import (
    SocketLock,
    bind_socket,
    peer_credentials,
    unlink_own_socket,
)
from membrane.tools.view import ToolView
from membrane.workspace import Workspace, require_folder

__all__ = ["Server", "Service", "build_hash"]

#: A background service: runs until the server cancels it.
Service = Callable[["Server"], Coroutine[Any, Any, None]]
#: Replies kept for ``actions/call`` request ids (oldest first out when full).
_REPLIES: Final = 1024
#: Bytes of encoded replies kept for them at most (the default of ``server_reply_cache_bytes``).
_REPLY_BYTES: Final = 64 * 1024 * 1024
#: How long a refused peer's input is drained before its connection is closed.
_REFUSAL_LINGER: Final = 2.0
#: The longest pause between two looks at whether an ``idle_exit`` server is idle.
_IDLE_LOOK: Final = 5.0


@functools.cache
def build_hash() -> str:
    """SHA-256 over this installation's Membrane sources: two runtimes with the same hash run
    the same code (computed once per process)."""
    root = Path(membrane.__file__).parent
    digest = hashlib.sha256()
    for file in sorted(root.rglob("*.py")):
        digest.update(str(file.relative_to(root)).encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


class Replies:
    """Results of finished ``actions/call``s by request id, so a retry gets the same answer
    (each kept as the reply encodes it): the ``size`` most recent, holding at most
    ``max_bytes`` of encoded results between them (the oldest leave first; the newest is
    always kept, whatever its size)."""

    def __init__(self, size: int = _REPLIES, *, max_bytes: int = _REPLY_BYTES) -> None:
        self._size = size
        self._max_bytes = max_bytes
        self._bytes = 0
        self._done: OrderedDict[Hashable, Encoded] = OrderedDict()
        self._pending: dict[Hashable, anyio.Event] = {}

    def held(self) -> tuple[int, int]:
        """``(replies, bytes)`` kept now."""
        return len(self._done), self._bytes

    async def once(self, key: Hashable, act: Callable[[], Awaitable[Encoded]]) -> Encoded:
        while key in self._pending:
            await self._pending[key].wait()
        if key in self._done:
            return self._done[key]
        event = self._pending[key] = anyio.Event()
        try:
            result = await act()
            self._done[key] = result
            self._bytes += len(result)
            while len(self._done) > 1 and (
                len(self._done) > self._size or self._bytes > self._max_bytes
            ):
                self._bytes -= len(self._done.popitem(last=False)[1])
            return result
        finally:
            del self._pending[key]
            event.set()


class Server:
    """The machine runtime. ``owner_role`` is the launch role (``--role`` or the launch
    environment's ``MEMBRANE_ROLE``): the role of the owner's connections that name none;
    ``None`` takes the global settings' ``default_role``, and when that is unset too the
    owner acts with its own authority (no role). A caller that neither proves it is the owner
    nor brings a run's token is ``external`` (``default_role``).
    ``idle_exit``: shut down after that many seconds with no connection open and no run in
    flight (``None``: never). ``approval_timeout``: how many seconds a call an ``ask`` rule holds
    waits for the answering client's ``approval/request`` reply before it is
    ``approval-unavailable``."""

    def __init__(
        self,
        *,
        socket_path: Path,
        models: ModelFactory,
        owner_role: str | None = None,
        services: Sequence[Service] = (),
        drain_seconds: float = 30.0,
        handle_signals: bool = True,
        idle_exit: float | None = None,
        approval_timeout: float = APPROVAL_TIMEOUT,
    ) -> None:
        self.socket_path = socket_path
        settings = load_settings(project=None)
        self.owner_role = owner_role or settings.default_role
        #: What a peer may hold at once (the global settings): connections in all and per
        #: peer process, and ``runs/wait`` calls in flight per connection.
        self.max_connections = settings.server_max_connections
        self.max_connections_per_peer = settings.server_max_connections_per_peer
        self.max_waits_per_connection = settings.server_max_waits_per_connection
        self._per_peer: dict[int, int] = {}
        #: The role of every caller that neither proves it is the owner nor brings a token.
        self.default_role = DEFAULT_ROLE
        #: The role of a tokenless caller of another uid the settings name (``[peer_roles]``).
        self.peer_roles = dict(settings.peer_roles)
        if os.getuid() in self.peer_roles:
            raise SettingsError(
                f"[peer_roles] names uid {os.getuid()}, this runtime's own: its tokenless "
                "callers stay external, and your own commands prove they are the owner with "
                "the owner's token",
                path=None,
                key=f"peer_roles.{os.getuid()}",
                hint="remove that uid from [peer_roles]",
            )
        self.tokens = TokenBook()
        self.replies = Replies(max_bytes=settings.server_reply_cache_bytes)
        #: Bytes of partial request lines all connections hold together.
        self.buffers = BufferBudget(settings.server_max_buffered_bytes)
        self._models = models
        self._extra_services = tuple(services)
        self._drain_seconds = drain_seconds
        self._handle_signals = handle_signals
        self.idle_exit = idle_exit
        self.approval_timeout = approval_timeout
        #: When a connection last opened or closed (``time.monotonic``).
        self._last_seen = time.monotonic()
        self._hosts: dict[str, ProjectHost] = {}
        #: The projects the owner added since the server started: the only ones a caller
        #: other than the owner may open (``add_project``).
        self._registered: set[str] = set()
        #: The owner's proof (``membrane.server.owner``), read or made when the socket is bound.
        self._owner_token: str | None = None
        self._adding = anyio.Lock()
        self._connections: set[Connection] = set()
        self._stop = anyio.Event()
        self._accept_done = anyio.Event()
        #: Set once shutdown has begun and the listening socket is closed (a connect is
        #: refused from then on); the calls in flight are still finishing.
        self.draining = anyio.Event()
        self._hash = build_hash()
        self._hosts_group: TaskGroup | None = None
        self._bound: tuple[socket.socket, SocketLock, int] | None = None

    # -- lifetime -----------------------------------------------------------------------------

    def services(self) -> tuple[Service, ...]:
        """The background services ``serve`` starts: the one place to add one."""
        if self.idle_exit is None:
            return self._extra_services
        return (_exit_when_idle, *self._extra_services)

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Bind, serve until asked to stop, then drain and clean up (see the module docstring).

        Raises ``RuntimeAlreadyRunning`` when another server owns the socket."""
        if self._bound is None:
            self.bind()
        assert self._bound is not None
        sock, lock, inode = self._bound
        try:
            sock.setblocking(False)
            async with anyio.create_task_group() as hosts:
                self._hosts_group = hosts
                async with anyio.create_task_group() as group:
                    accepting = anyio.CancelScope()
                    group.start_soon(self._accept, sock, group, accepting)
                    if self._handle_signals:
                        # Installed before ``started``: a SIGTERM right after the socket
                        # answers drains, never kills.
                        await group.start(self._signals)
                    for service in self.services():
                        group.start_soon(service, self)
                    task_status.started()
                    await self._stop.wait()
                    await self._drain(accepting)
                    group.cancel_scope.cancel()
                for host in list(self._hosts.values()):
                    await host.close()
                self._hosts.clear()
        finally:
            self._bound = None
            unlink_own_socket(self.socket_path, inode)
            sock.close()
            lock.release()

    def bind(self) -> None:
        """Take the socket now (``serve`` does it when not done yet): raises
        ``RuntimeAlreadyRunning`` when another server owns it, outside any task group."""
        self._owner_token = ensure_owner_token()
        lock = SocketLock(self.socket_path)
        sock = bind_socket(self.socket_path, lock, peers=tuple(self.peer_roles))
        self._bound = (sock, lock, self.socket_path.lstat().st_ino)

    def shutdown(self) -> None:
        """Ask the server to drain and stop (what SIGTERM does)."""
        self._stop.set()

    async def _signals(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            task_status.started()
            async for _ in signals:
                self.shutdown()
                return

    async def _drain(self, accepting: anyio.CancelScope) -> None:
        # No new connection: the accept loop ends and closes the listening socket, so a
        # connect is refused at once (the socket file stays until the end, as it is ours).
        accepting.cancel()
        await self._accept_done.wait()
        for conn in self._connections:
            conn.accepting = False
        self.draining.set()
        with anyio.move_on_after(self._drain_seconds):
            for conn in list(self._connections):
                await conn.wait_idle()
        for conn in list(self._connections):
            await conn.close()

    async def _accept(
        self, sock: socket.socket, group: TaskGroup, accepting: anyio.CancelScope
    ) -> None:
        loop = asyncio.get_running_loop()
        try:
            with accepting:
                while True:
                    try:
                        raw, _ = await loop.sock_accept(sock)
                    except OSError:
                        return
                    group.start_soon(self._connection, raw)
        finally:
            sock.close()
            self._accept_done.set()

    async def _connection(self, raw: socket.socket) -> None:
        peer = peer_credentials(raw)
        if peer.uid != os.getuid() and peer.uid not in self.peer_roles:
            refused = CallerRefused(
                "this runtime serves only its own user; the connection is closed", uid=peer.uid
            )
            await _refuse(raw, refused)
            return
        crowded = self._crowded(peer.pid)
        if crowded is not None:
            await _refuse(raw, crowded)
            return
        self._per_peer[peer.pid] = self._per_peer.get(peer.pid, 0) + 1
        conn = Connection(
            dispatch=partial(dispatch, self),
            peer_pid=peer.pid,
            peer_uid=peer.uid,
            buffers=self.buffers,
        )
        try:
            try:
                await asyncio.get_running_loop().connect_accepted_socket(lambda: conn, raw)
            except OSError:
                raw.close()
                return
            self._connections.add(conn)
            self._last_seen = time.monotonic()
            try:
                await conn.serve()
            finally:
                self._connections.discard(conn)
                self._last_seen = time.monotonic()
        finally:
            left = self._per_peer.pop(peer.pid) - 1
            if left:
                self._per_peer[peer.pid] = left

    def _crowded(self, pid: int) -> TooManyConnections | None:
        """The refusal of one more connection from peer process ``pid``, if it is one too
        many (``server_max_connections``, ``server_max_connections_per_peer``)."""
        if sum(self._per_peer.values()) >= self.max_connections:
            limit, scope = self.max_connections, "total"
        elif self._per_peer.get(pid, 0) >= self.max_connections_per_peer:
            limit, scope = self.max_connections_per_peer, "peer"
        else:
            return None
        where = "in all" if scope == "total" else f"from process {pid}"
        return TooManyConnections(
            f"this runtime holds {limit} connections {where}, as many as its settings allow "
            f"(server_max_connections{'_per_peer' if scope == 'peer' else ''}); the "
            "connection is closed: close one and connect again",
            limit=limit,
            scope=scope,
        )

    # -- identity -----------------------------------------------------------------------------

    def runtime_info(self, caller: Caller | None = None) -> JSONDict:
        """The runtime contract (seed 002). ``projectRoot`` is the root of the project that
        ``caller`` is bound to (a run's token), else ``None``: one runtime serves every
        project of the machine, and each ``projects/add`` reply names its root."""
        host = (
            None
            if caller is None or caller.project_id is None
            else self._hosts.get(caller.project_id)
        )
        return {
            "version": membrane.__version__,
            "buildHash": self._hash,
            "defaultRole": self.default_role,
            "ownerRole": self.owner_role,
            "projectRoot": None if host is None else str(host.workspace.project),
            "pid": os.getpid(),
            "socketPath": str(self.socket_path),
        }

    def identify(
        self, identity: JSONDict, client: JSONDict, *, peer_uid: int | None = None
    ) -> Caller:
        """The caller an ``initialize`` establishes (``identity.module``: ``server.identity``).
        ``peer_uid``: the connection's (``None``: this process's own)."""
        own = peer_uid is None or peer_uid == os.getuid()
        claimed: JSONDict = {"identity": identity, "clientInfo": client}
        token = identity.get("token")
        if token is not None:
            project_id, run_id = self.tokens.open(token)
            host = self._hosts.get(project_id)
            if host is None:
                raise TokenInvalid("the project of this MEMBRANE_TOKEN is not served here")
            return host.bind(run_id, claimed)
        session = identity.get("sessionId")
        session_id = session if isinstance(session, str) and session else None
        if (
            own
            and self._owner_token is not None
            and same(identity.get("ownerToken"), self._owner_token)
        ):
            # The owner may name the role it acts under (``--role``, its MEMBRANE_ROLE).
            asked = identity.get("role")
            return Caller(
                role=asked if isinstance(asked, str) and asked else self.owner_role,
                session_id=session_id,
                claimed=_without_secrets(claimed),
                owner=True,
            )
        # Another uid is let in only when the settings name it, and gets the role they give it.
        role = self.default_role
        if peer_uid is not None and not own:
            role = self.peer_roles.get(peer_uid, self.default_role)
        return Caller(role=role, session_id=session_id, claimed=_without_secrets(claimed))

    def check_live(self, caller: Caller) -> None:
        """Refuse (``token-invalid``) a token caller whose run has ended or whose project is
        no longer served."""
        host = self._hosts.get(caller.project_id or "")
        if host is None:
            raise TokenInvalid("the project of this MEMBRANE_TOKEN is no longer served here")
        host.check_live(caller)

    def in_flight(self) -> int:
        """The requests running now, over every connection."""
        return sum(conn.in_flight for conn in self._connections)

    def busy(self) -> bool:
        """Whether any run is live in any project."""
        return any(host.busy() for host in self._hosts.values())

    def idle_since(self) -> float | None:
        """Since when (``time.monotonic``) no connection is open and no run is in flight;
        ``None`` while either holds."""
        if self._connections or self.busy():
            return None
        return self._last_seen

    def stop_for_build(self, caller: Caller, build: str) -> None:
        """Shut down so that a launcher can start a runtime of its own ``build`` (its
        ``buildHash``): the owner's call only (``caller-refused``), a no-op for the same build,
        and refused while runs are in flight (``runtime-build-mismatch``)."""
        if not caller.owner:
            raise CallerRefused("only the owner stops the runtime")
        if build == self._hash:
            return
        if self.busy():
            raise RuntimeBuildMismatch(
                f"the runtime that answers (pid {os.getpid()}) runs another build of Membrane "
                f"({membrane.__version__}, build {self._hash[:12]}) than this command (build "
                f"{build[:12]}), and runs are in flight, so it is not restarted; wait for them, "
                "or stop that runtime, and run the command again",
                running=self._hash,
                requested=build,
                version=membrane.__version__,
            )
        self.shutdown()

    def stop_for_role(self, caller: Caller, requested: str) -> None:
        """Shut down so that a launcher can start a runtime under ``requested``: the owner's
        call only (``caller-refused``), and refused while runs are in flight
        (``runtime-role-mismatch``)."""
        if not caller.owner:
            raise CallerRefused("only the owner stops the runtime")
        if self.busy():
            raise RuntimeRoleMismatch(
                f"the runtime's owner role is {self.owner_role!r}, not {requested!r}, and runs "
                "are in flight, so it is not restarted; wait for them or stop it first",
                running=self.owner_role,
                requested=requested,
            )
        self.shutdown()

    # -- projects -----------------------------------------------------------------------------

    async def add_project(self, root: Path, *, caller: Caller) -> ProjectHost:
        """Open the project at ``root`` (or return the one served). Opening a project imports
        its extensions, so only the owner opens one it has not opened before: a run's token
        reaches only its own run's project, and any other caller only a project the owner
        added since the server started (``project-refused``)."""
        folder = require_folder("root", root)
        project_id = project_id_of(folder)
        if caller.run_id is not None:
            if caller.project_id != project_id:
                raise ProjectRefused(
                    "a run's token opens no project: it reaches only its own run's project",
                    reason="token",
                    root=str(folder),
                )
        elif not caller.owner and project_id not in self._registered:
            raise ProjectRefused(
                f"{folder} is not a project the owner opened on this runtime; only the owner "
                "(your own `membrane` command, which presents $MEMBRANE_HOME/owner.token) opens "
                "a project, since opening one runs its extensions",
                reason="not-registered",
                root=str(folder),
            )
        async with self._adding:
            host = self._hosts.get(project_id)
            if host is not None:
                if caller.owner:
                    self._registered.add(project_id)
                return host
            workspace = await anyio.to_thread.run_sync(
                partial(Workspace.open, folder, untrusted=self.untrusted)
            )
            host = ProjectHost(
                workspace,
                tokens=self.tokens,
                models=self._models,
                child_env={"MEMBRANE_SOCKET": str(self.socket_path)},
                untrusted=self.untrusted,
            )
            assert self._hosts_group is not None
            await self._hosts_group.start(host.run)
            self._hosts[project_id] = host
            if caller.owner:
                self._registered.add(project_id)
            return host

    def untrusted(self, path: Path) -> str | None:
        """Why ``path`` lies where a child may write it, or ``None``: inside the checkout of a
        live run of any project (outside the control paths at its top, which no child writes),
        or inside a run's private temporary folder (``membrane-*`` in the temporary folder).
        No extension file there is imported and no MCP server command there is started."""
        real = real_path(path)
        for host in list(self._hosts.values()):
            for checkout in host.checkouts():
                root = real_path(checkout)
                if (real == root or root in real.parents) and protected_part(
                    real, root, agent=None
                ) is None:
                    return f"lies in the checkout of a live run ({root}), which it may write"
        tmp = real_path(Path(tempfile.gettempdir()))
        if tmp in real.parents:
            first = real.relative_to(tmp).parts[0]
            if first.startswith("membrane-"):
                return f"lies in a run's private temporary folder ({tmp / first})"
        return None

    async def remove_project(self, project_id: str, *, caller: Caller) -> None:
        if not caller.owner:
            raise CallerRefused("only the owner removes a project", project_id=project_id[:80])
        host = self.project(project_id, caller)
        del self._hosts[project_id]
        await host.close()

    def project(self, project_id: str, caller: Caller) -> ProjectHost:
        host = self._hosts.get(project_id)
        if host is None or (caller.project_id is not None and caller.project_id != project_id):
            raise UnknownProject(
                f"no project {project_id[:80]!r} is served here; add it with projects/add",
                project_id=project_id[:80],
            )
        return host

    def projects(self, caller: Caller) -> list[ProjectHost]:
        return [
            host
            for host in self._hosts.values()
            if caller.project_id is None or caller.project_id == host.project_id
        ]

    def watch_actions(
        self, conn: Peer, host: ProjectHost, caller: Caller, names: tuple[str, ...]
    ) -> None:
        """Send ``actions/list_changed`` to ``conn`` whenever its view of ``host`` changes."""
        watched = conn.state.setdefault("watched", set())
        assert isinstance(watched, set)
        if host.project_id in watched:
            return
        watched.add(host.project_id)
        conn.group.start_soon(_watch, conn, host, caller, names)


def _without_secrets(claimed: JSONDict) -> JSONDict:
    """What a client claimed, minus the owner's token (never kept)."""
    identity = claimed.get("identity")
    if isinstance(identity, dict) and "ownerToken" in identity:
        identity = {key: value for key, value in identity.items() if key != "ownerToken"}
        return {**claimed, "identity": identity}
    return claimed


async def _refuse(raw: socket.socket, refused: MembraneError) -> None:
    """Answer a peer with ``refused`` (another user's: ``caller-refused``; one connection too
    many: ``too-many-connections``) and close its connection."""
    try:
        reader, writer = await asyncio.open_unix_connection(sock=raw, limit=MAX_FRAME_BYTES)
    except OSError:
        raw.close()
        return
    try:
        writer.write(membrane_error_frame(None, refused))
        writer.write_eof()
        await writer.drain()
        # What the peer already sent is read and dropped, so that closing does not
        # reset the connection before the refusal is read.
        with anyio.move_on_after(_REFUSAL_LINGER):
            while await reader.read(65536):
                pass
    except OSError:
        pass
    finally:
        writer.close()


async def _exit_when_idle(server: Server) -> None:
    """The ``idle_exit`` service: shut the server down once it has been idle that long."""
    limit = server.idle_exit
    assert limit is not None
    look = min(max(limit / 4, 0.05), _IDLE_LOOK)
    busy_until = time.monotonic()
    while True:
        await anyio.sleep(look)
        since = server.idle_since()
        if since is None:
            busy_until = time.monotonic()
            continue
        if time.monotonic() - max(since, busy_until) >= limit:
            server.shutdown()
            return


async def _watch(conn: Peer, host: ProjectHost, caller: Caller, names: tuple[str, ...]) -> None:
    while True:
        await host.changed()
        try:
            view: ToolView = host.view(caller)
        except Exception:
            return  # the caller's run ended: nothing more to watch
        if view.names != names:
            names = view.names
            await conn.notify("actions/list_changed", {"projectId": host.project_id})
