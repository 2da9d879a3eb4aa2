"""A child's own ``membrane`` commands reach the runtime from a Landlock-sandboxed ``Bash``,
which may make no Unix socket of its own: through the connector Membrane hands it
(``$MEMBRANE_SOCKET_FD``), one connection per command, several side by side."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import anyio
import pytest
from server_support import START_BOUND, make_project, owner, register, serve, stop

from membrane.sandbox import machine_support
from membrane.server import Client
from membrane.store.location import locate_state
from membrane.store.sqlite import SQLiteStore

PY = sys.executable


def _script(tmp: Path, bus: Path) -> Path:
    """The reader's one turn: two ``membrane actions run Read`` at once and one after, and a
    connection to the stand-in bus outside, all from one ``Bash`` call."""
    read = f'{PY} -m membrane actions run Read --args \'{{"file_path": "notes.txt"}}\''
    leak = (
        f"{PY} -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{bus}'); "
        "s.send(b'leak')\""
    )
    command = f"({read}) & ({read}) & wait; {read}; {leak}; echo done"
    turn = {"tool_calls": [{"name": "Bash", "arguments": {"command": command}}]}
    script = tmp / "reader.yaml"
    script.write_text(json.dumps({"agents": {"reader": [turn, {"text": "ok"}]}}))
    return script


async def _run_reader(socket_path: Path, home: Path, project: Path, script: Path) -> tuple:  # type: ignore[type-arg]
    """Start the reader through the socket as the owner; ``(run id, its final run)``."""
    with anyio.fail_after(START_BOUND * 2):
        async with Client.connect(socket_path) as client:
            await client.request("initialize", {"identity": owner(home)})
            added = await client.request("projects/add", {"root": str(project)})
            ids = {"projectId": added["projectId"]}
            started = await client.request(
                "runs/start",
                {**ids, "agent": "reader", "task": "read", "model": f"scripted:{script}"},
            )
            run_id = started["run"]["run_id"]
            return run_id, (await client.request("runs/wait", {**ids, "runId": run_id}))["run"]


def test_a_landlock_childs_membrane_commands_reach_the_runtime_and_nothing_else(
    tmp_path: Path,
) -> None:
    support = machine_support()
    if not support.landlock_abi:
        pytest.skip(support.landlock_reason)
    home = tmp_path / "home"
    home.mkdir()
    project = make_project(tmp_path / "project")
    config = project / ".membrane" / "config.toml"
    config.write_text('sandbox = "landlock"\n' + config.read_text())
    socket_path = tmp_path / "sock" / "m.sock"
    bus_path = tmp_path / "run" / "bus"
    bus_path.parent.mkdir()
    proc = serve(socket_path, home, "--role", "ops")
    try:
        register(socket_path, home, project)
        with socket.socket(socket.AF_UNIX) as bus:
            bus.bind(str(bus_path))
            bus_path.chmod(0o777)
            bus.listen(4)
            bus.settimeout(0)
            script = _script(tmp_path, bus_path)
            run_id, done = anyio.run(_run_reader, socket_path, home, project, script)
            with pytest.raises(BlockingIOError):
                bus.accept()
    finally:
        stop(proc)
    assert done["status"] == "completed", done
    store = SQLiteStore(locate_state(project, home=home).path)
    try:
        (tool,) = [m for m in store.transcript(run_id) if m.get("role") == "tool"]
    finally:
        store.close()
    result = json.loads(str(tool["content"]))
    assert str(result["stdout"]).count("alpha") == 3, result
    assert "done" in str(result["stdout"]), result
