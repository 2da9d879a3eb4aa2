"""Hostile project files: each is reported (or pasted nothing) and skipped, never the catalog.

``opencode.json``'s ``{file:PATH}`` prompt reads only inside the project and never blocks; JSON
and YAML that nest without end are refused by a one-pass scan before any parser recurses.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from membrane import Catalog
from membrane.cli.app import main


def opencode(project: Path, agents: dict[str, object]) -> None:
    (project / "opencode.json").write_text(json.dumps({"agent": agents}), "utf-8")


def good_neighbour(project: Path) -> None:
    folder = project / ".membrane" / "agents"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "fine.md").write_text("---\nname: fine\ndescription: Fine.\n---\nWork.\n", "utf-8")


@pytest.mark.parametrize("where", ["absolute", "relative", "link"])
def test_a_prompt_file_outside_the_project_pastes_nothing_and_warns(
    tmp_path: Path, isolated_home: Path, where: str
) -> None:
    secret = tmp_path / "outside" / "id_rsa"
    secret.parent.mkdir()
    secret.write_text("PRIVATE KEY MATERIAL", "utf-8")
    project = tmp_path / "project"
    project.mkdir()
    if where == "link":
        (project / "innocent.txt").symlink_to(secret)
    ref = {"absolute": str(secret), "relative": "../outside/id_rsa", "link": "innocent.txt"}
    opencode(project, {"x": {"description": "X", "prompt": f"{{file:{ref[where]}}}"}})
    x = Catalog(project=project).get("x")
    assert x is not None and "PRIVATE" not in x.body and x.body == ""
    [warning] = [w for w in x.warnings if w.code == "prompt-file-outside-project"]
    assert warning.line == 1 and ref[where] in warning.message


def test_a_prompt_file_inside_the_project_is_pasted(tmp_path: Path, isolated_home: Path) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "x.txt").write_text("Review carefully.", "utf-8")
    opencode(tmp_path, {"x": {"description": "X", "prompt": "{file:prompts/x.txt}"}})
    x = Catalog(project=tmp_path).get("x")
    assert x is not None and x.body == "Review carefully."
    assert "prompt-file-outside-project" not in {w.code for w in x.warnings}


def test_a_prompt_file_that_is_a_fifo_is_an_error_without_blocking(
    tmp_path: Path, isolated_home: Path
) -> None:
    os.mkfifo(tmp_path / "pipe")
    opencode(tmp_path, {"x": {"description": "X", "prompt": "{file:pipe}"}})
    good_neighbour(tmp_path)
    catalog = Catalog(project=tmp_path)
    [error] = catalog.errors
    assert error.data["field"] == "prompt" and "not a regular file" in error.message
    assert catalog.get("fine") is not None


def test_json_nested_without_end_is_refused_and_the_catalog_stands(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    depth = 100_000
    text = '{"agent": {"x": {"description": "X", "extra": ' + "[" * depth + "]" * depth + "}}}"
    (tmp_path / "opencode.json").write_text(text, "utf-8")
    good_neighbour(tmp_path)
    catalog = Catalog(project=tmp_path)
    [error] = catalog.errors
    assert error.code == "definition-invalid" and "nests deeper than 64" in error.message
    assert catalog.get("fine") is not None
    assert main(["agents", "list", "--project", str(tmp_path), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert "fine" in json.dumps(listed)


@pytest.mark.parametrize(
    "value",
    ["[" * 5_000, "- " * 5_000 + "x", "{a: " * 5_000],
    ids=["flow-sequences", "block-entries", "flow-mappings"],
)
def test_yaml_nested_without_end_is_refused_with_its_line(
    tmp_path: Path, isolated_home: Path, value: str
) -> None:
    folder = tmp_path / ".membrane" / "agents"
    folder.mkdir(parents=True)
    (folder / "deep.md").write_text(
        f"---\nname: deep\ndescription: D\nextra:\n  {value}\n---\nBody\n", "utf-8"
    )
    good_neighbour(tmp_path)
    catalog = Catalog(project=tmp_path)
    [error] = catalog.errors
    assert "nests deeper than 64" in error.message
    assert (error.data["line"], error.data["field"]) == (5, "extra")
    assert catalog.get("fine") is not None


def test_ordinary_brackets_quotes_and_comments_are_not_nesting(
    tmp_path: Path, isolated_home: Path
) -> None:
    folder = tmp_path / ".membrane" / "agents"
    folder.mkdir(parents=True)
    brackets = "[" * 80
    (folder / "ok.md").write_text(
        "---\nname: ok\n"
        f"description: 'it''s {brackets} quoted'  # and {brackets} a comment\n"
        f'tools: [Read, Grep]  # "{brackets}\n'
        f'model: "scripted:{brackets}"\n---\nBody\n',
        "utf-8",
    )
    catalog = Catalog(project=tmp_path)
    assert catalog.errors == [] and catalog.get("ok").tools == ("Read", "Grep")  # type: ignore[union-attr]


def test_a_definitions_root_that_is_a_symlink_loop_is_reported_not_raised(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "one").symlink_to("two")
    (tmp_path / ".claude" / "two").symlink_to("one")
    (tmp_path / ".claude" / "agents").symlink_to("one")
    good_neighbour(tmp_path)
    assert main(["agents", "list", "--project", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "fine" in out
    assert f"{tmp_path / '.claude' / 'agents'}:1: definition-invalid" in out
    assert "cannot be listed" in out


def test_a_definitions_folder_without_permission_is_reported_and_the_rest_load(
    tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Root reads every folder whatever its mode, so the refusal is the kernel's answer, given
    # here for that one folder.
    locked = tmp_path / ".claude" / "agents"
    locked.mkdir(parents=True)
    real_scandir = os.scandir

    def scandir(path: str) -> object:
        if os.fspath(path) == str(locked):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    good_neighbour(tmp_path)
    catalog = Catalog(project=tmp_path)
    [error] = catalog.errors
    assert error.data["path"] == str(locked) and "Permission denied" in error.message
    assert catalog.get("fine") is not None
