"""Seed 002's light plan with no in-process ``PlanningHost``: a lead run by a real
``membrane serve`` offers the light plan at intake and waits in ``light_offer`` (nothing gated
unlocked) until the host answers, over the socket (``workflow/answer``) or with
``membrane workflow accept-light|decline-light`` headless on the project's state; accepted, the
lead takes ``light_plan -> ready`` and the approval gate stays; declined, every round runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from server_support import START_BOUND, Running, clean_env, owner

from membrane.errors import MembraneError
from membrane.json_types import JSONDict
from membrane.server import Client

pytestmark = pytest.mark.anyio

LEAD = """\
---
name: lead
description: Plans under the planning gate.
workflow: planning
---
Plan the work.
"""

INTAKE = {
    "summary": "a one-line fix",
    "touches_ui_surface": False,
    "low_risk": True,
    "single_worker": True,
}


def _script(path: Path, turns: list[JSONDict]) -> str:
    path.write_text(json.dumps({"agents": {"lead": turns}}))
    return f"scripted:{path}"


#: The lead's first life: the intake, then it ends its turn waiting for the user.
OFFER: list[JSONDict] = [
    {"tool_calls": [{"name": "recordCodebaseIntake", "arguments": INTAKE}]},
    {"text": "the light plan is offered: waiting for the user"},
]
#: Resumed once the user accepted: the light plan, validation, routing, then ready.
LIGHT: list[JSONDict] = [
    {"tool_calls": [{"name": "recordLightPlan", "arguments": {"steps": ["fix", "test"]}}]},
    {"tool_calls": [{"name": "proposeValidationSteps", "arguments": {"steps": ["tests"]}}]},
    {
        "tool_calls": [
            {
                "name": "recordModelRouting",
                "arguments": {"routes": [{"role": "worker", "model": "default"}]},
            }
        ]
    },
    {"tool_calls": [{"name": "finishPlanning", "arguments": {}}]},
    {"text": "the plan is ready"},
]


async def test_a_served_lead_waits_in_light_offer_until_the_host_accepts_or_declines(
    runtime: Running, tmp_path: Path
) -> None:
    socket, project, home = runtime.socket, runtime.project, runtime.home
    (project / ".membrane" / "agents" / "lead.md").write_text(LEAD)
    model = _script(tmp_path / "offer.json", OFFER)
    light = _script(tmp_path / "light.json", LIGHT)
    with anyio.fail_after(START_BOUND):
        async with Client.connect(socket) as client:
            ids = await _open(client, project, home)
            accepted = await _offered_run(client, ids, model)
            declined = await _offered_run(client, ids, model)
            at = {**ids, "runId": accepted}
            offered = (await client.request("workflow/get", at))["workflow"]
            answer = await client.request("workflow/answer", {**at, "answer": "accept_light_plan"})
            resume = {**at, "message": "the user accepted the light plan", "model": light}
            await client.request("runs/resume", resume)
            await client.request("runs/wait", at)
            ready = (await client.request("workflow/get", at))["workflow"]
            with pytest.raises(MembraneError) as twice:
                await client.request("workflow/answer", {**at, "answer": "decline_light_plan"})

            # The other run: the user declines with the headless command on the state file.
            argv = ["workflow", "decline-light", declined, "--project", str(project), "--json"]
            cli = subprocess.run(
                [sys.executable, "-m", "membrane", *argv],
                env=clean_env(home),
                capture_output=True,
                text=True,
                check=False,
            )
            full = (await client.request("workflow/get", {**ids, "runId": declined}))["workflow"]

    assert offered["phase"] == "light_offer" and offered["steps"]["intake"]["low_risk"] is True
    assert offered["auto_skipped_rounds"] == ["ui"] and offered["evidence"] == []
    assert answer["workflow"]["phase"] == "light_plan"
    assert ready["phase"] == "ready" and "approved_at" not in ready  # the gate stays
    assert sorted(ready["steps"]) == ["intake", "light_plan", "routing", "validation"]
    assert twice.value.code == "workflow-refused"
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["phase"] == "planning" and full["phase"] == "planning"
    assert full["auto_skipped_rounds"] == ["ui"]


async def _open(client: Client, project: Path, home: Path) -> dict[str, str]:
    await client.request("initialize", {"identity": owner(home)})
    reply = await client.request("projects/add", {"root": str(project)})
    return {"projectId": reply["projectId"]}


async def _offered_run(client: Client, ids: dict[str, str], model: str) -> str:
    """Start a lead whose intake is light; it ends its turn with the offer waiting."""
    start = {**ids, "agent": "lead", "task": "fix the typo", "model": model}
    run = (await client.request("runs/start", start))["run"]
    at = {**ids, "runId": run["run_id"]}
    done = (await client.request("runs/wait", at))["run"]
    assert done["status"] == "completed", done
    shown = (await client.request("workflow/get", at))["workflow"]
    assert shown["phase"] == "light_offer"
    return str(run["run_id"])
