"""Code Mode in its own sandboxed process: it reaches exactly the tools the scope shows."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from membrane.builtin_tools import register_builtin_tools
from membrane.builtin_tools.code_mode import code_mode_tool
from membrane.errors import HardLinkRefused
from membrane.sandbox import SandboxPolicy
from membrane.tools.registry import ToolRegistry
from membrane.tools.restriction import Restriction
from membrane.tools.scope import Scope
from membrane.tools.spec import ToolContext

pytestmark = pytest.mark.anyio


def _scope(backend: str) -> Scope:
    registry = ToolRegistry()
    register_builtin_tools(registry)
    scope = Scope(registry, name="coder")
    scope.restrict(Restriction(allow=["Read", "Glob"]))
    policy = SandboxPolicy(choice=backend)  # type: ignore[arg-type]
    scope.add_reserved(code_mode_tool(scope.view, sandbox=policy))
    return scope


async def _run(scope: Scope, code: str, checkout: Path) -> dict[str, object]:
    with anyio.fail_after(60):
        result = await scope.view().call("run_code", {"code": code}, ToolContext(cwd=checkout))
    assert isinstance(result, dict)
    return result


async def test_code_calls_a_visible_tool_through_the_channel(
    any_sandbox: str, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    code = "text = await tools.Read(file_path='a.txt')\nprint('read it')\nreturn text"
    result = await _run(_scope(any_sandbox), code, tmp_path)
    assert "hello" in str(result["value"]) and result["output"] == "read it\n"


@pytest.mark.parametrize(
    "code",
    [
        "return await tools._invoke('Bash', {'command': 'touch ran'})",
        "return await tools._call.__closure__[0].cell_contents('Bash', {'command': 'touch ran'})"
        " if tools._call.__closure__ else await tools._call('Write', {'file_path': 'ran',"
        " 'content': 'x'})",
        "import gc\nfor o in gc.get_objects():\n    if type(o).__name__ == 'ToolRegistry':\n"
        "        return 'found a registry'\nreturn await tools._call('Edit', {'file_path': 'x', "
        "'old_string': 'a', 'new_string': 'b'})",
    ],
)
async def test_code_cannot_reach_a_hidden_tool_through_the_sdks_internals(
    any_sandbox: str, code: str, tmp_path: Path
) -> None:
    result = await _run(_scope(any_sandbox), code, tmp_path)
    assert "tool-not-visible" in str(result.get("error")), result
    assert not (tmp_path / "ran").exists()


async def test_code_writes_nothing_outside_under_an_os_sandbox(
    os_sandbox: str, tmp_path: Path, outside_home: Path
) -> None:
    code = f"open('{outside_home}/f', 'w').write('x')"
    result = await _run(_scope(os_sandbox), code, tmp_path)
    assert "error" in result
    assert sorted(p.name for p in outside_home.iterdir()) == ["keep.txt"]


async def test_a_program_holds_no_capability_and_reads_only_at_home(
    os_sandbox: str, tmp_path: Path
) -> None:
    code = (
        "status = dict(l.split(':', 1) for l in open('/proc/self/status').read().splitlines())\n"
        "caps = [int(status[k].strip(), 16) for k in ('CapEff', 'CapPrm', 'CapBnd')]\n"
        "try:\n"
        "    open('/etc/shadow').read()\n"
        "    shadow = 'read'\n"
        "except OSError as exc:\n"
        "    shadow = type(exc).__name__\n"
        "return [caps, status['NoNewPrivs'].strip(), shadow]"
    )
    result = await _run(_scope(os_sandbox), code, tmp_path)
    assert result["value"] == [[0, 0, 0], "1", "PermissionError"], result


async def test_code_of_a_writing_child_is_refused_while_its_checkout_links_a_file_elsewhere(
    any_sandbox: str, tmp_path: Path
) -> None:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (tmp_path / "keep.txt").write_text("keep\n")
    os.link(tmp_path / "keep.txt", checkout / "linked.txt")
    code = "open('linked.txt', 'w').write('changed')"
    with pytest.raises(HardLinkRefused):
        await _run(_scope(any_sandbox), code, checkout)
    assert (tmp_path / "keep.txt").read_text() == "keep\n"


async def test_a_program_started_by_root_runs_as_an_unprivileged_uid_with_no_unix_socket(
    os_sandbox: str, tmp_path: Path
) -> None:
    from membrane.sandbox.machine import landlock_user_namespace

    if os.geteuid() != 0:
        pytest.skip("Membrane does not run as root here")
    if os_sandbox == "landlock" and not landlock_user_namespace():
        pytest.skip("no user namespace can be made here: a Landlock command stays uid 0")
    code = (
        "import socket\n"
        "status = dict(l.split(':', 1) for l in open('/proc/self/status').read().splitlines())\n"
        "try:\n"
        "    socket.socket(socket.AF_UNIX).connect('/run/dbus/system_bus_socket')\n"
        "    bus = 'reached'\n"
        "except OSError as exc:\n"
        "    bus = 'refused'\n"
        "return [status['Uid'].split()[0], bus]"
    )
    result = await _run(_scope(os_sandbox), code, tmp_path)
    assert result["value"] == ["65534", "refused"], result
