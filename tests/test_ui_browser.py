"""``cclg ui`` in a real browser: Debian's Chromium driven by playwright, against the real command.

The test opens the URL ``cclg ui`` prints, finds a memory by search, supersedes it through the form,
sees the new version and the lineage graph, checks with ``cclg pack`` that the agent now gets the new
fact, forgets it and sees it leave the pack; a memory holding a script shows as text and runs nothing.
It keeps screenshots of the main pages in a folder it names (``$CCLG_UI_SCREENSHOTS``, else one under
the test's temporary folder). Without Chromium or playwright it skips with one line (``.ci/run``
installs Chromium from the Debian packages).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cclg import api
from cclg.api import learning

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
try:
    from playwright.sync_api import Page, sync_playwright
except ImportError:  # pragma: no cover - depends on the machine
    sync_playwright = None  # type: ignore[assignment]

if CHROMIUM is None or sync_playwright is None:
    pytest.skip("browser tests: no chromium or no playwright installed", allow_module_level=True)

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
OLD_FACT = "The billing API listens on port 8080."
NEW_FACT = "The billing API listens on port 9090 since the proxy moved."
QUERY = "which port does the billing API listen on"


def seeded(root: Path) -> None:
    """A small store that looks like work: facts, a tagged one, a session with its prompt, and a hostile one."""
    store, _ = api.init_store(root)
    for content, tags in (
        (OLD_FACT, ["billing"]),
        ("Run the test suite with pytest -q before every commit.", ["testing"]),
        ("Deploys go out on Tuesdays after the release review.", []),
        ("The cache layer is written in Rust and lives in crates/cache.", ["cache"]),
        ('<script>alert("owned")</script><img src=x onerror="alert(2)"> a hostile note', []),
    ):
        api.add_memory(store, content, source="seed", reason="seeded for the browser test", trust="trusted", tags=tags)
    learning.start_session(store, "sess-browser-1", agent="claude", project=None)
    learning.record_event(
        store, "sess-browser-1", "user_prompt", {}, summary={"prompt": QUERY, "loaded_memory_ids": [], "tokens": 12}
    )


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """``cclg ui`` running on a seeded store: (the URL it printed, the store)."""
    root = tmp_path / "store"
    seeded(root)
    process = subprocess.Popen(
        [sys.executable, "-m", "cclg", "ui", "--store", str(root)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        found = re.search(r"http://127\.0\.0\.1:\d+/\?token=[\w-]+", process.stdout.readline())
        assert found, "cclg ui printed no URL"
        yield found.group(0), root
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("CCLG_UI_SCREENSHOTS") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"screenshots of cclg ui: {folder}")
    return folder


def packed(root: Path, query: str) -> list[str]:
    """The contents of the memories ``cclg pack`` gives the agent for ``query``."""
    done = subprocess.run(
        [sys.executable, "-m", "cclg", "--root", str(root), "pack", "--query", query, "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    return [node["content"] for node in json.loads(done.stdout)["memory_nodes"]]


def test_search_supersede_and_forget_in_a_real_browser(served: tuple[str, Path], shots: Path) -> None:
    url, root = served
    assert OLD_FACT in packed(root, QUERY)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            dialogs: list[str] = []
            page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
            run_the_story(page, root, url, shots)
            assert not dialogs, f"a stored script ran: {dialogs}"
        finally:
            browser.close()


def run_the_story(page: Page, root: Path, url: str, shots: Path) -> None:
    page.goto(url)
    assert "token=" not in page.url  # the token became a cookie and left the address bar
    assert page.locator("h1").inner_text() == "Overview"
    page.screenshot(path=str(shots / "overview.png"), full_page=True)

    page.click("header >> text=Memories")
    hostile = page.locator("td", has_text="a hostile note").first
    assert '<script>alert("owned")</script>' in hostile.inner_text()  # shown as text
    page.fill("#q", QUERY)
    page.click("#search")
    pack = page.locator("#pack")
    assert OLD_FACT in pack.inner_text()
    page.screenshot(path=str(shots / "search.png"), full_page=True)

    pack.locator("a").first.click()
    assert page.locator("#content").inner_text() == OLD_FACT
    page.select_option("#f-operation", "supersede")
    page.fill("#new-content", NEW_FACT)
    page.fill("#patch-reason", "the proxy moved the billing API to 9090")
    page.click("#form-patch button[type=submit]")

    assert page.locator("#content").inner_text() == NEW_FACT
    assert "supersede" in page.locator("#notice").inner_text()
    graph = page.locator("#lineage svg")
    assert graph.locator("g.version").count() == 2 and graph.locator("g.edge").count() == 1
    assert "the proxy moved the billing API to 9090" in page.locator("#lineage").inner_text()
    page.screenshot(path=str(shots / "memory.png"), full_page=True)
    page.set_viewport_size({"width": 1000, "height": 560})
    page.screenshot(path=str(shots / "readme.png"))  # the top of the page, as the README shows it
    page.set_viewport_size({"width": 1200, "height": 900})

    given = packed(root, QUERY)
    assert NEW_FACT in given and OLD_FACT not in given

    page.fill("#forget-reason", "the billing API was retired")
    page.click("#forget")
    assert "forget" in page.locator("#notice").inner_text()
    assert "forgotten" in page.locator("dl").first.inner_text()
    assert NEW_FACT not in packed(root, QUERY)

    page.click("header >> text=Sessions")
    page.click("text=sess-browser-1")
    assert QUERY in page.locator("main").inner_text()
    page.screenshot(path=str(shots / "session.png"), full_page=True)
