"""Other products' settings files, read for what those products mean by them.

Claude Code keeps its settings in ``~/.claude/settings.json`` (the user's; ``$CLAUDE_CONFIG_DIR``
moves the folder), ``<project>/.claude/settings.json`` (the project's, shared) and
``<project>/.claude/settings.local.json`` (the project's, personal); OpenCode in the user's
``$XDG_CONFIG_HOME/opencode/opencode.json`` (``~/.config/opencode`` when the variable is unset;
``opencode.jsonc`` too), merged below ``<project>/opencode.json`` (or ``opencode.jsonc``) as
OpenCode merges them. What Membrane reads from them:

* Claude Code ``permissions.allow``/``ask``/``deny``: rules in Claude Code's syntax (``Bash``,
  ``Bash(npm run test:*)``, ``Read(./.env)``, ``Edit(src/**)``, ``mcp__github``,
  ``Agent(explorer)``), applied to every agent of the tree (``ProductRule``);
  ``permissions.additionalDirectories``: read roots (a relative one is under the project);
  ``permissions.defaultMode``: the deployment's ``permission_mode``;
  ``permissions.disableBypassPermissionsMode: "disable"``: no agent runs in
  ``bypassPermissions`` (the ceiling's mode is ``acceptEdits``); ``model``: its
  ``default_model``; ``hooks``: command hooks of every agent of the tree
  (``membrane.agents.settings_hooks``).
* OpenCode ``permission``: per tool ``allow``, ``ask`` or ``deny``, or for ``bash`` (and
  ``edit``, ``read``, ``task``) a map of patterns, the last matching key winning, as in
  OpenCode; ``model`` (``provider/model``): the deployment's ``default_model``. Its ``agent``
  entries are definitions (``membrane.agents.opencode_config``), not settings.

Every other key is warned about and ignored, never fatal. A file that is not JSON (or not a
regular file: a FIFO is never waited on), or that holds a key Membrane reads in the wrong shape,
is a warning and nothing of it applies, as Claude Code skips a settings file it cannot parse;
one bad file never stops every command. Pure reading: ``membrane.config.load`` layers the result
under Membrane's own files, and ``membrane.resolve.product_rules`` reads the rules.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from membrane.config.values import ProductRule, Verdict
from membrane.errors import SettingsError

__all__ = [
    "CLAUDE_SETTINGS_NAMES",
    "OPENCODE_SETTINGS_NAMES",
    "ProductRule",
    "ProductSettings",
    "claude_config_home",
    "opencode_config_home",
    "read_product_settings",
]

#: A project's Claude Code settings files, lowest first.
CLAUDE_SETTINGS_NAMES: Final = (".claude/settings.json", ".claude/settings.local.json")
#: A project's OpenCode config files, lowest first (OpenCode reads one; both are read here).
OPENCODE_SETTINGS_NAMES: Final = ("opencode.jsonc", "opencode.json")
#: The largest settings file read, in bytes.
_MAX_BYTES: Final = 1 << 20
_VERDICTS: Final = ("allow", "ask", "deny")
#: Claude Code's ``defaultMode`` values Membrane has a mode for.
_MODES: Final = ("default", "acceptEdits", "plan", "dontAsk", "bypassPermissions")
#: OpenCode permission keys and the Membrane tool names their rules are written with.
_OPENCODE_TOOLS: Mapping[str, tuple[str, ...]] = {
    "edit": ("Edit", "Write"),
    "write": ("Write",),
    "bash": ("Bash",),
    "read": ("Read",),
    "glob": ("Glob",),
    "grep": ("Grep",),
    "list": ("Glob",),
    "task": ("Task",),
}
#: OpenCode permission keys that name tools Membrane does not have: warned, nothing applied.
_OPENCODE_OTHER: Final = frozenset(
    {
        "webfetch",
        "websearch",
        "codesearch",
        "todowrite",
        "todoread",
        "lsp",
        "skill",
        "external_directory",
        "doom_loop",
        "question",
    }
)
_COMMENT = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*|/\*(?:[^*]|\*(?!/))*\*/')


@dataclass(frozen=True, slots=True)
class ProductSettings:
    """What the products' settings files say, lowest file first. ``values``: a ``Settings``
    field -> ``(value, source)`` (the highest file wins); ``read_paths``: ``(absolute path,
    source)``; ``rules``: every file's rules, in the order they are matched (the last matching
    one wins: OpenCode's in file order, then Claude Code's allow, ask and deny rules, so that a
    deny wins over an ask and an ask over an allow, as in Claude Code)."""

    files: tuple[str, ...] = ()
    values: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    read_paths: tuple[tuple[str, str], ...] = ()
    rules: tuple[ProductRule, ...] = ()
    #: ``(source, JSON text of its hooks table)`` of each Claude Code file with ``hooks``.
    hooks: tuple[tuple[str, str], ...] = ()
    #: The first file with ``permissions.disableBypassPermissionsMode: "disable"``, if any.
    no_bypass: str | None = None
    warnings: tuple[str, ...] = ()


def claude_config_home() -> Path:
    """Claude Code's folder: ``$CLAUDE_CONFIG_DIR`` when set, else ``~/.claude``."""
    value = os.environ.get("CLAUDE_CONFIG_DIR", "").strip()
    return Path(value).expanduser() if value else Path.home() / ".claude"


def opencode_config_home() -> Path:
    """OpenCode's user folder: ``$XDG_CONFIG_HOME/opencode``, else ``~/.config/opencode``."""
    value = os.environ.get("XDG_CONFIG_HOME", "").strip()
    base = Path(value).expanduser() if value else Path.home() / ".config"
    return base / "opencode"


def read_product_settings(
    *,
    project: Path | None,
    claude_home: Path,
    opencode_home: Path | None = None,
    claude: bool = True,
    opencode: bool = True,
) -> ProductSettings:
    """Read the products' settings files (a missing one adds nothing): the user's Claude Code
    file, the user's OpenCode config (in ``opencode_home``), then the project's OpenCode and
    Claude Code files."""
    reader = _Reader(project)
    if claude:
        reader.read(claude_home / "settings.json", reader.claude)
    if opencode_home is not None and opencode:
        for name in OPENCODE_SETTINGS_NAMES:
            reader.read(opencode_home / name, reader.opencode)
    if project is not None and opencode:
        for name in OPENCODE_SETTINGS_NAMES:
            reader.read(project / name, reader.opencode)
    if project is not None and claude:
        for name in CLAUDE_SETTINGS_NAMES:
            reader.read(project / name, reader.claude)
    claude_rules = [r for v in _VERDICTS for r in reader.claude_rules if r.verdict == v]
    return ProductSettings(
        files=tuple(reader.files),
        values=dict(reader.values),
        read_paths=tuple(dict.fromkeys(reader.read_paths)),
        rules=(*reader.opencode_rules, *claude_rules),
        hooks=tuple(reader.hooks),
        no_bypass=reader.no_bypass,
        warnings=tuple(reader.warnings),
    )


class _Reader:
    def __init__(self, project: Path | None) -> None:
        self.project = project
        self.files: list[str] = []
        self.values: dict[str, tuple[str, str]] = {}
        self.read_paths: list[tuple[str, str]] = []
        self.claude_rules: list[ProductRule] = []
        self.opencode_rules: list[ProductRule] = []
        self.hooks: list[tuple[str, str]] = []
        self.no_bypass: str | None = None
        self.warnings: list[str] = []

    def label(self, path: Path) -> str:
        if self.project is not None and path.is_relative_to(self.project):
            return path.relative_to(self.project).as_posix()
        return str(path)

    def read(self, path: Path, apply: Callable[[Path, dict[str, Any], str], None]) -> None:
        """Apply one file; a file that cannot be read or holds a key Membrane reads in the
        wrong shape is a warning, and nothing of it applies (one bad file never stops every
        command, as one bad definition file never stops the catalog)."""
        source = self.label(path)
        try:
            document = _document(path)
            if document is None:
                return
            # ``apply`` checks the file's shape before it takes anything from it.
            apply(path, document, source)
        except SettingsError as exc:
            self.warnings.append(f"{exc.message}; nothing of the file is applied (fix it)")
            return
        self.files.append(source)

    def claude(self, path: Path, document: dict[str, Any], source: str) -> None:
        from membrane.config.product_shapes import claude_settings

        parsed = claude_settings(document, path=path)
        self.unknown(source, parsed.unknown)
        permissions = parsed.permissions
        if permissions is not None:
            self.unknown(source, [f"permissions.{key}" for key in permissions.unknown])
            for verdict in _VERDICTS:
                for rule in getattr(permissions, verdict) or ():
                    self.claude_rules.append(ProductRule(verdict, rule.strip(), source))
            for folder in permissions.additionalDirectories or ():
                self.read_paths.append((self.folder(folder, path), source))
            if permissions.disableBypassPermissionsMode == "disable":
                self.no_bypass = self.no_bypass or source
            mode = permissions.defaultMode
            if mode is not None:
                self.mode(mode, source, key="permissions.defaultMode")
        if parsed.model is not None:
            self.values["default_model"] = (parsed.model, source)
        if parsed.hooks:
            self.hooks.append((source, json.dumps(document["hooks"])))

    def unknown(self, source: str, keys: list[str]) -> None:
        self.warnings += (
            f"{source}: `{key}` is a setting Membrane does not apply (ignored)" for key in keys
        )

    def opencode(self, path: Path, document: dict[str, Any], source: str) -> None:
        from membrane.config.product_shapes import opencode_settings

        parsed = opencode_settings(document, path=path)
        self.unknown(source, parsed.unknown)
        if parsed.model is not None:
            self.values["default_model"] = (parsed.model, source)
        permission: Verdict | Mapping[str, Verdict | Mapping[str, Verdict]] | None
        permission = parsed.permission
        if parsed.permissions is not None:
            if permission is not None:
                raise _invalid(
                    path,
                    "`permission` and `permissions` both hold rules",
                    "keep one: the `permissions` list (OpenCode's current format) or the map",
                )
            permission = _rule_list([(r.action, r.resource, r.effect) for r in parsed.permissions])
        if isinstance(permission, str):
            permission = {"*": permission}
        for key, value in (permission or {}).items():
            self.opencode_permission(key, value, source)

    def opencode_permission(
        self, key: str, value: Verdict | Mapping[str, Verdict], source: str
    ) -> None:
        where = f"{source}: `permission.{key}`"
        if key == "*":
            tools = tuple(dict.fromkeys(t for ts in _OPENCODE_TOOLS.values() for t in ts))
        elif key in _OPENCODE_TOOLS:
            tools = _OPENCODE_TOOLS[key]
        elif key in _OPENCODE_OTHER:
            self.warnings.append(f"{where} is about a tool Membrane does not have (ignored)")
            return
        else:
            self.warnings.append(f"{where} names no OpenCode tool (ignored)")
            return
        patterns = {"*": value} if isinstance(value, str) else value
        for pattern, verdict in patterns.items():
            for tool in tools:
                rule = tool if pattern.strip() in ("*", "**") else f"{tool}({pattern.strip()})"
                self.opencode_rules.append(ProductRule(verdict, rule, source))

    def mode(self, mode: str, source: str, *, key: str) -> None:
        known = {m.lower(): m for m in _MODES}
        chosen = known.get(mode.strip().lower())
        if chosen is None:
            self.warnings.append(
                f"{source}: `{key}` {mode!r} is not a permission mode Membrane has "
                f"({', '.join(_MODES)}); ignored"
            )
            return
        self.values["permission_mode"] = (chosen, source)
        if chosen == "bypassPermissions" and self.project is not None:
            self.warnings.append(
                f"{source}: `{key}` is bypassPermissions: every call a rule would ask about "
                "runs without approval (deny rules still hold)"
            )

    def folder(self, value: str, path: Path) -> str:
        text = value.strip()
        if text.startswith("~"):
            return os.path.expanduser(text)
        base = self.project if self.project is not None else path.parent
        return os.path.normpath(base / text) if not os.path.isabs(text) else os.path.normpath(text)


#: The actions of OpenCode's ``permissions`` list that name a permission key under another name.
_ACTIONS: Mapping[str, str] = {"shell": "bash", "agent": "task"}
#: The built-in permission keys a ``permissions`` list that never names them leaves at ``ask``.
_ASKED_BY_DEFAULT: Final = ("read", "glob", "grep", "list", "bash", "edit")


def _rule_list(
    rules: list[tuple[str, str, Verdict]],
) -> dict[str, Verdict | Mapping[str, Verdict]]:
    """OpenCode's ``permissions`` list (``{action, resource, effect}``, the last matching rule
    winning, no matching rule asking) as the ``permission`` map it means: one pattern map per
    action in list order, and each built-in the list never names at ``ask``."""
    table: dict[str, dict[str, Verdict]] = {}
    for action, resource, effect in rules:
        patterns = table.setdefault(_ACTIONS.get(action, action), {})
        patterns.pop(resource, None)  # a later rule for the same resource wins
        patterns[resource] = effect
    merged: dict[str, Verdict | Mapping[str, Verdict]] = {
        action: "ask" for action in _ASKED_BY_DEFAULT if action not in table
    }
    for action, patterns in table.items():
        if "*" not in patterns and action in _ASKED_BY_DEFAULT:
            patterns = {"*": "ask", **patterns}
        merged[action] = patterns["*"] if list(patterns) == ["*"] else patterns
    return merged


def _document(path: Path) -> dict[str, Any] | None:
    """The JSON object of ``path`` (comments allowed), ``None`` when there is no file."""
    try:
        data = _read_regular(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        problem = f"cannot read the settings file: {exc}"
        raise _invalid(path, problem, "check that it is readable") from None
    if len(data) > _MAX_BYTES:
        raise _invalid(path, f"larger than {_MAX_BYTES} bytes", "shorten the file")
    try:
        text = data.decode("utf-8")
        document = json.loads(_COMMENT.sub(_keep_strings, text))
    except UnicodeDecodeError:
        raise _invalid(path, "the file is not UTF-8", "save it as UTF-8") from None
    except json.JSONDecodeError as exc:
        raise _invalid(
            path, f"invalid JSON at line {exc.lineno}: {exc.msg}", "fix the JSON at the line named"
        ) from None
    except RecursionError:
        raise _invalid(path, "the JSON nests too deeply", "flatten the file") from None
    if not isinstance(document, dict):
        raise _invalid(path, "the file must hold a JSON object", 'write for example {"model": ...}')
    return document


def _keep_strings(match: re.Match[str]) -> str:
    text = match.group(0)
    return text if text.startswith('"') else re.sub(r"[^\n]", " ", text)


def _read_regular(path: Path) -> bytes:
    """At most ``_MAX_BYTES + 1`` bytes of the regular file ``path``; never blocks on a FIFO."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(0, "not a regular file", str(path))
        chunks: list[bytes] = []
        left = _MAX_BYTES + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 16))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _invalid(path: Path, problem: str, hint: str) -> SettingsError:
    return SettingsError(f"{path}: {problem}", path=str(path), key=None, hint=hint)
