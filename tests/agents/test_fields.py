"""Field values: UNSET versus false versus [], list forms, near-misses, authority errors."""

from __future__ import annotations

import pytest

from membrane import UNSET, AgentDefinition, parse_definition
from membrane.errors import DefinitionError


def parse(frontmatter: str, path: str = "agents/worker.md") -> AgentDefinition:
    return parse_definition(f"---\n{frontmatter}\n---\nBody\n", path=path, root="project")


def test_a_field_left_out_is_unset_and_differs_from_false_and_empty() -> None:
    left_out = parse("name: w")
    explicit = parse("name: w\ninherit_context: false\ntools: []\nextensions: false")
    assert left_out.inherit_context is UNSET and left_out.tools is UNSET
    assert left_out.extensions is UNSET
    assert explicit.inherit_context is False
    assert explicit.tools == ()
    assert explicit.extensions is False


def test_tools_none_and_tools_empty_list_both_mean_no_tools() -> None:
    assert parse("tools: none").tools == ()
    assert parse("tools: []").tools == ()
    assert parse("tools: None").tools == ()


@pytest.mark.parametrize(
    "value",
    [
        "read, grep, find",
        '"read, grep, find"',
        "[read, grep, find]",
        "\n  - read\n  - grep\n  - find",
    ],
)
def test_comma_string_and_yaml_list_forms_give_the_same_tokens(value: str) -> None:
    assert parse(f"tools: {value}").tools == ("read", "grep", "find")


def test_tokens_keep_selectors_and_parenthesised_commas() -> None:
    d = parse("tools: inherit, ext:alpha/search, mcp__gh__*")
    assert d.tools == ("inherit", "ext:alpha/search", "mcp__gh__*")
    assert d.inherits_tools
    denied = parse("disallowed_tools: Bash(git log:*, git diff:*), Write")
    assert denied.disallowed_tools == ("Write",)
    assert [(r.tool, r.pattern, r.verdict) for r in denied.rules] == [
        ("Bash", "git log:*", "deny"),
        ("Bash", "git diff:*", "deny"),
    ]


@pytest.mark.parametrize(
    ("value", "kept", "patterns"),
    [
        ("Read, Bash(git log:*)", ("Read",), ["git log:*"]),
        ("[Read, 'Bash(git log:*, git diff:*)']", ("Read",), ["git log:*", "git diff:*"]),
        ("Bash(rm *)", (), ["rm *"]),
    ],
)
def test_an_argument_pattern_in_tools_is_an_allow_rule_that_grants_the_tool(
    value: str, kept: tuple[str, ...], patterns: list[str]
) -> None:
    d = parse(f"tools: {value}")
    assert d.tools == kept
    assert d.warnings == ()
    assert [(r.tool, r.pattern, r.verdict, r.grants) for r in d.rules] == [
        ("Bash", p, "allow", True) for p in patterns
    ]


def test_a_pattern_membrane_cannot_read_grants_nothing_and_says_so() -> None:
    d = parse("tools: Read, WebFetch(domain:example.com)")
    assert d.tools == ("Read",)
    assert d.rules == ()
    [warning] = d.warnings
    assert (warning.code, warning.line) == ("argument-pattern", 2)
    assert "would grant all of WebFetch" in warning.message


def test_an_argument_pattern_in_disallowed_tools_is_a_deny_rule() -> None:
    d = parse("disallowed_tools: Bash(rm *)")
    assert d.disallowed_tools == ()
    assert [(r.tool, r.pattern, r.verdict, r.grants) for r in d.rules] == [
        ("Bash", "rm *", "deny", False)
    ]
    assert d.warnings == ()


def test_an_unreadable_pattern_in_disallowed_tools_denies_the_whole_tool() -> None:
    d = parse("disallowed_tools: WebFetch(domain:x)")
    assert d.disallowed_tools == ("WebFetch",)
    [warning] = d.warnings
    assert warning.code == "argument-pattern"
    assert "denies all of WebFetch" in warning.message


def test_rules_apply_allow_then_ask_then_deny_whatever_the_key_order() -> None:
    d = parse(
        "disallowed_tools: Bash(rm:*)\nask_tools: Bash(git push:*), mcp__gh__create\n"
        "tools: Read, Bash(git:*)"
    )
    assert [(r.text, r.verdict, r.source) for r in d.rules] == [
        ("Bash(git:*)", "allow", "tools"),
        ("Bash(git push:*)", "ask", "ask_tools"),
        ("mcp__gh__create", "ask", "ask_tools"),
        ("Bash(rm:*)", "deny", "disallowed_tools"),
    ]
    assert d.ask_tools == ("Bash", "mcp__gh__create")


@pytest.mark.parametrize("value", ["(git)", "Bash(git", "Bash)", "Bash(x)y"])
def test_a_parenthesis_that_is_not_a_pattern_is_an_error(value: str) -> None:
    with pytest.raises(DefinitionError) as caught:
        parse(f"tools: ['{value}']")
    assert caught.value.data["field"] == "tools"


def test_the_disallowed_tools_alias_is_accepted_without_warning() -> None:
    d = parse("disallowedTools: Bash, Write")
    assert d.disallowed_tools == ("Bash", "Write")
    assert d.warnings == ()
    assert d.lines["disallowed_tools"] == 2


@pytest.mark.parametrize(
    ("first", "second"),
    [("disallowed_tools", "disallowedTools"), ("disallowedTools", "disallowed_tools")],
)
def test_both_spellings_of_disallowed_tools_at_once_is_an_error_naming_both(
    first: str, second: str
) -> None:
    with pytest.raises(DefinitionError) as caught:
        parse(f"{first}: Bash\n{second}: Write")
    assert f"given twice (as `{first}` and `{second}`)" in caught.value.message


def test_the_name_falls_back_to_the_file_stem_when_absent_or_blank() -> None:
    assert parse("description: x", path="a/b/reviewer.md").name == "reviewer"
    assert parse('name: "  "', path="a/b/reviewer.md").name == "reviewer"
    assert parse("name: Custom", path="a/b/reviewer.md").name == "Custom"
    assert parse("description: x", path="a/.pi__agents__auditor.md").name == "pi__agents__auditor"


@pytest.mark.parametrize(
    "name",
    ["ns:code-reviewer", "v1.2_beta", "A", "x" * 128],
)
def test_a_name_of_letters_digits_and_separators_is_accepted(name: str) -> None:
    assert parse(f"name: '{name}'").name == name


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("Python Security Expert", "python-security-expert"),
        ("-leading-dash", "leading-dash"),
        (".hidden", "hidden"),
        ("has space", "has-space"),
        ("C++ Pro", "c-pro"),
    ],
)
def test_a_name_that_only_needs_a_slug_is_repaired_with_a_warning(name: str, slug: str) -> None:
    definition = parse(f"name: '{name}'")
    assert definition.name == slug
    [warning] = [w for w in definition.warnings if w.code == "repaired-name"]
    assert warning.line == 2 and slug in warning.message


@pytest.mark.parametrize(
    "name",
    [
        "../../x",
        "a/b",
        "a<b>",
        "a]b[/red] [bold]x",
        "evil\u202etxt.exe",
        "a\\x00b",
        "x" * 129,
    ],
)
def test_a_name_outside_the_safe_character_set_makes_the_file_unusable(name: str) -> None:
    with pytest.raises(DefinitionError) as caught:
        parse(f'name: "{name}"')
    assert (caught.value.data["field"], caught.value.data["line"]) == ("name", 2)
    assert "letters, digits" in caught.value.data["hint"]
    assert "\u202e" not in caught.value.message


def test_a_file_name_that_is_no_valid_name_needs_a_name_field() -> None:
    with pytest.raises(DefinitionError) as caught:
        parse("description: x", path="agents/my agent.md")
    assert (caught.value.data["field"], caught.value.data["line"]) == ("name", 1)
    assert "add a `name` field" in caught.value.data["hint"]
    assert parse("name: mine", path="agents/my agent.md").name == "mine"


@pytest.mark.parametrize(
    ("key", "meant"),
    [
        ("allowed-tools", "tools"),
        ("allowedTools", "tools"),
        ("allowed_tools", "tools"),
        ("tool", "tools"),
        ("disallowed-tools", "disallowed_tools"),
        ("exclude-extensions", "exclude_extensions"),
        ("skill", "skills"),
    ],
)
def test_a_near_miss_of_an_authority_field_is_kept_warned_loudly_and_grants_nothing(
    key: str, meant: str
) -> None:
    d = parse(f"{key}: Bash")
    assert d.tools is UNSET and d.disallowed_tools is UNSET
    assert d.extra == {key: "Bash"}
    [warning] = d.warnings
    assert warning.code == "authority-near-miss"
    assert f"did you mean `{meant}`?" in warning.message
    assert warning.line == 2


def test_unknown_keys_are_kept_and_warned_with_a_suggestion_when_close() -> None:
    d = parse("temperature: 0.2\nmaxTurns: 5")
    assert d.extra == {"temperature": 0.2, "maxTurns": 5}
    assert d.max_turns is UNSET
    assert [w.code for w in d.warnings] == ["unknown-key", "unknown-key"]
    assert "did you mean `max_turns`?" in d.warnings[1].message


@pytest.mark.parametrize(
    ("frontmatter", "field"),
    [
        ("isolation: maybe", "isolation"),
        ("isolation: false", "isolation"),
        ("isolated: sometimes", "isolated"),
        ("enabled: 3", "enabled"),
        ("memory: everywhere", "memory"),
        ("tools: true", "tools"),
        ("tools:", "tools"),
        ("tools: Read Grep", "tools"),
        ("tools: [Read, 5]", "tools"),
        ("tools: none, Bash", "tools"),
        ("tools: {Read: yes}", "tools"),
        ("extensions: 3", "extensions"),
        ("inherit_context: perhaps", "inherit_context"),
        ("permission: 7", "permission"),
    ],
)
def test_a_malformed_authority_field_makes_the_file_unusable(frontmatter: str, field: str) -> None:
    with pytest.raises(DefinitionError) as caught:
        parse(f"name: w\n{frontmatter}")
    assert caught.value.data["field"] == field
    assert caught.value.data["line"] == 3
    assert caught.value.data["hint"]


@pytest.mark.parametrize(
    ("frontmatter", "field"),
    [
        ("max_turns: abc", "max_turns"),
        ("max_turns: 0", "max_turns"),
        ("prompt_mode: merge", "prompt_mode"),
        ("run_in_background: later", "run_in_background"),
        ("model: {a: b}", "model"),
        ("color: {r: 1}", "color"),
        ("description: ''", "description"),
    ],
)
def test_a_malformed_cosmetic_field_warns_and_stays_unset(frontmatter: str, field: str) -> None:
    d = parse(f"name: w\n{frontmatter}")
    assert getattr(d, field) is UNSET
    [warning] = d.warnings
    assert (warning.code, warning.line) == ("invalid-value", 3)


def test_yes_and_no_words_are_read_as_booleans_with_a_warning() -> None:
    d = parse("isolated: yes\nrun_in_background: No")
    assert (d.isolated, d.run_in_background) == (True, False)
    assert [w.code for w in d.warnings] == ["coerced-value", "coerced-value"]


def test_every_documented_field_is_read() -> None:
    d = parse(
        "name: reviewer\ndescription: Reviews\nmodel: inherit\nthinking: high\nmax_turns: 8\n"
        "tools: read, grep\ndisallowed_tools: grep\nextensions: alpha, beta\n"
        "exclude_extensions: beta\nskills: true\nprompt_mode: append\ninherit_context: false\n"
        "run_in_background: false\nisolated: false\nisolation: off\nmemory: project\n"
        "allowed_subagents: [explorer]\nenabled: true\npermission: inherit\n"
        "ask_tools: Bash(git push:*)\n"
        "display_name: Reviewer\ncolor: red"
    )
    assert d.warnings == ()
    assert d.to_json() | {"body": None, "lines": None} == {
        "name": "reviewer",
        "root": "project",
        "path": "agents/worker.md",
        "dialect": "membrane",
        "description": "Reviews",
        "model": "inherit",
        "thinking": "high",
        "max_turns": 8,
        "tools": ["read", "grep"],
        "disallowed_tools": ["grep"],
        "extensions": ["alpha", "beta"],
        "exclude_extensions": ["beta"],
        "skills": True,
        "prompt_mode": "append",
        "inherit_context": False,
        "run_in_background": False,
        "isolated": False,
        "isolation": "off",
        "memory": "project",
        "allowed_subagents": ["explorer"],
        "ask_tools": ["Bash"],
        "enabled": True,
        "permission": "inherit",
        "display_name": "Reviewer",
        "color": "red",
        "body": None,
        "lines": None,
        "keys": {},
        "extra": {},
        "rules": [
            {
                "tool": "Bash",
                "pattern": "git push:*",
                "verdict": "ask",
                "rule": "Bash(git push:*)",
                "source": "ask_tools",
            }
        ],
        "warnings": [],
    }


@pytest.mark.parametrize(
    ("frontmatter", "field", "needle"),
    [
        ("tools: !!binary UmVhZA==", "tools", "binary data"),
        ("tools: 2024-01-01", "tools", "the date 2024-01-01"),
        ("tools: [Read, 2024-01-01]", "tools", "the date 2024-01-01"),
        ("disallowed_tools: !!set {Bash}", "disallowed_tools", "a set"),
        ("allowed_subagents: !agent scout", "allowed_subagents", "tagged `!agent`"),
        ("exclude_extensions: [2024-01-01T10:00:00]", "exclude_extensions", "the date"),
    ],
)
def test_a_name_list_holding_a_yaml_typed_value_is_refused(
    frontmatter: str, field: str, needle: str
) -> None:
    with pytest.raises(DefinitionError) as caught:
        parse(f"name: w\n{frontmatter}")
    assert (caught.value.data["field"], caught.value.data["line"]) == (field, 3)
    assert needle in caught.value.message


def test_an_explicitly_tagged_string_is_a_name() -> None:
    assert parse("allowed_subagents: !!str 2024-01-01").allowed_subagents == ("2024-01-01",)


def test_a_star_alone_allows_any_subagent_but_not_mixed_with_names() -> None:
    assert parse("allowed_subagents: '*'").allowed_subagents == ("*",)
    with pytest.raises(DefinitionError) as caught:
        parse('name: w\nallowed_subagents: [scout, "*"]')
    assert caught.value.data["field"] == "allowed_subagents"
    assert "mixes `*` with names" in caught.value.message


def test_the_hint_for_a_boolean_subagent_list_suggests_agent_names() -> None:
    with pytest.raises(DefinitionError) as caught:
        parse("name: w\nallowed_subagents: true")
    hint = caught.value.data["hint"]
    assert "allowed_subagents: explorer, code-reviewer" in hint
    assert "Read" not in hint


def test_a_per_tool_permission_map_from_another_product_is_ignored_loudly() -> None:
    d = parse("permission:\n  edit: deny\n  bash: allow")
    assert d.permission is UNSET
    assert d.extra == {"permission": {"edit": "deny", "bash": "allow"}}
    assert [w.code for w in d.warnings] == ["authority-key-ignored"]


def test_a_tools_token_that_selects_nothing_is_warned_so_validate_shows_it() -> None:
    d = parse("tools: read, Nope, TaskWait, ext:notes/summarize, mcp__gh__*, inherit, *")
    assert d.tools == (
        "read",
        "Nope",
        "TaskWait",
        "ext:notes/summarize",
        "mcp__gh__*",
        "inherit",
        "*",
    )
    warnings = [(w.code, w.line) for w in d.warnings]
    assert warnings == [("unknown-tool", 2), ("unknown-tool", 2)]
    nope, task_wait = d.warnings
    assert "`Nope` is not a built-in tool or a selector" in nope.message
    assert "allowed_subagents" in task_wait.message


def test_disallowed_tools_may_name_any_tool_without_a_warning() -> None:
    d = parse("disallowed_tools: summarize, Nope")
    assert d.warnings == ()
