"""Worktree isolation with real git in temporary repositories."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from membrane.errors import WorktreeUnavailable
from membrane.runtime.worktree import Worktree, WorktreeManager

CRASH_CHILD = Path(__file__).with_name("worktree_crash_child.py")
SRC_DIR = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture(autouse=True)
def no_user_git_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """Git sees no global or system config, so Membrane must work without a user identity."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for var in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.delenv(var, raising=False)


def git(cwd: Path, *args: str) -> str:
    identity = ["-c", "user.name=Tester", "-c", "user.email=tester@example.com"]
    done = subprocess.run(
        ["git", *identity, "-C", str(cwd), *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    git(project, "init", "--quiet", "--initial-branch=main")
    (project / "README.md").write_text("original\n")
    (project / ".gitignore").write_text("*.log\n")
    git(project, "add", "--all")
    git(project, "commit", "--quiet", "-m", "initial")
    return project


def branches(project: Path) -> list[str]:
    return git(project, "for-each-ref", "--format=%(refname:short)", "refs/heads/").split()


def registered_worktrees(project: Path) -> int:
    return git(project, "worktree", "list", "--porcelain").count("worktree ")


def assert_gone(manager: WorktreeManager, worktree: Worktree) -> None:
    assert not worktree.path.exists()
    assert not worktree.path.with_name(worktree.path.name + ".json").exists()
    assert registered_worktrees(manager.root.parents[1]) == 1


def test_committed_work_arrives_as_a_branch(repo: Path) -> None:
    manager = WorktreeManager(repo)
    worktree = manager.create("run-1")
    (worktree.path / "feature.txt").write_text("done\n")
    git(worktree.path, "add", "feature.txt")
    git(worktree.path, "commit", "--quiet", "-m", "child work")
    child_commit = git(worktree.path, "rev-parse", "HEAD")

    outcome = manager.finish(worktree, success=True)

    assert outcome.to_dict() == {
        "branch": "membrane/agent-run-1",
        "commit": child_commit,
        "has_changes": True,
    }
    assert git(repo, "rev-parse", "membrane/agent-run-1") == child_commit
    assert git(repo, "show", "membrane/agent-run-1:feature.txt") == "done"
    assert_gone(manager, worktree)


def test_uncommitted_work_is_committed_on_cleanup(repo: Path) -> None:
    manager = WorktreeManager(repo)
    worktree = manager.create("run-2")
    (worktree.path / "README.md").write_text("changed by the child\n")
    (worktree.path / "new").mkdir()
    (worktree.path / "new" / "untracked.txt").write_text("fresh\n")
    (worktree.path / "debug.log").write_text("ignored\n")

    outcome = manager.finish(worktree, success=True)

    assert outcome.has_changes and outcome.error is None
    assert outcome.branch == "membrane/agent-run-2"
    assert git(repo, "show", f"{outcome.branch}:README.md") == "changed by the child"
    assert git(repo, "show", f"{outcome.branch}:new/untracked.txt") == "fresh"
    files = git(repo, "ls-tree", "-r", "--name-only", outcome.branch).split()
    assert "debug.log" not in files
    assert git(repo, "log", "-1", "--format=%an <%ae>|%cn", outcome.branch) == (
        "Membrane <membrane@localhost>|Membrane"
    )
    assert git(repo, "rev-parse", f"{outcome.branch}^") == worktree.base_commit
    assert_gone(manager, worktree)


def test_committed_then_edited_work_gets_one_more_commit_only_for_the_edits(repo: Path) -> None:
    manager = WorktreeManager(repo)
    worktree = manager.create("run-3")
    (worktree.path / "a.txt").write_text("a\n")
    git(worktree.path, "add", "a.txt")
    git(worktree.path, "commit", "--quiet", "-m", "child work")
    (worktree.path / "b.txt").write_text("b\n")

    outcome = manager.finish(worktree, success=True)

    assert outcome.branch is not None
    assert git(repo, "rev-list", "--count", f"{worktree.base_commit}..{outcome.branch}") == "2"
    assert git(repo, "show", f"{outcome.branch}:b.txt") == "b"


def test_a_child_without_changes_reports_no_changes_on_a_branch_at_the_base(repo: Path) -> None:
    manager = WorktreeManager(repo)
    worktree = manager.create("idle")
    (worktree.path / "only.log").write_text("ignored files are not work\n")

    outcome = manager.finish(worktree, success=True)

    assert outcome.to_dict() == {
        "branch": "membrane/agent-idle",
        "commit": worktree.base_commit,
        "has_changes": False,
    }
    assert branches(repo) == ["main", "membrane/agent-idle"]
    assert_gone(manager, worktree)


def test_main_checkout_dirty_and_staged_changes_are_invisible_in_the_worktree(repo: Path) -> None:
    (repo / "README.md").write_text("dirty in main\n")
    (repo / "staged.txt").write_text("staged in main\n")
    git(repo, "add", "staged.txt")
    (repo / "untracked.txt").write_text("untracked in main\n")

    worktree = WorktreeManager(repo).create("clean-copy")

    assert (worktree.path / "README.md").read_text() == "original\n"
    assert not (worktree.path / "staged.txt").exists()
    assert not (worktree.path / "untracked.txt").exists()
    assert git(worktree.path, "status", "--porcelain") == ""
    assert worktree.base_commit == git(repo, "rev-parse", "HEAD")
    assert git(worktree.path, "rev-parse", "--abbrev-ref", "HEAD") == "HEAD"  # detached


def test_worktrees_are_no_untracked_noise_in_the_main_checkout(repo: Path) -> None:
    worktree = WorktreeManager(repo).create("quiet")
    (worktree.path / "child.txt").write_text("child\n")

    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""


def test_the_worktree_mirrors_the_projects_place_in_the_repository(repo: Path) -> None:
    (repo / "pkg").mkdir()
    (repo / "pkg" / "mod.py").write_text("x = 1\n")
    git(repo, "add", "pkg")
    git(repo, "commit", "--quiet", "-m", "pkg")

    worktree = WorktreeManager(repo / "pkg").create("sub")

    assert worktree.path.parent == repo / "pkg" / ".membrane" / "worktrees"
    assert worktree.cwd == worktree.path / "pkg"
    assert (worktree.cwd / "mod.py").read_text() == "x = 1\n"


def test_two_children_run_concurrently_in_separate_worktrees(repo: Path) -> None:
    manager = WorktreeManager(repo)

    def child(text: str) -> tuple[Worktree, str | None]:
        worktree = manager.create("same-id")
        (worktree.path / "out.txt").write_text(text)
        return worktree, manager.finish(worktree, success=True).branch

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(child, ["first\n", "second\n"]))

    paths = {worktree.path for worktree, _ in results}
    names = {branch for _, branch in results}
    assert len(paths) == 2 and len(names) == 2
    assert names == {"membrane/agent-same-id", "membrane/agent-same-id-2"}
    assert {git(repo, "show", f"{name}:out.txt") for name in names} == {"first", "second"}
    assert registered_worktrees(repo) == 1


def test_branch_names_stay_unique_when_a_run_id_repeats(repo: Path) -> None:
    manager = WorktreeManager(repo)
    seen = []
    for n in range(3):
        worktree = manager.create("again")
        (worktree.path / "n.txt").write_text(f"{n}\n")
        seen.append(manager.finish(worktree, success=True).branch)

    assert seen == ["membrane/agent-again", "membrane/agent-again-2", "membrane/agent-again-3"]
    assert git(repo, "show", "membrane/agent-again:n.txt") == "0"


def test_run_ids_become_bounded_valid_branch_names(repo: Path) -> None:
    manager = WorktreeManager(repo)
    worktree = manager.create("../Évil id:~^?*[x]@{1}.lock/" + "y" * 200 + "..")
    (worktree.path / "x.txt").write_text("x\n")

    outcome = manager.finish(worktree, success=True)

    assert worktree.path.parent == manager.root
    assert outcome.branch is not None and len(outcome.branch) <= 80
    git(repo, "check-ref-format", "--branch", outcome.branch)
    assert outcome.branch in branches(repo)


def test_a_folder_that_is_not_a_repository_is_worktree_unavailable(tmp_path: Path) -> None:
    with pytest.raises(WorktreeUnavailable) as caught:
        WorktreeManager(tmp_path).create("r")

    assert caught.value.code == "worktree-unavailable"
    assert "not inside a git work tree" in caught.value.message
    assert "never falls back" in caught.value.message
    assert not (tmp_path / ".membrane").exists()


def test_a_repository_without_commits_is_worktree_unavailable(tmp_path: Path) -> None:
    git(tmp_path, "init", "--quiet")

    with pytest.raises(WorktreeUnavailable, match="names no commit") as caught:
        WorktreeManager(tmp_path).create("r")

    assert caught.value.data["run_id"] == "r"


def test_missing_git_is_worktree_unavailable(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))

    with pytest.raises(WorktreeUnavailable, match="git is not installed"):
        WorktreeManager(repo).create("r")


def test_error_cleanup_removes_the_worktree_and_reports_no_changes(repo: Path) -> None:
    manager = WorktreeManager(repo)
    worktree = manager.create("failed")
    (worktree.path / "partial.txt").write_text("partial\n")

    outcome = manager.finish(worktree, success=False)

    assert outcome.to_dict() == {"branch": None, "commit": None, "has_changes": False}
    assert branches(repo) == ["main"]
    assert_gone(manager, worktree)


def test_a_runtime_killed_mid_run_leaves_a_worktree_that_prune_saves(repo: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC_DIR)}
    crashed = subprocess.run(
        [sys.executable, str(CRASH_CHILD), str(repo), "killed"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    left = Path(crashed.stdout.strip())
    assert (left / "half-done.txt").is_file()
    assert registered_worktrees(repo) == 2

    outcomes = WorktreeManager(repo).prune_orphans()

    assert [(o.branch, o.has_changes, o.run_id, o.error) for o in outcomes] == [
        ("membrane/agent-killed", True, "killed", None)
    ]
    assert git(repo, "show", "membrane/agent-killed:half-done.txt") == "work in progress"
    assert git(repo, "show", "membrane/agent-killed:README.md") == "edited by the killed run"
    assert not left.exists() and not left.with_name("killed.json").exists()
    assert registered_worktrees(repo) == 1
    assert WorktreeManager(repo).prune_orphans() == []


def test_prune_leaves_the_worktrees_of_a_live_owner_alone(repo: Path) -> None:
    worktree = WorktreeManager(repo).create("alive")

    assert WorktreeManager(repo).prune_orphans() == []
    assert worktree.path.is_dir()


def test_prune_treats_a_reused_pid_as_a_dead_owner(repo: Path) -> None:
    manager = WorktreeManager(repo)
    worktree = manager.create("reused")
    (worktree.path / "w.txt").write_text("w\n")
    marker = worktree.path.with_name("reused.json")
    record = json.loads(marker.read_text())
    assert record["pid"] == os.getpid()
    record["start"] = "another-boot:1"
    marker.write_text(json.dumps(record))

    [outcome] = manager.prune_orphans()

    assert outcome.branch == "membrane/agent-reused" and outcome.has_changes
    assert_gone(manager, worktree)


def test_prune_saves_a_worktree_that_lost_its_marker(repo: Path) -> None:
    manager = WorktreeManager(repo)
    worktree = manager.create("unmarked")
    worktree.path.with_name("unmarked.json").unlink()
    (worktree.path / "w.txt").write_text("w\n")
    idle = manager.create("unmarked-idle")
    idle.path.with_name("unmarked-idle.json").unlink()

    outcomes = {o.path.name: o for o in manager.prune_orphans()}

    assert outcomes["unmarked"].branch == "membrane/agent-unmarked"
    assert outcomes["unmarked"].has_changes
    assert outcomes["unmarked-idle"].to_dict() == {
        "branch": None,
        "commit": idle.base_commit,
        "has_changes": False,
    }
    assert not worktree.path.exists() and not idle.path.exists()
    assert registered_worktrees(repo) == 1


def test_prune_deletes_a_marker_whose_worktree_is_gone(repo: Path) -> None:
    manager = WorktreeManager(repo)
    marker = manager.root / "ghost.json"
    manager.root.mkdir(parents=True)
    marker.write_text(json.dumps({"run_id": "ghost", "pid": None}))

    [outcome] = manager.prune_orphans()

    assert (outcome.run_id, outcome.branch, outcome.has_changes) == ("ghost", None, False)
    assert not marker.exists()


def test_work_that_cannot_be_saved_stays_for_the_next_prune(repo: Path) -> None:
    git(repo, "branch", "membrane")  # refs/heads/membrane blocks every membrane/... branch
    manager = WorktreeManager(repo)
    worktree = manager.create("blocked")
    (worktree.path / "keep.txt").write_text("keep\n")

    outcome = manager.finish(worktree, success=True)

    assert outcome.to_dict()["has_changes"] is False
    assert outcome.error is not None and "not saved" in outcome.error
    assert (worktree.path / "keep.txt").is_file()

    git(repo, "branch", "-D", "membrane")
    [saved] = WorktreeManager(repo).prune_orphans()

    assert saved.branch == "membrane/agent-blocked" and saved.error is None
    assert git(repo, "show", "membrane/agent-blocked:keep.txt") == "keep"
    assert_gone(manager, worktree)


def test_a_damaged_worktree_never_makes_cleanup_commit_in_the_main_checkout(repo: Path) -> None:
    (repo / "README.md").write_text("the user's unfinished edit\n")
    manager = WorktreeManager(repo)
    worktree = manager.create("damaged")
    (worktree.path / ".git").unlink()  # git would now find the enclosing main checkout

    outcome = manager.finish(worktree, success=True)

    assert outcome.error is not None and "not a git worktree of its own" in outcome.error
    assert (outcome.branch, outcome.has_changes) == (None, False)
    assert git(repo, "rev-list", "--count", "HEAD") == "1"
    assert git(repo, "status", "--porcelain") == "M README.md"
    assert git(repo, "diff", "--cached", "--name-only") == ""


def test_a_grandchilds_worktree_stays_out_of_its_parents_branch(repo: Path) -> None:
    outer_manager = WorktreeManager(repo)
    outer = outer_manager.create("outer")
    inner_manager = WorktreeManager(outer.path)
    inner = inner_manager.create("inner")
    (inner.path / "inner.txt").write_text("inner\n")
    (outer.path / "outer.txt").write_text("outer\n")

    inner_outcome = inner_manager.finish(inner, success=True)
    outer_outcome = outer_manager.finish(outer, success=True)

    assert git(repo, "show", f"{inner_outcome.branch}:inner.txt") == "inner"
    files = git(repo, "ls-tree", "-r", "--name-only", str(outer_outcome.branch)).split()
    assert sorted(files) == [".gitignore", "README.md", "outer.txt"]
    assert registered_worktrees(repo) == 1
