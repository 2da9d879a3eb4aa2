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

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Literal, Protocol, overload

from membrane.json_types import JSONObject
from membrane.tools.spec import Attachment

__all__ = [
    "Conversation",
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


class Conversation(Sequence[Message]):
    """The first ``length`` messages of a conversation whose list only ever grows: what a
    turn's ``ModelRequest``, a run's outcome and ``messages()`` carry.

    Made in constant time and shared with the conversation as it goes on, instead of a copy of
    it per turn (which made a turn cost more the longer the run). Immutable all the same: the
    list's owner (the agent loop) only appends to it, so the messages a view holds never
    change. Compares equal to any sequence of the same messages (a tuple, a list); ``+`` gives
    a tuple; a slice is a tuple of the messages it names (``messages[n:]``: only those).
    """

    __slots__ = ("_items", "_length")

    def __init__(self, items: Sequence[Message] = (), length: int | None = None) -> None:
        self._items = items
        self._length = len(items) if length is None else min(length, len(items))

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Message, ...]: ...

    def __getitem__(self, index: int | slice) -> Message | tuple[Message, ...]:
        if isinstance(index, slice):
            return tuple(self._items[slice(*index.indices(self._length))])
        length = self._length
        if index < 0:
            index += length
        if not 0 <= index < length:
            raise IndexError("conversation index out of range")
        return self._items[index]

    def __iter__(self) -> Iterator[Message]:
        return islice(self._items, self._length)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        if len(other) != self._length:
            return False
        if isinstance(other, Conversation) and other.extends(self):
            return True
        return all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __add__(self, other: Sequence[Message]) -> tuple[Message, ...]:
        return (*self, *other)

    def __radd__(self, other: Sequence[Message]) -> tuple[Message, ...]:
        return (*other, *self)

    def __repr__(self) -> str:
        return f"Conversation({tuple(self)!r})"

    def extends(self, other: Sequence[Message]) -> bool:
        """Whether ``other`` is a view of the same conversation no longer than this one (so
        this one holds its messages and then more), known without comparing a message."""
        return (
            isinstance(other, Conversation)
            and other._items is self._items
            and other._length <= self._length
        )


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
    #: The conversation so far (a ``Conversation`` from the agent loop; any sequence).
    messages: Sequence[Message]
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
    #: The Membrane model that answered, when a fallback chain chose one of several
    #: (``membrane.models.fallback``); ``None``: the model the loop asked.
    answered_by: str | None = None
    #: The chain's models that failed before one answered, in order: each as
    #: ``{"model", "code", "message"}``. The loop reports each as a ``model_attempt_failed`` event.
    failed_attempts: tuple[Mapping[str, str], ...] = ()

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
