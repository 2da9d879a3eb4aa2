"""MCP tool results as Membrane tool results, part for part.

Text blocks become the text the model reads; ``structuredContent`` stays structured; images,
audio and blob resources become ``Attachment``s (bytes beside the text, never pasted into it);
an embedded text resource and a resource link become text naming their URI. A result marked
``isError`` is an error tool result (``mcp-tool-error``) carrying the server's text.
"""

from __future__ import annotations

import base64
import binascii

from mcp import types

from membrane.errors import McpToolError
from membrane.tools.spec import Attachment, ToolOutput

__all__ = ["map_result"]


def map_result(server: str, tool: str, result: types.CallToolResult) -> ToolOutput:
    """The ``ToolOutput`` for one ``CallToolResult``; ``McpToolError`` when it is an error."""
    texts: list[str] = []
    attachments: list[Attachment] = []
    for block in result.content:
        match block:
            case types.TextContent():
                texts.append(block.text)
            case types.ImageContent() | types.AudioContent():
                attachments.append(Attachment(block.mime_type, _decode(block.data)))
            case types.EmbeddedResource(resource=types.TextResourceContents() as resource):
                texts.append(f"[resource {resource.uri}]\n{resource.text}")
            case types.EmbeddedResource(resource=types.BlobResourceContents() as resource):
                mime = resource.mime_type or "application/octet-stream"
                attachments.append(Attachment(mime, _decode(resource.blob), name=str(resource.uri)))
            case types.ResourceLink():
                texts.append(f"[resource link {block.uri}]")
    text = "\n".join(texts)
    if result.is_error:
        raise McpToolError(
            f"MCP tool {tool!r} of server {server!r} reported an error: "
            f"{text or 'no message given'}",
            server=server,
            tool=tool,
        )
    return ToolOutput(
        text=text, structured=result.structured_content, attachments=tuple(attachments)
    )


def _decode(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return data.encode("utf-8", "replace")
