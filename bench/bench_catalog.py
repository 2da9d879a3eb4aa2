"""The catalog's cold load and its unchanged reload, each against its limit, in one run.

1. Cold load: a new ``Catalog`` over 1,000 unchanged definitions with its definition cache (as
   a new process builds it: the builtins already read, the earlier objects collected and frozen
   out of the collector's way), against a stat walk plus reading and hashing every file (the
   least a load that trusts nothing it has not checked must do), the two in turn. The files
   are untouched for two seconds, so the cache trusts their stat. Goal: at most 3x.
   Beside it, what a load without the cache parses: every file through
   ``parse_definition`` with PyYAML's C safe loader where YAML 1.1 and 1.2 agree (the
   default), and with ruamel alone, in turn (printed; no goal).
2. Unchanged reload: ``reload()`` runs before every spawn, so its unchanged path must cost a
   stat per file, not a parse. 500 definitions (real corpus files when present, generated ones
   otherwise); ``Catalog.reload()`` with nothing changed (a cache hit) against parsing every
   file again (a full recompute). Goal: at least 20x. The files are dated one minute back, as
   files at rest are; a file written within the last clock tick is also checked by content
   (see ``membrane.agents.catalog``).
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import statistics
import tempfile
import time
from pathlib import Path

from membrane.agents import Catalog, read_definition
from membrane.agents.frontmatter import parse_definition
from membrane.config.values import Settings
from membrane.errors import DefinitionError

COUNT = 500
COLD = 1_000
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


def populate(directory: Path, *, count: int = COUNT) -> None:
    sources = sorted(CORPUS.rglob("*.md")) if CORPUS.is_dir() else []
    past = time.time() - 60
    for i in range(count):
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


def _in_turn(sides: dict[str, object], repeat: int) -> dict[str, float]:
    """The median seconds of each side, the sides run in turn ``repeat`` times."""
    samples: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(repeat):
        for name, function in sides.items():
            samples[name] += timed(function, 1)
    return {name: statistics.median(values) for name, values in samples.items()}


def cold_load(root: Path) -> None:
    agents = root / "project" / ".membrane" / "agents"
    populate(agents, count=COLD)
    # Untouched for two seconds, as a user's files are: the cache records their stat and a
    # cold load reads none of them (a file changed more recently is read and hashed).
    past = time.time() - 60
    for file in agents.rglob("*.md"):
        os.utime(file, (past, past))
    time.sleep(2.1)
    cache = root / "state" / "definitions.json"
    project, home = root / "project", root / "home"
    Catalog(project=project, home=home, settings=Settings(), cache=cache)
    files = sorted(agents.rglob("*.md"))
    texts = [(str(file), file.read_text(encoding="utf-8")) for file in files]

    def cold() -> None:
        Catalog(project=project, home=home, settings=Settings(), cache=cache)

    def walk_and_hash() -> None:
        stack = [str(agents)]
        while stack:
            for item in os.scandir(stack.pop()):
                if item.is_dir():
                    stack.append(item.path)
                elif item.name.endswith(".md"):
                    os.stat(item.path)
                    with open(item.path, "rb") as handle:
                        hashlib.blake2b(handle.read(), digest_size=16).digest()

    def parse(c_loader: bool) -> None:
        for path, text in texts:
            # A broken corpus file costs its parse all the same.
            with contextlib.suppress(DefinitionError):
                parse_definition(text, path=path, root="project", c_loader=c_loader)

    # A new process has none of this one's objects for the collector to walk.
    gc.collect()
    gc.freeze()
    try:
        figures = _in_turn({"cold": cold, "walk": walk_and_hash}, 10)
        parses = _in_turn({"c": lambda: parse(True), "ruamel": lambda: parse(False)}, 3)
    finally:
        gc.unfreeze()
    mine, limit = figures["cold"], figures["walk"]
    print(f"cold catalog load of {len(files):,} unchanged definitions (definition cache)")
    print(f"  membrane {mine * 1e3:.2f} ms, stat walk + read + hash {limit * 1e3:.2f} ms")
    print(
        f"  parsing all {len(files):,} (no cache): C safe loader where 1.1 and 1.2 agree "
        f"{parses['c'] * 1e3:.1f} ms, ruamel alone {parses['ruamel'] * 1e3:.1f} ms "
        f"({parses['ruamel'] / parses['c']:.2f}x)"
    )
    ratio = mine / limit
    print(
        f"goal cold catalog load of {len(files):,} definitions: <= 3x a stat walk plus "
        f"hashing, measured {ratio:.2f}x ({'met' if ratio <= 3 else 'missed'})"
    )


def main() -> None:
    with tempfile.TemporaryDirectory() as temp:
        cold_load(Path(temp) / "cold")
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
            f"goal unchanged reload of {len(files)} definitions (a cache hit) vs re-parsing "
            f"them (a full recompute): >= 20x, measured {ratio:.1f}x ({verdict})"
        )


if __name__ == "__main__":
    main()
