"""The installed entry points are remembered while the installation is unchanged: a warm start
never asks ``importlib.metadata``; an installed, removed or rewritten distribution is seen."""

from __future__ import annotations

import importlib.metadata
import json
import os
from pathlib import Path

import pytest

from membrane.extensions import ExtensionSource, discover_extensions
from membrane.extensions.installed import installed_entry_points
from membrane.extensions.load import ENTRY_POINT_GROUP


def install(site: Path, name: str, points: str) -> Path:
    """A distribution ``name`` in ``site`` whose ``membrane.extensions`` entry points are
    ``points`` (``name = module:attr`` lines)."""
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{points}\n")
    return info


def asked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every group ``importlib.metadata.entry_points`` is asked for, from now on."""
    calls: list[str] = []
    real = importlib.metadata.entry_points

    def counting(**params: str) -> object:
        calls.append(params["group"])
        return real(**params)

    monkeypatch.setattr(importlib.metadata, "entry_points", counting)
    return calls


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder


def test_a_warm_cache_answers_without_reading_the_metadata(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(site, "beta_pkg", "beta = beta_pkg:setup")
    cache = tmp_path / "cache" / "entry-points.json"
    calls = asked(monkeypatch)
    first = installed_entry_points(ENTRY_POINT_GROUP, cache=cache)
    assert first["beta"] == "beta_pkg:setup"
    assert calls == [ENTRY_POINT_GROUP]
    (answer,) = json.loads(cache.read_text())["answers"].values()
    assert answer["points"] == first
    assert installed_entry_points(ENTRY_POINT_GROUP, cache=cache) == first
    assert calls == [ENTRY_POINT_GROUP]  # the second answer came from the cache
    found = discover_extensions(None, cache=cache)
    assert found["beta"] == ExtensionSource("beta", "entry-point", "beta_pkg:setup")
    assert calls == [ENTRY_POINT_GROUP]


def test_installing_removing_or_rewriting_a_distribution_is_seen(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "entry-points.json"
    beta = install(site, "beta_pkg", "beta = beta_pkg:setup")
    assert installed_entry_points(ENTRY_POINT_GROUP, cache=cache)["beta"] == "beta_pkg:setup"
    gamma = install(site, "gamma_pkg", "gamma = gamma_pkg:setup")
    assert installed_entry_points(ENTRY_POINT_GROUP, cache=cache)["gamma"] == "gamma_pkg:setup"
    points = beta / "entry_points.txt"
    points.write_text(f"[{ENTRY_POINT_GROUP}]\nbeta = beta_pkg.v2:setup\n")
    stamp = points.stat()
    os.utime(points, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 1_000_000_000))
    assert installed_entry_points(ENTRY_POINT_GROUP, cache=cache)["beta"] == "beta_pkg.v2:setup"
    for file in gamma.iterdir():
        file.unlink()
    gamma.rmdir()
    assert "gamma" not in installed_entry_points(ENTRY_POINT_GROUP, cache=cache)
    calls = asked(monkeypatch)
    uncached = installed_entry_points(ENTRY_POINT_GROUP)
    assert uncached == installed_entry_points(ENTRY_POINT_GROUP, cache=cache)
    assert calls == [ENTRY_POINT_GROUP]  # no cache: asked; unchanged since: cached


@pytest.mark.parametrize(
    "content", ["not json", "[]", '{"answers": 1}', '{"answers": {"x": {"key": 1}}}']
)
def test_a_broken_cache_is_ignored_and_rewritten(site: Path, tmp_path: Path, content: str) -> None:
    install(site, "beta_pkg", "beta = beta_pkg:setup")
    cache = tmp_path / "entry-points.json"
    cache.write_text(content)
    assert installed_entry_points(ENTRY_POINT_GROUP, cache=cache)["beta"] == "beta_pkg:setup"
    answers = json.loads(cache.read_text())["answers"].values()
    assert [a["points"]["beta"] for a in answers if "points" in a] == ["beta_pkg:setup"]


def test_each_sys_path_keeps_its_own_answer(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(site, "beta_pkg", "beta = beta_pkg:setup")
    other = tmp_path / "other"
    install(other, "gamma_pkg", "gamma = gamma_pkg:setup")
    cache = tmp_path / "entry-points.json"
    calls = asked(monkeypatch)
    assert "gamma" not in installed_entry_points(ENTRY_POINT_GROUP, cache=cache)
    monkeypatch.syspath_prepend(str(other))
    assert "gamma" in installed_entry_points(ENTRY_POINT_GROUP, cache=cache)
    monkeypatch.undo()
    monkeypatch.syspath_prepend(str(site))
    calls = asked(monkeypatch)
    # Back to the first sys.path: its answer is still kept, nothing is asked.
    assert "gamma" not in installed_entry_points(ENTRY_POINT_GROUP, cache=cache)
    assert calls == []
    assert len(json.loads(cache.read_text())["answers"]) == 2


def test_a_cache_that_cannot_be_written_is_skipped(site: Path, tmp_path: Path) -> None:
    install(site, "beta_pkg", "beta = beta_pkg:setup")
    blocker = tmp_path / "file"
    blocker.write_text("")
    cache = blocker / "entry-points.json"  # its folder is a file
    assert installed_entry_points(ENTRY_POINT_GROUP, cache=cache)["beta"] == "beta_pkg:setup"
    assert not cache.exists()
