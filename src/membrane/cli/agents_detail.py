"""``membrane agents show`` and ``membrane agents validate``: what ``cli.agents`` declares
and imports from here when one of them runs (a listing needs none of it)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from itertools import chain
from pathlib import Path

from typer import Exit

from membrane.agents.catalog import Catalog
from membrane.agents.definition import AgentDefinition, DefinitionWarning
from membrane.agents.dialect import MEMBRANE, Dialect
from membrane.agents.roots import dialect_roots
from membrane.cli.app import definition_error_line, echo_text, warning_json
from membrane.cli.screen import Screen, Table
from membrane.config.load import load_settings, membrane_home
from membrane.config.values import Settings
from membrane.errors import DefinitionError, UnknownSubagent

__all__ = ["dialect_of", "show", "unknown_servers", "validate"]


def show(catalog: Catalog, name: str, *, as_json: bool) -> None:
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


def validate(
    paths: list[Path] | None,
    *,
    project: Path | None,
    catalog: Callable[[], Catalog],
    as_json: bool,
) -> None:
    """``membrane agents validate``: every warning and error of ``paths`` (default: the
    ``catalog``'s roots); exit 1 if a file is unusable."""
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
    warnings.extend(w for d in read for w in unknown_servers(d, settings))
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
