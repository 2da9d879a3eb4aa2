"""The environment every child Membrane launches is given: where the ``membrane`` command is
(``MEMBRANE_CLI_PATH``) and the full list of skill roots (``MEMBRANE_AGENT_SKILLS_DIRS``), so a
CLI child finds the same command and the same skills as the runtime that started it."""

from __future__ import annotations

import functools
import os
import shutil
import sys
from collections.abc import Mapping, Sequence

from membrane.agents.skills import ENV_SKILL_DIRS
from membrane.resolve.guidance import ENV_CLI_PATH

__all__ = ["child_environment", "cli_path"]


def child_environment(*, skill_roots: Sequence[str]) -> dict[str, str]:
    """The variables a launched child gets on top of the runtime's own environment."""
    env = {ENV_CLI_PATH: cli_path()}
    if skill_roots:
        env[ENV_SKILL_DIRS] = os.pathsep.join(skill_roots)
    return env


def cli_path(env: Mapping[str, str] | None = None) -> str:
    """The ``membrane`` command a child should call: ``$MEMBRANE_CLI_PATH`` when set, else the
    one on ``PATH``, else the console script beside this interpreter, else ``python -m
    membrane`` through this interpreter."""
    environ = os.environ if env is None else env
    return environ.get(ENV_CLI_PATH) or _found(environ.get("PATH"))


@functools.lru_cache(maxsize=8)
def _found(path: str | None) -> str:
    on_path = shutil.which("membrane", path=path)
    if on_path:
        return on_path
    beside = os.path.join(os.path.dirname(sys.executable), "membrane")
    if os.access(beside, os.X_OK):
        return beside
    return f"{sys.executable} -m membrane"
