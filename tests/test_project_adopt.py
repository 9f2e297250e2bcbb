"""An old store migrates: memories scoped by a folder's name (written before a project was its
repository, or by ``--scope project=NAME`` and import-jsonl lines) reach every repository of that
name until the user, inside the repository they belong to, runs ``cclg project adopt``. Each is
then re-scoped to the repository's identity by a recorded patch (``cclg log`` lists it, ``cclg
rollback`` undoes it), and ``cclg doctor`` notes the names still shared. Real git repositories,
real ``cclg`` and ``cclg-hook`` processes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from cclg import api as library
from cclg.core import repository
from cclg.core.records import Scope, Source, new_node
from cclg.core.store import Store
from tests.test_project_identity import CLI, add, cclg, git, hook, prompt, repo

QUESTION = "where does the api keep sessions, and what does it log?"


def run(store: Store, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, "--root", str(store.root), *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def old_store(store: Store, tmp_path: Path) -> tuple[Path, Path]:
    """Two clients' repositories both called ``api``, and a store whose memories are scoped by that
    name, as stores were before identities: an import-jsonl line and a ``--scope project=api`` add
    with its own type, key, tag, window and labels."""
    client_a = repo(tmp_path / "clientA" / "api", "a.txt")
    client_b = repo(tmp_path / "clientB" / "api", "b.txt")
    lines = store.root / "old.jsonl"
    line = {"content": "The api caches sessions in Redis", "source": "old", "scope": {"project": "api"}}
    lines.write_text(json.dumps(line) + "\n")
    cclg(store, tmp_path, "import-jsonl", str(lines))
    add(
        store, tmp_path, "The api logs to stdout in JSON", "--scope", "project=api", "--type", "project_decision",
        "--key", "api.logging", "--tag", "logging", "--valid-until", "2999-01-01", "--confidence", "0.7",
    )  # fmt: skip
    return client_a, client_b


def doctor(store: Store, cwd: Path) -> dict[str, Any]:
    done = run(store, cwd, "doctor", "--json")
    report: dict[str, Any] = json.loads(done.stdout)
    assert done.returncode == (0 if report["ok"] else 1)
    return report


def shared_notices(report: dict[str, Any]) -> list[str]:
    return [n["message"] for n in report["notices"] if n["check"] == "projects named by a folder's name only"]


def current(store: Store, cwd: Path) -> dict[str, dict[str, Any]]:
    """The current memories, by content."""
    found = cclg(store, cwd, "search", "api", "--mode", "grep")
    return {r["node"]["content"]: r["node"] for r in found}


def test_doctor_notes_memories_scoped_by_a_folder_name_with_the_command_that_settles_them(
    store: Store, tmp_path: Path
) -> None:
    """Not a failure: a name-scoped memory is a legitimate, readable scope; doctor stays ok, and says
    how many memories each name shares and how to give them to one repository."""
    old_store(store, tmp_path)
    add(store, tmp_path, "Deploys go through the release train", "--scope", "project=web")
    report = doctor(store, tmp_path)
    assert report["ok"], report["findings"]
    notices = shared_notices(report)
    assert len(notices) == 2, notices
    api_notice = next(n for n in notices if "'api'" in n)
    assert "2 current memories" in api_notice and "cclg project adopt api" in api_notice
    assert any("'web'" in n and "1 current memory" in n for n in notices)
    text = run(store, tmp_path, "doctor")
    assert text.returncode == 0 and "cclg project adopt api" in text.stdout


def test_adopting_a_name_gives_its_memories_to_this_repository_only_and_rollback_shares_them_again(
    store: Store, tmp_path: Path
) -> None:
    client_a, client_b = old_store(store, tmp_path)
    before = {c: n for c, n in current(store, tmp_path).items()}
    assert "Redis" in prompt(store, client_b, QUESTION, "s-b0")  # the defect: clientB reads clientA's memories

    adopted = cclg(store, client_a, "project", "adopt")  # NAME defaults to this folder's name
    identity = repository.project_of(client_a)
    assert identity is not None and identity.id is not None
    assert adopted["name"] == "api" and adopted["project"] == identity.id
    assert len(adopted["adopted"]) == 2 and len(adopted["patch_ids"]) == 2
    log = cclg(store, client_a, "log")
    assert {p["id"] for p in log if p["operation"] == "update"} == set(adopted["patch_ids"])

    now = current(store, tmp_path)
    assert set(now) == set(before)
    assert {m["new_id"] for m in adopted["adopted"]} == {n["id"] for n in now.values()}
    assert adopted["undo"] == [f"cclg rollback {p}" for p in adopted["patch_ids"]]
    for content, node in now.items():
        old = before[content]
        assert node["id"] != old["id"] and node["relations"]["supersedes"] == [old["id"]]
        assert node["scope"] == {**old["scope"], "project": identity.id}
        for same in ("content", "type", "key", "tags", "priority", "confidence", "effective_from", "effective_until"):
            assert node[same] == old[same], same
        for label in ("trust", "sensitivity", "retention"):
            assert node["metadata"].get(label) == old["metadata"].get(label), label
        lineage = cclg(store, tmp_path, "log", "--lineage", node["id"])
        assert old["id"] in json.dumps(lineage)
    assert now["The api logs to stdout in JSON"]["effective_until"].startswith("2999-01-01")

    reply_a, reply_b = prompt(store, client_a, QUESTION, "s-a1"), prompt(store, client_b, QUESTION, "s-b1")
    assert "Redis" in reply_a and "stdout in JSON" in reply_a
    assert "Redis" not in reply_b and "stdout in JSON" not in reply_b
    assert shared_notices(doctor(store, tmp_path)) == []

    for patch_id in reversed(adopted["patch_ids"]):
        cclg(store, client_a, "rollback", patch_id)
    assert {c: n["id"] for c, n in current(store, tmp_path).items()} == {c: n["id"] for c, n in before.items()}
    reply_b = prompt(store, client_b, QUESTION, "s-b2")
    assert "Redis" in reply_b and "stdout in JSON" in reply_b
    assert len(shared_notices(doctor(store, tmp_path))) == 1


def files_of(store: Store) -> dict[str, bytes]:
    return {str(p.relative_to(store.root)): p.read_bytes() for p in sorted(store.root.rglob("*")) if p.is_file()}


def test_a_dry_run_lists_what_adopt_would_change_and_writes_nothing(store: Store, tmp_path: Path) -> None:
    client_a, _ = old_store(store, tmp_path)
    files = sorted(str(p.relative_to(store.root)) for p in store.root.rglob("*") if p.is_file())
    nodes = {p.name: p.read_bytes() for p in (store.root / "nodes").iterdir()}
    planned = cclg(store, client_a, "project", "adopt", "api", "--dry-run")
    assert planned["dry_run"] is True and planned["patch_ids"] == []
    assert sorted(m["content"] for m in planned["adopted"]) == [
        "The api caches sessions in Redis",
        "The api logs to stdout in JSON",
    ]
    text = run(store, client_a, "project", "adopt", "--dry-run")
    assert text.returncode == 0 and "The api caches sessions in Redis" in text.stdout
    after = sorted(str(p.relative_to(store.root)) for p in store.root.rglob("*") if p.is_file())
    assert after == files
    assert {p.name: p.read_bytes() for p in (store.root / "nodes").iterdir()} == nodes


def test_adopt_takes_only_the_memories_named_and_of_that_name(store: Store, tmp_path: Path) -> None:
    """``--memory ID`` settles one memory of the name (the other stays shared); memories of another
    name, of another repository already and of no project are never touched."""
    client_a, client_b = old_store(store, tmp_path)
    web = add(store, tmp_path, "The web app deploys on Fridays", "--scope", "project=web")
    everywhere = add(store, tmp_path, "Write commit messages in English", "--global")
    mine = add(store, client_b, "clientB's api talks to Stripe")
    redis = current(store, tmp_path)["The api caches sessions in Redis"]
    adopted = cclg(store, client_a, "project", "adopt", "--memory", redis["id"][:22])  # a unique prefix
    assert [m["id"] for m in adopted["adopted"]] == [redis["id"]]
    reply_b = prompt(store, client_b, QUESTION, "s-b")
    assert "Redis" not in reply_b and "stdout in JSON" in reply_b
    for other in (web, everywhere, mine):
        shown = cclg(store, tmp_path, "show", other["id"])
        assert shown["status"] == "active" and shown["scope"] == other["scope"]
    other = run(store, client_a, "project", "adopt", "--memory", web["id"])
    assert other.returncode == 2 and "not one of the current memories scoped by 'api'" in other.stderr


def test_adopt_refuses_where_there_is_no_repository_to_give_the_memories_to(store: Store, tmp_path: Path) -> None:
    old_store(store, tmp_path)
    outside = tmp_path / "plain" / "api"
    outside.mkdir(parents=True)
    done = run(store, outside, "project", "adopt")
    assert done.returncode == 2 and "not inside a git repository" in done.stderr
    fresh = repo(tmp_path / "fresh" / "api", commit=False)  # no commit and no remote: no identity yet
    done = run(store, fresh, "project", "adopt")
    assert done.returncode == 2 and "no identity yet" in done.stderr
    client_a = tmp_path / "clientA" / "api"
    done = run(store, client_a, "project", "adopt", "git:" + "0" * 40)
    assert done.returncode == 2 and "folder's name" in done.stderr
    assert len(cclg(store, tmp_path, "log")) == 2  # the import and the add: nothing else was written


def test_adopt_leaves_a_memory_whose_sessions_ran_in_another_repository(store: Store, tmp_path: Path) -> None:
    """A memory learned in hook sessions whose prompts ran in clientB/api belongs there: adopting
    ``api`` in clientA leaves it shared and says why; in clientB it is adopted."""
    client_a, client_b = old_store(store, tmp_path)
    prompt(store, client_b, "we use Stripe for billing", "s-stripe")
    learned = new_node(
        "The api bills through Stripe",
        scope=Scope(project="api"),
        source=Source(label="distill", session_ids=["s-stripe"]),
    )
    lines = store.root / "learned.jsonl"
    lines.write_text(json.dumps(learned.to_dict()) + "\n")
    cclg(store, tmp_path, "import-jsonl", str(lines))

    files = files_of(store)
    planned = cclg(store, client_a, "project", "adopt", "--dry-run")
    assert [m["content"] for m in planned["elsewhere"]] == ["The api bills through Stripe"]
    assert files_of(store) == files  # the evidence is read, nothing is written
    in_a = cclg(store, client_a, "project", "adopt")
    assert sorted(m["content"] for m in in_a["adopted"]) == [
        "The api caches sessions in Redis",
        "The api logs to stdout in JSON",
    ]
    assert [m["content"] for m in in_a["elsewhere"]] == ["The api bills through Stripe"]
    assert str(client_b) in in_a["elsewhere"][0]["why"]
    in_b = cclg(store, client_b, "project", "adopt")
    assert [m["content"] for m in in_b["adopted"]] == ["The api bills through Stripe"]
    assert "Stripe" in prompt(store, client_b, "how does the api bill?", "s-b")
    assert "Stripe" not in prompt(store, client_a, "how does the api bill?", "s-a")


def test_the_library_adopts_a_name_as_the_cli_does(store: Store, tmp_path: Path) -> None:
    client_a, _ = old_store(store, tmp_path)
    planned = library.adopt_project(store, client_a, dry_run=True)
    assert len(planned.adopted) == 2 and planned.patch_ids == []
    done = library.adopt_project(store, client_a, "api", reason="these are clientA's")
    assert len(done.patch_ids) == 2
    assert all(store.read_patch(p).reason == "these are clientA's" for p in done.patch_ids)
    assert library.adopt_project(store, client_a).adopted == []  # nothing left to adopt
    renamed = add(store, tmp_path, "Before the rename the api was called api-old", "--scope", "project=api-old")
    (moved,) = library.adopt_project(store, client_a, "api-old").written  # a name other than the folder's
    assert moved.changed_nodes[0].id == renamed["id"] and moved.new_nodes[0].scope.project == done.project


def test_a_rule_learned_under_a_folder_name_follows_its_memory_to_the_adopting_repository(
    store: Store, tmp_path: Path
) -> None:
    """A rule learned before its repository had a commit is scoped by the folder's name, as every rule
    of an old store is: both ``api`` repositories are given it. Once adopted, its memory's scope
    decides: clientA is given it, clientB no longer, and ``cclg rules`` says whose it is."""
    from cclg.learning import rules

    client_a = repo(tmp_path / "clientA" / "api", commit=False)
    client_b = repo(tmp_path / "clientB" / "api", "b.txt")
    failure = {"tool_name": "Bash", "tool_input": {"command": "make test"}, "is_interrupt": False}
    for n in range(3):
        error = f"Exit code 2\nE   ImportError: no module api.db ({n})"
        hook(
            store, client_a, "post-tool-failure", "s-rule", hook_event_name="PostToolUseFailure", **failure, error=error
        )
    passed = {"stdout": "9 passed", "stderr": "", "interrupted": False, "isImage": False}
    hook(store, client_a, "post-tool", "s-rule", hook_event_name="PostToolUse", **failure, tool_response=passed)
    (learned,) = rules.read_rules(store).values()
    assert learned.project == "api"
    (client_a / "a.txt").write_text("a\n")
    git(client_a, "add", "a.txt")
    git(client_a, "commit", "-qm", "start")
    step = {"command": "make", "failure": learned.trigger["signature"]}
    here, there = repository.project_of(client_a), repository.project_of(client_b)
    assert [r.key for r, _ in rules.near(store, step, there, set())] == [learned.key]  # shared by name

    adopted = cclg(store, client_a, "project", "adopt")
    assert [m["content"] for m in adopted["adopted"]] == [
        rules.current_rules(store, [learned.key])[learned.key].content
    ]
    assert [r.key for r, _ in rules.near(store, step, here, set())] == [learned.key]
    assert rules.near(store, step, there, set()) == []
    assert here is not None and [r["project"] for r in cclg(store, client_a, "rules")["rules"]] == [here.id]


def test_adopt_refused_for_one_memory_writes_none(store: Store, tmp_path: Path) -> None:
    """What the ledger would refuse (here a memory longer than the store's limit, lowered since it was
    written) is found before the first patch: the migration is all or nothing."""
    client_a, _ = old_store(store, tmp_path)
    add(store, tmp_path, "The api " + "retries " * 40, "--scope", "project=api")
    config = json.loads((store.root / "config.json").read_text())
    (store.root / "config.json").write_text(json.dumps({**config, "limits": {"memory_chars": 100}}))
    patches = len(cclg(store, tmp_path, "log"))
    done = run(store, client_a, "project", "adopt")
    assert done.returncode == 4 and "over the limit" in done.stderr
    assert len(cclg(store, tmp_path, "log")) == patches
