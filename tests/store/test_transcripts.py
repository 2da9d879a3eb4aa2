"""Transcripts and header meta updates, run against ``SQLiteStore`` and ``MemoryStore`` alike."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from membrane.errors import StoreError
from membrane.store import SessionHeader, SQLiteStore, Store


@pytest.fixture
def store(store: Store) -> Store:
    """Each kind of store (``conftest.store``) with the session ``s1`` in it."""
    store.create_session(SessionHeader("s1", "reviewer", None, 0, "running", meta={"a": 1}))
    return store


def message(text: str, **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": text, **extra}


def test_a_transcript_grows_by_appends_and_reads_back_in_order(store: Store) -> None:
    assert store.transcript("s1") == []
    assert store.append_messages("s1", [message("one"), message("two")], start=0) == 2
    assert store.append_messages("s1", [message("three", tool_calls=[{"id": "t"}])], start=2) == 3
    assert store.transcript_length("s1") == 3
    assert store.transcript("s1") == [
        message("one"),
        message("two"),
        message("three", tool_calls=[{"id": "t"}]),
    ]


def test_an_append_that_would_leave_a_gap_or_overwrite_is_refused_and_writes_nothing(
    store: Store,
) -> None:
    store.append_messages("s1", [message("one")], start=0)
    for start in (0, 2, -1, True, 1.0):
        with pytest.raises(StoreError):
            store.append_messages("s1", [message("x")], start=start)  # type: ignore[arg-type]
    assert store.transcript("s1") == [message("one")]


def test_an_append_at_a_stale_start_names_the_stored_length_and_leaves_the_transaction(
    store: Store,
) -> None:
    store.append_messages("s1", [message("one"), message("two")], start=0)
    with store.transaction():
        for start in (1, 3, 0):
            with pytest.raises(StoreError, match="holds 2 messages, so new ones start at 2"):
                store.append_messages("s1", [message("x"), message("y")], start=start)
        assert store.append_messages("s1", [message("three")], start=2) == 3
    assert store.transcript("s1") == [message("one"), message("two"), message("three")]


def test_an_empty_append_changes_nothing_but_still_checks_its_start(store: Store) -> None:
    assert store.append_messages("s1", [], start=0) == 0
    with pytest.raises(StoreError, match="holds 0 messages"):
        store.append_messages("s1", [], start=3)


@pytest.mark.parametrize(
    "messages",
    [[{"content": float("nan")}], [{"content": object()}], ["text"], [None], "text", {"a": 1}],
)
def test_a_message_json_cannot_carry_is_refused_naming_its_position(
    store: Store, messages: Any
) -> None:
    store.append_messages("s1", [message("one")], start=0)
    with pytest.raises(StoreError) as caught:
        store.append_messages("s1", messages, start=1)
    if isinstance(messages, list):
        assert "message 1 of session 's1'" in caught.value.message
    assert store.transcript_length("s1") == 1


def test_transcripts_of_an_unknown_session_are_a_store_error(store: Store) -> None:
    for call in (
        lambda: store.transcript("nope"),
        lambda: store.transcript_length("nope"),
        lambda: store.append_messages("nope", [message("x")], start=0),
        lambda: store.update_meta("nope", {"a": 2}),
    ):
        with pytest.raises(StoreError, match="no session 'nope'"):
            call()


def test_an_append_inside_a_failed_transaction_is_rolled_back(store: Store) -> None:
    with pytest.raises(RuntimeError), store.transaction():
        store.append_messages("s1", [message("one")], start=0)
        raise RuntimeError("boom")
    assert store.transcript("s1") == []


def test_update_meta_replaces_the_named_keys_and_keeps_the_others(store: Store) -> None:
    store.update_meta("s1", {"b": [1, 2], "a": {"x": None}})
    header = store.get_header("s1")
    assert header is not None
    assert header.meta == {"a": {"x": None}, "b": [1, 2]}
    with pytest.raises(StoreError, match="not JSON-serialisable"):
        store.update_meta("s1", {"c": object()})
    assert store.get_header("s1").meta == header.meta  # type: ignore[union-attr]


def test_a_transcript_survives_reopening_the_file(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SQLiteStore(path) as first:
        first.create_session(SessionHeader("s1", "reviewer", None, 0, "running"))
        first.append_messages("s1", [message("one")], start=0)
    with SQLiteStore(path) as second:
        assert second.transcript("s1") == [message("one")]
        assert second.append_messages("s1", [message("two")], start=1) == 2


def test_a_corrupt_stored_message_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SQLiteStore(path) as store:
        store.create_session(SessionHeader("s1", "reviewer", None, 0, "running"))
        store.append_messages("s1", [message("one"), message("two")], start=0)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE messages SET data = '[1]' WHERE idx = 1")
    with SQLiteStore(path) as store, pytest.raises(StoreError, match="message 1 of session"):
        store.transcript("s1")
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM messages WHERE idx = 0")
    with SQLiteStore(path) as store, pytest.raises(StoreError, match="has no message 0"):
        store.transcript("s1")
