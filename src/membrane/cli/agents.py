"""``membrane agents list|show|validate``: the catalog of definitions as a table or JSON, one
definition with the line of each field, and every file's warnings and errors."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from typer import Argument, Exit, Option

from membrane.cli.app import app, definition_error_line, echo_text, group, warning_json
from membrane.cli.helptext import HelpCommand
from membrane.cli.screen import Screen, Table
from membrane.errors import DefinitionError, InvalidRequest, UnknownSubagent

if TYPE_CHECKING:  # for annotations; the commands import what they run
    from membrane.agents.catalog import Catalog
    from membrane.agents.definition import AgentDefinition, DefinitionWarning
    from membrane.agents.dialect import Dialect
    from membrane.config.values import Settings

agents_app = group(
    "agents", help="List, show and validate agent definitions.", no_args_is_help=True
)
app.add_typer(agents_app, name="agents")

_PROJECT = Option("--project", help="The project directory (default: the current directory).")
_WORKSPACE = Option(
    "--workspace", help="The workspace holding .agents/agents (default: the project)."
)
_JSON = Option("--json", help="Print JSON instead of a table.")


def _catalog(project: Path | None, workspace: Path | None) -> Catalog:
    from membrane.agents.cache import CACHE_FILE
    from membrane.agents.catalog import Catalog
    from membrane.config.load import membrane_home
    from membrane.store.location import locate_state

    folder = (project or Path.cwd()).resolve()
    if not folder.is_dir():  # a mistyped --project is a mistake, not a project of builtins only
        what = "is not a folder" if folder.exists() else "does not exist"
        raise InvalidRequest(
            f"--project: {folder} {what}; name an existing folder", field="project"
        )
    # Parsed definitions are kept by content digest in the project's state folder.
    cache = locate_state(folder, home=membrane_home()).path.parent / CACHE_FILE
    return Catalog(project=folder, workspace=workspace, cache=cache)


@agents_app.command("list", cls=HelpCommand)
def list_agents(
    as_json: Annotated[bool, _JSON] = False,
    project: Annotated[Path | None, _PROJECT] = None,
    workspace: Annotated[Path | None, _WORKSPACE] = None,
) -> None:
    """Every winning definition: its root and path, the model it resolves to here and whether
    it can start (with no --model), what it shadows, and its warnings."""
    from membrane.cli.agent_model import agent_model
    from membrane.config.load import load_settings, membrane_home

    catalog = _catalog(project, workspace)
    winners = catalog.definitions()
    settings = load_settings(project=(project or Path.cwd()).resolve(), home=membrane_home())
    models = {name: agent_model(d, settings) for name, d in winners.items()}
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
                    "model": models[name],
                    "warnings": [warning_json(w) for w in d.warnings] + _fallback(models[name]),
                }
                for name, d in winners.items()
            ],
            "warnings": [warning_json(w) for w in catalog.warnings],
            "errors": [e.to_dict() for e in catalog.errors],
        }
        echo_text(json.dumps(payload, indent=2))
        return
    columns = ("name", "root", "dialect", "path", "model", "starts", "shadows", "warnings")
    table = Table(columns, title="Agent definitions")
    for name, d in winners.items():
        shadows = "\n".join(f"{s.root}:{s.path}" for s in catalog.shadowed.get(name, []))
        label = name if d.is_enabled else f"{name} (disabled)"
        model = models[name]
        shown = f"{model['provider']}:{model['model']}" if model["provider"] else "-"
        starts = "yes" if model["can_start"] else "no"
        count = str(len(d.warnings) + len(_fallback(model)))
        table.add_row(label, d.root, d.dialect, d.path, shown, starts, shadows or "-", count)
    Screen().table(table)
    lines = []
    for name, d in winners.items():
        lines += [str(w) for w in d.warnings]
        lines += [
            f"{w['file']}:{w['line']}: model-fallback: {w['message']}"
            for w in _fallback(models[name])
        ]
        if not models[name]["can_start"] and not d.builtin:
            lines.append(f"{d.path}: cannot start here: {models[name]['reason']}")
    lines += [str(w) for w in catalog.warnings]
    lines += [definition_error_line(e) for e in catalog.errors]
    for line in lines:
        echo_text(line)
    if catalog.errors:
        echo_text(f"{len(catalog.errors)} file(s) skipped; run `membrane agents validate`.")


def _fallback(model: Mapping[str, object]) -> list[Mapping[str, object]]:
    found = model.get("fallback")
    return [found] if isinstance(found, dict) else []


@agents_app.command("show", cls=HelpCommand)
def show_agent(
    name: Annotated[
        str, Argument(metavar="NAME", help="The agent name (case-insensitive when unambiguous).")
    ],
    as_json: Annotated[bool, _JSON] = False,
    project: Annotated[Path | None, _PROJECT] = None,
    workspace: Annotated[Path | None, _WORKSPACE] = None,
) -> None:
    """One definition: every field it sets, with the line it is set on, and its prompt."""
    _show(_catalog(project, workspace), name, as_json=as_json)


@agents_app.command("validate", cls=HelpCommand)
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

    Each agent's model is resolved as a start with no --model would; one that cannot start here
    is listed with the reason (it is still usable: the exit code is about the files). With
    --json, one document: {files, usable, unusable, can_start, agents: [{name, path, model}],
    warnings: [{code, message, file, line}], errors: [{code, message, data}]}.
    """
    _validate(paths, project=project, catalog=lambda: _catalog(project, workspace), as_json=as_json)


def _show(catalog: Catalog, name: str, *, as_json: bool) -> None:
    """``membrane agents show``: one definition, every field it sets, with the line it is set
    on, and its prompt."""
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
        echo_text(json.dumps(payload, indent=2))
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
        echo_text("shadows: " + ", ".join(f"{s.root}:{s.path}" for s in shadows))
    for warning in definition.warnings:
        echo_text(str(warning))
    echo_text("")
    echo_text(definition.body)


def _dialect_of(file: Path, settings: Settings) -> Dialect:
    """The dialect of the root a file lies in (``.claude/agents``, ``.opencode/agent(s)``,
    ``.pi/agents``), with the deployment's options; Membrane's own elsewhere."""
    from membrane.agents.dialect import MEMBRANE
    from membrane.agents.roots import dialect_roots

    where = Path(os.path.realpath(file))  # never raises, not even on a symlink loop
    for folder in where.parents:
        for root in dialect_roots(settings, project=folder, claude_home=folder / ".claude"):
            if root.kind == "dir" and (
                root.directory == file.parent or root.directory in where.parents
            ):
                return root.dialect
    return MEMBRANE


def _unknown_servers(definition: AgentDefinition, settings: Settings) -> list[DefinitionWarning]:
    """An ``mcp__SERVER__...`` selector naming no server of ``[mcp_servers]`` selects nothing."""
    from membrane.agents.definition import DefinitionWarning
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


def _validate(
    paths: list[Path] | None,
    *,
    project: Path | None,
    catalog: Callable[[], Catalog],
    as_json: bool,
) -> None:
    """``membrane agents validate``: every warning and error of ``paths`` (default: the
    ``catalog``'s roots); exit 1 if a file is unusable."""
    from membrane.agents.definition import DefinitionWarning
    from membrane.config.load import load_settings, membrane_home

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
                found = read_definition(file, root="project", dialect=_dialect_of(file, settings))
            except DefinitionError as exc:
                errors.append(exc)
                continue
            read.append(found)
            warnings.extend(found.warnings)
    else:
        found_in = catalog()
        read = [
            *found_in.definitions().values(),
            *chain.from_iterable(found_in.shadowed.values()),
        ]
        for definition in read:
            warnings.extend(definition.warnings)
        warnings.extend(found_in.warnings)
        errors = list(found_in.errors)
        # Files on disk only: the packaged builtins are not the user's files.
        count = sum(not d.builtin for d in read) + len(errors)
    warnings.extend(w for d in read for w in _unknown_servers(d, settings))
    from membrane.cli.agent_model import agent_model

    models = [(d, agent_model(d, settings)) for d in read if not d.builtin]
    for definition, model in models:
        fallback = model["fallback"]
        if isinstance(fallback, dict):
            line = definition.lines.get("model")
            message = str(fallback["message"])
            warnings.append(DefinitionWarning(definition.path, line, "model-fallback", message))
    starting = sum(bool(model["can_start"]) for _, model in models)
    agents = [{"name": d.name, "path": d.path, "model": model} for d, model in models]
    if as_json:
        payload = {
            "files": count,
            "usable": count - len(errors),
            "unusable": len(errors),
            "can_start": starting,
            "agents": agents,
            "warnings": [warning_json(w) for w in warnings],
            "errors": [e.to_dict() for e in errors],
        }
        echo_text(json.dumps(payload, indent=2))
        if errors:
            raise Exit(1)
        return
    for warning in warnings:
        echo_text(str(warning))
    for definition, model in models:
        if not model["can_start"]:
            echo_text(f"{definition.path}: cannot start here: {model['reason']}")
    for error in errors:
        echo_text(definition_error_line(error))
    echo_text(
        f"{count} file(s): {count - len(errors)} usable, {len(errors)} unusable, "
        f"{starting} can start here, {len(warnings)} warning(s)",
        err=True,
    )
    if errors:
        raise Exit(1)
