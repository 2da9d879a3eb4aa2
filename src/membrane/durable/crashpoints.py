"""Named write points where a test can kill the process (``kill -9``) to prove recovery.

Every durable write of a start, a message and a delivery passes a ``crash_point(NAME)``. When
the process was launched with ``MEMBRANE_CRASH_AT=NAME`` (read once, at import), reaching that
point sends the process ``SIGKILL``: no cleanup, no ``finally``, an open transaction left
uncommitted, exactly as a power cut or an OOM kill leaves it. ``NAME:N`` kills at the N-th time
the point is reached. Unset (always, outside the crash tests), a point costs one comparison.

The points, in the order a run meets them (``POINTS``):

* a start: ``spawn.pending`` (its receipt written, nothing built), ``spawn.publish`` (inside
  the publication transaction), ``spawn.published`` (committed, the run not yet driven);
* an end: ``end.write`` (inside the transaction recording it and its completion delivery),
  ``end.written`` (committed, the delivery not yet offered);
* a message: ``message.pending`` (its receipt written), ``message.write`` (inside the
  transaction writing the delivery and completing the receipt), ``message.written``;
* a delivery: ``delivery.joined`` (the notice is in the recipient's conversation, not yet
  acknowledged), ``delivery.ack`` (inside the acknowledgement), ``delivery.acked``.
"""

from __future__ import annotations

import os
import signal
from typing import Final

__all__ = ["CRASH_ENV", "POINTS", "crash_point"]

CRASH_ENV: Final = "MEMBRANE_CRASH_AT"
POINTS: Final = (
    "spawn.pending",
    "spawn.publish",
    "spawn.published",
    "end.write",
    "end.written",
    "message.pending",
    "message.write",
    "message.written",
    "delivery.joined",
    "delivery.ack",
    "delivery.acked",
)


def _armed() -> tuple[str, int] | None:
    value = os.environ.get(CRASH_ENV, "").strip()
    if not value:
        return None
    name, _, count = value.partition(":")
    return name, int(count) if count.isdigit() and int(count) > 0 else 1


_ARMED: Final = _armed()
_seen: dict[str, int] = {}


def crash_point(name: str) -> None:
    """Kill this process here when ``MEMBRANE_CRASH_AT`` names ``name`` (see the module)."""
    if _ARMED is None or _ARMED[0] != name:
        return
    _seen[name] = _seen.get(name, 0) + 1
    if _seen[name] >= _ARMED[1]:
        os.kill(os.getpid(), signal.SIGKILL)
