from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from membrane.builtin_tools.declarations import browser_preview_tool, find_browser
from membrane.errors import ToolArgumentsInvalid, ToolFailed
from membrane.tools.spec import ToolContext

pytestmark = pytest.mark.anyio

REAL_BROWSER = find_browser()


def test_find_browser_follows_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_browser() is None
    fake = tmp_path / "google-chrome"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert find_browser() == str(fake)


async def test_browser_preview_rejects_unsupported_schemes(context: ToolContext) -> None:
    tool = browser_preview_tool("/nonexistent/chromium")
    with pytest.raises(ToolArgumentsInvalid, match="scheme"):
        await tool.handler({"url": "javascript:alert(1)"}, context)


async def test_browser_preview_fails_clearly_for_a_missing_local_file(
    context: ToolContext,
) -> None:
    tool = browser_preview_tool("/nonexistent/chromium")
    with pytest.raises(ToolFailed, match="does not exist"):
        await tool.handler({"url": "missing.html"}, context)


@pytest.mark.skipif(REAL_BROWSER is None or shutil.which("bash") is None, reason="no browser")
async def test_a_real_browser_dumps_the_dom_of_a_local_page(
    checkout: Path, context: ToolContext
) -> None:
    assert REAL_BROWSER is not None
    (checkout / "page.html").write_text(
        "<html><body><p id='x'></p><script>"
        "document.getElementById('x').textContent = 'rendered';</script></body></html>"
    )
    result = await browser_preview_tool(REAL_BROWSER).handler({"url": "page.html"}, context)
    assert "rendered" in result["dom"]
