"""Skill discovery over real folder trees: root order, shadowing, broken skills, loops, bounds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from membrane.agents import skills as skills_module
from membrane.agents.skills import (
    ENV_SKILL_DIRS,
    PACKAGED_SKILLS,
    discover_skills,
    skill_roots,
)


def write_skill(root: Path, name: str, description: str = "", body: str = "Do it.") -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    about = description or f"Use {name} for {name} work."
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {about}\n---\n{body}\n", encoding="utf-8"
    )
    return folder


@pytest.fixture
def places(tmp_path: Path) -> dict[str, Path]:
    outer = tmp_path / "repo"
    project = outer / "service"
    project.mkdir(parents=True)
    person = tmp_path / "person"
    person.mkdir()
    home = tmp_path / "membrane-home"
    home.mkdir()
    return {"outer": outer, "project": project, "person": person, "home": home}


def roots_of(places: dict[str, Path], env: dict[str, str] | None = None) -> tuple[Path, ...]:
    return skill_roots(
        project=places["project"],
        home=places["home"],
        user_home=places["person"],
        env=env or {},
        packaged=False,
    )


def test_roots_run_nearest_first_through_ancestors_home_and_the_environment(
    places: dict[str, Path], tmp_path: Path
) -> None:
    project, outer, person = places["project"], places["outer"], places["person"]
    wanted = [
        project / ".membrane" / "skills",
        project / ".agents" / "skills",
        project / ".codex" / "skills",
        outer / ".membrane" / "skills",  # a parent project's skills
        outer / ".claude" / "skills",
        places["home"] / "skills",
        person / ".agents" / "skills",
        tmp_path / "extra-a",
        tmp_path / "extra-b",
    ]
    for folder in wanted:
        folder.mkdir(parents=True)
    env = {ENV_SKILL_DIRS: os.pathsep.join([str(tmp_path / "extra-a"), str(tmp_path / "extra-b")])}
    assert roots_of(places, env) == tuple(p.resolve() for p in wanted)


def test_the_packaged_skills_come_last() -> None:
    roots = skill_roots(project=Path.cwd(), home=Path.cwd(), user_home=Path.cwd(), env={})
    assert roots[-1] == PACKAGED_SKILLS
    assert "membrane" in discover_skills(roots).skills


def test_a_nearer_skill_shadows_a_farther_one_of_the_same_name(places: dict[str, Path]) -> None:
    near = write_skill(places["project"] / ".membrane" / "skills", "pdf", "Near pdf.")
    far = write_skill(places["person"] / ".claude" / "skills", "pdf", "Far pdf.")
    write_skill(places["person"] / ".claude" / "skills", "charts")
    catalog = discover_skills(roots_of(places))
    assert catalog.skills["pdf"].folder == near
    assert catalog.skills["pdf"].description == "Near pdf."
    assert catalog.shadowed == {"pdf": (far.resolve(),)}
    assert sorted(catalog.skills) == ["charts", "pdf"]
    assert catalog.descriptions()["charts"] == "Use charts for charts work."


def test_a_broken_skill_is_reported_and_skipped_and_hides_nothing(places: dict[str, Path]) -> None:
    root = places["project"] / ".agents" / "skills"
    write_skill(root, "good")
    (root / "nofront").mkdir(parents=True)
    (root / "nofront" / "SKILL.md").write_text("just text\n", encoding="utf-8")
    (root / "badyaml").mkdir()
    (root / "badyaml" / "SKILL.md").write_text(
        "---\nname: badyaml\ndescription: [unclosed\n---\nbody\n", encoding="utf-8"
    )
    (root / "nodesc").mkdir()
    (root / "nodesc" / "SKILL.md").write_text("---\nname: nodesc\n---\nbody\n", encoding="utf-8")
    (root / "badname").mkdir()
    (root / "badname" / "SKILL.md").write_text(
        "---\nname: 'bad name!'\ndescription: x\n---\n", encoding="utf-8"
    )
    (root / "empty-folder").mkdir()
    catalog = discover_skills(roots_of(places))
    assert list(catalog.skills) == ["good"]
    flagged = {Path(p.path).parent.name: p.code for p in catalog.problems}
    assert flagged == {
        "nofront": "definition-invalid",
        "badyaml": "definition-invalid",
        "nodesc": "skill-invalid",
        "badname": "skill-invalid",
    }


def test_tolerant_frontmatter_repairs_are_warned_not_fatal(places: dict[str, Path]) -> None:
    root = places["project"] / ".agents" / "skills"
    (root / "colon").mkdir(parents=True)
    (root / "colon" / "SKILL.md").write_bytes(
        b"\xef\xbb\xbf---\r\nname: colon\r\ndescription: Use it: for colons\r\n---\r\nBody\r\n"
    )
    catalog = discover_skills(roots_of(places))
    assert catalog.skills["colon"].description == "Use it: for colons"
    assert {"repaired-bom", "repaired-line-endings"} <= {p.code for p in catalog.problems}
    assert catalog.skills["colon"].body() == "Body\n"


def test_a_name_that_differs_from_its_folder_is_warned_and_used(places: dict[str, Path]) -> None:
    root = places["project"] / ".agents" / "skills"
    (root / "folder").mkdir(parents=True)
    (root / "folder" / "SKILL.md").write_text(
        "---\nname: real-name\ndescription: d\n---\n", encoding="utf-8"
    )
    catalog = discover_skills(roots_of(places))
    assert list(catalog.skills) == ["real-name"]
    assert [p.code for p in catalog.problems] == ["skill-name-differs"]


def test_symlink_loops_and_repeated_roots_are_read_once(places: dict[str, Path]) -> None:
    root = places["project"] / ".agents" / "skills"
    folder = write_skill(root, "looped")
    (folder / "references").mkdir()
    (folder / "references" / "guide.md").write_text("guide", encoding="utf-8")
    (folder / "references" / "again").symlink_to(folder, target_is_directory=True)
    (root / "alias").symlink_to(folder, target_is_directory=True)
    (root / "self").symlink_to(root, target_is_directory=True)
    catalog = discover_skills([*roots_of(places), root])
    assert list(catalog.skills) == ["looped"]
    assert catalog.skills["looped"].files() == ("references/guide.md",)
    assert catalog.shadowed == {}


def test_a_fifo_skill_file_never_blocks(places: dict[str, Path]) -> None:
    root = places["project"] / ".agents" / "skills"
    (root / "pipe").mkdir(parents=True)
    os.mkfifo(root / "pipe" / "SKILL.md")
    write_skill(root, "fine")
    catalog = discover_skills(roots_of(places))
    assert list(catalog.skills) == ["fine"]
    assert [p.code for p in catalog.problems] == ["definition-invalid"]


def test_a_huge_root_is_read_up_to_its_bound(
    places: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(skills_module, "MAX_SKILLS_PER_ROOT", 3)
    monkeypatch.setattr(skills_module, "MAX_FILES", 2)
    root = places["project"] / ".agents" / "skills"
    for i in range(6):
        write_skill(root, f"s{i}")
    refs = root / "s0" / "references"
    refs.mkdir()
    for i in range(5):
        (refs / f"r{i}.md").write_text("x", encoding="utf-8")
    catalog = discover_skills(roots_of(places))
    assert list(catalog.skills) == ["s0", "s1", "s2"]
    assert "skill-root-too-large" in {p.code for p in catalog.problems}
    assert catalog.skills["s0"].files() == ("references/r0.md", "references/r1.md")


def test_an_oversized_skill_file_is_refused(places: dict[str, Path]) -> None:
    root = places["project"] / ".agents" / "skills"
    folder = write_skill(root, "big")
    (folder / "SKILL.md").write_text(
        "---\nname: big\ndescription: d\n---\n" + "x" * (skills_module.MAX_BYTES + 10),
        encoding="utf-8",
    )
    catalog = discover_skills(roots_of(places))
    assert catalog.skills == {}
    assert "larger than" in catalog.problems[0].message
