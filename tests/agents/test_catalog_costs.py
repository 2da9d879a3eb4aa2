"""What a catalog reload costs, counted: files stat'ed and parsed with nothing changed and with
k changed files, through the directory watcher and through the stat-walk fallback."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

import membrane.agents.catalog as catalog_module
import membrane.agents.scan as scan_module
from membrane.agents import Catalog
from membrane.agents.watch import DirectoryWatcher
from membrane.config.values import Settings

FILES = 120


def write(path: Path, name: str, description: str = "Reviews code.") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: {description}\n---\nBody.\n")
    past = os.stat(path).st_mtime - 60
    os.utime(path, (past, past))


@pytest.fixture
def agents(tmp_path: Path) -> Path:
    folder = tmp_path / "project" / ".membrane" / "agents"
    for i in range(FILES):
        write(folder / f"group-{i % 6}" / f"a{i}.md", f"a{i}")
    past = os.stat(folder).st_mtime - 60
    for sub in [*folder.iterdir(), folder]:
        os.utime(sub, (past, past))
    return folder


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    seen: Counter[str] = Counter()
    stat, decode = os.stat, scan_module.decode_definition

    def counting_stat(path: object, *args: object, **kwargs: object) -> os.stat_result:
        seen["stat"] += 1
        return stat(path, *args, **kwargs)  # type: ignore[arg-type]

    def counting_decode(data: bytes, *, path: str, root: str, **options: object) -> object:
        seen["parse"] += 1
        return decode(data, path=path, root=root, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "stat", counting_stat)
    monkeypatch.setattr(scan_module, "decode_definition", counting_decode)
    yield seen


def open_catalog(agents: Path) -> Catalog:
    project = agents.parent.parent
    return Catalog(project=project, home=project.parent / "home", settings=Settings())


needs_watcher = pytest.mark.skipif(
    DirectoryWatcher.create() is None, reason="no directory watcher on this platform"
)


@pytest.mark.costs
@needs_watcher
def test_an_unchanged_reload_costs_no_stat_per_file(agents: Path, counts: Counter[str]) -> None:
    catalog = open_catalog(agents)
    assert counts["parse"] == FILES
    assert not catalog.reload()  # arms the watcher; this one walks once
    counts.clear()
    for _ in range(5):
        assert not catalog.reload()
    # Nothing is stat'ed, not even the absent roots (their nearest folders are watched).
    assert counts["parse"] == 0
    assert counts["stat"] == 0


@pytest.mark.costs
@needs_watcher
def test_an_unchanged_reload_looks_at_no_absent_root(
    agents: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog = open_catalog(agents)
    absent = [root for root in catalog.roots if not os.path.exists(root.directory)]
    assert len(absent) >= 5  # the other products' roots, home's and the workspace's
    catalog.reload()  # arms the watcher
    catalog.reload()  # checks the absent roots once more, now that their folders are watched
    seen: Counter[str] = Counter()
    # Nor a read of the watcher: a read that finds nothing raises, a look first does not.
    for name in ("stat", "lstat", "access", "scandir", "read"):
        real = getattr(os, name)

        def counting(
            *args: object, _real: object = real, _name: str = name, **kw: object
        ) -> object:
            seen[_name] += 1
            return _real(*args, **kw)  # type: ignore[operator]

        monkeypatch.setattr(os, name, counting)
    for _ in range(5):
        assert not catalog.reload()
    assert seen == Counter()


@needs_watcher
@pytest.mark.parametrize("how", ["in steps", "at once", "moved in", "config file", "folder again"])
def test_an_absent_root_that_appears_is_seen_at_the_next_reload(tmp_path: Path, how: str) -> None:
    project = tmp_path / "project"
    (project / ".membrane" / "agents").mkdir(parents=True)
    catalog = Catalog(project=project, home=tmp_path / "home", settings=Settings())
    for _ in range(3):  # arm the watcher and settle
        assert not catalog.reload()
    definition = "---\nname: late\ndescription: Came later.\n---\nBody.\n"
    if how == "in steps":
        # Each folder on the way is new: the watch moves down with them.
        (project / ".claude").mkdir()
        assert not catalog.reload()
        (project / ".claude" / "agents").mkdir()
        assert not catalog.reload()
        (project / ".claude" / "agents" / "late.md").write_text(definition)
    elif how == "at once":
        (project / ".pi" / "agents").mkdir(parents=True)
        (project / ".pi" / "agents" / "late.md").write_text(definition)
    elif how == "moved in":
        (tmp_path / "elsewhere" / "agents").mkdir(parents=True)
        (tmp_path / "elsewhere" / "agents" / "late.md").write_text(definition)
        os.rename(tmp_path / "elsewhere", project / ".opencode")
    elif how == "config file":
        (project / "opencode.json").write_text(
            '{"agent": {"late": {"description": "Came later.", "prompt": "Body."}}}'
        )
    else:
        # The folder an absent root is watched through goes and comes back.
        (project / ".claude").mkdir()
        assert not catalog.reload()
        (project / ".claude").rmdir()
        assert not catalog.reload()
        (project / ".claude" / "agents").mkdir(parents=True)
        (project / ".claude" / "agents" / "late.md").write_text(definition)
    assert catalog.reload()
    assert catalog.definitions()["late"].description == "Came later."
    assert not catalog.reload()


@pytest.mark.costs
@needs_watcher
def test_k_changed_files_cost_k_reads_and_parses(agents: Path, counts: Counter[str]) -> None:
    catalog = open_catalog(agents)
    catalog.reload()
    counts.clear()
    for i in (1, 2, 3):  # edited in place
        (agents / f"group-{i % 6}" / f"a{i}.md").write_text(
            f"---\nname: a{i}\ndescription: Edited {i}.\n---\nBody.\n"
        )
    write(agents / "group-0" / "new.md", "fresh")
    (agents / "group-4" / "a4.md").unlink()
    saved = agents / "group-5" / "a5.md.tmp"  # an editor's atomic save
    saved.write_text("---\nname: a5\ndescription: Saved atomically.\n---\nBody.\n")
    os.replace(saved, agents / "group-5" / "a5.md")
    assert catalog.reload()
    assert counts["parse"] == 5  # 3 edits, 1 new file, 1 replaced
    # Each root absent from this project (the dialect roots) costs one stat per reload.
    assert counts["stat"] <= 30 + len(catalog.roots)
    found = catalog.definitions()
    assert [found[f"a{i}"].description for i in (1, 2, 3)] == [
        "Edited 1.",
        "Edited 2.",
        "Edited 3.",
    ]
    assert found["a5"].description == "Saved atomically."
    assert "fresh" in found and "a4" not in found
    assert len(found) == FILES + len(catalog_module.builtin_definitions())


@needs_watcher
def test_new_and_removed_folders_are_followed(agents: Path) -> None:
    catalog = open_catalog(agents)
    catalog.reload()
    write(agents / "deep" / "er" / "d1.md", "d1")
    assert catalog.reload()
    assert "d1" in catalog.definitions()
    # The new folder is watched too: a later edit inside it is seen.
    (agents / "deep" / "er" / "d1.md").write_text("---\nname: d1\ndescription: Later.\n---\nB.\n")
    assert catalog.reload()
    assert catalog.definitions()["d1"].description == "Later."
    for file in (agents / "group-3").iterdir():
        file.unlink()
    (agents / "group-3").rmdir()
    assert catalog.reload()
    assert not any(f"a{i}" in catalog.definitions() for i in range(3, FILES, 6))
    assert not catalog.reload()


@pytest.mark.parametrize("watcher", [True, False])
def test_duplicates_shadowing_and_errors_follow_each_change(
    agents: Path, monkeypatch: pytest.MonkeyPatch, watcher: bool
) -> None:
    if not watcher:
        monkeypatch.setattr(DirectoryWatcher, "create", classmethod(lambda cls: None))
    home_agents = agents.parent.parent.parent / "home" / "agents"
    write(home_agents / "a7.md", "a7", "Global one.")
    catalog = open_catalog(agents)
    catalog.reload()
    assert [d.root for d in catalog.shadowed["a7"]] == ["global"]
    # A second file with the same name, later in path order: a duplicate, warned about.
    write(agents / "zz" / "again.md", "a7", "Duplicate.")
    (agents / "group-0" / "a0.md").write_text("---\nname: [broken\n---\n")
    assert catalog.reload()
    assert catalog.definitions()["a7"].description == "Reviews code."
    assert [d.description for d in catalog.shadowed["a7"]] == ["Duplicate.", "Global one."]
    assert [w.code for w in catalog.warnings] == ["duplicate-name"]
    assert [Path(e.path).name for e in catalog.errors] == ["a0.md"]
    assert "a0" not in catalog.definitions()
    # The project's file goes: the duplicate wins, the global one is shadowed.
    (agents / "group-1" / "a7.md").unlink()
    (agents / "group-0" / "a0.md").write_text("---\nname: a0\ndescription: Fixed.\n---\nB.\n")
    assert catalog.reload()
    assert catalog.definitions()["a7"].description == "Duplicate."
    assert [d.description for d in catalog.shadowed["a7"]] == ["Global one."]
    assert catalog.warnings == [] and catalog.errors == []
    assert catalog.definitions()["a0"].description == "Fixed."
    assert list(catalog.definitions()) == sorted(catalog.definitions())


@pytest.mark.costs
def test_a_cold_load_parses_only_files_the_cache_has_not_seen(
    agents: Path, counts: Counter[str], tmp_path: Path
) -> None:
    cache = tmp_path / "state" / "definitions.json"
    project = agents.parent.parent
    first = Catalog(project=project, home=tmp_path / "home", settings=Settings(), cache=cache)
    assert counts["parse"] == FILES and cache.is_file()
    counts.clear()
    # A new process: nothing parsed, the same definitions (warnings and lines included).
    second = Catalog(project=project, home=tmp_path / "home", settings=Settings(), cache=cache)
    assert counts["parse"] == 0
    assert second.definitions() == first.definitions()
    (agents / "group-2" / "a2.md").write_text("---\nname: a2\ndescription: Changed.\n---\nB.\n")
    counts.clear()
    third = Catalog(project=project, home=tmp_path / "home", settings=Settings(), cache=cache)
    assert counts["parse"] == 1
    assert third.definitions()["a2"].description == "Changed."


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The definition files a catalog reads."""
    seen: list[str] = []
    read = scan_module.read_file_bytes

    def counting_read(path: str) -> bytes:
        seen.append(path)
        return read(path)

    monkeypatch.setattr(scan_module, "read_file_bytes", counting_read)
    return seen


def cold_catalog(agents: Path, cache: Path) -> Catalog:
    """The catalog a new process builds over ``agents``'s project with the definition
    ``cache``."""
    project = agents.parent.parent
    return Catalog(project=project, home=project.parent / "home", settings=Settings(), cache=cache)


def test_a_cold_load_reads_no_file_whose_stat_the_cache_recorded(
    agents: Path,
    counts: Counter[str],
    reads: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every file counts as changed long before it is read (the fixture's are a moment old).
    monkeypatch.setattr(scan_module, "_SETTLED_NS", 0)
    cache = tmp_path / "state" / "definitions.json"
    first = cold_catalog(agents, cache)
    assert len(reads) == FILES
    reads.clear()
    counts.clear()
    # A new process: nothing read, nothing parsed, the same definitions.
    second = cold_catalog(agents, cache)
    assert reads == [] and counts["parse"] == 0
    assert second.definitions() == first.definitions()
    # Another file put in a2.md's place, of the same size and with the same times: another
    # inode (and change time), so it is read and parsed.
    a2 = agents / "group-2" / "a2.md"
    before = os.stat(a2)
    twin = a2.with_name("twin.tmp")
    twin.write_text(a2.read_text().replace("Reviews code.", "Reviews docs."))
    os.utime(twin, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(twin, a2)
    assert os.stat(a2).st_size == before.st_size
    reads.clear()
    counts.clear()
    third = cold_catalog(agents, cache)
    assert reads == [str(a2)] and counts["parse"] == 1
    assert third.definitions()["a2"].description == "Reviews docs."


@pytest.mark.costs
def test_a_file_read_too_soon_after_its_change_is_read_by_the_next_cold_load(
    agents: Path,
    counts: Counter[str],
    reads: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cache = tmp_path / "state" / "definitions.json"
    # Read too soon after their change: a change in the same clock tick would leave the same
    # stat, so no signature is kept for them.
    monkeypatch.setattr(scan_module, "_SETTLED_NS", 10**18)
    cold_catalog(agents, cache)
    monkeypatch.setattr(scan_module, "_SETTLED_NS", 0)
    reads.clear()
    counts.clear()
    cold_catalog(agents, cache)
    assert len(reads) == FILES and counts["parse"] == 0  # read and hashed, found by digest
    reads.clear()
    cold_catalog(agents, cache)
    assert reads == []  # the load before kept their signatures


def test_a_broken_or_foreign_cache_is_ignored_and_rewritten(
    agents: Path, counts: Counter[str], tmp_path: Path
) -> None:
    cache = tmp_path / "definitions.json"
    project = agents.parent.parent
    for content in ("not json", '{"fingerprint": "other", "entries": {}}', "[]"):
        cache.write_text(content)
        counts.clear()
        catalog = Catalog(project=project, home=tmp_path / "home", settings=Settings(), cache=cache)
        assert counts["parse"] == FILES
        assert len(catalog.definitions()) >= FILES
    counts.clear()
    Catalog(project=project, home=tmp_path / "home", settings=Settings(), cache=cache)
    assert counts["parse"] == 0


def test_a_value_json_cannot_carry_keeps_its_file_uncached(
    agents: Path, counts: Counter[str], tmp_path: Path
) -> None:
    # An unknown key holding YAML's infinity, which JSON cannot carry.
    (agents / "group-0" / "a0.md").write_text(
        "---\nname: a0\ndescription: Odd.\nweight: .inf\n---\nB.\n"
    )
    cache = tmp_path / "definitions.json"
    project = agents.parent.parent
    first = Catalog(project=project, home=tmp_path / "home", settings=Settings(), cache=cache)
    counts.clear()
    second = Catalog(project=project, home=tmp_path / "home", settings=Settings(), cache=cache)
    assert counts["parse"] == 1  # only that file
    assert second.definitions()["a0"] == first.definitions()["a0"]


@pytest.mark.costs
def test_a_cold_load_from_the_cache_needs_no_yaml_parser(agents: Path, tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    project = agents.parent.parent
    probe = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from membrane.agents.catalog import Catalog\n"
        "from membrane.config.values import Settings\n"
        f"c = Catalog(project=Path({str(project)!r}), home=Path({str(tmp_path / 'home')!r}),"
        f" settings=Settings(), cache=Path({str(tmp_path / 'state' / 'definitions.json')!r}))\n"
        "print(json.dumps([len(c.definitions()), 'ruamel' in sys.modules]))\n"
    )

    def cold() -> list[object]:
        done = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
        )
        found: list[object] = json.loads(done.stdout)
        return found

    builtins = len(catalog_module.builtin_definitions())
    assert cold() == [FILES + builtins, True]  # the first process parses, and fills the cache
    assert cold() == [FILES + builtins, False]  # the next one parses nothing, builtins included


def _catalog_of(folder: Path, count: int) -> tuple[Catalog, Path]:
    """A project of ``count`` definitions, one in ten broken and one in ten duplicated within
    the root, so that errors and warnings grow with the catalog too."""
    agents = folder / "project" / ".membrane" / "agents"
    for i in range(count):
        write(agents / f"group-{i % 6}" / f"a{i}.md", f"a{i}")
        if i % 10 == 0:
            write(agents / "zz" / f"again{i}.md", f"a{i}", "Duplicate.")
        if i % 10 == 5:
            (agents / "broken" / f"b{i}.md").parent.mkdir(parents=True, exist_ok=True)
            (agents / "broken" / f"b{i}.md").write_text("---\nname: [broken\n---\n")
    catalog = Catalog(project=folder / "project", home=folder / "home", settings=Settings())
    catalog.reload()  # arms the watcher
    assert catalog.errors and catalog.warnings
    return catalog, agents


def _reload_counting_calls(catalog: Catalog) -> int:
    """Python and C function calls made by one ``reload()``."""
    import sys

    calls = 0

    def profile(frame: object, event: str, arg: object) -> None:
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    sys.setprofile(profile)
    try:
        assert catalog.reload()
    finally:
        sys.setprofile(None)
    return calls


@pytest.mark.costs
@needs_watcher
def test_a_reload_after_k_changes_does_the_same_work_at_any_catalog_size(
    tmp_path: Path, counts: Counter[str]
) -> None:
    def after_changes(count: int) -> tuple[int, int]:
        catalog, agents = _catalog_of(tmp_path / str(count), count)
        catalog.definitions()  # a snapshot handed out, as every start takes one
        counts.clear()
        (agents / "group-1" / "a1.md").write_text("---\nname: a1\ndescription: Edited.\n---\nB.\n")
        (agents / "group-2" / "a2.md").write_text("---\nname: renamed\ndescription: R.\n---\nB.\n")
        (agents / "group-3" / "a3.md").unlink()
        (agents / "group-4" / "new.md").write_text("---\nname: fresh\ndescription: N.\n---\nB.\n")
        (agents / "zz" / "again0.md").unlink()  # a duplicate goes
        calls = _reload_counting_calls(catalog)
        found = catalog.definitions()
        assert found["a1"].description == "Edited." and "a3" not in found and "a2" not in found
        assert list(found) == sorted(found) and {"renamed", "fresh"} <= found.keys()
        assert len(catalog.warnings) == len(range(10, count, 10))
        return counts["parse"], calls

    small, large = after_changes(30), after_changes(300)
    assert small[0] == large[0] == 3  # the edited, the renamed and the new file
    # Every call the reload makes is for a changed file or a name it defined: none per
    # definition, error or warning of the catalog, which is ten times larger. One call per
    # definition would add 270; the watcher's reads may split its events and the collector may
    # run, which moves the count by a handful, so the bound is a third of that.
    assert abs(small[1] - large[1]) < 90, (small[1], large[1])


def test_definitions_handed_out_stay_as_they_were(agents: Path) -> None:
    catalog = open_catalog(agents)
    before = catalog.definitions()
    names = list(before)
    (agents / "group-1" / "a1.md").write_text("---\nname: a1\ndescription: Edited.\n---\nB.\n")
    (agents / "group-2" / "a2.md").unlink()
    write(agents / "group-0" / "a0b.md", "a0b")
    assert catalog.reload()
    assert list(before) == names and before["a1"].description == "Reviews code."
    assert "a2" in before and "a0b" not in before and len(before) == len(names)
    after = catalog.definitions()
    assert after["a1"].description == "Edited." and "a2" not in after and "a0b" in after
    assert list(after) == sorted(after) and after.get("a2") is None


def test_permission_rules_and_budgets_come_back_from_the_cache_unparsed(
    agents: Path, counts: Counter[str], tmp_path: Path
) -> None:
    (agents / "group-0" / "a0.md").write_text(
        "---\nname: a0\ndescription: Rules.\ntools: Read, Bash(git log:*)\n"
        "budget: tokens=1000,turns=5\n---\nB.\n"
    )
    cache = tmp_path / "definitions.json"
    project = agents.parent.parent
    first = Catalog(project=project, home=tmp_path / "home", settings=Settings(), cache=cache)
    assert first.definitions()["a0"].rules  # the Bash(git log:*) rule
    counts.clear()
    second = Catalog(project=project, home=tmp_path / "home", settings=Settings(), cache=cache)
    assert counts["parse"] == 0
    assert second.definitions() == first.definitions()
    assert second.definitions()["a0"].budget == first.definitions()["a0"].budget
