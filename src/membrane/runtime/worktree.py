"""Git worktrees for children started with ``isolation: worktree``.

A child runs in a detached worktree created from HEAD under
``<project>/.membrane/worktrees/<slug>``, so staged and uncommitted changes of the main checkout are
not there; its work comes back as the branch ``membrane/agent-<slug>``. The folder holds:

* ``<slug>/`` the worktree, and ``<slug>.json`` its owner marker (pid, process start identity,
  run id, base commit, creation time);
* ``.gitignore`` containing ``*``, so nothing here is untracked noise in the main checkout. A file
  in the folder Membrane owns is preferred to ``.git/info/exclude``: it changes nothing in the
  user's repository and also keeps a nested worktree out of the enclosing worktree's ``git add``;
* ``.prune.lock`` serialises :meth:`WorktreeManager.prune_orphans`, and ``.admin.lock`` every
  ``git worktree add/remove/prune``, between threads and processes (``flock``, freed when a process
  dies): git's worktree commands are not safe to overlap, as one ``add`` reads the half-written
  administrative folder of another.

Invariants:

* The marker is created exclusively (which reserves the slug) before ``git worktree add`` runs and
  is deleted only after the worktree is gone. A worktree without a marker is a crash's leftover,
  never a creation in progress.
* Creation is strict: every failure raises :class:`WorktreeUnavailable`; nothing falls back to the
  main checkout.
* Cleanup never raises: failures land in :attr:`WorktreeOutcome.error`. Work that could not be saved
  stays in its worktree with an ownerless marker, so the next ``prune_orphans()`` retries it.
* Git commands run in a worktree only after ``--show-toplevel`` proved it is its own checkout, so a
  damaged worktree can never make ``git add`` act on the main checkout.
* Owner liveness is judged on this machine: a project shared by several machines at once is not
  supported.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import itertools
import json
import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from membrane.errors import WorktreeUnavailable

__all__ = ["BRANCH_PREFIX", "Worktree", "WorktreeManager", "WorktreeOutcome"]

BRANCH_PREFIX = "membrane/agent-"
#: The identity of commits that save a child's uncommitted work; needs no user git config.
COMMIT_NAME = "Membrane"
COMMIT_EMAIL = "membrane@localhost"
_MAX_SLUG = 48
#: Variables that would make git act on another repository, index or tree than the one named by -C.
_REPO_ENV = frozenset(
    [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_COMMON_DIR",
        "GIT_OBJECT_DIRECTORY",
        "GIT_PREFIX",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_NAMESPACE",
    ]
)


@dataclass(frozen=True, slots=True)
class Worktree:
    """A child's checkout.

    ``branch`` is the name free when the worktree was made; the branch actually created is in
    :attr:`WorktreeOutcome.branch`. ``cwd`` is ``path`` plus the project's place in the repository.
    """

    run_id: str
    path: Path
    base_commit: str
    branch: str
    cwd: Path


@dataclass(frozen=True, slots=True)
class WorktreeOutcome:
    """What became of a worktree.

    ``has_changes`` is true when ``branch`` points at a commit other than the base. As the
    specification says, the branch is created at the resulting HEAD after every successful run, also
    when it equals the base; only an orphan without a known base and without new work gets none.
    """

    branch: str | None
    commit: str | None
    has_changes: bool
    path: Path
    error: str | None = None
    run_id: str | None = None

    def to_dict(self) -> dict[str, object]:
        """``{branch, commit, has_changes}`` for results and events, plus ``error`` when set."""
        data: dict[str, object] = {
            "branch": self.branch,
            "commit": self.commit,
            "has_changes": self.has_changes,
        }
        if self.error is not None:
            data["error"] = self.error
        return data


class _GitFailed(Exception):
    """A git command could not run or failed; the message carries git's own words."""


class WorktreeManager:
    """Creates, finishes and recovers the worktrees of one project; safe to share by threads."""

    def __init__(self, project: Path, *, timeout: float = 60.0) -> None:
        self._project = Path(project).resolve()
        self._root = self._project / ".membrane" / "worktrees"
        self._timeout = timeout
        env = {k: v for k, v in os.environ.items() if k not in _REPO_ENV}
        env.update(GIT_TERMINAL_PROMPT="0", LC_ALL="C", LANGUAGE="C")
        self._env = env

    @property
    def root(self) -> Path:
        """``<project>/.membrane/worktrees``."""
        return self._root

    def prefix(self) -> str:
        """The project's place in its Git repository (``git rev-parse --show-prefix``, empty
        at the top), computed as ``create`` computes it; ``WorktreeUnavailable`` when the
        project is not inside a Git work tree."""
        try:
            return self._git(self._project, "rev-parse", "--show-prefix")
        except _GitFailed as exc:
            raise self._unavailable("-", f"it is not inside a git work tree ({exc})") from exc

    def create(self, run_id: str) -> Worktree:
        """A detached worktree from HEAD for ``run_id``; else :class:`WorktreeUnavailable`."""
        if not self._project.is_dir():
            raise self._unavailable(run_id, "the project folder does not exist")
        try:
            lines = self._git(self._project, "rev-parse", "--show-toplevel", "--show-prefix")
        except _GitFailed as exc:
            raise self._unavailable(run_id, f"it is not inside a git work tree ({exc})") from exc
        top, _, prefix = lines.partition("\n")
        try:
            base = self._git(self._project, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
        except _GitFailed as exc:
            reason = f"HEAD of {top} names no commit (a repository needs one commit first) ({exc})"
            raise self._unavailable(run_id, reason) from exc
        try:
            self._root.mkdir(parents=True, exist_ok=True)
            ignore = self._root / ".gitignore"
            if not ignore.is_file() or ignore.read_text() != "*\n":
                ignore.write_text("*\n")
            slug = self._reserve(_slug(run_id), run_id=run_id, base=base)
        except OSError as exc:
            raise self._unavailable(run_id, f"cannot write under {self._root}: {exc}") from exc
        path = self._root / slug
        try:
            branch = self._free_branch(slug)
            self._admin("add", "--detach", str(path), base)
        except (_GitFailed, OSError) as exc:
            self._discard(path)
            raise self._unavailable(run_id, str(exc)) from exc
        return Worktree(
            run_id=run_id, path=path, base_commit=base, branch=branch, cwd=path / prefix.strip()
        )

    def finish(self, worktree: Worktree, *, success: bool) -> WorktreeOutcome:
        """Save the child's work to a branch (on success) and remove the worktree. Never raises.

        On success, changes the child did not commit (tracked or untracked, not ignored) are
        committed as ``Membrane <membrane@localhost>``; if it committed already, no commit is added.

        After an error this is only best effort, as the specification says: it attempts removal
        and reports ``has_changes: False``, saving nothing. It is not a durability guarantee. (A
        worktree that could not be removed is left ownerless, and ``prune_orphans()`` may still
        save what it holds.)
        """
        path = worktree.path
        if not success:
            error = self._discard(path)
            return WorktreeOutcome(None, None, False, path, error, worktree.run_id)
        try:
            branch, commit, changed = self._save(
                path, base=worktree.base_commit, run_id=worktree.run_id
            )
        except (_GitFailed, OSError) as exc:
            self._abandon(path)
            error = f"the work was not saved ({exc}); it stays in {path} for prune_orphans()"
            return WorktreeOutcome(None, None, False, path, error, worktree.run_id)
        return WorktreeOutcome(branch, commit, changed, path, self._discard(path), worktree.run_id)

    def prune_orphans(self) -> list[WorktreeOutcome]:
        """Save and remove the worktrees whose owner process is gone; return what became of them.

        An owner is gone when its pid is not alive, or is alive with another start identity (a
        reused pid). A worktree without a marker is an orphan; a marker without a worktree is
        deleted. A worktree that is not a valid git checkout is reported and left for inspection.
        Never raises: a folder that cannot be read gives one outcome with its ``error``.
        """
        if not self._root.is_dir():
            return []
        outcomes: list[WorktreeOutcome] = []
        try:
            with self._flock(".prune.lock"):
                names = {p.name for p in self._root.iterdir() if not p.name.startswith(".")}
                slugs = {n.removesuffix(".json") for n in names if (self._root / n).is_file()}
                slugs |= {n for n in names if (self._root / n).is_dir()}
                for slug in sorted(slugs):
                    record = self._read_marker(slug)
                    if record is None or not _owner_alive(record):
                        outcomes.append(self._recover(slug, record))
                with contextlib.suppress(_GitFailed):
                    self._admin("prune")
        except OSError as exc:
            error = f"cannot look for orphaned worktrees in {self._root}: {exc}"
            outcomes.append(WorktreeOutcome(None, None, False, self._root, error))
        return outcomes

    def _recover(self, slug: str, record: dict[str, object] | None) -> WorktreeOutcome:
        path = self._root / slug
        record = record or {}
        run_id, base = record.get("run_id"), record.get("base_commit")
        run_id = run_id if isinstance(run_id, str) else None
        if not path.is_dir():
            with contextlib.suppress(OSError):
                self._marker(path).unlink(missing_ok=True)
            return WorktreeOutcome(None, None, False, path, None, run_id)
        try:
            branch, commit, changed = self._save(
                path, base=base if isinstance(base, str) else None, run_id=run_id or slug
            )
        except (_GitFailed, OSError) as exc:
            self._abandon(path)
            error = f"the work was not saved ({exc}); it stays in {path}"
            return WorktreeOutcome(None, None, False, path, error, run_id)
        return WorktreeOutcome(branch, commit, changed, path, self._discard(path), run_id)

    def _save(self, path: Path, *, base: str | None, run_id: str) -> tuple[str | None, str, bool]:
        """Commit what is uncommitted and branch the resulting HEAD.

        With no known base (a worktree without marker) the work counts as changed unless some
        local branch already contains it.
        """
        top = self._git(path, "rev-parse", "--show-toplevel")
        if Path(top).resolve() != path.resolve():
            raise _GitFailed(f"{path} is not a git worktree of its own (git found {top})")
        self._git(path, "add", "--all")
        if self._git(path, "diff", "--cached", "--name-only", "-z"):
            message = f"Save uncommitted work of Membrane run {run_id}"
            self._git(path, "commit", "--no-verify", "--quiet", "-m", message, commit=True)
        head = self._git(path, "rev-parse", "--verify", "HEAD^{commit}")
        if base is not None:
            changed = head != base
        else:
            changed = not self._git(self._project, "for-each-ref", "--contains", head, "refs/heads")
        if not changed and base is None:
            return None, head, False
        return self._create_branch(path.name, head), head, changed

    def _free_branch(self, slug: str) -> str:
        pattern = f"refs/heads/{BRANCH_PREFIX}*"
        taken = set(
            self._git(self._project, "for-each-ref", "--format=%(refname)", pattern).split()
        )
        return next(n for n in _branch_names(slug) if f"refs/heads/{n}" not in taken)

    def _create_branch(self, slug: str, commit: str) -> str:
        """Create the first free ``membrane/agent-<slug>[-N]`` at ``commit``, atomically."""
        attempt = 0
        while True:
            name = self._free_branch(slug)
            try:
                # An empty old value makes update-ref fail when the ref exists: no overwrite race.
                self._git(self._project, "update-ref", f"refs/heads/{name}", commit, "")
                return name
            except _GitFailed:
                attempt += 1
                if attempt == 3:
                    raise

    def _reserve(self, base_slug: str, *, run_id: str, base: str) -> str:
        record = {
            "run_id": run_id,
            "base_commit": base,
            "pid": os.getpid(),
            "start": _start_identity(os.getpid()),
            "created_at": time.time(),
        }
        for n in itertools.count(1):
            slug = base_slug if n == 1 else f"{base_slug}-{n}"
            if (self._root / slug).exists():
                continue
            tmp = self._write_tmp(record)
            try:
                os.link(tmp, self._marker(self._root / slug))
                return slug
            except FileExistsError:
                continue
            finally:
                tmp.unlink(missing_ok=True)
        raise AssertionError("unreachable")

    def _discard(self, path: Path) -> str | None:
        """Remove a worktree and its marker; the reason when the folder could not be removed."""
        error: str | None = None
        try:
            self._admin("remove", "--force", "--force", str(path))
        except (_GitFailed, OSError) as exc:
            error = str(exc)
            shutil.rmtree(path, ignore_errors=True)
            with contextlib.suppress(_GitFailed, OSError):
                self._admin("prune")
        with contextlib.suppress(OSError):
            if not os.path.lexists(path):
                self._marker(path).unlink(missing_ok=True)
                return None
        self._abandon(path)
        return f"the worktree {path} could not be removed: {error}"

    def _abandon(self, path: Path) -> None:
        """Mark a worktree ownerless, so that the next ``prune_orphans()`` takes it over."""
        record = self._read_marker(path.name) or {}
        record["pid"] = None
        with contextlib.suppress(OSError):
            os.replace(self._write_tmp(record), self._marker(path))

    def _read_marker(self, slug: str) -> dict[str, object] | None:
        """The marker's record; ``None`` when absent, ``{}`` when unreadable (owner unknown)."""
        try:
            data = json.loads(self._marker(self._root / slug).read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write_tmp(self, record: dict[str, object]) -> Path:
        tmp = self._root / f".{uuid.uuid4().hex}.tmp"
        tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
        return tmp

    @staticmethod
    def _marker(path: Path) -> Path:
        return path.with_name(path.name + ".json")

    @contextlib.contextmanager
    def _flock(self, name: str) -> Iterator[None]:
        fd = os.open(self._root / name, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _admin(self, *args: str) -> None:
        with self._flock(".admin.lock"):
            self._git(self._project, "worktree", *args)

    def _git(self, cwd: Path, *args: str, commit: bool = False) -> str:
        """Run ``git -C cwd args``; its stripped stdout, or :class:`_GitFailed`."""
        command = ["git", "-C", str(cwd)]
        env = self._env
        if commit:
            identity = {"user.name": COMMIT_NAME, "user.email": COMMIT_EMAIL}
            config = {**identity, "commit.gpgsign": "false", "core.hooksPath": os.devnull}
            command += [arg for key, value in config.items() for arg in ("-c", f"{key}={value}")]
            env = {**env, "GIT_AUTHOR_NAME": COMMIT_NAME, "GIT_AUTHOR_EMAIL": COMMIT_EMAIL}
            env.update(GIT_COMMITTER_NAME=COMMIT_NAME, GIT_COMMITTER_EMAIL=COMMIT_EMAIL)
        command += args
        try:
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                check=True,
                env=env,
                stdin=subprocess.DEVNULL,
                timeout=self._timeout,
            )
        except FileNotFoundError as exc:
            raise _GitFailed("git is not installed or not on PATH") from exc
        except subprocess.TimeoutExpired as exc:
            raise _GitFailed(f"`git {args[0]}` took longer than {self._timeout:g}s") from exc
        except subprocess.CalledProcessError as exc:
            words = (exc.stderr or exc.stdout or "").strip() or f"exit status {exc.returncode}"
            raise _GitFailed(f"`git {' '.join(args)}` failed: {words}") from exc
        except OSError as exc:
            raise _GitFailed(f"cannot run git: {exc}") from exc
        return done.stdout.strip()

    def _unavailable(self, run_id: str, reason: str) -> WorktreeUnavailable:
        return WorktreeUnavailable(
            f"cannot create a worktree for run {run_id!r} in {self._project}: {reason}. Fix the "
            "repository or start the child without `isolation: worktree`; Membrane never falls "
            "back to the main checkout.",
            run_id=run_id,
            project=str(self._project),
            reason=reason,
        )


def _slug(run_id: str) -> str:
    """``run_id`` as a bounded branch-name component of ``[A-Za-z0-9._-]``."""
    text = re.sub(r"[^A-Za-z0-9._-]+", "-", run_id)
    text = re.sub(r"\.{2,}", ".", text).strip(".-")[:_MAX_SLUG].rstrip(".-")
    if text.endswith(".lock"):
        text = text.removesuffix(".lock") + "-lock"
    return text or "run"


def _branch_names(slug: str) -> Iterator[str]:
    yield BRANCH_PREFIX + slug
    for n in itertools.count(2):
        yield f"{BRANCH_PREFIX}{slug}-{n}"


@functools.cache
def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _start_identity(pid: int) -> str | None:
    """Boot id and start time of ``pid``; ``None`` where ``/proc`` has no answer.

    A zombie counts as a different process: it has already stopped running.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in {"Z", "X"}:
        return f"exited:{pid}"
    return f"{_boot_id()}:{fields[19]}"


def _owner_alive(record: dict[str, object]) -> bool:
    pid = record.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    except OSError:
        return False
    recorded = record.get("start")
    return recorded is None or _start_identity(pid) == recorded
