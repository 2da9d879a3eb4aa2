"""``Edit``: replace an exact piece of text in a file inside the checkout."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from membrane.builtin_tools._support import (
    BINARY_SNIFF_BYTES,
    UMASK,
    NotRegularFile,
    bool_arg,
    in_thread,
    looks_binary,
    str_arg,
)
from membrane.builtin_tools.beneath import (
    Parent,
    open_parent,
    read_beneath,
    refuse_hard_link,
    write_beneath,
)
from membrane.builtin_tools.paths import checkout_root, display_path, resolve_for_write
from membrane.errors import ToolFailed
from membrane.tools.spec import ToolContext

__all__ = ["handle"]

NAME = "Edit"


def _load(parent: Parent, root: Path, shown: str) -> str:
    path = parent.path
    try:
        data = read_beneath(parent, tool=NAME, root=root)
    except NotRegularFile as exc:
        raise ToolFailed(
            f"Edit: {shown} is {exc.kind}, not a regular file; only regular files can be edited.",
            tool=NAME,
            path=str(path),
        ) from exc
    if looks_binary(data[:BINARY_SNIFF_BYTES]):
        raise ToolFailed(
            f"Edit: {shown} is a binary file; only text files can be edited.",
            tool=NAME,
            path=str(path),
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolFailed(
            f"Edit: {shown} is not UTF-8 text ({exc.reason} at byte {exc.start}); "
            "it cannot be edited safely.",
            tool=NAME,
            path=str(path),
        ) from exc


def _edit(root: Path, path: Path, shown: str, old: str, new: str, replace_all: bool) -> str:
    try:
        with open_parent(root, path, tool=NAME, create=False) as parent:
            return _edit_in(parent, root, shown, old, new, replace_all)
    except FileNotFoundError as exc:
        raise ToolFailed(
            f"Edit: {shown} does not exist. Use Write to create a new file.",
            tool=NAME,
            path=str(path),
        ) from exc
    except IsADirectoryError as exc:
        raise ToolFailed(
            f"Edit: {shown} is a directory, not a regular file; only regular files can be edited.",
            tool=NAME,
            path=str(path),
        ) from exc
    except OSError as exc:
        raise ToolFailed(
            f"Edit could not change {shown}: {exc.strerror or exc}.", tool=NAME, path=str(path)
        ) from exc


def _edit_in(parent: Parent, root: Path, shown: str, old: str, new: str, replace_all: bool) -> str:
    path = parent.path
    refuse_hard_link(parent, tool=NAME, shown=shown)
    text = _load(parent, root, shown)
    count = text.count(old)
    if count == 0 and "\r\n" in text and "\n" in old and "\r\n" not in old:
        # The file uses CRLF line ends; the model quoted it with LF ones.
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
        count = text.count(old)
    if count == 0:
        raise ToolFailed(
            f"Edit: `old_string` was not found in {shown}. It must match the file exactly, "
            "whitespace included and without Read's line-number prefixes; Read the file again "
            "and copy the text.",
            tool=NAME,
            path=str(path),
            occurrences=0,
        )
    if count > 1 and not replace_all:
        raise ToolFailed(
            f"Edit: `old_string` appears {count} times in {shown}. Include more surrounding "
            "text so that it matches exactly once, or pass `replace_all: true`.",
            tool=NAME,
            path=str(path),
            occurrences=count,
        )
    first_line = text.count("\n", 0, text.index(old)) + 1
    updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
    write_beneath(parent, updated.encode("utf-8"), umask=UMASK)
    replaced = count if replace_all else 1
    noun = "occurrence" if replaced == 1 else "occurrences"
    return f"Edited {shown}: replaced {replaced} {noun} (first at line {first_line})."


async def handle(arguments: Mapping[str, Any], context: ToolContext) -> str:
    raw = str_arg(arguments, "file_path", tool=NAME)
    old = str_arg(arguments, "old_string", tool=NAME)
    new = str_arg(arguments, "new_string", tool=NAME)
    replace_all = bool_arg(arguments, "replace_all", tool=NAME, default=False)
    if not old:
        raise ToolFailed(
            "Edit: `old_string` is empty. Quote the text to replace, or use Write to create "
            "a file.",
            tool=NAME,
        )
    if old == new:
        raise ToolFailed(
            "Edit: `old_string` and `new_string` are identical, so the edit would change "
            "nothing. Give the new text in `new_string`.",
            tool=NAME,
        )
    path = resolve_for_write(raw, context, tool=NAME)
    root = checkout_root(context)
    return await in_thread(_edit, root, path, display_path(path, context), old, new, replace_all)
