"""MCP tool results as Membrane tool results, part for part.

Text blocks become the text the model reads; ``structuredContent`` stays structured; images,
audio and blob resources become ``Attachment``s (bytes beside the text, never pasted into it);
an embedded text resource and a resource link become text naming their URI. A result marked
``isError`` is an error tool result (``mcp-tool-error``) carrying the server's text.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable

from membrane.errors import McpToolError
from membrane.tools.spec import Attachment, ToolOutput

__all__ = ["map_result"]


def map_result(server: str, tool: str, result: object) -> ToolOutput:
    """The ``ToolOutput`` for one ``CallToolResult``; ``McpToolError`` when it is an error."""
    texts: list[str] = []
    attachments: list[Attachment] = []
    for block in _blocks(result):
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(str(getattr(block, "text", "")))
        elif kind in ("image", "audio"):
            attachments.append(
                Attachment(
                    str(getattr(block, "mime_type", "")), _decode(getattr(block, "data", ""))
                )
            )
        elif kind == "resource":
            resource = getattr(block, "resource", None)
            uri = str(getattr(resource, "uri", ""))
            text = getattr(resource, "text", None)
            if isinstance(text, str):
                texts.append(f"[resource {uri}]\n{text}")
            else:
                mime = getattr(resource, "mime_type", None) or "application/octet-stream"
                blob = _decode(getattr(resource, "blob", ""))
                attachments.append(Attachment(str(mime), blob, name=uri or None))
        elif kind == "resource_link":
            texts.append(f"[resource link {getattr(block, 'uri', '')}]")
    text = "\n".join(texts)
    if getattr(result, "is_error", False):
        raise McpToolError(
            f"MCP tool {tool!r} of server {server!r} reported an error: "
            f"{text or 'no message given'}",
            server=server,
            tool=tool,
        )
    return ToolOutput(
        text=text,
        structured=getattr(result, "structured_content", None),
        attachments=tuple(attachments),
    )


def _blocks(result: object) -> Iterable[object]:
    content = getattr(result, "content", None)
    return content if isinstance(content, list) else ()


def _decode(data: object) -> bytes:
    try:
        return base64.b64decode(str(data), validate=True)
    except (binascii.Error, ValueError):
        return str(data).encode("utf-8", "replace")
