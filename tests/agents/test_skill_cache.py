"""What each SKILL.md parsed to is kept by content digest: a warm discovery parses no file and
gives exactly what a cold one gives; a changed file is parsed again (operation counts only)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from membrane.agents import skills
from membrane.agents.skills import PACKAGED_SKILLS, SkillCatalog, discover_skills


def write(root: Path, folder: str, text: str) -> Path:
    (root / folder).mkdir(parents=True, exist_ok=True)
    file = root / folder / "SKILL.md"
    file.write_text(text, encoding="utf-8")
    return file


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The SKILL.md files parsed from now on."""
    seen: list[str] = []
    real: Callable[[bytes, Path, str], object] = skills.parse_skill

    def counting(data: bytes, folder: Path, path: str) -> object:
        seen.append(Path(path).parent.name)
        return real(data, folder, path)

    monkeypatch.setattr(skills, "parse_skill", counting)
    return seen


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "skills"
    write(
        folder, "alpha", "---\nname: alpha\ndescription: Use   alpha\n  for alpha work.\n---\nA.\n"
    )
    write(folder, "beta", "---\nname: gamma\ndescription: Renamed.\nodd-key: 1\n---\nB.\n")
    write(folder, "broken", "---\nname: [unclosed\n---\nC.\n")
    write(folder, "nameless", "---\ndescription: ''\n---\nD.\n")
    (folder / "latin1").mkdir()
    (folder / "latin1" / "SKILL.md").write_bytes(b"---\nname: latin1\ndescription: caf\xe9\n---\n")
    return folder


def same(a: SkillCatalog, b: SkillCatalog) -> None:
    assert a.skills == b.skills
    assert a.shadowed == b.shadowed
    assert a.problems == b.problems
    assert a.roots == b.roots


def test_a_warm_discovery_parses_nothing_and_equals_a_cold_one(
    root: Path, tmp_path: Path, parses: list[str]
) -> None:
    roots = (root, PACKAGED_SKILLS)
    uncached = discover_skills(roots)
    assert len(parses) == 6  # five here, one packaged
    cache = tmp_path / "state" / "skills.json"
    first = discover_skills(roots, cache=cache)
    assert len(parses) == 12
    same(first, uncached)
    assert cache.is_file()
    warm = discover_skills(roots, cache=cache)
    assert len(parses) == 12  # every file came from the cache
    same(warm, uncached)
    # The broken files' warnings, and the repairs' and renames', came back exactly.
    assert {p.code for p in warm.problems} >= {"skill-invalid", "skill-name-differs"}
    assert set(warm.skills) == {"alpha", "gamma", "membrane"}
    assert warm.skills["alpha"].description == "Use alpha for alpha work."


def test_a_changed_or_new_file_is_parsed_again_and_a_removed_one_forgotten(
    root: Path, tmp_path: Path, parses: list[str]
) -> None:
    cache = tmp_path / "skills.json"
    discover_skills((root,), cache=cache)
    parses.clear()
    write(root, "alpha", "---\nname: alpha\ndescription: Now different.\n---\nA.\n")
    write(root, "delta", "---\nname: delta\ndescription: New.\n---\nD.\n")
    found = discover_skills((root,), cache=cache)
    assert sorted(parses) == ["alpha", "delta"]
    assert found.skills["alpha"].description == "Now different."
    assert found.skills["delta"].description == "New."
    (root / "delta" / "SKILL.md").unlink()
    discover_skills((root,), cache=cache)
    kept = json.loads(cache.read_text())["entries"]
    assert not any(path.endswith("delta/SKILL.md") for path in kept)


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        '{"fingerprint": "another parser", "entries": {}}',
        "[]",
    ],
)
def test_a_broken_or_foreign_cache_is_ignored_and_rewritten(
    root: Path, tmp_path: Path, parses: list[str], content: str
) -> None:
    cache = tmp_path / "skills.json"
    cache.write_text(content)
    found = discover_skills((root,), cache=cache)
    same(found, discover_skills((root,)))
    parses.clear()
    discover_skills((root,), cache=cache)
    assert parses == []


def test_a_damaged_entry_is_parsed_again(root: Path, tmp_path: Path, parses: list[str]) -> None:
    cache = tmp_path / "skills.json"
    discover_skills((root,), cache=cache)
    data = json.loads(cache.read_text())
    path = str(root / "alpha" / "SKILL.md")
    data["entries"][path][1] = ["alpha", 7, "not a list"]
    cache.write_text(json.dumps(data))
    parses.clear()
    found = discover_skills((root,), cache=cache)
    assert parses == ["alpha"]
    assert found.skills["alpha"].description == "Use alpha for alpha work."


def test_a_cache_that_cannot_be_written_is_skipped(root: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    found = discover_skills((root,), cache=blocker / "skills.json")
    same(found, discover_skills((root,)))
