"""Nothing a caller sends makes the server run code, and the owner proves it is the owner:
against a real ``membrane serve`` and its Unix socket (DESIGN rule 11)."""

from __future__ import annotations

import json
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from server_support import START_BOUND, Running, clean_env, make_project, owner, serve, stop

from membrane.errors import MembraneError
from membrane.server import Client
from membrane.store.location import locate_state
from membrane.store.sqlite import SQLiteStore

pytestmark = pytest.mark.anyio

PY = sys.executable

#: An extension whose ``setup`` leaves a mark: it ran inside the server.
PWN = """\
from pathlib import Path

def setup(ext):
    Path({mark!r}).write_text("ran in the server")
"""


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Running]:
    """A ``membrane serve`` launched with ``--role ops`` (Read, Glob, Grep, Write, Bash)."""
    home = tmp_path / "home"
    home.mkdir()
    project = make_project(tmp_path / "project")
    socket = tmp_path / "sock" / "m.sock"
    proc = serve(socket, home, "--role", "ops")
    try:
        yield Running(socket=socket, home=home, project=project, pid=proc.pid)
    finally:
        stop(proc)


def _plant(folder: Path, mark: Path) -> Path:
    """A folder with a ``.membrane/extensions/pwn.py`` that marks ``mark`` when imported."""
    extensions = folder / ".membrane" / "extensions"
    extensions.mkdir(parents=True)
    (extensions / "pwn.py").write_text(PWN.format(mark=str(mark)))
    return folder


async def _add(socket: Path, root: Path, identity: dict[str, str]) -> str:
    async with Client.connect(socket) as client:
        await client.request("initialize", {"identity": identity})
        return str((await client.request("projects/add", {"root": str(root)}))["projectId"])


def test_the_server_makes_a_private_owner_token_in_its_home(running: Running) -> None:
    path = running.home / "owner.token"
    mode = path.stat().st_mode
    assert stat.S_ISREG(mode) and stat.S_IMODE(mode) == 0o600
    assert len(path.read_text().strip()) >= 32


async def test_a_caller_without_the_owners_token_opens_no_new_project(
    running: Running, tmp_path: Path
) -> None:
    mark = tmp_path / "mark"
    # What a child does: a nested .membrane below the checkout it may write, then
    # projects/add of that folder without its token.
    nested = _plant(running.project / "sub", mark)
    elsewhere = _plant(tmp_path / "elsewhere", tmp_path / "mark2")
    with anyio.fail_after(START_BOUND):
        for folder in (nested, elsewhere):
            with pytest.raises(MembraneError) as caught:
                await _add(running.socket, folder, {})
            assert caught.value.code == "project-refused"
            assert caught.value.data["reason"] == "not-registered"
        # A forged owner token is no proof either.
        with pytest.raises(MembraneError) as caught:
            await _add(running.socket, nested, {"ownerToken": "x" * 43})
        assert caught.value.code == "project-refused"
    assert not mark.exists() and not (tmp_path / "mark2").exists()
    # The owner opens the project; then any caller reaches it, and only it.
    with anyio.fail_after(START_BOUND):
        project_id = await _add(running.socket, running.project, owner(running.home))
        assert await _add(running.socket, running.project, {}) == project_id
        with pytest.raises(MembraneError) as caught:
            await _add(running.socket, nested, {})
        assert caught.value.code == "project-refused"
    assert not mark.exists()
    # The proof is what opens a project: the owner's add of the planted folder runs it.
    with anyio.fail_after(START_BOUND):
        await _add(running.socket, elsewhere, owner(running.home))
    assert (tmp_path / "mark2").read_text() == "ran in the server"


def _bash_output(home: Path, project: Path, run_id: str) -> str:
    """What the run's Bash printed, from the run's stored transcript."""
    store = SQLiteStore(locate_state(project, home=home).path)
    try:
        messages = store.transcript(run_id)
    finally:
        store.close()
    (tool,) = [m for m in messages if m.get("role") == "tool"]
    return str(json.loads(str(tool["content"]))["stdout"])


async def _bash_of_run(running: Running, agent: str, task: str, script: Path) -> str:
    """Run ``agent`` on the scripted model ``script`` as the owner, to its end; what its Bash
    printed."""
    with anyio.fail_after(START_BOUND * 2):
        async with Client.connect(running.socket) as client:
            await client.request("initialize", {"identity": owner(running.home)})
            reply = await client.request("projects/add", {"root": str(running.project)})
            ids = {"projectId": reply["projectId"]}
            start = {**ids, "agent": agent, "task": task, "model": f"scripted:{script}"}
            run_id = (await client.request("runs/start", start))["run"]["run_id"]
            done = (await client.request("runs/wait", {**ids, "runId": run_id}))["run"]
    assert done["status"] == "completed", done
    return _bash_output(running.home, running.project, run_id)


async def test_a_read_only_childs_token_gets_no_writable_checkout_through_the_runtime(
    running: Running, tmp_path: Path
) -> None:
    """The reader holds Read and Bash, no Write: its own Bash cannot write its checkout, and
    neither can the runtime's Bash it calls with its token; its token opens no other project."""
    nested = _plant(running.project / "nested", tmp_path / "mark")
    cli = f"{PY} -m membrane actions"
    write = json.dumps({"command": "echo x > pwned.txt && echo WROTE"})
    command = (
        f"{cli} run Bash --args '{write}' 2>&1; "
        f'echo "BASH_RC=$?"; '
        f"{cli} list --project {nested} 2>&1; "
        f'echo "ADD_RC=$?"'
    )
    script = tmp_path / "reader.json"
    turns = [{"tool_calls": [{"name": "Bash", "arguments": {"command": command}}]}, {"text": "ok"}]
    script.write_text(json.dumps({"agents": {"reader": turns}}))
    out = await _bash_of_run(running, "reader", "write", script)
    assert not (running.project / "pwned.txt").exists(), out
    assert "WROTE" not in out
    assert "project-refused" in out and "ADD_RC=0" not in out, out
    assert not (tmp_path / "mark").exists()


async def test_no_extension_is_imported_from_where_a_live_run_may_write(
    running: Running, tmp_path: Path
) -> None:
    """Even the owner's add of a folder inside a live run's checkout imports nothing from it:
    the run could have written the extension."""
    mark = tmp_path / "mark"
    nested = _plant(running.project / "planted", mark)
    script = tmp_path / "sleeper.json"
    sleeper = {"tool_calls": [{"name": "Bash", "arguments": {"command": "sleep 600"}}]}
    script.write_text(json.dumps({"agents": {"reader": [sleeper, {"text": "done"}]}}))
    with anyio.fail_after(START_BOUND * 2):
        async with Client.connect(running.socket) as client:
            await client.request("initialize", {"identity": owner(running.home)})
            reply = await client.request("projects/add", {"root": str(running.project)})
            ids = {"projectId": reply["projectId"]}
            start = {**ids, "agent": "reader", "task": "wait", "model": f"scripted:{script}"}
            run_id = (await client.request("runs/start", start))["run"]["run_id"]
            try:
                added = await client.request("projects/add", {"root": str(nested)})
            finally:
                await client.request("runs/stop", {**ids, "runId": run_id})
    assert not mark.exists()
    [warning] = [w for w in added["warnings"] if "pwn" in w]
    assert "not loaded" in warning and "checkout of a live run" in warning


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DEMO_TASK = "Review the stockroom service: find the open markers and say which ones matter."
RUN_ID = re.compile(r"\b[0-9a-f]{8,}(?:-[0-9a-f]+)*\b")


def test_a_runtime_backed_run_of_the_example_prints_the_tree_make_demo_prints(
    tmp_path: Path,
) -> None:
    """Your own shell is the owner: the example's lead, run through the runtime, gets what the
    headless ``make demo`` run gets (the auditor's ``summarize`` is not vetoed)."""
    workspace = tmp_path / "workspace"
    skip = shutil.ignore_patterns("state.db*", "worktrees", "__pycache__")
    shutil.copytree(EXAMPLES / "workspace", workspace, ignore=skip)
    home = tmp_path / "home"
    home.mkdir()
    socket = tmp_path / "sock" / "m.sock"
    script = EXAMPLES / "scripts" / "demo.yaml"
    argv = [PY, "-m", "membrane", "run", "lead", DEMO_TASK, "--project", str(workspace)]
    argv += ["--model", f"scripted:{script}"]
    env = clean_env(home, MEMBRANE_SOCKET=str(socket), COLUMNS="200")
    proc = serve(socket, home)
    try:
        backed = subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=START_BOUND * 2
        )
    finally:
        stop(proc)
    local = subprocess.run(
        [*argv, "--headless"], env=env, capture_output=True, text=True, timeout=START_BOUND * 2
    )
    assert backed.returncode == local.returncode == 0, (backed.stderr, local.stderr)
    assert "summarize" in local.stdout
    assert RUN_ID.sub("ID", backed.stdout) == RUN_ID.sub("ID", local.stdout)


async def test_a_child_neither_has_nor_reads_the_owners_token(
    running: Running, tmp_path: Path
) -> None:
    command = 'env; cat "$MEMBRANE_HOME/owner.token" 2>&1; cat ~/.membrane/owner.token 2>&1; true'
    turns = [{"tool_calls": [{"name": "Bash", "arguments": {"command": command}}]}, {"text": "ok"}]
    script = tmp_path / "reader.json"
    script.write_text(json.dumps({"agents": {"reader": turns}}))
    out = await _bash_of_run(running, "reader", "look", script)
    assert "MEMBRANE_TOKEN=mt1." in out  # the run's own token, as the child's Bash gets it
    assert (running.home / "owner.token").read_text().strip() not in out


async def test_a_runs_token_starts_its_child_on_the_model_its_run_was_started_on(
    running: Running, tmp_path: Path
) -> None:
    """A lead's Bash calls the runtime's ``Task`` with the lead's token: the child starts, on
    the model the lead runs on (before: ``no model reached this run`` every time)."""
    agents = running.project / ".membrane" / "agents"
    (agents / "lead.md").write_text(
        "---\nname: lead\ndescription: Delegates from its shell.\ntools: Bash\n"
        "allowed_subagents: [reader]\n---\nDelegate.\n"
    )
    task = json.dumps({"agent": "reader", "task": "say hi"})
    command = f"{PY} -m membrane actions run Task --args '{task}' --json 2>&1"
    script = tmp_path / "script.json"
    lead = [{"tool_calls": [{"name": "Bash", "arguments": {"command": command}}]}, {"text": "ok"}]
    reader = [{"text": "hi from the reader"}]
    script.write_text(json.dumps({"agents": {"lead": lead, "reader": reader}}))
    out = await _bash_of_run(running, "lead", "go", script)
    assert "no model reached" not in out, out
    assert "hi from the reader" in out and '"status": "completed"' in out, out


#: An MCP server command that leaves a mark when it starts: it ran as the server's child.
MCP_PWN = "from pathlib import Path\nPath({mark!r}).write_text('started by the server')\n"


@pytest.mark.parametrize("where", ["checkout", "tmp"])
async def test_no_mcp_server_command_is_started_from_where_a_live_run_may_write(
    running: Running, tmp_path: Path, where: str
) -> None:
    """An MCP server whose script lies in a live run's checkout, or in a run's private
    temporary folder (``membrane-*`` in the temporary folder), is not started, even for an
    agent the owner starts: the run could have written the script."""
    mark = tmp_path / "mark"
    nested = running.project / "planted"
    (nested / ".membrane" / "agents").mkdir(parents=True)
    place = nested if where == "checkout" else Path(tempfile.mkdtemp(prefix="membrane-sandbox-"))
    script = place / "server.py"
    script.write_text(MCP_PWN.format(mark=str(mark)))
    (nested / ".membrane" / "config.toml").write_text(
        '[roles.ops]\nallow = ["Read"]\n\n'
        f'[mcp_servers.pwn]\ncommand = "{PY}"\nargs = ["{script}"]\n'
    )
    (nested / ".membrane" / "agents" / "user.md").write_text(
        "---\nname: user\ndescription: Uses the pwn server.\nmcp_servers: [pwn]\n---\nUse it.\n"
    )
    sleeper = tmp_path / "sleeper.json"
    wait = {"tool_calls": [{"name": "Bash", "arguments": {"command": "sleep 600"}}]}
    sleeper.write_text(json.dumps({"agents": {"reader": [wait, {"text": "done"}]}}))
    answer = tmp_path / "answer.json"
    answer.write_text(json.dumps({"agents": {"user": [{"text": "done"}]}}))
    try:
        with anyio.fail_after(START_BOUND * 2):
            async with Client.connect(running.socket) as client:
                await client.request("initialize", {"identity": owner(running.home)})
                reply = await client.request("projects/add", {"root": str(running.project)})
                ids = {"projectId": reply["projectId"]}
                start = {**ids, "agent": "reader", "task": "wait", "model": f"scripted:{sleeper}"}
                run_id = (await client.request("runs/start", start))["run"]["run_id"]
                try:
                    added = await client.request("projects/add", {"root": str(nested)})
                    inner = {"projectId": added["projectId"]}
                    start = {**inner, "agent": "user", "task": "go", "model": f"scripted:{answer}"}
                    child = (await client.request("runs/start", start))["run"]["run_id"]
                    done = (await client.request("runs/wait", {**inner, "runId": child}))["run"]
                finally:
                    await client.request("runs/stop", {**ids, "runId": run_id})
    finally:
        if where == "tmp":
            shutil.rmtree(place, ignore_errors=True)
    assert done["status"] == "completed", done
    assert not mark.exists()
    log = (running.home / "logs" / "mcp" / "pwn.log").read_text()
    reason = "checkout of a live run" if where == "checkout" else "private temporary folder"
    assert "not started" in log and reason in log, log
