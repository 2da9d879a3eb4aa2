"""Generated ``config.toml`` files (right keys with right and wrong values, nested tables,
unknown keys) loaded through ``load_settings``: each is either taken with the values it wrote or
refused with one ``SettingsError`` naming the file and a key it holds, never another exception."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from membrane import load_settings
from membrane.config.mcp_servers import mcp_server_spec
from membrane.config.schema import CONFIG_KEYS
from membrane.errors import SettingsError


@pytest.fixture
def project(tmp_path: Path, isolated_home: Path) -> Path:
    (tmp_path / "project" / ".membrane").mkdir(parents=True)
    return tmp_path / "project"


_WORDS = st.sampled_from(
    [
        "",
        "Read",
        "read, grep",
        "*",
        "none",
        "inherit",
        "provider-managed",
        "full",
        "normal",
        "auto",
        "guard",
        "openai",
        "scripted",
        "default",
        "all",
        "OPENAI_KEY",
        "1bad",
        "http://127.0.0.1:9/mcp",
        "x",
    ]
)
_TEXT = _WORDS | st.text(st.characters(exclude_categories=["Cs"]), max_size=8)
_INTS = st.sampled_from([0, 1, -1, 3, 2**53 - 1, 2**53]) | st.integers(-(2**63), 2**63 - 1)
_FLOATS = st.sampled_from([0.0, -0.0, 0.5, 1.0, 60.0, math.inf, -math.inf, math.nan]) | st.floats()
_SCALARS = (
    st.booleans() | _INTS | _FLOATS | _TEXT | st.dates(dt.date(1900, 1, 1), dt.date(2100, 1, 1))
)


def _tables(keys: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    """Tables of mostly ``keys`` (sometimes a stranger), of any values."""
    values = st.recursive(
        _SCALARS,
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.sampled_from(keys) | _TEXT, inner, max_size=3)
        ),
        max_leaves=6,
    )
    return st.dictionaries(st.sampled_from([*keys, "api_key", "colour"]), values, max_size=4)


_ROLE = _tables(["allow", "deny", "permissions"])
_LIMIT = _tables(["max_calls", "window_seconds"])
_SERVER_KEYS = ["command", "args", "env", "cwd", "url", "headers", "timeout", "startup_timeout"]
_SERVER = _tables(_SERVER_KEYS)
_MODEL = _tables(["provider", "model", "base_url", "api_key_env", "stream", "timeout"])
_NAMED = st.sampled_from(["ci", "Bash", "local", "my-server", "a__b"])
_NESTED = {
    "roles": st.dictionaries(_NAMED, _ROLE, max_size=2),
    "rate_limits": st.dictionaries(_NAMED, _LIMIT, max_size=2),
    "mcp_servers": st.dictionaries(_NAMED, _SERVER, max_size=2),
    "models": st.dictionaries(_NAMED, _MODEL, max_size=2),
    "budget": _tables(["tokens", "turns", "seconds"]),
    "model_aliases": st.dictionaries(_TEXT, _TEXT | _INTS, max_size=2),
}
_FILES = st.dictionaries(
    st.sampled_from(list(CONFIG_KEYS)),
    _SCALARS | st.lists(_TEXT | _INTS, max_size=3),
    max_size=4,
) | st.fixed_dictionaries({}, optional=_NESTED)


def _string(text: str) -> str:
    escaped = (
        f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F or c in '"\\' else c for c in text
    )
    return '"' + "".join(escaped) + '"'


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return (
            "nan"
            if math.isnan(value)
            else {math.inf: "inf", -math.inf: "-inf"}.get(value, repr(value))
        )
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(map(_toml, value)) + "]"
    assert isinstance(value, dict)
    return "{" + ", ".join(f"{_string(k)} = {_toml(v)}" for k, v in value.items()) + "}"


def _written(loaded: object, key: str, value: object) -> None:
    """A key the file wrote holds its value in the loaded settings (seconds as floats)."""
    got = getattr(loaded, key)
    if key in ("default_tools", "rules") or isinstance(value, dict):
        return  # canonicalised, or tables of entries (checked below and by their own tests)
    if isinstance(value, list):
        assert list(got) == value
    elif isinstance(value, int) and isinstance(got, float):
        assert got == float(value)
    else:
        assert got == value


@settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(raw=_FILES)
@example(raw={"max_depth": -1, "zzz": 1})
@example(raw={"rate_limits": {"B": {"window_seconds": -math.inf}}})
@example(raw={"models": {"m": {"provider": "openai", "model": "x", "api_key": "k"}}})
@example(raw={"roles": {"ci": {"allow": [1], "zz": 1}}})
def test_a_generated_settings_file_is_taken_as_written_or_refused_at_a_key_it_holds(
    tmp_path: Path, raw: dict[str, Any]
) -> None:
    home = tmp_path / "home"
    path = tmp_path / "project" / ".membrane" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(f"{_string(k)} = {_toml(v)}\n" for k, v in raw.items())
    path.write_text(text, encoding="utf-8")
    raw = tomllib.loads(text)  # what the loader reads
    try:
        loaded = load_settings(project=path.parent.parent, home=home)
    except SettingsError as exc:
        event("refused")
        key = str(exc.data["key"])
        assert key.split(".")[0] in raw, key
        assert exc.message.startswith(f"{path}: ") or key == "default_role"
        assert exc.data["hint"]
        return
    event("accepted")
    for key, value in raw.items():
        _written(loaded, key, value)
    for name, entry in raw.get("models", {}).items():
        kept = {k: v for k, v in dataclasses.asdict(loaded.models[name]).items() if k in entry}
        assert kept == {
            k: float(v) if k == "timeout" and isinstance(v, int) else v for k, v in entry.items()
        }
    for tool, limit in raw.get("rate_limits", {}).items():
        assert dataclasses.asdict(loaded.rate_limits[tool]) == {
            "max_calls": limit["max_calls"],
            "window_seconds": float(limit["window_seconds"]),
        }


_YAMLISH = st.recursive(
    st.none() | _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner)
        | st.dictionaries(st.sampled_from(_SERVER_KEYS) | _TEXT | _INTS, inner, max_size=3)
    ),
    max_leaves=6,
)


@settings(max_examples=200, deadline=None)
@given(raw=_SERVER | _YAMLISH)
@example(raw={"env": {1: "a"}})
@example(raw={"timeout": 0})
def test_an_mcp_server_entry_is_taken_as_written_or_refused_naming_its_table(
    raw: object,
) -> None:
    try:
        spec = mcp_server_spec("srv", raw, path="config.toml", key="mcp_servers.srv")
    except SettingsError as exc:
        assert exc.message.startswith("config.toml: `mcp_servers.srv` ")
        assert exc.data["key"] == "mcp_servers.srv"
        return
    assert isinstance(raw, dict)
    assert (spec.command, spec.url, spec.cwd) == (
        raw.get("command"),
        raw.get("url"),
        raw.get("cwd"),
    )
    assert list(spec.args) == raw.get("args", []) and dict(spec.env) == raw.get("env", {})
    assert (spec.timeout, spec.startup_timeout) == (
        float(raw.get("timeout", 60.0)),
        float(raw.get("startup_timeout", 30.0)),
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("lease_seconds = 0\n", "`lease_seconds`: Input should be greater than 0 (got 0.0)"),
        ("persona = 1\n", "`persona`: Input should be a valid string (got 1)"),
        (
            "[rate_limits.Bash]\nwindow_seconds = 1\n",
            "`rate_limits.Bash.max_calls`: Field required (got {'window_seconds': 1})",
        ),
        (
            'sandbox = "docker"\n',
            "`sandbox`: Input should be 'auto', 'bubblewrap', 'landlock' or 'guard'",
        ),
    ],
)
def test_a_wrong_value_is_reported_in_the_words_users_know(
    project: Path, text: str, message: str
) -> None:
    path = project / ".membrane" / "config.toml"
    path.write_text(text)
    with pytest.raises(SettingsError) as caught:
        load_settings(project=project)
    assert message in caught.value.message


def test_a_whole_number_of_seconds_too_large_for_a_float_is_refused(project: Path) -> None:
    path = project / ".membrane" / "config.toml"
    path.write_text(f"lease_seconds = {10**400}\n")
    with pytest.raises(SettingsError) as caught:
        load_settings(project=project)
    assert caught.value.data["key"] == "lease_seconds"
    assert "finite number" in caught.value.message
