"""The console in a real browser: Debian's Chromium, headless, driven by Playwright with the
system's executable (Playwright's own browser download is never used). A real ``membrane
console`` process on a real ``membrane serve``: tick ``inherit`` by keyboard and see explain
change, save and find the token in the file, start a scripted run from one tab and watch
another tab's tree show it live, answer its approval and see the run go on.

With ``MEMBRANE_WRITE_DOCS=1`` the test writes the screenshots docs/console.md shows
(docs/console/*.png). Without ``chromium`` on PATH the test is skipped with the reason."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from console_support import BOUND, Served, serving

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)"
)

FLAGS: Final = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DOCS = Path(__file__).resolve().parents[2] / "docs" / "console"
WAIT_MS: Final = BOUND * 1000


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    # A folder of its own (not pytest's): the screenshots show the project's paths.
    base = Path(tempfile.mkdtemp(prefix="membrane-console-"))
    try:
        with serving(base) as found:
            yield found
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def console_url(served: Served) -> Iterator[str]:
    """A real ``membrane console`` process; its printed URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "membrane", "console", "--project", str(served.project), "--json"],
        env=dict(os.environ), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        yield str(json.loads(proc.stdout.readline())["url"])
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=BOUND)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            yield chromium
        finally:
            chromium.close()


def _shot(page: Any, name: str) -> None:
    if os.environ.get("MEMBRANE_WRITE_DOCS") == "1":
        DOCS.mkdir(exist_ok=True)
        page.screenshot(path=str(DOCS / f"{name}.png"))


def _fits(page: Any) -> bool:
    """Nothing wider than the window (tables scroll inside their own box)."""
    return bool(page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"))


def test_edit_an_agent_tick_inherit_by_keyboard_see_explain_change_and_save(
    browser: Any, console_url: str, served: Served
) -> None:
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.goto(console_url)
    expect(page.get_by_role("heading", name="Agents")).to_be_visible()
    _shot(page, "agents")
    # The first Tab reaches the link that skips the navigation.
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to the page")).to_be_focused()
    page.get_by_role("link", name="helper", exact=True).click()
    callable_ = page.locator("#callable")
    expect(callable_).to_contain_text("Read")
    expect(callable_).not_to_contain_text("Bash")
    inherit = page.get_by_label("inherit", exact=True)
    inherit.focus()
    page.keyboard.press("Space")
    expect(inherit).to_be_checked()
    # The explain beside the form is resolved again: the parent's live tools come in.
    expect(callable_).to_contain_text("Bash", timeout=WAIT_MS)
    # Typing in the prompt body re-renders the system prompt beside it.
    page.get_by_label("prompt body").press("End")
    page.get_by_label("prompt body").type(" Cite the line.")
    expect(page.locator("pre.prompt")).to_contain_text("Cite the line.", timeout=WAIT_MS)
    _shot(page, "editor")
    page.get_by_role("button", name="Review changes").click()
    expect(page.locator("pre.diff")).to_contain_text("+tools: Read, Grep, inherit")
    _shot(page, "save")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_have_text("Saved.")
    text = (served.project / ".membrane" / "agents" / "helper.md").read_text()
    assert "tools: Read, Grep, inherit" in text and "# The helper reads" in text
    assert "Answer from the notes. Cite the line." in text
    # Reloaded from the file, the box is ticked.
    page.reload()
    expect(page.get_by_label("inherit", exact=True)).to_be_checked()
    page.set_viewport_size({"width": 420, "height": 800})
    assert _fits(page)
    _shot(page, "editor-narrow")
    context.close()


def test_a_started_run_shows_live_and_answering_its_approval_lets_it_go_on(
    browser: Any, console_url: str, served: Served
) -> None:
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1280, "height": 800})
    watcher = context.new_page()
    watcher.goto(console_url.replace("/?", "/runs?"))
    expect(watcher.get_by_role("heading", name="Runs")).to_be_visible()
    maker_rows = watcher.locator("#tree tr", has_text="maker")
    expect(maker_rows).to_have_count(0)
    actor = context.new_page()
    actor.goto(console_url.replace("/?", "/runs?"))
    actor.get_by_label("agent", exact=True).select_option("maker")
    actor.get_by_label("task", exact=True).fill("make the file")
    actor.get_by_label("model", exact=True).fill(served.model)
    actor.get_by_role("button", name="Start").click()
    # The watcher never reloads: its tree learns of the run from the server's events.
    expect(maker_rows).to_have_count(1, timeout=WAIT_MS)
    expect(maker_rows.first).to_have_attribute("data-status", "running")
    actor.goto(console_url.replace("/?", "/inbox?"))
    approval = actor.locator("li.approval", has_text="touch out/made.txt")
    expect(approval).to_be_visible(timeout=WAIT_MS)
    _shot(actor, "inbox")
    approval.get_by_label("reason").fill("the file is expected")
    approval.get_by_role("button", name="Allow").click()
    expect(maker_rows.first).to_have_attribute("data-status", "completed", timeout=WAIT_MS)
    assert (served.project / "out" / "made.txt").exists()
    expect(actor.locator("body")).to_contain_text("allowed Bash of maker: the file is expected")
    _shot(watcher, "runs")
    maker_rows.first.get_by_role("link").click()
    expect(watcher.locator("body")).to_contain_text("touch out/made.txt")
    _shot(watcher, "run")
    watcher.goto(console_url.replace("/?", "/doctor?"))
    expect(watcher.get_by_role("heading", name="Doctor")).to_be_visible()
    _shot(watcher, "doctor")
    watcher.set_viewport_size({"width": 420, "height": 800})
    watcher.goto(console_url.replace("/?", "/runs?"))
    assert _fits(watcher)
    context.close()
