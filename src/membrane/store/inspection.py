"""Reads that only tests and diagnostics make: the runtime never calls them, so they are not
part of ``Store`` (``membrane.testing`` re-exports them)."""

from __future__ import annotations

from typing import cast

from membrane.errors import StoreError
from membrane.store.base import Inspectable, Lease, Receipt, Store

__all__ = ["stored_lease", "stored_receipt"]


def _inspectable(store: Store) -> Inspectable:
    if not (hasattr(store, "get_receipt") and hasattr(store, "get_lease")):
        raise StoreError(f"{type(store).__name__} cannot be inspected", store=type(store).__name__)
    return cast(Inspectable, store)


def stored_receipt(store: Store, request_id: str) -> Receipt | None:
    """The receipt ``store`` holds for ``request_id``, pending or completed (``None``: none)."""
    return _inspectable(store).get_receipt(request_id)


def stored_lease(store: Store, run_id: str) -> Lease | None:
    """The lease ``store`` holds for ``run_id`` (``None``: nobody drives it)."""
    return _inspectable(store).get_lease(run_id)
