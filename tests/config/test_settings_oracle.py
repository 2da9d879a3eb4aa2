"""The settings loader accepts, refuses and reports exactly what the pydantic schema did.

Generated ``config.toml`` files (right keys with right and wrong values, nested tables, unknown
keys) are loaded through ``load_settings``; the pydantic models of ``pydantic_oracle`` say what
the result must be: the same first error (message, key, hint) or the same values.
"""

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
from pydantic_oracle import McpServer, SettingsFile, first_error, mcp_error

from membrane import load_settings
from membrane.config.load import mcp_server_spec
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
_SERVER = _tables(list(McpServer.model_fields))
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
    st.sampled_from(list(SettingsFile.model_fields)),
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


def _expected_values(raw: dict[str, Any]) -> dict[str, object]:
    """The scalar settings pydantic would have kept (``default_tools`` is canonicalised later)."""
    parsed = SettingsFile.model_validate(raw)
    own = {"default_tools", "roles", "rate_limits", "mcp_servers", "models", "budget"}
    return parsed.model_dump(exclude_none=True, exclude=own)


@settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(raw=_FILES)
@example(raw={"max_depth": -1, "zzz": 1})
@example(raw={"rate_limits": {"B": {"window_seconds": -math.inf}}})
@example(raw={"models": {"m": {"provider": "openai", "model": "x", "api_key": "k"}}})
@example(raw={"roles": {"ci": {"allow": [1], "zz": 1}}})
def test_a_generated_settings_file_loads_as_the_pydantic_schema_said(
    tmp_path: Path, raw: dict[str, Any]
) -> None:
    home = tmp_path / "home"
    path = tmp_path / "project" / ".membrane" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(f"{_string(k)} = {_toml(v)}\n" for k, v in raw.items())
    path.write_text(text, encoding="utf-8")
    raw = tomllib.loads(text)  # what the loader reads
    expected = first_error(raw, path)
    try:
        loaded = load_settings(project=path.parent.parent, home=home)
    except SettingsError as exc:
        got = (exc.message, exc.data["key"], exc.data["hint"])
        if expected is not None:
            event("refused by the schema")
            assert got == expected
            return
        event("refused past the schema")
        # The schema accepted the file: the error is one of the checks past it (tools, roles,
        # budget, each MCP server's own table).
        key = str(exc.data["key"])
        server = mcp_error(raw["mcp_servers"][key[12:]]) if key.startswith("mcp_servers.") else None
        if server is not None and "not a usable name" not in exc.message:
            assert exc.message == f"{path}: `{key}` {server}"
        else:
            assert "unknown setting" not in exc.message and "Input should" not in exc.message
        return
    assert expected is None, expected
    event("accepted")
    for key, value in _expected_values(raw).items():
        assert getattr(loaded, key) == value
    parsed = SettingsFile.model_validate(raw)
    for name, model in (parsed.models or {}).items():
        assert dataclasses.asdict(loaded.models[name]) == model.model_dump()
    for tool, limit in (parsed.rate_limits or {}).items():
        assert dataclasses.asdict(loaded.rate_limits[tool]) == limit.model_dump()


_YAMLISH = st.recursive(
    st.none() | _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner)
        | st.dictionaries(
            st.sampled_from(list(McpServer.model_fields)) | _TEXT | _INTS, inner, max_size=3
        )
    ),
    max_leaves=6,
)


@settings(max_examples=200, deadline=None)
@given(raw=_SERVER | _YAMLISH)
@example(raw={"env": {1: "a"}})
@example(raw={"timeout": 0})
def test_an_mcp_server_entry_is_refused_as_the_pydantic_schema_refused_it(raw: object) -> None:
    expected = mcp_error(raw)
    try:
        spec = mcp_server_spec("srv", raw, path="config.toml", key="mcp_servers.srv")
    except SettingsError as exc:
        if expected is not None:
            assert exc.message == f"config.toml: `mcp_servers.srv` {expected}"
        else:
            assert "Input should" not in exc.message
        return
    assert expected is None, expected
    server = McpServer.model_validate(raw)
    assert (spec.command, spec.url, spec.cwd) == (server.command, server.url, server.cwd)
    assert list(spec.args) == server.args and dict(spec.env) == server.env
    assert (spec.timeout, spec.startup_timeout) == (server.timeout, server.startup_timeout)


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
