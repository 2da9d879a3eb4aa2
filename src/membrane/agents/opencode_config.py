"""The agents of an ``opencode.json`` (or ``opencode.jsonc``): one definition per ``agent`` entry.

Each entry takes the OpenCode fields of a Markdown agent (``membrane.agents.opencode``); its
``prompt`` is the body, written inline or as ``{file:PATH}`` (relative to the config file, and
read only inside the project). An entry that only configures one of OpenCode's own agents
(``build``, ``plan``, ``general``, ``explore``) without a prompt is not a definition and is
skipped. A definition's path is
``<config>#<name>``; lines are those of the entry's key in the file.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path

from membrane.agents.definition import AgentDefinition, DefinitionWarning
from membrane.agents.dialect import Dialect
from membrane.agents.files import MAX_BYTES, read_file_bytes
from membrane.agents.nesting import MAX_NESTING, too_deep
from membrane.errors import DefinitionError

__all__ = ["read_opencode_config"]

#: OpenCode's own agents: an entry for one of them without a prompt tunes OpenCode, not Membrane.
_OPENCODE_AGENTS = frozenset({"build", "plan", "general", "explore", "compaction", "title"})
_FILE_REF = re.compile(r"\{file:(?P<path>[^}]+)\}")


def _strip_comments(text: str) -> str:
    """JSONC: ``//`` and ``/* */`` comments outside strings become spaces (lines kept)."""
    out: list[str] = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        char = text[i]
        if in_string:
            out.append(char)
            if char == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
            out.append(char)
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(" " * (end - i))
            i = end
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
            continue
        else:
            out.append(char)
        i += 1
    return "".join(out)


def _line_of(text: str, name: str, after: int = 0) -> int:
    match = re.compile(r'"' + re.escape(name) + r'"\s*:').search(text, after)
    return text.count("\n", 0, match.start()) + 1 if match else 1


def _prompt(
    value: object, *, config: Path, where: str, line: int
) -> tuple[str, tuple[DefinitionWarning, ...]]:
    """The prompt's text, and a warning when a ``{file:PATH}`` is not pasted.

    ``PATH`` is read only when it resolves (links followed) inside the folder holding the
    config file, the project: ``{file:/etc/shadow}`` or ``{file:../../.ssh/id_rsa}`` pastes
    nothing into a system prompt. The file is read as definition files are (a regular file
    only, never blocking on a FIFO, at most ``MAX_BYTES``).
    """
    if value is None:
        return "", ()
    if not isinstance(value, str):
        raise DefinitionError(
            "`prompt` must be text", path=where, line=line, field="prompt", hint="write a string"
        )
    match = _FILE_REF.fullmatch(value.strip())
    if match is None:
        return value, ()
    project = os.path.realpath(config.parent)
    file = os.path.realpath(config.parent / match["path"].strip())
    if os.path.commonpath([project, file]) != project:
        warning = DefinitionWarning(
            where,
            line,
            "prompt-file-outside-project",
            f"`prompt` names {match['path'].strip()!r}, which is outside the project "
            f"({project}); nothing is pasted",
        )
        return "", (warning,)
    try:
        data = read_file_bytes(file)
        if len(data) > MAX_BYTES:
            raise OSError(f"larger than {MAX_BYTES} bytes")
        return data.decode("utf-8"), ()
    except (OSError, UnicodeDecodeError) as exc:
        raise DefinitionError(
            f"`prompt` names {file}, which cannot be read: {exc}",
            path=where,
            line=line,
            field="prompt",
            hint="check the {file:...} path (relative to the config file)",
        ) from exc


def read_opencode_config(
    data: bytes, *, path: str, root: str, dialect: Dialect
) -> list[AgentDefinition | DefinitionError]:
    """Every agent of one config file; a broken file (or entry) is a ``DefinitionError``."""
    # The field rules are imported when a config file is read, not when the roots are listed.
    from membrane.agents.fields import build_definition

    try:
        text = data.decode("utf-8")
        if len(data) > MAX_BYTES:
            raise ValueError(f"the file is larger than {MAX_BYTES} bytes")
        plain = _strip_comments(text)
        deep = too_deep(plain, flavor="json")
        if deep is not None:
            return [
                DefinitionError(
                    f"the JSON nests deeper than {MAX_NESTING} levels",
                    path=path,
                    line=deep,
                    hint="flatten the file: an agent entry needs only a few levels",
                )
            ]
        document = json.loads(plain)
    except UnicodeDecodeError as exc:
        return [DefinitionError("the file is not UTF-8", path=path, line=1, hint=str(exc))]
    except json.JSONDecodeError as exc:
        return [
            DefinitionError(
                f"invalid JSON: {exc.msg} (column {exc.colno})",
                path=path,
                line=exc.lineno,
                hint="fix the JSON at the line named",
            )
        ]
    except ValueError as exc:
        return [DefinitionError(str(exc), path=path, line=1, hint="shorten the file")]
    agents = document.get("agent") if isinstance(document, Mapping) else None
    if agents is None:
        return []
    if not isinstance(agents, Mapping):
        line = _line_of(text, "agent")
        return [DefinitionError("`agent` must be an object", path=path, line=line, field="agent")]
    found: list[AgentDefinition | DefinitionError] = []
    start = _line_of(text, "agent")
    for name, entry in agents.items():
        where = f"{path}#{name}"
        line = _line_of(text, name, text.find('"agent"'))
        line = max(line, start)
        if not isinstance(entry, Mapping):
            found.append(
                DefinitionError(
                    f"agent `{name}` must be an object", path=where, line=line, field=name
                )
            )
            continue
        if name in _OPENCODE_AGENTS and "prompt" not in entry:
            continue
        try:
            body, warnings = _prompt(entry.get("prompt"), config=Path(path), where=where, line=line)
            fields = {k: v for k, v in entry.items() if k != "prompt"}
            found.append(
                build_definition(
                    fields,
                    lines=dict.fromkeys(fields, line),
                    body=body.strip("\n").rstrip(),
                    stem=str(name),
                    path=where,
                    root=root,
                    dialect=dialect,
                    warnings=warnings,
                )
            )
        except DefinitionError as exc:
            found.append(exc)
    return found
