"""The bundled demo store is exactly what `cclg demo-store` generates, and it is healthy."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from click.testing import CliRunner

from cclg.cli import cli
from cclg.codegraph.stored import graph_name
from cclg.core.store import Store
from cclg.ledger.view import effective_view
from cclg.maintenance.demo import DEMO_PROJECT_HISTORY
from cclg.maintenance.doctor import diagnose
from tests.conftest import REPO


def files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        # The lock file and the search index are not part of the store's content.
        if p.is_file() and p.name != ".lock" and not p.name.startswith("index.sqlite")
    }


def test_regenerated_demo_store_is_byte_identical(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["demo-store", str(tmp_path / "demo")])
    assert result.exit_code == 0, result.output
    assert files(tmp_path / "demo") == files(REPO / "demo-store")


def test_demo_store_tells_the_walkthrough() -> None:
    store = Store.open(REPO / "demo-store")
    # A checkout's modes are git's (0644, 0755): in a git work tree the modes check notes them, fails nothing.
    assert diagnose(store).findings == []
    nodes = store.load_nodes()
    patches = store.load_patches()
    refine = [p for p in patches if p.operation == "refine"]
    assert len(refine) == 1
    (old_id,), (new_id,) = refine[0].target_ids, refine[0].new_node_ids
    assert nodes[old_id].type == "project_decision" and nodes[old_id].status == "superseded"
    assert nodes[new_id].relations["refines"] == [old_id]
    edges = store.load_edges()
    assert [(e.from_id, e.to_id, e.type) for e in edges] == [(new_id, old_id, "refines")]
    view = {n.id for n in effective_view(nodes.values(), patches)}
    assert new_id in view and old_id not in view
    session_view = {n.id for n in effective_view(nodes.values(), patches, session_id="demo-session")}
    assert len(session_view - view) == 1
    events = store.session_events("demo-session")
    assert [e["event"] for e in events] == ["user_prompt"]
    assert (store.root / events[0]["raw"]).is_file()
    audit = (store.root / "audit" / "memory_audit.jsonl").read_text()
    assert '"session_event"' in audit and '"raw_written"' in audit and '"patch_written"' in audit


def test_demo_store_refuses_a_non_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("x")
    result = CliRunner().invoke(cli, ["demo-store", str(tmp_path / "full")])
    assert result.exit_code == 2 and "not empty" in result.stderr


def test_demo_store_holds_the_sample_projects_code_graph() -> None:
    (path,) = (REPO / "demo-store" / "active" / "codegraphs").glob("*.json")
    graph = json.loads(path.read_text("utf-8"))
    assert path.name == f"{graph_name(Path('demo-project'))}.json"
    assert graph["schema_version"] == "cclg.code_graph.v0.1" and graph["root"] == "demo-project"
    assert graph["git"]["branch"] == "main" and graph["git"]["commits_read"] == len(DEMO_PROJECT_HISTORY)
    assert graph["git"]["dirty"] is False and "summary" not in graph
    files = {f["path"]: f for f in graph["files"]}
    assert sorted(files) == sorted({name for *_, written in DEMO_PROJECT_HISTORY for name in written})
    assert (files["tasks/store.py"]["churn"], files["tasks/store.py"]["authors"]) == (2, 2)
    assert files["web/page.js"]["language"] == "javascript"
    imports = {(e["from"], e["to"]) for e in graph["edges"] if e["type"] == "imports"}
    assert imports == {
        ("tasks/cli.py", "tasks/model.py"),
        ("tasks/cli.py", "tasks/store.py"),
        ("tasks/store.py", "tasks/model.py"),
        ("web/page.js", "web/api.js"),
    }
    names = {(s["path"], s["name"]) for s in graph["symbols"]}
    assert {("tasks/model.py", "Task"), ("tasks/store.py", "save_tasks"), ("web/api.js", "fetchTasks")} <= names
    # The graph was made after the project's last commit.
    newest_commit = max(f["last_commit"] for f in graph["files"])
    generated = datetime.fromisoformat(graph["generated_at"])
    assert datetime.fromtimestamp(newest_commit, UTC) < generated


def test_the_readmes_first_command_lists_the_superseded_memory_apart(tmp_path: Path) -> None:
    """The README's first line promises it: the pack for the demo query holds the current memory and
    lists the one it replaced apart, never as truth."""
    import shutil

    store = tmp_path / "demo"
    shutil.copytree(REPO / "demo-store", store)
    query = "how do memories reach the agent prompt"
    result = CliRunner().invoke(cli, ["--root", str(store), "pack", "--query", query, "--format", "json"])
    pack = json.loads(result.output)
    assert [n["id"] for n in pack["memory_nodes"]] == ["mem_demo0004"]
    assert [n["id"] for n in pack["suppressed_nodes"]] == ["mem_demo0001"]


def test_the_readmes_first_line_runs_on_a_checkouts_demo_store(tmp_path: Path) -> None:
    """The cclg commands of the README's first line, as real processes, on a copy of the demo store in a
    git work tree with the modes a checkout gives (0644 files, 0755 folders): each exits 0, the pack
    holds the current memories and lists the superseded one apart, doctor notes the modes, and the
    checkout's files are unchanged (the line writes nothing git tracks)."""
    import shlex
    import shutil
    import subprocess
    import sys

    from tests.test_readme import readme_commands

    demo = tmp_path / "demo-store"
    shutil.copytree(REPO / "demo-store", demo, ignore=shutil.ignore_patterns(".lock", "index.sqlite*"))
    for path in [demo, *demo.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    before = files(demo)
    # the line's cclg commands (``.venv/bin/cclg ...``: the environment the line made), run here on this cclg
    parts = [shlex.split(part) for part in readme_commands()[0].split(" && ")]
    commands = [part for part in parts if part[0].split("/")[-1] == "cclg"]
    assert [c[1:3] for c in commands] == [["--root", "demo-store"]] * 2, commands
    outputs = []
    for command in commands:
        run = [sys.executable, "-m", "cclg", *command[1:]]
        done = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, (command, done.stdout, done.stderr)
        outputs.append(done.stdout)
    assert "superseded" in outputs[0] and "ok: no findings" in outputs[1], outputs
    assert "are open to others than their owner" in outputs[1] and "noted, not failed" in outputs[1], outputs
    assert files(demo) == before
