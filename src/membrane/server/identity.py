"""Who is calling: the caller's trusted role, and the tokens the runtime mints for its runs.

A caller's role comes only from trusted places (DESIGN rule 11):

1. a ``MEMBRANE_TOKEN`` that this server minted for a run it launched (given to subprocess
   children and to the environment of every child's ``Bash``): the caller is bound to that
   run, its role and its view, for as long as the run is live; a token of an ended run, of
   another server process, or a forged one is refused with ``token-invalid``;
2. otherwise the server's default role: its ``--role`` or launch ``MEMBRANE_ROLE``, else the
   settings' ``default_role`` (``external``, the least privileged).

Whatever the client says about itself in ``initialize`` (``identity.role``, a session id) is
recorded as metadata and grants nothing. The peer's uid is checked by the transport before
any of this (a peer of another user never gets a caller at all).

A token is ``mt1.<payload>.<mac>``: the payload names the project and run, the mac is an
HMAC-SHA256 under a secret drawn when the server starts, so tokens die with the server process
and need no storage; liveness is checked against the run itself at every use.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass, field
from typing import Final

from membrane.errors import TokenInvalid
from membrane.json_types import JSONDict

__all__ = ["Caller", "TokenBook"]

_PREFIX: Final = "mt1"


@dataclass(frozen=True, slots=True)
class Caller:
    """One connection's established identity.

    ``run_id`` and ``project_id`` are set only for a token caller (bound to that run);
    ``session_id`` is the run for a token caller, else the session the client named (metadata,
    used to key its rate limits). ``claimed`` keeps what the client claimed, for the record.
    ``owner``: the caller proved it is the server's owner (``membrane.server.owner``).
    ``role`` is ``None`` only for the owner (and in process, ``--headless`` without a role): no
    role restriction.
    """

    role: str | None
    session_id: str | None = None
    run_id: str | None = None
    project_id: str | None = None
    claimed: JSONDict = field(default_factory=dict)
    owner: bool = False

    @property
    def standalone(self) -> bool:
        """A session with an id but no run context (a standalone chat): no spawn tools."""
        return self.run_id is None and self.session_id is not None

    def to_dict(self) -> JSONDict:
        return {
            "role": self.role,
            "sessionId": self.session_id,
            "runId": self.run_id,
            "owner": self.owner,
        }


class TokenBook:
    """Mints and checks the ``MEMBRANE_TOKEN`` of runs launched by this server process."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret if secret is not None else secrets.token_bytes(32)

    def mint(self, project_id: str, run_id: str) -> str:
        payload = _b64(json.dumps([project_id, run_id], separators=(",", ":")).encode())
        return f"{_PREFIX}.{payload}.{self._mac(payload)}"

    def open(self, token: object) -> tuple[str, str]:
        """``(project_id, run_id)`` of a token this server minted; ``TokenInvalid`` otherwise.

        Whether the run is still live is the caller's check (``ProjectHost.bind``)."""
        if not isinstance(token, str):
            raise _invalid()
        prefix, _, rest = token.partition(".")
        payload, _, mac = rest.partition(".")
        if prefix != _PREFIX or not payload or not hmac.compare_digest(mac, self._mac(payload)):
            raise _invalid()
        try:
            project_id, run_id = json.loads(base64.urlsafe_b64decode(payload + "=="))
        except (ValueError, TypeError):
            raise _invalid() from None
        if not isinstance(project_id, str) or not isinstance(run_id, str):
            raise _invalid()
        return project_id, run_id

    def _mac(self, payload: str) -> str:
        return hmac.new(self._secret, payload.encode(), hashlib.sha256).hexdigest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _invalid() -> TokenInvalid:
    return TokenInvalid(
        "MEMBRANE_TOKEN is not a token of a live run of this runtime (its run ended, or it was "
        "minted by another runtime process); connect without it to get the default role"
    )
