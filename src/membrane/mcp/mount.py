"""``McpServers``: the MCP servers of one deployment, mounted on its registry as extensions.

Each ``[mcp_servers.NAME]`` entry is an extension named ``NAME`` whose tools are
``mcp__NAME__TOOL`` (origin ``mcp:NAME``), so the resolver's selection, exclusion,
isolation, inherit and explain rules apply to them unchanged. A server starts lazily: when a
child that asks for it (a ``mcp__NAME__...`` or ``ext:NAME`` selector, or ``extensions:``
naming it) reaches ``session_start``, or at the first call of one of its tools. One process
serves every child that selected it; ``async with McpServers(...)`` owns them all and stops
them on exit.

``hooks()`` gives the ``session_start`` handlers to bind next to the extensions' own, so the
in-process provider starts a child's servers before its first model request (seed 003: tools
an extension registers at ``session_start`` are offered on turn 1). A server that cannot
start only leaves its tools out: the child runs on without them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from types import TracebackType

import anyio
from anyio.abc import TaskGroup

from membrane.agents.definition import AgentDefinition
from membrane.config.values import McpServerSpec
from membrane.errors import InvalidRequest, McpServerUnavailable
from membrane.extensions.hooks import ExtensionHooks, SessionStart
from membrane.mcp.cache import ToolListCache
from membrane.mcp.client import McpServer
from membrane.mcp.named import servers_named
from membrane.tools.registry import ToolRegistry
from membrane.workspace import Workspace

__all__ = ["McpServers", "servers_named"]


class McpServers:
    """The mounted servers, by name. ``log_dir`` receives one ``NAME.log`` (stderr) each;
    ``cache_dir`` keeps each server's last tool list, registered at mount so that the names
    are known before a server first starts (``membrane.mcp.cache``)."""

    def __init__(
        self,
        specs: Mapping[str, McpServerSpec],
        registry: ToolRegistry,
        *,
        log_dir: Path | None = None,
        backoff: float = 0.5,
        cache_dir: Path | None = None,
        untrusted: Callable[[Path], str | None] | None = None,
    ) -> None:
        if not isinstance(registry, ToolRegistry):
            raise InvalidRequest("registry must be a ToolRegistry", field="registry")
        self.registry = registry
        self.log_dir = log_dir
        self._specs = dict(specs)
        self._backoff = backoff
        self._cache = None if cache_dir is None else ToolListCache(cache_dir)
        self._servers: dict[str, McpServer] = {}
        self._group: TaskGroup | None = None
        self._untrusted = untrusted

    @classmethod
    def of(
        cls, workspace: Workspace, *, untrusted: Callable[[Path], str | None] | None = None
    ) -> McpServers:
        """The servers of ``workspace``'s settings on its registry; stderr logs go to
        ``<home>/logs/mcp/NAME.log``, tool lists to ``<home>/cache/mcp/``. ``untrusted`` says
        why a file lies where someone else may write it: a stdio server whose command or
        script it names a reason for is not started (``mcp-server-unavailable``)."""
        return cls(
            workspace.settings.mcp_servers,
            workspace.registry,
            log_dir=workspace.home / "logs" / "mcp",
            cache_dir=workspace.home / "cache" / "mcp",
            untrusted=untrusted,
        )

    async def __aenter__(self) -> McpServers:
        if self._group is not None:
            raise InvalidRequest("McpServers opens once; build a new one to mount again")
        group = anyio.create_task_group()
        await group.__aenter__()
        self._group = group
        for spec in self._specs.values():
            self._mount(spec)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        group = self._group
        if group is None:
            return None
        with anyio.CancelScope(shield=True):
            for server in self._servers.values():
                await server.stop()
        group.cancel_scope.cancel()
        # The body's own exception propagates as it is; the group only holds the supervisors.
        await group.__aexit__(None, None, None)
        return None

    def _mount(self, spec: McpServerSpec) -> McpServer:
        assert self._group is not None
        log = None if self.log_dir is None else self.log_dir / f"{spec.name}.log"
        server = McpServer(
            spec,
            self.registry,
            self._group,
            log_path=log,
            backoff=self._backoff,
            cache=self._cache,
            untrusted=self._untrusted,
        )
        self._servers[spec.name] = server
        server.load_cached()
        return server

    def add(self, spec: McpServerSpec) -> McpServer:
        """Mount one more server (a definition's inline entry); the same name twice with a
        different entry is ``InvalidRequest``."""
        existing = self._servers.get(spec.name)
        if existing is not None:
            if existing.spec != spec:
                raise InvalidRequest(
                    f"MCP server {spec.name!r} is already mounted with another entry; "
                    "give the inline server its own name",
                    field="mcp_servers",
                )
            return existing
        if self._group is None:
            raise InvalidRequest("McpServers is not open: use 'async with McpServers(...)'")
        self._specs[spec.name] = spec
        return self._mount(spec)

    @property
    def servers(self) -> Mapping[str, McpServer]:
        return dict(self._servers)

    def get(self, name: str) -> McpServer | None:
        return self._servers.get(name)

    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._specs))

    def prepare(self, definition: AgentDefinition) -> list[str]:
        """Mount the definition's inline ``mcp_servers`` entries, and return the names of the
        mounted servers it asks for (``servers_named``), sorted."""
        if isinstance(definition.mcp_servers, Mapping) and definition.isolated is not True:
            for spec in definition.mcp_servers.values():
                if spec is not None:
                    self.add(spec)
        return sorted(n for n in servers_named(definition) if n in self._servers)

    async def ensure(self, names: Iterable[str]) -> dict[str, str]:
        """Start the named servers (unknown names are skipped) side by side; returns why each
        one that could not start did not, by name."""
        wanted = [self._servers[n] for n in dict.fromkeys(names) if n in self._servers]
        problems: dict[str, str] = {}

        async def one(server: McpServer) -> None:
            try:
                await server.ensure()
            except McpServerUnavailable as exc:
                problems[server.name] = exc.message

        async with anyio.create_task_group() as group:
            for server in wanted:
                group.start_soon(one, server)
        return problems

    def hooks(
        self,
        definitions: Callable[[], Mapping[str, AgentDefinition]],
        *,
        into: ExtensionHooks | None = None,
    ) -> ExtensionHooks:
        """``session_start`` handlers, one per server, bound as extension ``NAME``: each
        starts its server when the starting agent's definition (looked up by name in
        ``definitions()``) asks for it. ``into``: add them to these hooks."""
        hooks = into if into is not None else ExtensionHooks()
        inline = {
            name
            for definition in definitions().values()
            if isinstance(definition.mcp_servers, Mapping)
            for name, spec in definition.mcp_servers.items()
            if spec is not None
        }
        for name in sorted(set(self._servers) | inline):
            hooks.add(name, "session_start", self._starter(name, definitions))
        return hooks

    def _starter(
        self, name: str, definitions: Callable[[], Mapping[str, AgentDefinition]]
    ) -> Callable[[SessionStart], object]:
        async def start(event: SessionStart) -> None:
            definition = definitions().get(event.agent)
            if definition is None or name not in self.prepare(definition):
                return
            # Unavailable leaves the tools out; the child runs on (logged by the server).
            await self.ensure([name])

        return start

    def describe(self) -> list[dict[str, object]]:
        """One row per server: name, transport, state, reason, tools, and whether the tools come
        from the cache (for ``membrane mcp list``)."""
        rows: list[dict[str, object]] = []
        for name in self.names():
            server = self._servers.get(name)
            spec = self._specs[name]
            rows.append(
                {
                    "name": name,
                    "transport": spec.transport,
                    "target": spec.url if spec.url is not None else " ".join(_command(spec)),
                    "state": server.state if server is not None else "idle",
                    "reason": None if server is None else server.reason,
                    "tools": sorted(server.tool_names()) if server is not None else [],
                    "cached": server is not None and server.cached,
                }
            )
        return rows


def _command(spec: McpServerSpec) -> Collection[str]:
    return [spec.command or "", *spec.args]
