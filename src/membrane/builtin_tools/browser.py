"""``BrowserPreview``: a headless Chromium renders a page, as a DOM dump or a screenshot.

The tool exists only where a browser does: :func:`find_browser` looks for a Chromium-family
executable on ``PATH`` and :func:`membrane.builtin_tools.builtin_tools` leaves the tool out when
there is none. It is never offered as a stub that fails on every call.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from membrane.builtin_tools._support import (
    in_thread,
    int_arg,
    number_arg,
    optional_str_arg,
    str_arg,
)
from membrane.builtin_tools.paths import checkout_root, resolve_path
from membrane.builtin_tools.tool_limits import (
    BROWSER_EXECUTABLES,
    MAX_DOM_BYTES,
)
from membrane.builtin_tools.tool_limits import BROWSER_MAX_TIMEOUT as MAX_TIMEOUT
from membrane.builtin_tools.tool_limits import BROWSER_TIMEOUT as DEFAULT_TIMEOUT
from membrane.errors import ToolArgumentsInvalid, ToolFailed
from membrane.tools.spec import ToolContext

__all__ = ["BROWSER_EXECUTABLES", "preview"]

NAME = "BrowserPreview"


def _target(raw: str, context: ToolContext) -> str:
    scheme = urlsplit(raw).scheme.lower()
    if scheme in ("http", "https", "file"):
        return raw
    if scheme and len(scheme) > 1:
        raise ToolArgumentsInvalid(
            f"BrowserPreview: unsupported URL scheme {scheme!r}; use http(s), file, or a path.",
            tool=NAME,
            path="$.url",
            reason="unsupported scheme",
        )
    path = resolve_path(raw, context, tool=NAME, argument="url")
    if not path.is_file():
        raise ToolFailed(f"BrowserPreview: the file {path} does not exist.", tool=NAME)
    return path.as_uri()


async def preview(
    arguments: Mapping[str, Any], context: ToolContext, *, executable: str
) -> dict[str, Any]:
    """One call of ``BrowserPreview`` driving ``executable``."""
    url = await in_thread(_target, str_arg(arguments, "url", tool=NAME), context)
    mode = optional_str_arg(arguments, "mode", tool=NAME) or "dom"
    if mode not in ("dom", "screenshot"):
        raise ToolArgumentsInvalid(
            "BrowserPreview: `mode` must be `dom` or `screenshot`.",
            tool=NAME,
            path="$.mode",
            reason="enum",
        )
    width = int_arg(arguments, "width", tool=NAME, default=1280, minimum=100, maximum=4000)
    height = int_arg(arguments, "height", tool=NAME, default=800, minimum=100, maximum=4000)
    timeout = number_arg(
        arguments, "timeout", tool=NAME, default=DEFAULT_TIMEOUT, maximum=MAX_TIMEOUT
    )
    with tempfile.TemporaryDirectory(prefix="membrane-browser-") as profile:
        argv = [
            executable,
            "--headless",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            argv.append("--no-sandbox")  # Chromium refuses to start as root otherwise.
        shot: Path | None = None
        if mode == "screenshot":
            shot = Path(tempfile.mkdtemp(prefix="membrane-preview-")) / "screenshot.png"
            argv += [f"--screenshot={shot}", f"--window-size={width},{height}"]
        else:
            argv.append("--dump-dom")
        from membrane.sandbox.process import run_process

        try:
            outcome = await run_process(
                [*argv, url],
                cwd=checkout_root(context),
                timeout=timeout,
                max_output=MAX_DOM_BYTES,
            )
        except OSError as exc:
            raise ToolFailed(
                f"BrowserPreview: could not start {executable}: {exc.strerror or exc}.",
                tool=NAME,
            ) from exc
    if outcome.timed_out:
        raise ToolFailed(
            f"BrowserPreview: the browser did not finish within {timeout:g} seconds.",
            tool=NAME,
        )
    if outcome.exit_code != 0 or (shot is not None and not shot.is_file()):
        raise ToolFailed(
            f"BrowserPreview: the browser failed (exit code {outcome.exit_code}): "
            f"{outcome.stderr.strip()[-2000:]}",
            tool=NAME,
        )
    if shot is not None:
        return {"url": url, "screenshot": str(shot), "bytes": shot.stat().st_size}
    return {"url": url, "dom": outcome.stdout}
