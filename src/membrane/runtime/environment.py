"""The environment every child Membrane launches is given: where the ``membrane`` command is
(``MEMBRANE_CLI_PATH``) and the full list of skill roots (``MEMBRANE_AGENT_SKILLS_DIRS``), so a
CLI child finds the same command and the same skills as the runtime that started it; and the
capability mode that environment gives a child (seed 002, "Capability mode"):

* ``full_tooling``: the child reaches Membrane's actions. A child on Membrane's own view (a
  provider that installs the tool filter: the in-process loop) always does; an external
  program does when its environment carries a run token (``MEMBRANE_TOKEN``) and the socket
  of a runtime that answers (``MEMBRANE_SOCKET``) as it starts, so its ``membrane actions``
  reach the run's view;
* ``fallback``: the bridge is unavailable (no token, or no runtime answers): the program has
  only its own built-in tools.

A socket path over the 107 bytes a Unix socket address holds is reached through its folder's
descriptor (``socket_address``, :mod:`membrane.sandbox.connector`'s, which the server binds and
connects with too).
"""

from __future__ import annotations

import functools
import os
import shutil
import socket
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from membrane.agents.skills import ENV_SKILL_DIRS
from membrane.errors import SocketPathTooLong
from membrane.resolve.guidance import ENV_CLI_PATH
from membrane.sandbox.connector import SOCKET_PATH_LIMIT, socket_address

__all__ = [
    "CAPABILITY_MODES",
    "SOCKET_PATH_LIMIT",
    "capability_mode",
    "child_environment",
    "cli_path",
    "socket_address",
]

#: The capability modes a run's session log records.
CAPABILITY_MODES: Final = ("full_tooling", "fallback")


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


def capability_mode(*, on_view: bool, env: Mapping[str, str]) -> str:
    """The child's capability mode (see the module docstring). ``on_view``: the provider runs
    the child on Membrane's view; ``env``: what the child's process gets from Membrane."""
    if on_view:
        return "full_tooling"
    path = env.get("MEMBRANE_SOCKET", "")
    if not env.get("MEMBRANE_TOKEN") or not path:
        return "fallback"
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(2.0)
        with socket_address(Path(path)) as address:
            probe.connect(address)
    except (OSError, SocketPathTooLong):
        return "fallback"
    finally:
        probe.close()
    return "full_tooling"
