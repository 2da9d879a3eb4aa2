"""The ``Model`` protocol, its values, ``ScriptedModel`` and the OpenAI/Anthropic converters."""

from __future__ import annotations

import typing

from membrane._lazy import lazy_exports as _lazy_exports

if typing.TYPE_CHECKING:
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

# Nothing is imported until a name is first used, so importing the package (and the CLI's
# start) pays only for what is touched.
__getattr__, __dir__ = _lazy_exports(
    __name__,
    {
        "Message": "membrane.models.base",
        "MessageKind": "membrane.models.base",
        "Model": "membrane.models.base",
        "ModelRequest": "membrane.models.base",
        "ModelResponse": "membrane.models.base",
        "Role": "membrane.models.base",
        "StopReason": "membrane.models.base",
        "ToolCall": "membrane.models.base",
        "Usage": "membrane.models.base",
        "from_anthropic_messages": "membrane.models.convert",
        "from_anthropic_response": "membrane.models.convert",
        "from_openai_messages": "membrane.models.convert",
        "from_openai_response": "membrane.models.convert",
        "to_anthropic_messages": "membrane.models.convert",
        "to_openai_messages": "membrane.models.convert",
        "ScriptedModel": "membrane.models.scripted",
    },
    globals(),
)
