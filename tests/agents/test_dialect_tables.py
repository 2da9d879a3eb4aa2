"""The dialect tables of docs/agents.md against the code: every key a table names is a key its
dialect reads (a file with that key, in the product's own folder, never gets an ``unknown-key``
or ``authority-near-miss`` warning for it), and every dialect has its table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from membrane import Catalog
from membrane.errors import DefinitionError

DOC = Path(__file__).resolve().parents[2] / "docs" / "agents.md"
#: The heading of each dialect's table in docs/agents.md, and where its files go.
DIALECTS = {
    "claude-code": ("**Claude Code**", ".claude/agents/probe.md"),
    "opencode": ("**OpenCode**", ".opencode/agents/probe.md"),
    "pi": ("**pi**", ".pi/agents/probe.md"),
    "codex": ("**Codex**", ".codex/agents/probe.toml"),
    "copilot": ("**GitHub Copilot**", ".github/agents/probe.agent.md"),
}
_KEY = re.compile(r"[A-Za-z_][\w-]*")


def table_keys(heading: str) -> list[str]:
    """The product keys of the first table after ``heading``: each backticked entry of a first
    cell that begins with one (``model: opus`` is ``model``; a quoted value is no key)."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    rows: list[str] = []
    for line in lines[start + 1 :]:
        if line.startswith("|"):
            rows.append(line)
        elif rows:
            break
    keys: list[str] = []
    for row in rows[2:]:  # header and separator
        first = row.split("|")[1].strip()
        if not first.startswith("`"):
            continue
        first = re.sub(r"\([^)]*\)", "", first)  # examples and aliases in parentheses
        for segment in re.findall(r"`([^`]*)`", first):
            match = _KEY.match(segment)
            if match is not None:
                keys.append(match.group(0))
    return list(dict.fromkeys(keys))


def test_every_dialect_has_a_table_that_names_its_keys() -> None:
    for dialect, (heading, _) in DIALECTS.items():
        assert len(table_keys(heading)) >= 3, dialect


@pytest.mark.parametrize(
    ("dialect", "key"),
    [(dialect, key) for dialect, (heading, _) in DIALECTS.items() for key in table_keys(heading)],
)
def test_a_key_the_table_names_is_read_by_its_dialect(
    tmp_path: Path, isolated_home: Path, dialect: str, key: str
) -> None:
    folder = DIALECTS[dialect][1]
    path = tmp_path / folder
    path.parent.mkdir(parents=True)
    if dialect == "codex":
        head = "" if key == "description" else 'description = "probe"\n'
        path.write_text(f'{head}{key} = "x"\n', encoding="utf-8")
    else:
        head = "" if key == "description" else "description: probe\n"
        path.write_text(f"---\n{head}{key}: x\n---\nGo.\n", encoding="utf-8")
    catalog = Catalog(project=tmp_path)
    [definition] = [d for d in catalog.definitions().values() if d.path == str(path)] or [None]
    if definition is None:
        # A value the dialect refuses is an error about that key: the key is known.
        [error] = catalog.errors
        assert isinstance(error, DefinitionError) and f"`{key}`" in str(error), str(error)
        return
    assert definition.dialect == dialect
    ignored = [
        w
        for w in definition.warnings
        if w.code in ("unknown-key", "authority-near-miss") and w.message.startswith(f"`{key}`")
    ]
    assert ignored == []
