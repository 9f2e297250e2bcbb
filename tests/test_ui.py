"""``cclg ui``: its guard (the token, the CSRF token, the Host header), every page, every correction
through the ledger, and stored text that tries to be HTML rendered as text.

Starlette's TestClient runs the real application in-process; the browser tests (``test_ui_browser.py``)
run it behind uvicorn in a real Chromium.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from cclg import api
from cclg.api import learning
from cclg.core.store import Store
from cclg.ui.app import Guard, create_app
from cclg.ui.html import Markup, esc, h, href, lineage_svg

PORT = 48123
TOKEN = "test-token-0123456789"
BASE = f"http://127.0.0.1:{PORT}"


@pytest.fixture
def client(store: Store) -> TestClient:
    """A client of the view of ``store`` that has opened the printed URL (it holds the cookie)."""
    web = TestClient(create_app(store, TOKEN, PORT), base_url=BASE, follow_redirects=False)
    opened = web.get(f"/?token={TOKEN}")
    assert opened.status_code == 303 and opened.headers["location"] == "/"
    cookie = opened.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
    return web


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found, "the page's forms carry no CSRF token"
    return found.group(1)


def added(store: Store, content: str, **kwargs: object) -> str:
    kwargs.setdefault("trust", "trusted")
    result = api.add_memory(store, content, source="test", reason="a test memory", **kwargs)
    assert result.new_nodes
    return result.new_nodes[0].id


# ---------------------------------------------------------------- refusals


def test_a_request_without_the_token_is_refused(store: Store) -> None:
    web = TestClient(create_app(store, TOKEN, PORT), base_url=BASE, follow_redirects=False)
    for path in ("/", "/memories", "/sessions", "/rules", "/code", "/doctor", "/?token=wrong"):
        answer = web.get(path)
        assert answer.status_code == 403, path
        assert "printed" in answer.text
    web.cookies.set(f"cclg_ui_{PORT}", "not-the-token")
    assert web.get("/memories").status_code == 403


def test_the_token_in_the_url_becomes_a_cookie_and_leaves_the_url(client: TestClient) -> None:
    assert client.get("/memories").status_code == 200
    moved = client.get(f"/memories?status=active&token={TOKEN}")
    assert moved.status_code == 303 and moved.headers["location"] == "/memories?status=active"


def test_a_foreign_host_header_is_refused(client: TestClient) -> None:
    """DNS rebinding: a page of another site whose name now points at 127.0.0.1 reaches the server with
    its own name in the Host header, and the browser sends no cookie of ours; even with the token it is refused."""
    for host in ("evil.example", f"evil.example:{PORT}", "127.0.0.1", f"127.0.0.1:{PORT + 1}", f"localhost.:{PORT}"):
        answer = client.get(f"/?token={TOKEN}", headers={"host": host})
        assert answer.status_code == 403, host
        assert "set-cookie" not in answer.headers
    assert client.get("/", headers={"host": f"localhost:{PORT}"}).status_code == 200


def test_a_write_without_the_csrf_token_is_refused(client: TestClient, store: Store) -> None:
    memory_id = added(store, "The deploy script lives in tools/deploy.sh.")
    for form in ({"reason": "gone"}, {"reason": "gone", "csrf": "0" * 64}):
        answer = client.post(f"/memory/{memory_id}/forget", data=form)
        assert answer.status_code == 403
    assert store.read_node(memory_id).status == "active"
    csrf = csrf_of(client.get(f"/memory/{memory_id}").text)
    foreign = client.post(
        f"/memory/{memory_id}/forget", data={"reason": "gone", "csrf": csrf}, headers={"origin": "http://evil.example"}
    )
    assert foreign.status_code == 403
    assert store.read_node(memory_id).status == "active"


def test_a_write_without_the_token_is_refused_even_with_the_csrf_token(store: Store) -> None:
    memory_id = added(store, "The deploy script lives in tools/deploy.sh.")
    web = TestClient(create_app(store, TOKEN, PORT), base_url=BASE, follow_redirects=False)
    answer = web.post(f"/memory/{memory_id}/forget", data={"reason": "gone", "csrf": Guard(TOKEN, PORT).csrf})
    assert answer.status_code == 403
    assert store.read_node(memory_id).status == "active"


def test_every_page_forbids_scripts(client: TestClient) -> None:
    policy = client.get("/").headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src" not in policy


# ---------------------------------------------------------------- stored text is data

XSS = [
    "<script>alert('owned')</script>",
    '<img src=x onerror="alert(1)">',
    '<a href="javascript:alert(1)">click</a>',
    '"><svg onload=alert(1)>',
    "javascript:alert(document.cookie)",
]


@pytest.mark.parametrize("content", XSS)
def test_stored_html_renders_as_text(client: TestClient, store: Store, content: str) -> None:
    memory_id = added(store, f"Note {content} end", tags=["<b>tag</b>"])
    pages = [
        client.get(f"/memory/{memory_id}").text,
        client.get("/memories").text,
        client.get("/memories", params={"q": "note end"}).text,
    ]
    for page in pages:
        assert "<script>alert" not in page and "<img src=x" not in page and "<svg onload" not in page
        assert 'href="javascript:' not in page and "<b>tag</b>" not in page
        assert esc(content) in page
    assert "onerror=&quot;alert(1)&quot;" in pages[0] or "onerror" not in content


def test_escaping_helpers() -> None:
    assert h("<p>$x</p>", x="<i>") == "<p>&lt;i&gt;</p>"
    assert h("<p>$x</p>", x=Markup("<i>")) == "<p><i></p>"
    assert Markup("<p>") + "<i>" == "<p>&lt;i&gt;"
    assert "<i>" + Markup("<p>") == "&lt;i&gt;<p>"
    assert href("memory:mem_demo0004", "forget") == "/memory/mem_demo0004/forget"
    assert href("memories", q='"><script>') == "/memories?q=%22%3E%3Cscript%3E"
    for bad in ("memory:javascript:alert(1)", "memory:mem_x/../../etc", "session:../x", "java-script:", "a/b"):
        with pytest.raises(ValueError):
            href(bad)


def test_the_lineage_graph_escapes_what_it_draws() -> None:
    lineage = {
        "members": [
            {"id": "mem_a", "status": "superseded", "created_at": "1", "content": "<script>x</script>"},
            {"id": "mem_b", "status": "active", "created_at": "2", "content": "new"},
        ],
        "steps": [{"patch": "p", "operation": "supersede", "targets": ["mem_a"], "new": ["mem_b"], "undone": False}],
    }
    drawn = lineage_svg(lineage, "mem_b")
    assert drawn.count('class="version"') == 2 and drawn.count('class="edge"') == 1
    assert "<script>" not in drawn and "&lt;script&gt;" in drawn and ">supersede<" in drawn


# ---------------------------------------------------------------- the pages


def test_the_pages_answer(client: TestClient, store: Store) -> None:
    memory_id = added(store, "Run the tests with pytest -q before every commit.", tags=["testing"])
    for path in ("/", "/overview", "/memories", "/sessions", "/rules", "/code", "/doctor", f"/memory/{memory_id}"):
        answer = client.get(path)
        assert answer.status_code == 200, path
        assert answer.headers["content-type"].startswith("text/html")
    overview = client.get("/").text
    assert "Memories by status" in overview and "Open conflicts" in overview and "Last sessions" in overview
    assert client.get("/memory/mem_nothere1").status_code == 400
    assert client.get("/session/no-such-session").status_code == 400


def test_the_list_filters_and_pages(client: TestClient, store: Store) -> None:
    ids = [added(store, f"Fact number {i} about the cache layer.", tags=["cache"] if i % 2 else []) for i in range(7)]
    forgotten = added(store, "An old fact about the build.")
    api.forget(store, forgotten, reason="wrong")
    listed = client.get("/memories").text
    assert all(i in listed for i in ids) and forgotten not in listed
    assert forgotten in client.get("/memories", params={"status": "forgotten"}).text
    tagged = client.get("/memories", params={"tag": "cache"}).text
    assert sum(i in tagged for i in ids) == 3
    assert client.get("/memories", params={"scope": "global", "type": "memory", "trust": "trusted"}).status_code == 200
    assert client.get("/memories", params={"scope": "nowhere"}).status_code == 400
    first = api.list_memories(store, limit=3)
    assert [n.id for n in first["memories"]] == ids[::-1][:3]
    second = api.list_memories(store, before=first["next"], limit=3)
    assert [n.id for n in second["memories"]] == ids[::-1][3:6]
    assert "next-page" in client.get("/memories").text or len(ids) < 50


@pytest.mark.parametrize("tag", ["ci", "CI-timeout", 'say "hi"', "c++", "日本語"])
def test_the_tag_filter_is_exact(store: Store, tag: str) -> None:
    """The full-text index narrows the rows; only memories holding exactly the tag are listed: not one
    whose tag holds it as a word, nor one with the tag's words in its content."""
    exact = added(store, "Holds the tag itself.", tags=[tag, "other"])
    added(store, "Holds a longer tag.", tags=[f"{tag}-longer", f"x {tag}"])
    added(store, f"Says {tag} in its content only.")
    assert [n.id for n in api.list_memories(store, {"tag": tag})["memories"]] == [exact]


def test_the_search_shows_the_pack_and_its_explanation(client: TestClient, store: Store) -> None:
    memory_id = added(store, "The staging database is reset every night at 02:00 UTC.")
    page = client.get("/memories", params={"q": "when is the staging database reset"}).text
    assert 'id="pack"' in page and memory_id in page and "why it is in" in page


def test_one_memory_shows_provenance_lineage_and_usage(client: TestClient, store: Store) -> None:
    raw = api.keep_raw(store, b"Notes: deploys go out on Tuesdays after the review.", "notes.md")
    old = added(store, "Deploys go out on Mondays.")
    result = api.patch(store, "supersede", [old], contents=["Deploys go out on Tuesdays."], reason="moved to Tuesday")
    new = result.new_nodes[0].id
    page = client.get(f"/memory/{new}").text
    assert "Deploys go out on Tuesdays." in page and "moved to Tuesday" in page
    assert page.count('class="version"') == 2 and 'class="edge"' in page
    assert "Delivered to 0 finished sessions" in page
    assert raw["path"]


def test_a_session_shows_its_timeline(client: TestClient, store: Store) -> None:
    memory_id = added(store, "The cache layer is written in Rust.")
    learning.start_session(store, "sess-ui-1", agent="claude", project=None)
    learning.record_event(
        store,
        "sess-ui-1",
        "user_prompt",
        {},
        summary={
            "prompt": "what is the <cache> written in?",
            "loaded_memory_ids": [memory_id],
            "tokens": 40,
        },
    )
    tool = {"tool_name": "Bash", "step": {"signals": [{"sensor": "pain", "message": "same error 3 times"}]},
            "rules_given": ["rule.pytest-cache"]}  # fmt: skip
    learning.record_event(store, "sess-ui-1", "post_tool", {}, summary=tool)
    compact = {"trigger": "auto", "recent_prompts": ["fix the cache"], "loaded_memory_ids": [memory_id]}
    learning.record_event(store, "sess-ui-1", "pre_compact", {}, summary=compact)
    assert "sess-ui-1" in client.get("/sessions").text and "sess-ui-1" in client.get("/").text
    page = client.get("/session/sess-ui-1").text
    assert "what is the &lt;cache&gt; written in?" in page and memory_id in page and "the pack gave" in page
    assert "same error 3 times" in page and "rule.pytest-cache" in page
    assert "given before the compaction" in page and "fix the cache" in page


def test_a_prompt_s_page_shows_why_each_memory_was_given_then(client: TestClient, store: Store) -> None:
    """The reasons are the pack's, recorded by the real hook when it gave them: the page shows them even
    after the memory and the relevance decision changed."""
    from tests.test_hook import claude_prompt, run_hook

    memory_id = added(store, "The payments service listens on port 7443.")
    prompt = claude_prompt("which port does the payments service listen on?", session="sess-why", cwd=str(store.root))
    done = run_hook(store.root, "user-prompt", prompt)
    assert done.returncode == 0 and memory_id in done.stdout.decode()
    api.forget(store, memory_id, reason="moved")
    page = client.get("/session/sess-why").text
    then = page.split("why, then", 1)[1].split("why, now", 1)[0]
    assert memory_id in then and re.search(r"payments|port|7443", then), then


# ---------------------------------------------------------------- corrections, each a patch with its reason


def post(client: TestClient, memory_id: str, verb: str, form: dict[str, str]) -> str:
    """POST a correction from the memory's page with its CSRF token; the page it leads to."""
    csrf = csrf_of(client.get(f"/memory/{memory_id}").text)
    answer = client.post(f"/memory/{memory_id}/{verb}", data={**form, "csrf": csrf})
    assert answer.status_code == 303, answer.text
    return client.get(answer.headers["location"]).text


def test_supersede_then_forget_through_the_ledger(client: TestClient, store: Store) -> None:
    old = added(store, "The API listens on port 8080.")
    page = post(client, old, "patch", {"operation": "supersede", "content": "The API listens on port 9090.",
                                       "reason": "moved to 9090"})  # fmt: skip
    current = api.list_memories(store)["memories"][0]
    assert current.content == "The API listens on port 9090." and store.read_node(old).status == "superseded"
    assert "moved to 9090" in page and "supersede" in page and page.count('class="version"') == 2
    assert api.history(store, memory_id=current.id)[0].reason == "moved to 9090"
    page = post(client, current.id, "forget", {"reason": "no longer true"})
    assert store.read_node(current.id).status == "forgotten" and "no longer true" in page


def test_refine_label_promote_and_a_refused_patch(client: TestClient, store: Store) -> None:
    memory_id = added(store, "Use ruff for linting.")
    post(client, memory_id, "patch", {"operation": "refine", "content": "Use ruff for linting and formatting.",
                                      "reason": "formatting too"})  # fmt: skip
    refined = api.list_memories(store)["memories"][0]
    assert refined.content == "Use ruff for linting and formatting."
    post(client, refined.id, "label", {"trust": "untrusted", "reason": "not sure"})
    labelled = api.list_memories(store)["memories"][0]
    assert labelled.metadata["trust"] == "untrusted" and api.history(store)[0].reason == "not sure"
    csrf = csrf_of(client.get(f"/memory/{labelled.id}").text)
    refusal = client.post(f"/memory/{labelled.id}/patch", data={"operation": "delete", "reason": "x", "csrf": csrf})
    assert refusal.status_code == 400 and "choose supersede" in refusal.text
    learning.start_session(store, "sess-ui-2", agent="claude", project=None)
    session_memory = added(store, "This session works on the parser.", scope=api.parse_scope(["session=sess-ui-2"]))
    post(client, session_memory, "promote", {"reason": "keep it"})
    assert store.read_node(session_memory).status == "promoted"


def test_purge_needs_the_typed_id(client: TestClient, store: Store) -> None:
    memory_id = added(store, "A secret-ish note to erase.")
    csrf = csrf_of(client.get(f"/memory/{memory_id}").text)
    wrong = client.post(f"/memory/{memory_id}/purge", data={"confirm": memory_id[:-1], "reason": "x", "csrf": csrf})
    assert wrong.status_code == 400 and "nothing was erased" in wrong.text
    assert store.read_node(memory_id).content == "A secret-ish note to erase."
    post(client, memory_id, "purge", {"confirm": memory_id, "reason": "erase it"})
    assert "A secret-ish note to erase." not in store.read_node(memory_id).content


# ---------------------------------------------------------------- the command


def test_cclg_ui_prints_its_url_and_serves_it(tmp_path: Path) -> None:
    """The real command: it binds 127.0.0.1 on a free port, prints the URL with its token, and serves
    it to a client that keeps the cookie; without the token, nothing."""
    import http.cookiejar
    import urllib.error
    import urllib.request

    root = tmp_path / "served"
    api.init_store(root)
    process = subprocess.Popen(
        [sys.executable, "-m", "cclg", "ui", "--store", str(root)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:(\d+)/\?token=[\w-]+", line)
        assert url, line
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        with opener.open(url.group(0), timeout=10) as answer:
            assert answer.status == 200 and b"Overview" in answer.read()
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{url.group(1)}/memories", timeout=10)
        assert refused.value.code == 403
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_cclg_ui_open_hands_the_printed_url_to_the_browser(tmp_path: Path) -> None:
    """``--open`` opens the same URL it prints, through the user's browser (``$BROWSER``, which Python's
    webbrowser honours: here a script that writes down what it was given)."""
    import os
    import time

    root, seen = tmp_path / "served", tmp_path / "opened.txt"
    api.init_store(root)
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\nprintf "%s" "$1" > {seen}\n', encoding="utf-8")
    browser.chmod(0o700)
    env = {**os.environ, "BROWSER": str(browser), "DISPLAY": ""}
    process = subprocess.Popen(
        [sys.executable, "-m", "cclg", "ui", "--store", str(root), "--open"], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert process.stdout is not None
        url = re.search(r"http://127\.0\.0\.1:\d+/\?token=[\w-]+", process.stdout.readline())
        assert url
        for _ in range(100):
            if seen.exists() and seen.read_text(encoding="utf-8"):
                break
            time.sleep(0.1)
        assert seen.read_text(encoding="utf-8") == url.group(0)
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_resolve_a_conflict_from_the_page(client: TestClient, store: Store) -> None:
    from cclg.core.records import Source, new_node
    from cclg.ledger.writer import create_nodes

    node = new_node("The release branch is main.", status="conflict_pending", source=Source(label="sync"))
    create_nodes(store, [node], reason="a container disagreed")
    overview = client.get("/").text
    assert node.id in overview.split("Open conflicts", 1)[1]
    assert "Resolve the conflict" in client.get(f"/memory/{node.id}").text
    page = post(client, node.id, "resolve", {"content": "The release branch is release/2.", "reason": "we cut 2.0"})
    assert store.read_node(node.id).status != "conflict_pending" and "resolve_conflict" in page
    assert "No memory waits for a decision." in client.get("/").text


def test_the_code_page_ranks_a_repository_s_files(client: TestClient, store: Store, tmp_path: Path) -> None:
    from tests.test_codegraph import GitRepo

    repo = GitRepo(tmp_path / "shop")
    repo.commit({"billing/money.py": "def invoice_total(v):\n    return round(v, 2)\n", "web/<b>.py": "x = 1\n"})
    api.code_index(store, repo.root)
    page = client.get("/code", params={"repo": str(repo.root), "q": "invoice total"}).text
    assert "billing/money.py" in page and "what each signal added" in page and "<b>.py" not in page


def test_the_doctor_page_never_waits_for_the_check_and_shows_its_findings(client: TestClient, store: Store) -> None:
    """``/doctor`` answers at once (the whole-store check runs in the background) and shows a finding
    once the check that page started is done."""
    import time

    (store.root / "nodes" / "mem_broken.json").write_text("{ not json", encoding="utf-8")
    for _ in range(100):
        page = client.get("/doctor").text  # each visit starts a check unless one runs
        if "mem_broken.json" in page:
            break
        time.sleep(0.1)
    assert "mem_broken.json" in page, page
