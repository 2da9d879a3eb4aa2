"""JSON-RPC 2.0 framing: one JSON object per line (NDJSON), at most 1 MiB a frame.

This module knows the wire and nothing about Membrane's methods: it turns one line into a
``Request``/``Notification``/``Response`` (or a ``FrameError`` with the JSON-RPC code to answer
with), and turns values and errors back into lines. Every ``MembraneError`` goes on the wire as
the one server error code ``MEMBRANE_ERROR`` with ``data: {code, message, ...}``, the code being
the error's stable kebab-case code.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Final, cast

from membrane.agents.nesting import too_deep
from membrane.errors import MembraneError
from membrane.json_types import JSONDict, JSONValue

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "MAX_FRAME_BYTES",
    "MEMBRANE_ERROR",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "Encoded",
    "FrameError",
    "Notification",
    "Request",
    "Response",
    "encode",
    "encode_value",
    "error_frame",
    "membrane_error_frame",
    "notification_frame",
    "parse_frame",
    "result_frame",
]

#: The largest frame either side accepts, newline excluded (1 MiB).
MAX_FRAME_BYTES: Final = 1 << 20

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
#: Every ``MembraneError``; ``data.code`` says which.
MEMBRANE_ERROR: Final = -32000

RequestId = str | int


@dataclass(slots=True)
class Request:
    """A call to answer. Not frozen: one is made per call, and a frozen dataclass's
    ``__init__`` costs several times a plain one's."""

    id: RequestId
    method: str
    params: JSONDict


@dataclass(frozen=True, slots=True)
class Notification:
    method: str
    params: JSONDict


@dataclass(frozen=True, slots=True)
class Response:
    """A reply: ``error`` is ``{"code", "message", "data"?}`` when the call failed."""

    id: RequestId | None
    result: JSONValue = None
    error: JSONDict | None = None


class FrameError(Exception):
    """A line that is not a usable JSON-RPC message; answer with ``code`` (and ``id``)."""

    def __init__(self, code: int, message: str, *, id: RequestId | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.id = id


#: The deepest a frame may nest its arrays and objects. A deeper frame is a parse error,
#: refused by a linear scan before any parser recurses into it (a parser would otherwise end
#: in ``RecursionError`` and drop the connection), and only scanned at all when it is longer
#: and holds more brackets than this.
MAX_FRAME_NESTING: Final = 128

#: The C scanner behind ``json.loads``, called directly on the hot path (``parse_frame``).
_SCAN: Final[Callable[[str, int], tuple[object, int]]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_JSON_SPACE: Final = " \t\n\r"


def _loaded(line: bytes) -> object:
    """``json.loads(line)``, its error as a parse error."""
    try:
        return json.loads(line)
    except (UnicodeDecodeError, ValueError) as exc:
        raise FrameError(PARSE_ERROR, f"parse error: {exc}") from None


def _refuse_deep(line: bytes) -> None:
    try:
        text = line.decode()
    except UnicodeDecodeError:
        return  # the parser reports it
    deep = too_deep(text, flavor="json", limit=MAX_FRAME_NESTING)
    if deep is not None:
        raise FrameError(
            PARSE_ERROR, f"parse error: the frame nests deeper than {MAX_FRAME_NESTING} levels"
        )


def parse_frame(line: bytes) -> Request | Notification | Response:
    """One frame (its newline may end it); ``FrameError`` when it is not JSON-RPC 2.0."""
    if len(line) > MAX_FRAME_NESTING and line.count(b"[") + line.count(b"{") > MAX_FRAME_NESTING:
        _refuse_deep(line)
    try:
        # ``json.loads(line)`` by its C scanner: a UTF-8 line holding one value and nothing
        # but JSON space after it. Any other line takes ``json.loads`` itself, so the value and
        # the error are exactly its own.
        text = line.decode()
        message, end = _SCAN(text, 0)
        if end != len(text) and text[end:].strip(_JSON_SPACE):
            message = _loaded(line)  # raises its "extra data" error
    except (UnicodeDecodeError, StopIteration, ValueError):
        message = _loaded(line)
    if type(message) is dict:
        # A well-formed request (the usual frame) is taken in one pass over its fields; any
        # other frame takes the checks below, which name its problem.
        got_id, got_method = message.get("id"), message.get("method")
        got_params = message.get("params")
        if (
            (type(got_id) is int or type(got_id) is str)
            and type(got_method) is str
            and got_method
            and type(got_params) is dict
            and message.get("jsonrpc") == "2.0"
        ):
            return Request(got_id, got_method, got_params)
    if not isinstance(message, dict):
        raise FrameError(INVALID_REQUEST, "a frame must be one JSON object (batches are not used)")
    raw_id = message.get("id")
    id_ok = raw_id is None or (isinstance(raw_id, str | int) and not isinstance(raw_id, bool))
    msg_id: RequestId | None = raw_id if id_ok else None
    if message.get("jsonrpc") != "2.0":
        raise FrameError(INVALID_REQUEST, 'the frame lacks "jsonrpc": "2.0"', id=msg_id)
    if not id_ok:
        raise FrameError(INVALID_REQUEST, "id must be a string or an integer")
    if "method" not in message:
        if msg_id is None and "error" not in message:
            raise FrameError(INVALID_REQUEST, "a frame needs a method, or an id with a result")
        error = message.get("error")
        return Response(
            id=msg_id,
            result=message.get("result"),
            error=error if isinstance(error, dict) else None,
        )
    method = message["method"]
    if not isinstance(method, str) or not method:
        raise FrameError(INVALID_REQUEST, "method must be a non-empty string", id=msg_id)
    params = message.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise FrameError(INVALID_PARAMS, "params must be a JSON object", id=msg_id)
    if "id" not in message:
        return Notification(method=method, params=params)
    if msg_id is None:
        raise FrameError(INVALID_REQUEST, "id must not be null")
    return Request(id=msg_id, method=method, params=params)


#: One encoder for every frame (``json.dumps`` with options builds a new one per call).
_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)
#: The C encoder ``_ENCODER`` makes for each call, made once (``None`` without ``_json``). A
#: frame's value is ``plain`` data, built fresh per reply, so it holds no cycle to look for.
_C_ENCODE: Final = (
    None
    if c_make_encoder is None
    else c_make_encoder(None, str, encode_basestring, None, ":", ",", False, False, True)
)


def encode(message: JSONDict) -> bytes:
    """``message`` as one line. Values JSON cannot hold are written as strings; a lone
    surrogate (which UTF-8 cannot hold) as its JSON ``\\u`` escape, so it reads back as itself."""
    text = _ENCODER.encode(message) if _C_ENCODE is None else "".join(_C_ENCODE(message, 0))
    # Outside its strings a frame is ASCII, so only a string's surrogate can need the escape.
    return text.encode("utf-8", "backslashreplace") + b"\n"


def encode_value(value: JSONValue) -> bytes:
    """One JSON value as UTF-8, written as ``encode`` writes it inside a frame (no newline)."""
    if _C_ENCODE is None:
        return encode({"": value})[4:-2]
    return "".join(_C_ENCODE(value, 0)).encode("utf-8", "backslashreplace")


class Encoded(bytes):
    """A result already encoded as one JSON value (``encode_value``): ``result_frame`` puts
    it in the frame as it is."""

    __slots__ = ()


def result_frame(id: RequestId, result: JSONValue | Encoded) -> bytes:
    """``encode({"jsonrpc": "2.0", "id": id, "result": result})``, byte for byte (an
    ``Encoded`` result standing for the value it encodes). The frame's fixed parts are a
    template: only ``id`` and ``result`` are encoded (this is the reply to every call)."""
    body = result if type(result) is Encoded else encode_value(result)
    if type(id) is int:
        return b'{"jsonrpc":"2.0","id":%d,"result":%b}\n' % (id, body)
    return b'{"jsonrpc":"2.0","id":%b,"result":%b}\n' % (encode_value(id), body)


def error_frame(
    id: RequestId | None, code: int, message: str, data: JSONValue | None = None
) -> bytes:
    error: JSONDict = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return encode({"jsonrpc": "2.0", "id": id, "error": error})


def membrane_error_frame(id: RequestId | None, exc: MembraneError) -> bytes:
    """``exc`` as the server error: ``data`` is ``{code, message, ...its data}``."""
    data: JSONDict = {"code": exc.code, "message": exc.message}
    for key, value in exc.data.items():
        data.setdefault(key, cast(JSONValue, value))
    return error_frame(id, MEMBRANE_ERROR, exc.message, data)


def notification_frame(method: str, params: JSONDict) -> bytes:
    return encode({"jsonrpc": "2.0", "method": method, "params": params})
