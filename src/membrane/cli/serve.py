"""``membrane serve``: run the machine runtime on its socket until SIGTERM."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Annotated

from typer import Option

from membrane.cli.app import app, echo
from membrane.cli.helptext import HelpCommand
from membrane.errors import InvalidRequest
from membrane.limits import APPROVAL_TIMEOUT

__all__ = ["serve"]


@app.command("serve", cls=HelpCommand)
def serve(
    socket: Annotated[
        Path | None,
        Option(
            "--socket",
            help="The socket path (default: $MEMBRANE_SOCKET, else "
            "~/.membrane/sock/membrane.sock).",
        ),
    ] = None,
    role: Annotated[
        str | None,
        Option(
            help="The role of the owner's commands that name none (default: $MEMBRANE_ROLE, "
            "else the settings' default_role, else the owner's own authority). Callers that "
            "neither present the owner's token nor a run's token are always external."
        ),
    ] = None,
    as_json: Annotated[
        bool, Option("--json", help="Announce the listening socket on stderr as a JSON object.")
    ] = False,
    idle_exit: Annotated[
        float | None,
        Option(
            "--idle-exit",
            metavar="SECONDS",
            help="Exit after SECONDS with no connection open and no run in flight (default: "
            "never; a runtime a command starts in the background uses $MEMBRANE_IDLE_EXIT, "
            "else 300).",
        ),
    ] = None,
    approval_timeout: Annotated[
        float,
        Option(
            "--approval-timeout",
            metavar="SECONDS",
            help="How long a call an ask rule holds waits for the client's approval/request "
            "answer before it is refused as approval-unavailable.",
        ),
    ] = APPROVAL_TIMEOUT,
) -> None:
    """Serve every project's actions and runs over JSON-RPC on a private Unix socket.

    Runs until SIGTERM or SIGINT (or, with --idle-exit, until idle that long), which drain
    the calls in flight, stop the runs and remove the socket. A second serve on a live socket
    fails with runtime-already-running.
    """
    import anyio

    from membrane.cli.model_choice import parse_model
    from membrane.server import Server, default_socket_path

    if idle_exit is not None and not 0 < idle_exit < math.inf:
        raise InvalidRequest(
            "--idle-exit must be a positive, finite number of seconds", field="idle_exit"
        )
    if not 0 < approval_timeout < math.inf:
        raise InvalidRequest(
            "--approval-timeout must be a positive, finite number of seconds",
            field="approval_timeout",
        )
    path = socket.expanduser().absolute() if socket is not None else default_socket_path()
    launch_role = role or os.environ.get("MEMBRANE_ROLE") or None
    server = Server(
        socket_path=path,
        models=parse_model,
        owner_role=launch_role,
        idle_exit=idle_exit,
        approval_timeout=approval_timeout,
    )
    server.bind()

    async def main() -> None:
        async with anyio.create_task_group() as group:
            await group.start(server.serve)
            # Launchers wait for this line: the socket answers from here on.
            if as_json:
                listening = {"listening": str(path), "pid": os.getpid(),
                             "default_role": server.default_role,
                             "owner_role": server.owner_role}  # fmt: skip
                echo(json.dumps(listening, ensure_ascii=False), err=True)
            else:
                echo(
                    f"membrane serve: listening on {path} (pid {os.getpid()}, default role "
                    f"{server.default_role}, owner role {server.owner_role or 'none'})",
                    err=True,
                )
            await server.draining.wait()
            echo(
                f"membrane serve: draining {server.in_flight()} call(s) in flight; new "
                "connections are refused",
                err=True,
            )

    anyio.run(main)
