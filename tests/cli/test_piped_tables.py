"""Piped tables are plain text: no box drawing, columns padded to their widest cell, and no
cell (a path) broken across lines, however long."""

from __future__ import annotations

from pathlib import Path

import pytest

from membrane.cli.app import main


@pytest.fixture
def deep_project(tmp_path: Path) -> Path:
    project = tmp_path.joinpath(*(["a-rather-long-folder-name-for-a-path"] * 6), "project")
    agents = project / ".membrane" / "agents"
    agents.mkdir(parents=True)
    (agents / "reviewer.md").write_text("---\nname: reviewer\ndescription: Reviews.\n---\nBody.\n")
    (agents / "writer-with-a-long-name.md").write_text(
        "---\nname: writer-with-a-long-name\ndescription: Writes.\n---\nBody.\n"
    )
    return project


def test_agents_list_piped_keeps_every_path_whole(
    deep_project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["agents", "list", "--project", str(deep_project)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "Agent definitions"
    columns = ["name", "root", "dialect", "path", "model", "starts", "shadows", "warnings"]
    assert lines[1].split() == columns
    for name in ("reviewer", "writer-with-a-long-name"):
        path = str(deep_project / ".membrane" / "agents" / f"{name}.md")
        assert len(path) > 250
        row = next(line for line in lines if line.startswith(name + " "))
        # No model anywhere (no default_model): it names none, so it cannot start here.
        assert row.split() == [name, "project", "membrane", path, "-", "no", "-", "0"]
    assert not set(out) & set("┏━┃│─┡┗╇")


def test_columns_line_up(deep_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agents", "list", "--project", str(deep_project)]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    rows = [line for line in lines if line.split()[:1] in (["name"], ["reviewer"], ["plan"])]
    starts = {line.index(line.split()[1], len(line.split()[0])) for line in rows}
    assert len(starts) == 1


def test_agents_show_piped_is_plain(deep_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agents", "show", "reviewer", "--project", str(deep_project)]) == 0
    out = capsys.readouterr().out
    title = out.splitlines()[0]
    assert title == f"reviewer (project: {deep_project / '.membrane/agents/reviewer.md'})"
    assert any(line.split()[:2] == ["description", "Reviews."] for line in out.splitlines())
    assert not set(out) & set("┏━┃│─┡┗╇")


def test_on_a_terminal_rich_draws_the_table_with_a_box(deep_project: Path) -> None:
    import os
    import pty
    import subprocess
    import sys

    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm"}
    done = subprocess.run(
        [sys.executable, "-m", "membrane", "agents", "list", "--project", str(deep_project)],
        stdout=follower, stderr=subprocess.PIPE, env=env, timeout=120, check=False,
    )  # fmt: skip
    os.close(follower)
    drawn = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal is closed once everything is read
            break
        if not chunk:
            break
        drawn += chunk
    os.close(leader)
    assert done.returncode == 0, done.stderr
    text = drawn.decode("utf-8", "replace")
    assert "reviewer" in text and set(text) & set("┏━┃│")
