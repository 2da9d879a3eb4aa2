"""Agent Skills: folders with a ``SKILL.md`` found on the skill roots, nearest first.

A skill is ``<root>/<name>/SKILL.md`` (YAML frontmatter with ``name`` and ``description``, then
the body) with optional ``references/``, ``scripts/`` and ``assets/``: the shape Claude Code,
Codex and others use. ``skill_roots()`` lists the roots in precedence order and
``discover_skills()`` reads them; a nearer skill shadows a farther one of the same name. A broken
skill is reported (a ``DefinitionWarning``) and skipped; it never hides the others. Reading is
bounded: a root lists at most ``MAX_SKILLS_PER_ROOT`` folders, a ``SKILL.md`` is at most
``MAX_BYTES``, a skill's file listing stops at ``MAX_FILES``, and a folder reached twice (a
symlink loop, or a root listed twice) is read once.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from membrane.agents.definition import NAME_RE, AgentDefinition, DefinitionWarning
from membrane.agents.dialect import PRELOADS_SKILLS
from membrane.agents.files import MAX_BYTES, content_digest
from membrane.agents.skill_cache import ParsedSkill, SkillCache
from membrane.errors import DefinitionError

__all__ = [
    "ENV_SKILL_DIRS",
    "MAX_FILES",
    "MAX_SKILLS_PER_ROOT",
    "PACKAGED_SKILLS",
    "Skill",
    "SkillCatalog",
    "discover_skills",
    "preload_texts",
    "skill_roots",
]

#: The environment variable that carries extra skill roots (joined with ``os.pathsep``); a
#: child launched by Membrane gets the full root list in it.
ENV_SKILL_DIRS: Final = "MEMBRANE_AGENT_SKILLS_DIRS"
#: Skills shipped inside the package, the farthest root.
PACKAGED_SKILLS: Final = Path(__file__).resolve().parent.parent / "builtin_skills"
MAX_SKILLS_PER_ROOT: Final = 1000
MAX_FILES: Final = 200
_FILE_FOLDERS: Final = ("references", "scripts", "assets")
_SKILL_FILE: Final = "SKILL.md"
#: The folders, under the checkout and each ancestor and under the home folder, that hold skills.
_NEAR_FOLDERS: Final = (".agents/skills", ".claude/skills", ".codex/skills")
#: In the checkout and each ancestor: a parent project's Membrane skills too (seed 002).
_ANCESTOR_FOLDERS: Final = (".membrane/skills", *_NEAR_FOLDERS)


@dataclass(frozen=True, slots=True)
class Skill:
    """One discovered skill. ``folder`` holds ``SKILL.md``; ``root`` is the root it came from."""

    name: str
    description: str
    folder: Path
    root: Path

    @property
    def file(self) -> Path:
        return self.folder / _SKILL_FILE

    def body(self) -> str:
        """The instructions after the frontmatter, read now (a skill may be edited while a run
        goes on; the catalog keeps names and descriptions only)."""
        from membrane.agents.frontmatter import split_frontmatter

        data = _read_bounded(self.file)
        return split_frontmatter(data.decode("utf-8"), path=str(self.file)).body.lstrip("\n")

    def files(self) -> tuple[str, ...]:
        """The skill's own files under ``references/``, ``scripts/`` and ``assets/``, relative
        to its folder, sorted; at most ``MAX_FILES``. Links are not followed."""
        found: list[str] = []
        for sub in _FILE_FOLDERS:
            top = self.folder / sub
            if not top.is_dir() or top.is_symlink():
                continue
            for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
                dirnames.sort()
                for name in sorted(filenames):
                    path = Path(dirpath) / name
                    if path.is_symlink() or not path.is_file():
                        continue
                    found.append(path.relative_to(self.folder).as_posix())
                    if len(found) >= MAX_FILES:
                        return tuple(found)
        return tuple(found)


@dataclass(frozen=True, slots=True)
class SkillCatalog:
    """The skills found on ``roots``: the winners by name, who they shadow, and what was
    skipped and why."""

    roots: tuple[Path, ...] = ()
    skills: Mapping[str, Skill] = field(default_factory=dict)
    #: name -> the folders of farther skills of that name that the winner hides.
    shadowed: Mapping[str, tuple[Path, ...]] = field(default_factory=dict)
    problems: tuple[DefinitionWarning, ...] = ()

    def descriptions(self) -> dict[str, str]:
        """Name -> description: what a ``# Skills`` section lists."""
        return {name: skill.description for name, skill in self.skills.items()}

    def env_value(self) -> str:
        """The roots joined for ``MEMBRANE_AGENT_SKILLS_DIRS``."""
        return os.pathsep.join(str(root) for root in self.roots)


def skill_roots(
    *,
    project: Path,
    checkout: Path | None = None,
    home: Path,
    user_home: Path | None = None,
    env: Mapping[str, str] | None = None,
    packaged: bool = True,
) -> tuple[Path, ...]:
    """The skill roots, nearest first, each once.

    ``<project>/.membrane/skills``; then ``.membrane/skills``, ``.agents/skills``,
    ``.claude/skills`` and ``.codex/skills`` in the checkout (default: the project) and each of
    its ancestors; then
    ``<membrane home>/skills`` and the same three under the user's home folder; then the roots
    of ``MEMBRANE_AGENT_SKILLS_DIRS``; then the skills packaged with Membrane. Roots that do not
    exist are kept out.
    """
    environ = os.environ if env is None else env
    start = (checkout or project).resolve()
    candidates = [project / ".membrane" / "skills"]
    for folder in (start, *start.parents):
        candidates.extend(folder / near for near in _ANCESTOR_FOLDERS)
    candidates.append(home / "skills")
    person = user_home if user_home is not None else Path.home()
    candidates.extend(person / near for near in _NEAR_FOLDERS)
    candidates.extend(Path(p) for p in environ.get(ENV_SKILL_DIRS, "").split(os.pathsep) if p)
    if packaged:
        candidates.append(PACKAGED_SKILLS)
    roots: list[Path] = []
    seen: set[Path] = set()
    for candidate in candidates:
        # Most candidates do not exist: one stat tells, before resolving every component. A
        # candidate that cannot be looked at (a parent without search permission, a loop) is
        # no root.
        try:
            if not candidate.is_dir():
                continue
            real = candidate.resolve()
        except (OSError, RuntimeError):
            continue
        if real in seen or not real.is_dir():
            continue
        seen.add(real)
        roots.append(real)
    return tuple(roots)


def discover_skills(roots: Sequence[Path], *, cache: Path | None = None) -> SkillCatalog:
    """Read every root in order; the first skill of a name wins, later ones are shadowed.

    ``cache``: the file that keeps what each ``SKILL.md`` parsed to by its content digest
    (``membrane.agents.skill_cache``), so that only a changed file is parsed again."""
    winners: dict[str, Skill] = {}
    shadowed: dict[str, list[Path]] = {}
    problems: list[DefinitionWarning] = []
    visited: set[tuple[int, int]] = set()
    parsed = SkillCache(cache)
    for root in roots:
        for skill in _read_root(root, visited, problems, parsed):
            if skill.name in winners:
                shadowed.setdefault(skill.name, []).append(skill.folder)
            else:
                winners[skill.name] = skill
    parsed.save()
    return SkillCatalog(
        roots=tuple(roots),
        skills=dict(sorted(winners.items())),
        shadowed={name: tuple(folders) for name, folders in sorted(shadowed.items())},
        problems=tuple(problems),
    )


def _read_root(
    root: Path, visited: set[tuple[int, int]], problems: list[DefinitionWarning], cache: SkillCache
) -> list[Skill]:
    try:
        entries = sorted(os.scandir(root), key=lambda entry: entry.name)
    except OSError as exc:
        problems.append(DefinitionWarning(str(root), None, "skill-root-unreadable", str(exc)))
        return []
    skills: list[Skill] = []
    folders = 0
    for entry in entries:
        if entry.name.startswith("."):
            continue
        try:
            if not entry.is_dir():
                continue
            info = os.stat(entry.path)
        except OSError:
            continue
        folders += 1
        if folders > MAX_SKILLS_PER_ROOT:
            problems.append(
                DefinitionWarning(
                    str(root),
                    None,
                    "skill-root-too-large",
                    f"read the first {MAX_SKILLS_PER_ROOT} skill folders only",
                )
            )
            break
        key = (info.st_dev, info.st_ino)
        if key in visited:
            continue
        visited.add(key)
        skill = _read_skill(Path(entry.path), root, problems, cache)
        if skill is not None:
            skills.append(skill)
    return skills


def _read_skill(
    folder: Path, root: Path, problems: list[DefinitionWarning], cache: SkillCache
) -> Skill | None:
    file = folder / _SKILL_FILE
    path = str(file)
    try:
        data = _read_bounded(file)
    except FileNotFoundError:
        return None
    except DefinitionError as exc:
        problems.append(DefinitionWarning(path, None, exc.code, exc.message))
        return None
    except OSError as exc:
        problems.append(DefinitionWarning(path, None, "skill-unreadable", str(exc)))
        return None
    digest = content_digest(data).hex()
    parsed = cache.get(path, digest)
    if parsed is None:
        parsed = parse_skill(data, folder, path)
        cache.put(path, digest, parsed)
    problems.extend(parsed.problems)
    if parsed.name is None or parsed.description is None:
        return None
    return Skill(name=parsed.name, description=parsed.description, folder=folder, root=root)


def _read_bounded(file: Path) -> bytes:
    """The file's bytes; only a regular file of at most ``MAX_BYTES`` (a FIFO never blocks)."""
    fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise DefinitionError("SKILL.md is not a regular file", path=str(file))
        if info.st_size > MAX_BYTES:
            raise DefinitionError(
                f"SKILL.md is larger than {MAX_BYTES} bytes; skipped", path=str(file)
            )
        with os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read(MAX_BYTES + 1)
    finally:
        os.close(fd)


def preload_texts(definition: AgentDefinition, skills: Mapping[str, Skill]) -> dict[str, str]:
    """The instructions of each skill ``definition`` preloads (a Claude Code or pi file's
    ``skills`` list), read now, by name; a skill no root holds, or whose ``SKILL.md`` cannot be
    read, is left out (the resolver warns about it)."""
    if definition.dialect not in PRELOADS_SKILLS or not isinstance(definition.skills, tuple):
        return {}
    texts: dict[str, str] = {}
    for name in definition.skills:
        skill = skills.get(name)
        if skill is None:
            continue
        try:
            texts[name] = skill.body()
        except (OSError, UnicodeDecodeError, DefinitionError):
            continue
    return texts


# -- one SKILL.md ----------------------------------------------------------------------------

_KNOWN_KEYS: Final = frozenset(
    {"name", "description", "license", "allowed-tools", "metadata", "version", "compatibility"}
)


def parse_skill(data: bytes, folder: Path, path: str) -> ParsedSkill:
    """What ``SKILL.md``'s ``data`` says: its name and description, or why it is skipped (only
    a file the skills cache does not hold is parsed, so the YAML reader is imported here)."""
    from membrane.agents.frontmatter import load_yaml, split_frontmatter

    try:
        fm = split_frontmatter(data.decode("utf-8"), path=path)
        mapping, fm = load_yaml(fm, known_keys=_KNOWN_KEYS)
    except UnicodeDecodeError:
        return _skipped(DefinitionWarning(path, None, "skill-invalid", "SKILL.md is not UTF-8"))
    except DefinitionError as exc:
        line = exc.data.get("line")
        return _skipped(
            DefinitionWarning(path, line if isinstance(line, int) else None, exc.code, exc.message)
        )
    problems = list(fm.warnings)
    name = mapping.get("name", folder.name)
    description = mapping.get("description")
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        return _skipped(
            *problems,
            DefinitionWarning(
                path, 1, "skill-invalid", f"name {name!r} is not a valid skill name; skipped"
            ),
        )
    if not isinstance(description, str) or not description.strip():
        return _skipped(
            *problems,
            DefinitionWarning(
                path,
                1,
                "skill-invalid",
                "a skill needs a `description` (when to use it); skipped",
            ),
        )
    if name != folder.name:
        problems.append(
            DefinitionWarning(
                path,
                1,
                "skill-name-differs",
                f"name {name!r} differs from its folder {folder.name!r}; the name is used",
            )
        )
    return ParsedSkill(name, " ".join(description.split()), tuple(problems))


def _skipped(*problems: DefinitionWarning) -> ParsedSkill:
    return ParsedSkill(None, None, problems)
