"""The ``Model`` protocol, its values, ``ScriptedModel`` and the OpenAI/Anthropic converters."""

from __future__ import annotations

from membrane.models.base import (
    Message,
    MessageKind,
    Model,
    ModelRequest,
    ModelResponse,
    Role,
    StopReason,
    ToolCall,
    Usage,
)
from membrane.models.convert import (
    from_anthropic_messages,
    from_anthropic_response,
    from_openai_messages,
    from_openai_response,
    to_anthropic_messages,
    to_openai_messages,
)
from membrane.models.scripted import ScriptedModel

__all__ = [
    "Message",
    "MessageKind",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "Role",
    "ScriptedModel",
    "StopReason",
    "ToolCall",
    "Usage",
    "from_anthropic_messages",
    "from_anthropic_response",
    "from_openai_messages",
    "from_openai_response",
    "to_anthropic_messages",
    "to_openai_messages",
]
