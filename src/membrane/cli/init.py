"""``membrane init``: a starter ``.membrane/`` for a project.

It writes ``.membrane/config.toml`` (every common setting, commented out at its default) and one
example agent, ``.membrane/agents/example.md``. An existing file is never overwritten. Nothing
written here needs a ``.gitignore``: a project's state lives outside the checkout (DESIGN rule
9), so ``.membrane/`` holds only files meant to be committed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

from typer import Option

from membrane.cli.app import app, echo, safe_text
from membrane.cli.helptext import HelpCommand

__all__ = ["CONFIG_TEMPLATE", "EXAMPLE_AGENT", "init"]

CONFIG_TEMPLATE = """\
# Membrane settings for this project (docs/configuration.md lists every key).
# Each line below shows a setting at its default; remove the `#` to change it.

# The tools of a definition that leaves `tools` out: read-only by default.
# default_tools = ["Read", "Glob", "Grep"]

# What an unknown agent type in a Task call falls back to; "none" fails instead.
# fallback_subagent = "general-purpose"

# The delegation depth cap: the top level is 0, a child is its parent's depth + 1.
# max_depth = 3

# Other products' agent folders, read with their own field meanings.
# claude_code_agents = true
# opencode_agents = true
# pi_agents = true

# A Claude Code file that leaves `tools` out: "default" (read-only) or "inherit".
# claude_code_omitted_tools = "default"

# Short model names, as Claude Code files write them.
# [model_aliases]
# sonnet = "anthropic:claude-sonnet-5-5"
"""

EXAMPLE_AGENT = """\
---
name: example
description: Reads the project and answers questions about it, citing files.
tools: Read, Glob, Grep
---
Answer the question you are given from the project's files. Name each file (and line) your
answer rests on; say so when the files do not answer it.
"""


@app.command("init", cls=HelpCommand)
def init(
    project: Annotated[
        Path, Option(help="The project folder (default: the current directory).")
    ] = Path("."),
    as_json: Annotated[bool, Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Write a starter .membrane/: config.toml with comments and one example agent.

    Existing files are kept as they are. Nothing Membrane writes into a project needs a
    .gitignore: state lives outside the checkout.
    """
    from membrane.agents.frontmatter import parse_definition
    from membrane.config.load import load_settings
    from membrane.workspace import require_folder

    folder = require_folder("--project", project)
    files = {
        folder / ".membrane" / "config.toml": CONFIG_TEMPLATE,
        folder / ".membrane" / "agents" / "example.md": EXAMPLE_AGENT,
    }
    written: list[str] = []
    kept: list[str] = []
    for path, text in files.items():
        if path.exists():
            kept.append(str(path))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(str(path))
    # What was written must load: a broken starter would be a surprise of its own.
    load_settings(project=folder)
    parse_definition(EXAMPLE_AGENT, path="example.md", root="project")
    if as_json:
        echo(json.dumps({"written": written, "kept": kept}, indent=2))
        return
    for shown in written:
        echo(safe_text(f"wrote {shown}"))
    for shown in kept:
        echo(safe_text(f"kept {shown} (it exists)"))
    echo("next: membrane agents list, then membrane explain example")
