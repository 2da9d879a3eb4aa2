"""How a project command reaches Membrane: runtime-backed (the default) or ``--headless``.

Runtime-backed: connect to the machine runtime's socket (starting ``membrane serve`` in the
background when nothing answers), ``initialize`` with the caller's identity from the
environment, and register the project. The environment's ``MEMBRANE_ROLE`` is sent as
metadata and grants nothing; only ``--role``, a trusted flag of the person at the command,
asks for a role: a runtime whose ``defaultRole`` differs is restarted under it when idle, and
with runs in flight the command fails with ``runtime-role-mismatch``. A command run inside a
run (``MEMBRANE_TOKEN`` set) never starts or restarts a runtime: its token binds it to its
run's view, and ``--role`` is ignored.

Headless: the same project services (``ProjectHost``) bootstrapped in this process for one
command. Its role is ``--role``, else ``MEMBRANE_ROLE``, else none: the command runs with the
person's own authority in their own process. Inside a run it is refused, since only the
runtime can honour the run's token.

Both give a ``ProjectSession`` with the same operations, so every command has one formatter.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import anyio

import membrane
from membrane.cli.run import parse_model
from membrane.errors import InvalidRequest, RuntimeUnavailable
from membrane.json_types import JSONDict
from membrane.server import Caller, Client, ProjectHost, TokenBook, identity_from_env
from membrane.server.methods import plain
from membrane.server.transport import default_socket_path, probe_socket
from membrane.tools.view import wire_schema
from membrane.workspace import Workspace, require_folder

__all__ = ["ProjectSession", "headless_session", "open_session", "runtime_session"]

#: How long a runtime started in the background may take to answer.
_START_BOUND: Final = 30.0
_POLL: Final = 0.05


@dataclass
class ProjectSession:
    """One project, reached one way or the other. Exactly one of ``client``/``host`` is set."""

    project: Path
    caller: JSONDict
    client: Client | None = None
    project_id: str = ""
    host: ProjectHost | None = None
    local: Caller | None = None
    runtime_info: JSONDict | None = None

    async def list_actions(self) -> list[JSONDict]:
        if self.client is not None:
            reply = await self.client.request("actions/list", {"projectId": self.project_id})
            return list(reply["actions"])
        assert self.host is not None and self.local is not None
        actions: list[JSONDict] = []
        for tool in self.host.view(self.local).tools():
            wire = wire_schema(tool)
            actions.append(
                {
                    "name": wire["name"],
                    "description": wire["description"],
                    "inputSchema": wire["input_schema"],
                }
            )
        return actions

    async def call_action(self, name: str, arguments: JSONDict) -> Any:
        if self.client is not None:
            params = {"projectId": self.project_id, "name": name, "arguments": arguments}
            return (await self.client.request("actions/call", params))["result"]
        assert self.host is not None and self.local is not None
        return plain(await self.host.call(self.local, name, arguments))


def requested_role(role: str | None) -> str | None:
    return role or os.environ.get("MEMBRANE_ROLE") or None


@contextlib.asynccontextmanager
async def headless_session(project: Path, *, role: str | None) -> AsyncIterator[ProjectSession]:
    if os.environ.get("MEMBRANE_TOKEN"):
        raise InvalidRequest(
            "--headless is refused inside a run (MEMBRANE_TOKEN is set): a run reaches "
            "Membrane through the runtime, which binds it to its own view; drop --headless",
            field="headless",
        )
    workspace = Workspace.open(project)
    host = ProjectHost(workspace, tokens=TokenBook(), models=parse_model, child_env={})
    caller = Caller(role=requested_role(role))
    async with anyio.create_task_group() as group:
        await group.start(host.run)
        try:
            yield ProjectSession(
                project=workspace.project, caller=caller.to_dict(), host=host, local=caller
            )
        finally:
            await host.close()


@contextlib.asynccontextmanager
async def runtime_session(
    project: Path, *, role: str | None, socket: Path | None = None
) -> AsyncIterator[ProjectSession]:
    root = require_folder("--project", project)
    path = socket if socket is not None else default_socket_path()
    identity = identity_from_env()
    inside_run = "token" in identity
    wanted = None if inside_run else role
    for attempt in range(2):
        if not inside_run and not probe_socket(path):
            await _start_runtime(path, wanted)
        async with Client.connect(path) as client:
            info = await client.request(
                "initialize",
                {
                    "clientInfo": {"name": "membrane-cli", "version": membrane.__version__},
                    "identity": identity,
                },
            )
            running = info["runtimeInfo"]["defaultRole"]
            if wanted is not None and running != wanted and attempt == 0:
                # An idle runtime under another role is restarted; a busy one refuses.
                await client.request("runtime/shutdown", {"requestedRole": wanted})
                await _wait_gone(path)
                continue
            reply = await client.request("projects/add", {"root": str(root)})
            yield ProjectSession(
                project=root,
                caller=info["caller"],
                client=client,
                project_id=reply["projectId"],
                runtime_info=info["runtimeInfo"],
            )
            return


def open_session(
    project: Path, *, headless: bool, role: str | None, socket: Path | None = None
) -> contextlib.AbstractAsyncContextManager[ProjectSession]:
    if headless:
        return headless_session(project, role=role)
    return runtime_session(project, role=role, socket=socket)


async def _start_runtime(path: Path, role: str | None) -> None:
    """Start ``membrane serve`` in the background and wait until the socket answers."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # The runtime's role is what was asked for with --role, never the environment's claim.
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("MEMBRANE_TOKEN", "MEMBRANE_ROLE")
    }
    argv = [sys.executable, "-m", "membrane", "serve", "--socket", str(path)]
    if role is not None:
        argv += ["--role", role]
    log = open(path.with_name(path.name + ".log"), "ab")  # noqa: SIM115 (the child keeps it)
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=env,
            start_new_session=True,
        )
    finally:
        log.close()
    deadline = time.monotonic() + _START_BOUND
    while time.monotonic() < deadline:
        if probe_socket(path):
            return
        if proc.poll() is not None and not probe_socket(path):
            break  # it exited: another runtime may have won the race, checked below
        await anyio.sleep(_POLL)
    if not probe_socket(path):
        raise RuntimeUnavailable(
            f"no runtime answers on {path}, and `membrane serve` started in the background did "
            f"not come up (see {path.with_name(path.name + '.log')})",
            socket=str(path),
            hint="run `membrane doctor`, or pass --headless",
        )


async def _wait_gone(path: Path) -> None:
    deadline = time.monotonic() + _START_BOUND
    while probe_socket(path) and time.monotonic() < deadline:
        await anyio.sleep(_POLL)
