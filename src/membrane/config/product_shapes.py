"""The shapes of the keys Membrane reads from other products' settings files (pydantic: the files
are untrusted input), converted to ``SettingsError`` naming the file and the key.

Imported only when such a file exists (``membrane.config.product_settings``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from membrane.errors import SettingsError

__all__ = ["ClaudeSettings", "OpenCodeSettings", "claude_settings", "opencode_settings"]

_Verdict = Literal["allow", "ask", "deny"]
#: Keys a product's schema tooling writes; never warned about.
_QUIET = frozenset({"$schema"})
_CLAUDE_HINT = 'write for example {"permissions": {"deny": ["Bash(rm:*)"]}}'
_OPENCODE_HINT = 'write for example {"permission": {"edit": "ask", "bash": {"git *": "allow"}}}'


class _Shape(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    @property
    def unknown(self) -> list[str]:
        return [key for key in self.model_extra or {} if key not in _QUIET]


class ClaudePermissions(_Shape):
    allow: list[str] | None = None
    ask: list[str] | None = None
    deny: list[str] | None = None
    additionalDirectories: list[str] | None = None
    defaultMode: str | None = None
    disableBypassPermissionsMode: Literal["disable"] | None = None


class ClaudeHook(_Shape):
    type: str = "command"
    command: str | None = None
    timeout: float | None = None


class ClaudeHookGroup(_Shape):
    matcher: str | None = None
    hooks: list[ClaudeHook]


class ClaudeSettings(_Shape):
    permissions: ClaudePermissions | None = None
    model: str | None = None
    hooks: dict[str, list[ClaudeHookGroup]] | None = None


class OpenCodeRule(_Shape):
    action: str
    resource: str
    effect: _Verdict


class OpenCodeSettings(_Shape):
    permission: _Verdict | dict[str, _Verdict | dict[str, _Verdict]] | None = None
    #: OpenCode's current list format.
    permissions: list[OpenCodeRule] | None = None
    model: str | None = None
    #: Definitions (``membrane.agents.opencode_config``), not settings.
    agent: object = None

    @property
    def unknown(self) -> list[str]:
        return [key for key in super().unknown if key != "agent"]


def claude_settings(document: dict[str, object], *, path: Path) -> ClaudeSettings:
    try:
        return ClaudeSettings.model_validate(document)
    except ValidationError as exc:
        raise _error(exc, path, _CLAUDE_HINT) from None


def opencode_settings(document: dict[str, object], *, path: Path) -> OpenCodeSettings:
    try:
        return OpenCodeSettings.model_validate(document)
    except ValidationError as exc:
        raise _error(exc, path, _OPENCODE_HINT) from None


def _error(exc: ValidationError, path: Path, hint: str) -> SettingsError:
    first = exc.errors()[0]
    key = ".".join(str(part) for part in first["loc"] if not _is_type_name(part))
    return SettingsError(
        f"{path}: `{key}`: {first['msg']} (got {first.get('input')!r})",
        path=str(path),
        key=key,
        hint=hint,
    )


def _is_type_name(part: object) -> bool:
    # pydantic names the union member it tried (``literal['allow','ask','deny']``, ``dict[...]``)
    return isinstance(part, str) and ("[" in part or part in ("str", "list", "dict"))
