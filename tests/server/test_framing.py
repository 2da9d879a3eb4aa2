"""The wire's frames: a reply built from its template is the generic encoding byte for byte, and
a request read on the short path is what the full checks would make of it."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from membrane.json_types import JSONValue
from membrane.server.framing import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    Encoded,
    FrameError,
    Notification,
    Request,
    Response,
    encode,
    encode_value,
    parse_frame,
    result_frame,
)

_TEXT = st.text(st.characters(codec="utf-8") | st.sampled_from(["\ud800", '"', "\\", "\n"]))
_JSON: st.SearchStrategy[JSONValue] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=12,
)
_IDS = st.integers() | _TEXT


@settings(max_examples=300, deadline=None)
@given(_IDS, _JSON)
def test_a_result_frame_is_the_generic_encoding(id: int | str, value: JSONValue) -> None:
    generic = encode({"jsonrpc": "2.0", "id": id, "result": value})
    assert result_frame(id, value) == generic
    assert result_frame(id, Encoded(encode_value(value))) == generic
    assert json.loads(generic) == {"jsonrpc": "2.0", "id": id, "result": value}


def _reference(message: object) -> object:
    """What a frame is, by the JSON-RPC rules the server keeps (``parse_frame``'s contract)."""
    if not isinstance(message, dict):
        return INVALID_REQUEST
    raw = message.get("id")
    id_ok = raw is None or (isinstance(raw, int | str) and not isinstance(raw, bool))
    if message.get("jsonrpc") != "2.0" or not id_ok:
        return INVALID_REQUEST
    if "method" not in message:
        if raw is None and "error" not in message:
            return INVALID_REQUEST
        error = message.get("error")
        return Response(raw, message.get("result"), error if isinstance(error, dict) else None)
    method = message["method"]
    if not isinstance(method, str) or not method:
        return INVALID_REQUEST
    params = message.get("params", {})
    params = {} if params is None else params
    if not isinstance(params, dict):
        return INVALID_PARAMS
    if "id" not in message:
        return Notification(method, params)
    if raw is None:
        return INVALID_REQUEST
    return Request(raw, method, params)


_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2.0, None]),
        "id": st.none() | st.booleans() | st.integers() | st.text(max_size=3) | st.floats(),
        "method": st.sampled_from(["actions/call", "", "x"]) | st.integers() | st.none(),
        "params": st.none()
        | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)
        | st.lists(st.integers(), max_size=2)
        | st.text(max_size=2),
        "result": _JSON,
        "error": st.none() | st.just({"code": 1, "message": "m"}) | st.text(max_size=2),
        "extra": st.integers(),
    },
)


@settings(max_examples=500, deadline=None)
@given(_FIELDS | _JSON)
def test_every_frame_is_read_as_the_rules_say(message: JSONValue) -> None:
    line = json.dumps(message).encode()
    expected = _reference(message)
    if isinstance(expected, int):
        with pytest.raises(FrameError) as caught:
            parse_frame(line)
        assert caught.value.code == expected
    else:
        parsed = parse_frame(line)
        assert type(parsed) is type(expected) and parsed == expected
