"""Detecting external agent CLIs with fake binaries on PATH: one that prints a version, one that
exits 1, one that hangs; the cache holds for 30 seconds of a controllable clock."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from membrane.errors import InvalidRequest
from membrane.runtime.providers.clis import (
    CACHE_SECONDS,
    CliDetector,
    command_provider_for,
)


def fake(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    fake(folder, "claude", 'echo "2.1.0 (Claude Code)"')
    fake(folder, "codex", 'echo "codex broke" >&2; exit 1')
    fake(folder, "aider", "exec sleep 60")
    fake(folder, "gemini", 'echo $COUNTER_FILE >/dev/null; echo 0.9.1; date +%s%N >> "$0.calls"')
    return folder


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_each_cli_is_reported_installed_failed_hanging_or_absent(bin_dir: Path) -> None:
    detector = CliDetector(clock=Clock(), timeout=1.0)
    found = {cli.id: cli for cli in detector.detect({"PATH": str(bin_dir)})}
    assert found["claude"].status == "installed"
    assert found["claude"].version == "2.1.0 (Claude Code)"
    assert found["claude"].path == str(bin_dir / "claude")
    assert found["codex"].status == "failed"
    assert found["codex"].detail is not None and "exited 1: codex broke" in found["codex"].detail
    assert found["aider"].status == "timeout"
    for absent in ("cursor", "continue", "opencode"):
        assert found[absent].status == "not-installed" and found[absent].path is None
    assert list(found) == ["claude", "codex", "cursor", "aider", "continue", "opencode", "gemini"]
    assert found["claude"].to_dict()["preset"] is True
    assert found["cursor"].to_dict()["preset"] is False


def test_results_are_cached_for_thirty_seconds(bin_dir: Path) -> None:
    clock = Clock()
    detector = CliDetector(clock=clock, timeout=1.0)
    env = {"PATH": str(bin_dir)}
    calls = bin_dir / "gemini.calls"
    detector.detect(env)
    clock.now += CACHE_SECONDS - 1
    detector.detect(env)
    assert len(calls.read_text().splitlines()) == 1
    clock.now += 2
    detector.detect(env)
    assert len(calls.read_text().splitlines()) == 2


def test_presets_exist_for_one_command_headless_modes() -> None:
    provider = command_provider_for("claude")
    assert provider.command[:2] == ["claude", "-p"] or tuple(provider.command[:2]) == (
        "claude",
        "-p",
    )
    assert provider.name == "claude"
    with pytest.raises(InvalidRequest, match="no CommandProvider preset for 'cursor'"):
        command_provider_for("cursor")
