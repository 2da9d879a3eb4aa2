"""Roots, precedence, shadowing, broken files and reload."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from agents_support import write_agent

from membrane import UNSET, Catalog
from membrane.agents import scan as scan_module
from membrane.errors import DefinitionError


def test_builtins_are_present_read_only_and_never_inherit(project: Path) -> None:
    catalog = Catalog(project=project)
    names = {"general-purpose", "explorer", "code-reviewer", "plan"}
    assert names <= set(catalog.definitions())
    for name in names:
        definition = catalog.definitions()[name]
        assert definition.builtin and definition.root == "builtin"
        assert definition.tools == ("Read", "Glob", "Grep")
        # Read-only means no extension tools either: a loaded extension may change state.
        assert definition.extensions is False
        assert not definition.inherits_tools
        assert definition.body and isinstance(definition.description, str)
        assert definition.warnings == ()


def test_a_project_file_replaces_the_global_one_whole(
    project: Path, global_agents: Path, project_agents: Path
) -> None:
    write_agent(
        global_agents,
        "reviewer.md",
        "name: reviewer\nmodel: global-model\ntools: Bash\nmax_turns: 9",
        body="Global body.",
    )
    write_agent(
        project_agents, "project.md", "name: reviewer\nthinking: high", body="Project body."
    )
    catalog = Catalog(project=project)
    winner = catalog.get("reviewer")
    assert winner is not None
    assert (winner.root, winner.thinking, winner.body) == ("project", "high", "Project body.")
    # Nothing is merged from the loser.
    assert winner.model is UNSET and winner.tools is UNSET and winner.max_turns is UNSET
    [loser] = catalog.shadowed["reviewer"]
    assert (loser.root, loser.model) == ("global", "global-model")


def test_workspace_sits_between_global_and_project(
    tmp_path: Path, project: Path, global_agents: Path, project_agents: Path
) -> None:
    workspace = tmp_path / "workspace"
    write_agent(global_agents, "a.md", "name: a\nmodel: g")
    write_agent(workspace / ".agents" / "agents", "a.md", "name: a\nmodel: w")
    write_agent(workspace / ".agents" / "agents", "b.md", "name: b\nmodel: w")
    write_agent(project_agents, "b.md", "name: b\nmodel: p")
    catalog = Catalog(project=project, workspace=workspace)
    assert catalog.get("a").model == "w"  # type: ignore[union-attr]
    assert catalog.get("b").model == "p"  # type: ignore[union-attr]
    assert [d.root for d in catalog.shadowed["b"]] == ["workspace"]
    assert [d.root for d in catalog.shadowed["a"]] == ["global"]


def test_a_custom_file_replaces_a_builtin(project: Path, project_agents: Path) -> None:
    write_agent(project_agents, "sub/explorer.md", "name: explorer\ntools: inherit", body="Mine.")
    catalog = Catalog(project=project)
    explorer = catalog.get("explorer")
    assert explorer is not None and explorer.root == "project" and explorer.inherits_tools
    assert [d.root for d in catalog.shadowed["explorer"]] == ["builtin"]


def test_the_key_is_the_name_not_the_file_name(project: Path, project_agents: Path) -> None:
    write_agent(project_agents, "whatever.md", "name: security-auditor")
    write_agent(project_agents, "nameless.md", "description: no name here")
    catalog = Catalog(project=project)
    assert catalog.get("security-auditor") is not None
    assert catalog.get("whatever") is None
    assert catalog.get("nameless") is not None


def test_a_broken_file_is_reported_and_skipped_without_breaking_the_catalog(
    project: Path, project_agents: Path
) -> None:
    write_agent(project_agents, "good.md", "name: good")
    broken = write_agent(project_agents, "broken.md", "name: broken\ntools: [Read")
    catalog = Catalog(project=project)
    assert catalog.get("good") is not None and catalog.get("broken") is None
    [error] = catalog.errors
    assert error.data["path"] == str(broken) and error.data["field"] == "tools"


def test_duplicate_names_in_one_root_are_decided_by_path_order_and_warned(
    project: Path, project_agents: Path
) -> None:
    write_agent(project_agents, "b.md", "name: twin\nmodel: from-b")
    write_agent(project_agents, "a.md", "name: twin\nmodel: from-a")
    catalog = Catalog(project=project)
    assert catalog.get("twin").model == "from-a"  # type: ignore[union-attr]
    assert [d.model for d in catalog.shadowed["twin"]] == ["from-b"]
    [warning] = catalog.warnings
    assert warning.code == "duplicate-name" and warning.path.endswith("b.md")


def test_reload_with_nothing_changed_reports_no_change(project: Path, project_agents: Path) -> None:
    write_agent(project_agents, "a.md", "name: a")
    catalog = Catalog(project=project)
    before = catalog.definitions()
    for _ in range(3):
        catalog.reload()
    assert catalog.reload() is False
    assert catalog.definitions() is before


def test_reload_sees_a_changed_file_at_once_even_with_the_same_size(
    project: Path, project_agents: Path
) -> None:
    path = write_agent(project_agents, "a.md", "name: a\nmodel: aaaa")
    catalog = Catalog(project=project)
    path.write_text(path.read_text().replace("aaaa", "bbbb"))
    assert catalog.reload() is True
    assert catalog.get("a").model == "bbbb"  # type: ignore[union-attr]


def test_reload_sees_a_change_that_keeps_the_old_timestamp(
    project: Path, project_agents: Path
) -> None:
    path = write_agent(project_agents, "a.md", "name: a\nmodel: aaaa")
    stat = path.stat()
    catalog = Catalog(project=project)
    path.write_text(path.read_text().replace("aaaa", "bbbb"))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    catalog.reload()
    assert catalog.get("a").model == "bbbb"  # type: ignore[union-attr]


def test_reload_sees_added_and_removed_files_including_in_new_subdirectories(
    project: Path, project_agents: Path
) -> None:
    first = write_agent(project_agents, "a.md", "name: a")
    catalog = Catalog(project=project)
    write_agent(project_agents, "b.md", "name: b")
    catalog.reload()
    assert catalog.get("b") is not None
    write_agent(project_agents, "deep/er/c.md", "name: c")
    catalog.reload()
    assert catalog.get("c") is not None
    first.unlink()
    catalog.reload()
    assert catalog.get("a") is None and catalog.get("b") is not None


def test_a_root_created_after_the_catalog_is_picked_up(tmp_path: Path, isolated_home: Path) -> None:
    project = tmp_path / "later"
    catalog = Catalog(project=project)
    assert catalog.get("late") is None
    write_agent(project / ".membrane" / "agents", "late.md", "name: late")
    catalog.reload()
    assert catalog.get("late") is not None


def test_a_file_broken_later_is_reported_and_the_previous_version_is_not_kept(
    project: Path, project_agents: Path
) -> None:
    path = write_agent(project_agents, "a.md", "name: a")
    catalog = Catalog(project=project)
    path.write_text("---\nname: a\ntools: [\n---\n")
    catalog.reload()
    assert catalog.get("a") is None
    assert len(catalog.errors) == 1


@pytest.mark.parametrize(
    "frontmatter",
    [
        "name: bad\ncreated: 2023-02-29",
        "name: bad\nx: !!int abc",
        "name: bad\nx: !!float zz",
        "name: bad\nx: " + "[" * 3000 + "]" * 3000,
    ],
)
def test_one_unreadable_value_costs_only_its_own_file(
    project: Path, project_agents: Path, frontmatter: str
) -> None:
    write_agent(project_agents, "good.md", "name: good")
    bad = write_agent(project_agents, "bad.md", frontmatter)
    catalog = Catalog(project=project)
    assert catalog.get("good") is not None
    [error] = catalog.errors
    assert (error.data["path"], error.data["line"]) == (str(bad), 3)
    assert catalog.dispatch("good").definition.name == "good"


def test_anything_parsing_raises_becomes_an_error_for_that_file_only(
    project: Path, project_agents: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_agent(project_agents, "good.md", "name: good")
    bad = write_agent(project_agents, "bad.md", "name: bad")
    real = scan_module.decode_definition

    def decode(data: bytes, *, path: str, root: str, **options):  # type: ignore[no-untyped-def]
        if path == str(bad):
            raise RuntimeError("unexpected")
        return real(data, path=path, root=root, **options)

    monkeypatch.setattr(scan_module, "decode_definition", decode)
    catalog = Catalog(project=project)
    assert catalog.get("good") is not None and catalog.get("bad") is None
    [error] = catalog.errors
    assert isinstance(error, DefinitionError)
    assert error.data["path"] == str(bad)
    assert "RuntimeError: unexpected" in error.message
    write_agent(project_agents, "other.md", "name: other")
    assert catalog.reload() is True
    assert catalog.get("other") is not None


def test_a_symlink_loop_is_reported_and_hides_no_other_definition(
    project: Path, project_agents: Path
) -> None:
    write_agent(project_agents, "good.md", "name: good")
    write_agent(project_agents, "deep/other.md", "name: other")
    loop = project_agents / "loop.md"
    loop.symlink_to(loop)
    (project_agents / "deep" / "ring.md").symlink_to(project_agents / "deep" / "ring.md")
    catalog = Catalog(project=project)
    assert catalog.get("good") is not None and catalog.get("other") is not None
    paths = sorted(str(error.data["path"]) for error in catalog.errors)
    assert paths == sorted([str(loop), str(project_agents / "deep" / "ring.md")])
    assert all("symbolic link" in error.message for error in catalog.errors)


def test_a_symlink_loop_made_later_is_reported_on_reload(
    project: Path, project_agents: Path
) -> None:
    write_agent(project_agents, "good.md", "name: good")
    catalog = Catalog(project=project)
    loop = project_agents / "later.md"
    loop.symlink_to(loop)
    catalog.reload()
    assert catalog.get("good") is not None
    [error] = catalog.errors
    assert error.data["path"] == str(loop)
