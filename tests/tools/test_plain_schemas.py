"""A schema written with plain keywords is accepted without the JSON Schema libraries, and
only when the full check would accept it too.

Generated schemas (the plain keywords with right and wrong values, nested, mixed with keywords
that need the full check) are registered; ``check_schema`` of the default dialect is the
oracle: a schema the registry accepts is valid JSON Schema, one it refuses is not."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from jsonschema.exceptions import SchemaError
from jsonschema.validators import Draft202012Validator

from membrane.errors import ToolSpecError
from membrane.tools import ToolRegistry
from membrane.tools.spec import Tool

_ANY = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 3) | st.floats(-2, 3) | st.sampled_from(["", "x"]),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from("ab"), inner),
    max_leaves=4,
)
_TYPE = st.sampled_from(["string", "integer", "object", "array", "number", "boolean", "null"])
_KEYWORDS = st.sampled_from(
    [
        "type", "properties", "required", "items", "additionalProperties", "title",
        "description", "format", "const", "default", "enum", "examples", "minimum", "maximum",
        "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "minItems",
        "maxItems", "minProperties", "maxProperties", "uniqueItems", "readOnly", "deprecated",
        "pattern", "anyOf", "$defs", "x-extra",
    ]
)  # fmt: skip


def _values(schemas: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    return (
        _ANY
        | _TYPE
        | st.lists(_TYPE, max_size=3)
        | st.lists(st.sampled_from(["a", "b"]), max_size=3)
        | st.dictionaries(st.sampled_from(["a", "b", "$ref", "$id"]), schemas, max_size=2)
        | schemas
    )


_SCHEMAS: st.SearchStrategy[object] = st.recursive(
    st.booleans() | st.just({}),
    lambda inner: st.dictionaries(_KEYWORDS, _values(inner), max_size=4),
    max_leaves=8,
)


#: Schemas of plain keywords with values of the right shape (the built-in tools' kind).
_PLAIN: st.SearchStrategy[object] = st.recursive(
    st.just({"type": "string"}) | st.booleans(),
    lambda inner: st.fixed_dictionaries(
        {},
        optional={
            "type": _TYPE | st.lists(_TYPE, min_size=1, max_size=2, unique=True),
            "properties": st.dictionaries(st.sampled_from(["a", "b", "$ref"]), inner, max_size=2),
            "required": st.lists(st.sampled_from("ab"), unique=True, max_size=2),
            "items": inner,
            "additionalProperties": inner,
            "description": st.text(max_size=3),
            "enum": st.lists(_ANY, max_size=2),
            "minimum": st.integers(-2, 2) | st.floats(-1, 1),
            "maxLength": st.integers(0, 3),
            "uniqueItems": st.booleans(),
            "default": _ANY,
        },
    ),
    max_leaves=6,
)


_PLAIN_TABLES = _PLAIN.filter(lambda schema: isinstance(schema, dict))


def _valid(schema: dict[str, object]) -> bool:
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError:
        return False
    return True


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    extra=st.dictionaries(_KEYWORDS, _values(_SCHEMAS), max_size=4)
    | _PLAIN.filter(lambda s: isinstance(s, dict))
)
@example(extra={"required": ["a", "a"]})
@example(extra={"minLength": 1.0})
@example(extra={"type": []})
@example(extra={"properties": {"a": {"type": "text"}}})
@example(extra={"pattern": "("})
def test_a_schema_is_accepted_exactly_when_it_is_valid_json_schema(
    make_tool: Callable[..., Tool], extra: dict[str, object]
) -> None:
    schema = {**extra, "type": "object"}
    expected = _valid(schema)
    try:
        ToolRegistry().register(make_tool("T", schema=schema))
    except ToolSpecError:
        assert not expected
    else:
        assert expected


PROBE = """
import json, sys
from membrane.cli.app import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


@pytest.mark.costs
def test_explain_imports_no_json_schema_library(tmp_path: Path, isolated_home: Path) -> None:
    project = tmp_path / "project"
    (project / ".membrane" / "agents").mkdir(parents=True)
    (project / ".membrane" / "agents" / "a.md").write_text(
        "---\nname: a\ndescription: An agent.\ntools: Read, Bash, Skill\n---\nBody.\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "explain", "a", "--json", "--project", str(project)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["code"] == 0, done.stderr
    assert {"Read", "Bash"} <= set(json.loads(done.stdout)["tools"]["callable"])
    libraries = {m.split(".")[0] for m in report["modules"]}
    assert not libraries & {"jsonschema", "referencing", "jsonschema_specifications"}
