"""``membrane console``: serve the console's pages for one project on 127.0.0.1.

The console is a runtime-backed command like ``membrane run``: it reaches ``membrane serve``
(starting one when none answers) as the owner under the settings' ``console_role``, and its
pages explain, show and report with the same functions ``membrane explain``, ``membrane show``
and ``membrane doctor`` print with.
"""

from __future__ import annotations

import json
import socket
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from typer import Option

from membrane.cli.app import app, echo
from membrane.cli.helptext import HelpCommand
from membrane.errors import InvalidRequest
from membrane.json_types import JSONDict

if TYPE_CHECKING:
    from membrane.agents.catalog import Catalog
    from membrane.agents.definition import AgentDefinition
    from membrane.console import Guard, Parts
    from membrane.console.link import Session
    from membrane.tools.permissions import Approver

__all__ = ["console", "console_parts"]


def console_role(project: Path) -> str | None:
    """The role the settings give the console: ``console_role``, else ``default_role``."""
    from membrane.config.load import load_settings, membrane_home

    settings = load_settings(project=project, home=membrane_home())
    return settings.console_role or settings.default_role


def console_parts(project: Path, *, role: str | None, socket_path: Path | None = None) -> Parts:
    """The console's collaborators for ``project``, its runtime session under ``role``."""
    from membrane.cli.agents import _catalog
    from membrane.cli.backend import runtime_session
    from membrane.cli.doctor import report as doctor_report
    from membrane.cli.explain import build_authority
    from membrane.cli.show import run_report
    from membrane.config.load import membrane_home
    from membrane.console import Parts
    from membrane.resolve import CallParams
    from membrane.store.location import locate_state

    def catalog() -> Catalog:
        return _catalog(project, None)

    def explain(name: str, definition: AgentDefinition | None) -> JSONDict:
        authority, _ = build_authority(
            name, project=project, call=CallParams(), role=role, definition=definition
        )
        payload: JSONDict = authority.to_json()
        payload["warnings"] = [
            *authority.warnings,
            *(str(w) for w in authority.definition.warnings),
        ]
        return payload

    def report(run_id: str) -> JSONDict:
        return run_report(state(), run_id)

    def doctor() -> JSONDict:
        found, problems = doctor_report(project)
        return {**found, "problems": problems}

    def connect(approver: Approver) -> AbstractAsyncContextManager[Session]:
        return runtime_session(project, role=role, socket=socket_path, approver=approver)

    def state() -> Path:
        return locate_state(project, home=membrane_home()).path

    def outbox() -> dict[str, list[JSONDict]]:
        from membrane.cli.outbox import outbox_rows

        where = state()
        if not where.exists():
            return {"pending": [], "dead": []}
        return {"pending": outbox_rows(where, dead=False), "dead": outbox_rows(where, dead=True)}

    def retry(item_id: int) -> JSONDict:
        from membrane.store.sqlite import SQLiteStore

        store = SQLiteStore(state())
        try:
            item = store.revive_outbox(item_id)
        finally:
            store.close()
        return {"id": item.id, "recipient": item.recipient, "attempts": item.attempts}

    def lineage() -> list[JSONDict]:
        from membrane.cli.lineage import lineage_tree

        return lineage_tree(state()) if state().exists() else []

    def schedules() -> list[JSONDict]:
        from membrane.durable.schedules import ScheduleBook
        from membrane.store.sqlite import SQLiteStore

        if not state().exists():
            return []
        store = SQLiteStore(state(), read_only=True)
        with store:
            return [dict(s.describe()) for s in ScheduleBook(store).schedules()]

    return Parts(
        project=project,
        catalog=catalog,
        explain=explain,
        report=report,
        doctor=doctor,
        connect=connect,
        outbox=outbox,
        retry=retry,
        lineage=lineage,
        schedules=schedules,
    )


def _listening(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        raise InvalidRequest(
            f"--port {port}: cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}",
            field="port",
        ) from None
    sock.listen(128)
    return sock


async def _serve(guard: Guard, parts: Parts, sock: socket.socket, announcement: str) -> None:
    import anyio
    import uvicorn

    from membrane.console import build_app

    config = uvicorn.Config(build_app(parts, guard), log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as group:

        async def announce() -> None:
            while not server.started:
                await anyio.sleep(0.05)
            echo(announcement)

        group.start_soon(announce)
        await server.serve(sockets=[sock])
        group.cancel_scope.cancel()


@app.command("console", cls=HelpCommand)
def console(
    project: Annotated[
        Path | None,
        Option("--project", help="The project directory (default: the current directory)."),
    ] = None,
    port: Annotated[
        int, Option("--port", help="The port on 127.0.0.1 (default: 0, a free one).")
    ] = 0,
    as_json: Annotated[
        bool, Option("--json", help="Print the URL as a JSON object {url, port, role}.")
    ] = False,
) -> None:
    """Serve a local web page over the project: agents and their explain, the live run tree,
    approvals. Prints its URL (with a token); only 127.0.0.1 is served."""
    import anyio

    from membrane._extras import require

    for module, package in (("starlette", "starlette"), ("uvicorn", "uvicorn"),
                            ("sse_starlette", "sse-starlette")):  # fmt: skip
        require(module, extra="console", package=package, feature="membrane console")
    from membrane.console import Guard
    from membrane.workspace import require_folder

    if not 0 <= port <= 65535:
        raise InvalidRequest(f"--port {port}: a port is 0-65535 (0: a free one)", field="port")
    root = require_folder("--project", (project or Path.cwd()).resolve())
    role = console_role(root)
    sock = _listening(port)
    guard = Guard(port=sock.getsockname()[1])
    line = f"membrane console: {guard.url()} (role {role or 'none'})"
    if as_json:
        line = json.dumps({"url": guard.url(), "port": guard.port, "role": role})
    with sock:
        anyio.run(_serve, guard, console_parts(root, role=role), sock, line)
