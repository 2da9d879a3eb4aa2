"""The agent editor: a form over one definition file, turned into the round-trip writer's
updates.

Only the fields the form changed are handed to the writer (``update_definition_text``), so
every other key keeps its spelling, quoting, comments and place; a list the form changed keeps
the order its author wrote the tokens that stay (``tools: inherit, Bash`` with ``Edit`` ticked
becomes ``inherit, Bash, Edit``). The result is parsed again by the writer, so a form that
would make the file unreadable is refused before anything is shown or written.
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from membrane.agents.definition import UNSET, AgentDefinition, Unset
from membrane.agents.frontmatter import parse_definition
from membrane.agents.writer import UpdateValue, update_definition_text, write_definition
from membrane.config.budget import BUDGET_KINDS, Budget
from membrane.errors import DefinitionChanged, InvalidRequest
from membrane.vocabulary import ASSIGNABLE_TOOLS, INHERIT_DENY_TOOLS

__all__ = [
    "CHECKED_TOOLS",
    "LIST_FIELDS",
    "TEXT_FIELDS",
    "Edit",
    "digest",
    "edit_from_form",
]

#: The tools the form shows as checkboxes; any other token is kept in the "other" text box.
CHECKED_TOOLS: tuple[str, ...] = ("inherit", *ASSIGNABLE_TOOLS)
#: The deny list's checkboxes: the builtins, then the names ``inherit`` never carries.
DENY_CHECKS: tuple[str, ...] = (*ASSIGNABLE_TOOLS, *sorted(INHERIT_DENY_TOOLS))
#: Text fields, as the writer takes them (an empty box removes the key).
TEXT_FIELDS: tuple[str, ...] = ("description", "model", "isolation", "permission")
#: Comma-separated list fields shown as one text box each.
LIST_FIELDS: tuple[str, ...] = ("allowed_subagents", "extensions", "ask_tools", "read_paths")
#: Whole-number fields (an empty box removes the key).
NUMBER_FIELDS: tuple[str, ...] = ("max_turns",)


def digest(text: str) -> str:
    """What the editor read, so that a save over a file changed since is refused."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Edit:
    """The file as read, the text the form makes of it and the definition that text parses to."""

    path: Path
    original: str
    text: str
    definition: AgentDefinition
    updates: Mapping[str, UpdateValue]

    def diff(self) -> str:
        lines = difflib.unified_diff(
            self.original.splitlines(keepends=True),
            self.text.splitlines(keepends=True),
            fromfile=f"{self.path.name} (on disk)",
            tofile=f"{self.path.name} (saved)",
        )
        return "".join(lines)

    def save(self, expected: str) -> None:
        """Write the edit through the round-trip writer, unless the file changed since the
        editor read it."""
        current = self.path.read_text(encoding="utf-8")
        if digest(current) != expected:
            raise DefinitionChanged(
                f"{self.path} changed on disk since the editor read it; nothing was written",
                path=str(self.path),
            )
        if self.updates:
            write_definition(self.path, self.updates, root=self.definition.root)


def tokens(value: object) -> list[str]:
    """A definition's list field as tokens (``UNSET`` and booleans: none)."""
    if isinstance(value, (tuple, list)):
        return [str(v) for v in value]
    return []


def _split(raw: str) -> list[str]:
    return [part.strip() for part in raw.replace("\n", ",").split(",") if part.strip()]


def _merged(old: Sequence[str], wanted: Sequence[str]) -> list[str]:
    """``wanted`` in the order ``old`` wrote the tokens that stay, new ones after."""
    keep = [token for token in old if token in wanted]
    return keep + [token for token in wanted if token not in keep]


def _tool_tokens(form: Mapping[str, object], prefix: str, other: str) -> list[str]:
    ticked = [str(v) for v in _values(form, prefix)]
    return ticked + _split(str(form.get(other) or ""))


def _values(form: Mapping[str, object], key: str) -> list[object]:
    getlist = getattr(form, "getlist", None)
    if callable(getlist):
        return list(getlist(key))
    value = form.get(key)
    return list(value) if isinstance(value, (list, tuple)) else ([] if value is None else [value])


def _list_update(old: object, wanted: list[str]) -> UpdateValue | None:
    before = tokens(old)
    if not wanted:
        return None if isinstance(old, Unset) else UNSET
    merged = _merged(before, wanted)
    return None if merged == before else merged


def updates_from_form(
    definition: AgentDefinition, form: Mapping[str, object]
) -> dict[str, UpdateValue]:
    """The writer's updates for what the form changed; unchanged fields are left out."""
    updates: dict[str, UpdateValue] = {}
    for name, prefix, other in (
        ("tools", "tools", "tools_other"),
        ("disallowed_tools", "deny", "deny_other"),
    ):
        change = _list_update(getattr(definition, name), _tool_tokens(form, prefix, other))
        if change is not None:
            updates[name] = change
    for name in LIST_FIELDS:
        old = getattr(definition, name)
        if isinstance(old, bool):
            continue  # ``extensions: true`` has no list form here; the file keeps it
        change = _list_update(old, _split(str(form.get(name) or "")))
        if change is not None:
            updates[name] = change
    for name in (*TEXT_FIELDS, *NUMBER_FIELDS):
        raw = str(form.get(name) or "").strip()
        old = getattr(definition, name)
        shown = "" if isinstance(old, Unset) else str(old)
        if raw == shown:
            continue
        if not raw:
            updates[name] = UNSET
        elif name in NUMBER_FIELDS and raw.isdigit():
            updates[name] = int(raw)
        else:
            updates[name] = raw
    budget = _budget_update(definition.budget, str(form.get("budget") or "").strip())
    if budget is not None:
        updates["budget"] = budget
    network = _flag_update(definition.network, str(form.get("network") or "").strip())
    if network is not None:
        updates["network"] = network
    body = str(form.get("body") or "").replace("\r\n", "\n")
    if body.strip() != definition.body.strip():
        updates["body"] = body
    return updates


def budget_text(value: object) -> str:
    """A definition's budget as the ``kind=N, ...`` text the form shows ('' when unset)."""
    if not isinstance(value, Budget):
        return ""
    limits = ((kind, getattr(value, kind)) for kind in BUDGET_KINDS)
    return ", ".join(f"{kind}={limit:g}" for kind, limit in limits if limit is not None)


def _budget_update(old: object, raw: str) -> UpdateValue | None:
    """The budget's update: ``kind=N`` text (the writer parses it again, so a bad one is
    refused there), ``UNSET`` for an emptied box, ``None`` when the limits are unchanged."""
    if not raw:
        return None if isinstance(old, Unset) else UNSET
    try:
        same = Budget.parse(raw) == old
    except InvalidRequest:
        same = False
    return None if same else raw


def _flag_update(old: object, raw: str) -> UpdateValue | None:
    """``true``/``false`` from a select ('' removes the key), ``None`` when unchanged."""
    wanted: bool | Unset = UNSET if not raw else raw == "true"
    if wanted == old or (isinstance(wanted, Unset) and isinstance(old, Unset)):
        return None
    return wanted


def edit_from_form(definition: AgentDefinition, form: Mapping[str, object]) -> Edit:
    """The edit the form asks for on ``definition``'s file (``DefinitionError`` when the
    result would not load)."""
    path = Path(definition.path)
    original = path.read_text(encoding="utf-8")
    current = parse_definition(original, path=str(path), root=definition.root)
    updates = updates_from_form(current, form)
    text = update_definition_text(original, updates, path=str(path)) if updates else original
    parsed = parse_definition(text, path=str(path), root=definition.root)
    return Edit(path=path, original=original, text=text, definition=parsed, updates=updates)
