"""Helpers shared by the definition tests."""

from __future__ import annotations

from pathlib import Path


def write_agent(
    directory: Path, filename: str, frontmatter: str, body: str = "Do the task."
) -> Path:
    """Write ``---\\n<frontmatter>\\n---\\n<body>`` and return the path."""
    path = directory / filename
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\n{frontmatter.strip()}\n---\n{body}\n", encoding="utf-8")
    return path
