"""``Write``: create or overwrite a text file inside the checkout."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from membrane.builtin_tools._support import UMASK, in_thread, str_arg
from membrane.builtin_tools.beneath import (
    existing_kind,
    open_parent,
    refuse_hard_link,
    write_beneath,
)
from membrane.builtin_tools.paths import checkout_root, display_path, resolve_for_write
from membrane.errors import ToolFailed
from membrane.tools.spec import ToolContext

__all__ = ["handle"]

NAME = "Write"


def _write(root: Path, path: Path, shown: str, content: str) -> str:
    try:
        with open_parent(root, path, tool=NAME, create=True) as parent:
            kind = existing_kind(parent)
            if kind == "a directory":
                raise ToolFailed(
                    f"Write: {shown} is a directory; give the path of a file.",
                    tool=NAME,
                    path=str(path),
                )
            if kind is not None:
                raise ToolFailed(
                    f"Write: {shown} is {kind}, not a regular file; only regular files can be "
                    "written.",
                    tool=NAME,
                    path=str(path),
                )
            refuse_hard_link(parent, tool=NAME, shown=shown)
            existed = write_beneath(parent, content.encode("utf-8"), umask=UMASK)
    except IsADirectoryError as exc:
        raise ToolFailed(
            f"Write: {shown} is a directory; give the path of a file.", tool=NAME, path=str(path)
        ) from exc
    except OSError as exc:
        raise ToolFailed(
            f"Write could not write {shown}: {exc.strerror or exc}.", tool=NAME, path=str(path)
        ) from exc
    lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
    size = len(content.encode("utf-8"))
    verb = "Overwrote" if existed else "Created"
    noun = "line" if lines == 1 else "lines"
    return f"{verb} {shown} ({lines} {noun}, {size} bytes)."


async def handle(arguments: Mapping[str, Any], context: ToolContext) -> str:
    raw = str_arg(arguments, "file_path", tool=NAME)
    content = str_arg(arguments, "content", tool=NAME)
    path = resolve_for_write(raw, context, tool=NAME)
    root = checkout_root(context)
    return await in_thread(_write, root, path, display_path(path, context), content)
