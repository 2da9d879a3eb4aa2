"""The repairs: each one a reading of a broken file whose meaning is not in doubt.

Files written for other tools break YAML in a few recurring ways. Each repair leaves a
``DefinitionWarning`` with the file line:

* layout, applied while splitting: a byte-order mark, CRLF line endings, blank lines before the
  opening ``---``, an indented block (fences and keys indented alike), tab indentation, a closing
  fence of more than three dashes (or ``...``);
* values, tried only after a strict parse failed: an unquoted ``: `` inside a plain
  ``description`` (often with ``<example>`` blocks and a literal ``\\n``) is re-quoted verbatim,
  backslashes kept as written, and the ``<example>`` lines that YAML would read as keys of their
  own (``Context:``, ``user:``) are folded back into it, up to the next known key; a known key
  indented by mistake under a one-line value is read as a field of its own.

Authority fields are never re-quoted: a broken ``tools`` value is an error, not a guess.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass

from ruamel.yaml import YAML
from ruamel.yaml.error import ReusedAnchorWarning, YAMLError

from membrane.agents.definition import DefinitionWarning
from membrane.errors import DefinitionError

__all__ = ["KEY_RE", "LOADER", "Frontmatter", "repair_values", "split_frontmatter"]

#: A top-level key at column 0, as the repair path recognises one.
KEY_RE = re.compile(r"(?P<key>[A-Za-z_][A-Za-z0-9_.-]*)[ \t]*:(?:[ \t]|$)")
_INDENTED_KEY_RE = re.compile(r"(?P<indent>[ ]+)(?P<key>[A-Za-z_][A-Za-z0-9_-]*)[ \t]*:(?:[ \t]|$)")
_CLOSING_RE = re.compile(r"-{3,}[ \t]*|\.\.\.[ \t]*")
#: A plain scalar may not start with these; such values are never re-quoted.
_NOT_PLAIN = tuple("'\"|>[{&*!%@`")
#: Keys whose broken value may be re-quoted: free text that grants nothing.
_TEXT_KEYS = frozenset({"description", "display_name"})

_Warn = Callable[[int, str, str], None]


# Redefining an anchor is legal YAML 1.2; ruamel's notice about it is not the reader's business.
warnings.filterwarnings("ignore", category=ReusedAnchorWarning)


def _yaml() -> YAML:
    yaml = YAML(typ="rt", pure=True)  # ruamel reads YAML 1.2 by default: `off` stays a string
    yaml.allow_duplicate_keys = False
    yaml.preserve_quotes = True  # the writer keeps quoting as written
    return yaml


LOADER = _yaml()


@dataclass(frozen=True, slots=True)
class Frontmatter:
    """A split file: the (repaired) YAML text, the body, and how to map YAML lines to file lines."""

    path: str
    yaml_text: str
    #: Everything after the closing fence's text, starting with its newline (``""`` at EOF).
    body: str
    #: ``line_map[i]`` is the 1-based file line of YAML line ``i`` (0-based).
    line_map: tuple[int, ...]
    newline: str
    bom: bool
    warnings: tuple[DefinitionWarning, ...]

    def file_line(self, yaml_line: int) -> int:
        if not self.line_map:
            return 1
        return self.line_map[min(max(yaml_line, 0), len(self.line_map) - 1)]


def split_frontmatter(text: str, *, path: str) -> Frontmatter:
    """Find the frontmatter block, applying only the layout repairs (no YAML yet)."""
    warnings: list[DefinitionWarning] = []

    def warn(line: int, code: str, message: str) -> None:
        warnings.append(DefinitionWarning(path, line, code, message))

    bom = text.startswith("\ufeff")
    if bom:
        text = text[1:]
        warn(1, "repaired-bom", "removed a byte-order mark")
    newline = "\r\n" if "\r\n" in text else "\n"
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        warn(1, "repaired-line-endings", "read CRLF line endings as LF")
    lines = text.split("\n")

    start = 0
    while start < len(lines) and not lines[start].strip():
        start += 1
    if start == len(lines) or lines[start].strip() != "---":
        raise DefinitionError(
            "no frontmatter block",
            path=path,
            line=start + 1 if start < len(lines) else 1,
            field=None,
            hint="start the file with a line `---`, the YAML fields, then another `---`",
        )
    if start:
        warn(start + 1, "repaired-leading-blank", f"skipped {start} blank line(s) before `---`")
    opening = lines[start]
    indent = len(opening) - len(opening.lstrip(" "))
    if opening != "---":
        warn(start + 1, "repaired-fence", "read an indented or padded `---` as the opening fence")

    end = None
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if line[:indent].strip() or not _CLOSING_RE.fullmatch(line[indent:]):
            continue
        if len(line) - len(line.lstrip(" ")) == indent:
            end = i
            break
    if end is None:
        raise DefinitionError(
            f"the frontmatter opened on line {start + 1} is never closed",
            path=path,
            line=start + 1,
            field=None,
            hint="end the YAML fields with a line `---`",
        )
    if lines[end] != "---" and indent == 0:
        warn(end + 1, "repaired-fence", f"read `{lines[end].strip()}` as the closing `---`")

    block = lines[start + 1 : end]
    line_map = tuple(range(start + 2, end + 1))
    block = _dedent(block, indent, line_map, warn)
    block = _untab(block, line_map, warn)
    body = "".join("\n" + line for line in lines[end + 1 :])
    yaml_text = "\n".join(block) + "\n" if block else ""
    return Frontmatter(path, yaml_text, body, line_map, newline, bom, tuple(warnings))


def _dedent(block: list[str], indent: int, line_map: tuple[int, ...], warn: _Warn) -> list[str]:
    common = min((len(line) - len(line.lstrip(" ")) for line in block if line.strip()), default=0)
    if indent and common >= indent:
        warn(line_map[0] if line_map else 1, "repaired-indentation", "dedented an indented block")
    elif common == 0:
        return block
    # A uniformly indented block is valid YAML; it is dedented only so keys sit at column 0.
    return [line[common:] if line.strip() else "" for line in block]


def _untab(block: list[str], line_map: tuple[int, ...], warn: _Warn) -> list[str]:
    out = []
    for i, line in enumerate(block):
        lead = line[: len(line) - len(line.lstrip(" \t"))]
        if "\t" in lead and lead.strip("\t") == "":
            out.append("  " * len(lead) + line[len(lead) :])
            warn(line_map[i], "repaired-tabs", "read tab indentation as two spaces per tab")
        else:
            out.append(line)
    return out


def repair_values(fm: Frontmatter, *, known_keys: frozenset[str]) -> Frontmatter | None:
    """Re-quote broken free-text values; fold ``<example>`` lines into the description."""
    lines = fm.yaml_text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    entries: list[list[int]] = []  # each entry: the YAML line indexes it spans
    keys: list[str | None] = []
    warnings = list(fm.warnings)
    changed = False
    for i, line in enumerate(lines):
        match = KEY_RE.match(line)
        indented = _INDENTED_KEY_RE.match(line)
        if match:
            entries.append([i])
            keys.append(match["key"])
            continue
        if (
            indented
            and indented["key"] in known_keys
            and entries
            and _one_liner(lines, entries[-1])
        ):
            lines[i] = line.lstrip(" ")
            changed = True
            entries.append([i])
            keys.append(indented["key"])
            warnings.append(
                DefinitionWarning(
                    fm.path,
                    fm.file_line(i),
                    "repaired-indentation",
                    f"read the indented `{indented['key']}:` as a field of its own",
                )
            )
            continue
        if not entries:
            entries.append([i])
            keys.append(None)
        else:
            entries[-1].append(i)

    out: list[str] = []
    line_map: list[int] = []
    index = 0
    while index < len(entries):
        span, key = entries[index], keys[index]
        group = index
        while group + 1 < len(entries) and keys[group + 1] not in known_keys:
            group += 1
        if key in _TEXT_KEYS and any(
            _entry_broken("\n".join(lines[j] for j in entries[g])) for g in range(index, group + 1)
        ):
            whole = [j for g in range(index, group + 1) for j in entries[g]]
            quoted = _requote(key, [lines[j] for j in whole])
            if quoted is not None:
                out.append(quoted)
                line_map.append(fm.file_line(whole[0]))
                changed = True
                note = ""
                if len(whole) > 1:
                    names = ", ".join(f"`{k}:`" for k in keys[index + 1 : group + 1] if k)
                    note = (
                        f"; lines {fm.file_line(whole[1])}-{fm.file_line(whole[-1])}"
                        + (f" (with {names})" if names else "")
                        + " read as part of it"
                    )
                warnings.append(
                    DefinitionWarning(
                        fm.path,
                        fm.file_line(whole[0]),
                        "repaired-quoting",
                        f"quoted the plain `{key}` value, which YAML could not read{note}",
                    )
                )
                index = group + 1
                continue
        for j in span:
            out.append(lines[j])
            line_map.append(fm.file_line(j))
        index += 1
    if not changed:
        return None
    return Frontmatter(
        fm.path,
        "\n".join(out) + "\n",
        fm.body,
        tuple(line_map),
        fm.newline,
        fm.bom,
        tuple(warnings),
    )


def _one_liner(lines: list[str], span: list[int]) -> bool:
    if len(span) != 1:
        return False
    value = lines[span[0]].split(":", 1)[1].strip()
    return bool(value) and not value.startswith(("|", ">"))


def _entry_broken(text: str) -> bool:
    try:
        LOADER.load(text)
    except (YAMLError, RecursionError, ValueError, TypeError, OverflowError):
        return True  # a value its type refuses (`!!int 12z`) is as broken as bad syntax
    return False


def _requote(key: str | None, raw: list[str]) -> str | None:
    """The value exactly as a plain scalar would fold it, re-emitted double-quoted on one line."""
    first = raw[0].split(":", 1)[1].strip()
    if not first or first.startswith(_NOT_PLAIN):
        return None
    # YAML's plain-scalar folding: lines trimmed, joined by a space, a blank line is a newline.
    value = first
    pending_breaks = 0
    for line in raw[1:]:
        stripped = line.strip()
        if not stripped:
            pending_breaks += 1
            continue
        value += ("\n" * pending_breaks if pending_breaks else " ") + stripped
        pending_breaks = 0
    return f"{key}: {_double_quoted(value)}"


def _double_quoted(value: str) -> str:
    out = []
    for char in value:
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'
