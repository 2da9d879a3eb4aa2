"""An MCP server's settings: one ``[mcp_servers.NAME]`` table of ``config.toml``, or a
definition's inline entry, checked into a ``McpServerSpec``. Imported by what reads one."""

from __future__ import annotations

import re
from dataclasses import replace
from types import MappingProxyType

from membrane.config.shape import Field, Invalid, list_of, mapping_of, number, optional, table, text
from membrane.config.values import McpServerSpec
from membrane.errors import SettingsError

__all__ = ["mcp_server_spec"]


def _server(
    *,
    command: str | None,
    args: list[str],
    env: dict[str, str],
    cwd: str | None,
    url: str | None,
    headers: dict[str, str],
    timeout: float,
    startup_timeout: float,
) -> McpServerSpec:
    """The spec, named by ``mcp_server_spec`` once it is whole."""
    return McpServerSpec(
        name="",
        command=command,
        args=tuple(args),
        env=MappingProxyType(env),
        cwd=cwd,
        url=url,
        headers=MappingProxyType(headers),
        timeout=timeout,
        startup_timeout=startup_timeout,
    )


_MCP_SERVER = table(
    "_McpServer",
    {
        "command": Field(optional(text(min_length=1))),
        "args": Field(list_of(text()), factory=list),
        "env": Field(mapping_of(text()), factory=dict),
        "cwd": Field(optional(text(min_length=1))),
        "url": Field(optional(text(min_length=1))),
        "headers": Field(mapping_of(text()), factory=dict),
        "timeout": Field(number(gt=0), default=60.0),
        "startup_timeout": Field(number(gt=0), default=30.0),
    },
    _server,
)

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
        server = _MCP_SERVER(raw)
    except Invalid as exc:
        where = ".".join(str(part) for part in exc.loc)
        raise bad(
            f"{('at ' + where + ': ') if where else ''}{exc.message}",
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
    return replace(server, name=name)
