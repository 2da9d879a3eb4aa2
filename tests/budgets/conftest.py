"""A project folder with a lead that may start workers, for the budget tests."""

from __future__ import annotations

from pathlib import Path

import pytest


def write_agents(root: Path, agents: dict[str, str]) -> None:
    """One definition per name; the value is extra frontmatter lines."""
    for name, extra in agents.items():
        path = root / ".membrane" / "agents" / f"{name}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            f"---\nname: {name}\ndescription: The {name}.\ntools: Read\n{extra}---\nWork.\n",
            encoding="utf-8",
        )


@pytest.fixture
def team(tmp_path: Path, isolated_home: Path) -> Path:
    """A lead that may start workers."""
    root = tmp_path / "team"
    write_agents(root, {"lead": "allowed_subagents: [worker]\n", "worker": ""})
    (root / "notes.txt").write_text("notes\n", encoding="utf-8")
    return root
