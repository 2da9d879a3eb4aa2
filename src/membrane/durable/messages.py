"""Durable messages and stops (seed 002's ``messageAgent``, DESIGN rule 8).

``Messenger.send`` delivers a ``brief`` or ``ping`` to a run, ``Messenger.cancel`` a ``cancel``,
each at most once per ``request_id``:

1. **Pending first.** ``Store.begin_receipt(request_id, kind=...)`` writes a pending receipt
   before anything else happens.
2. **Act in one transaction.** The delivery (an outbox item for the recipient) is written and
   the receipt completed with ``{"delivery": {"id", "run_id", "kind"}}`` in one transaction:
   a crash before it commits leaves only the pending receipt (a retry is ``request-pending``
   until the sweeper reaps it after the TTL, then acts); a crash after it leaves the item,
   which the drainer delivers once, deduplicated by its id on the receiving side
   (``membrane.durable.deliveries``).
3. **Replay.** A repeated ``request_id``, in this process or a later one, returns the stored
   delivery (``replayed=True``) and writes nothing.

A failed write releases the receipt, so a retry acts again. The acting step has no ``await``,
so two calls with one ``request_id`` in one process never both act.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from membrane.durable.crashpoints import crash_point
from membrane.durable.deliveries import MESSAGE_KINDS
from membrane.durable.owners import cleared
from membrane.errors import InvalidRequest, RequestPending, StoreError
from membrane.json_types import JSONDict
from membrane.store.base import Receipt, Store

__all__ = ["Delivery", "Messenger"]

_KEY: Final = "delivery"


@dataclass(frozen=True, slots=True)
class Delivery:
    """One message or stop written to the outbox: the item ``id`` (its delivery id), for
    ``run_id``, of ``kind``; ``replayed`` when an earlier call with ``request_id`` wrote it."""

    id: int
    run_id: str
    kind: str
    request_id: str | None = None
    replayed: bool = False

    def to_dict(self) -> JSONDict:
        return {
            "delivery": self.id,
            "run_id": self.run_id,
            "kind": self.kind,
            "request_id": self.request_id,
            "replayed": self.replayed,
        }


class Messenger:
    """Writes messages and stops for one runtime's store.

    ``commit(work)`` runs ``work`` in one store transaction (with the runtime's queued events);
    ``deliver(recipient, payload)`` writes the outbox item inside it; ``offer(item_id,
    recipient, payload)`` hands it over once it has committed.
    """

    def __init__(
        self,
        store: Store,
        *,
        owner: str | None = None,
        commit: Callable[[Callable[[], int]], int],
        deliver: Callable[[str, Mapping[str, Any]], int],
        offer: Callable[[int, str, Mapping[str, Any]], None],
    ) -> None:
        self._store = store
        self._owner = owner
        self._commit = commit
        self._deliver = deliver
        self._offer = offer

    def message(
        self, run_id: str, text: str, *, request_id: str | None, sender: str, kind: str
    ) -> Delivery:
        """A ``brief`` or ``ping`` of ``text`` from ``sender`` to ``run_id``."""
        if not isinstance(text, str) or not text.strip():
            raise InvalidRequest("a message must be a non-empty string", field="message")
        if kind not in MESSAGE_KINDS:
            raise InvalidRequest(
                f"a message is a {' or a '.join(MESSAGE_KINDS)}, not {kind!r}", field="kind"
            )
        _check_request_id(request_id)
        payload = {"kind": kind, "from": sender, "text": text, "request_id": request_id}
        return self.send(run_id, payload, request_id=request_id, receipt_kind="message")

    def answer(
        self, run_id: str, payload: Mapping[str, Any], *, request_id: str | None
    ) -> Delivery:
        """The ``answer`` delivery ``payload`` (``membrane.runtime.questions``) to ``run_id``."""
        text = payload.get("text")
        if not isinstance(text, str) or not text.strip():
            raise InvalidRequest("an answer must be a non-empty string", field="message")
        _check_request_id(request_id)
        return self.send(run_id, payload, request_id=request_id, receipt_kind="message")

    def cancel(self, run_id: str, *, request_id: str | None, sender: str) -> Delivery:
        """A ``cancel`` of ``run_id`` from ``sender``."""
        _check_request_id(request_id)
        payload = {"kind": "cancel", "from": sender, "request_id": request_id}
        return self.send(run_id, payload, request_id=request_id, receipt_kind="stop")

    def send(
        self, run_id: str, payload: Mapping[str, Any], *, request_id: str | None, receipt_kind: str
    ) -> Delivery:
        """Write ``payload`` (a delivery of ``payload["kind"]``) for ``run_id`` once per
        ``request_id`` (every call when it is ``None``), then offer it."""
        kind = str(payload.get("kind"))
        if request_id is not None:
            receipt = self._store.begin_receipt(request_id, kind=receipt_kind, owner=self._owner)
            if receipt is not None and cleared(self._store, receipt):
                # Its owner died before writing it: this call owns the action now.
                receipt = self._store.begin_receipt(
                    request_id, kind=receipt_kind, owner=self._owner
                )
            if receipt is not None:
                return _replay(receipt, request_id)
            crash_point("message.pending")
        store = self._store

        def write() -> int:
            item_id = self._deliver(run_id, payload)
            if request_id is not None:
                stored: JSONDict = {"id": item_id, "run_id": run_id, "kind": kind}
                store.complete_receipt(request_id, {_KEY: stored})
            crash_point("message.write")
            return item_id

        try:
            item_id = self._commit(write)
        except BaseException:
            if request_id is not None:
                with contextlib.suppress(StoreError):
                    store.release_receipt(request_id)
            raise
        crash_point("message.written")
        self._offer(item_id, run_id, payload)
        return Delivery(item_id, run_id, kind, request_id)


def _check_request_id(request_id: object) -> None:
    if request_id is not None and (not isinstance(request_id, str) or not request_id.strip()):
        raise InvalidRequest("request_id must be a non-empty string", field="request_id")


def _replay(receipt: Receipt, request_id: str) -> Delivery:
    if receipt.status != "completed":
        raise RequestPending(
            f"a {receipt.kind} with request_id {request_id!r} is in progress in a live process "
            f"({receipt.owner or 'owner unknown'}), or was interrupted on another host before "
            "it was written; retry once it completes or its receipt is reaped (after the "
            "receipt TTL), or use a new request_id",
            request_id=request_id,
            kind=receipt.kind,
        )
    stored = (receipt.result or {}).get(_KEY)
    item_id = stored.get("id") if isinstance(stored, Mapping) else None
    if not isinstance(stored, Mapping) or not isinstance(item_id, int):
        raise StoreError(
            f"the receipt of request {request_id!r} holds no delivery", request_id=request_id
        )
    return Delivery(item_id, str(stored.get("run_id")), str(stored.get("kind")), request_id, True)
