"""The request layer: validate an order, check stock, price it."""

from __future__ import annotations

from decimal import Decimal

from inventory.pricing import price_line
from inventory.stock import Stock

CATALOG = {"bolt-m6": Decimal("0.12"), "nut-m6": Decimal("0.05")}


def place_order(stock: Stock, sku: str, quantity: int) -> Decimal:
    if sku not in CATALOG:
        raise KeyError(f"unknown SKU {sku!r}")
    # FIXME: the price is computed before the shipment succeeds; failures leave no trace.
    total = price_line(CATALOG[sku], quantity)
    stock.ship(sku, quantity)
    return total


if __name__ == "__main__":
    demo = Stock()
    demo.receive("bolt-m6", 120)
    print("60 bolts cost", place_order(demo, "bolt-m6", 60))
    # TODO: add a command line for receiving stock.
