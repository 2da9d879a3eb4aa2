"""The authority digest: one hash of everything that bounds a child, so that what ``explain``
printed can be checked against what ran.

``authority_digest`` is the SHA-256 of a canonical JSON document (keys sorted, no spaces,
UTF-8) of the child's effective authority: its definition (name, root, path, dialect and every
field the file sets), its invocation values, its system prompt and task prefix, its callable
tools, each tool's permission rules and the mode, its ceiling, network and write decisions,
the sandbox boundary its commands run under and its budget limits. The runtime computes it
at publication (the ``published`` event's ``authority_digest``, shown by ``membrane show``)
from what it installed: the prompt the setup composed, the names of the child's view and the
boundary it reports. ``membrane explain --json`` computes it from its own resolution. Two
equal digests mean the two agree on every one of those parts.

Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from membrane.resolve.authority import EffectiveAuthority, definition_fields

__all__ = ["SANDBOX_KEYS", "authority_digest", "digest_document"]

#: The parts of a sandbox summary the digest covers (what bounds the child's commands), not
#: what only describes the machine or the request (``requested``, ``machine``, ``note``).
SANDBOX_KEYS: Final = (
    "backend",
    "confined",
    "checkout",
    "writable",
    "read_only",
    "readable",
    "hidden",
    "private_tmp",
    "network",
    "error",
)


def digest_document(
    authority: EffectiveAuthority,
    *,
    system: str,
    tools: Iterable[str],
    sandbox: Mapping[str, Any] | None,
    budget: Mapping[str, Any],
) -> dict[str, Any]:
    """The document ``authority_digest`` hashes (see the module docstring)."""
    definition = authority.definition
    return {
        "definition": {
            "name": definition.name,
            "root": definition.root,
            "path": definition.path,
            "dialect": definition.dialect,
            "fields": definition_fields(definition),
        },
        "invocation": {name: sourced.value for name, sourced in authority.invocation.items()},
        "prompt": {"system": system, "task_prefix": authority.task_prefix},
        "tools": sorted(tools),
        "permissions": authority.permissions.to_json(),
        "ceiling": authority.ceiling.to_json(),
        "network": authority.network.value,
        "writes": authority.writes,
        "sandbox": None
        if sandbox is None
        else {key: sandbox[key] for key in SANDBOX_KEYS if key in sandbox},
        "budget": dict(sorted(budget.items())),
    }


def authority_digest(
    authority: EffectiveAuthority,
    *,
    system: str,
    tools: Iterable[str],
    sandbox: Mapping[str, Any] | None,
    budget: Mapping[str, Any],
) -> str:
    """``sha256:<hex>`` of ``digest_document(...)`` as canonical JSON."""
    document = digest_document(
        authority, system=system, tools=tools, sandbox=sandbox, budget=budget
    )
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
