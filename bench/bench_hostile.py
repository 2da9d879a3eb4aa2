"""Hostile project files cost little: each is refused before any deep parse.

A 10 KB YAML frontmatter nested ``[[[...``, a 100,000-deep ``opencode.json`` and a 100 KB Codex
TOML nested 50,000 deep, each beside one ordinary definition. Each line is the CPU time of a
cold catalog load of that project (the median of a few rounds), against the issue's bound of one
second and against the same load without the hostile file, measured in the same rounds.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from membrane.agents import Catalog
from scaling_support import goal

ROUNDS = 5
BOUND = 1.0

HOSTILE = {
    "YAML frontmatter nested 10 KB deep": (
        ".membrane/agents/deep.md",
        "---\nname: deep\ndescription: D\nextra:\n  " + "[" * 10_000 + "\n---\nBody\n",
    ),
    "opencode.json nested 100,000 deep": (
        "opencode.json",
        '{"agent": {"x": {"description": "X", "extra": ' + "[" * 100_000 + "]" * 100_000 + "}}}",
    ),
    "Codex TOML nested 50,000 deep": (
        ".codex/agents/deep.toml",
        "x = " + "[" * 50_000 + "]" * 50_000 + "\n",
    ),
}


def _project(root: Path, hostile: tuple[str, str] | None) -> Path:
    folder = root / ".membrane" / "agents"
    folder.mkdir(parents=True)
    (folder / "fine.md").write_text("---\nname: fine\ndescription: Fine.\n---\nWork.\n")
    if hostile is not None:
        where, text = hostile
        (root / where).parent.mkdir(parents=True, exist_ok=True)
        (root / where).write_text(text)
    return root


def _cpu(project: Path, *, refused: int) -> float:
    """The CPU time of one cold load of ``project``, which must refuse ``refused`` files and
    keep the ordinary definition."""
    began = time.process_time()
    catalog = Catalog(project=project)
    spent = time.process_time() - began
    assert catalog.get("fine") is not None and len(catalog.errors) == refused, catalog.errors
    return spent


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        for n, (what, hostile) in enumerate(HOSTILE.items()):
            bad = _project(base / f"bad{n}", hostile)
            plain = _project(base / f"plain{n}", None)
            with_file: list[float] = []
            without: list[float] = []
            for _ in range(ROUNDS):  # interleaved: each round loads both
                with_file.append(_cpu(bad, refused=1))
                without.append(_cpu(plain, refused=0))
            spent, alone = statistics.median(with_file), statistics.median(without)
            print(f"{what}: {spent * 1000:.1f} ms of CPU, {alone * 1000:.1f} ms without it")
            goal(
                f"cold catalog load beside an {what}"
                if what[0] in "AEIOUaeiou"
                else f"cold catalog load beside a {what}",
                f"under {BOUND:g} s of CPU",
                f"{spent:.3f} s ({spent / alone:.1f}x the load without it)",
                spent < BOUND,
            )


if __name__ == "__main__":
    main()
