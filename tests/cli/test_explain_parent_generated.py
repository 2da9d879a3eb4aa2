"""``explain --parent`` takes a generated JSON parent or refuses it with one problem, named by
its place, in the words users know (pydantic's), and nothing else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from membrane.cli.app import main

AGENT = "---\nname: scout\ndescription: Looks around.\ntools: Read, Grep\n---\nLook.\n"
EXPECTED = (
    "; expected an object with tools (names or {name, origin, deferred, mutating}), "
    "system_prompt, model, transcript ([{role, content, kind}]), permission_mode, depth, cwd "
    "and ceiling (as a published event shows it)"
)


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
def test_a_generated_parent_is_taken_or_refused_at_one_place(
    project: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    raw: object,
) -> None:
    monkeypatch.chdir(project)
    code = main(["explain", "scout", "--json", f"--parent={json.dumps(raw)}"])
    out, err = capsys.readouterr()
    if code == 0:
        event("accepted")
        assert json.loads(out)["definition"]["name"] == "scout"
        return
    event("refused")
    assert code == 2
    error = json.loads(err)["error"]
    assert error["code"] == "invalid-request"
    assert error["message"].startswith("--parent") and error["message"].endswith(EXPECTED)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ([1], "--parent: Input should be a JSON object (got [1])"),
        ({"tools": [{"nme": "x"}]}, "--parent.tools[0].name: Field required"),
        (
            {"transcript": [{"role": "system"}]},
            "--parent.transcript[0].role: Input should be 'user', 'assistant' or 'tool' "
            "(got 'system')",
        ),
        ({"tools": ["Read", 3]}, "--parent.tools[1]: Input should be a JSON object (got 3)"),
        ({"colour": 1}, "--parent.colour: Extra inputs are not permitted (got 1)"),
        ({"model": 1}, "--parent.model: Input should be a valid string (got 1)"),
    ],
)
def test_a_refused_parent_is_named_in_the_words_users_know(
    project: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    raw: object,
    problem: str,
) -> None:
    monkeypatch.chdir(project)
    assert main(["explain", "scout", "--json", f"--parent={json.dumps(raw)}"]) == 2
    error = json.loads(capsys.readouterr().err)["error"]
    assert error["message"] == problem + EXPECTED
