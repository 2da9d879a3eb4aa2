"""``McpServer``: one mounted MCP server, its connection and its live tools in the registry.

A server is an extension named after it: its tools are global tools named
``mcp__SERVER__TOOL`` with origin ``mcp:SERVER``, flagged ``deferred`` (known from
``tools/list``, the process behind them started on demand). Nothing starts until
``ensure()`` (a child that needs the server, at its ``session_start``) or the first call.

Once started, one supervisor task owns the connection (the SDK's transport and
``ClientSession`` are entered and left in that task, as anyio requires). It keeps the
registry in step with the server: the tools are listed at start and again on every
``notifications/tools/list_changed`` (a call that saw the notice returns only after the
registry has it, so the caller's next view is current). When the connection is lost (the
process died, the stream closed, a timed-out call whose ping also failed) the tools leave the
registry, calls in flight fail with ``mcp-server-unavailable``, and the supervisor starts the
server again after a backoff that doubles on every failure in a row. Nothing of this reaches
the runtime or a child as an exception other than that error.

The server's stderr goes to ``log_path`` (appended), never into a prompt.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

import anyio
from anyio.abc import TaskGroup

from membrane.config.values import McpServerSpec
from membrane.errors import McpServerUnavailable, McpToolError, ToolNotVisible, ToolSpecError
from membrane.json_types import JSONObject
from membrane.mcp.cache import CachedTool, ToolListCache
from membrane.mcp.results import map_result
from membrane.mcp.sdk import require
from membrane.tools.registry import ToolRegistry, check_tool
from membrane.tools.spec import Tool, ToolContext, ToolOutput

if TYPE_CHECKING:
    from mcp import types

__all__ = ["McpServer", "ServerState", "mcp_tool_name"]

ServerState = Literal["idle", "starting", "ready", "backoff", "failed", "stopped"]
#: Restarts in a row before the supervisor gives up (a later ``ensure()`` tries again).
MAX_RESTARTS = 5
#: A connection that lived this long resets the backoff.
HEALTHY_SECONDS = 30.0
#: Bound on the ping that decides whether a timed-out server is hung.
PING_SECONDS = 5.0


def mcp_tool_name(server: str, tool: str) -> str:
    return f"mcp__{server}__{tool}"


class McpServer:
    """One server of ``[mcp_servers.NAME]``, mounted on ``registry``.

    ``group`` owns the supervisor task (the hub's task group); ``backoff`` is the first delay
    before a restart, in seconds (doubling up to ``max_backoff``). ``cache`` keeps the server's
    last ``tools/list`` (see ``membrane.mcp.cache``): ``load_cached()`` registers those tools
    before the server first starts.
    """

    def __init__(
        self,
        spec: McpServerSpec,
        registry: ToolRegistry,
        group: TaskGroup,
        *,
        log_path: Path | None = None,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        cache: ToolListCache | None = None,
        untrusted: Callable[[Path], str | None] | None = None,
    ) -> None:
        self.spec = spec
        #: Why a file lies where someone else may write it: a command or script it names for
        #: a stdio server is never run (``code_files``).
        self._untrusted = untrusted
        self.name = spec.name
        self.origin = f"mcp:{spec.name}"
        self.registry = registry
        self.log_path = log_path
        self.state: ServerState = "idle"
        #: Why the server is not ready (the last failure), or ``None``.
        self.reason: str | None = None
        #: Connections made so far (1 after the first start; more after restarts).
        self.starts = 0
        self._group = group
        self._backoff = backoff
        self._max_backoff = max_backoff
        self._changed = anyio.Event()
        self._session: Any = None
        self._connection: anyio.CancelScope | None = None
        self._cache = cache
        #: The registered tools come from the cache, not yet from the server's own listing.
        self.cached = False
        self._listed: dict[str, CachedTool] = {}
        #: ``tools/list_changed`` notices counted, and the count the registry reflects.
        self._notices = 0
        self._applied = -1
        self._dropped: str | None = None
        self._refresh_lock = anyio.Lock()
        self._on_change: list[Callable[[], None]] = []

    # -- state --------------------------------------------------------------------------------

    def tool_names(self) -> frozenset[str]:
        """The server's tools in the registry now (``mcp__NAME__TOOL``)."""
        return self.registry.names_of_origin(self.origin)

    def _now(self) -> ServerState:
        """The state as of now (other tasks move it between awaits)."""
        return self.state

    def _set(self, state: ServerState, reason: str | None = None) -> None:
        self.state = state
        self.reason = reason
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    def _unavailable(self, why: str) -> McpServerUnavailable:
        return McpServerUnavailable(
            f"MCP server {self.name!r} is unavailable: {why}", server=self.name, reason=why
        )

    # -- starting -----------------------------------------------------------------------------

    async def ensure(self) -> None:
        """Start the server if it is not running and wait until its tools are registered.

        ``McpServerUnavailable`` when it cannot start within ``startup_timeout``, or while it
        waits out the backoff after a crash.
        """
        if self.state in ("idle", "failed"):
            self._set("starting")
            self._group.start_soon(self._supervise)
        with anyio.move_on_after(self.spec.startup_timeout + PING_SECONDS):
            while self.state == "starting":
                await self._changed.wait()
        if self.state == "ready":
            return
        if self.state == "starting":
            raise self._unavailable(f"it did not start within {self.spec.startup_timeout:g}s")
        raise self._unavailable(self.reason or self.state)

    async def stop(self) -> None:
        """Stop the server for good (its tools leave the registry; calls fail)."""
        self._set("stopped")
        if self._connection is not None:
            self._connection.cancel()
        self._drop_tools()

    async def _supervise(self) -> None:
        failures = 0
        while self.state == "starting":
            began = anyio.current_time()
            try:
                await self._connect()
                reason = "the server closed the connection"
            except McpServerUnavailable as exc:
                reason = str(exc.data.get("reason") or exc.message)
            except Exception as exc:  # a transport's or the server's own failure
                reason = _describe(exc)
            self._session = None
            self._drop_tools()
            if self._now() == "stopped":
                return
            if self._dropped is None:  # ``_lose`` logged the losses it decided on
                self._log(f"membrane: MCP server {self.name!r} lost: {reason}")
            failures = 1 if anyio.current_time() - began >= HEALTHY_SECONDS else failures + 1
            if failures > MAX_RESTARTS:
                self._set("failed", f"{reason} (gave up after {MAX_RESTARTS} restarts)")
                return
            delay = min(self._backoff * 2 ** (failures - 1), self._max_backoff)
            self._set("backoff", f"{reason}; restarting in {delay:g}s")
            await anyio.sleep(delay)
            if self._now() != "backoff":
                return
            self._set("starting")

    async def _connect(self) -> None:
        """One connection: handshake, tools, then serve until the stream ends or is cancelled.

        One cancel scope spans it all (anyio wants scopes left in the order entered): its
        deadline is the startup timeout until the tools are registered, then none.
        """
        mcp = require()
        lost = anyio.Event()
        self._dropped = None
        ready = False
        deadline = anyio.current_time() + self.spec.startup_timeout
        with anyio.CancelScope(deadline=deadline) as scope:
            self._connection = scope
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport(stack))
                relay_in, relay_out = anyio.create_memory_object_stream[Any](16)
                tasks = await stack.enter_async_context(anyio.create_task_group())
                tasks.start_soon(self._relay, read, relay_in, lost)
                session = await stack.enter_async_context(
                    mcp.ClientSession(
                        relay_out,
                        write,
                        client_info=mcp.types.Implementation(name="membrane", version="0"),
                    )
                )
                await session.initialize()
                self._session = session
                self.starts += 1
                await self._refresh(force=True)
                scope.deadline = math.inf
                ready = True
                self._set("ready")
                await lost.wait()
                tasks.cancel_scope.cancel()
        self._connection = None
        if self._dropped is not None:
            raise self._unavailable(self._dropped)
        if not ready and scope.cancelled_caught:
            raise self._unavailable(f"it did not start within {self.spec.startup_timeout:g}s")

    async def _relay(self, source: Any, sink: Any, lost: anyio.Event) -> None:
        """Forward the transport's messages to the session, in wire order; ``lost`` is set
        when they end. A ``tools/list_changed`` notice is counted here, before the session
        sees anything after it, so the response to the call that caused it finds it counted."""
        try:
            async with sink:
                async for item in source:
                    method = getattr(getattr(item, "message", None), "method", None)
                    if method == "notifications/tools/list_changed":
                        self._notices += 1
                        self._group.start_soon(self._refresh_quietly)
                    await sink.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            pass
        finally:
            lost.set()

    @contextlib.asynccontextmanager
    async def _transport(self, stack: AsyncExitStack) -> AsyncIterator[tuple[Any, Any]]:
        spec = self.spec
        if spec.url is not None:
            http = require("mcp.client.streamable_http")
            client = None
            if spec.headers:
                httpx = require("httpx2", package="httpx2")
                client = await stack.enter_async_context(
                    httpx.AsyncClient(headers=dict(spec.headers))
                )
            async with http.streamable_http_client(spec.url, http_client=client) as streams:
                yield streams[0], streams[1]
            return
        mcp = require()
        assert spec.command is not None
        if self._untrusted is not None:
            for file in code_files(spec):
                why = self._untrusted(file)
                if why is not None:
                    raise self._unavailable(f"it is not started: {file} {why}")
        params = mcp.StdioServerParameters(
            command=spec.command, args=list(spec.args), env=dict(spec.env) or None, cwd=spec.cwd
        )
        log = self._open_log(stack)
        async with mcp.stdio_client(params, errlog=log) as streams:
            yield streams[0], streams[1]

    def _open_log(self, stack: AsyncExitStack) -> IO[str]:
        if self.log_path is None:
            return stack.enter_context(open("/dev/null", "w", encoding="utf-8"))
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        return stack.enter_context(self.log_path.open("a", encoding="utf-8"))

    def _log(self, line: str) -> None:
        if self.log_path is None:
            return
        with contextlib.suppress(OSError):
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with self.log_path.open("a", encoding="utf-8") as log:
                log.write(line + "\n")

    # -- tools --------------------------------------------------------------------------------

    def load_cached(self) -> bool:
        """Register the tools the cache has for this server, before it first starts; whether
        there were any. The server's own listing at its start replaces them."""
        if self._cache is None or self.state != "idle" or self.tool_names():
            return False
        listed = self._cache.read(self.spec)
        if not listed:
            return False
        self._apply(list(listed), record=False)
        self.cached = bool(self.tool_names())
        return self.cached

    async def _refresh_quietly(self) -> None:
        with contextlib.suppress(Exception):
            await self._refresh()

    async def _refresh(self, *, force: bool = False) -> None:
        """List the tools and bring the registry in line. Coalesced: a listing that starts
        after the last notice was counted answers for every notice before it."""
        async with self._refresh_lock:
            session = self._session
            if session is None or (not force and self._applied >= self._notices):
                return
            seen = self._notices
            listed: list[CachedTool] = []
            cursor: str | None = None
            while True:
                params = None
                if cursor is not None:
                    params = require("mcp.types").PaginatedRequestParams(cursor=cursor)
                page = await session.list_tools(params=params)
                listed.extend(_entry(tool) for tool in page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
            if self._session is session:
                self._apply(listed)
                self._applied = max(self._applied, seen)

    def _apply(self, listed: list[CachedTool], *, record: bool = True) -> None:
        """Bring the registry in line with ``listed``; ``record``: it is the server's own
        listing, which the cache then keeps."""
        wanted: dict[str, tuple[Tool, CachedTool]] = {}
        for entry in listed:
            tool = self._tool(entry)
            if tool is not None:
                wanted[tool.name] = (tool, entry)
        for name in sorted(self.tool_names() - wanted.keys()):
            self.registry.remove(name)
            self._listed.pop(name, None)
        for name, (tool, shape) in sorted(wanted.items()):
            if name in self.tool_names() and self._listed.get(name) == shape:
                continue
            existing = self.registry.get(name)
            if existing is not None and existing.origin != self.origin:
                self._log(f"membrane: {name!r} is taken by {existing.origin}; not registered")
                continue
            self.registry.register(tool, replace=existing is not None)
            self._listed[name] = shape
        if record:
            self.cached = False
            if self._cache is not None:
                self._cache.write(self.spec, [entry for _, entry in wanted.values()])
        for listener in list(self._on_change):
            listener()

    def _tool(self, entry: CachedTool) -> Tool | None:
        remote = entry.name
        name = mcp_tool_name(self.name, remote)

        async def handler(arguments: JSONObject, context: ToolContext) -> ToolOutput:
            return await self.call(remote, arguments)

        tool = Tool(
            name=name,
            description=entry.description,
            input_schema=dict(entry.input_schema),
            handler=handler,
            origin=self.origin,
            mutating=not entry.read_only,
            deferred=True,
        )
        try:
            return check_tool(tool)
        except ToolSpecError as exc:
            self._log(f"membrane: tool {remote!r} skipped: {exc.message}")
            return None

    def _drop_tools(self) -> None:
        self.cached = False
        names = self.tool_names()
        for name in sorted(names):
            self.registry.remove(name)
        self._listed.clear()
        if names:
            for listener in list(self._on_change):
                listener()

    def on_change(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` after the server's tools in the registry changed."""
        self._on_change.append(listener)
        return lambda: self._on_change.remove(listener) if listener in self._on_change else None

    # -- calls --------------------------------------------------------------------------------

    async def call(self, tool: str, arguments: Mapping[str, Any]) -> ToolOutput:
        """Call the server's tool ``tool`` (its own name) and map the result.

        ``McpServerUnavailable`` when the server is down or does not answer within
        ``timeout``; ``McpToolError`` for an ``isError`` result or a JSON-RPC error.
        """
        await self.ensure()
        session = self._session
        if session is None:
            raise self._unavailable(self.reason or "it is not connected")
        name = mcp_tool_name(self.name, tool)
        if name not in self.tool_names():
            # A cached name the server no longer lists once it started.
            raise ToolNotVisible(f"no tool named {name!r} is visible to this agent", name=name)
        timeout = self.spec.timeout
        try:
            with anyio.fail_after(timeout + 1 if math.isfinite(timeout) else None):
                result = await session.call_tool(
                    tool, dict(arguments), read_timeout_seconds=timeout
                )
        except TimeoutError:
            await self._check_alive(session)
            raise self._unavailable(f"no answer within {timeout:g}s") from None
        except Exception as exc:
            code = getattr(exc, "code", None)
            if self._session is not session or code == -32000:  # CONNECTION_CLOSED
                why = f"the connection was lost ({_describe(exc)})"
                self._lose(session, why)
                raise self._unavailable(why) from exc
            if code == -32001:  # REQUEST_TIMEOUT
                await self._check_alive(session)
                raise self._unavailable(f"no answer within {timeout:g}s") from exc
            raise McpToolError(
                f"MCP server {self.name!r} refused the call to {tool!r}: {_describe(exc)}",
                server=self.name,
                tool=tool,
            ) from exc
        if self._applied < self._notices:
            await self._refresh_quietly()
        return map_result(self.name, tool, result)

    async def _check_alive(self, session: Any) -> None:
        """After a timed-out call: a server that also misses a ping is hung; drop it."""
        try:
            with anyio.fail_after(min(PING_SECONDS, self.spec.timeout)):
                await session.send_ping()
        except Exception:
            self._lose(session, f"it stopped answering (no answer within {self.spec.timeout:g}s)")

    def _lose(self, session: Any, why: str) -> None:
        """Drop the connection of ``session`` now (if it is still the current one): its tools
        leave the registry at once, and the supervisor restarts the server after its backoff."""
        if self._session is not session or session is None:
            return
        self._session = None
        self._dropped = why
        self._log(f"membrane: MCP server {self.name!r} lost: {why}")
        self._drop_tools()
        if self._connection is not None:
            self._connection.cancel()

    def __repr__(self) -> str:
        return f"McpServer({self.name!r}, state={self.state!r}, tools={len(self.tool_names())})"


def _entry(listed: types.Tool) -> CachedTool:
    """One entry of the SDK's ``tools/list`` answer."""
    annotations = listed.annotations
    return CachedTool(
        name=listed.name,
        description=listed.description or listed.title or "",
        input_schema=dict(listed.input_schema or {"type": "object"}),
        read_only=annotations is not None and annotations.read_only_hint is True,
    )


def code_files(spec: McpServerSpec) -> list[Path]:
    """The files a stdio server's entry runs: its command as ``PATH`` finds it, and each
    argument that names an existing file (relative to the entry's ``cwd``)."""
    assert spec.command is not None
    base = Path(spec.cwd) if spec.cwd else Path.cwd()
    path = (spec.env or {}).get("PATH") or os.environ.get("PATH")
    found = shutil.which(spec.command, path=path) if os.sep not in spec.command else None
    files = [Path(found) if found else base / spec.command]
    for arg in spec.args:
        candidate = base / arg
        try:
            if candidate.is_file():
                files.append(candidate)
        except OSError:
            continue
    return files


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
