"""Shared fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
#: Real agent files from public repositories; present beside the repo in development only.
CORPUS_DIR = REPO_ROOT.parent / "shared" / "corpus" / "agents"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private ``MEMBRANE_HOME`` so tests never read or write the user's ``~/.membrane``."""
    home = tmp_path / "membrane-home"
    home.mkdir()
    monkeypatch.setenv("MEMBRANE_HOME", str(home))
    for var in ("MEMBRANE_SOCKET", "MEMBRANE_ROLE", "MEMBRANE_SESSION_ID", "MEMBRANE_RUN_ID"):
        monkeypatch.delenv(var, raising=False)
    return home
