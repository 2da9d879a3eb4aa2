"""An MCP server's settings: one ``[mcp_servers.NAME]`` table of ``config.toml``, or a
definition's inline entry, checked into a ``McpServerSpec``. Imported by what reads one."""

from __future__ import annotations

import re
from types import MappingProxyType

from pydantic import ValidationError

from membrane.config.schema import McpServerTable, first_problem
from membrane.config.values import McpServerSpec
from membrane.errors import SettingsError

__all__ = ["mcp_server_spec"]


#: A server name becomes the middle of ``mcp__NAME__TOOL``: no ``__`` inside, no edge ``_``.
_MCP_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_))*(?<!_)")


def mcp_server_spec(name: str, raw: object, *, path: str, key: str) -> McpServerSpec:
    """``raw`` (one ``[mcp_servers.NAME]`` table, or a definition's inline entry) checked;
    ``SettingsError`` naming ``path`` and ``key`` otherwise."""

    def bad(problem: str, hint: str) -> SettingsError:
        return SettingsError(f"{path}: `{key}` {problem}", path=path, key=key, hint=hint)

    if not isinstance(name, str) or _MCP_NAME.fullmatch(name) is None:
        raise bad(
            f"names the MCP server {name!r}, which is not a usable name",
            "use letters, digits, '-' and single '_' (its tools are named mcp__NAME__TOOL)",
        )
    try:
        server = McpServerTable.model_validate(raw)
    except ValidationError as exc:
        problem = first_problem(exc)
        where = ".".join(str(part) for part in problem.loc)
        raise bad(
            f"{('at ' + where + ': ') if where else ''}{problem.message}",
            "an MCP server has `command` (with `args`, `env`, `cwd`) or `url`, and optional "
            "`headers`, `timeout`, `startup_timeout`",
        ) from None
    if (server.command is None) == (server.url is None):
        raise bad(
            "needs exactly one of `command` (a stdio server) or `url` (streamable HTTP)",
            'write command = "..." with args = [...], or url = "http://127.0.0.1:PORT/mcp"',
        )
    if server.url is not None and not server.url.startswith(("http://", "https://")):
        raise bad(f"has url {server.url!r}, which is not http(s)", "use an http:// or https:// url")
    if server.url is None and server.headers:
        raise bad("sets `headers` on a stdio server", "headers apply to a `url` server only")
    return McpServerSpec(
        name=name,
        command=server.command,
        args=tuple(server.args),
        env=MappingProxyType(dict(server.env)),
        cwd=server.cwd,
        url=server.url,
        headers=MappingProxyType(dict(server.headers)),
        timeout=server.timeout,
        startup_timeout=server.startup_timeout,
    )
