"""``membrane schedule add|list|remove`` and the ``schedule_agent`` action: one validation, one
text form, durable in the project's state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from membrane.cli import main
from membrane.durable.schedule_actions import schedule_tools
from membrane.durable.schedules import ScheduleBook, format_schedule
from membrane.errors import InvalidSchedule
from membrane.store.memory import MemoryStore
from membrane.tools.registry import ToolRegistry
from membrane.tools.scope import Scope
from membrane.tools.spec import ToolContext

CONTEXT = ToolContext(agent="host")


@pytest.fixture
def project(tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TZ", "Europe/Berlin")
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_add_list_and_remove_a_schedule_in_the_projects_state(
    project: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = ["--project", str(project)]
    code, out, _ = cli(capsys, "schedule", "add", "lead", "nightly", "--cron", "30 2 * * *", *where)
    assert code == 0
    assert "time zone: Europe/Berlin (authoritative for this schedule)" in out
    assert ("02:30:00 CE" in out and "T01:30:00Z" in out) or "T00:30:00Z" in out
    code, out, _ = cli(capsys, "schedule", "list", "--json", *where)
    [listed] = json.loads(out)["schedules"]
    assert (listed["agent"], listed["cron"], listed["timezone"]) == (
        "lead",
        "30 2 * * *",
        "Europe/Berlin",
    )
    states = list((isolated_home / "projects").glob("*/state.db"))
    assert len(states) == 1  # durable, outside the checkout
    assert not (project / ".membrane").exists()
    code, out, _ = cli(capsys, "schedule", "remove", listed["schedule_id"], "--json", *where)
    assert code == 0 and json.loads(out) == {"removed": listed["schedule_id"]}
    code, out, err = cli(capsys, "schedule", "remove", listed["schedule_id"], *where)
    assert code == 2 and "unknown-schedule" in err


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--in", "30m", "--cron", "* * * * *"], "give exactly one of"),
        ([], "give exactly one of"),
        (["--at", "2030-01-01T09:00:00"], "has no time zone"),
        (["--cron", "61 * * * *"], "not a cron expression"),
        (["--cron", "0 9 * * *", "--tz", "Nowhere/Else"], "not a time zone"),
    ],
)
def test_bad_schedules_fail_with_invalid_schedule(
    project: Path, capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    code, out, err = cli(capsys, "schedule", "add", "lead", "x", *args, "--project", str(project))
    assert code == 2
    assert err.startswith("invalid-schedule:") and needle in err
    code, out, _ = cli(capsys, "schedule", "list", "--json", "--project", str(project))
    assert json.loads(out) == {"schedules": []}


@pytest.mark.anyio
async def test_the_action_validates_alike_and_returns_the_same_text() -> None:
    registry = ToolRegistry()
    book = ScheduleBook(MemoryStore(), env={"TZ": "Europe/Berlin"})
    for tool in schedule_tools(book):
        registry.register(tool)
    view = Scope(registry, name="caller").view()
    added = await view.call(
        "schedule_agent", {"agent": "lead", "task": "t", "delay_seconds": "2h"}, CONTEXT
    )
    assert isinstance(added, dict)
    assert added["text"] == format_schedule(book.get(str(added["schedule_id"])).describe())
    assert added["timezone"] == "Europe/Berlin" and str(added["next_run_iso"]).endswith("Z")
    with pytest.raises(InvalidSchedule, match="give exactly one of"):
        await view.call(
            "schedule_agent",
            {"agent": "lead", "task": "t", "run_at": "2030-01-01T00:00Z", "cron": "* * * * *"},
            CONTEXT,
        )
    listed = await view.call("schedule_list", {}, CONTEXT)
    assert isinstance(listed, dict) and len(listed["schedules"]) == 1  # type: ignore[arg-type]


def test_actions_run_schedule_agent_prints_the_text_membrane_schedule_prints(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = ["--project", str(project), "--headless"]
    args = json.dumps({"agent": "lead", "task": "nightly", "cron": "30 2 * * *"})
    code, out, err = cli(capsys, "actions", "run", "schedule_agent", "--args", args, *where)
    assert code == 0, err
    assert out.startswith("schedule ") and ": lead - nightly" in out
    assert "time zone: Europe/Berlin (authoritative for this schedule)" in out
    code, listed, _ = cli(capsys, "schedule", "list", "--project", str(project))
    assert code == 0 and listed == out  # the typed command's text, to the letter
    code, out, _ = cli(capsys, "actions", "run", "schedule_agent", "--args", args, "--json", *where)
    assert code == 0 and json.loads(out)["result"]["cron"] == "30 2 * * *"
