"""A command child under the OS sandbox: it writes its checkout, never outside it nor a
control path, and nothing it starts outlives it."""

from __future__ import annotations

import os
import sys
import tempfile
import uuid
from pathlib import Path

import anyio
import pytest

from membrane.config.values import Settings
from membrane.errors import SetupFailed
from membrane.runtime import CommandProvider, SubagentStartRequest
from membrane.sandbox import MachineSupport, SandboxPolicy, machine_support

from .conftest import Project

pytestmark = pytest.mark.anyio


@pytest.fixture
def outside(outside_home: Path) -> Path:
    return outside_home


async def test_a_sandboxed_command_child_writes_only_its_checkout(
    project: Project, outside: Path
) -> None:
    support = machine_support()
    if support.bwrap is None:
        pytest.skip(f"no bubblewrap sandbox here: {support.bwrap_reason}")
    (project.root / "src").mkdir()
    script = (
        f"echo x > {outside}/f; mkdir -p .agents/agents; echo x > .agents/agents/g.md; "
        "echo made > src/made.txt; echo finished"
    )
    provider = CommandProvider(["sh", "-c", "{task}"], sandbox=SandboxPolicy("bubblewrap"))
    project.agent("external")
    project.settings = Settings(max_depth="provider-managed")
    async with project.runtime(provider) as runtime:
        with anyio.fail_after(30):
            result = await runtime.run(SubagentStartRequest("external", script))
    assert result.status == "completed" and result.text.strip() == "finished"
    assert (project.root / "src" / "made.txt").read_text() == "made\n"
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]
    assert not (project.root / ".agents" / "agents").exists()


def _processes_with(token: str) -> list[int]:
    """Host processes whose command line holds ``token``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if token.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.parametrize("policy", ["default", "bubblewrap", "landlock"])
async def test_a_command_child_is_sandboxed_by_default_and_under_each_backend(
    project: Project, outside: Path, policy: str
) -> None:
    support = machine_support()
    backend = policy if policy != "default" else ("bubblewrap" if support.bwrap else "landlock")
    if backend == "bubblewrap" and support.bwrap is None:
        pytest.skip(f"no bubblewrap sandbox here: {support.bwrap_reason}")
    if backend == "landlock" and not support.landlock_abi:
        pytest.skip(f"no Landlock sandbox here: {support.landlock_reason}")
    (project.root / "src").mkdir()
    script = (
        f"echo x > {outside}/f; python3 -c \"open('{outside}/g', 'w')\"; "
        "mkdir -p .agents/agents; echo x > .agents/agents/g.md; echo x >> .git/config; "
        "echo made > src/made.txt; echo finished"
    )
    options = {} if policy == "default" else {"sandbox": SandboxPolicy(policy)}  # type: ignore[arg-type]
    provider = CommandProvider(["sh", "-c", "{task}"], **options)  # type: ignore[arg-type]
    project.agent("external")
    project.settings = Settings(max_depth="provider-managed")
    (project.root / ".git").mkdir()
    (project.root / ".git" / "config").write_text("[core]\n")
    async with project.runtime(provider) as runtime, runtime.events() as events:
        with anyio.fail_after(30):
            result = await runtime.run(SubagentStartRequest("external", script))
            async for event in events:
                if event.kind == "published":
                    boundary = event.data["sandbox"]
                    break
    assert result.status == "completed" and result.text.strip() == "finished", result
    assert (project.root / "src" / "made.txt").read_text() == "made\n"
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]
    assert not (project.root / ".agents" / "agents" / "g.md").exists()
    assert (project.root / ".git" / "config").read_text() == "[core]\n"
    assert boundary["backend"] == backend and boundary["confined"] is True


async def test_nothing_a_bubblewrapped_command_child_starts_outlives_it(project: Project) -> None:
    support = machine_support()
    if support.bwrap is None:
        pytest.skip(f"no bubblewrap sandbox here: {support.bwrap_reason}")
    token = f"membrane-outlive-{uuid.uuid4().hex}"
    sleeper = f"python3 -c 'import time; time.sleep(600)' {token}"
    script = (
        f"setsid -f {sleeper}; nohup {sleeper} >/dev/null 2>&1 & ( ( {sleeper} & ) & ); echo ok"
    )
    provider = CommandProvider(["sh", "-c", "{task}"])
    project.agent("external")
    project.settings = Settings(max_depth="provider-managed")
    async with project.runtime(provider) as runtime:
        with anyio.fail_after(30):
            result = await runtime.run(SubagentStartRequest("external", script))
    assert result.status == "completed"
    with anyio.fail_after(30):
        while _processes_with(token):
            await anyio.sleep(0.05)


async def test_a_command_child_whose_sandbox_this_machine_lacks_is_never_published(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    from membrane.sandbox import runner

    lacking = MachineSupport(None, "no bwrap on PATH", 0, "the kernel has no Landlock")
    monkeypatch.setattr(runner, "machine_support", lambda: lacking)
    provider = CommandProvider(["sh", "-c", "{task}"], sandbox=SandboxPolicy("bubblewrap"))
    project.agent("external")
    project.settings = Settings(max_depth="provider-managed")
    async with project.runtime(provider) as runtime:
        with pytest.raises(SetupFailed) as caught:
            await runtime.start(SubagentStartRequest("external", "echo hi"))
        assert caught.value.data["cause"] == "sandbox-unavailable"
        assert runtime.runs() == []


async def test_a_program_under_tmp_starts_while_the_rest_of_tmp_stays_hidden(
    project: Project,
) -> None:
    support = machine_support()
    if support.bwrap is None:
        pytest.skip(f"no bubblewrap sandbox here: {support.bwrap_reason}")
    with tempfile.TemporaryDirectory(dir="/tmp") as folder:
        secret = Path(folder) / "secret.txt"
        secret.write_text("host secret\n")
        script = Path(folder) / "agent.py"
        script.write_text(
            "import os, sys\n"
            f"print('ran', os.path.exists({str(secret)!r}), os.path.exists({folder!r}))\n"
        )
        provider = CommandProvider(
            [sys.executable, str(script), "{task}"], sandbox=SandboxPolicy("bubblewrap")
        )
        project.agent("external")
        project.settings = Settings(max_depth="provider-managed")
        async with project.runtime(provider) as runtime:
            with anyio.fail_after(30):
                result = await runtime.run(SubagentStartRequest("external", "go"))
    assert result.status == "completed", result
    # Only the named program is bound into the private /tmp: its folder's other files are not.
    assert result.text.strip() == "ran False True"


async def test_a_command_child_whose_checkout_links_a_file_elsewhere_is_refused_at_its_start(
    project: Project, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("keep\n")
    (project.root / "src").mkdir()
    try:
        os.link(elsewhere, project.root / "src" / "linked.txt")
    except OSError as exc:
        pytest.skip(f"the checkout and the temporary folder cannot share a hard link: {exc}")
    provider = CommandProvider(["sh", "-c", "{task}"], sandbox=SandboxPolicy("guard"))
    project.agent("external")
    project.settings = Settings(max_depth="provider-managed")
    async with project.runtime(provider) as runtime:
        with anyio.fail_after(30), pytest.raises(SetupFailed) as info:
            await runtime.run(SubagentStartRequest("external", "echo changed > src/linked.txt"))
    assert info.value.data["cause"] == "hard-link-refused"
    assert "src/linked.txt" in info.value.message
    assert elsewhere.read_text() == "keep\n"


_PROBE = """\
import os, socket, sys
import anyio
from membrane.server.client import Client

async def reach():
    async with Client.connect(os.environ["MEMBRANE_SOCKET"]):
        print("runtime reached")

anyio.run(reach)
try:
    socket.socket(socket.AF_UNIX).connect(sys.argv[1])
    print("bus reached")
except OSError as exc:
    print("bus refused:", exc.strerror)
uid = [line for line in open("/proc/self/status") if line.startswith("Uid:")][0].split()[1]
print("uid", uid)
"""


async def test_a_landlocked_command_child_reaches_the_runtime_socket_and_no_other(
    project: Project, tmp_path: Path
) -> None:
    """Its own ``membrane`` client reaches the runtime through the connector Membrane hands
    it; a socket of its own to anything else is refused; as root it runs as uid 65534."""
    import socket

    support = machine_support()
    if not support.landlock_abi:
        pytest.skip(f"no Landlock sandbox here: {support.landlock_reason}")
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    runtime_path, bus_path = folder / "runtime.sock", folder / "bus"
    (project.root / "probe.py").write_text(_PROBE)
    with socket.socket(socket.AF_UNIX) as served, socket.socket(socket.AF_UNIX) as bus:
        served.bind(str(runtime_path))
        served.listen(4)
        bus.bind(str(bus_path))
        bus.listen(4)
        bus.settimeout(0)
        provider = CommandProvider(
            [sys.executable, "probe.py", "{task}"],
            sandbox=SandboxPolicy("landlock"),
            env={"MEMBRANE_SOCKET": str(runtime_path)},
        )
        project.agent("external")
        project.settings = Settings(max_depth="provider-managed")
        async with project.runtime(provider) as runtime:
            with anyio.fail_after(60):
                result = await runtime.run(SubagentStartRequest("external", str(bus_path)))
        with pytest.raises(BlockingIOError):
            bus.accept()
    lines = result.text.splitlines()
    assert result.status == "completed", result
    assert "runtime reached" in lines and "bus reached" not in lines, lines
    from membrane.sandbox.machine import landlock_user_namespace

    dropped = landlock_user_namespace()
    assert f"uid {65534 if dropped else os.geteuid()}" in lines, lines
