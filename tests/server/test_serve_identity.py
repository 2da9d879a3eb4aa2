"""Roles and tokens against real ``membrane serve`` processes (DESIGN rule 11)."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from server_support import START_BOUND, Running, clean_env, make_project, owner

from membrane.errors import MembraneError, RuntimeUnavailable
from membrane.server import Client
from membrane.store.location import locate_state
from membrane.store.sqlite import SQLiteStore

pytestmark = pytest.mark.anyio

PY = sys.executable


@pytest.fixture(scope="module")
def ops(ops_runtime: Running) -> tuple[Path, Path, Path]:
    """A runtime launched with ``--role ops``: (socket, home, project)."""
    return ops_runtime.socket, ops_runtime.home, ops_runtime.project


async def _list(socket: Path, project: Path, identity: dict[str, str]) -> tuple[dict, list[str]]:  # type: ignore[type-arg]
    async with Client.connect(socket) as client:
        info = await client.request("initialize", {"identity": identity})
        ids = {
            "projectId": (await client.request("projects/add", {"root": str(project)}))["projectId"]
        }
        listed = await client.request("actions/list", {"projectId": ids["projectId"]})
    return info["caller"], [action["name"] for action in listed["actions"]]


async def test_two_roles_see_and_run_what_their_role_allows(
    runtime: Running, ops: tuple[Path, Path, Path]
) -> None:
    with anyio.fail_after(START_BOUND):
        external, external_names = await _list(runtime.socket, runtime.project, {})
        elevated, ops_names = await _list(ops[0], ops[2], owner(ops[1]))
    assert external["role"] == "external" and external_names == ["Glob", "Grep", "Read"]
    assert elevated["role"] == "ops" and ops_names == ["Bash", "Glob", "Grep", "Read", "Write"]
    with anyio.fail_after(START_BOUND):
        for socket, project, identity in (
            (runtime.socket, runtime.project, {}),
            (ops[0], ops[2], owner(ops[1])),
        ):
            allowed = bool(identity)
            async with Client.connect(socket) as client:
                await client.request("initialize", {"identity": identity})
                ids = {
                    "projectId": (await client.request("projects/add", {"root": str(project)}))[
                        "projectId"
                    ]
                }
                call = {
                    **ids,
                    "name": "Write",
                    "arguments": {"file_path": "w.txt", "content": "hi"},
                }
                if allowed:
                    await client.request("actions/call", call)
                    assert (project / "w.txt").read_text() == "hi"
                else:
                    with pytest.raises(MembraneError) as caught:
                        await client.request("actions/call", call)
                    assert caught.value.code == "tool-not-visible"
                    assert not (project / "w.txt").exists()


async def test_the_external_role_reads_only_inside_the_project(runtime: Running) -> None:
    """A caller that proves nothing reads the project through Read, Glob and Grep, and nothing
    outside it: not the system's folders every child reads, not the read roots."""
    outside = [
        ("Read", {"file_path": "/etc/passwd"}),
        ("Read", {"file_path": "../home/outside.txt"}),
        ("Glob", {"pattern": "*", "path": "/etc"}),
        ("Grep", {"pattern": "root", "path": "/etc/passwd"}),
    ]
    (runtime.home / "outside.txt").write_text("beyond the project\n")
    with anyio.fail_after(START_BOUND):
        async with Client.connect(runtime.socket) as client:
            info = await client.request("initialize", {"identity": {}})
            assert info["caller"]["role"] == "external"
            added = await client.request("projects/add", {"root": str(runtime.project)})
            ids = {"projectId": added["projectId"]}
            inside = await client.request(
                "actions/call", {**ids, "name": "Read", "arguments": {"file_path": "notes.txt"}}
            )
            assert "alpha" in json.dumps(inside)
            for name, arguments in outside:
                with pytest.raises(MembraneError) as caught:
                    await client.request(
                        "actions/call", {**ids, "name": name, "arguments": arguments}
                    )
                assert caught.value.code == "path-outside-checkout", (name, arguments)
                assert "reads only inside the checkout" in str(caught.value)


async def test_a_role_claimed_in_initialize_changes_nothing(runtime: Running) -> None:
    with anyio.fail_after(START_BOUND):
        caller, names = await _list(
            runtime.socket, runtime.project, {"role": "ops", "runId": "r-1"}
        )
    assert caller == {"role": "external", "sessionId": None, "runId": None, "owner": False}
    assert names == ["Glob", "Grep", "Read"]


def test_a_forged_role_in_the_cli_environment_gets_the_default_role(
    runtime: Running, tmp_path: Path
) -> None:
    # A process that cannot read the owner's token (here: another Membrane home).
    env = clean_env(tmp_path, MEMBRANE_SOCKET=str(runtime.socket), MEMBRANE_ROLE="ops")
    done = subprocess.run(
        [PY, "-m", "membrane", "actions", "list", "--json", "--project", str(runtime.project)],
        env=env,
        capture_output=True,
        text=True,
        timeout=START_BOUND,
    )
    assert done.returncode == 0, done.stderr
    names = [action["name"] for action in json.loads(done.stdout)["actions"]]
    assert names == ["Glob", "Grep", "Read"]
    forged = clean_env(
        runtime.home, MEMBRANE_SOCKET=str(runtime.socket), MEMBRANE_TOKEN="mt1.e30.00"
    )  # a token, even a forged one, means no owner's token is presented
    done = subprocess.run(
        [PY, "-m", "membrane", "actions", "list", "--project", str(runtime.project)],
        env=forged,
        capture_output=True,
        text=True,
        timeout=START_BOUND,
    )
    assert done.returncode == 3 and "token-invalid" in done.stderr


def _bash_script(tmp: Path) -> Path:
    """The reader's one turn: show its token, list its actions and try Write, all through the
    CLI from its own Bash (a read-only child: its sandbox lets it write no file), then finish."""
    cli = f"{PY} -m membrane actions"
    command = (
        'echo "TOKEN=$MEMBRANE_TOKEN"; '
        f'echo "LIST=$({cli} list --json 2>&1)"; '
        f'{cli} run Write --args \'{{"file_path": "hacked.txt", "content": "x"}}\' 2>&1; '
        'echo "WRITE_RC=$?"; '
        f'{cli} run Read --args \'{{"file_path": "notes.txt"}}\' 2>&1'
    )
    script = tmp / "reader.yaml"
    script.write_text(
        json.dumps(
            {
                "agents": {
                    "reader": [
                        {"tool_calls": [{"name": "Bash", "arguments": {"command": command}}]},
                        {"text": "done"},
                    ]
                }
            }
        )
    )
    return script


def _bash_output(home: Path, project: Path, run_id: str) -> str:
    """What the run's Bash printed, from the run's stored transcript."""
    store = SQLiteStore(locate_state(project, home=home).path)
    try:
        messages = store.transcript(run_id)
    finally:
        store.close()
    (tool,) = [m for m in messages if m.get("role") == "tool"]
    result = json.loads(str(tool["content"]))
    return str(result["stdout"])


async def test_a_childs_bash_is_bound_by_the_childs_view_and_its_token_dies_with_the_run(
    ops: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    socket, home, project = ops
    script = _bash_script(tmp_path)
    with anyio.fail_after(START_BOUND * 2):
        async with Client.connect(socket) as client:
            await client.request("initialize", {"identity": owner(home)})
            reply = await client.request("projects/add", {"root": str(project)})
            ids = {"projectId": reply["projectId"]}
            started = await client.request(
                "runs/start",
                {**ids, "agent": "reader", "task": "look around", "model": f"scripted:{script}"},
            )
            run_id = started["run"]["run_id"]
            done = (await client.request("runs/wait", {**ids, "runId": run_id}))["run"]
    assert done["status"] == "completed", done
    out = _bash_output(home, project, run_id)
    lines = dict(line.split("=", 1) for line in out.splitlines() if "=" in line[:9])
    assert lines.get("LIST", "").startswith("{"), out
    listed = json.loads(lines["LIST"])
    # The child's own view (its definition's Read and Bash, within the ops role): not Write.
    assert [action["name"] for action in listed["actions"]] == ["Bash", "Read"]
    assert lines["WRITE_RC"] == "3"
    assert "tool-not-visible" in out
    assert not (project / "hacked.txt").exists()
    assert "alpha" in out  # Read through the socket, in the child's view, worked
    token = lines["TOKEN"]
    assert token.startswith("mt1.")
    # Replayed after its run ended: refused.
    with anyio.fail_after(START_BOUND):
        async with Client.connect(socket) as client:
            with pytest.raises(MembraneError) as caught:
                await client.request("initialize", {"identity": {"token": token}})
    assert caught.value.code == "token-invalid"


#: Run by a child's Bash: its own token, over the socket, on its own run's planning gate.
_GATE_CLIENT = """
import anyio, os
from membrane.server import Client
from membrane.server.transport import default_socket_path

async def main():
    env = os.environ
    async with Client.connect(default_socket_path()) as client:
        info = await client.request("initialize", {"identity": {"token": env["MEMBRANE_TOKEN"]}})
        print("CALLER=" + str(info["caller"]["runId"] == env["MEMBRANE_RUN_ID"]))
        added = await client.request("projects/add", {"root": env["MEMBRANE_PROJECT"]})
        at = {"projectId": added["projectId"], "runId": env["MEMBRANE_RUN_ID"]}
        asks = (
            ("GET", "workflow/get", {}),
            ("APPROVE", "workflow/answer", {"answer": "approve"}),
            ("WAIVE", "workflow/answer", {"answer": "waive", "value": "extras"}),
        )
        for label, method, extra in asks:
            try:
                await client.request(method, {**at, **extra})
                print(label + "=answered")
            except Exception as exc:
                print(label + "=" + str(getattr(exc, "code", type(exc).__name__)))

anyio.run(main)
"""


async def test_a_runs_token_can_neither_read_nor_answer_a_planning_gate(
    ops: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    socket, home, project = ops
    code = base64.b64encode(_GATE_CLIENT.encode()).decode()
    command = f"{PY} -c \"import base64; exec(base64.b64decode('{code}'))\" 2>&1"
    script = tmp_path / "reader.json"
    turns = [{"tool_calls": [{"name": "Bash", "arguments": {"command": command}}]}, {"text": "ok"}]
    script.write_text(json.dumps({"agents": {"reader": turns}}))
    with anyio.fail_after(START_BOUND * 2):
        async with Client.connect(socket) as client:
            await client.request("initialize", {"identity": owner(home)})
            reply = await client.request("projects/add", {"root": str(project)})
            ids = {"projectId": reply["projectId"]}
            start = {**ids, "agent": "reader", "task": "ask", "model": f"scripted:{script}"}
            run_id = (await client.request("runs/start", start))["run"]["run_id"]
            done = (await client.request("runs/wait", {**ids, "runId": run_id}))["run"]
            # The host (no token) reads the same gate.
            shown = await client.request("workflow/get", {**ids, "runId": run_id})
    assert done["status"] == "completed", done
    out = _bash_output(home, project, run_id)
    lines = dict(line.split("=", 1) for line in out.splitlines() if "=" in line[:9])
    # The token was live and bound to its run; only the gate was refused to it.
    assert lines.get("CALLER") == "True", out
    assert (lines["GET"], lines["APPROVE"], lines["WAIVE"]) == ("caller-refused",) * 3, out
    assert shown["workflow"]["waived_rounds"] == []


async def test_a_cli_inside_a_run_never_starts_a_runtime(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    project = make_project(tmp_path / "project")
    socket = tmp_path / "sock" / "m.sock"
    env = clean_env(home, MEMBRANE_SOCKET=str(socket), MEMBRANE_TOKEN="mt1.e30.00")
    done = subprocess.run(
        [PY, "-m", "membrane", "actions", "list", "--project", str(project)],
        env=env,
        capture_output=True,
        text=True,
        timeout=START_BOUND,
    )
    assert done.returncode == 3 and RuntimeUnavailable.code in done.stderr
    assert not socket.exists()
