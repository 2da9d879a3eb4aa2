"""Every route of ``membrane console`` through Starlette's test client, on a real ``membrane
serve``: the token and the cookie, the host, origin and CSRF checks, the catalog, the editor
with its live explain and its round-trip save, the run tree and a run's page, the inbox's
approvals, and a role that may not write."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from console_support import BOUND, Served, serving
from starlette.testclient import TestClient

from membrane.cli.console import console_parts, console_role
from membrane.console import Guard, build_app

PORT = 8765
BASE = f"http://127.0.0.1:{PORT}"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("console")) as found:
        yield found


def _client(served: Served, *, role: str | None) -> tuple[TestClient, Guard]:
    guard = Guard(port=PORT)
    parts = console_parts(served.project, role=role, socket_path=served.socket)
    return TestClient(build_app(parts, guard), base_url=BASE), guard


@pytest.fixture
def console(served: Served) -> Iterator[tuple[TestClient, Guard]]:
    """The console under the role the project's settings give it (``console_role``)."""
    client, guard = _client(served, role=console_role(served.project))
    with client:
        client.get(f"/agents?token={guard.token}")
        yield client, guard


@pytest.fixture
def viewer(served: Served) -> Iterator[tuple[TestClient, Guard]]:
    """The console under a role whose view has no Write."""
    client, guard = _client(served, role="viewer")
    with client:
        client.get(f"/agents?token={guard.token}")
        yield client, guard


def _editor_form(client: TestClient, guard: Guard, name: str) -> dict[str, list[str]]:
    """The editor's form as the page renders it (its inputs, ticked boxes and textarea)."""
    page = client.get(f"/agents/{name}").text
    form: dict[str, list[str]] = {}
    for tag in re.findall(
        r"<input [^>]*>", page.split("<form id=editor", 1)[1].split("</form>")[0]
    ):
        name_ = re.search(r'name="?([\w-]+)', tag)
        value = re.search(r'value="([^"]*)"', tag)
        if name_ is None or ("type=checkbox" in tag and " checked" not in tag):
            continue
        form.setdefault(name_[1], []).append(_unescape(value[1] if value else ""))
    body = re.search(r"<textarea id=\"f-body\" name=body rows=10>(.*?)</textarea>", page, re.S)
    assert body is not None
    form["body"] = [_unescape(body[1])]
    assert form["csrf"] == [guard.csrf]
    return form


def _unescape(text: str) -> str:
    import html

    return html.unescape(text)


def test_a_request_without_the_token_is_refused_and_the_token_sets_a_strict_cookie(
    served: Served,
) -> None:
    client, guard = _client(served, role="ops")
    with client:
        refused = client.get("/agents")
        assert refused.status_code == 403
        assert refused.headers["x-membrane-error"] == "console-refused"
        assert client.get("/agents?token=not-the-token").status_code == 403
        admitted = client.get(f"/agents?token={guard.token}")
        assert admitted.status_code == 200
        cookie = admitted.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        # From then on the cookie alone admits.
        page = client.get("/runs")
        assert page.status_code == 200
        # No other page may frame it, and its URLs never go to another site as a referrer.
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        assert "script-src 'self';" in page.headers["content-security-policy"]
        assert page.headers["x-frame-options"] == "DENY"
        assert page.headers["referrer-policy"] == "same-origin"
        assert client.get("/static/htmx.min.js").status_code == 200


def test_a_forged_host_origin_or_missing_csrf_token_is_refused(
    console: tuple[TestClient, Guard], served: Served
) -> None:
    client, guard = console
    assert client.get("/agents", headers={"host": "evil.example:8765"}).status_code == 403
    before = (served.project / ".membrane" / "agents" / "helper.md").read_text()
    form = {**_editor_form(client, guard, "helper"), "tools": ["Read", "Grep", "inherit"]}
    forged = client.post(
        "/agents/helper/save", data=form, headers={"origin": "http://evil.example"}
    )
    assert forged.status_code == 403
    assert "origin" in forged.text
    without = {k: v for k, v in form.items() if k != "csrf"}
    missing = client.post("/agents/helper/save", data=without)
    assert missing.status_code == 403
    assert "csrf" in missing.text.lower()
    assert (served.project / ".membrane" / "agents" / "helper.md").read_text() == before


def test_the_catalog_shows_root_dialect_shadowing_and_warnings_with_file_and_line(
    console: tuple[TestClient, Guard], served: Served
) -> None:
    client, _ = console
    page = client.get("/agents").text
    row = page.split('href="/agents/helper"', 1)[1].split("</tr>", 1)[0]
    assert "project" in row and "membrane" in row
    assert ".agents/agents/helper.md" in row  # the workspace's file it shadows
    # Paths are shown relative to the project the page names.
    assert f"Project: <code>{served.project}</code>" in page
    assert re.search(r">\.membrane/agents/odd\.md:4: [a-z-]+: [^<]*colour", _unescape(page))


def test_ticking_inherit_changes_the_explain_and_saving_keeps_the_token_and_the_comments(
    console: tuple[TestClient, Guard], served: Served
) -> None:
    client, guard = console
    path = served.project / ".membrane" / "agents" / "helper.md"
    form = _editor_form(client, guard, "helper")
    assert form["tools"] == ["Read", "Grep"]
    before = client.post("/agents/helper/explain", data=form).text
    assert "<code>Bash</code>" not in before.split("<h3>Left out")[0]
    form["tools"] = ["Read", "Grep", "inherit"]
    after = client.post("/agents/helper/explain", data=form)
    assert after.status_code == 200
    assert "<code>Bash</code>" in after.text.split("<h3>Left out")[0]
    preview = client.post("/agents/helper/preview", data=form)
    assert preview.status_code == 200
    assert re.search(
        r"\n\+tools: Read, Grep, inherit +# read-only on purpose\n", _unescape(preview.text)
    )
    assert "inherit" not in path.read_text()  # the preview writes nothing
    saved = client.post("/agents/helper/save", data=form, follow_redirects=False)
    assert saved.status_code == 303
    text = path.read_text()
    assert re.search(r"\ntools: Read, Grep, inherit +# read-only on purpose\n", text)
    assert text.startswith("---\n# The helper reads; it never writes.\nname: helper\n")
    # The editor reads the saved file back with the box ticked.
    assert _editor_form(client, guard, "helper")["tools"] == ["inherit", "Read", "Grep"]


def test_a_save_that_would_not_load_or_over_a_changed_file_writes_nothing(
    console: tuple[TestClient, Guard], served: Served
) -> None:
    client, guard = console
    path = served.project / ".membrane" / "agents" / "reader.md"
    form = _editor_form(client, guard, "reader")
    before = path.read_text()
    bad = client.post("/agents/reader/preview", data={**form, "isolation": ["sideways"]})
    assert bad.status_code == 422
    assert "definition-invalid" in bad.text
    assert (
        client.post("/agents/reader/save", data={**form, "isolation": ["sideways"]}).status_code
        == 422
    )
    assert path.read_text() == before
    path.write_text(before.replace("Reads the notes.", "Reads the notes, changed."))
    changed = client.post("/agents/reader/save", data={**form, "description": ["Other"]})
    assert changed.status_code == 409
    assert "definition-changed" in changed.text
    assert "changed." in path.read_text() and "Other" not in path.read_text()
    path.write_text(before)


def test_a_role_that_may_not_write_cannot_save_or_answer_an_approval(
    viewer: tuple[TestClient, Guard], served: Served
) -> None:
    client, guard = viewer
    path = served.project / ".membrane" / "agents" / "reader.md"
    before = path.read_text()
    assert "role: viewer (read-only)" in client.get("/agents").text
    form = {**_editor_form(client, guard, "reader"), "description": ["Rewritten"]}
    refused = client.post("/agents/reader/save", data=form)
    assert refused.status_code == 403
    assert "caller-refused" in refused.text
    assert path.read_text() == before
    answer = client.post("/inbox/1", data={"csrf": guard.csrf, "decision": "allow"})
    assert answer.status_code == 403


def test_unknown_agents_and_runs_are_not_found(console: tuple[TestClient, Guard]) -> None:
    client, _ = console
    assert client.get("/agents/nobody").status_code == 404
    assert client.get("/agents/general-purpose").status_code == 404  # a builtin: not a file
    assert client.get("/runs/no-such-run").status_code == 404
    assert client.get("/doctor").status_code == 200


def _wait_for(client: TestClient, path: str, needle: str) -> str:
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline:
        page = client.get(path)
        if page.status_code == 200 and needle in page.text:
            return page.text
        time.sleep(0.05)
    raise AssertionError(f"{needle!r} never appeared on {path}")


def test_a_started_run_appears_in_the_tree_and_its_page_shows_its_tool_calls(
    console: tuple[TestClient, Guard], served: Served
) -> None:
    client, guard = console
    start = {"csrf": guard.csrf, "agent": "reader", "task": "read", "model": served.model}
    assert client.post("/runs/start", data=start, follow_redirects=False).status_code == 303
    rows = _wait_for(client, "/runs/rows?q=reader", 'data-status="completed"')
    run_id = re.search(r'id="run-([^"]+)" data-status="completed"', rows)
    assert run_id is not None
    assert "vetoed Bash (tool-not-visible)" in rows  # the call-time veto, marked on its row
    page = client.get(f"/runs/{run_id[1]}").text
    assert "notes.txt" in page and "reader is done" in page
    assert client.get("/runs/rows?q=no-such-agent").text.count("<tr") == 1  # "No runs yet."


def test_an_approval_waits_in_the_inbox_and_allowing_it_lets_the_run_go_on(
    console: tuple[TestClient, Guard], served: Served
) -> None:
    client, guard = console
    start = {"csrf": guard.csrf, "agent": "maker", "task": "make", "model": served.model}
    assert client.post("/runs/start", data=start, follow_redirects=False).status_code == 303
    inbox = _wait_for(client, "/inbox", "touch out/made.txt")
    approval = re.search(r'action="/inbox/(\d+)"', inbox)
    assert approval is not None
    answer = {"csrf": guard.csrf, "decision": "allow", "reason": "expected"}
    assert (
        client.post(f"/inbox/{approval[1]}", data=answer, follow_redirects=False).status_code == 303
    )
    _wait_for(client, "/runs/rows?q=maker", 'data-status="completed"')
    assert (served.project / "out" / "made.txt").exists()
    assert "allowed <code>Bash</code> of maker: expected" in client.get("/inbox").text


def test_the_console_role_setting_names_the_role(served: Served, tmp_path: Path) -> None:
    assert console_role(served.project) == "ops"


def _dead_letter(served: Served) -> tuple[int, float]:
    from membrane.store.location import locate_state
    from membrane.store.sqlite import SQLiteStore

    store = SQLiteStore(locate_state(served.project, home=served.home).path)
    with store:
        item = store.enqueue_outbox("run-that-is-gone", {"kind": "completion"})
        dead = store.bury_outbox(item, error="the recipient is gone")
    return item, dead.dead_at


def _still_dead(served: Served, item: int, dead_at: float) -> bool:
    from membrane.store.location import locate_state
    from membrane.store.sqlite import SQLiteStore

    store = SQLiteStore(locate_state(served.project, home=served.home).path, read_only=True)
    with store:
        return any(d.id == item and d.dead_at == dead_at for d in store.dead_outbox())


def test_dead_letters_are_in_the_inbox_and_only_a_role_that_may_write_retries_them(
    console: tuple[TestClient, Guard], viewer: tuple[TestClient, Guard], served: Served
) -> None:
    item, dead_at = _dead_letter(served)
    reader, reader_guard = viewer
    assert "the recipient is gone" in reader.get("/inbox").text
    refused = reader.post(f"/outbox/{item}/retry", data={"csrf": reader_guard.csrf})
    assert refused.status_code == 403
    assert _still_dead(served, item, dead_at)
    client, guard = console
    done = client.post(f"/outbox/{item}/retry", data={"csrf": guard.csrf}, follow_redirects=False)
    assert done.status_code == 303
    assert not _still_dead(served, item, dead_at)  # queued again (or delivered, or dead anew)


def test_lineage_schedules_and_outbox_pages_render(console: tuple[TestClient, Guard]) -> None:
    client, _ = console
    for path, heading in (("/lineage", "Lineage"), ("/schedules", "Schedules"),
                          ("/outbox", "Outbox")):  # fmt: skip
        page = client.get(path)
        assert page.status_code == 200 and f"<h1>{heading}</h1>" in page.text
    assert "No schedules." in client.get("/schedules").text


def test_a_budget_and_the_network_flag_are_written_as_the_form_sets_them(
    console: tuple[TestClient, Guard], served: Served
) -> None:
    client, guard = console
    path = served.project / ".membrane" / "agents" / "odd.md"
    before = path.read_text()
    form = _editor_form(client, guard, "odd")
    bad = client.post("/agents/odd/preview", data={**form, "budget": ["tokens=lots"]})
    assert bad.status_code == 422 and "definition-invalid" in bad.text
    form = {**form, "budget": ["tokens=1000, children=2"], "network": ["false"]}
    saved = client.post("/agents/odd/save", data=form, follow_redirects=False)
    assert saved.status_code == 303
    text = path.read_text()
    assert "budget: tokens=1000, children=2\n" in text and "network: false\n" in text
    assert "colour: red" in text  # the key Membrane does not know is kept as written
    shown = client.get("/agents/odd").text
    assert 'value="tokens=1000, children=2"' in shown
    assert '<option value="false" selected>' in shown
    path.write_text(before)


def test_a_run_is_steered_stopped_and_resumed_from_its_page(
    console: tuple[TestClient, Guard], served: Served
) -> None:
    client, guard = console
    start = {"csrf": guard.csrf, "agent": "maker", "task": "make", "model": served.model}
    client.post("/runs/start", data=start)
    # The maker waits for its approval: a live run to steer and stop.
    inbox = _wait_for(client, "/inbox", "touch out/made.txt")
    waiting = re.search(r"\(run <code>([^<]+)</code>\)", inbox)
    assert waiting is not None
    run_id = waiting[1]
    steer = {"csrf": guard.csrf, "message": "use the out folder"}
    assert (
        client.post(f"/runs/{run_id}/message", data=steer, follow_redirects=False).status_code
        == 303
    )
    assert (
        client.post(
            f"/runs/{run_id}/stop", data={"csrf": guard.csrf}, follow_redirects=False
        ).status_code
        == 303
    )
    _wait_for(client, "/runs/rows?q=maker", f'id="run-{run_id}" data-status="stopped"')
    approval = re.search(r'action="/inbox/(\d+)"', inbox)
    assert approval is not None
    gone = client.post(f"/inbox/{approval[1]}", data={"csrf": guard.csrf, "decision": "allow"})
    assert gone.status_code == 404 and "unknown-approval" in gone.text
    resume = {"csrf": guard.csrf, "message": "go on", "model": served.model}
    assert (
        client.post(f"/runs/{run_id}/resume", data=resume, follow_redirects=False).status_code
        == 303
    )
    _wait_for(client, "/inbox", f"(run <code>{run_id}</code>)")  # asking again, resumed
    client.post(f"/runs/{run_id}/stop", data={"csrf": guard.csrf})
    _wait_for(client, "/runs/rows?q=maker", f'id="run-{run_id}" data-status="stopped"')


def test_the_host_answers_a_planning_gate_from_the_inbox_and_a_viewer_cannot(
    console: tuple[TestClient, Guard], viewer: tuple[TestClient, Guard], served: Served
) -> None:
    client, guard = console
    start = {"csrf": guard.csrf, "agent": "lead", "task": "fix it", "model": served.model}
    client.post("/runs/start", data=start)
    rows = _wait_for(client, "/runs/rows?q=lead", 'data-status="completed"')
    run_id = re.search(r'id="run-([^"]+)" data-status="completed"', rows)
    assert run_id is not None
    inbox = _wait_for(
        client, "/inbox", f"<code>{run_id[1]}</code>: phase <strong class=phase>light_offer"
    )
    assert f'action="/gates/{run_id[1]}"' in inbox
    accept = {"csrf": guard.csrf, "answer": "accept_light_plan"}
    reader, reader_guard = viewer
    refused = reader.post(f"/gates/{run_id[1]}", data={**accept, "csrf": reader_guard.csrf})
    assert refused.status_code == 403
    assert "phase <strong class=phase>light_offer" in client.get("/inbox").text
    done = client.post(f"/gates/{run_id[1]}", data=accept, follow_redirects=False)
    assert done.status_code == 303
    assert (
        f"<code>{run_id[1]}</code>: phase <strong class=phase>light_plan"
        in client.get("/inbox").text
    )
