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
from typing import Annotated, Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from membrane.cli.app import app, err_console, safe_text
from membrane.cli.declare import Argument, Group, Option
from membrane.cli.run import STATE_OPTION
from membrane.cli.runs import existing_state
from membrane.errors import StoreError
from membrane.store.base import DeadLetter, OutboxItem
from membrane.store.sqlite import SQLiteStore

__all__ = ["outbox_app"]

outbox_app = Group(help="The run outbox: deliveries owed to runs, and dead letters.")
app.add_group(outbox_app, name="outbox")

#: More items than any listing shows at once.
_LIMIT = 10_000


def _row(item: OutboxItem | DeadLetter, error: str | None) -> dict[str, Any]:
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


def _rows(state: Path, *, dead: bool) -> list[dict[str, Any]]:
    store = SQLiteStore(state)
    try:
        if dead:
            return [_row(d, d.last_error) for d in store.dead_outbox(limit=_LIMIT)]
        return [_row(i, store.outbox_error(i.id)) for i in store.pending_outbox(limit=_LIMIT)]
    finally:
        store.close()


@outbox_app.command("list")
def list_items(
    dead: Annotated[bool, Option("--dead", help="List the dead letters instead.")] = False,
    project: Annotated[Path, Option(help="The project folder.")] = Path("."),
    as_json: Annotated[bool, Option("--json", help="One JSON object per item.")] = False,
    state_file: Annotated[Path | None, STATE_OPTION] = None,
) -> None:
    """List the undelivered outbox items (--dead: the dead letters), oldest first, each with
    its kind, recipient, attempts and last error. Nothing is created or changed."""
    state = existing_state(project, state_file)
    rows = _rows(state, dead=dead) if state.exists() else []
    what = "dead letters" if dead else "undelivered items"
    if as_json:
        for row in rows:
            sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
        if not rows:
            err_console.print(Text(f"no {what} in {state}"))
        return
    console = Console(soft_wrap=True)
    if not rows:
        console.print(Text(safe_text(f"no {what} in {state}")))
        return
    table = Table(title=Text(safe_text(f"{what} in {state}")), box=box.SIMPLE_HEAD)
    for column in ("id", "kind", "recipient", "attempts", "last error"):
        table.add_column(column, no_wrap=column != "last error")
    for row in rows:
        table.add_row(
            str(row["id"]),
            Text(safe_text(str(row["kind"]))),
            Text(safe_text(row["recipient"])),
            str(row["attempts"]),
            Text(safe_text(row["last_error"] or "-")),
        )
    console.print(table)


@outbox_app.command("retry")
def retry(
    item_id: Annotated[
        int,
        Argument(metavar="ITEM_ID", help="The dead letter's id (see outbox list --dead)."),
    ],
    project: Annotated[Path, Option(help="The project folder.")] = Path("."),
    state_file: Annotated[Path | None, STATE_OPTION] = None,
) -> None:
    """Queue the dead letter ID again, due now, with its attempts counted from zero."""
    state = existing_state(project, state_file)
    if not state.exists():
        raise StoreError(f"no dead letter {item_id}: {state} does not exist", path=str(state))
    store = SQLiteStore(state)
    try:
        item = store.revive_outbox(item_id)
    finally:
        store.close()
    Console(soft_wrap=True).print(
        Text(safe_text(f"requeued outbox item {item.id} for {item.recipient}"))
    )
