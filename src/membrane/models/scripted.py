"""``ScriptedModel``: a ``Model`` that replays a script, for the demo, tests and offline runs.

Script format (YAML 1.2, or the same structure as a mapping)::

    agents:
      parent:                         # an agent name, matched exactly against ModelRequest.agent
        - tool_calls:                 # turn 0 of every run of "parent"
            - {name: Task, arguments: {agent: reviewer, task: "Review src/"}}
        - text: "final answer"        # turn 1
      reviewer:
        - tool_calls: [{name: Grep, arguments: {pattern: "TODO"}}]
        - text: "done"
    default:                          # optional: turns for any agent without its own entry
      - text: "nothing to do"

Rules:

* The top level holds ``agents`` (a mapping of agent name to a non-empty list of turns),
  ``default`` (a non-empty list of turns), or both; nothing else.
* A turn is a mapping with ``text`` (a string, may be empty), ``tool_calls``, or both, and
  optionally:

  - ``stop_reason``: ``stop``, ``tool_calls``, ``length`` or ``error``; the default is
    ``tool_calls`` when the turn has calls and ``stop`` otherwise;
  - ``usage``: ``{input_tokens: N, output_tokens: N}`` (non-negative integers, default 0);
  - ``delay``: seconds the request waits before it answers (0 to 3600, default 0), so a turn
    takes the time a real model's would.

* A tool call is ``{name: STR, arguments: MAPPING, id: STR}``; ``arguments`` defaults to ``{}``
  and must hold JSON values (quote dates; no NaN or infinities; at most 100 levels deep);
  ``id`` defaults to ``call_<run_id>_<turn>_<index>``.
* ``{error: "message"}`` alone is an error turn: the request raises ``ModelError`` with that
  message, as a failing provider would.
* Each distinct ``run_id`` replays its agent's list from turn 0, so two runs of one agent get the
  same turns. A run that asks for more turns than the list holds fails with ``ScriptError``
  naming the agent and the turn.
* The model returns exactly what the script says, including calls to tools the request did not
  offer, so that the runtime's call-time veto can be observed.

Every malformed script is a ``ScriptError`` (``model-script-invalid``) naming the file, the key
(``agents.parent[0].tool_calls[1].name``) and, when known, the line.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast, get_args

import anyio
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from membrane.errors import ModelError, ScriptError
from membrane.json_types import JSONObject
from membrane.models.base import (
    Model,
    ModelRequest,
    ModelResponse,
    StopReason,
    ToolCall,
    Usage,
)
from membrane.models.request_log import RequestLog

__all__ = ["ScriptedModel"]

_TOP_KEYS = ("agents", "default")
_TURN_KEYS = ("text", "tool_calls", "stop_reason", "usage", "delay", "error")
_CALL_KEYS = ("name", "arguments", "id")
_USAGE_KEYS = ("input_tokens", "output_tokens")
_STOP_REASONS: tuple[str, ...] = get_args(StopReason)
#: Deeper arguments are refused; a value that contains itself reaches this limit too.
_MAX_JSON_DEPTH = 100


@dataclass(frozen=True, slots=True)
class _Call:
    name: str
    arguments: Mapping[str, Any]
    id: str | None


@dataclass(frozen=True, slots=True)
class _Turn:
    """One parsed turn; ``error`` set means the turn raises ``ModelError``."""

    text: str | None
    calls: tuple[_Call, ...]
    stop_reason: StopReason
    usage: Usage
    error: str | None = None
    #: Seconds the request waits before answering (a model-bound turn, as a real one is).
    delay: float = 0.0


class ScriptedModel(Model):
    """Replays ``script``: a mapping, YAML text, or a path to a YAML file.

    A ``Path`` is always a file. A ``str`` is YAML text when it spans several lines or parses
    to a mapping, and a file path otherwise (a script is always a mapping, so a one-line
    ``"examples/demo.yaml"`` is a path).
    ``requests`` records every request received, in order (a ``RequestLog``, which keeps a
    run's conversation once, not once per turn).
    """

    def __init__(self, script: JSONObject | str | Path, *, name: str = "scripted") -> None:
        self.name = name
        self.requests = RequestLog()
        self._cursor: dict[str, int] = {}
        data, self.source = _load(script)
        self._agents, self._default = _parse(data, source=self.source)

    @property
    def agents(self) -> frozenset[str]:
        """The agent names that have their own turns."""
        return frozenset(self._agents)

    def turns_used(self, run_id: str) -> int:
        """How many turns run ``run_id`` has taken so far."""
        return self._cursor.get(run_id, 0)

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        turns = self._agents.get(request.agent, self._default)
        if turns is None:
            raise ScriptError(
                f"{self.source}: no turns for agent {request.agent!r} and no `default` list; "
                f"scripted agents: {', '.join(sorted(self._agents)) or 'none'}",
                path=self.source,
                agent=request.agent,
            )
        key = f"agents.{request.agent}" if request.agent in self._agents else "default"
        index = self._cursor.get(request.run_id, 0)
        if index >= len(turns):
            raise ScriptError(
                f"{self.source}: the script for agent {request.agent!r} ran out of turns: "
                f"run {request.run_id!r} asked for turn {index} but {key} has {len(turns)} "
                f"(turns 0-{len(turns) - 1}); add a turn or end the run with a `text` turn",
                path=self.source,
                agent=request.agent,
                run_id=request.run_id,
                turn=index,
            )
        self._cursor[request.run_id] = index + 1
        turn = turns[index]
        if turn.delay:
            await anyio.sleep(turn.delay)
        if turn.error is not None:
            raise ModelError(
                turn.error, agent=request.agent, run_id=request.run_id, turn=index, scripted=True
            )
        calls = tuple(
            ToolCall(
                id=call.id if call.id is not None else f"call_{request.run_id}_{index}_{i}",
                name=call.name,
                arguments=dict(call.arguments),
            )
            for i, call in enumerate(turn.calls)
        )
        return ModelResponse(
            text=turn.text or "", tool_calls=calls, stop_reason=turn.stop_reason, usage=turn.usage
        )


# -- loading ---------------------------------------------------------------------------------


def _load(script: JSONObject | str | Path) -> tuple[object, str]:
    if not isinstance(script, str | Path):
        return script, "<script>"  # a mapping, or something the parser will refuse
    if isinstance(script, str):
        if "\n" in script:
            return _parse_yaml(script, source="<script>"), "<script>"
        try:
            data = YAML(typ="rt").load(script)
        except Exception:  # not YAML that a script could be: read it as a path below
            data = None
        if isinstance(data, Mapping):
            return data, "<script>"
    path = Path(script)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScriptError(
            f"{path}: cannot read the model script ({exc}); pass a YAML file, YAML text "
            "or a mapping",
            path=str(path),
        ) from exc
    return _parse_yaml(text, source=str(path)), str(path)


def _parse_yaml(text: str, *, source: str) -> object:
    try:
        return YAML(typ="rt").load(text)
    except Exception as exc:  # every malformed script is a ScriptError
        raise _yaml_error(exc, source=source) from exc


def _yaml_error(exc: Exception, *, source: str) -> ScriptError:
    line: int | None
    if isinstance(exc, YAMLError):
        mark = getattr(exc, "problem_mark", None)
        line = None if mark is None else mark.line + 1
        problem = getattr(exc, "problem", None) or str(exc)
    elif isinstance(exc, RecursionError):
        line = _failing_line(exc)
        problem = "the YAML nests too deeply to read"
    else:
        # A scalar its Python type refuses (`!!int abc`, `2023-02-30`): ruamel lets the type's
        # own ValueError, TypeError or OverflowError through without a position.
        line = _failing_line(exc)
        problem = f"invalid value ({exc}); quote it to keep it as text"
    where = source if line is None else f"{source}:{line}"
    return ScriptError(
        f"{where}: the model script is not valid YAML: {problem}", path=source, line=line
    )


def _failing_line(exc: BaseException) -> int | None:
    """The 1-based line of the node ruamel was building when ``exc`` was raised, if known.

    ruamel's constructors hold the node they build in a local named ``node``; the innermost
    frame that has one is the value that failed.
    """
    line = None
    trace = exc.__traceback__
    while trace is not None:
        mark = getattr(trace.tb_frame.f_locals.get("node"), "start_mark", None)
        found = getattr(mark, "line", None)
        if isinstance(found, int):
            line = found + 1
        trace = trace.tb_next
    return line


# -- parsing ---------------------------------------------------------------------------------


class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(
        self, key: str, problem: str, *, node: object = None, at: object = None
    ) -> ScriptError:
        line = _line(node, at)
        where = self.source if line is None else f"{self.source}:{line}"
        return ScriptError(f"{where}: {key}: {problem}", path=self.source, key=key, line=line)

    def mapping(
        self, value: object, key: str, allowed: tuple[str, ...] | None, *, node: object, at: object
    ) -> Mapping[str, Any]:
        """``value`` as a mapping whose keys are all in ``allowed`` (any keys when ``None``)."""
        if not isinstance(value, Mapping):
            raise self.fail(key, f"expected a mapping, got {_kind(value)}", node=node, at=at)
        for name in value:
            if allowed is not None and name not in allowed:
                close = difflib.get_close_matches(str(name), allowed, n=1)
                hint = f"did you mean `{close[0]}`?" if close else f"use {', '.join(allowed)}"
                raise self.fail(f"{key}.{name}", f"unknown key ({hint})", node=value, at=name)
        return value

    def turns(self, value: object, key: str, *, node: object, at: object) -> tuple[_Turn, ...]:
        if not isinstance(value, list) or not value:
            raise self.fail(key, "expected a non-empty list of turns", node=node, at=at)
        return tuple(
            self.turn(item, f"{key}[{i}]", node=value, at=i) for i, item in enumerate(value)
        )

    def turn(self, value: object, key: str, *, node: object, at: object) -> _Turn:
        turn = self.mapping(value, key, _TURN_KEYS, node=node, at=at)
        if "error" in turn:
            if len(turn) > 1:
                others = ", ".join(sorted(str(k) for k in turn if k != "error"))
                raise self.fail(
                    key, f"an error turn holds only `error`, not {others}", node=node, at=at
                )
            message = self.string(turn["error"], f"{key}.error", node=turn, at="error")
            return _Turn(None, (), "error", Usage(), error=message)
        if "text" not in turn and "tool_calls" not in turn:
            raise self.fail(key, "a turn needs `text`, `tool_calls` or `error`", node=node, at=at)
        text = None
        if "text" in turn:
            text = self.string(turn["text"], f"{key}.text", node=turn, at="text")
        calls: tuple[_Call, ...] = ()
        if "tool_calls" in turn:
            raw = turn["tool_calls"]
            if not isinstance(raw, list):
                raise self.fail(f"{key}.tool_calls", "expected a list", node=turn, at="tool_calls")
            calls = tuple(
                self.call(item, f"{key}.tool_calls[{i}]", node=raw, at=i)
                for i, item in enumerate(raw)
            )
        stop: StopReason = "tool_calls" if calls else "stop"
        if "stop_reason" in turn:
            value = turn["stop_reason"]
            if value not in _STOP_REASONS:
                raise self.fail(
                    f"{key}.stop_reason",
                    f"expected one of {', '.join(_STOP_REASONS)}, got {value!r}",
                    node=turn,
                    at="stop_reason",
                )
            stop = cast(StopReason, str(value))
        usage = Usage()
        if "usage" in turn:
            usage = self.usage(turn["usage"], f"{key}.usage", node=turn, at="usage")
        delay = 0.0
        if "delay" in turn:
            delay = self.seconds(turn["delay"], f"{key}.delay", node=turn, at="delay")
        return _Turn(text, calls, stop, usage, delay=delay)

    def seconds(self, value: object, key: str, *, node: object, at: object) -> float:
        """``value`` as a finite, non-negative number of seconds (at most an hour)."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(
                key, f"expected a number of seconds, got {_kind(value)}", node=node, at=at
            )
        if not 0 <= value <= 3600:
            raise self.fail(key, f"expected 0 to 3600 seconds, got {value!r}", node=node, at=at)
        return float(value)

    def call(self, value: object, key: str, *, node: object, at: object) -> _Call:
        call = self.mapping(value, key, _CALL_KEYS, node=node, at=at)
        if "name" not in call:
            raise self.fail(f"{key}.name", "a tool call needs a `name`", node=node, at=at)
        name = self.string(call["name"], f"{key}.name", node=call, at="name")
        if not name:
            raise self.fail(f"{key}.name", "the tool name is empty", node=call, at="name")
        arguments: Mapping[str, Any] = {}
        if "arguments" in call and call["arguments"] is not None:
            raw = call["arguments"]
            if not isinstance(raw, Mapping):
                raise self.fail(
                    f"{key}.arguments",
                    f"expected a mapping, got {_kind(raw)}",
                    node=call,
                    at="arguments",
                )
            arguments = cast(
                dict[str, Any], self.json(raw, f"{key}.arguments", node=call, at="arguments")
            )
        call_id = None
        if "id" in call:
            call_id = self.string(call["id"], f"{key}.id", node=call, at="id")
        return _Call(name, arguments, call_id)

    def usage(self, value: object, key: str, *, node: object, at: object) -> Usage:
        usage = self.mapping(value, key, _USAGE_KEYS, node=node, at=at)
        counts: dict[str, int] = {}
        for name in _USAGE_KEYS:
            count = usage.get(name, 0)
            if type(count) is not int or count < 0:
                raise self.fail(
                    f"{key}.{name}",
                    f"expected a non-negative integer, got {count!r}",
                    node=usage,
                    at=name,
                )
            counts[name] = count
        return Usage(**counts)

    def string(self, value: object, key: str, *, node: object, at: object) -> str:
        if not isinstance(value, str):
            raise self.fail(
                key, f"expected a string, got {_kind(value)} (quote it)", node=node, at=at
            )
        return str(value)

    def json(self, value: object, key: str, *, node: object, at: object, depth: int = 0) -> object:
        """A plain JSON value: YAML-specific types (dates, sets), NaN and the infinities,
        self-containing values and nesting beyond ``_MAX_JSON_DEPTH`` are refused."""
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, str):
            return str(value)  # drop ruamel's string subclasses
        if isinstance(value, int):
            return int(value)
        if isinstance(value, float):
            if not math.isfinite(value):
                raise self.fail(
                    key, f"{value!r} is not a JSON number (use a finite number)", node=node, at=at
                )
            return float(value)
        if isinstance(value, Mapping | list) and depth >= _MAX_JSON_DEPTH:
            raise self.fail(
                key,
                f"nests deeper than {_MAX_JSON_DEPTH} levels (or contains itself)",
                node=node,
                at=at,
            )
        if isinstance(value, Mapping):
            result: dict[str, object] = {}
            for name, item in value.items():
                if not isinstance(name, str):
                    raise self.fail(f"{key}", f"key {name!r} is not a string", node=value, at=name)
                result[str(name)] = self.json(
                    item, f"{key}.{name}", node=value, at=name, depth=depth + 1
                )
            return result
        if isinstance(value, list):
            return [
                self.json(item, f"{key}[{i}]", node=value, at=i, depth=depth + 1)
                for i, item in enumerate(value)
            ]
        raise self.fail(key, f"{_kind(value)} is not a JSON value (quote it)", node=node, at=at)


def _parse(
    data: object, *, source: str
) -> tuple[dict[str, tuple[_Turn, ...]], tuple[_Turn, ...] | None]:
    parser = _Parser(source)
    top = parser.mapping(data, "script", _TOP_KEYS, node=None, at=None)
    if not top:
        raise parser.fail("script", "the script is empty: give `agents`, `default` or both")
    agents: dict[str, tuple[_Turn, ...]] = {}
    if "agents" in top:
        raw = parser.mapping(top["agents"], "agents", None, node=top, at="agents")
        for name, turns in raw.items():
            if not isinstance(name, str) or not name:
                raise parser.fail(
                    "agents", f"agent name {name!r} is not a string", node=raw, at=name
                )
            agents[name] = parser.turns(turns, f"agents.{name}", node=raw, at=name)
    default = None
    if "default" in top:
        default = parser.turns(top["default"], "default", node=top, at="default")
    if not agents and default is None:
        raise parser.fail(
            "agents", "no agent has turns; add one or a `default` list", node=top, at="agents"
        )
    return agents, default


def _line(node: object, at: object) -> int | None:
    """The 1-based line of ``node[at]`` when the YAML loader recorded one."""
    lc = getattr(node, "lc", None)
    if lc is None or at is None:
        return None
    try:
        position = lc.item(at) if isinstance(at, int) else lc.key(at)
    except (KeyError, IndexError, TypeError):
        return None
    return int(position[0]) + 1


def _kind(value: object) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r}"
