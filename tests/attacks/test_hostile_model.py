"""A hostile model drives children through the real runtime with the real built-in tools.

Every call below is something a model may send. The assertions are about the world afterwards:
no hidden tool ran, nothing was written outside the checkout or into a control path, every run
ended (none left ``running``), and the runtime went on.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest

from membrane.models.base import ToolCall

from .support import codes, drive, running_as, snapshot

pytestmark = pytest.mark.anyio

#: Names a model may forge for tools a read-only child does not hold.
FORGED = [
    "bash", "BASH", "Bash ", " Bash", "Ba\u200bsh", "\u0412ash", "Bash\x00", "Write\t",
    "write", "Edit", "Task", "run_code", "mcp__x__Bash", "ext:Bash", "../Bash", "",
    "Bash" * 40,
]  # fmt: skip


async def test_forged_names_never_run_a_hidden_tool(project: Path) -> None:
    marker = project / "src" / "ran.txt"
    arguments = {"command": f"touch {marker}", "file_path": str(marker), "content": "x"}
    calls = [ToolCall(f"f{i}", name, arguments) for i, name in enumerate(FORGED)]
    results, statuses = await drive(project, "scout", calls)
    assert len(results) == len(FORGED)
    assert codes(results) == ["tool-not-visible"] * len(FORGED)
    assert not marker.exists()
    assert statuses == ["completed"]
    for name, message in zip(FORGED, results, strict=True):
        if "bash" not in name.lower():  # an error names only what was asked for
            assert "Bash" not in message.content


async def test_malformed_calls_become_errors_and_the_run_completes(project: Path) -> None:
    calls: list[Any] = [
        ToolCall("m1", "Read", None),  # type: ignore[arg-type]
        ToolCall("m2", "Read", ["x"]),  # type: ignore[arg-type]
        ToolCall("m3", 7, {}),  # type: ignore[arg-type]
        {"name": "Read"},
        ToolCall("m5", "Grep", {"pattern": "(a|aa)+$"}),
    ]
    results, statuses = await drive(project, "scout", calls)
    assert codes(results)[:4] == ["tool-arguments-invalid"] * 4
    assert codes(results)[4] is None
    assert statuses == ["completed"]


def _escapes(outside: Path, token: str) -> list[ToolCall]:
    plant = "---\nname: general-purpose\ntools: '*'\nallowed_subagents: '*'\n---\nx\n"
    bash = [
        f"echo x > {outside}/f",
        f"python3 -c \"open('{outside}/f', 'w').write('x')\"",
        f"ln {outside}/keep.txt src/h && echo more >> src/h",
        "mkdir -p .agents/agents && echo x > .agents/agents/general-purpose.md",
        "git config core.hooksPath src",
        # Detached, it would write after the call ended. It runs as `token`, and the call
        # returns only once it has started, so the test can wait until none is left.
        f"setsid -f bash -c \"exec -a {token} bash -c 'touch src/up; sleep 1; echo late > "
        f"{outside}/late'\"; until [ -e src/up ]; do sleep 0.01; done",
        f"echo x > $(echo {outside})/g",
    ]
    calls = [ToolCall(f"b{i}", "Bash", {"command": c}) for i, c in enumerate(bash)]
    calls += [
        ToolCall("w1", "Write", {"file_path": str(outside / "w.txt"), "content": "x"}),
        ToolCall("w2", "Write", {"file_path": ".agents/agents/gp.md", "content": plant}),
        ToolCall("w3", "Write", {"file_path": ".claude/agents/x.md", "content": plant}),
        ToolCall("e1", "Edit", {"file_path": ".git/config", "old_string": "[core]",
                                "new_string": "[core]\n\thooksPath = src"}),
    ]  # fmt: skip
    return calls


async def test_a_writing_child_escapes_through_no_tool(
    os_sandbox: str, project: Path, outside: Path
) -> None:
    del os_sandbox  # the default (auto) picks the strongest: this test needs one to exist
    before = snapshot(outside, project / ".git", project / ".membrane")
    token = f"membrane-attack-{uuid.uuid4().hex}"
    results, statuses = await drive(project, "coder", _escapes(outside, token))
    with anyio.fail_after(30):
        while running_as(token):
            await anyio.sleep(0.05)
    assert statuses == ["completed"]
    assert codes(results)[-4:] == ["path-outside-checkout", "path-protected", "path-protected",
                                   "path-protected"]  # fmt: skip
    assert not (project / ".agents" / "agents" / "general-purpose.md").exists()
    assert not (project / ".agents" / "agents" / "gp.md").exists()
    assert not (project / ".claude" / "agents" / "x.md").exists()
    assert snapshot(outside, project / ".git", project / ".membrane") == before


async def test_a_read_only_child_with_bash_writes_nothing(
    os_sandbox: str, project: Path, outside: Path
) -> None:
    del os_sandbox
    before = snapshot(outside, project)
    commands = ["echo x > notes.txt", "touch src/new", f"echo x > {outside}/f", "rm notes.txt"]
    calls = [ToolCall(f"r{i}", "Bash", {"command": c}) for i, c in enumerate(commands)]
    results, statuses = await drive(project, "shell", calls)
    assert statuses == ["completed"]
    assert all(json.loads(m.content)["exit_code"] != 0 for m in results)
    after = snapshot(outside, project)
    assert {k: v for k, v in after.items() if "/.git/" not in k} == {
        k: v for k, v in before.items() if "/.git/" not in k
    }
