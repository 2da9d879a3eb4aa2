"""What every store shares below the protocol: the checks, encodings and errors that give
``SQLiteStore``, ``PostgresStore`` and ``MemoryStore`` the same semantics (a depth is a safe
integer, a transcript only grows, JSON in and a fresh copy out, the same error for the same
mistake)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any, Final, TypeVar

from membrane.errors import InvalidDepth, RunLeased, StoreError
from membrane.json_types import JSONDict, JSONObject
from membrane.limits import check_depth
from membrane.store.base import BUDGET_KEY, EDGE_END_STATES, Lease, LineageEdge

__all__ = [
    "check_edge_status",
    "check_start",
    "decoded",
    "dump_json",
    "dump_messages",
    "edge_ended",
    "edge_exists",
    "lease_moved",
    "ledger_of",
    "load_json",
    "loadable_edges",
    "missing",
    "session_depth",
    "stale_workflow",
]

_log = logging.getLogger("membrane.lineage")
_Row = TypeVar("_Row")


def session_depth(value: object, *, session_id: str, stored: bool) -> int:
    """``value`` as a session's ``delegation_depth``: checked by ``limits.check_depth`` (a
    whole ``int``: a depth that went through a float may already have lost precision), else
    ``InvalidDepth`` naming the session and, for a ``stored`` value, saying the store is
    corrupt."""
    try:
        return check_depth(value, what=f"session {session_id!r}: delegation_depth", exact=True)
    except InvalidDepth as exc:
        if not stored:
            data = {"session_id": session_id, "value": repr(value), "stored": False}
            raise InvalidDepth(exc.message, **data) from None
    raise InvalidDepth(
        f"session {session_id!r} has a malformed stored delegation_depth {value!r}; "
        "the store is corrupt, so the depth cannot be trusted: repair or remove the session",
        session_id=session_id,
        value=repr(value),
        stored=True,
    )


def check_start(start: object, *, session_id: str, length: int) -> int:
    """``start`` when it is where the transcript of ``session_id`` (``length`` messages long)
    continues; anything else would leave a gap or overwrite a stored message."""
    if type(start) is not int or start < 0:
        raise StoreError(
            f"the start of messages for session {session_id!r} must be a non-negative integer, "
            f"got {start!r}",
            session_id=session_id,
        )
    if start != length:
        raise StoreError(
            f"the transcript of session {session_id!r} holds {length} messages, so new ones "
            f"start at {length}, not {start}; read it again before appending",
            session_id=session_id,
            length=length,
            start=start,
        )
    return start


def dump_messages(messages: object, *, session_id: str, start: object) -> list[str]:
    """Encode transcript messages (JSON objects), each named by its position if it fails."""
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
        raise StoreError(
            f"messages for session {session_id!r} must be a list of JSON objects, "
            f"got {type(messages).__name__}",
            session_id=session_id,
        )
    encoded: list[str] = []
    try:
        for message in messages:
            # The usual message is a plain dict: encoded at once, its name built only if the
            # encoding fails (below).
            encoded.append(
                _encode(message) if type(message) is dict else _dump_other(message, what="")
            )
    except (StoreError, TypeError, ValueError, RecursionError):
        # Name the message that failed: the next one after those encoded.
        offset = len(encoded)
        first = start if type(start) is int else 0
        what = f"message {first + offset} of session {session_id!r}"
        message = messages[offset]
        if message is None:
            raise StoreError(f"{what} must be a mapping, got None", what=what) from None
        dump_json(message, what=what)
        raise  # not reached: the same value fails the same way with its name
    return encoded


def loadable_edges(rows: Iterable[_Row], load: Callable[[_Row], LineageEdge]) -> list[LineageEdge]:
    """The edges ``load`` makes of ``rows``; a malformed stored edge is dropped with a warning
    (logger ``membrane.lineage``), never raised: the ledger is supplementary provenance."""
    edges: list[LineageEdge] = []
    for row in rows:
        try:
            edge = load(row)
        except (StoreError, TypeError, ValueError) as exc:
            _log.warning("a malformed lineage edge was dropped on load: %s", exc)
            continue
        if (
            not all(isinstance(v, str) and v for v in (edge.parent_id, edge.child_id))
            or edge.status not in ("running", *EDGE_END_STATES)
            or not isinstance(edge.spawn_fingerprint, Mapping)
        ):
            _log.warning("a malformed lineage edge of %r was dropped on load", edge.child_id)
            continue
        edges.append(edge)
    return edges


def check_edge_status(status: str) -> None:
    if status not in EDGE_END_STATES:
        raise StoreError(
            f"an edge can end as 'completed', 'failed' or 'interrupted', not {status!r}",
            status=status,
        )


#: ``dump_json``'s ``of`` when the caller gave none.
_NAMELESS: Final = object()


def _not_json(value: object) -> object:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


#: ``json.dumps(value, allow_nan=False, separators=(",", ":"))`` as one C encoder made once
#: (``JSONEncoder.encode`` builds one, a closure and a marker table on every call); it keeps
#: no marker table, so it is shared by every thread, and a value that contains itself ends in
#: ``RecursionError``, which ``dump_json`` reports like any other value JSON cannot carry.
_c_encode = (
    None
    if c_make_encoder is None
    else c_make_encoder(
        None, _not_json, encode_basestring_ascii, None, ":", ",", False, False, False
    )
)


def _encode(value: object) -> str:
    if _c_encode is None:
        return json.dumps(value, allow_nan=False, separators=(",", ":"))
    return "".join(_c_encode(value, 0))


def dump_json(value: JSONObject | None, *, what: str, of: object = _NAMELESS) -> str | None:
    """Encode a mapping for storage; anything JSON cannot carry is a ``StoreError`` naming
    ``what`` (followed by ``of``'s ``repr`` when given: the name is built only on failure)."""
    if type(value) is dict:  # the usual case: no copy, no abstract-class check
        try:
            return _encode(value)
        except (TypeError, ValueError, RecursionError) as exc:
            raise _unencodable(_name(what, of), exc) from exc
    if value is None:
        return None
    return _dump_other(value, what=_name(what, of))


def _dump_other(value: object, *, what: str) -> str:
    """``dump_json`` of anything but a ``dict`` or ``None``."""
    if not isinstance(value, Mapping):
        raise StoreError(f"{what} must be a mapping, got {type(value).__name__}", what=what)
    try:
        return _encode(dict(value))
    except (TypeError, ValueError, RecursionError) as exc:
        raise _unencodable(what, exc) from exc


def _name(what: str, of: object) -> str:
    return what if of is _NAMELESS else f"{what} {of!r}"


def _unencodable(what: str, exc: BaseException) -> StoreError:
    return StoreError(
        f"{what} is not JSON-serialisable ({exc}); store only plain JSON values", what=what
    )


def load_json(text: object, *, what: str) -> dict[str, Any]:
    """Decode a stored mapping; anything but a JSON object is corruption."""
    try:
        value = json.loads(text) if isinstance(text, str | bytes) else None
    except ValueError as exc:
        raise StoreError(f"{what} holds malformed JSON: {exc}", what=what) from exc
    if not isinstance(value, dict):
        raise StoreError(f"{what} should hold a JSON object, found {text!r}", what=what)
    return value


def edge_exists(child_id: str) -> StoreError:
    """The error for a second lineage edge of ``child_id``."""
    return StoreError(
        f"session {child_id!r} already has a lineage edge; a child has one parent",
        child_id=child_id,
    )


def edge_ended(edge: LineageEdge) -> StoreError:
    """The error for ending an ``edge`` that is not running any more."""
    return StoreError(
        f"the lineage edge of {edge.child_id!r} already ended as {edge.status!r}",
        child_id=edge.child_id,
        status=edge.status,
    )


def stale_workflow(run_id: str, *, current: int, expected: int) -> StoreError:
    """The error for a workflow write that expected version ``expected`` of ``run_id``'s
    state, which another writer moved to ``current``."""
    return StoreError(
        f"the workflow state of {run_id!r} is at version {current}, not "
        f"{expected}: another writer changed it; read it again",
        run_id=run_id,
        version=current,
    )


def decoded(row: Sequence[Any], index: int, *, what: str) -> list[Any]:
    """``row`` with its JSON column at ``index`` decoded (``load_json``), for building a value
    whose fields follow the row's column order."""
    values = list(row)
    values[index] = load_json(row[index], what=what)
    return values


def ledger_of(meta: Mapping[str, Any]) -> JSONDict | None:
    """The budget ledger a header's ``meta`` keeps (``meta["budget"]``), or ``None``."""
    ledger = meta.get(BUDGET_KEY)
    return dict(ledger) if isinstance(ledger, Mapping) else None


def lease_moved(run_id: str, held: Lease | None, *, owner: str) -> RunLeased:
    """The error of a write by ``owner`` fenced off because the lease of ``run_id`` moved on
    (``held``: the lease in force now, if any)."""
    if held is None:
        return RunLeased(
            f"run {run_id!r} is no longer leased to {owner!r}; its write was refused",
            run_id=run_id,
            owner=None,
        )
    return RunLeased(
        f"run {run_id!r} is leased to {held.owner!r} (generation {held.generation}), not to "
        f"{owner!r} at the generation it wrote under; its write was refused",
        run_id=run_id,
        owner=held.owner,
        generation=held.generation,
    )


def missing(kind: str, key: object) -> StoreError:
    """The error for a method that names a row the store does not hold."""
    return StoreError(f"no {kind} {key!r} in the store", kind=kind, key=key)
