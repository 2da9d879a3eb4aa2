"""Every real agent file in the shared corpus: none crashes, 99% load, failures are precise.

The corpus lives beside the repository in development only; without it these tests skip.
"""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

from membrane import Catalog
from membrane.agents import read_definition
from membrane.errors import DefinitionError
from membrane.lowlevel import update_definition_text

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "agents"

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="the agent corpus is not present")


def corpus_files() -> list[Path]:
    return sorted(CORPUS.rglob("*.md"))


def test_every_corpus_file_loads_or_fails_precisely(capsys: pytest.CaptureFixture[str]) -> None:
    files = corpus_files()
    loaded, failed = 0, []
    repaired = 0
    warnings: collections.Counter[str] = collections.Counter()
    for file in files:
        try:
            definition = read_definition(file, root="project")
        except DefinitionError as exc:
            failed.append(exc)
            continue
        loaded += 1
        repaired += any(w.code.startswith("repaired-") for w in definition.warnings)
        warnings.update(w.code for w in definition.warnings)
        for warning in definition.warnings:
            assert warning.path == str(file) and warning.line is not None
    report = (
        f"corpus: {len(files)} files, {loaded} loaded ({repaired} after a repair), "
        f"{len(failed)} unusable; warnings: {dict(sorted(warnings.items()))}"
    )
    with capsys.disabled():
        print("\n" + report)
        for error in failed:
            print(f"  {error}")
    assert len(files) >= 400, report
    assert loaded >= 0.99 * len(files), report
    for error in failed:
        assert error.data["path"] and error.data["line"] is not None and error.data["hint"], error


def test_a_catalog_over_the_whole_corpus_builds(tmp_path: Path, isolated_home: Path) -> None:
    (isolated_home / "agents").symlink_to(CORPUS, target_is_directory=True)
    catalog = Catalog(project=tmp_path)
    files = corpus_files()
    loaded = len(catalog.definitions()) + sum(map(len, catalog.shadowed.values())) - 4
    assert loaded + len(catalog.errors) == len(files)
    assert catalog.reload() is False


def test_saving_a_corpus_file_unchanged_rewrites_it_byte_for_byte_unless_repaired() -> None:
    for file in corpus_files():
        text = file.read_text(encoding="utf-8")
        try:
            definition = read_definition(file, root="project")
        except DefinitionError:
            continue
        if any(w.code.startswith("repaired-") for w in definition.warnings):
            continue
        assert update_definition_text(text, {}, path=str(file)) == text, file
