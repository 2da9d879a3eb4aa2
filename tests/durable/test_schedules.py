"""Scheduled work with a controllable clock: validation, DST in Europe/Berlin, catch-up after
downtime, and a restart exactly at a due time firing once (real SQLite, real runtime)."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import anyio
import pytest

from membrane.durable.schedules import ScheduleBook, ScheduleRunner, parse_duration
from membrane.errors import InvalidSchedule, UnknownSchedule
from membrane.runtime import RuntimeOptions, SubagentStartRequest
from membrane.store.memory import MemoryStore
from membrane.store.sqlite import SQLiteStore
from membrane.testing import ScriptedModel

BERLIN = {"TZ": "Europe/Berlin"}


class Clock:
    def __init__(self, start: datetime) -> None:
        self.now = start.timestamp()

    def __call__(self) -> float:
        return self.now

    def at(self, when: datetime) -> None:
        self.now = when.timestamp()


def berlin(*args: int) -> datetime:
    return datetime(*args, tzinfo=ZoneInfo("Europe/Berlin"))  # type: ignore[misc]


def local(ts: float | None) -> str:
    assert ts is not None
    return datetime.fromtimestamp(ts, tz=ZoneInfo("Europe/Berlin")).isoformat()


def book(clock: Clock, store: object | None = None) -> ScheduleBook:
    return ScheduleBook(store or MemoryStore(), clock=clock, env=BERLIN)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "forms",
    [
        {},
        {"delay_seconds": 60, "cron": "* * * * *"},
        {"run_at": "2030-01-01T00:00Z", "cron": "0 * * * *"},
    ],
)
def test_exactly_one_of_the_three_forms_is_required(forms: dict[str, object]) -> None:
    with pytest.raises(InvalidSchedule) as caught:
        book(Clock(berlin(2026, 1, 1))).add("lead", "go", **forms)  # type: ignore[arg-type]
    assert caught.value.code == "invalid-schedule"
    assert "--in/delay_seconds, --at/run_at and --cron/cron" in caught.value.message


def test_a_naive_timestamp_a_bad_cron_a_bad_zone_and_a_past_time_are_refused() -> None:
    pages = book(Clock(berlin(2026, 1, 1)))
    with pytest.raises(InvalidSchedule, match="no time zone"):
        pages.add("lead", "go", run_at="2026-12-01T09:00:00")
    with pytest.raises(InvalidSchedule, match="not a cron expression"):
        pages.add("lead", "go", cron="every day")
    with pytest.raises(InvalidSchedule, match="not a time zone"):
        pages.add("lead", "go", cron="0 9 * * *", tz="Mars/Olympus")
    with pytest.raises(InvalidSchedule, match="in the past"):
        pages.add("lead", "go", run_at="2025-01-01T00:00:00Z")
    with pytest.raises(InvalidSchedule, match="not a duration"):
        pages.add("lead", "go", delay_seconds="soon")
    assert pages.schedules() == []


def test_durations_and_offset_timestamps() -> None:
    assert [parse_duration(t) for t in ("90", "90s", "30m", "2h", "1d", "1h30m")] == [
        90,
        90,
        1800,
        7200,
        86400,
        5400,
    ]
    clock = Clock(berlin(2026, 6, 1, 12, 0))
    pages = book(clock)
    soon = pages.add("lead", "go", delay_seconds="30m")
    assert soon.next_due == clock.now + 1800 and soon.kind == "in"
    fixed = pages.add("lead", "go", run_at="2026-06-02T09:00:00+01:00")
    described = fixed.describe()
    assert described["next_run_iso"] == "2026-06-02T08:00:00Z"
    assert described["timezone"] == "Europe/Berlin"
    assert str(described["next_run_local"]).startswith("2026-06-02 10:00:00 CEST")


def test_cron_uses_the_host_zone_and_survives_spring_forward() -> None:
    clock = Clock(berlin(2026, 3, 28, 12, 0))
    pages = book(clock)
    nightly = pages.add("lead", "nightly", cron="30 2 * * *")
    assert nightly.timezone == "Europe/Berlin"
    # 02:30 does not exist on 2026-03-29: it fires once, at the first valid time after it.
    assert local(nightly.next_due) == "2026-03-29T03:00:00+02:00"
    nightly = pages.advance(nightly, due=nightly.next_due or 0, last={"status": "fired"})
    assert local(nightly.next_due) == "2026-03-30T02:30:00+02:00"
    utc = pages.add("lead", "nightly", cron="30 2 * * *", tz="UTC")
    assert datetime.fromtimestamp(utc.next_due or 0, tz=UTC).hour == 2


def test_cron_fires_a_repeated_wall_clock_time_once_on_fall_back() -> None:
    clock = Clock(berlin(2026, 10, 24, 12, 0))
    pages = book(clock)
    nightly = pages.add("lead", "nightly", cron="30 2 * * *")
    first = nightly.next_due or 0
    assert local(first) == "2026-10-25T02:30:00+02:00"
    clock.now = first
    nightly = pages.advance(nightly, due=first, last={"status": "fired"})
    # 02:30 comes again an hour later (CET); it does not fire twice.
    assert local(nightly.next_due) == "2026-10-26T02:30:00+01:00"
    clock.at(berlin(2026, 10, 25, 1, 30))
    hourly = pages.add("lead", "hourly", cron="0 * * * *")
    seen = []
    for _ in range(3):
        due = hourly.next_due or 0
        seen.append(local(due))
        clock.now = due
        hourly = pages.advance(hourly, due=due, last={"status": "fired"})
    assert seen == [
        "2026-10-25T02:00:00+02:00",
        "2026-10-25T03:00:00+01:00",
        "2026-10-25T04:00:00+01:00",
    ]


@pytest.mark.anyio
async def test_due_schedules_fire_with_a_derived_request_id_and_missed_ones_follow_catch_up() -> (
    None
):
    clock = Clock(berlin(2026, 6, 1, 12, 0))
    pages = book(clock)
    once = pages.add("lead", "fire me", delay_seconds=60)
    skipped = pages.add("lead", "skip me", delay_seconds=60, catch_up="skip")
    daily = pages.add("lead", "daily", cron="0 13 * * *")
    started: list[tuple[str, str, str]] = []

    async def start(agent: str, task: str, request_id: str, role: str | None) -> str:
        started.append((agent, task, request_id))
        return f"run-{len(started)}"

    runner = ScheduleRunner(pages, start, clock=clock)
    assert await runner.tick() == []
    clock.now += 3 * 86400  # down for three days: everything is late
    records = {r["schedule_id"]: r for r in await runner.tick()}
    assert [task for _, task, _ in started] == ["fire me", "daily"] or [
        task for _, task, _ in started
    ] == ["daily", "fire me"]
    assert records[once.schedule_id]["status"] == "fired"
    assert records[once.schedule_id]["missed"] is True
    assert records[once.schedule_id]["request_id"] == (
        f"schedule:{once.schedule_id}:2026-06-01T10:01:00Z"
    )
    assert records[skipped.schedule_id]["status"] == "skipped"
    assert pages.get(skipped.schedule_id).next_due is None
    assert pages.get(skipped.schedule_id).last == {
        k: v for k, v in records[skipped.schedule_id].items() if k != "schedule_id"
    }
    # Three missed days of the cron fire once, then it goes on from now.
    assert sum(1 for _, task, _ in started if task == "daily") == 1
    assert (pages.get(daily.schedule_id).next_due or 0) > clock.now
    assert await runner.tick() == []
    pages.remove(once.schedule_id)
    with pytest.raises(UnknownSchedule):
        pages.remove(once.schedule_id)


@pytest.mark.anyio
async def test_a_restart_exactly_at_a_due_time_fires_once(
    tmp_path: Path, isolated_home: Path
) -> None:
    from membrane.agents.catalog import Catalog
    from membrane.runtime import InProcessProvider, SubagentRuntime
    from membrane.tools.registry import ToolRegistry

    project = tmp_path / "project"
    (project / ".membrane" / "agents").mkdir(parents=True)
    (project / ".membrane" / "agents" / "lead.md").write_text("---\nname: lead\n---\nGo.\n")
    state = tmp_path / "state.db"
    clock = Clock(berlin(2026, 6, 1, 12, 0))
    with SQLiteStore(state) as store:
        created = ScheduleBook(store, clock=clock, env=BERLIN).add("lead", "go", delay_seconds=5)
    clock.now = created.next_due or 0

    async def one_process(*, crash_before_advance: bool) -> None:
        with SQLiteStore(state) as store:
            pages = ScheduleBook(store, clock=clock, env=BERLIN)
            runtime = SubagentRuntime(
                catalog=Catalog(project=project, home=isolated_home),
                registry=ToolRegistry(),
                provider=InProcessProvider(ScriptedModel("default:\n  - text: done\n")),
                store=store,
                options=RuntimeOptions(project=project),
            )
            async with runtime:

                async def start(agent: str, task: str, request_id: str, role: str | None) -> str:
                    request = SubagentStartRequest(agent, task, request_id=request_id)
                    info = await runtime.start(request)
                    if crash_before_advance:
                        raise KeyboardInterrupt  # the process dies before the schedule moves on
                    return info.run_id

                with anyio.fail_after(20):
                    with contextlib.suppress(KeyboardInterrupt):
                        await ScheduleRunner(pages, start, clock=clock).tick()

    await one_process(crash_before_advance=True)
    await one_process(crash_before_advance=False)
    with SQLiteStore(state) as store:
        sessions = store.list_sessions()
        last = ScheduleBook(store, clock=clock).get(created.schedule_id).last
    assert len(sessions) == 1
    assert last is not None and last["status"] == "fired"
    assert last["run_id"] == sessions[0].session_id


def test_a_definitions_schedule_field_registers_follows_and_leaves_its_schedule() -> None:
    from membrane.agents import parse_definition
    from membrane.durable.schedules import DEFINITION_TASK

    def definition(schedule: str | None) -> object:
        line = f"schedule: '{schedule}'\n" if schedule else ""
        return parse_definition(
            f"---\nname: nightly\n{line}---\nCheck.\n", path="nightly.md", root="project"
        )

    clock = Clock(berlin(2026, 6, 1, 12, 0))
    pages = book(clock)
    manual = pages.add("lead", "by hand", delay_seconds=60)
    [held] = pages.sync_definitions({"nightly": definition("0 3 * * *")})  # type: ignore[dict-item]
    assert (held.schedule_id, held.agent, held.task) == (
        "agent:nightly",
        "nightly",
        DEFINITION_TASK,
    )
    assert local(held.next_due) == "2026-06-02T03:00:00+02:00"
    # Unchanged: kept as it is (its next run is not recomputed).
    clock.now += 3600
    [again] = pages.sync_definitions({"nightly": definition("0 3 * * *")})  # type: ignore[dict-item]
    assert again.next_due == held.next_due and again.created_at == held.created_at
    [changed] = pages.sync_definitions({"nightly": definition("0 4 * * *")})  # type: ignore[dict-item]
    assert local(changed.next_due) == "2026-06-02T04:00:00+02:00"
    assert pages.sync_definitions({"nightly": definition(None)}) == []  # type: ignore[dict-item]
    assert [s.schedule_id for s in pages.schedules()] == [manual.schedule_id]
    broken = definition("every night")
    assert broken.schedule is None or not isinstance(broken.schedule, str)  # type: ignore[attr-defined]
    assert any(w.code == "unknown-value" for w in broken.warnings)  # type: ignore[attr-defined]
