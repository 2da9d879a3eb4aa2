"""Fixtures shared by the model adapter tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from replay import OPEN


@pytest.fixture
async def close_models() -> AsyncIterator[None]:
    """Close every client a test built (listed in ``replay.OPEN``) while its event loop still
    runs."""
    yield
    while OPEN:
        await OPEN.pop().aclose()
