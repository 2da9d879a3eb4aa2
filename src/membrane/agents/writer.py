"""Saving a definition without losing what its author wrote.

Seed 000, decision 4: saving from an editor must not strip ``tools: inherit``. The writer edits
the YAML in place through ruamel's round-trip mode, so key order, comments, quoting, the list
style of each field (comma string, flow ``[a, b]`` or block ``- a``) and every token it is not
asked to change survive. A changed list keeps the style its field had; a new field is appended.
The result is parsed again before anything is written, so a save never leaves an unusable file.
"""

from __future__ import annotations

import io
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError
from ruamel.yaml.scalarstring import ScalarString

from membrane.agents.definition import AgentDefinition, Unset
from membrane.agents.fields import ALIASES, FIELDS, KNOWN_KEYS
from membrane.agents.frontmatter import load_yaml, parse_definition, split_frontmatter
from membrane.errors import DefinitionError

__all__ = ["render_definition", "update_definition_text", "write_definition"]

#: ``updates`` values: a field's new value, or ``UNSET`` to remove the key.
UpdateValue = str | int | bool | tuple[str, ...] | list[str] | Unset

_SEQUENCE_INDENT = re.compile(r"^[A-Za-z_][\w-]*:[ \t]*(?:#.*)?\n( *)- ", re.MULTILINE)


def _dumper(yaml_text: str) -> YAML:
    yaml = YAML(typ="rt", pure=True)
    yaml.preserve_quotes = True
    yaml.width = 1 << 16  # never fold a long description onto new lines
    match = _SEQUENCE_INDENT.search(yaml_text)
    offset = len(match.group(1)) if match else 2
    yaml.indent(mapping=2, sequence=offset + 2, offset=offset)
    return yaml


def update_definition_text(
    text: str, updates: Mapping[str, UpdateValue], *, path: str = "<definition>"
) -> str:
    """Apply ``updates`` (field name -> value, ``UNSET`` removes; ``body`` replaces the prompt).

    Raises ``DefinitionError`` for an unknown field, a value of the wrong shape, or a result
    that would not parse.
    """
    fm = split_frontmatter(text, path=path)
    data, fm = load_yaml(fm, known_keys=KNOWN_KEYS)
    body = fm.body
    for field, value in updates.items():
        if field == "body":
            if not isinstance(value, str):
                raise DefinitionError("`body` must be text", path=path, field="body", hint=None)
            body = "\n" + value.strip("\n") + "\n" if value.strip() else "\n"
            continue
        if field not in FIELDS:
            raise DefinitionError(
                f"`{field}` is not a definition field",
                path=path,
                field=field,
                hint="fields: " + ", ".join(FIELDS),
            )
        key = next((k for k, f in ALIASES.items() if f == field and k in data), field)
        if isinstance(value, Unset):
            data.pop(key, None)
        else:
            data[key] = _value(field, data.get(key), value, path=path)
    yaml_text = _dump(data, fm.yaml_text, path=path)
    result = "---\n" + yaml_text + "---" + body
    parse_definition(result, path=path, root="project")
    if fm.newline != "\n":
        result = result.replace("\n", fm.newline)
    return ("\ufeff" if fm.bom else "") + result


def _dump(data: CommentedMap, original: str, *, path: str) -> str:
    if not data:
        return ""
    stream = io.StringIO()
    try:
        _dumper(original).dump(data, stream)
    except YAMLError as exc:  # pragma: no cover - values are plain scalars and lists
        raise DefinitionError(f"cannot write the frontmatter: {exc}", path=path) from exc
    return stream.getvalue()


def _value(field: str, old: Any, value: UpdateValue, *, path: str) -> Any:
    if isinstance(value, (tuple, list)):
        tokens = [str(token) for token in value]
        if isinstance(old, CommentedSeq):
            old[:] = tokens  # keeps the sequence's flow or block style and the key's comments
            return old
        if not tokens:
            return "none"
        joined = ", ".join(tokens)
        return type(old)(joined) if isinstance(old, ScalarString) else joined
    if isinstance(value, (bool, int)):
        return value
    if isinstance(value, str):
        return type(old)(value) if isinstance(old, ScalarString) else value
    raise DefinitionError(
        f"`{field}` cannot be set to a {type(value).__name__}",
        path=path,
        field=field,
        hint="use text, a number, true/false, a list of names, or UNSET to remove",
    )


def write_definition(
    path: Path, updates: Mapping[str, UpdateValue], *, root: str = "project"
) -> AgentDefinition:
    """Update the file at ``path`` atomically (write aside, then rename) and return it parsed.

    A file that needed a value repair to be read is saved in its repaired form.
    """
    try:
        original = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DefinitionError(
            f"cannot read the definition: {exc}", path=str(path), hint="check the file"
        ) from exc
    text = update_definition_text(original, updates, path=str(path))
    _atomic_write(path, text)
    return parse_definition(text, path=str(path), root=root)


def render_definition(definition: AgentDefinition) -> str:
    """A new file for ``definition``: its set fields in declaration order, then the body."""
    lines = ["---"]
    for field in FIELDS:
        value = getattr(definition, field)
        if isinstance(value, Unset):
            continue
        lines.append(f"{field}: {_scalar(value)}")
    return (
        "\n".join(lines)
        + "\n---\n"
        + (definition.body.strip("\n") + "\n" if definition.body else "")
    )


def _scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, tuple):
        return ", ".join(value) if value else "none"
    stream = io.StringIO()
    yaml = YAML(typ="rt", pure=True)
    yaml.width = 1 << 16
    yaml.dump({"v": value}, stream)
    return stream.getvalue()[len("v: ") :].rstrip("\n").removesuffix("\n...")


def _atomic_write(path: Path, text: str) -> None:
    directory = path.parent
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        if path.exists():
            os.chmod(temp, path.stat().st_mode & 0o777)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
