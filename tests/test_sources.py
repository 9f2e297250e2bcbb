"""Sources: each kind reads files shaped like the real ones, and a registered source is kept in step as
patches (create, refine, expire), never writing over a memory the user changed."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from cclg import api
from cclg.api import sources
from cclg.core.store import Store
from cclg.intake.source_kinds import SOURCE_KINDS
from cclg.intake.source_sync import load_registry, match_items
from tests.conftest import DATA

FIXTURES = DATA / "sources"


def git_repo(path: Path) -> Path:
    """A real git repository with one commit (so it has an identity: its root commit)."""
    path.mkdir(parents=True, exist_ok=True)
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e"}
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    subprocess.run(["git", "-C", str(path), "commit", "-q", "--allow-empty", "-m", "root"], check=True, env=env)
    return path


def claude_mem_db(path: Path) -> Path:
    db = sqlite3.connect(path)
    db.executescript((FIXTURES / "claude-mem.sql").read_text())
    db.commit()
    db.close()
    return path


def items_of(kind: str, path: Path) -> list[tuple[str, tuple[int, int], str]]:
    return [(i.document.name, i.lines, i.content) for i in SOURCE_KINDS[kind].read(path)]


def current(store: Store) -> dict[str, api.MemoryNode]:
    """The store's current memories by content."""
    return {n.content: n for n in store.load_nodes().values() if n.status == "active"}


def files_of(store: Store) -> dict[str, tuple[int, bytes]]:
    """Every file of the store but the search index (a projection), with its time and bytes."""
    return {
        str(p.relative_to(store.root)): (p.stat().st_mtime_ns, p.read_bytes())
        for p in sorted(store.root.rglob("*"))
        if p.is_file() and not p.name.startswith("index.sqlite") and p.name != ".lock"
    }


# ---------------------------------------------------------------- the kinds, on real-shaped files


def test_claude_md_finds_instruction_files_in_any_folder_but_dependencies() -> None:
    found = items_of("claude-md", FIXTURES / "repo")
    names = {name for name, _, _ in found}
    assert names == {"CLAUDE.md", "AGENTS.md", "services/api/GEMINI.md", ".github/copilot-instructions.md"}
    assert (
        "CLAUDE.md",
        (8, 9),
        "Run the tests with `uv run pytest -q`\n(the integration tests need `docker compose up db` first)",
    ) in found
    assert ("CLAUDE.md", (14, 14), "Money is stored in integer cents, never floats.") in found
    assert not any("editors: keep" in content for _, _, content in found), "an HTML comment is no item"
    heading = {i.content: i.heading for i in SOURCE_KINDS["claude-md"].read(FIXTURES / "repo")}
    assert heading["Install with `uv sync`"] == ("Shop", "Commands")


def test_cursor_rules_keep_their_front_matter() -> None:
    rules = {i.content: i for i in SOURCE_KINDS["cursor-rules"].read(FIXTURES / "repo")}
    typed = rules["Type every public function."]
    assert typed.extra["cursor"] == {
        "description": "Python style for the backend",
        "globs": ["src/**/*.py", "tests/**/*.py"],
        "alwaysApply": False,
    }
    assert typed.tags == ("glob:src/**/*.py", "glob:tests/**/*.py") and typed.lines == (8, 8)
    assert rules["Answer in English, even when the issue is written in German."].tags == ("always-apply",)


def test_claude_auto_memory_topic_files_and_index_lines() -> None:
    found = {
        i.document.name: i
        for i in SOURCE_KINDS["claude-auto-memory"].read(FIXTURES / "claude-auto-memory" / "-home-dev-shop" / "memory")
    }
    assert found["feedback_testing.md"].type == "correction" and found["feedback_testing.md"].lines == (6, 8)
    assert found["user_role.md"].type == "identity_fact"
    index = found["MEMORY.md"]
    assert index.content == "The staging database is reset every Monday at 06:00 UTC", "pointers are not items"


def test_codex_memories_read_the_handbook_and_the_summary_not_the_evidence() -> None:
    found = list(SOURCE_KINDS["codex-memories"].read(FIXTURES / "codex-memories"))
    assert {i.document.name for i in found} == {"MEMORY.md", "memory_summary.md"}
    release = next(i for i in found if i.content.startswith("Releases are tagged"))
    assert release.heading[0] == "releasing the shop backend" and release.tags == ("release", "tag", "changelog")
    assert not any("What's in Memory" in i.heading for i in found)


def test_basic_memory_observations_and_relations() -> None:
    found = {i.content: i for i in SOURCE_KINDS["basic-memory"].read(FIXTURES / "basic-memory")}
    stripe = found["Use Stripe for card payments #stripe (cheaper at our volume)"]
    assert stripe.type == "project_decision" and "stripe" in stripe.tags and "payments" in stripe.tags
    assert found["Payments Provider implements Checkout Flow"].type == "relationship"
    assert "We compared two providers in November." not in found, "only observations and relations"


def test_mem0_export_and_claude_mem_database(tmp_path: Path) -> None:
    mem0 = list(SOURCE_KINDS["mem0-json"].read(FIXTURES / "mem0-export.json"))
    assert [i.record_id for i in mem0] == [
        "8f14e45f-ceea-467f-a8f4-0f1e8d6c2a10",
        "c9f0f895-fb98-4b91-a3a5-2f8e1d3c4b5a",
    ]
    database = claude_mem_db(tmp_path / "claude-mem.db")
    database.chmod(0o400)  # read-only: claude-mem's database is never written
    before = (database.stat().st_mtime_ns, database.read_bytes())
    found = list(SOURCE_KINDS["claude-mem"].read(database))
    assert (database.stat().st_mtime_ns, database.read_bytes()) == before
    assert [i.record_id for i in found] == ["observations/1", "observations/2", "session_summaries/1"]
    assert found[0].project == "shop" and "- A 5 s timeout with one retry fixed it" in found[0].content
    evidence = found[0].document.text.split("\n")[0]
    assert json.loads(evidence)["title"] == "Checkout timeout traced to the tax service"


@pytest.mark.parametrize(
    ("kind", "path", "trust"),
    [
        ("claude-md", "repo", "trusted"),
        ("cursor-rules", "repo", "trusted"),
        ("claude-auto-memory", "claude-auto-memory/-home-dev-shop/memory", "untrusted"),
        ("codex-memories", "codex-memories", "untrusted"),
        ("basic-memory", "basic-memory", "untrusted"),
        ("mem0-json", "mem0-export.json", "untrusted"),
        ("jsonl", "memories.jsonl", "untrusted"),
        ("claude-mem", "claude-mem.db", "untrusted"),
    ],
)
def test_every_kind_imports_with_its_trust_and_evidence(
    store: Store, tmp_path: Path, kind: str, path: str, trust: str
) -> None:
    location = claude_mem_db(tmp_path / path) if kind == "claude-mem" else FIXTURES / path
    result = sources.add_source(store, kind, str(location))
    (report,) = result["sync"]
    expected = {i.content: i for i in SOURCE_KINDS[kind].read(location)}
    assert report["error"] is None and len(report["new"]) == len(expected) > 0
    made = {n.content: n for n in store.load_nodes().values()}
    assert set(made) == set(expected)
    for content, node in made.items():
        assert node.metadata["trust"] == trust
        item = expected[content]
        (span,) = api.cite(store, node.id)["raw_spans"]
        lines = item.document.text.split("\n")[item.lines[0] - 1 : item.lines[1]]
        assert span["text"] == "\n".join(lines), "the span is the item's lines in the raw copy of its file"
    assert api.diagnose(store).ok, [f.message for f in api.diagnose(store).findings]


# ---------------------------------------------------------------- kept in step


CLAUDE_MD = """# Shop

## Commands
- Install with `uv sync`
- Run the tests with `uv run pytest -q`
- Lint with `uv run ruff check .`

## Conventions
- Money is stored in integer cents, never floats.
"""


def test_instruction_file_is_kept_in_step_as_patches(store: Store, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "shop")
    claude = repo / "CLAUDE.md"
    claude.write_text(CLAUDE_MD)
    first = sources.add_source(store, "claude-md", str(repo))["sync"][0]
    assert len(first["new"]) == 4
    node = current(store)["Run the tests with `uv run pytest -q`"]
    assert node.scope.project == api.status(store, repo)["project"]["id"], "the repository's project"

    before = files_of(store)
    assert [r.to_dict()["unchanged"] for r in sources.sync_sources(store)] == [4]
    assert files_of(store) == before, "nothing changed, nothing written"

    claude.write_text(
        CLAUDE_MD.replace("pytest -q`", "pytest -q -x`")  # changed
        .replace("- Lint with `uv run ruff check .`\n", "")  # removed
        .replace("## Conventions\n", "## Conventions\n- Dates are stored in UTC.\n")  # added
        .replace("- Install with `uv sync`\n", "")
        + "\n## Setup\n- Install with `uv sync`\n"  # moved
    )
    (report,) = [r.to_dict() for r in sources.sync_sources(store)]
    assert report["unchanged"] == 2 and len(report["new"]) == 1 and len(report["expired"]) == 1
    (refined,) = report["refined"]
    assert refined["from"] == node.id and refined["operation"] == "refine"
    now = current(store)
    assert set(now) == {i.content for i in SOURCE_KINDS["claude-md"].read(repo)}
    chain = api.memory_lineage(store, refined["to"])
    assert [m["content"] for m in chain["members"]] == [
        "Run the tests with `uv run pytest -q`",
        "Run the tests with `uv run pytest -q -x`",
    ]
    assert store.read_node(report["expired"][0]).content == "Lint with `uv run ruff check .`"
    assert store.read_node(report["expired"][0]).status == "expired"


def test_a_memory_the_user_corrected_is_a_conflict_never_overwritten(store: Store, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "shop")
    claude = repo / "CLAUDE.md"
    claude.write_text(CLAUDE_MD)
    sources.add_source(store, "claude-md", str(repo))
    node = current(store)["Run the tests with `uv run pytest -q`"]
    mine = api.patch(store, "refine", [node.id], contents=["Run the tests with `make test`"], reason="we use make")
    mine_id = mine.new_nodes[0].id
    assert sources.source_conflicts(store)[0]["memory_id"] == mine_id, "the file still says otherwise"

    claude.write_text(CLAUDE_MD.replace("pytest -q`", "pytest -q -n 4`"))
    (report,) = [r.to_dict() for r in sources.sync_sources(store)]
    assert report["refined"] == [] and store.read_node(mine_id).status == "active"
    (conflict,) = sources.source_conflicts(store)
    assert conflict["file_says"] == "Run the tests with `uv run pytest -q -n 4`"
    assert conflict["memory_says"] == "Run the tests with `make test`"

    claude.write_text(CLAUDE_MD.replace("`uv run pytest -q`", "`make test`"))  # the file comes round
    (report,) = [r.to_dict() for r in sources.sync_sources(store)]
    assert report["adopted"] == [mine_id] and sources.source_conflicts(store) == []
    claude.write_text(CLAUDE_MD.replace("`uv run pytest -q`", "`make test -j4`"))
    (report,) = [r.to_dict() for r in sources.sync_sources(store)]
    assert report["refined"][0]["from"] == mine_id, "the sync follows the user's version from then on"


def test_secrets_are_refused_and_kept_out_of_raw(store: Store, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "shop")
    key = "AKIA" + "Q3EGRZ7XNWK5VJ2P"
    (repo / "CLAUDE.md").write_text(f"# Shop\n- Deploy key: {key}\n- Deploys go out from CI\n")
    (report,) = sources.add_source(store, "claude-md", str(repo))["sync"]
    assert [r["where"] for r in report["refused"]] == ["CLAUDE.md:2-2"]
    assert set(current(store)) == {"Deploys go out from CI"}
    for raw in store.raw_files():
        assert key not in raw.read_text(), "the raw copy is redacted"


def test_thrown_out_content_is_not_brought_back(store: Store, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "shop")
    (repo / "CLAUDE.md").write_text("- Deploys go out from CI\n")
    sources.add_source(store, "claude-md", str(repo))
    api.forget(store, current(store)["Deploys go out from CI"].id)
    (conflict,) = sources.source_conflicts(store)
    assert conflict["memory_id"] is None, "forgotten in cclg while the file still says it"
    other = git_repo(tmp_path / "elsewhere")
    (other / "AGENTS.md").write_text("- Deploys go out from CI\n")
    report = sources.import_source(store, "claude-md", str(other))
    assert report["new"] == [] and "forgotten" in report["refused"][0]["why"]


def test_an_unreadable_source_is_reported_and_the_others_still_sync(store: Store, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "shop")
    (repo / "CLAUDE.md").write_text("- a rule\n")
    export = tmp_path / "mem0.json"
    shutil.copy(FIXTURES / "mem0-export.json", export)
    sources.add_source(store, "claude-md", str(repo))
    sources.add_source(store, "mem0-json", str(export))
    export.write_text("{not json")
    (repo / "CLAUDE.md").write_text("- a rule\n- another rule\n")
    reports = {r.kind: r.to_dict() for r in sources.sync_sources(store)}
    assert "not JSON" in reports["mem0-json"]["error"] and len(reports["claude-md"]["new"]) == 1


def test_records_are_matched_by_their_id(store: Store, tmp_path: Path) -> None:
    export = tmp_path / "mem0.json"
    data = json.loads((FIXTURES / "mem0-export.json").read_text())
    export.write_text(json.dumps(data))
    sources.add_source(store, "mem0-json", str(export))
    data["results"][0]["memory"] = "Quarterly reviews happen in March"  # nothing alike: matched by its id
    export.write_text(json.dumps(data))
    (report,) = [r.to_dict() for r in sources.sync_sources(store)]
    assert [r["operation"] for r in report["refined"]] == ["supersede"]


def test_moved_lines_are_the_same_items() -> None:
    from cclg.intake.source_items import Document, SourceItem

    doc = Document("CLAUDE.md", "")
    old = [
        {"key": "CLAUDE.md#", "file": "CLAUDE.md", "lines": [1, 1], "content": t, "memory_id": t, "record_id": None}
        for t in ("alpha beta gamma", "delta epsilon zeta")
    ]
    new = [
        SourceItem("delta epsilon zeta", doc, (1, 1), "CLAUDE.md#x"),
        SourceItem("alpha beta gamma!", doc, (2, 2), "CLAUDE.md#"),
    ]
    matched = match_items(old, new)
    assert [o["content"] for o, _ in matched.unchanged] == ["delta epsilon zeta"]
    assert [(o["content"], n.content) for o, n, _ in matched.changed] == [("alpha beta gamma", "alpha beta gamma!")]


def test_sources_list_and_remove_keep_the_memories(store: Store, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "shop")
    (repo / "CLAUDE.md").write_text("- a rule\n")
    added = sources.add_source(store, "claude-md", str(repo))["source"]
    (listed,) = sources.list_sources(store)
    assert listed["id"] == added["id"] and listed["items"] == 1 and listed["trust"] == "trusted"
    assert sources.remove_source(store, str(repo))["memories_kept"] == 1
    assert load_registry(store)["sources"] == [] and set(current(store)) == {"a rule"}
    with pytest.raises(api.NotFoundError):
        sources.remove_source(store, added["id"])
    with pytest.raises(api.UsageError):
        sources.add_source(store, "claude-md", str(tmp_path / "missing"))


def test_instruction_files_of_a_repository(store: Store, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / "repo", repo)
    found = sources.find_instruction_files(repo)
    assert [p.name for p in found["cursor-rules"]] == ["always.mdc", "python.mdc"]
    assert repo / "node_modules" / "pkg" / "CLAUDE.md" not in found["claude-md"]
    result = sources.import_instruction_files(store, repo)
    assert [s["source"]["kind"] for s in result["sources"]] == ["claude-md", "cursor-rules"]
    assert len(current(store)) == 14


def test_a_purge_erases_the_item_from_the_registry_and_the_sync_refuses_it(store: Store, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "shop")
    secret_plan = "The merger with Initech closes on 2027-01-15"
    (repo / "CLAUDE.md").write_text(f"- {secret_plan}\n- Deploys go out from CI\n")
    sources.add_source(store, "claude-md", str(repo))
    api.purge_memory(store, current(store)[secret_plan].id)
    assert secret_plan not in store.sources_path.read_text(), "the registry holds the item's text as content"
    (report,) = [r.to_dict() for r in sources.sync_sources(store)]
    assert report["new"] == [] and "purged" in report["refused"][0]["why"]
    assert not any(secret_plan in p.read_text(errors="replace") for p in store.root.rglob("*.json"))
