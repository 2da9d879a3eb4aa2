"""A loopback model server that validates every request as strict OpenAI-compatible servers and
Anthropic's Messages API do, and answers from a script.

OpenAI's own endpoint is lenient about some shapes that llama.cpp's server, vLLM and Ollama
refuse (their request models are pydantic or Go structs with string fields). ``WireServer``
checks what they check and answers a refused request the way the chosen server family does:

* ``llama.cpp`` (llama-cpp-python's server): HTTP 500, ``{"error": {"message": ...}}``;
* ``vllm``: HTTP 400, ``{"object": "error", "message": ..., "type": "BadRequestError"}``;
* ``ollama``: HTTP 400, ``{"error": {"message": ..., "type": "invalid_request_error"}}``;
* ``fastapi`` (a bare pydantic server): HTTP 422, ``{"detail": [{"msg": ...}]}``;
* ``anthropic``: HTTP 400, ``{"type": "error", "error": {"type": "invalid_request_error"}}``.

What an OpenAI-wire request must be (``openai_problems``): known roles; ``content`` a string
(or, for a user, a list of parts) whenever the key is present, never ``null``; system messages
first; an assistant message with text or tool calls; each tool call with an ``id``, type
``function``, a name and arguments that are a JSON object's text; every call answered by exactly
one ``tool`` message carrying its ``tool_call_id`` before the conversation goes on, and no
result for a call that was not made; the ids and names exactly as this server issued them;
``stream_options`` only with ``stream``; ``max_tokens`` or ``max_completion_tokens`` (not both) a
positive integer; ``tool_choice`` ``auto``, ``none``, ``required`` or a
function among ``tools`` (and tools present unless ``none``). An Anthropic request
(``anthropic_problems``): a ``max_tokens``; strictly alternating roles starting with a user; no
empty or whitespace-only text block; ``tool_use`` input an object; every ``tool_use`` answered
by a ``tool_result`` in the very next user turn, results first; ids and names as issued;
``tool_choice`` of type ``auto``, ``any``, ``tool`` (a name among ``tools``) or ``none``.

The script maps an agent name (read from the ``<active_agent name="...">`` tag of the system
prompt) to its turns; the turn is the number of assistant messages already in the request, so
a retried request gets the same turn. A turn is ``{"text": ..., "tool_calls": [{"name": ...,
"arguments": {...} or raw text}]}``; raw text is sent as it is (a model's malformed arguments).
Replies are streamed when the request asks for it, in each wire's own event format.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from replay import ReplayServer

__all__ = ["RateLimitedServer", "WireServer", "anthropic_problems", "openai_problems"]

Turn = Mapping[str, Any]
Script = Mapping[str, list[Turn]] | Callable[[str, int, Mapping[str, Any]], Turn]

_AGENT = re.compile(r'<active_agent name="([^"]+)">')
_ROLES = {"system", "developer", "user", "assistant", "tool"}
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ANTHROPIC_ID = re.compile(r"^[A-Za-z0-9_-]+$")


def _is_object_text(text: object) -> bool:
    if not isinstance(text, str):
        return False
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def openai_problems(body: Any, issued: Mapping[str, str]) -> list[str]:
    """What a strict OpenAI-compatible server refuses in ``body``; ``issued`` maps each tool
    call id this server gave out to its tool name."""
    if not isinstance(body, dict):
        return ["body: Input should be a valid dictionary"]
    problems: list[str] = []
    if not isinstance(body.get("model"), str):
        problems.append("model: Input should be a valid string")
    if "stream_options" in body and body.get("stream") is not True:
        problems.append("stream_options: only allowed when stream is true")
    problems.extend(_openai_max_tokens(body))
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*problems, "messages: Input should be a non-empty list"]
    open_calls: dict[str, str] = {}
    for index, message in enumerate(messages):
        where = f"messages.{index}"
        if not isinstance(message, dict):
            problems.append(f"{where}: Input should be a valid dictionary")
            continue
        role = message.get("role")
        if role not in _ROLES:
            problems.append(f"{where}.role: Input should be one of {sorted(_ROLES)}")
            continue
        if open_calls and role != "tool":
            problems.append(f"{where}: tool calls {sorted(open_calls)} have no tool message")
            open_calls = {}
        content = message.get("content", "")
        parts = role == "user" and isinstance(content, list)
        if "content" in message and not isinstance(content, str) and not parts:
            problems.append(f"{where}.content: Input should be a valid string")
        if role in ("system", "developer") and any(
            m.get("role") not in ("system", "developer") for m in messages[:index]
        ):
            problems.append(f"{where}: System message must be at the beginning")
        if role == "assistant":
            calls = message.get("tool_calls")
            if calls is None and not isinstance(message.get("content"), str):
                problems.append(f"{where}: an assistant message needs content or tool_calls")
            for number, call in enumerate(calls or ()):
                problems += _openai_call(f"{where}.tool_calls.{number}", call, issued)
                if isinstance(call, dict) and isinstance(call.get("id"), str):
                    open_calls[call["id"]] = str(call.get("function", {}).get("name"))
        if role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                problems.append(f"{where}.tool_call_id: Field required")
            elif call_id not in open_calls:
                problems.append(f"{where}.tool_call_id: {call_id!r} answers no open tool call")
            else:
                del open_calls[call_id]
            if not isinstance(message.get("content"), str):
                problems.append(f"{where}.content: Input should be a valid string")
    if open_calls:
        problems.append(f"messages: tool calls {sorted(open_calls)} have no tool message")
    problems += _openai_tool_choice(body)
    for number, tool in enumerate(body.get("tools") or ()):
        function = tool.get("function") if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if tool.get("type") != "function" or not _TOOL_NAME.match(str(name)):
            problems.append(f"tools.{number}: a function tool needs a name of [A-Za-z0-9_-]")
        elif not isinstance(function.get("parameters", {}), dict):
            problems.append(f"tools.{number}.function.parameters: Input should be an object")
    return problems


def _openai_max_tokens(body: Mapping[str, Any]) -> list[str]:
    """``max_tokens`` and ``max_completion_tokens``: each a positive integer when present, and
    never both (OpenAI refuses the pair)."""
    problems = []
    for key in ("max_tokens", "max_completion_tokens"):
        value = body.get(key)
        if key in body and (type(value) is not int or value < 1):
            problems.append(f"{key}: Input should be a positive integer")
    if "max_tokens" in body and "max_completion_tokens" in body:
        problems.append("max_tokens and max_completion_tokens: send only one")
    return problems


def _openai_tool_choice(body: Mapping[str, Any]) -> list[str]:
    """``tool_choice``: ``auto``, ``none``, ``required`` or a named function among ``tools``;
    anything but ``none`` needs tools (vLLM refuses it without)."""
    if "tool_choice" not in body:
        return []
    choice = body["tool_choice"]
    names = {
        t["function"].get("name")
        for t in body.get("tools") or ()
        if isinstance(t, dict) and isinstance(t.get("function"), dict)
    }
    if choice in ("auto", "none", "required"):
        named = None
    elif isinstance(choice, dict) and choice.get("type") == "function":
        named = (choice.get("function") or {}).get("name")
        if named not in names:
            return [f"tool_choice: function {named!r} is not among the tools"]
    else:
        return ["tool_choice: Input should be 'auto', 'none', 'required' or a named function"]
    if choice != "none" and not names:
        return ["tool_choice: only allowed when tools are specified"]
    return []


def _openai_call(where: str, call: object, issued: Mapping[str, str]) -> list[str]:
    if not isinstance(call, dict):
        return [f"{where}: Input should be a valid dictionary"]
    problems: list[str] = []
    call_id, function = call.get("id"), call.get("function")
    if not isinstance(call_id, str) or not call_id:
        problems.append(f"{where}.id: Field required")
    if call.get("type") != "function":
        problems.append(f"{where}.type: Input should be 'function'")
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        return [*problems, f"{where}.function.name: Field required"]
    if call_id in issued and issued[call_id] != function["name"]:
        problems.append(
            f"{where}: call {call_id!r} was {issued[call_id]!r}, not {function['name']!r}"
        )
    elif isinstance(call_id, str) and call_id not in issued:
        problems.append(f"{where}.id: {call_id!r} is not an id this server issued")
    if not _is_object_text(function.get("arguments")):
        problems.append(f"{where}.function.arguments: must be a JSON object's text")
    return problems


def anthropic_problems(body: Any, issued: Mapping[str, str]) -> list[str]:
    """What the Messages API refuses in ``body``; ``issued`` maps tool_use ids to names."""
    if not isinstance(body, dict):
        return ["body: Input should be a valid dictionary"]
    problems: list[str] = []
    if not isinstance(body.get("model"), str):
        problems.append("model: Field required")
    if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
        problems.append("max_tokens: Field required")
    system = body.get("system", "")
    if not isinstance(system, str | list):
        problems.append("system: Input should be a valid string")
    choice = body.get("tool_choice")
    if choice is not None:
        names = {t.get("name") for t in body.get("tools") or () if isinstance(t, dict)}
        kind = choice.get("type") if isinstance(choice, dict) else None
        if kind not in ("auto", "any", "tool", "none"):
            problems.append("tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'")
        elif kind == "tool" and choice.get("name") not in names:
            problems.append(f"tool_choice.name: {choice.get('name')!r} is not among the tools")
        elif kind in ("any", "tool") and not names:
            problems.append("tool_choice: requires tools")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*problems, "messages: Input should be a non-empty list"]
    expected: set[str] = set()
    for index, message in enumerate(messages):
        where = f"messages.{index}"
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("user", "assistant"):
            problems.append(f"{where}.role: Input should be 'user' or 'assistant'")
            continue
        if role != ("user" if index % 2 == 0 else "assistant"):
            problems.append(f"{where}: roles must alternate between user and assistant")
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list) or not blocks:
            problems.append(f"{where}.content: Input should be a non-empty list or string")
            continue
        answered: set[str] = set()
        seen_other = False
        for number, block in enumerate(blocks):
            at = f"{where}.content.{number}"
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text":
                if not isinstance(block.get("text"), str) or not block["text"].strip():
                    problems.append(f"{at}: text content blocks must contain non-whitespace text")
                seen_other = True
            elif kind == "tool_use" and role == "assistant":
                problems += _tool_use(at, block, issued)
                expected.add(str(block.get("id")))
            elif kind == "tool_result" and role == "user":
                if seen_other:
                    problems.append(f"{at}: tool_result blocks must come first in the content")
                use_id = block.get("tool_use_id")
                if use_id not in expected:
                    problems.append(f"{at}: unexpected tool_use_id {use_id!r} in tool_result")
                answered.add(str(use_id))
                if not isinstance(block.get("content", ""), str | list):
                    problems.append(f"{at}.content: Input should be a string or a list")
            else:
                problems.append(f"{at}: block type {kind!r} is not allowed in a {role} turn")
        if role == "user":
            if expected - answered:
                problems.append(
                    f"{where}: tool_use ids {sorted(expected - answered)} were found without "
                    "tool_result blocks immediately after"
                )
            expected = set()
    if messages[-1].get("role") == "assistant" and expected:
        problems.append("messages: the last assistant turn's tool_use blocks have no results")
    return problems


def _tool_use(where: str, block: Mapping[str, Any], issued: Mapping[str, str]) -> list[str]:
    problems: list[str] = []
    use_id, name = block.get("id"), block.get("name")
    if not isinstance(use_id, str) or not _ANTHROPIC_ID.match(use_id):
        problems.append(f"{where}.id: String should match pattern '^[a-zA-Z0-9_-]+$'")
    elif issued.get(use_id) != name:
        problems.append(f"{where}: tool_use {use_id!r} is not the {name!r} call this server issued")
    if not isinstance(block.get("input"), dict):
        problems.append(f"{where}.input: Input should be a valid dictionary")
    return problems


def _refusal(flavour: str, problems: list[str]) -> dict[str, Any]:
    message = "; ".join(problems)
    if flavour == "llama.cpp":
        error = {"message": message, "type": "internal_server_error"}
        return {"status": 500, "json": {"error": error}}
    if flavour == "vllm":
        body = {"object": "error", "message": message, "type": "BadRequestError", "code": 400}
        return {"status": 400, "json": body}
    if flavour == "ollama":
        error = {"message": message, "type": "invalid_request_error", "param": None}
        return {"status": 400, "json": {"error": error}}
    if flavour == "fastapi":
        return {
            "status": 422,
            "json": {"detail": [{"msg": p, "type": "value_error"} for p in problems]},
        }
    error = {"type": "invalid_request_error", "message": message}
    return {"status": 400, "json": {"type": "error", "error": error}}


class WireServer(ReplayServer):
    """Validate each request (``wire`` ``openai`` or ``anthropic``) and answer it from
    ``script``; a refused request is answered as ``flavour``'s server would (see the module
    docstring), and kept in ``refused``."""

    def __init__(self, script: Script, *, wire: str = "openai", flavour: str | None = None) -> None:
        super().__init__()
        self.script = script
        self.wire = wire
        self.flavour = flavour or ("anthropic" if wire == "anthropic" else "llama.cpp")
        self.issued: dict[str, str] = {}
        self.refused: list[tuple[dict[str, Any], list[str]]] = []
        self._ids = itertools.count()

    def answer_for(self, request: dict[str, Any]) -> dict[str, Any]:
        body = request["body"]
        check = anthropic_problems if self.wire == "anthropic" else openai_problems
        problems = check(body, self.issued)
        if problems:
            self.refused.append((body, problems))
            return _refusal(self.flavour, problems)
        agent = _agent(body, self.wire)
        turn_index = sum(1 for m in body["messages"] if m.get("role") == "assistant")
        if callable(self.script):
            turn = self.script(agent, turn_index, body)
        else:
            turns = self.script.get(agent) or []
            if turn_index >= len(turns):
                message = f"the script has no turn {turn_index} for {agent!r}"
                return _refusal(self.flavour, [message])
            turn = turns[turn_index]
        if self.wire == "anthropic":
            return self._anthropic(turn, stream=body.get("stream") is True)
        return self._openai(turn, stream=body.get("stream") is True)

    def _calls(self, turn: Turn, prefix: str) -> list[tuple[str, str, str]]:
        """Each scripted call as (id, name, arguments text), its id recorded as issued."""
        calls = []
        for call in turn.get("tool_calls") or ():
            call_id = call.get("id") or f"{prefix}{next(self._ids)}"
            self.issued[call_id] = call["name"]
            arguments = call.get("arguments", {})
            text = arguments if isinstance(arguments, str) else json.dumps(arguments)
            calls.append((call_id, call["name"], text))
        return calls

    def _openai(self, turn: Turn, *, stream: bool) -> dict[str, Any]:
        calls = self._calls(turn, "call_")
        text = turn.get("text", "")
        finish = "tool_calls" if calls else "stop"
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        wire_calls = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in calls
        ]
        if not stream:
            message = {
                "role": "assistant",
                "content": text or None,
                "tool_calls": wire_calls or None,
            }
            choice = {"index": 0, "message": message, "finish_reason": finish}
            return {
                "json": {
                    "id": "chatcmpl-w",
                    "object": "chat.completion",
                    "created": 0,
                    "model": "m",
                    "choices": [choice],
                    "usage": usage,
                }
            }

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
            return {
                "id": "chatcmpl-w",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "m",
                "choices": [choice],
            }

        events: list[Any] = [chunk({"role": "assistant", "content": ""})]
        if text:
            events.append(chunk({"content": text}))
        for index, (call_id, name, arguments) in enumerate(calls):
            head = {
                "index": index,
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": ""},
            }
            events.append(chunk({"tool_calls": [head]}))
            for piece in (arguments[: len(arguments) // 2], arguments[len(arguments) // 2 :]):
                events.append(
                    chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                )
        events.append(chunk({}, finish))
        events.append(
            {
                "id": "chatcmpl-w",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "m",
                "choices": [],
                "usage": usage,
            }
        )
        events.append("[DONE]")
        return {"sse": events}

    def _anthropic(self, turn: Turn, *, stream: bool) -> dict[str, Any]:
        calls = self._calls(turn, "toolu_")
        text = turn.get("text", "")
        stop = "tool_use" if calls else "end_turn"
        usage = {"input_tokens": 10, "output_tokens": 5}
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        for call_id, name, arguments in calls:
            try:
                value: object = json.loads(arguments)
            except ValueError:
                value = arguments
            blocks.append({"type": "tool_use", "id": call_id, "name": name, "input": value})
        message = {
            "id": "msg_w",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        if not stream:
            return {"json": message}

        def event(data: dict[str, Any]) -> dict[str, Any]:
            return {"event": data["type"], "data": data}

        start = {
            **message,
            "content": [],
            "stop_reason": None,
            "usage": {**usage, "output_tokens": 1},
        }
        events = [event({"type": "message_start", "message": start})]
        index = 0
        if text:
            events.append(
                event(
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "text", "text": ""},
                    }
                )
            )
            events.append(
                event(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": text},
                    }
                )
            )
            events.append(event({"type": "content_block_stop", "index": index}))
            index += 1
        for call_id, name, arguments in calls:
            block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
            events.append(
                event({"type": "content_block_start", "index": index, "content_block": block})
            )
            for piece in (arguments[: len(arguments) // 2], arguments[len(arguments) // 2 :]):
                delta = {"type": "input_json_delta", "partial_json": piece}
                events.append(
                    event({"type": "content_block_delta", "index": index, "delta": delta})
                )
            events.append(event({"type": "content_block_stop", "index": index}))
            index += 1
        events.append(
            event(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 5},
                }
            )
        )
        events.append(event({"type": "message_stop"}))
        return {"sse": events}


def _agent(body: Mapping[str, Any], wire: str) -> str:
    """The agent a request is for: the last ``<active_agent name=...>`` tag of its system
    prompt (``""`` when it has none)."""
    if wire == "anthropic":
        system = body.get("system", "")
        text = system if isinstance(system, str) else " ".join(b.get("text", "") for b in system)
    else:
        text = " ".join(
            m["content"]
            for m in body["messages"]
            if m.get("role") in ("system", "developer") and isinstance(m.get("content"), str)
        )
    found = _AGENT.findall(text)
    return found[-1] if found else ""


class RateLimitedServer(WireServer):
    """A ``WireServer`` that takes at most ``per_second`` requests in any one-second window and
    answers the rest HTTP 429 with ``Retry-After: 1``, as a provider's rate limit does.
    ``arrivals`` holds every request's arrival time (monotonic seconds), refused ones too."""

    def __init__(self, script: Script, *, per_second: int, **options: Any) -> None:
        super().__init__(script, **options)
        self.per_second = per_second
        self.arrivals: list[float] = []
        self.limited = 0
        self._taken: list[float] = []

    def answer_for(self, request: dict[str, Any]) -> dict[str, Any]:
        now = time.monotonic()
        self.arrivals.append(now)
        self._taken = [t for t in self._taken if now - t < 1.0]
        if len(self._taken) >= self.per_second:
            self.limited += 1
            error = {"message": "Rate limit reached", "type": "requests", "code": "rate_limited"}
            return {"status": 429, "headers": {"retry-after": "1"}, "json": {"error": error}}
        self._taken.append(now)
        return super().answer_for(request)

    def busiest_second(self) -> int:
        """The most requests that arrived in any one-second window."""
        times = sorted(self.arrivals)
        return max(
            (sum(1 for t in times[i:] if t - start < 1.0) for i, start in enumerate(times)),
            default=0,
        )
