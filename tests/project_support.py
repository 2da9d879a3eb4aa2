"""What the project fixtures share: writing an agent file from keyword frontmatter."""

from __future__ import annotations

from pathlib import Path

__all__ = ["agent_file"]


def agent_file(root: Path, name: str, body: str = "Do the task.", **frontmatter: object) -> Path:
    """Write ``root/.membrane/agents/NAME.md`` with a description and ``frontmatter`` (lists as
    flow arrays, booleans as ``true``/``false``); its path."""
    lines = [f"name: {name}", f"description: The {name} agent."]
    for key, value in frontmatter.items():
        if isinstance(value, list | tuple):
            value = "[" + ", ".join(str(v) for v in value) + "]"
        elif isinstance(value, bool):
            value = "true" if value else "false"
        lines.append(f"{key}: {value}")
    path = root / ".membrane" / "agents" / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("---\n" + "\n".join(lines) + "\n---\n" + body + "\n", encoding="utf-8")
    return path
