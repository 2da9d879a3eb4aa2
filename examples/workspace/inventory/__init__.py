"""Stockroom: items, stock levels and prices for one warehouse."""

from inventory.pricing import price_line
from inventory.stock import Stock

__all__ = ["Stock", "price_line"]
