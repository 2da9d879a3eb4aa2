"""Dialects: how another product's agent file maps onto a Membrane definition.

A file's dialect is chosen by the root it was found in (``.claude/agents`` is read as Claude Code,
``.opencode/agent`` and ``opencode.json`` as OpenCode, ``.pi/agents`` as pi, ``.codex/agents``
(TOML files) as Codex, ``.github/agents`` as GitHub Copilot); Membrane's own roots
use the ``membrane`` dialect, which reads every field as written. Membrane's own spelling of a
field (``max_turns``, ``allowed_subagents``) is honoured in every dialect.

A dialect never widens authority on a guess. Where a product's meaning differs from Membrane's
(an omitted ``tools`` means *every tool* in Claude Code, OpenCode and pi), the file keeps
Membrane's read-only default and a ``dialect-default-differs`` warning says so, unless the
deployment opts into the product's meaning (``claude_code_omitted_tools = "inherit"``,
``opencode_omitted_tools`` / ``pi_omitted_tools = "all"``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from membrane.agents.claude_code import finish_claude_code, translate_claude_code
from membrane.agents.codex import translate_codex
from membrane.agents.copilot import finish_copilot, translate_copilot
from membrane.agents.opencode import finish_opencode, translate_opencode
from membrane.agents.translation import (
    DIALECT_NAMES,
    MEMBRANE,
    OMITTED_SETTING,
    Dialect,
    Entry,
    Translation,
    tokens_of,
)
from membrane.agents.values import ValueReader, split_commas

__all__ = ["DIALECT_NAMES", "MEMBRANE", "Dialect", "Entry", "translate"]

#: What each product means by leaving ``tools`` out.
_OMITTED_MEANS: Mapping[str, str] = {
    "claude-code": "every tool of the session that starts it",
    "opencode": "every tool",
    "pi": "every pi built-in tool",
    "codex": "the sandbox of the session that starts it (`sandbox_mode` left out)",
    "copilot": "every tool",
}
#: pi built-in tool names that are a Membrane built-in under another name.
_PI_TOOLS: Mapping[str, str] = {"find": "Glob", "ls": "Glob"}


#: pi values Membrane spells otherwise: ``allowed_subagents: true``/``all`` is any agent;
#: ``isolation: false``/``none`` is pi's "no worktree from the file", so the call decides as when
#: it is left out (Membrane's ``off`` in a file would veto a caller's ``worktree``).
_PI_WORDS: Mapping[str, Mapping[str, str | None]] = {
    "allowed_subagents": {"true": "*", "all": "*"},
    "isolation": {"false": None, "none": None},
}


def _pi(out: Translation, key: str, value: Any) -> bool:
    """pi's frontmatter is Membrane's (seed 003); tool names, a few spellings and the omitted
    default differ."""
    if key in _PI_WORDS and (isinstance(value, (bool, str))):
        words = _PI_WORDS[key]
        spelled = str(value).strip().lower()
        if spelled not in words:
            return False
        if (word := words[spelled]) is not None:
            out.add(key, key, word)
        return True
    if key not in ("tools", "disallowed_tools"):
        return False
    if key == "tools" and (value is None or (isinstance(value, str) and not value.strip())):
        out.add(key, key, "none")  # pi reads an empty ``tools`` as no built-in tool
        return True
    tokens = tokens_of(value)
    if not tokens or [t.lower() for t in tokens] == ["none"]:
        return False
    mapped = [_PI_TOOLS.get(t.lower(), t) for t in tokens]
    out.add(key, key, list(dict.fromkeys(mapped)))
    return True


def _nothing(out: Translation, dialect: Dialect) -> None:
    return None


_Handle = Callable[[Translation, str, Any], bool]
_Finish = Callable[[Translation, Dialect], None]
_TRANSLATORS: Mapping[str, tuple[_Handle, _Finish]] = {
    "claude-code": (translate_claude_code, finish_claude_code),
    "opencode": (translate_opencode, finish_opencode),
    "pi": (_pi, _nothing),
    "codex": (translate_codex, _nothing),
    "copilot": (translate_copilot, finish_copilot),
}


def translate(
    items: Sequence[tuple[str, Any]],
    reader: ValueReader,
    *,
    dialect: Dialect,
    native: Callable[[str], str | None],
) -> list[Entry]:
    """The entries of one file. ``native`` names the Membrane field a key is (aliases included)."""
    out = Translation(reader)
    translator = _TRANSLATORS.get(dialect.name)
    if translator is None and dialect.pi_spellings:
        # ``.agents/agents``: pi's spellings, never pi's meaning of a field Membrane defines.
        handle = _pi
        for key, value in items:
            if not handle(out, key, value):
                out.add(key, native(key), value)
        return out.entries
    for key, value in items:
        if translator is None or not translator[0](out, key, value):
            out.add(key, native(key), value)
    if translator is not None:
        translator[1](out, dialect)
        _omitted_tools(out, dialect)
    return out.entries


def _omitted_tools(out: Translation, dialect: Dialect) -> None:
    """A file that leaves ``tools`` out: Membrane's default unless the deployment opts in."""
    given = next((e for e in out.entries if e.field == "tools"), None)
    extras = out.extra_tools
    if given is not None:
        if extras:
            value = given.value
            tokens = split_commas(value) if isinstance(value, str) else list(value or ())
            tokens = [t for t in tokens if t.lower() != "none"]
            out.entries[out.entries.index(given)] = Entry(given.key, "tools", [*tokens, *extras])
        return
    if dialect.omitted_tools in ("inherit", "all"):
        word = "inherit" if dialect.omitted_tools == "inherit" else "*"
        out.add("tools", "tools", [word, *extras])
        return
    setting = OMITTED_SETTING[dialect.name]
    choice = "inherit" if dialect.name in ("claude-code", "codex") else "all"
    out.warn_file(
        "dialect-default-differs",
        f"`tools` is left out: in {dialect.name} that means {_OMITTED_MEANS[dialect.name]}; "
        f"Membrane gives the read-only default ({', '.join(dialect.default_tools) or 'none'}) "
        f'instead: list the tools, or set {setting} = "{choice}" to follow {dialect.name}',
    )
    if extras:
        out.add("tools", "tools", [*dialect.default_tools, *extras])
