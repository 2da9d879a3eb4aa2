"""Real commands that try to write where a child must not, under each OS sandbox backend.

Each form here got past the shell guard (it reads text, not what a program does); under an OS
sandbox the kernel refuses every one. "Outside" is a folder in the user's home, not under
``/tmp``, so that a write there would land on the real file system (``/tmp`` is private in the
bubblewrap sandbox, which would make the check too easy).
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from membrane.builtin_tools.bash import bash_tool
from membrane.sandbox import SandboxPolicy
from membrane.tools.spec import ToolContext

pytestmark = pytest.mark.anyio


@pytest.fixture
def outside(outside_home: Path) -> Path:
    return outside_home


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = (tmp_path / "checkout").resolve()
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "notes.txt").write_text("notes\n")
    (root / "sub").mkdir()
    (root / ".membrane" / "agents").mkdir(parents=True)
    (root / ".membrane" / "agents" / "reviewer.md").write_text("---\nname: reviewer\n---\nx\n")
    return root


def snapshot(*folders: Path) -> dict[str, str]:
    """Every entry below ``folders`` with a digest of its content (links by their target)."""
    seen: dict[str, str] = {}
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.is_symlink():
                seen[str(path)] = "-> " + os.readlink(path)
            elif path.is_file():
                seen[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                seen[str(path)] = "dir"
    return seen


def control(checkout: Path) -> list[Path]:
    return [checkout / name for name in (".git", ".membrane", ".agents", ".claude", ".pi")]


def control_files(checkout: Path) -> list[bool]:
    return [(checkout / name).exists() for name in ("opencode.json", "opencode.jsonc")]


ESCAPES = [
    "echo x > $(echo {outside})/f",
    "echo x > `echo {outside}`/f",
    "echo x > $'{outside_hex}/f'",
    "echo x > /dev/fd/../../..{outside}/f",
    "ln -s {outside} link && echo x > link/f",
    "bash /dev/stdin <<< 'echo x > {outside}/f'",
    "cp -l {outside}/keep.txt hard.txt; echo changed >> hard.txt",
    "cp -s {outside}/keep.txt soft.txt; echo changed >> soft.txt",
    "link {outside}/keep.txt linked.txt; echo changed >> linked.txt",
    "ln {outside}/keep.txt ln.txt; echo changed >> ln.txt",
    "python3 -c \"open('{outside}/f', 'w').write('x')\"",
    "printf 'echo x > {outside}/f' > sub/s.sh; bash sub/s.sh",
    "sort -o {outside}/f notes.txt",
    "echo x | tee {outside}/f",
    'awk \'BEGIN {{ print "x" > "{outside}/f" }}\'',
    "HOME={outside} git config --global user.name intruder",
    "rm -f {outside}/keep.txt",
    "echo changed >> {outside}/keep.txt",
]

PLANTS = [
    "mkdir -p .agents/agents && printf -- '---\\ntools: \"*\"\\n---\\n' > "
    ".agents/agents/general-purpose.md",
    "mkdir -p .claude/agents && echo x > .claude/agents/general-purpose.md",
    "mkdir -p .opencode/agent .pi/agents .codex/skills; echo x > .pi/agents/a.md",
    "echo x > .membrane/agents/general-purpose.md",
    "rm -rf .membrane/agents",
    "mv .agents moved-agents; mkdir -p .agents/agents; echo x > .agents/agents/g.md",
    "mv .membrane moved; mkdir -p .membrane/agents; echo x > .membrane/agents/g.md",
    "ln -s ../../sub .membrane/agents/link",
    "echo '#!/bin/sh' > .git/hooks/pre-commit",
    "git config core.hooksPath sub",
    "echo '[core] fsmonitor = evil' >> .git/config",
    "cp notes.txt .agents/agents/x.md",
    "git add notes.txt && git mv notes.txt .agents/moved.md",
    "git checkout-index --prefix=.agents/agents/ -a",
    "printf 'diff --git a/.agents/agents/p.md b/.agents/agents/p.md\\nnew file mode 100644\\n"
    "--- /dev/null\\n+++ b/.agents/agents/p.md\\n@@ -0,0 +1 @@\\n+x\\n' > sub/p.diff; "
    "git apply sub/p.diff",
    "python3 -c \"import os; os.makedirs('.agents/agents'); "
    "open('.agents/agents/g.md', 'w').write('x')\"",
    'echo \'{"agent": {"general-purpose": {"tools": {"bash": true}}}}\' > opencode.json',
    "mkdir -p sub && echo '{}' > sub/x.json && mv sub/x.json opencode.jsonc",
]


async def _run(backend: str, command: str, context: ToolContext) -> dict[str, object]:
    tool = bash_tool(sandbox=SandboxPolicy(choice=backend))  # type: ignore[arg-type]
    with anyio.fail_after(30):
        result = await tool.handler({"command": command}, context)
    assert isinstance(result, dict)
    return result


def _fill(command: str, outside: Path) -> str:
    hexed = "".join(f"\\x{ord(c):02x}" if c == "/" else c for c in str(outside))
    return command.format(outside=outside, outside_hex=hexed)


@pytest.mark.parametrize("command", ESCAPES)
async def test_a_writing_child_cannot_write_outside_its_checkout(
    os_sandbox: str, command: str, checkout: Path, outside: Path
) -> None:
    before = snapshot(outside)
    await _run(os_sandbox, _fill(command, outside), ToolContext(agent="a", cwd=checkout))
    assert snapshot(outside) == before
    assert (outside / "keep.txt").read_text() == "keep\n"


@pytest.mark.parametrize("command", PLANTS)
async def test_a_writing_child_cannot_plant_or_change_a_control_path(
    os_sandbox: str, command: str, checkout: Path
) -> None:
    (checkout / ".agents").mkdir()
    before = snapshot(*control(checkout))
    result = await _run(os_sandbox, command, ToolContext(agent="a", cwd=checkout))
    after = snapshot(*control(checkout))
    assert after == before
    assert control_files(checkout) == [False, False], result
    assert not (checkout / "moved").exists() and not (checkout / "moved-agents").exists()


@pytest.mark.parametrize(
    "command", [*ESCAPES, "echo x > notes.txt", "touch sub/new", "rm notes.txt", "mkdir made"]
)
async def test_a_read_only_child_can_write_nothing_but_its_private_tmp(
    os_sandbox: str, command: str, checkout: Path, outside: Path
) -> None:
    before = snapshot(outside, checkout)
    context = ToolContext(agent="a", cwd=checkout, read_only=True)
    await _run(os_sandbox, _fill(command, outside), context)
    assert snapshot(outside, checkout) == before


async def test_a_read_only_child_may_use_its_private_tmp(os_sandbox: str, checkout: Path) -> None:
    command = 'echo scratch > "$TMPDIR/x" && cat "$TMPDIR/x" && cat notes.txt'
    context = ToolContext(agent="a", cwd=checkout, read_only=True)
    result = await _run(os_sandbox, command, context)
    assert result["exit_code"] == 0, result
    assert result["stdout"] == "scratch\nnotes\n"


async def test_a_writing_child_still_writes_its_checkout_and_own_memory(
    os_sandbox: str, checkout: Path
) -> None:
    memory = checkout / ".membrane" / "memory" / "a"
    memory.mkdir(parents=True)
    command = (
        "echo made > sub/made.txt && echo more >> notes.txt && echo m > .membrane/memory/a/M.md"
    )
    result = await _run(os_sandbox, command, ToolContext(agent="a", cwd=checkout))
    assert result["exit_code"] == 0, result
    assert (checkout / "sub" / "made.txt").read_text() == "made\n"
    assert (checkout / "notes.txt").read_text() == "notes\nmore\n"
    assert (memory / "M.md").read_text() == "m\n"


async def test_a_new_top_level_entry_is_made_under_bubblewrap_and_refused_under_landlock(
    os_sandbox: str, checkout: Path
) -> None:
    # Landlock cannot grant making entries in the checkout itself without granting it beneath
    # its control paths too (docs/isolation.md): what a test that writes there must expect.
    result = await _run(os_sandbox, "echo new > new.txt", ToolContext(agent="a", cwd=checkout))
    if os_sandbox == "bubblewrap":
        assert result["exit_code"] == 0, result
        assert (checkout / "new.txt").read_text() == "new\n"
    else:
        assert result["exit_code"] != 0 and "Permission denied" in str(result["stderr"]), result
        assert not (checkout / "new.txt").exists()


async def test_the_private_tmp_is_gone_after_the_call(os_sandbox: str, checkout: Path) -> None:
    context = ToolContext(agent="a", cwd=checkout)
    first = await _run(os_sandbox, 'echo left > "$TMPDIR/left" && echo "$TMPDIR"', context)
    tmp = str(first["stdout"]).strip()
    second = await _run(os_sandbox, f"cat {tmp}/left", context)
    assert second["exit_code"] != 0


@pytest.mark.parametrize("allowed", [False, True])
async def test_network_is_off_unless_allowed(
    os_sandbox: str, allowed: bool, checkout: Path
) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        probe = (
            f"{sys.executable} -c \"import socket; socket.create_connection(('127.0.0.1', {port}),"
            " timeout=5); print('connected')\""
        )
        tool = bash_tool(
            sandbox=SandboxPolicy(choice=os_sandbox, network=allowed)  # type: ignore[arg-type]
        )
        with anyio.fail_after(30):
            result = await tool.handler({"command": probe}, ToolContext(cwd=checkout))
    assert isinstance(result, dict)
    assert (result["stdout"] == "connected\n") is allowed, result


async def test_an_existing_opencode_config_is_read_only(os_sandbox: str, checkout: Path) -> None:
    config = checkout / "opencode.json"
    config.write_text('{"agent": {}}\n')
    command = "echo x >> opencode.json; rm -f opencode.json; mv opencode.json moved.json; true"
    result = await _run(os_sandbox, command, ToolContext(agent="a", cwd=checkout))
    assert result["exit_code"] == 0
    assert config.read_text() == '{"agent": {}}\n'
    assert not (checkout / "moved.json").exists()
