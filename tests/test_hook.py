"""cclg-hook as the hosts run it: a real subprocess, real payload shapes, always valid JSON and exit 0."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cclg.api import add_memory
from cclg.core.files import read_jsonl
from cclg.core.store import Store
from cclg.ledger.writer import apply_patch

HOOK = [sys.executable, "-c", "from cclg.hook import main; main()"]


def run_hook(store_root: Path | None, event: str, payload: object, *extra: str) -> subprocess.CompletedProcess[bytes]:
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    root = ["--root", str(store_root)] if store_root is not None else []
    return subprocess.run([*HOOK, *root, *extra, event], input=data, capture_output=True, timeout=60)


def claude_prompt(prompt: str, session: str = "abc123", cwd: str = "/home/u/repo") -> dict:
    return {
        "session_id": session,
        "prompt_id": "550e8400-e29b-41d4-a716-446655440000",
        "transcript_path": "/home/u/.claude/projects/p/00893aaf.jsonl",
        "cwd": cwd,
        "permission_mode": "default",
        "hook_event_name": "UserPromptSubmit",
        "prompt": prompt,
    }


def codex_prompt(prompt: str, session: str = "019d036d-0000", cwd: str = "/home/u/repo") -> dict:
    return {
        "session_id": session,
        "turn_id": "019d036d-c7fa-72d2-b6fd-78878bfe34e4",
        "transcript_path": None,
        "cwd": cwd,
        "hook_event_name": "UserPromptSubmit",
        "model": "gpt-5-codex",
        "permission_mode": "default",
        "prompt": prompt,
    }


@pytest.fixture
def memories(store: Store) -> dict[str, str]:
    old = add_memory(store, "Deploys go out with fabric from the ops laptop", source="user").new_nodes[0].id
    new = (
        apply_patch(
            store,
            "supersede",
            [old],
            reason="moved to CI",
            contents=["Deploys go out from CI with the release workflow"],
        )
        .new_nodes[0]
        .id
    )
    add_memory(store, "The test suite runs with pytest -q", source="user")
    return {"old": old, "new": new}


@pytest.mark.parametrize("payload", [claude_prompt("how do deploys go out?"), codex_prompt("how do deploys go out?")])
def test_user_prompt_returns_the_pack_in_the_host_shape(store: Store, memories: dict[str, str], payload: dict) -> None:
    result = run_hook(store.root, "user-prompt", payload)
    assert result.returncode == 0
    output = json.loads(result.stdout)
    assert list(output) == ["hookSpecificOutput"]
    assert list(output["hookSpecificOutput"]) == ["hookEventName", "additionalContext"]
    assert output["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    context = output["hookSpecificOutput"]["additionalContext"]
    current, _, retired = context.partition("### Retired")
    assert "Deploys go out from CI with the release workflow" in current
    assert "fabric" not in current, "a superseded memory never appears as active context"
    assert memories["old"] in retired and "fabric" in retired
    assert "pytest" not in context, "an unrelated memory is not injected"
    cap = 10_000 if "prompt_id" in payload else 2_500 * 4
    assert len(context) <= cap


def test_user_prompt_is_recorded_as_session_event_raw_evidence_and_audit(store: Store, memories: dict) -> None:
    run_hook(store.root, "user-prompt", claude_prompt("how do deploys go out?", cwd=str(store.root)))
    session = store.read_session("abc123")
    assert session.agent == "claude" and session.project == store.root.name
    (event,) = read_jsonl(store.session_events_path("abc123")).records
    assert event["event"] == "user_prompt" and event["summary"]["prompt"] == "how do deploys go out?"
    raw = json.loads((store.root / event["raw"]).read_text())
    assert raw["payload"]["prompt"] == "how do deploys go out?"
    audit = [r["event"] for r in read_jsonl(store.audit_path).records]
    assert "session_started" in audit and "session_event" in audit and "raw_written" in audit


def test_an_unrelated_prompt_gets_an_empty_response(store: Store, memories: dict) -> None:
    result = run_hook(store.root, "user-prompt", claude_prompt("write a haiku about autumn leaves"))
    assert result.returncode == 0 and json.loads(result.stdout) == {}


def test_post_tool_keeps_a_large_response_once_in_raw(store: Store) -> None:
    response = {"stdout": "x" * 1_000_000, "success": True}
    payload = {
        "session_id": "abc123",
        "transcript_path": "/t.jsonl",
        "cwd": "/home/u/repo",
        "permission_mode": "default",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "make test"},
        "tool_response": response,
        "tool_use_id": "toolu_01ABC123",
        "duration_ms": 12,
    }
    result = run_hook(store.root, "post-tool", payload)
    assert result.returncode == 0
    answer = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "- burn:" in answer, "a million characters in one call is a runaway the burn sensor names"
    (event,) = read_jsonl(store.session_events_path("abc123")).records
    assert event["summary"]["tool_name"] == "Bash" and event["summary"]["duration_ms"] == 12
    assert len(json.dumps(event)) < 5_000, "the session log holds a summary, not the response"
    raw = (store.root / event["raw"]).read_bytes()
    assert json.loads(raw)["payload"]["tool_response"] == response
    assert event["raw_bytes"] == len(raw)


def test_session_lifecycle_events(store: Store) -> None:
    base = {"session_id": "s-1", "transcript_path": "/t.jsonl", "cwd": "/home/u/repo", "permission_mode": "default"}
    for event, extra in [
        ("session-start", {"source": "startup"}),
        ("pre-compact", {"trigger": "auto"}),
        ("post-compact", {"trigger": "auto", "compact_summary": "worked on deploys"}),
        ("stop", {"stop_hook_active": False}),
        ("session-end", {"reason": "exit"}),
    ]:
        result = run_hook(store.root, event, {**base, **extra})
        assert result.returncode == 0 and json.loads(result.stdout) == {}
    events = [e["event"] for e in read_jsonl(store.session_events_path("s-1")).records]
    assert events == ["session_start", "pre_compact", "post_compact", "stop", "session_end"]
    assert store.read_session("s-1").ended_at is not None


def test_compaction_keeps_what_the_session_was_doing_and_offers_it_again(store: Store, memories: dict) -> None:
    base = {"session_id": "s-2", "transcript_path": "/t.jsonl", "cwd": "/home/u/repo", "permission_mode": "default"}
    run_hook(store.root, "session-start", {**base, "hook_event_name": "SessionStart", "source": "startup"})
    run_hook(store.root, "user-prompt", claude_prompt("how do deploys go out?", session="s-2"))
    run_hook(store.root, "pre-compact", {**base, "hook_event_name": "PreCompact", "trigger": "auto"})
    after = run_hook(store.root, "session-start", {**base, "hook_event_name": "SessionStart", "source": "compact"})
    run_hook(store.root, "session-end", {**base, "hook_event_name": "SessionEnd", "reason": "exit"})

    events = read_jsonl(store.session_events_path("s-2")).records
    start, prompt, compact, restart, _ = events
    assert start["summary"]["loaded_memory_ids"] == [], "a fresh start has no prompt to match"
    assert prompt["summary"]["loaded_memory_ids"] == [memories["new"]]
    assert compact["summary"]["recent_prompts"] == ["how do deploys go out?"]
    assert compact["summary"]["loaded_memory_ids"] == [memories["new"]]
    context = json.loads(after.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "Deploys go out from CI" in context, "after compaction the session's memories are offered again"
    assert restart["summary"]["loaded_memory_ids"] == [memories["new"]]
    assert store.read_session("s-2").loaded_memory_ids == [memories["new"]]


def _context(result: subprocess.CompletedProcess[bytes]) -> str | None:
    output = json.loads(result.stdout)
    return output["hookSpecificOutput"]["additionalContext"] if output else None


def test_a_memory_is_given_once_per_context_and_again_after_compaction(store: Store, memories: dict) -> None:
    base = {"session_id": "s-3", "transcript_path": "/t.jsonl", "cwd": "/home/u/repo", "permission_mode": "default"}
    first = _context(run_hook(store.root, "user-prompt", claude_prompt("how do deploys go out?", session="s-3")))
    assert first is not None and "Deploys go out from CI" in first
    again = run_hook(store.root, "user-prompt", claude_prompt("and how do deploys go out on fridays?", session="s-3"))
    assert _context(again) is None, "the host's context holds that memory already"
    other = _context(run_hook(store.root, "user-prompt", claude_prompt("how do the tests run?", session="s-3")))
    assert other is not None and "pytest -q" in other and "Deploys go out" not in other
    elsewhere = _context(run_hook(store.root, "user-prompt", claude_prompt("how do deploys go out?", session="s-4")))
    assert elsewhere is not None and "Deploys go out from CI" in elsewhere, "another session has its own context"
    run_hook(store.root, "pre-compact", {**base, "hook_event_name": "PreCompact", "trigger": "auto"})
    refused = _context(run_hook(store.root, "user-prompt", claude_prompt("how do deploys go out?", session="s-3")))
    assert refused is None, "a pre-compact alone proves nothing: the host may refuse to compact"
    run_hook(store.root, "post-compact", {**base, "hook_event_name": "PostCompact", "trigger": "auto"})
    after = _context(run_hook(store.root, "user-prompt", claude_prompt("how do deploys go out?", session="s-3")))
    assert after is not None and "Deploys go out from CI" in after, "compaction dropped it from the context"


def test_claude_codes_compaction_gives_a_memory_once(store: Store, memories: dict) -> None:
    """Claude Code sends PreCompact, then SessionStart (compact), then PostCompact: what the session
    start gives is in the new context, and the post-compact after it must not forget it (the next
    prompt gave the memory a second time)."""
    base = {"session_id": "s-8", "transcript_path": "/t.jsonl", "cwd": "/home/u/repo"}
    assert _context(run_hook(store.root, "user-prompt", claude_prompt("how do deploys go out?", session="s-8")))
    run_hook(store.root, "pre-compact", {**base, "hook_event_name": "PreCompact", "trigger": "manual"})
    start = {**base, "hook_event_name": "SessionStart", "source": "compact"}
    given = _context(run_hook(store.root, "session-start", start))
    assert given is not None and "Deploys go out from CI" in given
    run_hook(store.root, "post-compact", {**base, "hook_event_name": "PostCompact", "trigger": "manual"})
    after = _context(run_hook(store.root, "user-prompt", claude_prompt("how do deploys go out?", session="s-8")))
    assert after is None or "Deploys go out from CI" not in after, "the new context holds it already"


def test_after_compaction_a_replaced_memory_comes_back_as_what_replaced_it(store: Store, memories: dict) -> None:
    base = {"session_id": "s-5", "transcript_path": "/t.jsonl", "cwd": "/home/u/repo", "permission_mode": "default"}
    run_hook(store.root, "user-prompt", claude_prompt("how do deploys go out?", session="s-5"))
    newer = apply_patch(store, "refine", [memories["new"]], reason="r", contents=["Deploys go out from CI on tags"])
    run_hook(store.root, "pre-compact", {**base, "hook_event_name": "PreCompact", "trigger": "manual"})
    context = _context(
        run_hook(store.root, "session-start", {**base, "hook_event_name": "SessionStart", "source": "compact"})
    )
    assert context is not None and "Deploys go out from CI on tags" in context
    assert newer.new_nodes[0].id in context and f"{memories['new']} (" not in context


def test_pinned_memories_come_at_session_start_once(store: Store) -> None:
    pinned = add_memory(store, "Never push to main directly", source="user", retention="required").node.id
    base = {"session_id": "s-6", "transcript_path": "/t.jsonl", "cwd": "/home/u/repo", "permission_mode": "default"}
    start = {**base, "hook_event_name": "SessionStart"}
    opened = _context(run_hook(store.root, "session-start", {**start, "source": "startup"}))
    assert opened is not None and pinned in opened
    assert _context(run_hook(store.root, "user-prompt", claude_prompt("push the fix", session="s-6"))) is None
    assert _context(run_hook(store.root, "session-start", {**start, "source": "resume"})) is None
    cleared = _context(run_hook(store.root, "session-start", {**start, "source": "clear"}))
    assert cleared is not None and pinned in cleared, "a cleared context gets the pinned memories again"


def test_the_digest_reads_only_deliveries_and_skips_a_torn_line(store: Store) -> None:
    from cclg.ledger import sessions

    log = store.session_events_path("s-7")
    lines = [
        {"event": "user_prompt", "summary": {"prompt": "a", "loaded_memory_ids": ["mem_a"]}},
        {"event": "post_tool", "summary": {"tool_input": "mentions loaded_memory_ids and compact"}},
        {"event": "pre_compact", "summary": {"loaded_memory_ids": ["mem_a"]}},
        {"event": "post_compact", "summary": {"loaded_memory_ids": ["mem_a"]}},
        {"event": "user_prompt", "summary": {"prompt": "b", "loaded_memory_ids": ["mem_b"]}},
    ]
    log.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"event": "user_prompt", "summ')
    found = sessions.digest(store, "s-7")
    assert list(found.in_context) == ["mem_b"] and list(found.ever) == ["mem_a", "mem_b"]


def test_a_prompt_is_recorded_even_when_the_pack_fails(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    from cclg import hook

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("index unreadable")

    monkeypatch.setattr("cclg.api.retrieval.fit_markdown", broken)  # where the hook asks for it
    with pytest.raises(RuntimeError, match="index unreadable"):
        hook.handle("user-prompt", claude_prompt("how do deploys go out?"), "claude", str(store.root))
    (event,) = read_jsonl(store.session_events_path("abc123")).records
    assert event["summary"]["prompt"] == "how do deploys go out?" and event["summary"]["loaded_memory_ids"] == []


def test_the_store_config_makes_the_context_smaller_and_can_ask_for_the_code_graph(store: Store) -> None:
    for i in range(30):
        add_memory(store, f"Deploy step {i}: the release workflow runs stage {i} of the deploy pipeline", source="user")
    prompt = claude_prompt("how does the deploy pipeline release workflow run?")
    full = json.loads(run_hook(store.root, "user-prompt", prompt).stdout)["hookSpecificOutput"]["additionalContext"]
    config = json.loads((store.root / "config.json").read_text())
    config["hook"] = {"max_chars": 1_000, "include_codegraph": True, "max_tokens": "lots"}
    (store.root / "config.json").write_text(json.dumps(config))
    small = json.loads(run_hook(store.root, "user-prompt", prompt).stdout)["hookSpecificOutput"]["additionalContext"]
    assert len(small) < len(full) and len(small) <= 1_000, "the whole context fits, frame and note included"
    assert "code graph" in small, "include_codegraph from the config works like the flag"


@pytest.mark.parametrize("host", ["claude", "codex"])
def test_a_full_pack_fits_the_host_cap_whole(store: Store, host: str) -> None:
    from cclg.core.text import estimate_tokens

    for i in range(60):
        words = " ".join(f"detail{i}x{j}" for j in range(60))
        add_memory(store, f"Deploy pipeline note {i}: the release workflow {words}", source="user")
    payload = (
        claude_prompt("deploy pipeline release workflow")
        if host == "claude"
        else codex_prompt("deploy pipeline release workflow")
    )
    result = run_hook(store.root, "user-prompt", payload, "--include-codegraph")
    context = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
    assert context.count("Deploy pipeline note") >= 3
    if host == "claude":
        assert len(context) <= 10_000
    else:
        assert estimate_tokens(context) <= 2_500 and len(context) <= 10_000


def _git_repo(folder: Path) -> Path:
    (folder / "billing").mkdir(parents=True)
    (folder / "billing" / "invoice.py").write_text(
        "class InvoiceCalculator:\n    def round_totals(self):\n        pass\n"
    )
    (folder / "auth").mkdir()
    (folder / "auth" / "session.py").write_text("def refresh_token(session):\n    return session\n")
    env = {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@x", "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@x"}
    for command in (["init", "-q"], ["add", "."], ["commit", "-qm", "start"]):
        subprocess.run(["git", *command], cwd=folder, check=True, env={**os.environ, **env})
    return folder


def test_include_codegraph_appends_the_files_to_read_first(store: Store, tmp_path: Path) -> None:
    from cclg.codegraph.stored import graph_path, repository_root, search_index_path

    repo = _git_repo(tmp_path / "shop")
    prompt = claude_prompt("InvoiceCalculator rounds totals wrong", cwd=str(repo / "billing"))
    without_graph = run_hook(store.root, "user-prompt", prompt, "--include-codegraph")
    assert "No code graph for this repository yet" not in without_graph.stdout.decode(), "a note alone is not sent"
    # That prompt started the repository's first index in the background: it removes its marker when done.
    root = repository_root(str(repo))
    marker = graph_path(store, root).with_suffix(".refreshing")
    deadline = time.monotonic() + 120
    while (marker.exists() or not search_index_path(store, root).exists()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert search_index_path(store, root).exists(), "the background index built the graph"
    result = run_hook(store.root, "user-prompt", prompt, "--include-codegraph")
    context = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
    assert context.startswith("## Code graph: files to read first"), "no memory matched: the code graph alone"
    assert "not proof of what the code does" in context
    first = context.split("\n1. ", 1)[1]
    assert first.startswith('"billing/invoice.py"') and "InvoiceCalculator" in first
    assert (
        not (repo / ".git" / "cclg").exists()
        and "??"
        not in subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True).stdout
    )


def test_a_broken_code_graph_does_not_cost_the_memories(store: Store, memories: dict, tmp_path: Path) -> None:
    from cclg.codegraph.build import build_graph
    from cclg.codegraph.stored import search_index_path

    repo = _git_repo(tmp_path / "shop")
    build_graph(store, repo)
    search_index_path(store, repo).write_bytes(b"not a database")
    prompt = claude_prompt("how do deploys go out?", cwd=str(repo))
    result = run_hook(store.root, "user-prompt", prompt, "--include-codegraph")
    context = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "Deploys go out from CI" in context and "## Code graph" not in context
    # A damaged projection is no failure (issue 27, rule 14): deleted and built again in the background.
    assert "search index was damaged: it is being built again" in context
    assert not (store.root / "audit" / "hook_failures.jsonl").exists()


def test_the_hook_refreshes_a_stale_code_graph_in_the_background(store: Store, tmp_path: Path) -> None:
    import time

    from cclg.codegraph.build import build_graph
    from cclg.codegraph.stored import graph_path, search_index_path

    repo = _git_repo(tmp_path / "shop")
    build_graph(store, repo)
    graph_file = graph_path(store, repo)
    (repo / "billing" / "refunds.py").write_text("def issue_refund(invoice):\n    return invoice\n")
    subprocess.run(["git", "add", "."], cwd=repo, check=True)
    stale = time.time() - 100
    os.utime(graph_file, (stale, stale))  # git's index is newer than the graph, whatever the clock's grain
    prompt = claude_prompt("InvoiceCalculator rounds totals wrong", cwd=str(repo))
    result = run_hook(store.root, "user-prompt", prompt, "--include-codegraph")
    assert json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"], "this prompt uses the graph as it is"
    deadline = time.monotonic() + 60
    while graph_file.with_suffix(".refreshing").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not graph_file.with_suffix(".refreshing").exists(), "the background re-index finished"
    assert graph_file.stat().st_mtime >= (repo / ".git" / "index").stat().st_mtime
    from cclg.codegraph.rank import rank_files

    assert rank_files(search_index_path(store, repo), "issue_refund")[0]["path"] == "billing/refunds.py"
    again = run_hook(store.root, "user-prompt", prompt, "--include-codegraph")
    assert again.returncode == 0 and not graph_file.with_suffix(".refreshing").exists(), "a current graph is left alone"


BAD_INPUTS = [
    b"",
    b"garbage",
    b"[1, 2, 3]",
    b'{"session_id": 5, "prompt": "x"}',
    b'{"session_id": "../../etc", "prompt": "x"}',
    b'{"session_id": "abc", "prompt": 42}',
    b'{"session_id": "abc", "prompt": "truncated',
    b"\xff\xfe not utf-8",
    b'{"session_id": "abc", "prompt": "' + b"y" * (9 * 1024 * 1024) + b'"}',
]


@pytest.mark.parametrize("data", BAD_INPUTS, ids=range(len(BAD_INPUTS)))
def test_bad_input_fails_open_and_is_logged(store: Store, data: bytes) -> None:
    result = run_hook(store.root, "user-prompt", data)
    assert result.returncode == 0
    assert result.stdout == b"{}\n"
    failures = read_jsonl(store.root / "audit" / "hook_failures.jsonl").records
    assert len(failures) == 1 and failures[0]["event"] == "user-prompt"


@pytest.mark.parametrize(("event", "root"), [("no-such-event", "store"), ("user-prompt", "missing")])
def test_unknown_event_or_missing_store_fails_open(store: Store, tmp_path: Path, event: str, root: str) -> None:
    target = store.root if root == "store" else tmp_path / "nowhere"
    result = run_hook(target, event, claude_prompt("anything"))
    assert result.returncode == 0 and result.stdout == b"{}\n"


def test_corrupt_store_fails_open(store: Store) -> None:
    (store.root / "config.json").write_text("{broken")
    result = run_hook(store.root, "user-prompt", claude_prompt("anything"))
    assert result.returncode == 0 and result.stdout == b"{}\n"


# Never on the hook's path: the heavy dependencies, standard modules that cost
# milliseconds of start-up each (dataclasses imports inspect; hashlib loads OpenSSL),
# and the parts of cclg a read does not need (the writer, the library's areas for memories, the
# container and hosts, the surfaces). The hook reaches the library through its light area modules.
HEAVY_MODULES = ("click", "mcp", "git", "tree_sitter", "tomli_w")
CCLG_WRITERS_AND_SURFACES = (
    "cclg.ledger.writer",
    "cclg.api.memories",
    "cclg.api.container",
    "cclg.api.hosts",
    "cclg.intake.new_memories",
    "cclg.cli",
    "cclg.mcp_server",
)
SLOW_STDLIB = ("dataclasses", "inspect", "typing", "tomllib", "_hashlib", "argparse", "importlib.resources")


@pytest.mark.parametrize("event", ["user-prompt", "post-tool", "user-prompt --include-codegraph"])
def test_the_hook_loads_no_heavy_modules(store: Store, memories: dict, event: str, tmp_path: Path) -> None:
    script = (
        "import sys\nfrom cclg.hook import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"heavy = {HEAVY_MODULES + SLOW_STDLIB + CCLG_WRITERS_AND_SURFACES!r}\n"
        "heavy = sorted(m for m in sys.modules if m in heavy or m.split('.')[0] in heavy)\n"
        "print(repr(heavy), file=sys.stderr)\n"
    )
    payload = claude_prompt("how do deploys go out?")
    if event == "post-tool":
        payload.update(hook_event_name="PostToolUse", tool_name="Bash", tool_input={"command": "ls"}, tool_response={})
    if "--include-codegraph" in event:
        from cclg.codegraph.build import build_graph

        repo = _git_repo(tmp_path / "shop")
        build_graph(store, repo)
        payload = claude_prompt("how do deploys go out? InvoiceCalculator totals", cwd=str(repo))
    result = subprocess.run(
        [sys.executable, "-c", script, "--root", str(store.root), *event.split()],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=60,
    )
    if event.startswith("user-prompt"):
        context = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
        assert ("billing/invoice.py" if "--include-codegraph" in event else "Deploys go out") in context
    else:
        assert json.loads(result.stdout) == {}
    assert result.stderr.decode().strip().splitlines()[-1] == "[]"


def test_doctor_reports_recent_hook_failures(store: Store) -> None:
    from cclg.maintenance.doctor import HOOKS, diagnose

    assert diagnose(store).findings == []
    run_hook(store.root, "user-prompt", b"garbage")
    findings = diagnose(store).findings
    assert [f.check for f in findings] == [HOOKS]
    assert "1 hook call(s) failed" in findings[0].message and "JSONDecodeError" in findings[0].message


def test_every_event_has_one_handler_and_the_templates_use_them_all() -> None:
    """The hook's table answers exactly the contract's events (with cclg's additions), and the two
    host templates together install every one of them."""
    from cclg import format as fmt
    from cclg.hook import HANDLERS, HOST_EVENTS
    from tests.conftest import REPO

    assert set(HANDLERS) == set(fmt.HOOK_EVENTS_HANDLED) == set(HOST_EVENTS)
    assert set(fmt.HOOK_EVENTS) <= set(HANDLERS)
    installed = set()
    for template in ("claude-settings.json", "codex-hooks.json"):
        config = json.loads((REPO / "hooks" / template).read_text())
        installed |= {
            h["command"].split()[3] for groups in config["hooks"].values() for g in groups for h in g["hooks"]
        }
    assert installed == set(HANDLERS)


@pytest.mark.parametrize("template", ["claude-settings.json", "codex-hooks.json"])
def test_hook_templates_name_only_events_cclg_hook_knows(template: str) -> None:
    from cclg.hook import HOST_EVENTS
    from tests.conftest import REPO

    config = json.loads((REPO / "hooks" / template).read_text())
    agent = "claude" if template.startswith("claude") else "codex"
    for host_event, groups in config["hooks"].items():
        for group in groups:
            for handler in group["hooks"]:
                words = handler["command"].split()
                assert words[:3] == ["cclg-hook", "--agent", agent]
                assert HOST_EVENTS[words[3]] == host_event


@pytest.mark.parametrize(
    "prompt",
    [
        "how do deploys go out? " * 45_000,  # about 1 MB
        "\ud83d\ude00 broken \udd5a surrogate \ud800",
        "🎉🚀🔥😀" * 50,
        "the and of to is it that this with for",
        "".join(chr(c) for c in range(1, 3000)),
    ],
    ids=["1MB", "lone-surrogates", "emoji", "stop-words", "junk"],
)
def test_bad_prompts_get_valid_json_and_are_recorded(store: Store, memories: dict, prompt: str) -> None:
    payload = json.dumps(claude_prompt(prompt, session="bad"), ensure_ascii=True).encode()
    started = time.perf_counter()
    result = run_hook(store.root, "user-prompt", payload)
    assert time.perf_counter() - started < 10  # generous: "well under a second" is measured by hand, not here
    assert result.returncode == 0 and isinstance(json.loads(result.stdout), dict)
    assert not store.hook_failures_path.exists(), (
        store.hook_failures_path.read_text() if store.hook_failures_path.exists() else ""
    )
    (event,) = read_jsonl(store.session_events_path("bad")).records
    assert event["event"] == "user_prompt"
    if prompt.startswith("the and"):
        assert json.loads(result.stdout) == {}, "nothing to justify a memory"


def test_a_session_is_served_and_ended_while_another_process_holds_the_store_lock(store: Store) -> None:
    """Every event opened its session under the store lock, and session-end closed it under it, so a
    hook waited behind an import for as long as the import held it (up to the lock's 30 s). The lock
    holder here holds it for two minutes; the prompt is answered and the session ended meanwhile."""
    add_memory(store, "Deploys go out from CI with the release workflow", source="user")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from cclg.core.store import Store; s = Store.open(sys.argv[1])\n"
            "with s.lock():\n    print('locked', flush=True); time.sleep(120)",
            str(store.root),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        result = run_hook(store.root, "user-prompt", claude_prompt("how do deploys go out?", session="fresh-1"))
        assert holder.poll() is None, "the lock was still held while the prompt was answered"
        context = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
        assert "Deploys go out from CI" in context
        ended = run_hook(store.root, "session-end", {"session_id": "fresh-1", "hook_event_name": "SessionEnd"})
        assert holder.poll() is None and json.loads(ended.stdout) == {}
    finally:
        holder.kill()
        holder.wait()
    assert store.read_session("fresh-1").status == "ended"
    assert not (store.root / "audit" / "hook_failures.jsonl").exists()


def test_the_end_of_a_session_never_started_leaves_nothing(store: Store) -> None:
    """`claude mcp list` fires SessionEnd for a session no other event saw: it made a session record
    holding one session_end event."""
    result = run_hook(store.root, "session-end", {"session_id": "never-started", "hook_event_name": "SessionEnd"})
    assert json.loads(result.stdout) == {} and result.returncode == 0
    assert list((store.root / "sessions").iterdir()) == []
    assert not (store.root / "audit" / "hook_failures.jsonl").exists()


def test_a_resumed_session_is_active_again(store: Store) -> None:
    """A session that ended (SessionEnd) and is resumed later (SessionStart, source resume) stayed
    "ended" with its first end time, and its record never took the later runs' memories."""
    base = {"session_id": "s-9", "transcript_path": "/t.jsonl", "cwd": "/home/u/repo"}
    run_hook(store.root, "session-start", {**base, "hook_event_name": "SessionStart", "source": "startup"})
    run_hook(store.root, "session-end", {**base, "hook_event_name": "SessionEnd", "reason": "exit"})
    assert store.read_session("s-9").status == "ended"
    run_hook(store.root, "session-start", {**base, "hook_event_name": "SessionStart", "source": "resume"})
    resumed = store.read_session("s-9")
    assert resumed.status == "active" and resumed.ended_at is None
    run_hook(store.root, "session-end", {**base, "hook_event_name": "SessionEnd", "reason": "exit"})
    assert store.read_session("s-9").status == "ended"
