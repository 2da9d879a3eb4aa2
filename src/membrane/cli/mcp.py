"""``membrane mcp list`` and ``membrane mcp serve``."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from typer import Option

from membrane.cli.app import app, echo, group
from membrane.cli.helptext import HelpCommand
from membrane.cli.options import MODEL_HELP, STATE_OPTION
from membrane.cli.screen import Screen, Table
from membrane.errors import InvalidRequest

if TYPE_CHECKING:  # for annotations; the commands import what they run
    from membrane.extensions.hooks import ExtensionHooks
    from membrane.models.base import Model
    from membrane.resolve.ceiling import Ceiling
    from membrane.tools.scope import Scope
    from membrane.workspace import Workspace

__all__ = ["mcp_app"]

mcp_app = group(
    "mcp",
    help="MCP servers: the ones mounted as extensions, and a view served as one.",
    no_args_is_help=True,
)
app.add_typer(mcp_app, name="mcp")

_PROJECT = Option(help="The project folder.")


@mcp_app.command("list", cls=HelpCommand)
def list_servers(
    project: Annotated[Path, _PROJECT] = Path("."),
    start: Annotated[
        bool, Option("--start/--no-start", help="Start each server to list its tools.")
    ] = True,
    as_json: Annotated[bool, Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Show the configured MCP servers, their state and their tools.

    Each server is started (as a child that needs it would start it) to list its tools, then
    stopped; --no-start starts none and shows the tools each one listed last time (cached).
    """
    import anyio

    from membrane.mcp.mount import McpServers
    from membrane.workspace import Workspace

    ws = Workspace.open(project)

    async def gather() -> list[dict[str, object]]:
        async with McpServers.of(ws) as servers:
            if start:
                await servers.ensure(servers.names())
            return servers.describe()

    rows = anyio.run(gather)
    if as_json:
        echo(json.dumps({"servers": rows}, indent=2))
        return
    if not rows:
        echo("no MCP servers configured (add [mcp_servers.NAME] to .membrane/config.toml)")
        return
    table = Table(("server", "transport", "state", "tools"), title="MCP servers")
    for row in rows:
        state = str(row["state"])
        if row.get("cached"):
            state += " (tools cached)"
        if row["reason"]:
            state += f": {row['reason']}"
        tools = row["tools"]
        listed = ", ".join(str(t) for t in tools) if isinstance(tools, list) else ""
        table.add_row(
            f"{row['name']}\n{row['target']}",
            str(row["transport"]),
            state,
            listed or "-",
        )
    Screen().table(table)


def _note(code: str, message: str, file: Path, *, as_json: bool) -> None:
    """A warning of ``mcp serve`` on stderr (stdout may carry the protocol): with ``--json``
    one line ``{"warning": {code, message, file, line}}``, ``file`` the settings file it is
    about."""
    if as_json:
        warning = {"code": code, "message": message, "file": str(file), "line": None}
        echo(json.dumps({"warning": warning}, ensure_ascii=False), err=True)
    else:
        Screen(err=True).line(f"warning: {message}")


def _settings_file(ws: Workspace, server: str | None) -> Path:
    """The settings file that configures ``server`` (the project's unless only the user's
    does), or the project's for a setting it lacks (``server`` ``None``)."""
    import tomllib

    from membrane.config.load import global_config_path, project_config_path

    project_file = project_config_path(ws.project)
    if server is None:
        return project_file
    try:
        configured = tomllib.loads(project_file.read_text(encoding="utf-8")).get("mcp_servers")
    except (OSError, ValueError):
        configured = None
    if isinstance(configured, dict) and server in configured:
        return project_file
    return global_config_path(ws.home)


@mcp_app.command("serve", cls=HelpCommand)
def serve(
    role: Annotated[
        str | None, Option(help="The trusted role whose view is served (settings.roles).")
    ] = None,
    agent: Annotated[
        str | None, Option(help="Serve the view of this agent's effective authority.")
    ] = None,
    http: Annotated[
        int | None,
        Option(
            "--http",
            help="Serve streamable HTTP on 127.0.0.1:PORT instead of stdio, to callers that "
            "send the bearer token printed on stderr at start.",
        ),
    ] = None,
    project: Annotated[Path, _PROJECT] = Path("."),
    model: Annotated[
        str | None, Option(help="The model of the runs Task starts: " + MODEL_HELP)
    ] = None,
    state: Annotated[str | None, STATE_OPTION] = None,
    as_json: Annotated[
        bool, Option("--json", help="Print warnings and notes on stderr as JSON Lines.")
    ] = False,
) -> None:
    """Speak MCP (stdio, or streamable HTTP on loopback) offering exactly one view.

    The view is the tools a caller with ROLE (or AGENT's effective authority, or both) may
    call. The role is the operator's: --role, or MEMBRANE_ROLE in this process's environment.
    What an MCP client claims about itself changes nothing. Where the view may delegate, Task
    (and TaskWait, TaskList, TaskStop, TaskMessage) start runs of the project under the role,
    with --model or the default_model setting; without a model they are not offered.
    """
    import anyio

    from membrane.cli.model_choice import parse_model
    from membrane.extensions.hooks import ExtensionHooks
    from membrane.mcp.mount import McpServers
    from membrane.mcp.serve import agent_authority, view_scope
    from membrane.resolve.authority import mcp_server_of
    from membrane.resolve.ceiling import ceiling_of_run
    from membrane.vocabulary import DELEGATION_TOOLS
    from membrane.workspace import Workspace

    role = role or os.environ.get("MEMBRANE_ROLE") or None
    if role is None and agent is None:
        raise InvalidRequest(
            "membrane mcp serve needs --role ROLE or --agent NAME (or MEMBRANE_ROLE): the "
            "served view is one caller's",
            field="role",
        )
    if http is not None and not 0 < http < 65536:
        raise InvalidRequest(f"--http {http}: not a port number", field="http")
    ws = Workspace.open(project)
    definition = ws.catalog.dispatch(agent).definition if agent is not None else None
    if role is not None and role not in ws.settings.roles:
        known = ", ".join(sorted(ws.settings.roles)) or "none configured"
        raise InvalidRequest(f"unknown role {role!r}; roles in settings: {known}", field="role")
    chosen = None
    if model is not None or ws.settings.default_model is not None:
        chosen = parse_model(model, ws.settings)

    async def main() -> None:
        async with McpServers.of(ws) as servers:
            if definition is not None:
                wanted = frozenset(servers.prepare(definition))
            else:
                spec = ws.settings.roles[role or ""]
                allowed = spec.allow
                wanted = frozenset(
                    servers.names()
                    if allowed is None
                    else {s for name in allowed if (s := mcp_server_of(name)) is not None}
                )
            for name, problem in (await servers.ensure(sorted(wanted))).items():
                file = _settings_file(ws, name)
                _note("mcp-server-unavailable", str(problem), file, as_json=as_json)
            authority = None
            if definition is not None:
                authority = agent_authority(
                    definition, ws.registry, ws.deployment(), cwd=ws.project
                )
            scope = view_scope(
                ws.registry,
                role=role,
                roles=ws.settings.roles,
                restriction=None if authority is None else authority.restriction,
            )
            delegation = DELEGATION_TOOLS if authority is None else authority.delegation_tools
            allowed = ("*",) if definition is None else _allowed(definition.allowed_subagents)
            if chosen is None or not delegation:
                if delegation and chosen is None:
                    why = "Task is not offered: no model (--model or default_model)"
                    _note("task-not-offered", why, _settings_file(ws, None), as_json=as_json)
                await _serve(scope, agent or f"role:{role}", ws, http, as_json=as_json)
                return
            hooks = ExtensionHooks.from_extensions(ws.extensions.values())
            servers.hooks(ws.catalog.definitions, into=hooks)
            # The runs the served agent's Task starts are its children: held to the ceiling
            # it passes down, as if it had started them itself (DESIGN rule 13).
            below = None
            if authority is not None and definition is not None:
                below = ceiling_of_run(
                    authority.ceiling,
                    definition,
                    by=definition.name,
                    mode=authority.permissions.mode,
                )
            await _serve_with_runs(
                scope, ws, chosen, hooks, http=http, state=state, role=role,
                names=delegation, allowed=allowed, caller=agent or f"role:{role}",
                ceiling=below, as_json=as_json,
            )  # fmt: skip

    anyio.run(main)


def _allowed(value: object) -> tuple[str, ...]:
    return tuple(str(name) for name in value) if isinstance(value, tuple | list) else ()


async def _serve(
    scope: Scope, caller: str, ws: Workspace, http: int | None, *, as_json: bool = False
) -> None:
    from membrane.mcp.serve import ServedView
    from membrane.tools.spec import ToolContext

    served = ServedView(scope, ToolContext(agent=caller, cwd=ws.project))
    try:
        if http is not None:
            # Like Jupyter's: a fresh secret each start, told only to the operator's terminal.
            token = secrets.token_urlsafe(32)
            url = f"http://127.0.0.1:{http}/mcp"
            if as_json:
                echo(json.dumps({"listening": url, "token": token}), err=True)
            else:
                echo(f"membrane mcp serve: {url} (send Authorization: Bearer {token})", err=True)
            await served.run_http(http, token=token)
        else:
            await served.run_stdio()
    finally:
        served.close()


async def _serve_with_runs(
    scope: Scope,
    ws: Workspace,
    model: Model,
    hooks: ExtensionHooks,
    *,
    http: int | None,
    state: str | None,
    role: str | None,
    names: tuple[str, ...],
    allowed: tuple[str, ...],
    caller: str,
    ceiling: Ceiling | None = None,
    as_json: bool = False,
) -> None:
    """Serve ``scope`` with the delegation tools, on a runtime held open meanwhile; every run
    they start is held to ``ceiling`` (the served agent's, passed down)."""
    from membrane.mcp.tasks import ServedRuns, add_delegation
    from membrane.runtime import InProcessProvider, SubagentRuntime

    store = ws.open_store(state)
    runtime = SubagentRuntime.on_workspace(ws, InProcessProvider(model, hooks=hooks), store=store)
    try:
        async with runtime:
            add_delegation(
                scope,
                ServedRuns(runtime, ceiling=ceiling),
                names=names,
                allowed=allowed,
                role=role,
                role_restriction=runtime.role_restriction(role),
                session=f"mcp-serve:{caller}",
            )
            await _serve(scope, caller, ws, http, as_json=as_json)
    finally:
        store.close()
        close = getattr(model, "aclose", None)
        if close is not None:
            await close()
