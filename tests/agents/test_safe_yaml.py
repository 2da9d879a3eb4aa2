"""The C safe loader reads a frontmatter exactly as ruamel's YAML 1.2 does, or not at all.

Identity is checked on both corpora: the shared corpus of real agent files (read in place,
skipped when absent) and the project's own definitions (the example workspace and the builtin
agents). Every text where YAML 1.1 and 1.2 differ, and every text the C loader would read
differently from ruamel (a repeated key, an alias, a merge key), falls back to ruamel.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from membrane.agents.definition import AgentDefinition
from membrane.agents.frontmatter import parse_definition, split_frontmatter
from membrane.agents.safe_yaml import load_mapping
from membrane.errors import DefinitionError

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO.parent / "shared" / "corpus" / "agents"
OWN = sorted(
    [
        *(REPO / "examples").rglob("*.md"),
        *(REPO / "src" / "membrane" / "builtin_agents").glob("*.md"),
    ]
)


def _both(text: str, path: str) -> tuple[object, object]:
    """The definition (or the error) read with the C loader and with ruamel alone."""
    out: list[AgentDefinition | dict[str, object]] = []
    for c_loader in (True, False):
        try:
            out.append(parse_definition(text, path=path, root="project", c_loader=c_loader))
        except DefinitionError as exc:
            out.append(exc.to_dict())
    return out[0], out[1]


def _c_read(text: str, path: str) -> bool:
    """Whether the C loader read the file's frontmatter (rather than falling back)."""
    try:
        frontmatter = split_frontmatter(text, path=path)
    except DefinitionError:
        return False
    return load_mapping(frontmatter.yaml_text) is not None


def _identical(files: list[Path]) -> tuple[int, list[str]]:
    read, differing = 0, []
    for file in files:
        text = file.read_text(encoding="utf-8", errors="replace")
        fast, exact = _both(text, str(file))
        if fast != exact:
            differing.append(str(file))
        read += _c_read(text, str(file))
    return read, differing


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the agent corpus is not present")
def test_every_corpus_file_reads_the_same_through_the_c_loader_as_through_ruamel() -> None:
    files = sorted(CORPUS.rglob("*.md"))
    read, differing = _identical(files)
    assert len(files) >= 400
    assert differing == []
    # The fast path is the common one: only files 1.1 reads otherwise, or that only the
    # repairs make readable, fall back.
    assert read >= 0.95 * len(files), (read, len(files))


def test_the_projects_own_definitions_read_the_same_and_all_through_the_c_loader() -> None:
    files = [f for f in OWN if f.read_text(encoding="utf-8").startswith("---")]
    assert len(files) >= 6
    read, differing = _identical(files)
    assert differing == []
    assert read == len(files)


# Each value means something else in YAML 1.1 than in 1.2, or is one the C loader would read
# differently from ruamel: all fall back.
DIVERGENT = [
    "background: yes",
    "background: off",
    "background: On",
    "max_turns: 0777",
    "max_turns: 0o17",
    "max_turns: 0x1F",
    "max_turns: 1_000",
    "max_turns: 1:20",
    "max_turns: +12",
    "description: 1e3",
    "description: 1.5e+3",
    "description: .inf",
    "description: 2024-01-01",
    "description: 12 steps",
    "description: !!binary aGVsbG8=",
    "description: !custom hello",
    "description: !!int '12'",
    "base: &b {model: haiku}\nextra: *b",
    "base: &b {model: haiku}\nextra:\n  <<: *b",
    "name: a\nname: b",
    "tools: [Read, Grep",
    "[Read, Grep]",
    "- Read",
]


@pytest.mark.parametrize("frontmatter", DIVERGENT)
def test_a_text_whose_meaning_could_differ_falls_back_to_ruamel(frontmatter: str) -> None:
    assert load_mapping(frontmatter + "\n") is None
    text = f"---\n{frontmatter}\n---\nBody.\n"
    fast, exact = _both(text, "x.md")
    assert fast == exact


def test_the_fallback_keeps_yaml_12_meanings_and_precise_errors() -> None:
    definition = parse_definition(
        "---\nname: late\ndescription: off\nmax_turns: 010\n---\nBody.\n", path="x.md", root="p"
    )
    assert definition.description == "off"  # a string in YAML 1.2, False in 1.1
    assert definition.max_turns == 10  # ten in YAML 1.2, eight in 1.1
    with pytest.raises(DefinitionError) as repeated:
        parse_definition("---\nname: a\nname: b\n---\n", path="x.md", root="p")
    assert repeated.value.data["line"] == 3 and repeated.value.data["field"] == "name"


def test_values_both_versions_agree_on_are_read_by_the_c_loader() -> None:
    text = (
        "name: reader\n"
        "description: 'Reads: files'\n"
        "tools: [Read, Grep]\n"
        "max_turns: 12\n"
        "temperature: 0.5\n"
        "background: true\n"
        "model: ~\n"
        "prompt: |\n  line one\n  line two\n"
    )
    loaded = load_mapping(text)
    assert loaded is not None
    mapping, lines = loaded
    assert mapping == {
        "name": "reader",
        "description": "Reads: files",
        "tools": ["Read", "Grep"],
        "max_turns": 12,
        "temperature": 0.5,
        "background": True,
        "model": None,
        "prompt": "line one\nline two\n",
    }
    assert lines["tools"] == 2 and lines["prompt"] == 7
