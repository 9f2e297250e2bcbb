"""Issue 27, rule 18: derived views tolerate dangling references.

A view that reads memory ids out of a log (the usage log, the audit log, a session's events, the
ledger's chains) meets ids whose memory is gone: moved to ``recovered/`` by ``doctor --repair``,
deleted by a sync or a reset. Each view skips what it cannot resolve, says how many it skipped, and
never fails. The reproducer: `cclg stats` exited 5 when one memory named in ``audit/usage.jsonl``
was gone.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cclg import api, mcp_tools
from cclg.core.files import read_jsonl
from cclg.core.records import Scope, Source, new_node
from cclg.core.store import Store
from cclg.hook import handle
from cclg.learning import distill
from cclg.retrieval import usage_prior

CWD = "/home/u/shop"
SESSION = "dangling-s1"
SYNCED = "Deploys run `deploy.sh --blue` from the ops runner, never from a laptop"
KEPT = "Deploys are announced in the #releases channel before they start"


def event(store: Store, session: str, name: str, **fields: Any) -> str | None:
    hosts = {
        "user-prompt": "UserPromptSubmit",
        "post-tool": "PostToolUse",
        "pre-compact": "PreCompact",
        "session-start": "SessionStart",
        "session-end": "SessionEnd",
    }
    payload = {"session_id": session, "cwd": CWD, "hook_event_name": hosts[name], **fields}
    return handle(name, payload, "claude", str(store.root))


def cclg(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "cclg", "--root", str(root), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def hook_failures(store: Store) -> list[dict[str, Any]]:
    return read_jsonl(store.hook_failures_path).records


@pytest.fixture
def gone(store: Store) -> dict[str, Any]:
    """A memory a sync tool wrote into nodes/ (no patch accounts for it), delivered to a session that
    used it, then moved to recovered/ by ``cclg doctor --repair``; beside it, the user's own memory."""
    synced = new_node(SYNCED, source=Source(label="sync"), scope=Scope(project="shop"))
    store.write_node(synced, new=True)
    kept = api.add_memory(store, KEPT, source="user", scope=api.parse_scope({"project": "shop"})).node
    prompt = "deploys: the ops runner, and the releases channel before they start?"
    context = event(store, SESSION, "user-prompt", prompt=prompt) or ""
    assert synced.id in context and kept.id in context
    response = {"stdout": "ok", "stderr": "", "interrupted": False, "isImage": False}
    tool_input = {"command": "./deploy.sh --blue"}
    event(store, SESSION, "post-tool", tool_name="Bash", tool_input=tool_input, tool_response=response)
    event(store, SESSION, "session-end", reason="exit")
    assert usage_prior.counts(store)[synced.id] == [1, 1], "the usage log names it"
    repaired = cclg(store.root, "doctor", "--repair")
    assert not store.node_path(synced.id).exists(), repaired.stdout + repaired.stderr
    assert list((store.root / "recovered").rglob(f"{synced.id}*")), "set aside, not deleted"
    return {"gone": synced, "kept": kept}


def test_stats_skips_a_memory_the_usage_log_names_and_the_store_lost(store: Store, gone: dict[str, Any]) -> None:
    """The issue's reproducer, as a real process: exit 5, and no table at all."""
    listed = cclg(store.root, "stats", "--json")
    assert listed.returncode == 0, listed.stderr
    got = json.loads(listed.stdout)
    assert [row["id"] for row in got["memories"]] == [gone["kept"].id] and got["dangling"] == 1
    text = cclg(store.root, "stats")
    assert text.returncode == 0, text.stderr
    assert gone["kept"].id in text.stdout and "1 memory named in the usage log is no longer in the store" in text.stdout
    dead = cclg(store.root, "stats", "--dead-weight", "--min-delivered", "1")
    assert dead.returncode == 0 and gone["kept"].id in dead.stdout, dead.stderr
    assert mcp_tools.memory_stats(store) == {"memories": got["memories"], "dangling": 1}


def test_audit_of_a_lost_memory_shows_what_names_it(store: Store, gone: dict[str, Any]) -> None:
    lost = gone["gone"].id
    audited = cclg(store.root, "audit", "--memory", lost, "--json")
    assert audited.returncode == 0, audited.stderr
    records = json.loads(audited.stdout)
    assert records and all(lost in json.dumps(r) for r in records)
    assert mcp_tools.memory_audit(store, memory_id=lost)["records"] == records
    unknown = cclg(store.root, "audit", "--memory", "mem_" + "0" * 26)
    assert unknown.returncode == 5, "an id no store file and no log line names is still unknown"


def test_the_hook_and_the_pack_read_past_a_lost_memory(store: Store, gone: dict[str, Any]) -> None:
    """The same session goes on: its log names the lost memory as given; the pack (with its usage
    prior), a compaction's re-offer and the session's end all read past it."""
    kept = gone["kept"].id
    event(store, SESSION, "pre-compact", trigger="auto")
    again = event(store, SESSION, "session-start", source="compact") or ""
    assert kept in again and gone["gone"].id not in again
    context = event(store, "dangling-s2", "user-prompt", prompt="how are deploys announced?") or ""
    assert kept in context
    event(store, SESSION, "session-end", reason="exit")
    assert hook_failures(store) == []
    assert [e["id"] for e in api.compile_pack(store, api.PackRequest("deploys announced channel"))["memory_nodes"]] == [
        kept
    ]
    last = read_jsonl(store.usage_log_path).records[-1]
    assert gone["gone"].id not in [*last["used"], *last["ignored"]], "no verdict on what cannot be judged"


def test_distill_skips_prompts_whose_evidence_is_gone(store: Store, gone: dict[str, Any]) -> None:
    event(store, SESSION, "user-prompt", prompt="From now on always tag releases before deploying.")
    first = next(e for e in store.session_events(SESSION) if e["event"] == "user_prompt")
    raw = store.raw_file(first["raw"].split("/", 1)[-1])
    assert raw is not None
    raw.unlink()  # the raw evidence of the first prompt is gone (a reset of raw/, a sync)
    proposals = distill.propose(store, SESSION)
    assert [p["content"] for p in proposals] == ["From now on always tag releases before deploying."]
    listed = cclg(store.root, "distill", SESSION)
    assert listed.returncode == 0, listed.stderr
    assert "1 prompt of this session has no raw evidence left (skipped)" in listed.stdout
    as_json = json.loads(cclg(store.root, "distill", SESSION, "--json").stdout)
    assert as_json["dangling"] == 1 and mcp_tools.memory_distill(store, SESSION)["dangling"] == 1


def test_log_and_lineage_with_a_lost_version_list_the_rest(store: Store) -> None:
    old = api.add_memory(store, "The cache lives in /tmp/cache", source="user").node
    new = api.patch(store, "supersede", [old.id], contents=["The cache lives in /var/cache"], reason="moved")
    store.node_path(old.id).unlink()  # a sync deleted the old version
    listed = cclg(store.root, "log", "--lineage", new.new_nodes[0].id, "--json")
    assert listed.returncode == 0, listed.stderr
    chain = json.loads(listed.stdout)
    assert [m["id"] for m in chain["members"]] == [new.new_nodes[0].id] and chain["dangling"] == 1
    text = cclg(store.root, "log", "--lineage", new.new_nodes[0].id)
    assert text.returncode == 0 and "1 version named by these patches is no longer in the store" in text.stdout
    patches = cclg(store.root, "log", "--memory", old.id, "--json")
    assert patches.returncode == 0, patches.stderr
    assert [p["operation"] for p in json.loads(patches.stdout)] == ["supersede", "create"]
    from_lost = cclg(store.root, "log", "--lineage", old.id, "--json")
    assert from_lost.returncode == 0 and json.loads(from_lost.stdout)["members"] == chain["members"]


def test_rules_list_a_rule_whose_memory_is_gone(store: Store) -> None:
    from cclg.learning import rules

    rules.note(store, "learned", ["rule.pytest.abc"], "s1", trigger={"command": "pytest"}, project="shop")
    listed = cclg(store.root, "rules", "--json")
    assert listed.returncode == 0, listed.stderr
    (rule,) = json.loads(listed.stdout)["rules"]
    assert rule["status"] == "missing" and rule["id"] is None
