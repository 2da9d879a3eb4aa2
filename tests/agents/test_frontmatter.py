"""The tolerant reader: each repair is applied and warned about; the rest fails precisely."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from membrane import UNSET, parse_definition
from membrane.agents import read_definition
from membrane.errors import DefinitionError


def parse(text: str, path: str = "agents/reviewer.md"):  # type: ignore[no-untyped-def]
    return parse_definition(text, path=path, root="project")


def codes(definition) -> list[str]:  # type: ignore[no-untyped-def]
    return [w.code for w in definition.warnings]


def test_a_clean_file_parses_without_warnings_and_records_key_lines() -> None:
    d = parse("---\nname: reviewer\ndescription: Reviews code\ntools: Read, Grep\n---\nBody.\n")
    assert (d.name, d.description, d.tools, d.body) == (
        "reviewer",
        "Reviews code",
        ("Read", "Grep"),
        "Body.",
    )
    assert d.warnings == ()
    assert dict(d.lines) == {"name": 2, "description": 3, "tools": 4}


def test_yaml_1_2_keeps_off_and_yes_as_strings() -> None:
    d = parse("---\nthinking: off\nisolation: off\nmodel: yes\n---\n")
    assert d.thinking == "off"
    assert d.isolation == "off"
    assert d.model == "yes"


def test_byte_order_mark_and_crlf_are_repaired_with_warnings() -> None:
    d = parse("\ufeff---\r\nname: a\r\ntools: Read\r\n---\r\nBody\r\n")
    assert (d.name, d.tools, d.body) == ("a", ("Read",), "Body")
    assert codes(d) == ["repaired-bom", "repaired-line-endings"]
    assert all(w.line == 1 for w in d.warnings)


def test_blank_lines_before_the_opening_fence_are_skipped_and_lines_stay_true() -> None:
    d = parse("\n\n---\nname: a\ntools: Read\n---\n")
    assert d.tools == ("Read",)
    assert codes(d) == ["repaired-leading-blank"]
    assert d.warnings[0].line == 3
    assert d.lines["tools"] == 5


def test_an_indented_block_is_dedented() -> None:
    d = parse("  ---\n  name: a\n  tools: Read, Grep\n  ---\nBody\n")
    assert (d.name, d.tools, d.body) == ("a", ("Read", "Grep"), "Body")
    assert "repaired-indentation" in codes(d)


def test_a_closing_line_of_many_dashes_closes_the_block() -> None:
    d = parse("---\nname: a\ntools: Read\n------------\nBody\n")
    assert (d.tools, d.body) == (("Read",), "Body")
    assert codes(d) == ["repaired-fence"]
    assert d.warnings[0].line == 4


def test_tab_indentation_is_read_as_spaces() -> None:
    d = parse("---\ntools:\n\t- Read\n\t- Grep\n---\n")
    assert d.tools == ("Read", "Grep")
    assert codes(d) == ["repaired-tabs", "repaired-tabs"]


def test_an_unquoted_colon_in_the_description_is_requoted_verbatim() -> None:
    text = (
        "---\nname: gdpr\n"
        "description: Use for privacy. Triggers on: 'GDPR', 'CCPA'.\\n\\nMore\n"
        "tools: Read\n---\n"
    )
    d = parse(text)
    assert d.description == "Use for privacy. Triggers on: 'GDPR', 'CCPA'.\\n\\nMore"
    assert d.tools == ("Read",)
    assert codes(d) == ["repaired-quoting"]
    assert d.warnings[0].line == 3
    assert d.lines["tools"] == 4


def test_example_blocks_that_look_like_keys_are_folded_into_the_description() -> None:
    text = (
        "---\nname: reviewer\n"
        "description: Use this agent when: code changed.\n"
        "<example>\n"
        "Context: The user wants: a review\n"
        'user: "check my diff"\n'
        "</example>\n"
        "tools: Read, Grep\n"
        "---\nBody\n"
    )
    d = parse(text)
    assert d.description == (
        "Use this agent when: code changed. <example> Context: The user wants: a review "
        'user: "check my diff" </example>'
    )
    assert d.tools == ("Read", "Grep")
    assert d.extra == {}
    [warning] = d.warnings
    assert warning.code == "repaired-quoting"
    assert "lines 4-7" in warning.message and "`Context:`" in warning.message
    assert d.lines["tools"] == 8


def test_a_known_key_indented_under_a_one_line_value_is_read_as_its_own_field() -> None:
    d = parse("---\ndescription: Reviews code\n  tools: Read\n---\n")
    assert (d.description, d.tools) == ("Reviews code", ("Read",))
    assert codes(d) == ["repaired-indentation"]
    assert d.warnings[0].line == 3


def test_a_broken_authority_value_is_never_requoted() -> None:
    with pytest.raises(DefinitionError) as caught:
        parse("---\nname: a\ntools: Read: Bash\n---\n")
    error = caught.value
    assert (error.data["line"], error.data["field"]) == (3, "tools")
    assert "quote" in error.data["hint"]


@pytest.mark.parametrize(
    ("text", "line", "field", "needle"),
    [
        ("# Title\n\nNo frontmatter.\n", 1, None, "no frontmatter"),
        ("---\nname: a\ntools: Read\n", 1, None, "never closed"),
        ("---\nname: a\ntools: Read\ntools: Bash\n---\n", 4, "tools", "appears twice"),
        ("---\nname: a\ntools: [Read, Grep\n---\n", 3, "tools", "invalid YAML"),
        ("---\n- just\n- a list\n---\n", 2, None, "is a list, not a mapping"),
        ("---\njust text\n---\n", 2, None, "is a scalar, not a mapping"),
        ("---\nname: a\ncreated: 2023-02-29\n---\n", 3, "created", "day is out of range"),
        ("---\nname: a\nx: !!int abc\n---\n", 3, "x", "invalid YAML value"),
        ("---\nname: a\nx: !!float zz\n---\n", 3, "x", "invalid YAML value"),
        ("---\nname: a\nx: " + "[" * 3000 + "]" * 3000 + "\n---\n", 3, "x", "nests deeper than 64"),
        (
            "---\nname: a\n" + "\n".join(" " * i + "k:" for i in range(1500)) + " 1\n---\n",
            None,
            "k",
            "nests deeper than 64",
        ),
    ],
)
def test_unusable_files_raise_a_precise_definition_error(
    text: str, line: int, field: str | None, needle: str
) -> None:
    with pytest.raises(DefinitionError) as caught:
        parse(text)
    error = caught.value
    assert error.code == "definition-invalid"
    assert error.data["path"] == "agents/reviewer.md"
    assert error.data["line"] == line or (line is None and error.data["line"] > 3)
    assert error.data["field"] == field
    assert error.data["hint"]
    assert needle in error.message


def test_a_value_its_type_refuses_never_escapes_as_a_raw_exception(tmp_path: Path) -> None:
    path = tmp_path / "dated.md"
    path.write_text("---\nname: dated\nx: !!int 12z\ndescription: y\n---\n")
    with pytest.raises(DefinitionError) as caught:
        read_definition(path, root="project")
    assert (caught.value.data["line"], caught.value.data["field"]) == (3, "x")
    assert "quote `x`" in caught.value.data["hint"]


def test_a_reader_never_lets_an_unexpected_exception_escape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import membrane.agents.fields

    def explode(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(membrane.agents.fields, "build_definition", explode)
    path = tmp_path / "a.md"
    path.write_text("---\nname: a\n---\n")
    with pytest.raises(DefinitionError) as caught:
        read_definition(path, root="project")
    assert caught.value.data["path"] == str(path)
    assert "RuntimeError: boom" in caught.value.message


def test_a_file_that_is_not_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "latin.md"
    path.write_bytes(b"---\nname: a\ndescription: caf\xe9\n---\n")
    with pytest.raises(DefinitionError) as caught:
        read_definition(path, root="project")
    assert caught.value.data["line"] == 3
    assert "UTF-8" in caught.value.message


def test_an_empty_frontmatter_is_a_definition_named_after_the_file() -> None:
    d = parse("---\n---\nJust a prompt.\n", path="x/helper.md")
    assert d.name == "helper"
    assert d.tools is UNSET
    assert d.body == "Just a prompt."


_yamlish = st.text(
    alphabet=st.sampled_from(list("ab:-# \n\t'\"[]{},|>*&!\\ \ufeff\r")), max_size=80
)


@settings(max_examples=300, deadline=None)
@given(head=_yamlish, tail=_yamlish)
def test_any_text_either_parses_or_raises_definition_error(head: str, tail: str) -> None:
    for text in (head + tail, f"---\n{head}\n---\n{tail}", f"---\ndescription: {head}\n---\n"):
        try:
            definition = parse(text)
        except DefinitionError as exc:
            assert exc.data["path"] == "agents/reviewer.md"
            continue
        assert definition.name


def test_an_alias_bomb_is_refused_instead_of_expanded() -> None:
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 7)]
    with pytest.raises(DefinitionError) as caught:
        parse("---\n" + "\n".join(levels) + "\n---\n")
    assert "more than" in caught.value.message
