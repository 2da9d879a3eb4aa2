"""Durable state behind the ``Store`` protocol: ``SQLiteStore`` (embedded default),
``PostgresStore`` (several nodes on one database) and ``MemoryStore`` (in memory, for tests)."""

from __future__ import annotations

import typing

from membrane._lazy import lazy_exports

if typing.TYPE_CHECKING:
    from membrane.store.base import (
        DeadLetter,
        EdgeStatus,
        Lease,
        LineageEdge,
        NewEdge,
        OutboxItem,
        PruneReport,
        Receipt,
        ReceiptStatus,
        SessionHeader,
        Store,
        StoredEvent,
        WorkflowRecord,
        brief_digest,
    )
    from membrane.store.memory import MemoryStore
    from membrane.store.postgres import PostgresStore
    from membrane.store.sqlite import SQLiteStore

__all__ = [
    "DeadLetter",
    "EdgeStatus",
    "Lease",
    "LineageEdge",
    "MemoryStore",
    "NewEdge",
    "OutboxItem",
    "PostgresStore",
    "PruneReport",
    "Receipt",
    "ReceiptStatus",
    "SQLiteStore",
    "SessionHeader",
    "Store",
    "StoredEvent",
    "WorkflowRecord",
    "brief_digest",
]

# Nothing is imported until a name is first used, so importing the package (and the CLI's
# start) pays only for what is touched.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "DeadLetter": "membrane.store.base",
        "EdgeStatus": "membrane.store.base",
        "Lease": "membrane.store.base",
        "LineageEdge": "membrane.store.base",
        "NewEdge": "membrane.store.base",
        "OutboxItem": "membrane.store.base",
        "PruneReport": "membrane.store.base",
        "Receipt": "membrane.store.base",
        "ReceiptStatus": "membrane.store.base",
        "SessionHeader": "membrane.store.base",
        "Store": "membrane.store.base",
        "StoredEvent": "membrane.store.base",
        "WorkflowRecord": "membrane.store.base",
        "brief_digest": "membrane.store.base",
        "MemoryStore": "membrane.store.memory",
        "PostgresStore": "membrane.store.postgres",
        "SQLiteStore": "membrane.store.sqlite",
    },
    globals(),
)
