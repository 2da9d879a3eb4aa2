"""``membrane actions list|run``: the caller's actions, runtime-backed or ``--headless``.

Both modes go through ``cli.backend`` and print with the formatters below, so they give the
same output for the same role.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

from typer import Argument, Option

from membrane.cli.app import app, group, safe_text
from membrane.cli.helptext import HelpCommand
from membrane.cli.screen import Screen, Table
from membrane.errors import InvalidRequest
from membrane.json_types import JSONDict

__all__ = ["format_actions", "format_result"]

actions_app = group(
    "actions",
    help="List and run the actions (tools) your caller's view holds.",
    no_args_is_help=True,
)
app.add_typer(actions_app)

ProjectOption = Annotated[Path, Option(help="The project folder.")]
HeadlessOption = Annotated[
    bool,
    Option("--headless", help="Bootstrap the project's services in this process for one command."),
]
RoleOption = Annotated[
    str | None,
    Option(
        help="The role to ask for: restarts an idle runtime under it; headless, the role of "
        "this command (default: $MEMBRANE_ROLE, else none); ignored inside a run."
    ),
]
SocketOption = Annotated[
    Path | None, Option("--socket", help="The runtime's socket (default: $MEMBRANE_SOCKET).")
]
JsonOption = Annotated[bool, Option("--json", help="Print JSON.")]


def format_actions(actions: list[JSONDict], *, as_json: bool) -> None:
    """The one formatter of an action list (both modes)."""
    if as_json:
        sys.stdout.write(json.dumps({"actions": actions}, ensure_ascii=False) + "\n")
        return
    table = Table(("action", "description"), whole=("action",))
    for action in actions:
        description = str(action.get("description") or "").strip().splitlines()
        table.add_row(str(action["name"]), description[0] if description else "")
    Screen().table(table)


def format_result(result: Any, *, as_json: bool, name: str = "") -> None:
    """The one formatter of an action's result (both modes). A scheduling action prints its
    text form, as ``membrane schedule`` does."""
    from membrane.durable.schedule_actions import SCHEDULE_TOOLS

    if not as_json and name in SCHEDULE_TOOLS and isinstance(result, dict):
        result = result.get("text", result)
    if as_json:
        sys.stdout.write(json.dumps({"result": result}, ensure_ascii=False) + "\n")
    elif isinstance(result, str):
        sys.stdout.write(safe_text(result) + ("" if result.endswith("\n") else "\n"))
    else:
        sys.stdout.write(safe_text(json.dumps(result, ensure_ascii=False, indent=2)) + "\n")
    sys.stdout.flush()


@actions_app.command("list", cls=HelpCommand)
def list_actions(
    project: ProjectOption = Path("."),
    headless: HeadlessOption = False,
    role: RoleOption = None,
    socket: SocketOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the actions this caller may run: name and description (--json: with schemas)."""

    import anyio

    from membrane.cli.backend import open_session

    async def main() -> list[JSONDict]:
        async with open_session(project, headless=headless, role=role, socket=socket) as session:
            return await session.list_actions()

    format_actions(anyio.run(main), as_json=as_json)


@actions_app.command("run", cls=HelpCommand)
def run_action(
    name: Annotated[str, Argument(metavar="NAME", help="The action to run.")],
    args: Annotated[str, Option("--args", help="Its arguments as a JSON object.")] = "{}",
    project: ProjectOption = Path("."),
    headless: HeadlessOption = False,
    role: RoleOption = None,
    socket: SocketOption = None,
    as_json: JsonOption = False,
) -> None:
    """Run one action through this caller's view: the same checks as a tool call (visibility,
    arguments, rate limits), then the tool."""
    import anyio

    from membrane.cli.backend import open_session

    try:
        arguments = json.loads(args)
    except ValueError as exc:
        raise InvalidRequest(f"--args is not JSON: {exc}", field="args") from None
    if not isinstance(arguments, dict):
        raise InvalidRequest("--args must be a JSON object", field="args")

    async def main() -> Any:
        async with open_session(project, headless=headless, role=role, socket=socket) as session:
            return await session.call_action(name, arguments)

    format_result(anyio.run(main), as_json=as_json, name=name)
