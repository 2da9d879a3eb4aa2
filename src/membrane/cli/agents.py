"""``membrane agents list|show|validate``."""

from __future__ import annotations

import json
import os
import sys
from itertools import chain
from pathlib import Path
from typing import Annotated, Any

from membrane.agents.cache import CACHE_FILE
from membrane.agents.catalog import Catalog
from membrane.agents.definition import AgentDefinition, DefinitionWarning
from membrane.agents.dialect import MEMBRANE, Dialect
from membrane.agents.roots import dialect_roots
from membrane.cli.app import app, safe_text, warning_json
from membrane.cli.declare import Argument, Exit, Group, Option, echo
from membrane.cli.screen import Screen, Table
from membrane.config.load import load_settings, membrane_home
from membrane.config.values import Settings
from membrane.errors import DefinitionError, InvalidRequest, UnknownSubagent
from membrane.store.location import locate_state

agents_app = Group(
    name="agents", help="List, show and validate agent definitions.", no_args_is_help=True
)
app.add_group(agents_app, name="agents")

_PROJECT = Option("--project", help="The project directory (default: the current directory).")
_WORKSPACE = Option(
    "--workspace", help="The workspace holding .agents/agents (default: the project)."
)
_JSON = Option("--json", help="Print JSON instead of a table.")


def _catalog(project: Path | None, workspace: Path | None) -> Catalog:
    folder = (project or Path.cwd()).resolve()
    if not folder.is_dir():  # a mistyped --project is a mistake, not a project of builtins only
        what = "is not a folder" if folder.exists() else "does not exist"
        raise InvalidRequest(
            f"--project: {folder} {what}; name an existing folder", field="project"
        )
    # Parsed definitions are kept by content digest in the project's state folder.
    cache = locate_state(folder, home=membrane_home()).path.parent / CACHE_FILE
    return Catalog(project=folder, workspace=workspace, cache=cache)


def _echo(text: str, *, err: bool = False) -> None:
    """Print file-derived text verbatim: no markup, and nothing the terminal cannot encode."""
    echo(safe_text(text, stream=sys.stderr if err else sys.stdout), err=err)


def _where(root: str, path: str) -> str:
    return f"{root}:{path}"


def _warning_line(warning: DefinitionWarning) -> str:
    return str(warning)


def _error_line(error: DefinitionError) -> str:
    data = error.data
    where = data["path"] if data.get("line") is None else f"{data['path']}:{data['line']}"
    hint = f" (hint: {data['hint']})" if data.get("hint") else ""
    return f"{where}: {error.code}: {error.message}{hint}"


def _error_json(error: DefinitionError) -> dict[str, Any]:
    return error.to_dict()


@agents_app.command("list")
def list_agents(
    as_json: Annotated[bool, _JSON] = False,
    project: Annotated[Path | None, _PROJECT] = None,
    workspace: Annotated[Path | None, _WORKSPACE] = None,
) -> None:
    """Every winning definition: its root and path, what it shadows, and its warnings."""
    catalog = _catalog(project, workspace)
    winners = catalog.definitions()
    if as_json:
        payload = {
            "agents": [
                {
                    "name": d.name,
                    "root": d.root,
                    "dialect": d.dialect,
                    "path": d.path,
                    "enabled": d.is_enabled,
                    "description": d.to_json().get("description"),
                    "shadows": [
                        {"root": s.root, "path": s.path} for s in catalog.shadowed.get(name, [])
                    ],
                    "warnings": [warning_json(w) for w in d.warnings],
                }
                for name, d in winners.items()
            ],
            "warnings": [warning_json(w) for w in catalog.warnings],
            "errors": [_error_json(e) for e in catalog.errors],
        }
        _echo(json.dumps(payload, indent=2))
        return
    columns = ("name", "root", "dialect", "path", "shadows", "warnings")
    table = Table(columns, title="Agent definitions")
    for name, d in winners.items():
        shadows = "\n".join(_where(s.root, s.path) for s in catalog.shadowed.get(name, []))
        label = name if d.is_enabled else f"{name} (disabled)"
        table.add_row(label, d.root, d.dialect, d.path, shadows or "-", str(len(d.warnings)))
    Screen().table(table)
    lines = [_warning_line(w) for d in winners.values() for w in d.warnings]
    lines += [_warning_line(w) for w in catalog.warnings]
    lines += [_error_line(e) for e in catalog.errors]
    for line in lines:
        _echo(line)
    if catalog.errors:
        _echo(f"{len(catalog.errors)} file(s) skipped; run `membrane agents validate`.")


@agents_app.command("show")
def show_agent(
    name: Annotated[
        str, Argument(metavar="NAME", help="The agent name (case-insensitive when unambiguous).")
    ],
    as_json: Annotated[bool, _JSON] = False,
    project: Annotated[Path | None, _PROJECT] = None,
    workspace: Annotated[Path | None, _WORKSPACE] = None,
) -> None:
    """One definition: every field it sets, with the line it is set on, and its prompt."""
    catalog = _catalog(project, workspace)
    definition, why = catalog.lookup(name)
    if definition is None:
        # A file named after the agent that could not be read says more than "unknown".
        for error in catalog.errors:
            if Path(str(error.data.get("path", ""))).stem.lower() == name.lower():
                raise error
        known = ", ".join(catalog.definitions())
        raise UnknownSubagent(f"agent `{name}` {why}; known: {known}", requested=name, reason=why)
    shadows = catalog.shadowed.get(definition.name, [])
    if as_json:
        payload = definition.to_json()
        payload["warnings"] = [warning_json(w) for w in definition.warnings]
        payload["shadows"] = [{"root": s.root, "path": s.path} for s in shadows]
        _echo(json.dumps(payload, indent=2))
        return
    _print_definition(definition, shadows)


def _print_definition(definition: AgentDefinition, shadows: list[AgentDefinition]) -> None:
    title = f"{definition.name} ({definition.root}: {definition.path})"
    table = Table(("field", "value", "line"), title=title)
    data = definition.to_json()
    for key, value in data.items():
        if key in ("name", "root", "path", "body", "lines", "extra", "warnings"):
            continue
        shown = ", ".join(value) if isinstance(value, list) else json.dumps(value)
        if isinstance(value, str):
            shown = value
        line = definition.lines.get(key)
        table.add_row(key, shown, "-" if line is None else str(line))
    for key, value in definition.extra.items():
        line = definition.lines.get(key)
        table.add_row(f"{key} (ignored)", json.dumps(value), "-" if line is None else str(line))
    Screen().table(table)
    if shadows:
        _echo("shadows: " + ", ".join(_where(s.root, s.path) for s in shadows))
    for warning in definition.warnings:
        _echo(_warning_line(warning))
    _echo("")
    _echo(definition.body)


def dialect_of(file: Path, settings: Settings) -> Dialect:
    """The dialect of the root a file lies in (``.claude/agents``, ``.opencode/agent(s)``,
    ``.pi/agents``), with the deployment's options; Membrane's own elsewhere."""
    where = Path(os.path.realpath(file))  # never raises, not even on a symlink loop
    for folder in where.parents:
        for root in dialect_roots(settings, project=folder, claude_home=folder / ".claude"):
            if root.kind == "dir" and (
                root.directory == file.parent or root.directory in where.parents
            ):
                return root.dialect
    return MEMBRANE


def unknown_servers(definition: AgentDefinition, settings: Settings) -> list[DefinitionWarning]:
    """An ``mcp__SERVER__...`` selector naming no server of ``[mcp_servers]`` selects nothing."""
    from membrane.resolve.authority import mcp_server_of

    found: list[DefinitionWarning] = []
    for field in ("tools", "disallowed_tools"):
        tokens = getattr(definition, field)
        for token in tokens if isinstance(tokens, tuple) else ():
            server = mcp_server_of(token)
            if server is not None and server not in settings.mcp_servers:
                found.append(
                    DefinitionWarning(
                        definition.path,
                        definition.lines.get(field),
                        "unknown-server",
                        f"`{token}` names the MCP server `{server}`, which no [mcp_servers] "
                        "entry configures; it selects nothing",
                    )
                )
    return found


def _files(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            # Every *.md that is not a folder: a FIFO, a dangling link or a loop is reported.
            found.extend(sorted(p for p in path.rglob("*.md") if not p.is_dir()))
        else:
            found.append(path)
    return found


@agents_app.command("validate")
def validate_agents(
    paths: Annotated[
        list[Path] | None,
        Argument(
            metavar="PATHS", help="Files or directories (default: every root of the catalog)."
        ),
    ] = None,
    project: Annotated[Path | None, _PROJECT] = None,
    workspace: Annotated[Path | None, _WORKSPACE] = None,
    as_json: Annotated[bool, Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Print every warning and error as `file:line: code: message`; exit 1 if a file is unusable.

    With --json, one document: {files, usable, unusable, warnings: [{code, message, file, line}],
    errors: [{code, message, data}]}.
    """
    warnings: list[DefinitionWarning] = []
    errors: list[DefinitionError] = []
    count = 0
    settings = load_settings(project=(project or Path.cwd()).resolve(), home=membrane_home())
    read: list[AgentDefinition] = []
    if paths:
        from membrane.agents.frontmatter import read_definition

        for file in _files(paths):
            count += 1
            try:
                found = read_definition(file, root="project", dialect=dialect_of(file, settings))
            except DefinitionError as exc:
                errors.append(exc)
                continue
            read.append(found)
            warnings.extend(found.warnings)
    else:
        catalog = _catalog(project, workspace)
        read = [*catalog.definitions().values(), *chain.from_iterable(catalog.shadowed.values())]
        for definition in read:
            warnings.extend(definition.warnings)
        warnings.extend(catalog.warnings)
        errors = list(catalog.errors)
        # Files on disk only: the packaged builtins are not the user's files.
        count = sum(not d.builtin for d in read) + len(errors)
    warnings.extend(w for d in read for w in unknown_servers(d, settings))
    if as_json:
        payload = {
            "files": count,
            "usable": count - len(errors),
            "unusable": len(errors),
            "warnings": [warning_json(w) for w in warnings],
            "errors": [_error_json(e) for e in errors],
        }
        _echo(json.dumps(payload, indent=2))
        if errors:
            raise Exit(1)
        return
    for warning in warnings:
        _echo(_warning_line(warning))
    for error in errors:
        _echo(_error_line(error))
    _echo(
        f"{count} file(s): {count - len(errors)} usable, {len(errors)} unusable, "
        f"{len(warnings)} warning(s)",
        err=True,
    )
    if errors:
        raise Exit(1)
