"""What a model response costs, in whole micro-dollars (millionths of a US dollar).

A price is in US dollars per million tokens, so a response costs ``tokens x price`` micro-
dollars for each kind of token: input tokens not read from or written to the cache at the
``input`` price, cache reads at ``cache_read`` and cache writes at ``cache_write`` (each
``input`` when not given), output tokens at ``output``. Whole micro-dollars keep a budget's
ledger exact however many responses add to it.

``Prices`` answers for a model by the name the agent loop knows it by (``provider:model``, as
the router builds it, or a ``[models.NAME]`` entry's name): a ``price`` the settings give the
entry wins; else, for the ``openai`` and ``anthropic`` providers, the price table that the
``genai-prices`` package ships in its wheel (read offline, never updated over the network);
else the model has no known price (``None``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from membrane.config.values import ModelEntry, ModelPrice
from membrane.models.base import Usage

__all__ = ["Prices", "micro_usd"]

#: The providers ``genai-prices`` is asked about (its provider ids are the same names).
_TABLE_PROVIDERS = ("openai", "anthropic")


def micro_usd(price: ModelPrice, usage: Usage) -> int:
    """What ``usage`` costs at ``price``, in whole micro-dollars (rounded)."""
    cache_read = price.input if price.cache_read is None else price.cache_read
    cache_write = price.input if price.cache_write is None else price.cache_write
    plain = max(0, usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens)
    return round(
        plain * price.input
        + usage.cache_read_tokens * cache_read
        + usage.cache_write_tokens * cache_write
        + usage.output_tokens * price.output
    )


@dataclass(frozen=True, slots=True)
class Prices:
    """The price of each model a deployment names (``models``: the settings' entries)."""

    models: Mapping[str, ModelEntry]

    def cost(self, model: str | None, usage: Usage) -> int | None:
        """What ``usage`` of ``model`` costs in micro-dollars, or ``None`` (no known price)."""
        if model is None:
            return None
        price = self._override(model)
        if price is not None:
            return micro_usd(price, usage)
        provider, sep, name = model.partition(":")
        if not sep or provider not in _TABLE_PROVIDERS:
            return None
        from genai_prices import Usage as TableUsage
        from genai_prices import calc_price

        try:
            found = calc_price(
                TableUsage(
                    input_tokens=usage.input_tokens,
                    output_tokens=usage.output_tokens,
                    cache_read_tokens=usage.cache_read_tokens,
                    cache_write_tokens=usage.cache_write_tokens,
                ),
                model_ref=name,
                provider_id=provider,
            )
        except LookupError:
            return None
        return round(found.total_price * 1_000_000)

    def known(self, model: str | None) -> bool:
        """Whether ``model`` has a price here."""
        return self.cost(model, Usage()) is not None

    def _override(self, model: str) -> ModelPrice | None:
        entry = self.models.get(model)
        if entry is not None and entry.price is not None:
            return entry.price
        for entry in self.models.values():
            if entry.price is not None and f"{entry.provider}:{entry.model}" == model:
                return entry.price
        return None
