"""Fixtures for definition tests: a project, a workspace and a private home, all empty."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def project(tmp_path: Path, isolated_home: Path) -> Path:
    directory = tmp_path / "project"
    (directory / ".membrane" / "agents").mkdir(parents=True)
    return directory


@pytest.fixture
def global_agents(isolated_home: Path) -> Path:
    directory = isolated_home / "agents"
    directory.mkdir()
    return directory


@pytest.fixture
def project_agents(project: Path) -> Path:
    return project / ".membrane" / "agents"
