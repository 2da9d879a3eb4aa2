"""Proof that explain is what ran: ``membrane explain --json`` prints the digest of the
effective authority that the child's ``published`` event and ``membrane show`` carry."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from membrane.models.base import ModelRequest, ModelResponse
from membrane.runtime import SubagentRuntime, SubagentStartRequest
from membrane.testing import FunctionModel

WORKER = """\
---
name: worker
description: Works.
tools: Read, Bash, Write
disallowed_tools: ['Bash(rm:*)']
budget: {{tokens: 5000, turns: 4}}
{extra}---
Do the work.
"""


def _cli(project: Path, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "membrane", *args, "--project", str(project), "--json"],
        cwd=project, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


async def _run(project: Path) -> str:
    async def answer(request: ModelRequest) -> ModelResponse:
        return ModelResponse(text="done")

    async with SubagentRuntime.open(project, model=FunctionModel(answer)) as runtime:
        with anyio.fail_after(60):
            result = await runtime.run(SubagentStartRequest("worker", "work"))
    return result.run_id


@pytest.mark.anyio
async def test_explain_prints_the_digest_the_run_published_and_show_reports(
    tmp_path: Path, isolated_home: Path
) -> None:
    project = tmp_path / "project"
    agents = project / ".membrane" / "agents"
    agents.mkdir(parents=True)
    (agents / "worker.md").write_text(WORKER.format(extra=""), encoding="utf-8")

    explained = _cli(project, "explain", "worker", "--top-level")
    run_id = await _run(project)
    shown = _cli(project, "show", run_id)
    published = next(e["data"] for e in shown["events"] if e["kind"] == "published")

    digest = explained["authority_digest"]
    assert digest.startswith("sha256:") and len(digest) == len("sha256:") + 64
    assert published["authority_digest"] == digest
    assert shown["run"]["authority_digest"] == digest

    # Any change to what bounds the child changes the digest: here, its mode.
    (agents / "worker.md").write_text(WORKER.format(extra="permission: plan\n"), encoding="utf-8")
    assert _cli(project, "explain", "worker", "--top-level")["authority_digest"] != digest
