"""Reading a definition file: decode, split, parse the YAML 1.2 block, build the definition.

A valid file is read exactly as YAML reads it. Only when the strict parse fails are the value
repairs of ``membrane.agents.repair`` tried, once; if the file still does not parse, the first
error is reported as a ``DefinitionError`` with the file line, the field and a hint.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.constructor import DuplicateKeyError
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from membrane.agents.definition import AgentDefinition
from membrane.agents.dialect import MEMBRANE, Dialect
from membrane.agents.files import MAX_BYTES, read_file_bytes
from membrane.agents.nesting import MAX_NESTING, too_deep
from membrane.agents.repair import KEY_RE, LOADER, Frontmatter, repair_values, split_frontmatter
from membrane.agents.safe_yaml import load_mapping
from membrane.errors import DefinitionError

__all__ = [
    "MAX_BYTES",
    "Frontmatter",
    "decode_definition",
    "load_yaml",
    "parse_definition",
    "read_definition",
    "read_file_bytes",
    "split_frontmatter",
]


def load_yaml(fm: Frontmatter, *, known_keys: frozenset[str]) -> tuple[CommentedMap, Frontmatter]:
    """Parse strictly; on failure try the value repairs once, then fail precisely."""
    try:
        return _load(fm.yaml_text, fm), fm
    except _Broken as first:
        repaired = repair_values(fm, known_keys=known_keys)
        if repaired is None:
            raise first.error from first.__cause__
        try:
            return _load(repaired.yaml_text, repaired), repaired
        except _Broken:
            raise first.error from first.__cause__


class _Broken(Exception):
    def __init__(self, error: DefinitionError) -> None:
        super().__init__(str(error))
        self.error = error


def _load(yaml_text: str, fm: Frontmatter) -> CommentedMap:
    if not yaml_text.strip():
        return CommentedMap()
    deep = too_deep(yaml_text, flavor="yaml")
    if deep is not None:  # final: no repair of the quoting makes such a value readable
        raise _too_deep(fm.path, fm.file_line(deep - 1), _key_at(yaml_text, deep - 1))
    try:
        data = LOADER.load(yaml_text)
    except DuplicateKeyError as exc:
        line = fm.file_line(exc.problem_mark.line if exc.problem_mark else 0)
        key = _key_at(yaml_text, exc.problem_mark.line if exc.problem_mark else 0)
        raise _Broken(
            DefinitionError(
                f"the key `{key}` appears twice",
                path=fm.path,
                line=line,
                field=key,
                hint="keep one of the two lines",
            )
        ) from exc
    except MarkedYAMLError as exc:
        # An unclosed construct (`[Read, Grep`) is reported where it opened (the parser's
        # context mark), not at the next key where the parser noticed.
        mark = exc.context_mark or exc.problem_mark
        yaml_line = mark.line if mark else 0
        line = fm.file_line(yaml_line)
        key = _key_at(yaml_text, yaml_line)
        problem = (exc.problem or exc.context or "invalid YAML").strip()
        if exc.context and exc.problem:
            problem = f"{exc.context.strip()}: {problem}"
        column = mark.column + 1 if mark else None
        raise _Broken(
            DefinitionError(
                f"invalid YAML at column {column}: {problem}"
                if column
                else f"invalid YAML: {problem}",
                path=fm.path,
                line=line,
                column=column,
                field=key,
                hint=_hint(problem, key),
            )
        ) from exc
    except YAMLError as exc:  # pragma: no cover - ruamel raises marked errors for text input
        raise _Broken(
            DefinitionError(f"invalid YAML: {exc}", path=fm.path, line=fm.file_line(0), hint=None)
        ) from exc
    except RecursionError as exc:
        yaml_line = _failing_line(exc)
        key = _key_at(yaml_text, yaml_line)
        raise _Broken(_too_deep(fm.path, fm.file_line(yaml_line), key)) from exc
    except Exception as exc:
        # A tagged or implicitly typed scalar that its Python type refuses (`!!int abc`,
        # `2023-02-29`): ruamel lets the type's own ValueError, TypeError or OverflowError
        # through without a position.
        yaml_line = _failing_line(exc)
        key = _key_at(yaml_text, yaml_line)
        raise _Broken(
            DefinitionError(
                f"invalid YAML value: {exc}",
                path=fm.path,
                line=fm.file_line(yaml_line),
                field=key,
                hint=f"quote {f'`{key}`' if key else 'the value'} to keep it as text",
            )
        ) from exc
    if data is None:
        return CommentedMap()
    if not isinstance(data, CommentedMap):
        raise _Broken(
            DefinitionError(
                f"the frontmatter is {_shape(data)}, not a mapping of fields",
                path=fm.path,
                line=fm.file_line(0),
                field=None,
                hint="write one `key: value` per line between the `---` fences",
            )
        )
    return data


def _too_deep(path: str, line: int, key: str | None) -> DefinitionError:
    return DefinitionError(
        f"the YAML nests deeper than {MAX_NESTING} levels",
        path=path,
        line=line,
        field=key,
        hint="flatten the value: a definition needs at most a list of names",
    )


def _failing_line(exc: BaseException) -> int:
    """The 0-based YAML line of the node being built when ``exc`` was raised (0 if unknown).

    ruamel's constructors hold the node they build in a local named ``node``; the innermost
    frame that has one is the value that failed.
    """
    line = 0
    trace = exc.__traceback__
    while trace is not None:
        mark = getattr(trace.tb_frame.f_locals.get("node"), "start_mark", None)
        found = getattr(mark, "line", None)
        if isinstance(found, int):
            line = found
        trace = trace.tb_next
    return line


def _shape(data: object) -> str:
    if isinstance(data, Mapping):
        return "a mapping"
    if isinstance(data, list):
        return "a list"
    return "a scalar"


def _key_at(yaml_text: str, yaml_line: int) -> str | None:
    lines = yaml_text.split("\n")
    for i in range(min(yaml_line, len(lines) - 1), -1, -1):
        match = KEY_RE.match(lines[i])
        if match:
            return match["key"]
    return None


def _hint(problem: str, key: str | None) -> str:
    field = f"`{key}`" if key else "the value"
    if "mapping values are not allowed" in problem:
        return f"quote {field}: put it in single quotes, or use `|` for a multi-line text"
    if "tab" in problem:
        return "indent with spaces, not tabs"
    return f"check the YAML syntax of {field}; quote values that contain `: `, `#` or quotes"


def read_definition(file: Path, *, root: str, dialect: Dialect = MEMBRANE) -> AgentDefinition:
    """Read, decode and parse one file. Every failure is a ``DefinitionError`` naming the file."""
    path = str(file)
    try:
        data = read_file_bytes(path)
    except OSError as exc:
        raise DefinitionError(
            f"cannot read the file: {exc.strerror or exc}",
            path=path,
            hint="check that the file exists and is readable",
        ) from exc
    if dialect.name == "codex":  # a Codex custom agent is a TOML file
        from membrane.agents.codex_file import decode_codex

        return decode_codex(data, path=path, root=root, dialect=dialect)
    return decode_definition(data, path=path, root=root, dialect=dialect)


def decode_definition(
    data: bytes, *, path: str, root: str, dialect: Dialect = MEMBRANE
) -> AgentDefinition:
    """Decode UTF-8 bytes and parse them; the size cap and the encoding are checked here."""
    if len(data) > MAX_BYTES:
        raise DefinitionError(
            f"the file is larger than {MAX_BYTES} bytes, the limit for a definition",
            path=path,
            line=1,
            hint="move long reference material out of the definition",
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DefinitionError(
            f"the file is not UTF-8 (byte {exc.start})",
            path=path,
            line=line,
            hint="save the file as UTF-8",
        ) from exc
    try:
        return parse_definition(text, path=path, root=root, dialect=dialect)
    except DefinitionError:
        raise
    except Exception as exc:  # a file must never crash its reader: report it as unusable
        raise DefinitionError(
            f"cannot be read: {type(exc).__name__}: {exc}",
            path=path,
            line=1,
            hint="fix or remove this file",
        ) from exc


def parse_definition(
    text: str, *, path: str, root: str, dialect: Dialect = MEMBRANE, c_loader: bool = True
) -> AgentDefinition:
    """Parse one definition. Raises ``DefinitionError`` when the file cannot be understood.

    ``dialect`` says how the fields map (Membrane's own by default; see ``agents.dialects``).
    The frontmatter is read with PyYAML's C safe loader where the result is YAML 1.2's
    (``membrane.agents.safe_yaml``), else, or with ``c_loader=False``, with ruamel."""
    from membrane.agents.fields import KNOWN_KEYS, build_definition

    fm = split_frontmatter(text, path=path)
    fast = None
    if c_loader and too_deep(fm.yaml_text, flavor="yaml") is None:
        fast = load_mapping(fm.yaml_text)
    if fast is not None:
        mapping, key_lines = fast
        lines = {key: fm.file_line(line) for key, line in key_lines.items()}
    else:
        data, fm = load_yaml(fm, known_keys=KNOWN_KEYS)
        lines = {
            str(key): fm.file_line(pos[0])
            for key in data
            if (pos := data.lc.data.get(key)) is not None
        }
        mapping = _plain_mapping(data)
    return build_definition(
        mapping,
        lines=lines,
        body=fm.body.strip("\n").rstrip(),
        stem=_stem(path, dialect),
        path=path,
        root=root,
        warnings=fm.warnings,
        dialect=dialect,
    )


def _plain_mapping(data: Mapping[Any, Any]) -> dict[str, Any]:
    return {str(k): v for k, v in data.items()}


def _stem(path: str, dialect: Dialect) -> str:
    """The name a file gives when it has no ``name``: its stem (Copilot's ``x.agent.md`` and
    ``x.chatmode.md`` are ``x``; OpenCode's ``.opencode/agents/team/x.md`` is ``team:x``)."""
    stem = Path(path).stem
    if dialect.name == "copilot":
        return stem.removesuffix(".agent").removesuffix(".chatmode")
    if dialect.name == "opencode":
        # OpenCode names a nested file by its path below the folder (``team/reviewer``); a
        # Membrane name holds no ``/``, so it is ``team:reviewer`` (dispatch reads either).
        for folder in ("/.opencode/agents/", "/.opencode/agent/"):
            _, found, below = path.rpartition(folder)
            if found and "/" in below:
                return below.removesuffix(".md").replace("/", ":")
    return stem
