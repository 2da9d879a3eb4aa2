"""Catalog reload with nothing changed, against a full re-parse of the same files.

``reload()`` runs before every spawn, so its unchanged path must cost a stat per file, not a
parse. This builds 500 definitions (real corpus files when present, generated ones otherwise),
then times, in the same run: ``Catalog.reload()`` with nothing changed, and parsing every file
again. The files are dated one minute back, as files at rest are; a file written within the
last clock tick is also checked by content (see ``membrane.agents.catalog``).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

from membrane.agents import Catalog, read_definition
from membrane.config.values import Settings

COUNT = 500
CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "agents"

GENERATED = """---
name: agent-{i}
description: "Agent {i}: reviews one area of the code and reports findings with locations."
model: inherit
tools: Read, Grep, Glob
disallowed_tools: Bash
max_turns: 20
---
You are agent {i}. Review the files you are given and report findings as `path:line`.
"""


def populate(directory: Path) -> None:
    sources = sorted(CORPUS.rglob("*.md")) if CORPUS.is_dir() else []
    past = time.time() - 60
    for i in range(COUNT):
        sub = directory / f"group-{i % 10}"
        sub.mkdir(parents=True, exist_ok=True)
        path = sub / f"agent-{i}.md"
        if sources:
            text = sources[i % len(sources)].read_text(encoding="utf-8")
            # Unique names, so every file is a winner.
            text = text.replace("---\n", f"---\nname: bench-{i}\n", 1)
            text = "\n".join(
                line
                for j, line in enumerate(text.split("\n"))
                if j < 2 or not line.startswith("name:")
            )
        else:
            text = GENERATED.format(i=i)
        path.write_text(text, encoding="utf-8")
        os.utime(path, (past, past))
    for sub in [*directory.iterdir(), directory]:
        os.utime(sub, (past, past))


def timed(function: object, repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()  # type: ignore[operator]
        samples.append(time.perf_counter() - start)
    return samples


def main() -> None:
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        agents = root / "project" / ".membrane" / "agents"
        populate(agents)
        catalog = Catalog(project=root / "project", home=root / "home", settings=Settings())
        assert len(catalog.definitions()) >= COUNT, len(catalog.definitions())
        files = sorted(agents.rglob("*.md"))

        def reparse() -> None:
            for file in files:
                read_definition(file, root="project")

        def reload() -> None:
            if catalog.reload():
                raise SystemExit("reload saw a change where there was none")

        reparse()  # warm both paths
        reload()
        full = statistics.median(timed(reparse, 5))
        fast = statistics.median(timed(reload, 50))
        source = "corpus files" if CORPUS.is_dir() else "generated files"
        print(f"catalog: {len(files)} definitions ({source})")
        print(f"  full re-parse       {full * 1e3:9.2f} ms")
        print(f"  reload, no change   {fast * 1e3:9.3f} ms")
        ratio = full / fast
        print(f"  ratio               {ratio:9.1f}x")
        verdict = "met" if ratio >= 20 else "missed"
        print(
            f"goal unchanged reload of {len(files)} definitions vs re-parsing them: >= 20x, "
            f"measured {ratio:.1f}x ({verdict})"
        )


if __name__ == "__main__":
    main()
