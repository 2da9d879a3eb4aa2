"""How a project command reaches Membrane: runtime-backed (the default) or ``--headless``.

Runtime-backed: connect to the machine runtime's socket, ``initialize`` with the caller's
identity (its environment's, and outside a run the owner's token from
``$MEMBRANE_HOME/owner.token``, which makes it the owner), and register the project. When no
runtime answers, start ``membrane serve --idle-exit SECONDS`` in the background (detached, in
a session of its own, its output appended to ``$MEMBRANE_HOME/logs/serve.log``) and wait
until it answers; it exits by itself after ``$MEMBRANE_IDLE_EXIT`` seconds (default 300) with
no connection and no run in flight, and the next command starts another. The socket's lock
settles a race between two commands starting one: exactly one binds, both use it. The owner
acts under the role it names (``--role``, else its ``MEMBRANE_ROLE``), else the runtime's
owner role, else its own authority, as a headless command would; the runtime is never
restarted for a role. A command run inside a run (``MEMBRANE_TOKEN`` set) never starts a
runtime and presents no owner's token: its token binds it to its run's view, and ``--role``
is ignored.

Headless (``--headless``, or ``MEMBRANE_HEADLESS=1`` in the environment outside a run): the
same project services (``ProjectHost``) bootstrapped in this process for one command. Its role
is ``--role``, else ``MEMBRANE_ROLE``, else none: the command runs with the person's own
authority in their own process. Inside a run ``--headless`` is refused and
``MEMBRANE_HEADLESS`` ignored, since only the runtime can honour the run's token.

Both give a ``ProjectSession`` whose client calls the same methods (``membrane.server.methods``):
over the socket, or in this process through ``membrane.server.direct``, so every command makes
the same calls and has one formatter.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import anyio

import membrane
from membrane.cli.model_choice import parse_model
from membrane.config.load import membrane_home
from membrane.errors import InvalidRequest, ProtocolError, RuntimeUnavailable
from membrane.json_types import JSONDict
from membrane.runtime import LifecycleEvent, RunInfo, RunResult
from membrane.server import Caller, Client, ProjectHost, TokenBook, identity_from_env
from membrane.server.approval import APPROVAL_CAPABILITY, APPROVAL_METHOD, answering
from membrane.server.client import own_identity
from membrane.server.direct import LocalServer, Requests, direct_client
from membrane.server.server import build_hash
from membrane.server.transport import default_socket_path, probe_socket
from membrane.tools.permissions import Approver
from membrane.workspace import Workspace, require_folder

__all__ = [
    "HEADLESS_ENV",
    "IDLE_EXIT_ENV",
    "ProjectSession",
    "RunFollower",
    "headless_session",
    "open_session",
    "runtime_backed",
    "runtime_session",
]

#: Set to ``1`` to make every project command headless outside a run (as ``--headless``).
HEADLESS_ENV: Final = "MEMBRANE_HEADLESS"
#: Seconds a runtime started in the background stays up idle (``0``: until stopped).
IDLE_EXIT_ENV: Final = "MEMBRANE_IDLE_EXIT"
_IDLE_EXIT_DEFAULT: Final = 300.0
#: How long a runtime started in the background may take to answer.
_START_BOUND: Final = 30.0
_POLL: Final = 0.05


@dataclass
class ProjectSession:
    """One project, reached one way or the other: ``client`` is the runtime's socket
    (``Client``) or the same methods called in this process (``DirectClient``)."""

    project: Path
    caller: JSONDict
    client: Requests
    project_id: str
    runtime_info: JSONDict
    #: What the project's workspace skipped (broken files, extensions), for the formatters.
    warnings: tuple[str, ...] = ()

    async def call(self, method: str, params: JSONDict | None = None) -> Any:
        """``method`` on this session's project (``projectId`` added to ``params``)."""
        return await self.client.request(method, {"projectId": self.project_id, **(params or {})})

    async def list_actions(self) -> list[JSONDict]:
        return list((await self.call("actions/list"))["actions"])

    async def follow(
        self, method: str, params: JSONDict
    ) -> tuple[RunFollower, Callable[[], Awaitable[RunInfo]]]:
        """Subscribe to the project's events, and give how to start (``runs/start`` or
        ``runs/resume`` with ``params``), follow, stop and await the run on the runtime."""
        return await _remote_follow(self.client, self.project_id, method, params)

    async def call_action(self, name: str, arguments: JSONDict) -> Any:
        return (await self.call("actions/call", {"name": name, "arguments": arguments}))["result"]


async def _session(client: Requests, root: Path, info: Any) -> ProjectSession:
    """The session on ``root`` (``projects/add``) of a client ``initialize`` answered with
    ``info``: the same calls on either path."""
    reply = await client.request("projects/add", {"root": str(root)})
    return ProjectSession(
        project=root,
        caller=info["caller"],
        client=client,
        project_id=reply["projectId"],
        runtime_info=info["runtimeInfo"],
        warnings=tuple(str(w) for w in reply.get("warnings", ())),
    )


def _hello() -> JSONDict:
    return {"clientInfo": {"name": "membrane-cli", "version": membrane.__version__}}


@dataclass
class RunFollower:
    """How to follow a run, wherever it runs: its event ``stream`` (opened before the start,
    so the ``published`` event is never missed), and how to ``stop`` it and ``wait`` for its
    result. In process these are the runtime's; runtime-backed, the machine runtime's methods
    over its socket (``ProjectSession.follow``)."""

    stream: AsyncIterator[LifecycleEvent]
    stop: Callable[[str], Awaitable[object]]
    wait: Callable[[str], Awaitable[RunResult]]


async def _remote_follow(
    client: Requests, project_id: str, method: str, params: JSONDict
) -> tuple[RunFollower, Callable[[], Awaitable[RunInfo]]]:
    ids: JSONDict = {"projectId": project_id}
    await client.request("events/subscribe", ids)
    root: list[str] = []

    async def start() -> RunInfo:
        run = (await client.request(method, {**ids, **params}))["run"]
        root.append(str(run["run_id"]))
        return RunInfo(
            run_id=str(run["run_id"]),
            agent=str(run["agent"]),
            agent_type=str(run["agent"]),
            parent_id=run.get("parent_id"),
            depth=int(run.get("depth", 0)),
            status=str(run.get("status", "running")),
            background=bool(run.get("background")),
            provider="",
        )

    async def stream() -> AsyncIterator[LifecycleEvent]:
        # The project's events, kept to the started run's tree (others may run beside it).
        mine: set[str] = set(root)
        async for note in client.notifications:
            if note.method != "events/event":
                continue
            raw = note.params.get("event")
            if not isinstance(raw, dict):
                continue
            event = LifecycleEvent(**raw)
            if event.kind == "published" and event.parent_id in mine:
                mine.add(event.run_id)
            if event.run_id in mine:
                yield event

    async def stop(run_id: str) -> object:
        return await client.request("runs/stop", {**ids, "runId": run_id})

    async def wait(run_id: str) -> RunResult:
        run = (await client.request("runs/wait", {**ids, "runId": run_id}))["run"]
        return RunResult.from_dict(run["result"])

    return RunFollower(stream=stream(), stop=stop, wait=wait), start


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
    server = LocalServer(host, Caller(role=requested_role(role)))
    async with anyio.create_task_group() as group:
        await group.start(host.run)
        try:
            async with direct_client(server) as client:
                info = await client.request("initialize", _hello())
                yield await _session(client, workspace.project, info)
        finally:
            await host.close()


@contextlib.asynccontextmanager
async def runtime_session(
    project: Path, *, role: str | None, socket: Path | None = None, approver: Approver | None = None
) -> AsyncIterator[ProjectSession]:
    """A session on the machine runtime; ``approver`` answers the ``approval/request`` the
    runtime sends for the runs this session starts (the client says so in ``initialize``)."""
    root = require_folder("--project", project)
    path = socket if socket is not None else default_socket_path()
    inside_run = "token" in identity_from_env()
    for attempt in range(3):
        if not inside_run and not probe_socket(path):
            await _start_runtime(path)
        async with contextlib.AsyncExitStack() as stack:
            try:
                client = await stack.enter_async_context(Client.connect(path))
                # Read once the runtime is up: the first one makes the owner's token.
                identity = own_identity()
                if role is not None and not inside_run:
                    identity["role"] = role  # the owner names its role; a run's token cannot
                hello: JSONDict = {**_hello(), "identity": identity}
                if approver is not None:
                    client.answer(APPROVAL_METHOD, answering(approver))
                    hello["capabilities"] = {APPROVAL_CAPABILITY: True}
                info = await client.request("initialize", hello)
                stale = None if inside_run else await _stop_if_stale(client, info)
            except (RuntimeUnavailable, ProtocolError):
                # An idle runtime may exit between the probe and the connect: start another.
                if inside_run or attempt == 2:
                    raise
                continue
            if stale is None:
                yield await _session(client, root, info)
                return
        await _gone(stale)
    raise RuntimeUnavailable(
        f"no runtime stays up on {path}", socket=str(path), hint="run `membrane doctor`"
    )


async def _stop_if_stale(client: Client, info: Any) -> int | None:
    """The pid of the runtime that answered when it runs another build of Membrane than this
    command (seed 002) and was asked to stop (it is idle); ``None`` when it is this build. A
    busy one refuses (``runtime-build-mismatch``). A run's own command never asks: the runtime
    that launched it is the one it must reach."""
    runtime = info.get("runtimeInfo") if isinstance(info, dict) else None
    runtime = runtime if isinstance(runtime, dict) else {}
    mine = build_hash()
    if runtime.get("buildHash") == mine:
        return None
    await client.request("runtime/shutdown", {"buildHash": mine})
    pid = runtime.get("pid")
    return pid if isinstance(pid, int) else 0


async def _gone(pid: int) -> None:
    """Wait (bounded) until process ``pid`` has exited, so its socket and lock are free."""
    deadline = time.monotonic() + _START_BOUND
    while pid > 0 and time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        except PermissionError:
            return  # not this user's process: nothing to wait for
        await anyio.sleep(_POLL)


def headless_by_default() -> bool:
    """Whether ``MEMBRANE_HEADLESS`` makes commands headless (ignored inside a run)."""
    value = os.environ.get(HEADLESS_ENV, "").strip().lower()
    off = value in ("", "0", "false", "no", "off")
    return not (off or os.environ.get("MEMBRANE_TOKEN"))


def runtime_backed(*, headless: bool, local_only: bool = False) -> bool:
    """Whether a project command goes through the machine runtime (starting one when none
    answers): always inside a run (``MEMBRANE_TOKEN``: only the runtime can honour it), and
    otherwise unless ``--headless``, ``MEMBRANE_HEADLESS`` or an option only this process can
    serve (``local_only``: ``--state``, ``--workspace``) keeps it here."""
    if os.environ.get("MEMBRANE_TOKEN"):
        return True
    return not (headless or local_only or headless_by_default())


def open_session(
    project: Path, *, headless: bool, role: str | None, socket: Path | None = None
) -> contextlib.AbstractAsyncContextManager[ProjectSession]:
    if headless or headless_by_default():
        return headless_session(project, role=role)
    return runtime_session(project, role=role, socket=socket)


def _idle_exit() -> float | None:
    raw = os.environ.get(IDLE_EXIT_ENV, "").strip()
    if not raw:
        return _IDLE_EXIT_DEFAULT
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0 or seconds == float("inf"):
        raise InvalidRequest(
            f"{IDLE_EXIT_ENV} must be a number of seconds (0: stay up until stopped), "
            f"not {raw[:40]!r}",
            field=IDLE_EXIT_ENV,
        )
    return seconds or None


async def _start_runtime(path: Path) -> None:
    """Start ``membrane serve`` in the background and wait until the socket answers."""
    idle = _idle_exit()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # The runtime's owner role is its settings' (each owner's command names its own).
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("MEMBRANE_TOKEN", "MEMBRANE_ROLE")
    }
    argv = [sys.executable, "-m", "membrane", "serve", "--socket", str(path)]
    if idle is not None:
        argv += ["--idle-exit", repr(idle)]
    logs = membrane_home() / "logs"
    logs.mkdir(mode=0o700, parents=True, exist_ok=True)
    log_path = logs / "serve.log"
    log = open(log_path, "ab")  # noqa: SIM115 (the child keeps it)
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=env,
            cwd=logs,
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
            f"not come up (see {log_path})",
            socket=str(path),
            hint="run `membrane doctor`, or pass --headless",
        )
