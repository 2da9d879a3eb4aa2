"""``membrane outbox list [--dead]`` and ``membrane outbox retry ID``: the project's deliveries.

``list`` shows the undelivered items of the run outbox (``--dead``: the dead letters, the items
the drainer gave up on after ``outbox_max_attempts``), each with its kind, recipient, attempts
and last error. ``retry`` queues a dead letter again under its id, due now: the next runtime
on the store delivers it (a running one at its next drain pass), deduplicated as before.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from typer import Argument, Option

from membrane.cli.app import app, group
from membrane.cli.helptext import HelpCommand
from membrane.cli.options import STATE_OPTION
from membrane.cli.runs import existing_state, state_exists
from membrane.cli.screen import Screen, Table
from membrane.errors import StoreError

if TYPE_CHECKING:  # for annotations; the commands import what they run
    from membrane.store.base import DeadLetter, OutboxItem
    from membrane.store.select import StateTarget

__all__ = ["outbox_app", "outbox_rows"]

outbox_app = group("outbox", help="The run outbox: deliveries owed to runs, and dead letters.")
app.add_typer(outbox_app, name="outbox")

#: More items than any listing shows at once.
_LIMIT = 10_000


def _row(item: OutboxItem | DeadLetter, error: str | None) -> dict[str, Any]:
    from membrane.store.base import DeadLetter

    payload = item.payload
    row: dict[str, Any] = {
        "id": item.id,
        "kind": payload.get("kind"),
        "recipient": item.recipient,
        "attempts": item.attempts,
        "created_at": item.created_at,
        "last_error": error,
    }
    if isinstance(item, DeadLetter):
        row["dead_at"] = item.dead_at
    else:
        row["next_attempt_at"] = item.next_attempt_at
    return row


def outbox_rows(state: StateTarget, *, dead: bool) -> list[dict[str, Any]]:
    from membrane.store.select import open_reader

    store = open_reader(state)
    try:
        if dead:
            return [_row(d, d.last_error) for d in store.dead_outbox(limit=_LIMIT)]
        return [_row(i, store.outbox_error(i.id)) for i in store.pending_outbox(limit=_LIMIT)]
    finally:
        store.close()


@outbox_app.command("list", cls=HelpCommand)
def list_items(
    dead: Annotated[bool, Option("--dead", help="List the dead letters instead.")] = False,
    project: Annotated[Path, Option(help="The project folder.")] = Path("."),
    as_json: Annotated[
        bool, Option("--json", help="Print one JSON document: the state file and its items.")
    ] = False,
    state_file: Annotated[str | None, STATE_OPTION] = None,
) -> None:
    """List the undelivered outbox items (--dead: the dead letters), oldest first, each with
    its kind, recipient, attempts and last error. Nothing is created or changed."""
    from membrane.store.select import shown

    target = existing_state(project, state_file)
    rows = outbox_rows(target, dead=dead) if state_exists(target) else []
    what = "dead letters" if dead else "undelivered items"
    state = shown(target)
    if as_json:
        listed = {"state": state, "dead": dead, "items": rows}
        sys.stdout.write(json.dumps(listed, ensure_ascii=False) + "\n")
        return
    if not rows:
        Screen().line(f"no {what} in {state}")
        return
    columns = ("id", "kind", "recipient", "attempts", "last error")
    table = Table(columns, title=f"{what} in {state}", right=("id", "attempts"), whole=columns[:4])
    for row in rows:
        table.add_row(
            str(row["id"]),
            str(row["kind"]),
            row["recipient"],
            str(row["attempts"]),
            row["last_error"] or "-",
        )
    Screen().table(table)


@outbox_app.command("retry", cls=HelpCommand)
def retry(
    item_id: Annotated[
        int,
        Argument(metavar="ITEM_ID", help="The dead letter's id (see outbox list --dead)."),
    ],
    project: Annotated[Path, Option(help="The project folder.")] = Path("."),
    as_json: Annotated[
        bool, Option("--json", help="Print the requeued item as one JSON object.")
    ] = False,
    state_file: Annotated[str | None, STATE_OPTION] = None,
) -> None:
    """Queue the dead letter ITEM_ID again, due now, with its attempts counted from zero."""
    from membrane.store.select import open_writer

    state = existing_state(project, state_file)
    if not state_exists(state):
        raise StoreError(f"no dead letter {item_id}: {state} does not exist", path=str(state))
    store = open_writer(state)
    try:
        item = store.revive_outbox(item_id)
    finally:
        store.close()
    if as_json:
        done = {"id": item.id, "recipient": item.recipient, "attempts": item.attempts,
                "next_attempt_at": item.next_attempt_at}  # fmt: skip
        sys.stdout.write(json.dumps(done, ensure_ascii=False) + "\n")
        return
    Screen().line(f"requeued outbox item {item.id} for {item.recipient}")
