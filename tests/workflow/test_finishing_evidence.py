"""Seed 002's finishing worker: a child the lead starts while finishing under the
``finishing_worker`` decision works in its own git worktree and registers the run's evidence
assets (``pr_link``, ``linear_issue``, ``deeplink``), which ``membrane workflow show`` and the
stored state show with the worker's run id. A worker started while developing gets no such tool,
and an unknown kind or a URL without a scheme is refused."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import pytest

from membrane import SQLiteStore, SubagentRuntime, SubagentStartRequest
from membrane.cli.app import main
from membrane.json_types import JSONDict, JSONValue
from membrane.models import ModelRequest, ModelResponse, ToolCall
from membrane.runtime import InProcessProvider, RuntimeOptions
from membrane.testing import FunctionModel
from membrane.workflow import PlanningHost, builtin_workflows
from membrane.workspace import Workspace

pytestmark = pytest.mark.anyio

PR = "https://git.example/team/app/pull/7"
ISSUE = "https://issues.example/team/APP-12"
DEEP = "membrane://runs/finishing"

LEAD: list[tuple[str, dict[str, JSONValue]]] = [
    ("recordCodebaseIntake", {"summary": "a changelog line", "touches_ui_surface": False}),
    ("askPlanningRound", {"round": "functional", "questions": ["what?"], "answers": "a line"}),
    ("askPlanningRound", {"round": "extras", "questions": ["docs?"], "answers": "no"}),
    ("proposeValidationSteps", {"steps": ["read the file"]}),
    ("recordModelRouting", {"routes": [{"role": "finisher", "model": "default"}]}),
    ("askFinishingDecision", {}),
    ("finishPlanning", {}),
    ("requestPlanApproval", {"summary": "add a changelog line"}),
    ("Task", {"agent": "finisher", "task": "develop: try to register evidence early"}),
    ("finishDevelopment", {"passed": True, "summary": "done"}),
    ("Task", {"agent": "finisher", "task": "finish: push the branch and open the PR"}),
    ("completeWorkflow", {"summary": "PR open"}),
]


def _finisher(request: ModelRequest) -> ModelResponse:
    n = sum(1 for m in request.messages if m.role == "assistant")
    early = "develop" in str(request.messages[0].content)
    evidence = [
        {"kind": "pr_link", "url": PR, "title": "Add a changelog line"},
        {"kind": "linear_issue", "url": ISSUE},
        {"kind": "deeplink", "url": DEEP},
        {"kind": "screenshot", "url": "https://x.example/a.png"},
        {"kind": "pr_link", "url": "not a link"},
    ]
    calls: list[tuple[str, dict[str, JSONValue]]] = (
        [("registerEvidence", evidence[0])]
        if early
        else [("Write", {"file_path": "CHANGES.md", "content": "- a changelog line\n"})]
        + [("registerEvidence", dict(e)) for e in evidence]
    )
    if n < len(calls):
        name, arguments = calls[n]
        return ModelResponse(tool_calls=(ToolCall(f"f{n}", name, arguments),))
    return ModelResponse(text="finished")


def _decoded(content: str) -> JSONDict:
    """A tool result: JSON when it is an object, else the text (the Write tool's answer)."""
    return json.loads(content) if content.startswith("{") else {"text": content}


def _model(results: dict[str, list[JSONDict]]) -> FunctionModel:
    async def answer(request: ModelRequest) -> ModelResponse:
        tools = [m for m in request.messages if m.role == "tool"]
        if request.agent == "finisher":
            results.setdefault(request.run_id, [])[:] = [_decoded(m.content) for m in tools]
            return _finisher(request)
        n = sum(1 for m in request.messages if m.role == "assistant")
        if n < len(LEAD):
            name, arguments = LEAD[n]
            return ModelResponse(tool_calls=(ToolCall(f"c{n}", name, arguments),))
        return ModelResponse(text="lead done")

    return FunctionModel(answer)


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path, isolated_home: Path) -> Path:
    root = tmp_path / "app"
    agents = root / ".membrane" / "agents"
    agents.mkdir(parents=True)
    (agents / "lead.md").write_text(
        "---\nname: lead\ndescription: Plans.\ntools: Read\nallowed_subagents: [finisher]\n"
        "workflow: planning\n---\nPlan, then delegate.\n"
    )
    (agents / "finisher.md").write_text(
        "---\nname: finisher\ndescription: Finishes.\ntools: Read, Write\n"
        "isolation: worktree\n---\nFinish the work.\n"
    )
    (root / "README.md").write_text("app\n")
    _git(root, "init", "-q", "-b", "main")
    _git(root, "config", "user.email", "dev@example.com")
    _git(root, "config", "user.name", "Dev")
    _git(root, "add", "README.md")
    _git(root, "commit", "-q", "-m", "initial")
    return root


async def test_the_finishing_worker_registers_evidence_from_its_own_worktree(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async def approve(run_id: str, plan: JSONDict) -> bool:
        return True

    async def finishing(run_id: str, question: JSONDict) -> str:
        return "finishing_worker"

    host = PlanningHost(approve_plan=approve, finishing_decision=finishing)
    db = tmp_path / "state.db"
    store = SQLiteStore(db)
    results: dict[str, list[JSONDict]] = {}
    ws = Workspace.open(repo)
    options = RuntimeOptions(workflows=builtin_workflows(host))
    provider = InProcessProvider(_model(results))
    async with SubagentRuntime.on_workspace(ws, provider, store=store, options=options) as rt:
        with anyio.fail_after(60):
            lead = await rt.run(SubagentStartRequest("lead", "add a changelog line"))
    assert lead.text == "lead done", lead.error
    early, finisher = [h for h in store.list_sessions() if h.agent == "finisher"]
    store.close()

    # Developing: a worker is no finishing worker, and gets no way to register evidence.
    assert results[early.session_id][0]["error"]["code"] == "tool-not-visible"
    written, pr, issue, deep, kind, url = results[finisher.session_id]
    assert "error" not in written and pr["evidence"] == 1 and issue["evidence"] == 2
    assert deep["registered"]["kind"] == "deeplink" and deep["evidence"] == 3
    assert kind["error"]["code"] == "tool-arguments-invalid"
    assert url["error"]["code"] == "tool-arguments-invalid"

    assert main(["workflow", "show", lead.run_id, "--json", "--state", str(db)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["phase"] == "done"
    assert [(a["kind"], a["url"], a["run_id"]) for a in shown["evidence"]] == [
        ("pr_link", PR, finisher.session_id),
        ("linear_issue", ISSUE, finisher.session_id),
        ("deeplink", DEEP, finisher.session_id),
    ]
    assert shown["evidence"][0]["title"] == "Add a changelog line"
    # The worker wrote in its own worktree; its work came back as a branch, not in the checkout.
    assert not (repo / "CHANGES.md").exists()
    branches = _git(repo, "branch", "--list", "membrane/agent-*", "--format=%(refname:short)")
    changed = [b for b in branches.split() if "CHANGES.md" in _git(repo, "ls-tree", b)]
    assert len(changed) == 1
    assert main(["workflow", "show", lead.run_id, "--state", str(db)]) == 0
    assert f"pr_link: {PR} (run {finisher.session_id})" in capsys.readouterr().out
