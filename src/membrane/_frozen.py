"""``@frozen`` and its ``field``, now ``membrane._record``'s (one mechanism for value classes)."""

from membrane._record import FACTORY, Field, field, frozen

__all__ = ["FACTORY", "Field", "field", "frozen"]
