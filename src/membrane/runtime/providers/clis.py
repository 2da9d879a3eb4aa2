"""External agent CLIs on ``PATH``: Claude Code, Codex, Cursor, Aider, Continue, OpenCode, Gemini.

``detect_clis()`` finds each command on ``PATH`` and asks it for ``--version`` with a short
timeout, all at once, so one binary that hangs costs at most the timeout and never blocks the
others; a binary that exits non-zero or hangs is reported as such (``status``). Results are
cached for 30 seconds (``CliDetector`` takes a clock, so tests control it). Lookup goes through
``PATH`` only: a shell alias is not seen.

``command_provider_for(id)`` offers a ``CommandProvider`` preset for the CLIs whose headless
mode is a single command (``claude -p``, ``codex exec``, ``gemini -p``, ``opencode run``,
``aider --message``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Final, Literal

from membrane.errors import InvalidRequest
from membrane.json_types import JSONDict
from membrane.runtime.providers.command import CommandProvider

__all__ = [
    "CACHE_SECONDS",
    "CLI_SPECS",
    "CliDetector",
    "CliSpec",
    "DetectedCli",
    "command_provider_for",
    "detect_clis",
]

CACHE_SECONDS: Final = 30.0
#: How long ``--version`` may take before the binary is reported as hanging.
VERSION_TIMEOUT: Final = 3.0
_MAX_VERSION_CHARS: Final = 200

Status = Literal["installed", "not-installed", "failed", "timeout"]


@dataclass(frozen=True, slots=True)
class CliSpec:
    """One external CLI: its id, label, command, version arguments and, when it has a
    one-command headless mode, the ``CommandProvider`` template for it."""

    id: str
    label: str
    command: str
    version_args: tuple[str, ...] = ("--version",)
    headless: tuple[str, ...] | None = None


CLI_SPECS: Final[tuple[CliSpec, ...]] = (
    CliSpec("claude", "Claude Code", "claude", headless=("claude", "-p", "{guidance}\n\n{task}")),
    CliSpec("codex", "Codex", "codex", headless=("codex", "exec", "{guidance}\n\n{task}")),
    CliSpec("cursor", "Cursor", "cursor"),
    CliSpec("aider", "Aider", "aider", headless=("aider", "--yes-always", "--message", "{task}")),
    CliSpec("continue", "Continue", "continue"),
    CliSpec("opencode", "OpenCode", "opencode", headless=("opencode", "run", "{task}")),
    CliSpec("gemini", "Gemini CLI", "gemini", headless=("gemini", "-p", "{guidance}\n\n{task}")),
)
_BY_ID: Final = {spec.id: spec for spec in CLI_SPECS}


@dataclass(frozen=True, slots=True)
class DetectedCli:
    """What was found for one CLI. ``version`` is the first line ``--version`` printed;
    ``detail`` says why a found binary did not answer."""

    id: str
    label: str
    command: str
    status: Status
    path: str | None = None
    version: str | None = None
    detail: str | None = None

    @property
    def installed(self) -> bool:
        return self.status == "installed"

    def to_dict(self) -> JSONDict:
        return {
            "id": self.id,
            "label": self.label,
            "command": self.command,
            "status": self.status,
            "path": self.path,
            "version": self.version,
            "detail": self.detail,
            "preset": _BY_ID[self.id].headless is not None if self.id in _BY_ID else False,
        }


def _probe(spec: CliSpec, path_env: str | None, timeout: float) -> DetectedCli:
    found = shutil.which(spec.command, path=path_env)
    base = {"id": spec.id, "label": spec.label, "command": spec.command}
    if found is None:
        return DetectedCli(**base, status="not-installed")
    try:
        process = subprocess.Popen(
            [found, *spec.version_args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return DetectedCli(**base, status="failed", path=found, detail=str(exc))
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        return DetectedCli(
            **base, status="timeout", path=found, detail=f"--version did not answer in {timeout}s"
        )
    text = (out or err).decode("utf-8", "replace").strip().splitlines()
    first = text[0][:_MAX_VERSION_CHARS] if text else None
    if process.returncode != 0:
        tail = err.decode("utf-8", "replace").strip()[-_MAX_VERSION_CHARS:]
        return DetectedCli(
            **base,
            status="failed",
            path=found,
            detail=f"--version exited {process.returncode}" + (f": {tail}" if tail else ""),
        )
    return DetectedCli(**base, status="installed", path=found, version=first)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.communicate(timeout=1.0)


class CliDetector:
    """Detection with a cache of ``CACHE_SECONDS`` per ``PATH`` value."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        timeout: float = VERSION_TIMEOUT,
        specs: tuple[CliSpec, ...] = CLI_SPECS,
    ) -> None:
        self._clock = clock
        self._timeout = timeout
        self._specs = specs
        self._lock = threading.Lock()
        self._cache: dict[str | None, tuple[float, tuple[DetectedCli, ...]]] = {}

    def detect(self, env: Mapping[str, str] | None = None) -> tuple[DetectedCli, ...]:
        path_env = (os.environ if env is None else env).get("PATH")
        now = self._clock()
        with self._lock:
            cached = self._cache.get(path_env)
            if cached is not None and now - cached[0] < CACHE_SECONDS:
                return cached[1]
        with ThreadPoolExecutor(max_workers=len(self._specs)) as pool:
            found = tuple(pool.map(lambda spec: _probe(spec, path_env, self._timeout), self._specs))
        with self._lock:
            self._cache[path_env] = (self._clock(), found)
        return found


_DEFAULT = CliDetector()


def detect_clis(env: Mapping[str, str] | None = None) -> tuple[DetectedCli, ...]:
    """Every known CLI, in ``CLI_SPECS`` order, through the process-wide 30 s cache."""
    return _DEFAULT.detect(env)


def command_provider_for(cli: str, **options: object) -> CommandProvider:
    """A ``CommandProvider`` preset for CLI ``cli`` (one of ``CLI_SPECS`` with a headless mode).
    ``options`` go to ``CommandProvider`` (``env``, ``timeout``, ...)."""
    spec = _BY_ID.get(cli)
    if spec is None or spec.headless is None:
        presets = ", ".join(s.id for s in CLI_SPECS if s.headless is not None)
        raise InvalidRequest(
            f"no CommandProvider preset for {cli!r}; presets exist for {presets}", field="cli"
        )
    return CommandProvider(spec.headless, name=spec.id, **options)  # type: ignore[arg-type]
