"""Prices for order lines, with a bulk discount."""

from __future__ import annotations

from decimal import Decimal

BULK_THRESHOLD = 50
BULK_DISCOUNT = Decimal("0.10")


def price_line(unit_price: Decimal, quantity: int) -> Decimal:
    """The price of ``quantity`` units; lines of BULK_THRESHOLD or more get the discount."""
    total = unit_price * quantity
    if quantity >= BULK_THRESHOLD:
        total -= total * BULK_DISCOUNT
    # TODO: round to the currency's minor unit rather than to two places.
    return total.quantize(Decimal("0.01"))
