"""``explain --parent`` accepts and refuses exactly what its pydantic models did.

Generated JSON parents are given to ``membrane explain``; the pydantic models below (kept only
as the oracle) say what must happen: the same first problem, in the same words and place, or a
parent that is accepted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from membrane.cli.app import main

AGENT = "---\nname: scout\ndescription: Looks around.\ntools: Read, Grep\n---\nLook.\n"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class _ParentTool(_Strict):
    name: str = Field(min_length=1)
    origin: str = "builtin"
    deferred: bool = False
    mutating: bool = False


class _ParentMessage(_Strict):
    role: Literal["user", "assistant", "tool"]
    content: str = ""
    kind: Literal["text", "summary"] = "text"


class _Parent(_Strict):
    tools: list[_ParentTool] | None = None
    system_prompt: str = ""
    model: str | None = None
    transcript: list[_ParentMessage] = []
    permission_mode: str | None = None
    depth: int = 0
    cwd: str | None = None
    # Checked by membrane.resolve.ceiling, not by the table (test_explain_ceiling.py).
    ceiling: object = None

    @field_validator("tools", mode="before")
    @classmethod
    def _names(cls, value: object) -> object:
        if isinstance(value, list):
            return [{"name": item} if isinstance(item, str) else item for item in value]
        return value


def _problem(raw: object) -> str | None:
    """The message the pydantic models gave for ``raw``, or ``None``."""
    try:
        _Parent.model_validate(raw)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error["loc"])
        got = "" if error["type"] == "missing" else f" (got {error.get('input')!r})"
        if error["type"] in ("model_type", "model_attributes_type"):
            error["msg"] = "Input should be a JSON object"
        return (
            f"--parent{where}: {error['msg']}{got}; expected an object with tools (names or "
            "{name, origin, deferred, mutating}), system_prompt, model, transcript "
            "([{role, content, kind}]), permission_mode, depth, cwd and ceiling (as a "
            "published event shows it)"
        )
    return None


@pytest.fixture
def project(tmp_path: Path, isolated_home: Path) -> Path:
    root = tmp_path / "project"
    (root / ".membrane" / "agents").mkdir(parents=True)
    (root / ".membrane" / "agents" / "scout.md").write_text(AGENT, encoding="utf-8")
    return root


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["", "Read", "user", "assistant", "tool", "summary", "text", "mcp"])
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                ["name", "origin", "deferred", "mutating", "role", "content", "kind", "x"]
            ),
            inner,
            max_size=3,
        )
    ),
    max_leaves=6,
)
_MESSAGE = st.fixed_dictionaries(
    {}, optional={"role": _JSON, "content": _JSON, "kind": _JSON, "extra": _JSON}
)
_TOOL = st.fixed_dictionaries(
    {}, optional={"name": _JSON, "origin": _JSON, "deferred": _JSON, "mutating": _JSON}
)
_PARENTS = (
    st.fixed_dictionaries(
        {},
        optional={
            "tools": st.none() | st.lists(_TOOL | _JSON, max_size=3) | _JSON,
            "system_prompt": _JSON,
            "model": _JSON,
            "transcript": st.lists(_MESSAGE | _JSON, max_size=3) | _JSON,
            "permission_mode": _JSON,
            "cwd": _JSON,
            "colour": _JSON,
        },
    )
    | st.lists(_JSON, max_size=2)
    | _SCALARS.filter(lambda v: v is not None)
)


_WORD = st.sampled_from(["Read", "Grep", "Bash", "mcp__gh__issue", "x"])
_GOOD = st.fixed_dictionaries(
    {},
    optional={
        "tools": st.lists(
            _WORD
            | st.fixed_dictionaries(
                {"name": _WORD}, optional={"origin": _WORD, "deferred": st.booleans()}
            ),
            max_size=3,
        ),
        "system_prompt": st.text(max_size=5),
        "model": st.none() | _WORD,
        "transcript": st.lists(
            st.fixed_dictionaries(
                {"role": st.sampled_from(["user", "assistant", "tool"])},
                optional={
                    "content": st.text(max_size=5),
                    "kind": st.sampled_from(["text", "summary"]),
                },
            ),
            max_size=2,
        ),
        "permission_mode": st.none() | st.sampled_from(["default", "plan"]),
        "depth": st.integers(0, 2),
    },
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(raw=_PARENTS | _GOOD)
@example(raw={"tools": [{"nme": "x"}]})
@example(raw={"transcript": [{"role": "system"}]})
@example(raw={"tools": ["Read", 3]})
@example(raw=[1])
def test_a_generated_parent_is_taken_as_the_pydantic_models_took_it(
    project: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    raw: object,
) -> None:
    monkeypatch.chdir(project)
    code = main(["explain", "scout", "--json", f"--parent={json.dumps(raw)}"])
    out, err = capsys.readouterr()
    expected = _problem(raw)
    event("accepted" if expected is None else "refused")
    if expected is None:
        assert code == 0, err
        assert json.loads(out)["definition"]["name"] == "scout"
    else:
        assert code == 2
        error = json.loads(err)["error"]
        assert (error["code"], error["message"]) == ("invalid-request", expected)
