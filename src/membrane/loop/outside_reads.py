"""Reads outside the read roots that the host approves (the settings' ``read_outside = "ask"``).

A built-in read tool (``Read``, ``Glob``, ``Grep``) that is asked for a path outside the
child's checkout, its read roots and the system's folders calls ``ToolContext.ask_read``
(:func:`outside_reads`): the call goes down the approval path the ``ask`` rules use
(:meth:`PermissionGate.approve_call`), so the permission mode decides first
(``bypassPermissions`` approves, ``dontAsk`` refuses), then the host's approver, and without
one the read fails with ``approval-unavailable``. A secret place (``~/.ssh``, ``/etc/shadow``,
a ``.env`` file outside the checkout) is asked about only when a rule of the child names that
exact path (``Read(~/.ssh/config)``, ``Read(//etc/shadow)``, with no wildcard);
``$MEMBRANE_HOME`` never (the tools refuse it before asking).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from membrane.loop.permissions import PermissionGate
from membrane.sandbox.paths import real_path
from membrane.tools.permissions import PATH_RULE_TOOLS, Approver, PermissionRule
from membrane.tools.spec import ReadApproval, ToolContext

__all__ = ["named_paths", "outside_reads"]

_READ_TOOLS = ("Read", "Glob", "Grep")
_WILDCARDS = frozenset("*?[")


def named_paths(rules: Iterable[PermissionRule], *, home: str | None = None) -> frozenset[Path]:
    """The real paths that rules of the read tools name exactly: an absolute (``//x``) or home
    (``~/x``) pattern without a wildcard."""
    base = home if home is not None else os.path.expanduser("~")
    found: set[Path] = set()
    for rule in rules:
        pattern = rule.pattern
        if pattern is None or rule.conditions or not any(rule.governs(t) for t in _READ_TOOLS):
            continue
        if _WILDCARDS & set(pattern):
            continue
        if pattern.startswith("//"):
            found.add(real_path(Path(pattern[1:])))
        elif pattern.startswith("~/"):
            found.add(real_path(Path(base) / pattern[2:]))
    return frozenset(found)


def outside_reads(
    *, mode: str, approver: Approver | None, rules: Iterable[PermissionRule] = ()
) -> ReadApproval:
    """The ``ToolContext.ask_read`` of a child in permission ``mode`` whose host answers with
    ``approver`` (``None``: no one can approve, so such a read is ``approval-unavailable``);
    ``rules``: the child's, for the secret places they name exactly."""
    gate = PermissionGate((), mode=mode, approver=approver)
    named = named_paths(rules)

    async def ask(tool: str, path: Path, secret: bool, context: ToolContext) -> bool:
        if secret and path not in named:
            return False
        argument = PATH_RULE_TOOLS.get(tool, ("file_path", None))[0]
        await gate.approve_call(
            tool,
            tool,
            {argument: str(path)},
            context,
            rule=None,
            subject=str(path),
            why=f"{tool} of {path}, outside the checkout and the read roots "
            '(the settings say read_outside = "ask")',
        )
        return True

    return ask
