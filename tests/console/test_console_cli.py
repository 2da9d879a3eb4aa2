"""``membrane console`` as a user starts it: a real process on 127.0.0.1 that prints its URL
(with the token) once the page answers, refuses a request without the token, and connects to
the runtime under the settings' ``console_role``."""

from __future__ import annotations

import http.cookiejar
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from console_support import BOUND, Served, serving


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("console-cli")) as found:
        yield found


def _status(request: urllib.request.Request) -> int:
    try:
        with urllib.request.urlopen(request, timeout=BOUND) as response:
            return int(response.status)
    except urllib.error.HTTPError as refused:
        return refused.code


def test_console_prints_its_url_and_serves_only_the_token_holder(served: Served) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "membrane", "console", "--project", str(served.project), "--json"],
        env=dict(os.environ), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        announced = json.loads(proc.stdout.readline())
        assert set(announced) == {"url", "port", "role"}
        assert announced["role"] == "ops"
        url = announced["url"]
        base = f"http://127.0.0.1:{announced['port']}"
        assert url.startswith(f"{base}/?token=")
        # The URL's token sets the cookie on the redirect to the Agents page, as a browser
        # keeps it.
        jar = http.cookiejar.CookieJar()
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        with browser.open(url, timeout=BOUND) as page:
            assert page.url == f"{base}/agents"
            assert "role: ops (may write)" in page.read().decode()
        assert [cookie.name for cookie in jar] == [f"membrane_console_{announced['port']}"]
        assert _status(urllib.request.Request(f"{base}/agents")) == 403
        forged = urllib.request.Request(
            url.replace("/?", "/runs/start?"), data=b"agent=reader&task=x", method="POST",
            headers={"Origin": "http://evil.example"},
        )  # fmt: skip
        assert _status(forged) == 403
    finally:
        proc.terminate()
        proc.wait(timeout=BOUND)
