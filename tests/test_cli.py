"""The command line: each command through click's CliRunner, checked against the files it writes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cclg.cli import cli
from cclg.core.files import read_jsonl
from cclg.core.store import Store


def run(root: Path, *args: str, input: str | bytes | None = None) -> Result:
    return CliRunner().invoke(cli, ["--root", str(root), *args], input=input, catch_exceptions=False)


def run_json(root: Path, *args: str, input: str | None = None) -> object:
    result = run(root, *args, "--json", input=input)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture
def root(store: Store) -> Path:
    return store.root


def add(root: Path, content: str, *extra: str) -> dict[str, Any]:
    """The memory ``cclg add --json`` wrote."""
    result = run_json(root, "add", "--content", content, "--source", "user", *extra)
    assert isinstance(result, dict) and result["patch_id"] is not None
    node: dict[str, Any] = result["node"]
    return node


def test_init_creates_layout_and_is_idempotent(tmp_path: Path) -> None:
    target = tmp_path / "new"
    first = run(target, "init")
    assert first.exit_code == 0 and "created" in first.output
    for folder in ("raw", "nodes", "patches", "edges", "sessions", "audit"):
        assert (target / folder).is_dir()
    again = run(target, "init")
    assert again.exit_code == 0 and "already a store" in again.output


def test_init_refuses_a_foreign_non_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "stuff").mkdir()
    (tmp_path / "stuff" / "notes.txt").write_text("mine")
    result = run(tmp_path / "stuff", "init")
    assert result.exit_code == 2
    assert "not a cclg store" in result.stderr
    assert sorted(p.name for p in (tmp_path / "stuff").iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("command", [["status"], ["pack"], ["doctor"], ["add", "--content", "x", "--source", "y"]])
def test_commands_refuse_a_folder_that_is_not_a_store(tmp_path: Path, command: list[str]) -> None:
    (tmp_path / "plain").mkdir()
    result = run(tmp_path / "plain", *command)
    assert result.exit_code == 3
    assert "is not a cclg store" in result.stderr and "cclg" in result.stderr


def test_cclg_home_is_the_default_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CCLG_HOME", str(tmp_path / "from-env"))
    result = CliRunner().invoke(cli, ["init"])
    assert result.exit_code == 0
    assert (tmp_path / "from-env" / "config.json").is_file()


def test_add_writes_the_node_and_its_create_patch(root: Path) -> None:
    node = add(
        root,
        "Tests run with pytest -q",
        "--type",
        "project_fact",
        "--key",
        "test.command",
        "--scope",
        "project=cclg",
        "--tag",
        "testing",
        "--quote",
        "run pytest -q",
    )
    on_disk = json.loads((root / "nodes" / f"{node['id']}.json").read_text())
    assert on_disk == node
    assert node["type"] == "project_fact" and node["status"] == "active"
    assert node["scope"]["project"] == "cclg" and node["tags"] == ["testing"]
    assert node["source"] == {
        "label": "user",
        "session_ids": [],
        "turn_ids": [],
        "raw_spans": [],
        "tool_result_ids": [],
        "artifact_ids": [],
        "quote": "run pytest -q",
    }
    patches = [json.loads(p.read_text()) for p in (root / "patches").glob("*.json")]
    assert [(p["operation"], p["new_node_ids"]) for p in patches] == [("create", [node["id"]])]
    events = [r["event"] for r in read_jsonl(root / "audit" / "memory_audit.jsonl").records]
    assert events[-2:] == ["node_written", "patch_written"]


def test_add_prints_toml_by_default(root: Path) -> None:
    result = run(root, "add", "--content", "Use ruff for lint", "--source", "user")
    assert result.exit_code == 0
    assert 'content = "Use ruff for lint"' in result.output
    assert 'schema_version = "cclg.memory_node.v0.1"' in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--content", "   ", "--source", "user"], "content must not be empty"),
        (["--content", "x", "--source", "user", "--scope", "planet=mars"], "unknown scope key"),
        (["--content", "x", "--source", "user", "--scope", "project"], "key=value"),
    ],
)
def test_add_bad_input_is_a_clear_error_and_writes_nothing(root: Path, args: list[str], message: str) -> None:
    result = run(root, "add", *args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert list((root / "nodes").iterdir()) == []


def test_add_requires_a_source(root: Path) -> None:
    result = run(root, "add", "--content", "x")
    assert result.exit_code == 2 and "--source" in result.output


def test_patch_refine_then_rollback_then_diff_and_log(root: Path) -> None:
    old = add(root, "Deploys happen on Fridays", "--key", "deploy.day")
    refined = run_json(
        root,
        "patch",
        "refine",
        "--target",
        old["id"],
        "--content",
        "Deploys happen on Friday mornings",
        "--reason",
        "more precise",
    )
    assert isinstance(refined, dict)
    new_id = refined["new_nodes"][0]["id"]
    assert refined["patch"]["prior_states"] == {old["id"]: "active"}
    assert json.loads((root / "nodes" / f"{old['id']}.json").read_text())["status"] == "superseded"
    diff = run(root, "diff", refined["patch"]["id"])
    assert diff.exit_code == 0
    assert f"{old['id']}: active -> superseded" in diff.output
    assert "+Deploys happen on Friday mornings" in diff.output

    undo = run_json(root, "rollback", refined["patch"]["id"])
    assert isinstance(undo, dict) and undo["patch"]["rollback_of"] == refined["patch"]["id"]
    assert json.loads((root / "nodes" / f"{old['id']}.json").read_text())["status"] == "active"
    assert json.loads((root / "nodes" / f"{new_id}.json").read_text())["status"] == "discarded"

    history = run_json(root, "log", "--memory", old["id"])
    assert isinstance(history, list)
    assert [p["operation"] for p in history] == ["rollback", "refine", "create"]
    assert run(root, "doctor").exit_code == 0


def test_patch_rollback_through_the_patch_command(root: Path) -> None:
    node = add(root, "Old fact")
    forgotten = run_json(root, "forget", node["id"])
    assert isinstance(forgotten, dict)
    undo = run_json(root, "patch", "rollback", "--target", forgotten["patch"]["id"], "--reason", "mistake")
    assert isinstance(undo, dict) and undo["patch"]["operation"] == "rollback"
    assert json.loads((root / "nodes" / f"{node['id']}.json").read_text())["status"] == "active"


def test_patch_ids_take_a_unique_prefix_like_memory_ids(root: Path) -> None:
    """Ids are resolved in one place (the library): diff and rollback accept a patch id's prefix,
    and a prefix that several patches share is refused, naming how many."""
    node = add(root, "Prefix me")
    forgotten = run_json(root, "forget", node["id"])
    assert isinstance(forgotten, dict)
    patch_id = forgotten["patch"]["id"]
    prefix = next(
        patch_id[:n]
        for n in range(len("patch_") + 1, len(patch_id))
        if sum(p.stem.startswith(patch_id[:n]) for p in (root / "patches").glob("*.json")) == 1
    )
    assert f"{node['id']}: active -> forgotten" in run(root, "diff", prefix).output
    undo = run_json(root, "rollback", prefix)
    assert isinstance(undo, dict) and undo["patch"]["rollback_of"] == patch_id
    shared = run(root, "diff", "patch_")
    assert shared.exit_code == 2 and "matches 3 patches" in shared.stderr


def test_illegal_patch_is_refused_with_exit_code_and_nothing_written(root: Path) -> None:
    node = add(root, "A fact")
    assert run(root, "forget", node["id"]).exit_code == 0
    before = sorted(p.name for p in (root / "patches").iterdir())
    result = run(root, "patch", "supersede", "--target", node["id"], "--content", "new", "--reason", "r")
    assert result.exit_code == 6
    assert "forgotten" in result.stderr
    assert sorted(p.name for p in (root / "patches").iterdir()) == before


def test_patch_unknown_target_and_bad_id(root: Path) -> None:
    missing = run(root, "patch", "forget", "--target", "mem_doesnotexist", "--reason", "r")
    assert missing.exit_code == 5 and "no memory mem_doesnotexist" in missing.stderr
    traversal = run(root, "forget", "../../etc/passwd")
    assert traversal.exit_code == 5


def test_show_cite_and_id_prefix(root: Path) -> None:
    node = add(root, "Cite me", "--quote", "the exact words")
    shown = run_json(root, "show", node["id"][:12])
    assert shown == node
    cited = run_json(root, "cite", node["id"])
    assert isinstance(cited, dict)
    assert cited["source"]["quote"] == "the exact words"
    assert cited["created_by_patch"] is not None


def test_status_counts(root: Path) -> None:
    first = add(root, "One")
    add(root, "Two")
    run(root, "forget", first["id"])
    summary = run_json(root, "status")
    assert isinstance(summary, dict)
    assert summary["nodes"] == 2 and summary["effective"] == 1
    assert summary["by_status"] == {"active": 1, "forgotten": 1}
    assert summary["patches"] == 3


def test_raw_from_file_and_stdin(root: Path, tmp_path: Path) -> None:
    evidence = tmp_path / "meeting notes.md"
    evidence.write_bytes(b"# Notes\r\nbinary \x00 kept\n")
    stored = run_json(root, "raw", str(evidence))
    assert isinstance(stored, dict) and stored["written"] is True
    assert (root / stored["path"]).read_bytes() == evidence.read_bytes()
    again = run_json(root, "raw", str(evidence))
    assert isinstance(again, dict) and again == {**stored, "written": False}
    piped = run_json(root, "raw", "-", "--name", "prompt.txt", input="from stdin")
    assert isinstance(piped, dict) and (root / piped["path"]).read_text() == "from stdin"
    missing = run(root, "raw", str(tmp_path / "missing"))
    assert missing.exit_code == 2 and f"no such file: {tmp_path / 'missing'}" in missing.stderr


def test_import_jsonl_short_and_full_lines(root: Path, reference_store: Store, tmp_path: Path) -> None:
    full = json.loads((reference_store.root / "nodes" / "mem_efe299fc91f9.json").read_text())
    lines = [
        json.dumps(
            {
                "content": "Use uv for envs",
                "type": "preference",
                "source": "chat",
                "key": "env.tool",
                "scope": {"project": "cclg"},
                "tags": ["tooling"],
            }
        ),
        "",
        json.dumps(full),
    ]
    path = tmp_path / "seed.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = run_json(root, "import-jsonl", str(path))
    assert isinstance(result, dict) and result["imported"] == 2
    assert full["id"] in result["memory_ids"]
    imported = json.loads((root / "nodes" / f"{full['id']}.json").read_text())
    assert imported["content"] == full["content"]
    assert imported["metadata"]["content_hash"].startswith("sha256:")
    patch = json.loads((root / "patches" / f"{result['patch_id']}.json").read_text())
    assert patch["operation"] == "create" and sorted(patch["new_node_ids"]) == sorted(result["memory_ids"])
    assert run(root, "doctor").exit_code == 0
    # The whole import is one patch: rolling it back retires every imported memory.
    run(root, "rollback", result["patch_id"])
    assert run_json(root, "status")["effective"] == 0  # type: ignore[index]


def test_import_jsonl_bad_lines_are_reported_by_number_and_nothing_is_written(root: Path, tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(
        "\n".join(
            [
                json.dumps({"content": "good line", "source": "s"}),
                "{not json",
                json.dumps({"content": "no source"}),
                json.dumps({"content": "x", "source": "s", "colour": "red"}),
                json.dumps({"content": "x", "source": "s", "type": "gossip"}),
                json.dumps({"schema_version": "cclg.memory_node.v0.1", "id": "mem_x"}),
            ]
        )
        + "\n"
    )
    result = run(root, "import-jsonl", str(path))
    assert result.exit_code == 4
    for number in (2, 3, 4, 5, 6):
        assert f"bad.jsonl line {number}" in result.stderr
    assert "bad.jsonl line 1" not in result.stderr
    assert list((root / "nodes").iterdir()) == []
    assert list((root / "patches").iterdir()) == []


def test_import_jsonl_refuses_ids_already_in_the_store(root: Path, tmp_path: Path) -> None:
    node = add(root, "exists")
    record = json.loads((root / "nodes" / f"{node['id']}.json").read_text())
    path = tmp_path / "dup.jsonl"
    path.write_text(json.dumps(record) + "\n")
    result = run(root, "import-jsonl", str(path))
    assert result.exit_code == 4 and "already in the store" in result.stderr


def test_validate_reports_every_problem(tmp_path: Path, reference_store: Store) -> None:
    good = run(tmp_path, "validate", str(reference_store.root / "nodes"))
    assert good.exit_code == 0 and "4 file(s) checked, 0 problem(s)" in good.output
    bad = tmp_path / "bad.json"
    record = json.loads((reference_store.root / "nodes" / "mem_d6caa4a716ff.json").read_text())
    record["confidence"] = "high"
    record["status"] = "alive"
    del record["key"]
    bad.write_text(json.dumps(record))
    result = run(tmp_path, "validate", str(bad), "--json")
    assert result.exit_code == 4
    messages = " ".join(f["message"] for f in json.loads(result.stdout)["findings"])
    assert "'confidence'" in messages and "'status'" in messages and "'key'" in messages


def test_doctor_json_and_exit_code(root: Path) -> None:
    node = add(root, "Checked content")
    clean = run_json(root, "doctor")
    assert isinstance(clean, dict) and clean["ok"] is True and clean["findings"] == []
    path = root / "nodes" / f"{node['id']}.json"
    record = json.loads(path.read_text())
    record["content"] = "Tampered content"
    path.write_text(json.dumps(record))
    result = run(root, "doctor", "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    # The hand edit breaks the content hash; the search index, behind the file, is brought up to date.
    assert [f["check"] for f in report["findings"]] == ["content hash matches content"]
    assert report["refreshed"] == [f"nodes/{node['id']}.json"]
    path.write_text(json.dumps({**record, "content": "Tampered again"}))
    assert f"refreshed the search index: nodes/{node['id']}.json" in run(root, "doctor").output


def test_search_only_returns_current_truth_unless_asked(root: Path) -> None:
    old = add(root, "The build uses make")
    run(root, "patch", "supersede", "--target", old["id"], "--content", "The build uses just", "--reason", "moved")
    hits = run_json(root, "search", "build")
    assert isinstance(hits, list)
    assert [h["node"]["content"] for h in hits] == ["The build uses just"]
    everything = run_json(root, "search", "build", "--status", "all")
    assert isinstance(everything, list) and len(everything) == 2
    bogus = run(root, "search", "build", "--status", "bogus")
    assert bogus.exit_code == 2 and "unknown status 'bogus'" in bogus.stderr


@pytest.mark.parametrize("style", ["toml", "json", "markdown"])
def test_pack_lists_retired_memories_apart(root: Path, style: str) -> None:
    old = add(root, "Deploy with fabric")
    run(root, "patch", "supersede", "--target", old["id"], "--content", "Deploy with ansible", "--reason", "moved")
    result = run(root, "pack", "--query", "deploy", "--format", style)
    assert result.exit_code == 0
    if style == "json":
        pack = json.loads(result.stdout)
        assert [n["content"] for n in pack["memory_nodes"]] == ["Deploy with ansible"]
        assert [n["id"] for n in pack["suppressed_nodes"]] == [old["id"]]
    else:
        current, _, retired = result.output.partition("suppressed_nodes" if style == "toml" else "## Retired")
        assert "Deploy with ansible" in current and "Deploy with fabric" not in current
        assert "Deploy with fabric" in retired


def test_help_has_examples() -> None:
    result = CliRunner().invoke(cli, ["add", "--help"])
    assert result.exit_code == 0 and "Example:" in result.output


def test_doctor_repair_works_around_a_corrupt_node_file(root: Path) -> None:
    node = add(root, "A good memory")
    assert run(root, "forget", node["id"]).exit_code == 0
    (root / "nodes" / "mem_broken.json").write_text("{not json")
    path = root / "nodes" / f"{node['id']}.json"
    record = json.loads(path.read_text())
    record["status"] = "active"  # a hand edit around the lattice, which repair can fix
    path.write_text(json.dumps(record))
    result = run(root, "doctor", "--repair", "--json")
    assert result.exit_code == 1  # the corrupt file is still reported
    report = json.loads(result.stdout)
    assert any(action.endswith("to forgotten, as its patches say") for action in report["repairs"])
    assert [f["path"] for f in report["findings"]] == ["nodes/mem_broken.json"]
    assert json.loads(path.read_text())["status"] == "forgotten"


COMMANDS = {
    "cclg.cli.memory": {
        "init",
        "add",
        "raw",
        "import-jsonl",
        "patch",
        "forget",
        "promote",
        "purge",
        "label",
        "rollback",
        "conflicts",
        "resolve",
    },
    "cclg.cli.inspect": {"status", "show", "log", "diff", "cite", "audit", "validate", "doctor", "scan", "rules"},
    "cclg.cli.retrieval": {"search", "grep", "recall", "pack", "reindex"},
    "cclg.cli.containers": {"export", "open", "import-container"},
    "cclg.cli.code": {"code-index", "code-search"},
    "cclg.cli.hosts": {"install", "uninstall", "demo-store"},
    "cclg.cli.turns": {"turn"},
    "cclg.cli.sessions": {"distill", "stats"},
    "cclg.cli.projects": {"project"},
    "cclg.cli.teams": {"remote", "sync"},
    "cclg.cli.ui": {"ui"},
}


def test_every_command_is_registered_from_the_module_that_defines_it() -> None:
    registered = {name: command.callback.__module__ for name, command in cli.commands.items()}
    assert registered == {name: module for module, names in COMMANDS.items() for name in names}


@pytest.mark.parametrize("name", sorted(set().union(*COMMANDS.values()) - {"status"}))
def test_every_command_help_has_an_example(name: str) -> None:
    result = CliRunner().invoke(cli, [name, "--help"])
    assert result.exit_code == 0 and "Example:" in result.output


def test_python_dash_m_cclg_runs_the_command_line() -> None:
    for module in ("cclg", "cclg.cli"):
        result = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("Usage: ") and "code-search" in result.stdout


def test_label_needs_at_least_one_label_and_changes_only_labels(root: Path) -> None:
    node = add(root, "Deploys go out from CI")
    refused = run(root, "label", node["id"], "--reason", "r")
    assert refused.exit_code == 2 and "at least one of" in refused.stderr
    labelled = run_json(root, "label", node["id"][:12], "--sensitivity", "confidential", "--reason", "checked")
    assert isinstance(labelled, dict) and labelled["patch"]["operation"] == "update"
    new = [(n["content"], n["metadata"]["sensitivity"]) for n in labelled["new_nodes"]]
    assert new == [("Deploys go out from CI", "confidential")]


def test_search_status_retired_lists_what_is_no_longer_true(root: Path) -> None:
    old = add(root, "The build uses make")
    run(root, "patch", "supersede", "--target", old["id"], "--content", "The build uses just", "--reason", "moved")
    gone = add(root, "The build once used scons")
    run(root, "forget", gone["id"])
    hits = run_json(root, "search", "build", "--status", "retired")
    assert isinstance(hits, list) and [h["node"]["id"] for h in hits] == [old["id"]]
    assert "unknown status 'bogus'; use all, retired or" in run(root, "search", "build", "--status", "bogus").stderr


def test_export_to_a_file_then_open_and_import(root: Path, tmp_path: Path) -> None:
    add(root, "Travels in a container")
    out = tmp_path / "backup.cclg"
    written = run(root, "export", str(out))
    assert written.exit_code == 0 and written.stdout.startswith(f"wrote {out}: 1 nodes, 1 patches")
    for target, error in [
        (out, "exists"),  # no --force
        (tmp_path, "is a folder; give a file name"),
        (tmp_path / "no" / "x.cclg", f"no folder {tmp_path / 'no'} to write x.cclg into"),
    ]:
        refused = run(root, "export", str(target))
        assert refused.exit_code == 2 and error in refused.stderr, refused.stderr
    header, body = out.read_text().split("\n", 2)[1:]
    piped = run(root, "export", "-").stdout.split("\n", 2)[1:]
    assert piped[1] == body and json.loads(piped[0])["content_sha256"] == json.loads(header)["content_sha256"]
    described = run_json(root, "open", str(out))
    assert isinstance(described, dict)
    report = run_json(root, "import-container", str(out), "--dry-run")
    assert isinstance(report, dict)


def _git_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


def test_add_inside_a_git_repository_belongs_to_that_project(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hook reads a repository's memories under its name; a memory added there is written under it."""
    repo = _git_repo(tmp_path / "shop")
    (repo / "src").mkdir()
    monkeypatch.chdir(repo / "src")
    inside = add(root, "Invoices round half-even")
    assert inside["scope"]["project"] == "shop"
    everywhere = add(root, "Prefer small commits", "--global")
    assert everywhere["scope"]["project"] is None
    named = add(root, "Billing talks to the ledger service", "--scope", "project=ledger")
    assert named["scope"]["project"] == "ledger"
    both = run(root, "add", "--content", "x", "--source", "user", "--global", "--scope", "project=shop")
    assert both.exit_code == 2 and "global memory has no project" in both.stderr
    monkeypatch.chdir(tmp_path)
    assert add(root, "Outside any repository")["scope"]["project"] is None
    result = run(root, "pack", "--project", "other", "--query", "invoices round commits", "--format", "json")
    packed = json.loads(result.stdout)
    assert [e["id"] for e in packed["memory_nodes"]] == [everywhere["id"]], "shop's memory stays in shop"


def test_the_mcp_add_tool_scopes_to_the_servers_repository(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cclg import mcp_server

    monkeypatch.chdir(_git_repo(tmp_path / "shop"))
    added = mcp_server.memory_add(store, "Invoices round half-even", source="mcp")
    assert added["node"]["scope"]["project"] == "shop"
    everywhere = mcp_server.memory_add(store, "Prefer small commits", source="mcp", global_scope=True)
    assert everywhere["node"]["scope"]["project"] is None


def test_an_argument_that_is_not_utf8_is_a_clear_error_and_writes_nothing(root: Path) -> None:
    before = sorted(p.name for p in (root / "nodes").iterdir())
    result = run(root, "add", "--content", "bad \udcff byte", "--source", "user")
    assert result.exit_code == 2 and "not valid UTF-8" in result.stderr
    assert sorted(p.name for p in (root / "nodes").iterdir()) == before


@pytest.mark.parametrize(
    "args",
    [
        ("pack", "--query", "x", "--max-nodes", "99999999999999999999"),
        ("pack", "--query", "x", "--max-chars", "99999999999999999999"),
        ("search", "x", "--limit", "99999999999999999999"),
        ("grep", "x", "--limit", "99999999999999999999"),
        ("log", "--limit", "99999999999999999999"),
    ],
)
def test_a_count_past_any_use_is_a_usage_error_not_a_traceback(root: Path, args: tuple[str, ...]) -> None:
    result = CliRunner().invoke(cli, ["--root", str(root), *args])
    assert result.exit_code == 2 and "not in the range" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_an_empty_root_is_an_error_not_the_default_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CCLG_HOME", str(tmp_path / "default"))
    run(tmp_path / "default", "init")
    result = CliRunner().invoke(cli, ["--root", "", "status"])
    assert result.exit_code == 2 and "empty path" in result.output


def test_content_from_stdin_that_is_not_utf8_is_refused_and_nothing_written(root: Path) -> None:
    result = run(root, "add", "--content", "-", "--source", "user", input=b"\xff\xfe")
    assert result.exit_code == 2 and "not valid UTF-8" in result.output
    assert list((root / "nodes").glob("*.json")) == [] and list((root / "patches").glob("*.json")) == []


def test_a_full_disk_is_a_clear_error_and_nothing_is_published(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno
    import os

    real_write = os.write

    def full(fd: int, data: bytes) -> int:
        if len(data) > 100:  # a record, not the lock file's pid
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full)
    result = CliRunner().invoke(cli, ["--root", str(root), "add", "--content", "x" * 200, "--source", "user"])
    monkeypatch.setattr(os, "write", real_write)
    assert result.exit_code == 8 and "disk refused the write" in result.output, result.output
    assert list((root / "nodes").glob("*.json")) == [] and list((root / "patches").glob("*.json")) == []
    assert not [p for p in root.rglob("*.tmp")], "no temp file is left behind"


def _files(root: Path) -> list[str]:
    return sorted(p.name for folder in ("nodes", "patches", "raw") for p in (root / folder).glob("*"))


def test_a_memory_over_the_size_limit_is_refused_on_every_way_in(root: Path, tmp_path: Path) -> None:
    """A 100 MB line used to be taken (4.2 GB of memory, then 34 s for a matching prompt)."""
    before = _files(root)
    big = "word " * 25_000  # 125,000 characters: over the default 100,000
    added = run(root, "add", "--content", big, "--source", "user")
    assert added.exit_code == 4 and "over the limit of 100,000" in added.output
    line = json.dumps({"content": big, "source": "seed"}) + "\n"
    imported = run(root, "import-jsonl", "-", input=line)
    assert imported.exit_code == 4 and "over the limit" in imported.output
    huge = json.dumps({"content": "x" * 2_000_000, "source": "seed"}) + "\n"
    refused = run(root, "import-jsonl", "-", input=huge)
    assert refused.exit_code == 4 and "over the size limit of a memory" in refused.output  # never parsed
    node = add(root, "A short note")
    patched = run(root, "patch", "refine", "--target", node["id"], "--content", big, "--reason", "longer")
    assert patched.exit_code == 4 and "over the limit" in patched.output
    assert len(_files(root)) == len(before) + 2, "the short note and its patch, nothing of the refused"
    # The limit is the store's to set.
    config = json.loads((root / "config.json").read_text())
    (root / "config.json").write_text(json.dumps({**config, "limits": {"memory_chars": 200_000}}))
    assert run(root, "add", "--content", big, "--source", "user").exit_code == 0


def test_raw_evidence_over_the_size_limit_is_refused(root: Path) -> None:
    config = json.loads((root / "config.json").read_text())
    (root / "config.json").write_text(json.dumps({**config, "limits": {"raw_bytes": 1000}}))
    result = run(root, "raw", "-", input=b"x" * 1001)
    assert result.exit_code == 2 and "over the limit of 1,000" in result.output
    assert list((root / "raw").glob("*")) == []


def test_json_nested_too_deep_is_a_validation_error_not_a_crash(root: Path, tmp_path: Path) -> None:
    deep = '{"content": "x", "source": "seed", "metadata": ' + '{"a": ' * 5000 + "1" + "}" * 5000 + "}\n"
    result = run(root, "import-jsonl", "-", input=deep)
    assert result.exit_code == 4 and "nested more than 64 levels deep" in result.output
    assert list((root / "nodes").glob("*.json")) == []
