"""Shared fixtures: the test home, and a factory for small, well-formed tools."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from membrane import Tool, ToolContext
from pg_support import Cluster, start_cluster

REPO_ROOT = Path(__file__).resolve().parent.parent
#: Real agent files from public repositories; present beside the repo in development only.
CORPUS_DIR = REPO_ROOT.parent / "shared" / "corpus" / "agents"

# Project commands are runtime-backed by default and start `membrane serve` in the background
# when none answers; a test (and every process it starts) runs them headless unless it tests
# the runtime-backed path, whose tests build their environment without this variable.
os.environ["MEMBRANE_HEADLESS"] = "1"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[Cluster]:
    """One private PostgreSQL cluster for the whole session (``pg_support``); the tests that
    use it skip, saying why, where PostgreSQL is not installed."""
    try:
        cluster = start_cluster()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    yield cluster
    cluster.stop()


@pytest.fixture
def postgres_url(postgres_cluster: Cluster) -> str:
    """A ``postgresql://`` URL of a new, empty schema of the session's cluster."""
    return postgres_cluster.fresh_url()


@pytest.fixture
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private ``MEMBRANE_HOME`` so tests never read or write the user's ``~/.membrane``."""
    home = tmp_path / "membrane-home"
    home.mkdir()
    monkeypatch.setenv("MEMBRANE_HOME", str(home))
    # Claude Code's user folder is a definition root too: never read the user's own.
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-home"))
    # So is OpenCode's user config folder: never read the user's own.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    for var in ("MEMBRANE_SOCKET", "MEMBRANE_ROLE", "MEMBRANE_SESSION_ID", "MEMBRANE_RUN_ID"):
        monkeypatch.delenv(var, raising=False)
    return home


OBJECT: Mapping[str, Any] = {"type": "object"}


def _make_tool(
    name: str,
    *,
    schema: Mapping[str, Any] | None = None,
    description: str | None = None,
    origin: str = "builtin",
    reserved: bool = False,
) -> Tool:
    async def handler(arguments: Mapping[str, Any], context: ToolContext) -> dict[str, Any]:
        return {"tool": name, "origin": origin, "arguments": dict(arguments)}

    return Tool(
        name,
        f"The {name} tool." if description is None else description,
        OBJECT if schema is None else schema,
        handler,
        origin=origin,
        reserved=reserved,
    )


@pytest.fixture(scope="session")
def make_tool() -> Callable[..., Tool]:
    return _make_tool


@pytest.fixture(params=["bubblewrap", "landlock"])
def os_sandbox(request: pytest.FixtureRequest) -> str:
    """Each OS sandbox backend in turn; skipped, with the reason, where this machine lacks it."""
    return _available(request.param)


@pytest.fixture(params=["guard", "bubblewrap", "landlock"])
def any_sandbox(request: pytest.FixtureRequest) -> str:
    """Every backend, the shell guard alone included (skipped where the machine lacks it)."""
    return "guard" if request.param == "guard" else _available(request.param)


def _available(backend: str) -> str:
    from membrane.sandbox import machine_support

    support = machine_support()
    if backend == "bubblewrap" and support.bwrap is None:
        pytest.skip(f"no bubblewrap sandbox here: {support.bwrap_reason}")
    if backend == "landlock" and not support.landlock_abi:
        pytest.skip(f"no Landlock sandbox here: {support.landlock_reason}")
    return backend


@pytest.fixture
def outside_home() -> Iterator[Path]:
    """A folder in the user's home holding ``keep.txt``: outside any checkout, and not under
    ``/tmp`` (private in the bubblewrap sandbox, which would make a write check too easy)."""
    base = Path.home() / ".cache" / "membrane-tests"
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError:
        pytest.skip("the home folder cannot be written, so no outside folder can be made")
    folder = base / uuid.uuid4().hex
    folder.mkdir()
    (folder / "keep.txt").write_text("keep\n")
    yield folder.resolve()
    shutil.rmtree(folder, ignore_errors=True)
