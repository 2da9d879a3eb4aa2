"""``membrane skills list``: the skills an agent of this project can be given, and from where."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

from typer import Option

from membrane.cli.app import app, echo, group, safe_text, warning_json
from membrane.cli.helptext import HelpCommand
from membrane.cli.screen import Screen, Table

skills_app = group("skills", help="List the Agent Skills found on the skill roots.")
app.add_typer(skills_app, name="skills")


_JSON = Option("--json", help="Print one JSON document.")
_PROJECT = Option("--project", help="The project directory (default: the current directory).")


@skills_app.command("list", cls=HelpCommand)
def list_skills(
    as_json: Annotated[bool, _JSON] = False, project: Annotated[Path | None, _PROJECT] = None
) -> None:
    """Every skill found, nearest root first: a nearer skill shadows a farther one of its name."""
    from membrane.agents.skills import discover_skills, skill_roots
    from membrane.config.load import membrane_home
    from membrane.workspace import require_folder

    folder = require_folder("--project", project or Path.cwd())
    catalog = discover_skills(skill_roots(project=folder, home=membrane_home()))
    warnings = [warning_json(p) for p in catalog.problems]
    if as_json:
        payload = {
            "roots": [str(root) for root in catalog.roots],
            "skills": [
                {
                    "name": skill.name,
                    "description": skill.description,
                    "folder": str(skill.folder),
                    "root": str(skill.root),
                    "shadows": [str(f) for f in catalog.shadowed.get(skill.name, ())],
                }
                for skill in catalog.skills.values()
            ],
            "warnings": warnings,
        }
        echo(safe_text(json.dumps(payload, indent=2)))
        return
    table = Table(("name", "description", "folder", "shadows"), title="Agent skills")
    for skill in catalog.skills.values():
        shadows = "\n".join(str(f) for f in catalog.shadowed.get(skill.name, ())) or "-"
        table.add_row(skill.name, skill.description, str(skill.folder), shadows)
    Screen().table(table)
    echo("roots, nearest first:")
    for root in catalog.roots:
        echo(safe_text(f"  {root}"))
    for problem in catalog.problems:
        echo(safe_text(str(problem)), err=True)
