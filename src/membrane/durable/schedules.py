"""Scheduled work: start an agent later, once (``--in``/``--at``) or on a cron expression.

A request names exactly one of ``delay_seconds`` (``--in``), ``run_at`` (``--at``) and ``cron``
(``--cron``); anything else is ``invalid-schedule`` naming the three. An absolute time must carry
``Z`` or an offset. Cron runs in the runtime host's local time zone unless ``tz`` names another:
on a spring-forward day a time that does not exist fires once, at the first valid time after it;
on a fall-back day a wall-clock time that occurs twice fires once, at its first occurrence (as
cron daemons do).

Schedules are durable (one record each in the store). ``ScheduleRunner.tick`` fires every due
schedule with the request id ``schedule:<id>:<due time>``: a start is idempotent by request id,
so a restart around a due time never fires twice. A due time missed while nothing ran (later than
``late_after`` seconds) fires once, or is skipped when the schedule says ``catch_up = "skip"``;
either way the record says what happened.
"""

from __future__ import annotations

import os
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, tzinfo
from typing import Final, Literal, cast
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from membrane.agents.definition import AgentDefinition
from membrane.errors import InvalidSchedule, UnknownSchedule
from membrane.json_types import JSONDict, JSONObject
from membrane.store.base import Store

__all__ = [
    "DEFINITION_PREFIX",
    "DEFINITION_TASK",
    "LATE_AFTER",
    "Schedule",
    "ScheduleBook",
    "ScheduleRunner",
    "format_schedule",
    "host_zone",
    "next_cron",
    "parse_duration",
    "parse_timestamp",
]

Kind = Literal["in", "at", "cron"]
CatchUp = Literal["once", "skip"]
#: Schedules made from a definition's ``schedule:`` field are ``agent:NAME``.
DEFINITION_PREFIX: Final = "agent:"
#: The task a definition's own schedule starts it with.
DEFINITION_TASK: Final = "Scheduled run: do the work your instructions describe."
#: A due time passed by more than this when first seen counts as missed.
LATE_AFTER: Final = 60.0
_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION: Final = re.compile(r"(?:(\d+)\s*([smhdw]))", re.I)
#: How far past one occurrence to look for the next distinct wall-clock time.
_MAX_OCCURRENCE_STEPS: Final = 8


@dataclass(frozen=True, slots=True)
class Schedule:
    """One schedule. Times are seconds since the epoch; ``next_due`` is ``None`` once a one-shot
    has fired (or been skipped). ``last`` records the latest firing or skip."""

    schedule_id: str
    agent: str
    task: str
    kind: Kind
    timezone: str
    next_due: float | None
    created_at: float
    cron: str | None = None
    catch_up: CatchUp = "once"
    last: JSONObject | None = None
    #: The role of the caller that made it (``None``: the host's own CLI); its runs start with
    #: that role, so a schedule never widens what its maker could start.
    role: str | None = None

    def to_record(self) -> JSONDict:
        return {
            "schedule_id": self.schedule_id,
            "agent": self.agent,
            "task": self.task,
            "kind": self.kind,
            "timezone": self.timezone,
            "next_due": self.next_due,
            "created_at": self.created_at,
            "cron": self.cron,
            "catch_up": self.catch_up,
            "last": None if self.last is None else dict(self.last),
            "role": self.role,
        }

    @classmethod
    def from_record(cls, record: Mapping[str, object]) -> Schedule:
        next_due = record.get("next_due")
        last = record.get("last")
        cron = record.get("cron")
        role = record.get("role")
        return cls(
            schedule_id=str(record["schedule_id"]),
            agent=str(record["agent"]),
            task=str(record["task"]),
            kind=cast(Kind, record["kind"]),
            timezone=str(record["timezone"]),
            next_due=float(next_due) if isinstance(next_due, int | float) else None,
            created_at=float(cast(float, record.get("created_at", 0.0))),
            cron=cron if isinstance(cron, str) else None,
            catch_up="skip" if record.get("catch_up") == "skip" else "once",
            last=dict(last) if isinstance(last, Mapping) else None,
            role=role if isinstance(role, str) else None,
        )

    def describe(self) -> JSONDict:
        """What both the CLI and the action print: the authoritative zone and the next run in
        that zone's local form and in ISO form (UTC)."""
        out = self.to_record()
        zone = _zone(self.timezone)
        if self.next_due is None:
            out["next_run_local"] = None
            out["next_run_iso"] = None
        else:
            when = datetime.fromtimestamp(self.next_due, tz=UTC)
            out["next_run_local"] = when.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S %Z (%z)")
            out["next_run_iso"] = when.isoformat().replace("+00:00", "Z")
        return out


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``30m``, ``2h``, ``1d``, ``1h30m``: seconds, more than zero."""
    raw = text.strip()
    if re.fullmatch(r"\d+(\.\d+)?", raw):
        seconds = float(raw)
    else:
        parts = _DURATION.findall(raw)
        if not parts or _DURATION.sub("", raw).strip():
            raise InvalidSchedule(
                f"--in {text!r} is not a duration; write seconds or units like 90s, 30m, 2h, 1d",
                field="delay_seconds",
            )
        seconds = float(sum(int(n) * _UNITS[u.lower()] for n, u in parts))
    if not seconds > 0:
        raise InvalidSchedule("a delay must be more than zero seconds", field="delay_seconds")
    return seconds


def parse_timestamp(text: str) -> datetime:
    """An ISO 8601 time with ``Z`` or an offset; a naive time is refused (it is ambiguous)."""
    raw = text.strip()
    try:
        when = datetime.fromisoformat(raw[:-1] + "+00:00" if raw.endswith(("Z", "z")) else raw)
    except ValueError:
        raise InvalidSchedule(
            f"--at {text!r} is not an ISO 8601 timestamp (like 2026-12-01T09:00:00+01:00)",
            field="run_at",
        ) from None
    if when.tzinfo is None or when.utcoffset() is None:
        raise InvalidSchedule(
            f"--at {text!r} has no time zone; add Z or an offset such as +01:00",
            field="run_at",
        )
    return when


def host_zone(env: Mapping[str, str] | None = None) -> tuple[tzinfo, str]:
    """The runtime host's local time zone and its name: ``TZ`` when it names a zone, else
    ``/etc/localtime``'s zone, else the fixed offset in force now."""
    environ = os.environ if env is None else env
    name = environ.get("TZ", "").lstrip(":")
    if name:
        try:
            return ZoneInfo(name), name
        except (ZoneInfoNotFoundError, ValueError):
            pass
    try:
        target = os.path.realpath("/etc/localtime")
        marker = "zoneinfo" + os.sep
        if marker in target:
            found = target.split(marker, 1)[1]
            return ZoneInfo(found), found
    except (OSError, ZoneInfoNotFoundError, ValueError):
        pass
    local = datetime.now().astimezone().tzinfo
    assert local is not None
    return local, str(local)


def _zone(name: str) -> tzinfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        zone, _ = host_zone()
        return zone


def _named_zone(tz: str | None, env: Mapping[str, str] | None) -> tuple[tzinfo, str]:
    if tz is None:
        return host_zone(env)
    try:
        return ZoneInfo(tz), tz
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidSchedule(
            f"--tz {tz!r} is not a time zone name (like Europe/Berlin or UTC)", field="tz"
        ) from None


def next_cron(expression: str, after: float, zone: tzinfo) -> float:
    """The first occurrence of ``expression`` strictly after ``after`` in ``zone``, skipping a
    repeat of the same wall-clock time on a fall-back day."""
    from croniter import croniter

    start = datetime.fromtimestamp(after, tz=UTC).astimezone(zone)
    # On a fall-back day the wall clock shows ``after``'s time again an hour later: an
    # occurrence at the same wall-clock time as the one just passed is that repeat.
    previous = start
    iterator = croniter(expression, start)
    for _ in range(_MAX_OCCURRENCE_STEPS):
        candidate = iterator.get_next(datetime)
        if candidate.replace(tzinfo=None) != previous.replace(tzinfo=None):
            return candidate.timestamp()
        previous = candidate
    return candidate.timestamp()


def _check_cron(expression: str) -> None:
    from croniter import croniter

    if not croniter.is_valid(expression):
        raise InvalidSchedule(
            f"--cron {expression!r} is not a cron expression (five fields: minute hour day "
            "month weekday)",
            field="cron",
        )


class ScheduleBook:
    """Schedules in a store: add (with validation), list, get, remove, and advance."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Callable[[], float] = time.time,
        env: Mapping[str, str] | None = None,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self._store = store
        self._clock = clock
        self._env = env
        #: Called after a schedule is added or removed (a firing loop wakes up for it).
        self._on_change = on_change

    def add(
        self,
        agent: str,
        task: str,
        *,
        delay_seconds: float | str | None = None,
        run_at: str | None = None,
        cron: str | None = None,
        tz: str | None = None,
        catch_up: str = "once",
        role: str | None = None,
    ) -> Schedule:
        """Validate and store a new schedule. Exactly one of the three forms."""
        forms = (("delay_seconds", delay_seconds), ("run_at", run_at), ("cron", cron))
        given = [name for name, value in forms if value is not None]
        if len(given) != 1:
            raise InvalidSchedule(
                "give exactly one of --in/delay_seconds, --at/run_at and --cron/cron"
                + (f" (got {', '.join(given)})" if given else ""),
                field="delay_seconds|run_at|cron",
            )
        if not agent.strip() or not task.strip():
            raise InvalidSchedule("a schedule needs an agent and a task", field="agent")
        if catch_up not in ("once", "skip"):
            raise InvalidSchedule(
                f"catch_up must be 'once' or 'skip', not {catch_up!r}", field="catch_up"
            )
        now = self._clock()
        zone, zone_name = _named_zone(tz, self._env)
        kind: Kind
        if delay_seconds is not None:
            kind, due = "in", now + _delay(delay_seconds)
        elif run_at is not None:
            kind, due = "at", parse_timestamp(run_at).timestamp()
            if due <= now:
                raise InvalidSchedule(f"--at {run_at!r} is in the past", field="run_at")
        else:
            assert cron is not None
            _check_cron(cron)
            kind, due = "cron", next_cron(cron, now, zone)
        schedule = Schedule(
            schedule_id=f"sch-{secrets.token_hex(6)}",
            agent=agent,
            task=task,
            kind=kind,
            timezone=zone_name,
            next_due=due,
            created_at=now,
            cron=cron,
            catch_up=cast(CatchUp, catch_up),
            role=role,
        )
        self._store.put_schedule(schedule.schedule_id, schedule.to_record())
        if self._on_change is not None:
            self._on_change()
        return schedule

    def schedules(self) -> list[Schedule]:
        return [Schedule.from_record(r) for r in self._store.list_schedules()]

    def get(self, schedule_id: str) -> Schedule:
        record = self._store.get_schedule(schedule_id)
        if record is None:
            raise UnknownSchedule(f"no schedule {schedule_id!r}", schedule_id=schedule_id)
        return Schedule.from_record(record)

    def remove(self, schedule_id: str) -> None:
        if not self._store.delete_schedule(schedule_id):
            raise UnknownSchedule(f"no schedule {schedule_id!r}", schedule_id=schedule_id)
        if self._on_change is not None:
            self._on_change()

    def sync_definitions(self, definitions: Mapping[str, AgentDefinition]) -> list[Schedule]:
        """Schedules for the definitions that carry ``schedule:`` (id ``agent:NAME``): added when
        new, replaced when the expression changed (an unchanged one keeps its next run), removed
        when the definition no longer has one. Returns the definition schedules now held."""
        wanted = {
            f"{DEFINITION_PREFIX}{name}": (name, d.schedule)
            for name, d in definitions.items()
            if isinstance(d.schedule, str)
        }
        held: list[Schedule] = []
        for schedule in self.schedules():
            if not schedule.schedule_id.startswith(DEFINITION_PREFIX):
                continue
            entry = wanted.get(schedule.schedule_id)
            if entry is None or entry[1] != schedule.cron:
                self._store.delete_schedule(schedule.schedule_id)
            else:
                held.append(schedule)
                del wanted[schedule.schedule_id]
        for schedule_id, (name, cron) in sorted(wanted.items()):
            _check_cron(cron)
            zone, zone_name = host_zone(self._env)
            now = self._clock()
            schedule = Schedule(
                schedule_id=schedule_id,
                agent=name,
                task=DEFINITION_TASK,
                kind="cron",
                timezone=zone_name,
                next_due=next_cron(cron, now, zone),
                created_at=now,
                cron=cron,
            )
            self._store.put_schedule(schedule_id, schedule.to_record())
            held.append(schedule)
        return held

    def advance(self, schedule: Schedule, *, due: float, last: JSONObject) -> Schedule:
        """Record ``last`` and move past ``due`` (a one-shot is done)."""
        if schedule.kind == "cron" and schedule.cron is not None:
            after = max(due, self._clock())
            following: float | None = next_cron(schedule.cron, after, _zone(schedule.timezone))
        else:
            following = None
        updated = replace(schedule, next_due=following, last=dict(last))
        self._store.put_schedule(updated.schedule_id, updated.to_record())
        return updated


def _delay(value: float | str) -> float:
    if isinstance(value, str):
        return parse_duration(value)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise InvalidSchedule(
            f"delay_seconds must be a positive number, got {value!r}", field="delay_seconds"
        )
    return float(value)


#: Starts ``agent`` on ``task`` with ``request_id`` (idempotent by id) as ``role``; returns the
#: run id.
StartFn = Callable[[str, str, str, str | None], Awaitable[str]]


class ScheduleRunner:
    """Fires due schedules through ``start``. ``tick()`` once per check; ``membrane serve``
    calls it on a timer."""

    def __init__(
        self,
        book: ScheduleBook,
        start: StartFn,
        *,
        clock: Callable[[], float] = time.time,
        late_after: float = LATE_AFTER,
    ) -> None:
        self._book = book
        self._start = start
        self._clock = clock
        self._late_after = late_after

    async def tick(self) -> list[JSONDict]:
        """Fire (or skip) every schedule due now; return what was recorded for each."""
        now = self._clock()
        done: list[JSONDict] = []
        for schedule in self._book.schedules():
            due = schedule.next_due
            if due is None or due > now:
                continue
            late = now - due > self._late_after
            key = datetime.fromtimestamp(due, tz=UTC).isoformat().replace("+00:00", "Z")
            request_id = f"schedule:{schedule.schedule_id}:{key}"
            last: JSONDict = {"due": key, "request_id": request_id, "missed": late}
            if late and schedule.catch_up == "skip":
                last["status"] = "skipped"
            else:
                try:
                    last["run_id"] = await self._start(
                        schedule.agent, schedule.task, request_id, schedule.role
                    )
                    last["status"] = "fired"
                except Exception as exc:
                    code = getattr(exc, "code", type(exc).__name__)
                    last.update(status="failed", error={"code": code, "message": str(exc)})
            self._book.advance(schedule, due=due, last=last)
            done.append({"schedule_id": schedule.schedule_id, **last})
        return done

    def next_wake(self) -> float | None:
        """The earliest due time of any schedule, for a sleeping loop."""
        dues = [s.next_due for s in self._book.schedules() if s.next_due is not None]
        return min(dues) if dues else None


def format_schedule(described: Mapping[str, object]) -> str:
    """The one text form of a schedule (``Schedule.describe()``), for the CLI and the action:
    the authoritative zone and the next run in that zone and in ISO form."""
    kinds = {"in": "once (relative)", "at": "once (absolute)"}
    when = kinds.get(str(described.get("kind")), f"cron {described.get('cron')}")
    head = f"schedule {described.get('schedule_id')}: {described.get('agent')}"
    lines = [
        f"{head} - {described.get('task')}",
        f"  when:      {when}",
        f"  time zone: {described.get('timezone')} (authoritative for this schedule)",
    ]
    if described.get("next_run_iso") is None:
        lines.append("  next run:  none (done)")
    else:
        lines.append(f"  next run:  {described.get('next_run_local')}")
        lines.append(f"             {described.get('next_run_iso')}")
    last = described.get("last")
    if isinstance(last, Mapping):
        lines.append(f"  last:      {last.get('status')} for {last.get('due')}")
    return "\n".join(lines)
