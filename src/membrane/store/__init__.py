"""Durable state behind the ``Store`` protocol: ``SQLiteStore`` (embedded default) and
``MemoryStore`` (in memory, for tests)."""

from __future__ import annotations

from membrane.store.base import (
    DeadLetter,
    EdgeStatus,
    Lease,
    LineageEdge,
    OutboxItem,
    Receipt,
    ReceiptStatus,
    SessionHeader,
    Store,
    StoredEvent,
    WorkflowRecord,
    brief_digest,
)
from membrane.store.memory import MemoryStore
from membrane.store.sqlite import SQLiteStore

__all__ = [
    "DeadLetter",
    "EdgeStatus",
    "Lease",
    "LineageEdge",
    "MemoryStore",
    "OutboxItem",
    "Receipt",
    "ReceiptStatus",
    "SQLiteStore",
    "SessionHeader",
    "Store",
    "StoredEvent",
    "WorkflowRecord",
    "brief_digest",
]
