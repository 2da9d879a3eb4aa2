"""Fixtures for the attack suite: a git project with agent files, and an outside folder."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest


@pytest.fixture
def outside(outside_home: Path) -> Path:
    return outside_home


@pytest.fixture
def project(tmp_path: Path, isolated_home: Path) -> Path:
    root = (tmp_path / "project").resolve()
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    agents = root / ".membrane" / "agents"
    agents.mkdir(parents=True)
    (agents / "scout.md").write_text(
        "---\nname: scout\ndescription: Reads.\ntools: Read, Grep\n---\nx\n"
    )
    (agents / "coder.md").write_text(
        "---\nname: coder\ndescription: Writes.\ntools: Read, Write, Edit, Bash\n---\nx\n"
    )
    (agents / "shell.md").write_text(
        "---\nname: shell\ndescription: Reads, with Bash.\ntools: Read, Bash\n---\nx\n"
    )
    (root / "notes.txt").write_text("notes\n")
    (root / "src").mkdir()
    return root
