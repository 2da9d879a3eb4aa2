"""Settings files: global < project, validated, with errors that name the file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from membrane import Settings, load_settings
from membrane.errors import SettingsError
from membrane.lowlevel import membrane_home


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_no_files_give_the_documented_defaults(project: Path) -> None:
    assert load_settings(project=project) == Settings()


def test_membrane_home_follows_the_environment(isolated_home: Path) -> None:
    assert membrane_home() == isolated_home


def test_the_project_file_overrides_the_global_one_key_by_key(
    project: Path, isolated_home: Path
) -> None:
    write(
        isolated_home / "config.toml",
        'default_tools = ["Read"]\nmax_depth = 5\nfallback_subagent = "explorer"\n'
        '[roles.ci]\nallow = ["Read"]\n[roles.ops]\ndeny = ["Bash"]\n',
    )
    write(
        project / ".membrane" / "config.toml",
        'max_depth = "provider-managed"\n[roles.ci]\ndeny = ["Write"]\n'
        "[rate_limits.Bash]\nmax_calls = 3\nwindow_seconds = 60\n",
    )
    settings = load_settings(project=project)
    assert settings.default_tools == ("Read",)
    assert settings.max_depth == "provider-managed"
    assert settings.fallback_subagent == "explorer"
    assert settings.roles["ci"].allow is None and settings.roles["ci"].deny == ("Write",)
    assert settings.roles["ops"].deny == ("Bash",)
    assert settings.rate_limits["Bash"].max_calls == 3
    assert settings.rate_limits["Bash"].window_seconds == 60.0


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("max_depth = -1\n", "max_depth"),
        ('max_depth = "deep"\n', "max_depth"),
        ('default-tools = ["Read"]\n', "default-tools"),
        ('worktrees_enabled = "yes"\n', "worktrees_enabled"),
        ("[roles.ci]\n", "roles.ci"),
        ("[rate_limits.Bash]\nmax_calls = 0\nwindow_seconds = 1\n", "rate_limits.Bash.max_calls"),
        ("max_depth = \n", None),
        ("max_depth = 9007199254740992\n", "max_depth"),
        ("max_depth = true\n", "max_depth"),
        ("max_concurrency = 9007199254740992\n", "max_concurrency"),
        (
            "[rate_limits.Bash]\nmax_calls = 1\nwindow_seconds = inf\n",
            "rate_limits.Bash.window_seconds",
        ),
    ],
)
def test_a_bad_setting_names_the_file_and_key(project: Path, text: str, key: str | None) -> None:
    path = project / ".membrane" / "config.toml"
    write(path, text)
    with pytest.raises(SettingsError) as caught:
        load_settings(project=project)
    assert caught.value.code == "settings-invalid"
    assert caught.value.data["path"] == str(path)
    assert caught.value.data["key"] == key
    assert str(path) in caught.value.message
    assert "Value error" not in caught.value.message  # the validator's own words, not pydantic's


def test_a_misspelt_key_suggests_the_real_one(project: Path) -> None:
    write(project / ".membrane" / "config.toml", 'default-tools = ["Read"]\n')
    with pytest.raises(SettingsError) as caught:
        load_settings(project=project)
    assert caught.value.data["hint"] == "did you mean `default_tools`?"


def test_every_settings_field_can_be_set_from_a_file(project: Path) -> None:
    import dataclasses

    from membrane.config.schema import CONFIG_KEYS

    fields = dataclasses.fields(Settings)
    assert {f.name for f in fields if not f.metadata.get("derived")} == set(CONFIG_KEYS)


def test_the_largest_safe_integer_is_a_valid_depth(project: Path) -> None:
    write(project / ".membrane" / "config.toml", "max_depth = 9007199254740991\n")
    assert load_settings(project=project).max_depth == 2**53 - 1


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('["read", "GREP", "Read"]', ("Read", "Grep")),
        ('["*"]', ("Read", "Glob", "Grep", "BrowserPreview", "Bash", "Edit", "Write")),
        ('["All"]', ("Read", "Glob", "Grep", "BrowserPreview", "Bash", "Edit", "Write")),
        ('["none"]', ()),
        ("[]", ()),
        ('"*"', ("Read", "Glob", "Grep", "BrowserPreview", "Bash", "Edit", "Write")),
        ('"read, grep"', ("Read", "Grep")),
        ('"none"', ()),
    ],
)
def test_default_tools_are_canonical_builtin_names(
    project: Path, value: str, expected: tuple[str, ...]
) -> None:
    write(project / ".membrane" / "config.toml", f"default_tools = {value}\n")
    assert load_settings(project=project).default_tools == expected


@pytest.mark.parametrize(
    ("value", "needle", "hint"),
    [
        ('["inherit"]', "cannot hold `inherit`", "`tools: inherit` in the definitions"),
        ('["Read", "INHERIT"]', "cannot hold `inherit`", "`tools: inherit` in the definitions"),
        ('["Raed"]', "`Raed`", "did you mean `Read`?"),
        ('["bsh"]', "`bsh`", "did you mean `Bash`?"),
        ('["Task"]', "`Task`", "use Read, Glob"),
        ('["Bash(rm *)"]', "argument pattern `Bash(rm *)`", "write `Bash` alone"),
        ('["ext:notes"]', "selector `ext:notes`", "`tools` of the definitions"),
        ('["mcp__gh__*"]', "selector `mcp__gh__*`", "`tools` of the definitions"),
        ('["none", "Read"]', "mixes `none`", "`[]`"),
    ],
)
def test_default_tools_outside_the_assignable_builtins_are_refused(
    project: Path, value: str, needle: str, hint: str
) -> None:
    path = project / ".membrane" / "config.toml"
    write(path, f"default_tools = {value}\n")
    with pytest.raises(SettingsError) as caught:
        load_settings(project=project)
    assert caught.value.data["key"] == "default_tools"
    assert caught.value.data["path"] == str(path)
    assert needle in caught.value.message
    assert hint in caught.value.data["hint"]
