from __future__ import annotations

import os
import uuid
from pathlib import Path

import anyio
import pytest

from membrane.builtin_tools.bash import bash_tool
from membrane.errors import PathOutsideCheckout, ToolArgumentsInvalid, ToolSpecError
from membrane.sandbox import SandboxPolicy
from membrane.tools.spec import Tool, ToolContext

from .conftest import call

pytestmark = pytest.mark.anyio


GUARD = bash_tool(sandbox=SandboxPolicy(choice="guard"))


def _marked(marker: str) -> bool:
    """Whether a live process (not a zombie) runs as ``marker`` (its ``argv[0]``).

    Processes are found by a marker, not a pid: inside a PID namespace ``$!`` is not the pid
    this process sees."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if cmdline.startswith(marker.encode()) and stat.rpartition(")")[2].split()[0] != "Z":
            return True
    return False


async def _wait_until_gone(marker: str) -> None:
    with anyio.fail_after(10):
        while _marked(marker):
            await anyio.sleep(0.02)


async def _wait_until_running(marker: str) -> None:
    with anyio.fail_after(10):
        while not _marked(marker):
            await anyio.sleep(0.02)


def _sandboxed(backend: str) -> Tool:
    return bash_tool(sandbox=SandboxPolicy(choice=backend))  # type: ignore[arg-type]


def _marker() -> str:
    return f"membrane-test-{uuid.uuid4().hex}"


async def test_bash_returns_exit_code_stdout_and_stderr(context: ToolContext) -> None:
    result = await call("Bash", {"command": "echo out; echo err >&2; exit 3"}, context)
    assert result == {"exit_code": 3, "stdout": "out\n", "stderr": "err\n"}


async def test_bash_runs_in_the_checkout(checkout: Path, context: ToolContext) -> None:
    # A file in a folder of the checkout: under Landlock (the sandbox where no bwrap is) a new
    # top-level entry cannot be made (tests/sandbox/test_escapes.py pins that per backend).
    (checkout / "sub").mkdir()
    result = await call("Bash", {"command": "pwd; echo hi > sub/made.txt"}, context)
    assert result["stdout"] == f"{checkout}\n"
    assert (checkout / "sub" / "made.txt").read_text() == "hi\n"


async def test_bash_gives_the_command_no_stdin(context: ToolContext) -> None:
    with anyio.fail_after(20):
        result = await call("Bash", {"command": "cat; echo done"}, context)
    assert result["stdout"] == "done\n"


async def test_bash_timeout_kills_the_whole_process_group(
    any_sandbox: str, context: ToolContext
) -> None:
    marker = _marker()
    command = f"(exec -a {marker} sleep 60) & sleep 60"
    result = await _sandboxed(any_sandbox).handler({"command": command, "timeout": 1.5}, context)
    assert result["timed_out"] is True
    assert result["exit_code"] is None
    assert "killed" in result["note"]
    await _wait_until_gone(marker)


async def test_background_processes_do_not_outlive_the_command(
    any_sandbox: str, context: ToolContext
) -> None:
    marker = _marker()
    with anyio.fail_after(20):
        result = await _sandboxed(any_sandbox).handler(
            {"command": f"(exec -a {marker} sleep 60) & echo started"}, context
        )
    assert result["exit_code"] == 0 and result["stdout"] == "started\n"
    await _wait_until_gone(marker)


@pytest.mark.parametrize(
    "detach",
    [
        "setsid -f bash -c 'exec -a {m} sleep 60'",
        "nohup bash -c 'exec -a {m} sleep 60' >/dev/null 2>&1 &",
        "( ( exec -a {m} sleep 60 ) & ) ; sleep 0",
        "setsid bash -c '( exec -a {m} sleep 60 ) &'",
    ],
    ids=["setsid-f", "nohup", "double-fork", "setsid-double-fork"],
)
async def test_detached_processes_do_not_outlive_an_os_sandboxed_command(
    os_sandbox: str, detach: str, context: ToolContext
) -> None:
    marker = _marker()
    with anyio.fail_after(20):
        result = await _sandboxed(os_sandbox).handler(
            {"command": detach.format(m=marker) + "\nsleep 0.3; echo started"}, context
        )
    assert result["exit_code"] == 0 and result["stdout"] == "started\n", result
    await _wait_until_gone(marker)


async def test_cancelling_a_bash_call_kills_its_processes_and_is_not_swallowed(
    any_sandbox: str, context: ToolContext
) -> None:
    outcome: list[str] = []
    marker = _marker()

    async def run() -> None:
        try:
            await _sandboxed(any_sandbox).handler(
                {"command": f"(exec -a {marker} sleep 60) & wait"}, context
            )
        except anyio.get_cancelled_exc_class():
            outcome.append("cancelled")
            raise
        outcome.append("returned")

    with anyio.fail_after(20):
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            await _wait_until_running(marker)
            group.cancel_scope.cancel()
    assert outcome == ["cancelled"]
    await _wait_until_gone(marker)


async def test_bash_bounds_output_and_says_how_much_was_dropped(context: ToolContext) -> None:
    tool = bash_tool(max_output=1000)
    command = "head -c 100000 /dev/zero | tr '\\0' a; echo; echo END"
    result = await tool.handler({"command": command}, context)
    assert result["exit_code"] == 0
    assert len(result["stdout"]) < 1300
    assert "bytes of output omitted (of 100005)" in result["stdout"]
    assert result["stdout"].startswith("a" * 500)
    assert result["stdout"].endswith("END\n")


async def test_bash_reports_a_command_killed_by_a_signal(context: ToolContext) -> None:
    result = await GUARD.handler({"command": "kill -KILL $$"}, context)
    assert result["exit_code"] == -9
    assert "signal 9" in result["note"]


async def test_an_os_sandbox_reports_a_killed_command_as_a_shell_does(
    os_sandbox: str, context: ToolContext
) -> None:
    result = await _sandboxed(os_sandbox).handler({"command": "kill -KILL $$"}, context)
    assert result["exit_code"] == 128 + 9


@pytest.mark.parametrize(
    "command",
    [
        "echo data > {outside}/f.txt",
        "echo data >> ../outside/f.txt",
        "cd {outside} && touch f.txt",
        "rm -f {outside}/keep.txt",
        "cp notes.txt {outside}/",
        "sed -i 's/a/b/' {outside}/keep.txt",
        "git -C {outside} init",
        "bash -c 'echo x | tee {outside}/f.txt'",
        "cd sub && touch ../../outside/f.txt",
        "ln -s ../outside escape; echo x > escape/f.txt",
    ],
)
async def test_bash_refuses_commands_that_write_outside_the_checkout(
    command: str, checkout: Path, outside: Path, context: ToolContext
) -> None:
    (checkout / "sub").mkdir()
    (checkout / "notes.txt").write_text("n")
    (outside / "keep.txt").write_text("a")
    if "escape/" in command:
        (checkout / "escape").symlink_to(outside, target_is_directory=True)
        command = "echo x > escape/f.txt"
    with pytest.raises(PathOutsideCheckout) as info:
        await GUARD.handler({"command": command.format(outside=outside)}, context)
    assert info.value.code == "path-outside-checkout"
    assert "not" in info.value.message and str(checkout) in info.value.message
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]
    assert (outside / "keep.txt").read_text() == "a"


async def test_bash_may_read_outside_the_checkout(outside: Path, context: ToolContext) -> None:
    (outside / "data.txt").write_text("outside data\n")
    result = await GUARD.handler(
        {"command": f"cat {outside}/data.txt > copy.txt && cat copy.txt"}, context
    )
    assert result["stdout"] == "outside data\n"


async def test_an_os_sandboxed_command_may_read_outside_the_checkout(
    os_sandbox: str, checkout: Path, context: ToolContext
) -> None:
    source = Path(os.__file__).resolve()  # outside the checkout; this file may lie under /tmp
    (checkout / "sub").mkdir()
    result = await _sandboxed(os_sandbox).handler(
        {"command": f"cat {source} > sub/copy.txt && wc -c < sub/copy.txt"}, context
    )
    assert result["exit_code"] == 0, result
    assert int(result["stdout"]) == len(source.read_bytes())


async def test_bash_rejects_a_timeout_above_the_maximum(context: ToolContext) -> None:
    tool = bash_tool(max_timeout=30)
    with pytest.raises(ToolArgumentsInvalid) as info:
        await tool.handler({"command": "true", "timeout": 31}, context)
    assert info.value.data["path"] == "$.timeout"
    assert tool.input_schema["properties"]["timeout"]["maximum"] == 30


def test_bash_tool_rejects_an_inconsistent_configuration() -> None:
    with pytest.raises(ToolSpecError):
        bash_tool(default_timeout=100, max_timeout=10)
