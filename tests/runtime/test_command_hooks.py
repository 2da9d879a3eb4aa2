"""Claude Code ``hooks`` in a ``.claude/agents`` file run for that agent, inside its sandbox.

Real definition files under ``.claude/agents``, real hook scripts run by ``bash`` in the
child's sandbox, the real ``Bash``/``Read``/``Write`` tools; the model is the only double. Each
test reads what the model received, the run's ``hook`` events and the files on disk.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from membrane.builtin_tools import register_builtin_tools
from membrane.cli.app import main
from membrane.models.base import Message
from membrane.runtime import SubagentStartRequest
from membrane.sandbox import SandboxPolicy, machine_support
from membrane.sandbox.machine import choose_backend
from membrane.testing import ScriptedModel
from membrane.tools.permissions import ApprovalRequest
from membrane.tools.registry import ToolRegistry

from .conftest import Project

#: A PreToolUse guard: any `rm` is refused with exit 2, stderr says why.
BLOCK_RM = """#!/bin/bash
command=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["tool_input"]["command"])')
case "$command" in
  rm\\ *|*" rm "*) echo "rm is not allowed here: move files into trash/ instead" >&2; exit 2;;
esac
exit 0
"""
#: Prints its stdin into the checkout's ``out`` folder, so a test sees what Claude Code's JSON
#: held (a folder: under Landlock, the sandbox where no bwrap is, nothing new can be made at
#: the checkout's top level).
RECORD = """#!/bin/bash
cat > "$CLAUDE_PROJECT_DIR/out/seen-$1.json"
"""


@pytest.fixture
def real(project: Project) -> Project:
    registry = ToolRegistry()
    register_builtin_tools(registry)
    project.registry = registry
    return project


def claude_agent(project: Project, name: str, frontmatter: str) -> Path:
    path = project.root / ".claude" / "agents" / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"---\nname: {name}\ndescription: The {name} agent.\n{frontmatter}---\nWork.\n",
        encoding="utf-8",
    )
    return path


def script(project: Project, name: str, text: str) -> str:
    path = project.root / ".claude" / "hooks" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return f"./.claude/hooks/{name}"


def approve(request: ApprovalRequest) -> bool:
    """The user at the terminal: Claude Code asks before each Bash and Edit call, and says yes."""
    return True


def _tool_results(model: ScriptedModel) -> list[Message]:
    return [m for m in model.requests[-1].messages if m.role == "tool"]


def _codes(model: ScriptedModel) -> list[str | None]:
    return [
        json.loads(m.content)["error"]["code"] if m.is_error else None for m in _tool_results(model)
    ]


def _calls(*calls: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"tool_calls": [{"name": n, "arguments": a} for n, a in calls]}, {"text": "done"}]


async def _run(project: Project, model: ScriptedModel, name: str, **options: Any) -> list[Any]:
    async with project.runtime(model, **options) as runtime:
        result = await runtime.run(SubagentStartRequest(name, "tidy up"))
        return [e for e in runtime.store.events(session_id=result.run_id) if e.kind == "hook"]


@pytest.mark.anyio
async def test_a_pretooluse_hook_blocks_rm_with_exit_2_and_its_stderr_is_the_reason(
    real: Project,
) -> None:
    (real.root / "victim.txt").write_text("keep\n")
    guard = script(real, "block-rm.sh", BLOCK_RM)
    claude_agent(
        real,
        "tidy",
        "tools: Bash, Read\nhooks:\n  PreToolUse:\n    - matcher: Bash\n      hooks:\n"
        f"        - type: command\n          command: {guard}\n",
    )
    model = ScriptedModel(
        {
            "agents": {
                "tidy": _calls(
                    ("Bash", {"command": "rm victim.txt"}),
                    ("Bash", {"command": "echo kept"}),
                    ("Read", {"file_path": "victim.txt"}),
                )
            }
        }
    )
    hooks = await _run(real, model, "tidy", approver=approve)
    assert (real.root / "victim.txt").read_text() == "keep\n"
    assert _codes(model) == ["tool-call-denied", None, None]
    refused = json.loads(_tool_results(model)[0].content)["error"]["message"]
    assert "rm is not allowed here: move files into trash/ instead" in refused
    assert "kept" in _tool_results(model)[1].content
    # The matcher is `Bash`: the Read call ran no hook.
    assert [(e.data["tool"], e.data["decision"]) for e in hooks] == [
        ("Bash", "block"),
        ("Bash", "ok"),
    ]
    assert hooks[0].data["exit_code"] == 2 and hooks[0].data["command"] == guard


@pytest.mark.anyio
async def test_hooks_add_context_see_the_tool_response_and_a_timeout_does_not_block(
    real: Project,
) -> None:
    record = script(real, "record.sh", RECORD)
    (real.root / "out").mkdir()
    context = script(
        real,
        "context.sh",
        "#!/bin/bash\ncat > /dev/null\n"
        'echo \'{"hookSpecificOutput": {"hookEventName": "PostToolUse", '
        '"additionalContext": "remember the style guide"}}\'\n',
    )
    claude_agent(
        real,
        "lint",
        "tools: Bash, Write\nhooks:\n"
        "  UserPromptSubmit:\n    - hooks:\n"
        "        - {type: command, command: echo today is Tuesday}\n"
        "  PreToolUse:\n    - matcher: '*'\n      hooks:\n"
        "        - {type: command, command: sleep 30, timeout: 1}\n"
        "  PostToolUse:\n    - matcher: Bash|Write\n      hooks:\n"
        f"        - {{type: command, command: {record} post}}\n"
        f"        - {{type: command, command: {context}}}\n",
    )
    model = ScriptedModel({"agents": {"lint": _calls(("Bash", {"command": "echo out-42"}))}})
    hooks = await _run(real, model, "lint", approver=approve)
    # The Bash call ran although its PreToolUse hook timed out (a non-blocking error).
    assert _codes(model) == [None]
    result = _tool_results(model)[0].content
    assert "out-42" in result and "remember the style guide" in result
    seen = json.loads((real.root / "out" / "seen-post.json").read_text())
    assert seen["hook_event_name"] == "PostToolUse" and seen["tool_name"] == "Bash"
    assert seen["tool_input"] == {"command": "echo out-42"}
    assert "out-42" in seen["tool_response"]["stdout"]
    assert seen["cwd"] == str(real.root.resolve()) and seen["session_id"]
    # The UserPromptSubmit hook's stdout joined the conversation after the task.
    users = [m.content for m in model.requests[0].messages if m.role == "user"]
    assert users[-2:] == ["tidy up", "today is Tuesday"]
    decisions = [(e.data["event"], e.data["decision"]) for e in hooks]
    assert decisions == [
        ("UserPromptSubmit", "ok"),
        ("PreToolUse", "timeout"),
        ("PostToolUse", "ok"),
        ("PostToolUse", "ok"),
    ]


@pytest.mark.anyio
async def test_an_ask_decision_goes_to_the_approver_and_allow_widens_nothing(
    real: Project,
) -> None:
    decide = script(
        real,
        "decide.sh",
        "#!/bin/bash\n"
        'command=$(python3 -c \'import json,sys; print(json.load(sys.stdin)["tool_input"]'
        '.get("command", ""))\')\n'
        'case "$command" in\n'
        "  git\\ push*) d=ask;;\n  *) d=allow;;\nesac\n"
        'echo "{\\"hookSpecificOutput\\": {\\"permissionDecision\\": \\"$d\\", '
        '\\"permissionDecisionReason\\": \\"pushes need a human\\"}}"\n',
    )
    claude_agent(
        real,
        "pusher",
        "tools: Bash\ndisallowedTools: Bash(rm:*)\nhooks:\n  PreToolUse:\n    - hooks:\n"
        f"        - {{type: command, command: {decide}}}\n",
    )
    (real.root / "victim.txt").write_text("keep\n")
    asked: list[ApprovalRequest] = []

    def refuse(request: ApprovalRequest) -> bool:
        asked.append(request)
        return False

    calls = (
        ("Bash", {"command": "git push origin main"}),
        ("Bash", {"command": "rm victim.txt"}),
        ("Write", {"file_path": "x.txt", "content": "x"}),
    )
    model = ScriptedModel({"agents": {"pusher": _calls(*calls)}})
    await _run(real, model, "pusher", approver=refuse)
    # ask: the approver was asked and refused; allow lifted neither the deny rule nor the
    # filter (Write is not this agent's tool).
    assert _codes(model) == ["tool-call-denied", "tool-call-denied", "tool-not-visible"]
    assert [r.tool for r in asked] == ["Bash"] and "pushes need a human" in asked[0].reason
    assert (real.root / "victim.txt").exists() and not (real.root / "x.txt").exists()
    model = ScriptedModel({"agents": {"pusher": _calls(calls[0])}})
    await _run(real, model, "pusher")
    assert _codes(model) == ["approval-unavailable"]


@pytest.mark.anyio
async def test_a_subagentstop_hook_sends_the_child_back_to_work_once(real: Project) -> None:
    again = script(
        real,
        "again.sh",
        "#!/bin/bash\n"
        "active=$(python3 -c 'import json,sys; "
        'print(json.load(sys.stdin)["stop_hook_active"])\')\n'
        '[ "$active" = True ] && exit 0\necho "the tests were not run" >&2\nexit 2\n',
    )
    claude_agent(
        real, "quitter", f"tools: Read\nhooks:\n  Stop:\n    - hooks:\n        - command: {again}\n"
    )
    model = ScriptedModel({"agents": {"quitter": [{"text": "first"}, {"text": "second"}]}})
    async with real.runtime(model) as runtime:
        result = await runtime.run(SubagentStartRequest("quitter", "finish"))
    assert result.status == "completed" and result.text == "second"
    last_user = [m for m in model.requests[-1].messages if m.role == "user"][-1]
    assert "the tests were not run" in last_user.content


@pytest.mark.anyio
async def test_a_hooks_writes_are_confined_by_the_sandbox(
    real: Project, outside_home: Path
) -> None:
    if choose_backend(SandboxPolicy().choice, machine_support()) == "guard":
        pytest.skip("this machine offers no OS sandbox (bubblewrap or Landlock)")
    # Inside: a folder of the checkout (Landlock cannot grant new top-level entries). Outside:
    # a folder in the home, not under /tmp, which is private under bubblewrap.
    (real.root / "out").mkdir()
    claude_agent(
        real,
        "writer",
        "tools: Bash, Write\nhooks:\n  PostToolUse:\n    - hooks:\n        - type: command\n"
        f"          command: echo in > out/inside.txt; echo out > {outside_home}/escaped.txt\n",
    )
    model = ScriptedModel({"agents": {"writer": _calls(("Bash", {"command": "true"}))}})
    hooks = await _run(real, model, "writer", approver=approve)
    assert (real.root / "out" / "inside.txt").read_text() == "in\n"
    assert not (outside_home / "escaped.txt").exists()
    # The failed write made the hook exit 1: recorded, not blocking.
    assert [e.data["decision"] for e in hooks] == ["error"] and _codes(model) == [None]


def test_explain_shows_the_hooks_with_their_dialect(
    real: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    claude_agent(
        real,
        "guarded",
        "tools: Bash\nhooks:\n  PreToolUse:\n    - matcher: Bash\n      hooks:\n"
        "        - {type: command, command: ./check.sh, timeout: 5}\n"
        "  Notification:\n    - hooks: [{type: command, command: notify}]\n",
    )
    os.environ.pop("MEMBRANE_SOCKET", None)
    assert main(["explain", "guarded", "--json", "--project", str(real.root)]) == 0
    out = json.loads(capsys.readouterr().out)
    hooks = out["definition"]["fields"]["hooks"]
    assert hooks["source"] == "dialect:claude-code" and hooks["line"] == 5
    assert hooks["value"] == [
        {
            "event": "PreToolUse",
            "point": "before_tool_call",
            "matcher": "Bash",
            "type": "command",
            "command": "./check.sh",
            "timeout": 5.0,
        }
    ]
    [left_out] = [w for w in out["warnings"] if w["code"] == "dialect-unsupported"]
    assert "hooks.Notification" in left_out["message"]
    assert main(["explain", "guarded", "--project", str(real.root)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "PreToolUse" in text and "./check.sh" in text and "dialect:claude-code" in text


@pytest.mark.parametrize(
    ("hooks", "problem"),
    [
        ("hooks: ./check.sh", "must map hook events"),
        ("hooks:\n  PreToolUse:\n    - matcher: '('\n      hooks: [{command: x}]", "not a regular"),
        ("hooks:\n  PreToolUse:\n    - hooks: [{type: command}]", "non-empty `command`"),
        ("hooks:\n  PreToolUse:\n    - hooks: [{command: x, timeout: 0}]", "`timeout`"),
    ],
)
def test_a_malformed_hook_makes_the_file_unusable(
    real: Project, capsys: pytest.CaptureFixture[str], hooks: str, problem: str
) -> None:
    claude_agent(real, "broken", f"tools: Bash\n{hooks}\n")
    assert main(["agents", "validate", "--json", "--project", str(real.root)]) == 1
    [error] = json.loads(capsys.readouterr().out)["errors"]
    assert error["code"] == "definition-invalid" and problem in error["message"]
    assert error["data"]["line"] == 5


@pytest.mark.anyio
async def test_a_userpromptsubmit_hook_that_blocks_ends_the_run(real: Project) -> None:
    claude_agent(
        real,
        "refuser",
        "tools: Read\nhooks:\n  UserPromptSubmit:\n    - hooks:\n"
        "        - {type: command, command: echo no tasks on Fridays >&2; exit 2}\n",
    )
    model = ScriptedModel({"agents": {"refuser": [{"text": "never"}]}})
    async with real.runtime(model) as runtime:
        result = await runtime.run(SubagentStartRequest("refuser", "work"))
    assert result.status == "error" and result.error is not None
    assert result.error["code"] == "tool-blocked"
    assert "no tasks on Fridays" in result.error["message"]
    assert len(model.requests) == 0


@pytest.mark.anyio
async def test_a_landlocked_hook_reaches_no_unix_socket_and_runs_as_an_unprivileged_uid(
    real: Project, tmp_path: Path
) -> None:
    """Hooks start as a Landlock ``Bash`` call does: no socket of their own to a bus outside,
    and uid 65534 when root started Membrane (where a user namespace can be made)."""
    import socket
    import sys

    from membrane.config.values import Settings
    from membrane.sandbox.machine import landlock_user_namespace

    if not machine_support().landlock_abi:
        pytest.skip(machine_support().landlock_reason)
    real.settings = Settings(sandbox="landlock")
    (real.root / "out").mkdir()
    bus_path = tmp_path / "bus"
    connect = f"import socket; socket.socket(socket.AF_UNIX).connect('{bus_path}')"
    hook = f'grep ^Uid: /proc/self/status > out/uid.txt; {sys.executable} -c "{connect}"'
    claude_agent(
        real,
        "writer",
        "tools: Bash, Write\nhooks:\n  PostToolUse:\n    - hooks:\n        - type: command\n"
        f"          command: {json.dumps(hook)}\n",
    )
    model = ScriptedModel({"agents": {"writer": _calls(("Bash", {"command": "true"}))}})
    with socket.socket(socket.AF_UNIX) as bus:
        bus.bind(str(bus_path))
        bus.listen(1)
        bus.settimeout(0)
        hooks = await _run(real, model, "writer", approver=approve)
        with pytest.raises(BlockingIOError):
            bus.accept()
    assert [e.data["decision"] for e in hooks] == ["error"], hooks  # the connect failed
    uid = int((real.root / "out" / "uid.txt").read_text().split()[1])
    assert uid == (65534 if landlock_user_namespace() else os.geteuid())
