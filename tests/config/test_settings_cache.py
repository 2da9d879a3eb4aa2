"""The checked values of each settings file are kept by the digest of its text and of the
schema: unchanged files are read without the TOML parser or pydantic (counted in a fresh
interpreter), and a changed file, or values kept under another digest, are checked again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from membrane import load_settings
from membrane.errors import SettingsError
from process_support import probe_json

CONFIG = """
max_depth = 4
grace_turns = 2
receipt_ttl_seconds = 1.5
[roles.ci]
allow = ["Read"]
[rate_limits.Bash]
max_calls = 3
window_seconds = 60
"""

PROBE = """
import json, sys
from pathlib import Path
from membrane import load_settings
settings = load_settings(project=Path(sys.argv[1]))
print(json.dumps({
    "max_depth": settings.max_depth,
    "roles": sorted(settings.roles),
    "modules": sorted(sys.modules),
}))
"""


def _project(tmp_path: Path, text: str) -> Path:
    project = tmp_path / "project"
    (project / ".membrane").mkdir(parents=True, exist_ok=True)
    (project / ".membrane" / "config.toml").write_text(text)
    return project


@pytest.mark.costs
def test_unchanged_settings_are_read_without_the_toml_parser(
    tmp_path: Path, isolated_home: Path
) -> None:
    project = _project(tmp_path, CONFIG)
    first = probe_json(PROBE, project)
    assert "tomllib" in first["modules"] and "pydantic" in first["modules"]
    second = probe_json(PROBE, project)
    assert second["max_depth"] == first["max_depth"] == 4
    assert second["roles"] == first["roles"] and "ci" in second["roles"]
    assert "tomllib" not in second["modules"] and "pydantic" not in second["modules"]
    assert (isolated_home / "cache" / "settings.json").is_file()


def test_a_cached_parse_gives_the_same_settings(tmp_path: Path, isolated_home: Path) -> None:
    project = _project(tmp_path, CONFIG)
    fresh = load_settings(project=project)
    assert load_settings(project=project) == fresh
    assert fresh.receipt_ttl_seconds == 1.5 and fresh.rate_limits["Bash"].window_seconds == 60


def test_a_changed_file_is_parsed_again(tmp_path: Path, isolated_home: Path) -> None:
    project = _project(tmp_path, CONFIG)
    assert load_settings(project=project).max_depth == 4
    _project(tmp_path, CONFIG.replace("max_depth = 4", "max_depth = 2"))
    assert load_settings(project=project).max_depth == 2
    _project(tmp_path, "max_depth = [")
    with pytest.raises(SettingsError, match="invalid TOML"):
        load_settings(project=project)


def test_values_kept_under_another_digest_are_checked_again(
    tmp_path: Path, isolated_home: Path
) -> None:
    # What an older schema (or another text) kept is never taken: the file is checked anew.
    project = _project(tmp_path, CONFIG)
    load_settings(project=project)
    cache = isolated_home / "cache" / "settings.json"
    data = json.loads(cache.read_text())
    for entry in data["entries"].values():
        entry[0] = "0" * 64
        entry[1] = json.dumps({"max_depth": "deep"})
    cache.write_text(json.dumps(data))
    assert load_settings(project=project).max_depth == 4
    _project(tmp_path, CONFIG.replace("max_depth = 4", 'max_depth = "deep"'))
    with pytest.raises(SettingsError, match="max_depth"):
        load_settings(project=project)


def test_dates_are_parsed_every_time_and_a_broken_cache_is_a_miss(
    tmp_path: Path, isolated_home: Path
) -> None:
    project = _project(tmp_path, "max_depth = 2\n[models.m]\nprovider = 'openai'\nmodel = 'x'\n")
    (isolated_home / "cache").mkdir()
    (isolated_home / "cache" / "settings.json").write_text("{not json")
    assert load_settings(project=project).max_depth == 2
    dated = _project(tmp_path, "persona = 'p'\n[budget]\nturns = 3\n# 1979-05-27\n")
    assert load_settings(project=dated).persona == "p"
    _project(tmp_path, "persona = 1979-05-27\n")
    with pytest.raises(SettingsError, match="persona"):  # a date, never kept, still checked
        load_settings(project=project)
    entries = json.loads((isolated_home / "cache" / "settings.json").read_text())["entries"]
    assert all("1979" not in entry[1] for entry in entries.values())
