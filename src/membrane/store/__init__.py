"""Durable state behind the ``Store`` protocol: ``SQLiteStore`` (embedded default) and
``MemoryStore`` (in memory, for tests)."""

from __future__ import annotations

from membrane.store.base import (
    EdgeStatus,
    LineageEdge,
    OutboxItem,
    Receipt,
    ReceiptStatus,
    SessionHeader,
    Store,
    StoredEvent,
    brief_digest,
)
from membrane.store.memory import MemoryStore
from membrane.store.sqlite import SQLiteStore

__all__ = [
    "EdgeStatus",
    "LineageEdge",
    "MemoryStore",
    "OutboxItem",
    "Receipt",
    "ReceiptStatus",
    "SQLiteStore",
    "SessionHeader",
    "Store",
    "StoredEvent",
    "brief_digest",
]
