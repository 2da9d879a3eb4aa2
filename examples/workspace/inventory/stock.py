"""Quantities per SKU, and the movements that changed them."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Movement:
    sku: str
    delta: int
    reason: str


@dataclass
class Stock:
    levels: dict[str, int] = field(default_factory=dict)
    history: list[Movement] = field(default_factory=list)

    def receive(self, sku: str, quantity: int) -> None:
        # TODO: reject non-positive quantities instead of silently accepting them.
        self.levels[sku] = self.levels.get(sku, 0) + quantity
        self.history.append(Movement(sku, quantity, "received"))

    def ship(self, sku: str, quantity: int) -> None:
        available = self.levels.get(sku, 0)
        # FIXME: two concurrent shipments can both pass this check.
        if quantity > available:
            raise ValueError(f"only {available} of {sku} in stock")
        self.levels[sku] = available - quantity
        self.history.append(Movement(sku, -quantity, "shipped"))

    def on_hand(self, sku: str) -> int:
        return self.levels.get(sku, 0)
