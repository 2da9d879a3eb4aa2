"""``membrane doctor`` as a subprocess: sections, detected CLIs and skill roots, and a non-zero
exit with what to do when a sandbox the settings name is missing."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest


def doctor(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "membrane", "doctor", "--project", str(project), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def setup(tmp_path: Path, isolated_home: Path) -> tuple[Path, dict[str, str]]:
    project = tmp_path / "project"
    skill = project / ".claude" / "skills" / "pdf"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: pdf\ndescription: PDFs.\n---\nBody.\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "claude"
    fake.write_text('#!/bin/sh\necho "9.9.9 (Claude Code)"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    env = {
        **os.environ,
        "MEMBRANE_HOME": str(isolated_home),
        "HOME": str(tmp_path / "person"),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
    }
    env.pop("MEMBRANE_TOKEN", None)
    return project, env


def test_doctor_reports_runtime_role_project_sandbox_clis_and_skills(
    tmp_path: Path, isolated_home: Path
) -> None:
    project, env = setup(tmp_path, isolated_home)
    done = doctor(project, env, "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["runtime"]["socket"] == str(isolated_home / "sock" / "membrane.sock")
    assert doc["runtime"]["answers"] is False
    assert doc["caller"]["role"] == "external"
    assert doc["project"]["state"].startswith(str(isolated_home / "projects"))
    assert doc["sandbox"]["in_force"] == doc["sandbox"]["machine"]["strongest"]
    claude = next(c for c in doc["external_clis"] if c["id"] == "claude")
    assert (claude["status"], claude["version"]) == ("installed", "9.9.9 (Claude Code)")
    assert "pdf" in doc["skills"]["skills"]
    assert doc["skills"]["roots"][0] == str((project / ".claude" / "skills").resolve())
    assert doc["problems"] == []
    text = doctor(project, env)
    assert text.returncode == 0
    assert "agent CLIs:  claude 9.9.9 (Claude Code)" in text.stdout


def test_doctor_exits_non_zero_and_says_what_to_do_when_a_named_sandbox_is_missing(
    tmp_path: Path, isolated_home: Path
) -> None:
    project, env = setup(tmp_path, isolated_home)
    (project / ".membrane").mkdir()
    (project / ".membrane" / "config.toml").write_text('sandbox = "bubblewrap"\n')
    env["PATH"] = str(tmp_path / "bin") + os.pathsep + os.path.dirname(sys.executable)
    done = doctor(project, env)
    assert done.returncode == 1
    assert "sandbox-unavailable" in done.stdout
    assert "fix:       install bubblewrap" in done.stdout


def test_doctor_says_when_it_runs_as_root_and_what_that_changes(
    tmp_path: Path, isolated_home: Path
) -> None:
    project, env = setup(tmp_path, isolated_home)
    doc = json.loads(doctor(project, env, "--json").stdout)
    text = doctor(project, env).stdout
    assert doc["sandbox"]["machine"]["root"] is (os.geteuid() == 0)
    if os.geteuid() == 0:
        assert "without any capability" in doc["sandbox"]["as_root"]
        assert "as root:" in text
    else:
        assert doc["sandbox"]["as_root"] is None
        assert "as root:" not in text


def test_doctor_says_what_the_sandbox_in_force_confines(
    tmp_path: Path, isolated_home: Path
) -> None:
    from membrane.sandbox import machine_support

    if not machine_support().landlock_abi:
        pytest.skip(machine_support().landlock_reason)
    project, env = setup(tmp_path, isolated_home)
    (project / ".membrane").mkdir()
    (project / ".membrane" / "config.toml").write_text('sandbox = "landlock"\n')
    doc = json.loads(doctor(project, env, "--json").stdout)
    assert doc["sandbox"]["in_force"] == "landlock"
    assert "no Unix socket of its own" in doc["sandbox"]["confines"]
    assert "confines:    writes to the checkout" in doctor(project, env).stdout
    if os.geteuid() == 0:
        landlock_userns = doc["sandbox"]["machine"]["landlock_userns"]
        said = "Landlock likewise" if landlock_userns else "a command stays uid 0"
        assert said in doc["sandbox"]["as_root"]
