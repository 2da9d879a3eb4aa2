"""The ``Model`` protocol the agent loop calls, and the values that cross it.

The shapes are the common ground of the OpenAI and Anthropic tool-calling APIs, so an
adapter for either is a pure conversion (``membrane.models.convert`` proves it):

* the system prompt travels beside the conversation (``ModelRequest.system``), as Anthropic
  wants it, and becomes a leading ``system`` message for OpenAI;
* an assistant message may hold text and tool calls together;
* each tool result is its own ``tool`` message answering one ``tool_call_id``; the adapter
  groups them into one user turn for Anthropic;
* tools are ``{"name", "description", "input_schema"}`` mappings, exactly what
  ``ToolView.schemas()`` returns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from membrane.json_types import JSONObject
from membrane.tools.spec import Attachment

__all__ = [
    "Message",
    "MessageKind",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "Role",
    "StopReason",
    "ToolCall",
    "Usage",
]

Role = Literal["user", "assistant", "tool"]
MessageKind = Literal["text", "summary"]
StopReason = Literal["stop", "tool_calls", "length", "error"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call the model asks for. ``id`` pairs it with the ``tool`` message answering it."""

    id: str
    name: str
    arguments: JSONObject


@dataclass(frozen=True, slots=True)
class Message:
    """One conversation message.

    * ``user``: ``content`` is the text.
    * ``assistant``: ``content`` (may be empty) and ``tool_calls`` (may be empty).
    * ``tool``: the result of the call ``tool_call_id`` to tool ``name``; ``is_error`` marks a
      failed or vetoed call.

    ``kind="summary"`` marks a compaction summary standing in for earlier messages; it is kept
    when a child inherits its parent's context, while tool results are not.
    """

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    kind: MessageKind = "text"
    #: Binary parts of a ``tool`` result (an MCP server's images), beside ``content``.
    attachments: tuple[Attachment, ...] = ()


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one response (or a sum of them).

    ``input_tokens`` counts every prompt token the provider billed, cached ones included;
    ``cache_read_tokens`` and ``cache_write_tokens`` say how many of them were read from or
    written to the provider's prompt cache, where it reports that.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )

    def to_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """Everything one model turn needs.

    ``agent`` and ``run_id`` identify the caller (a scripted model keys its replay on them).
    ``tools`` are the active set for this turn, recomputed from the live view before each
    request. ``response_schema``, when given, is the JSON Schema the final answer must match.
    """

    agent: str
    run_id: str
    system: str
    messages: tuple[Message, ...]
    tools: tuple[JSONObject, ...] = ()
    model: str | None = None
    thinking: str | None = None
    response_schema: JSONObject | None = None
    #: This turn's ``tool_choice``: ``auto``, ``required``, ``none`` or the name of one of
    #: ``tools``; ``None`` sends none (the provider's default). Adapters send it only with tools.
    tool_choice: str | None = None


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """One model turn's answer. ``stop_reason`` is ``tool_calls`` when calls are to be run."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    stop_reason: StopReason = "stop"
    usage: Usage = field(default_factory=Usage)
    #: What the adapter could not honour (a ``thinking`` level the model has no setting for).
    notes: tuple[str, ...] = ()
    #: Call id -> why that call's arguments could not be read (the call carries empty
    #: arguments); the loop answers each such call with ``tool-arguments-invalid`` unrun.
    invalid_arguments: Mapping[str, str] = field(default_factory=dict)
    #: What the provider said of this response, when it said it: its id (``chatcmpl-...``,
    #: ``msg_...``), the model that answered, and its own finish reason (``stop``,
    #: ``tool_calls``, ``end_turn`` ...). Traces and the ``usage`` event carry them.
    response_id: str | None = None
    response_model: str | None = None
    finish_reason: str | None = None

    def message(self) -> Message:
        """The assistant message this response adds to the conversation."""
        return Message(role="assistant", content=self.text, tool_calls=self.tool_calls)


class Model(Protocol):
    """What the agent loop calls once per turn.

    ``request`` raises ``ModelError`` (``model-error``) when the provider fails; it never
    returns an empty success for a failure (use ``stop_reason="error"`` only when the provider
    itself reports one in a normal response).
    """

    name: str

    async def request(self, request: ModelRequest) -> ModelResponse: ...
