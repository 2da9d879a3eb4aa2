"""Tool-result attachments (an MCP server's images, audio, blobs) in each provider's wire form.

A tool message's ``attachments`` are bytes beside its text (``membrane.tools.spec.Attachment``).
They reach the model as the provider's own content parts, never pasted into the text:

* Anthropic (Messages API): a ``tool_result`` takes a list of content blocks, so the result's
  text is a ``text`` block followed by one ``image`` block per image (``source`` base64) and one
  ``document`` block per PDF or plain-text attachment, inside the same ``tool_result``.
* OpenAI (Chat Completions): a ``tool`` message holds text only, so the attachments of a run of
  tool results follow them in one ``user`` message: for each call a ``text`` part naming it
  (``Attachments of tool call ID (NAME):``), then ``image_url`` parts (a ``data:`` URL),
  ``input_audio`` parts (WAV and MP3) and ``file`` parts (PDF, ``file_data`` as a ``data:`` URL).

A kind the provider takes no part for is not dropped silently: it becomes a text part saying
what was left out (its MIME type, name and size).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from membrane.models.base import Message
from membrane.tools.spec import Attachment

__all__ = [
    "anthropic_result_content",
    "attachments_from_anthropic",
    "attachments_from_openai",
    "is_openai_attachments",
    "openai_attachment_message",
    "tool_runs",
]

#: Image types both providers accept inline.
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_OPENAI_AUDIO = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}
_AUDIO_MIME = {"wav": "audio/wav", "mp3": "audio/mpeg"}
_HEADING = re.compile(r"^Attachments of tool call (?P<id>\S+) \((?P<name>[^)]*)\):$")
_LEFT_OUT = "[attachment left out: "


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _left_out(attachment: Attachment, provider: str) -> str:
    name = f" {attachment.name}" if attachment.name else ""
    return (
        f"{_LEFT_OUT}{attachment.mime_type}{name}, {len(attachment.data)} bytes; "
        f"{provider} takes no such part]"
    )


# -- Anthropic ----------------------------------------------------------------------------------


def anthropic_result_content(message: Message) -> str | list[dict[str, Any]]:
    """The ``content`` of the ``tool_result`` for ``message``: its text alone when it has no
    attachments, else a list of blocks (text first, then one block per attachment)."""
    if not message.attachments:
        return message.content
    blocks: list[dict[str, Any]] = []
    if message.content.strip():  # the API refuses empty and whitespace-only text blocks
        blocks.append({"type": "text", "text": message.content})
    for attachment in message.attachments:
        blocks.append(_anthropic_block(attachment))
    return blocks


def _anthropic_block(attachment: Attachment) -> dict[str, Any]:
    mime = attachment.mime_type
    if mime in IMAGE_TYPES:
        source = {"type": "base64", "media_type": mime, "data": _b64(attachment.data)}
        return {"type": "image", "source": source}
    if mime == "application/pdf":
        source = {"type": "base64", "media_type": mime, "data": _b64(attachment.data)}
        return _titled({"type": "document", "source": source}, attachment)
    if mime == "text/plain":
        text = attachment.data.decode("utf-8", "replace")
        source = {"type": "text", "media_type": mime, "data": text}
        return _titled({"type": "document", "source": source}, attachment)
    return {"type": "text", "text": _left_out(attachment, "Anthropic")}


def _titled(block: dict[str, Any], attachment: Attachment) -> dict[str, Any]:
    if attachment.name:
        block["title"] = attachment.name
    return block


def attachments_from_anthropic(content: object) -> tuple[str, tuple[Attachment, ...]]:
    """The text and attachments of a ``tool_result``'s ``content`` (the inverse of
    ``anthropic_result_content``)."""
    if not isinstance(content, list):
        return ("" if content is None else str(content)), ()
    texts: list[str] = []
    attachments: list[Attachment] = []
    for block in content:
        kind = block["type"]
        if kind == "text":
            texts.append(str(block["text"]))
        elif kind in ("image", "document"):
            source = block["source"]
            data = source["data"]
            raw = data.encode("utf-8") if source["type"] == "text" else _decode(data)
            attachments.append(Attachment(str(source["media_type"]), raw, name=block.get("title")))
        else:
            raise ValueError(f"unknown tool_result block {kind!r}")
    return "\n".join(texts), tuple(attachments)


# -- OpenAI -------------------------------------------------------------------------------------


def openai_attachment_message(results: Sequence[Message]) -> dict[str, Any] | None:
    """The ``user`` message carrying the attachments of ``results`` (consecutive tool
    messages), or ``None`` when none of them has any."""
    parts: list[dict[str, Any]] = []
    for message in results:
        if not message.attachments:
            continue
        heading = f"Attachments of tool call {message.tool_call_id} ({message.name or ''}):"
        parts.append({"type": "text", "text": heading})
        parts.extend(_openai_part(attachment) for attachment in message.attachments)
    if not parts:
        return None
    return {"role": "user", "content": parts}


def _openai_part(attachment: Attachment) -> dict[str, Any]:
    mime = attachment.mime_type
    data = _b64(attachment.data)
    if mime in IMAGE_TYPES:
        return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}}
    audio = _OPENAI_AUDIO.get(mime)
    if audio is not None:
        return {"type": "input_audio", "input_audio": {"data": data, "format": audio}}
    if mime == "application/pdf":
        file: dict[str, str] = {"file_data": f"data:{mime};base64,{data}"}
        file["filename"] = attachment.name or "attachment.pdf"
        return {"type": "file", "file": file}
    return {"type": "text", "text": _left_out(attachment, "OpenAI")}


def is_openai_attachments(item: Mapping[str, Any]) -> bool:
    """Whether a Chat Completions message is one ``openai_attachment_message`` built."""
    content = item.get("content")
    if item.get("role") != "user" or not isinstance(content, list) or not content:
        return False
    first = content[0]
    return first.get("type") == "text" and _HEADING.match(str(first.get("text", ""))) is not None


def attachments_from_openai(item: Mapping[str, Any]) -> dict[str, tuple[Attachment, ...]]:
    """The attachments of an attachment message, by the tool call id they belong to."""
    found: dict[str, list[Attachment]] = {}
    current: list[Attachment] | None = None
    for part in item["content"]:
        kind = part["type"]
        if kind == "text":
            heading = _HEADING.match(str(part["text"]))
            if heading is not None:
                current = found.setdefault(heading["id"], [])
                continue
            if current is None:
                raise ValueError("attachment text before any tool call heading")
            continue  # a left-out note: nothing to carry back
        if current is None:
            raise ValueError(f"{kind} part before any tool call heading")
        current.append(_from_openai_part(part))
    return {call: tuple(items) for call, items in found.items()}


def _from_openai_part(part: Mapping[str, Any]) -> Attachment:
    kind = part["type"]
    if kind == "image_url":
        mime, data = _data_url(part["image_url"]["url"])
        return Attachment(mime, data)
    if kind == "input_audio":
        audio = part["input_audio"]
        return Attachment(_AUDIO_MIME[audio["format"]], _decode(audio["data"]))
    if kind == "file":
        file = part["file"]
        mime, data = _data_url(file["file_data"])
        return Attachment(mime, data, name=file.get("filename"))
    raise ValueError(f"unknown attachment part {kind!r}")


def _data_url(url: str) -> tuple[str, bytes]:
    head, comma, data = url.partition(",")
    if not head.startswith("data:") or not head.endswith(";base64") or not comma:
        raise ValueError(f"not a base64 data URL: {url[:40]!r}")
    return head[5:-7], _decode(data)


def _decode(data: object) -> bytes:
    try:
        return base64.b64decode(str(data), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"attachment data is not base64: {exc}") from exc


def tool_runs(messages: Iterable[Message]) -> Iterable[tuple[Message, bool]]:
    """Each message, and whether it ends a run of consecutive tool messages."""
    items = list(messages)
    for index, message in enumerate(items):
        following = items[index + 1] if index + 1 < len(items) else None
        ends = message.role == "tool" and (following is None or following.role != "tool")
        yield message, ends
