"""Reading a Codex custom agent file (TOML) into a definition: ``developer_instructions`` is the
body, every other key goes through the Codex dialect (``membrane.agents.codex``) and the field
rules, as a Markdown file's frontmatter does."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from membrane.agents.definition import AgentDefinition
from membrane.agents.dialect import Dialect
from membrane.agents.fields import build_definition
from membrane.agents.files import MAX_BYTES
from membrane.agents.nesting import MAX_NESTING, too_deep
from membrane.errors import DefinitionError

__all__ = ["decode_codex"]

_KEY_LINE = re.compile(r"^\s*(?:\[\s*)?\"?([A-Za-z0-9_-]+)\"?\s*(?:=|\.|\])", re.MULTILINE)


def decode_codex(data: bytes, *, path: str, root: str, dialect: Dialect) -> AgentDefinition:
    """One Codex custom agent file (TOML) as a definition; ``DefinitionError`` when unusable.

    Nesting is checked in one pass before the TOML parser recurses, as for JSON and YAML."""
    if len(data) > MAX_BYTES:
        raise DefinitionError(
            f"the file is larger than {MAX_BYTES} bytes, the limit for a definition",
            path=path,
            line=1,
            hint="move long reference material out of the definition",
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise DefinitionError("is not UTF-8", path=path, line=1, hint="save it as UTF-8") from None
    deep = too_deep(text, flavor="json")
    if deep is not None:
        raise DefinitionError(
            f"nests deeper than {MAX_NESTING} collections",
            path=path,
            line=deep,
            hint="a custom agent needs a few levels at most",
        )
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = re.search(r"line (\d+)", str(exc))
        raise DefinitionError(
            f"is not valid TOML: {exc}",
            path=path,
            line=int(line.group(1)) if line else 1,
            hint="a Codex custom agent is a TOML file with name, description and "
            "developer_instructions",
        ) from None
    lines: dict[str, int] = {}
    for match in _KEY_LINE.finditer(text):
        lines.setdefault(match.group(1), text.count("\n", 0, match.start()) + 1)
    body = table.pop("developer_instructions", "")
    if not isinstance(body, str):
        raise DefinitionError(
            "`developer_instructions` is not text",
            path=path,
            line=lines.get("developer_instructions", 1),
            hint='write developer_instructions = """..."""',
        )
    return build_definition(
        table,
        lines=lines,
        body=body.strip("\n").rstrip(),
        stem=Path(path).stem,
        path=path,
        root=root,
        dialect=dialect,
    )
