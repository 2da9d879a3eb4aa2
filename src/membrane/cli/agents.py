"""``membrane agents list|show|validate``: the listing here; ``show`` and ``validate`` run from
``membrane.cli.agents_detail``, imported when one of them runs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from typer import Argument, Option

from membrane.cli.app import app, definition_error_line, echo_text, group, warning_json
from membrane.cli.helptext import HelpCommand
from membrane.cli.screen import Screen, Table
from membrane.errors import InvalidRequest

if TYPE_CHECKING:  # for annotations; the commands import what they run
    from membrane.agents.catalog import Catalog

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
    from membrane.cli.agents_detail import show  # a listing needs none of it

    show(_catalog(project, workspace), name, as_json=as_json)


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
    from membrane.cli.agents_detail import validate

    validate(paths, project=project, catalog=lambda: _catalog(project, workspace), as_json=as_json)
