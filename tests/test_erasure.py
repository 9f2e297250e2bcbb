"""Erasure rewrites content, never structure (issue 27, rule 1).

A purge (and a redaction, through the same rewrite) changes text only inside the string values that
hold content (``cclg.ledger.redaction.CONTENT_FIELDS``): never an id, a status, an operation, a schema id, a
key or config.json. Each test spreads a store the way use does (patches, edges, a hook session with a
prompt, a tool call, a turn and its end), purges a memory whose text is a word of the ledger itself,
and checks that the store still reads: every command works, doctor finds nothing, every other memory
is as it was.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cclg import api, hook, mcp_tools
from cclg.cli import cli
from cclg.core.store import Store
from cclg.errors import CclgError
from cclg.intake.new_memories import parse_scope
from cclg.ledger.promotion import promote
from cclg.ledger.purge import purge_memory
from cclg.maintenance.doctor import diagnose

SESSION = "sess-erasure-1"


def cclg(root: Path, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["--root", str(root), *args], input=input)


def files_of(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def written(root: Path) -> dict[str, bytes]:
    """The files a write changes (the search index, a projection, left out: opening it may touch it)."""
    return {name: data for name, data in files_of(root).items() if not name.startswith(("index.sqlite", "tmp/"))}


def build_spread(root: Path, work: Path) -> dict[str, Any]:
    """A store with a lineage (add, supersede, refine, forget), a hook session (start, prompt, a failing
    and a passing tool call, a stop, the end), and the ids of what it holds."""
    store, _ = Store.init(root)
    first = api.add_memory(store, "Deploys go out from the Jenkins box", source="user", key="deploy").node
    second = api.patch(store, "supersede", [first.id], reason="moved", contents=["Deploys use the bastion"])
    third = api.patch(store, "refine", [second.new_nodes[0].id], reason="r", contents=["Deploys use the new bastion"])
    gone = api.add_memory(store, "The staging database is called kestrel", source="user").node
    api.forget(store, gone.id, reason="renamed")
    base = {"session_id": SESSION, "cwd": str(work), "transcript_path": ""}
    hook.handle("session-start", {**base, "source": "startup"}, "claude", str(root))
    hook.handle("user-prompt", {**base, "prompt": "How do deploys go out?"}, "claude", str(root))
    for failing in (True, False):
        call = {"tool_name": "Bash", "tool_input": {"command": "make test"}, "tool_use_id": f"t{failing}"}
        response = {"stdout": "", "stderr": "FAILED test_x" if failing else "ok", "exit_code": int(failing)}
        hook.handle("post-tool", {**base, **call, "tool_response": response}, "claude", str(root))
    hook.handle("stop", {**base, "last_assistant_message": "Deploys use the bastion."}, "claude", str(root))
    store = Store.open(root)
    ids = [p.stem for folder in ("nodes", "patches", "edges") for p in store.record_files(folder)]
    return {"kept": [first.id, second.new_nodes[0].id, third.new_nodes[0].id, gone.id], "ids": ids}


def add_and_spread(root: Path, work: Path, text: str) -> str:
    """Memory X holding ``text``, quoted by a hook prompt too; its id."""
    store = Store.open(root)
    node = api.add_memory(store, text, source="user", force=True).node
    prompt = {"session_id": SESSION, "cwd": str(work), "transcript_path": "", "prompt": f"Remember: {text}"}
    hook.handle("user-prompt", prompt, "claude", str(root))
    return node.id


def structure(value: Any, under: str = "") -> Any:
    """Every string of a JSON value but those under a field that holds content: what an erasure keeps."""
    from cclg.ledger.redaction import CONTENT_FIELDS

    if isinstance(value, dict):
        return {k: structure(v, k if k in CONTENT_FIELDS else under) for k, v in value.items()}
    if isinstance(value, list):
        return [structure(v, under) for v in value]
    return "<content>" if under and isinstance(value, str) else value


def parsed(name: str, data: bytes) -> list[Any]:
    """The JSON a store file holds (one value per line for a log), for the files that are JSON."""
    if name.endswith(".jsonl"):
        return [json.loads(line) for line in data.split(b"\n") if line.strip()]
    return [json.loads(data)]


def assert_store_intact(root: Path, before: dict[str, bytes], purged: str, kept: list[str]) -> None:
    """After purging ``purged``: commands work, doctor is clean, config and every other memory are as they
    were, and every JSON file of the store still parses with the same structure."""
    after = files_of(root)
    assert after["config.json"] == before["config.json"]
    for node_id in kept:
        assert after[f"nodes/{node_id}.json"] == before[f"nodes/{node_id}.json"], f"{node_id} was changed"
    for name, data in after.items():
        if name.startswith(("raw/", "tmp/", "index.", "semantic.")) or not name.endswith((".json", ".jsonl")):
            continue
        values = parsed(name, data)  # every rewritten file still reads as JSON
        if name in before and name != f"nodes/{purged}.json":
            old = parsed(name, before[name])
            assert [structure(v) for v in values[: len(old)]] == [structure(v) for v in old], name
    for command in (("status",), ("log",), ("doctor",), ("search", "deploys"), ("conflicts",)):
        result = cclg(root, *command)
        assert result.exit_code == 0, f"{command}: {result.output}"
    assert cclg(root, "export", str(root.parent / "out.cclg")).exit_code == 0
    assert [f.message for f in diagnose(Store.open(root)).findings] == []
    store = Store.open(root)
    for node_id in kept:
        assert store.read_node(node_id).content == Store.open(root).read_node(node_id).content


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("erasure")
    work = base / "work"
    work.mkdir()
    spread = build_spread(base / "store", work)
    return {"root": base / "store", "work": work, **spread}


def copy_of(template: dict[str, Any], target: Path) -> Path:
    shutil.copytree(template["root"], target)
    return target


LEDGER_WORDS = ["active", "forgotten", "superseded", "create", "supersede", "refine", "forget", "memory", "user"]
SCHEMA_IDS = ["cclg.store.v0.1", "cclg.format.v0.1", "cclg.memory_node.v0.1", "cclg.memory_patch.v0.1"]


@pytest.mark.parametrize(
    "text",
    ["active", "cclg.store.v0.1", "OTHER_ID", '", "', "supersedes", "prompt", "0.1"],
)
def test_purging_a_ledger_word_rewrites_content_never_structure(
    template: dict[str, Any], tmp_path: Path, text: str
) -> None:
    root = copy_of(template, tmp_path / "store")
    text = template["kept"][1] if text == "OTHER_ID" else text
    node_id = add_and_spread(root, template["work"], text)
    before = files_of(root)
    result = cclg(root, "purge", node_id, "--yes", "--json")
    assert result.exit_code == 0, result.output
    assert_store_intact(root, before, node_id, template["kept"])
    assert Store.open(root).read_node(node_id).content == "[purged]"
    sessions = [n for n in files_of(root) if n.endswith(".events.jsonl")]
    prompts = [e for n in sessions for e in parsed(n, files_of(root)[n]) if e.get("event") == "user_prompt"]
    assert "Remember: [purged]" in [e["summary"]["prompt"] for e in prompts], "the content itself is erased"


def test_mcp_purge_of_a_ledger_word_rewrites_content_never_structure(template: dict[str, Any], tmp_path: Path) -> None:
    root = copy_of(template, tmp_path / "store")
    config = json.loads((root / "config.json").read_text())
    (root / "config.json").write_text(json.dumps({**config, "mcp": {"allow_purge": True}}, indent=2) + "\n")
    node_id = add_and_spread(root, template["work"], "active")
    before = files_of(root)
    mcp_tools.memory_purge(Store.open(root), node_id, "asked to erase", node_id)
    assert_store_intact(root, before, node_id, template["kept"])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_purged_text_leaves_the_store_whole(template: dict[str, Any], tmp_path: Path, data: Any) -> None:
    """Property: whatever the text (ledger words, schema ids, other records' ids, JSON punctuation,
    whitespace, one character, and mixes of them), after its purge the store loads, doctor finds nothing,
    and every other memory is intact."""
    pieces = st.sampled_from(
        [*LEDGER_WORDS, *SCHEMA_IDS, *template["ids"], '"', "'", ",", ":", "{", "}", "[", "]", ", ", '": "', "\\"]
    )
    chunk = st.one_of(pieces, st.sampled_from([" ", "\n", "\t", "\r\n"]), st.characters(codec="utf-8"))
    text = data.draw(st.lists(chunk, min_size=1, max_size=4).map("".join).filter(lambda t: t.strip() != ""))
    root = copy_of(template, tmp_path / f"store-{abs(hash(text))}")
    try:
        node_id = add_and_spread(root, template["work"], text)
    except CclgError:  # a text no memory may hold (a secret shape, say): nothing to purge
        shutil.rmtree(root)
        return
    before = files_of(root)
    try:
        purge_memory(Store.open(root), node_id)
        assert_store_intact(root, before, node_id, template["kept"])
    finally:
        shutil.rmtree(root)
        (root.parent / "out.cclg").unlink(missing_ok=True)


def test_purge_needs_the_full_id_or_eight_characters_of_it(template: dict[str, Any], tmp_path: Path) -> None:
    root = copy_of(template, tmp_path / "store")
    store = Store.open(root)
    lone = Store.init(tmp_path / "lone")[0]
    node = api.add_memory(lone, "The only memory of this store", source="user").node
    for short in ("mem_", "mem_0", node.id[:11]):
        result = cclg(lone.root, "purge", short, "--yes")
        assert result.exit_code == 2 and "8 characters" in result.output, (short, result.output)
        with pytest.raises(CclgError, match="8 characters"):
            config = json.loads((lone.root / "config.json").read_text())
            (lone.root / "config.json").write_text(json.dumps({**config, "mcp": {"allow_purge": True}}))
            mcp_tools.memory_purge(lone, short, "asked to erase", node.id)
    assert lone.read_node(node.id).content == "The only memory of this store", "nothing was erased"
    assert cclg(lone.root, "purge", node.id[:12], "--yes").exit_code == 0  # mem_ and 8 characters
    assert store.read_node(template["kept"][0]).status == "superseded"


# ---------------------------------------------------------------- rule 9: purged content is refused on every write

SECRET_TEXT = "The wire transfer code word is heronfall"


@pytest.fixture
def purged(tmp_path: Path) -> dict[str, Any]:
    """A store where memory X held ``SECRET_TEXT`` and was purged, Y is a current memory, and ``old.cclg`` is
    an export made before the purge."""
    root = tmp_path / "store"
    store, _ = Store.init(root)
    x = api.add_memory(store, SECRET_TEXT, source="user").node
    y = api.add_memory(store, "Payments go through the ledger service", source="user").node
    api.export_to(store, tmp_path / "old.cclg")
    purge_memory(store, x.id)
    return {"root": root, "x": x.id, "y": y.id, "old": tmp_path / "old.cclg"}


@pytest.mark.parametrize("operation", ["update", "refine", "supersede", "expand", "split"])
def test_purged_content_is_refused_by_every_patch_operation(purged: dict[str, Any], operation: str) -> None:
    root = purged["root"]
    before = written(root)
    contents = ["--content", SECRET_TEXT] + (["--content", "and the rest"] if operation == "split" else [])
    result = cclg(root, "patch", operation, "--target", purged["y"], *contents, "--reason", "r")
    assert result.exit_code == 6 and "purged" in result.stderr, result.output
    assert written(root) == before, "nothing was written"


def test_purged_content_comes_back_only_when_the_user_forces_it_on_add_and_import_jsonl(
    purged: dict[str, Any], tmp_path: Path
) -> None:
    """Refused like forgotten content, and like it written again with --force, the user's explicit
    say-so: on ``add`` and on ``import-jsonl`` alike (the import once refused it even when forced)."""
    root = purged["root"]
    lines = tmp_path / "again.jsonl"
    lines.write_text(json.dumps({"content": SECRET_TEXT, "source": "user"}) + "\n")
    for command in (["add", "--content", SECRET_TEXT, "--source", "user"], ["import-jsonl", str(lines)]):
        before = written(root)
        refused = cclg(root, *command)
        assert refused.exit_code == 6 and "purged" in refused.stderr, refused.output
        assert written(root) == before, "nothing was written"
        forced = cclg(root, *command, "--force", "--json")
        assert forced.exit_code == 0, forced.output
        api.forget(Store.open(root), _new_id(forced.stdout), reason="next command")


def _new_id(output: str) -> str:
    """The id of the memory an ``add --json`` or ``import-jsonl --json`` wrote."""
    data = json.loads(output)
    return data["node"]["id"] if "node" in data else data["memory_ids"][0]


def test_purged_content_is_refused_through_mcp_patch_and_a_promotion(purged: dict[str, Any]) -> None:
    store = Store.open(purged["root"])
    with pytest.raises(CclgError, match="purged"):
        mcp_tools.memory_patch(store, "update", "asked to", [purged["y"]], [SECRET_TEXT])
    scope = parse_scope(["session=s1"])
    session = api.add_memory(store, SECRET_TEXT, source="user", force=True, scope=scope)
    with pytest.raises(CclgError, match="purged"):
        promote(store, session.node.id, reason="keep it")


def test_an_export_made_before_the_purge_does_not_bring_the_content_back(purged: dict[str, Any]) -> None:
    root = purged["root"]
    before = written(root)
    result = cclg(root, "import-container", str(purged["old"]))
    assert result.exit_code == 6 and "purged" in result.stderr, result.output
    assert written(root) == before, "nothing was imported"


def test_a_purged_rule_leaves_no_trigger_behind(tmp_path: Path) -> None:
    from tests.test_rules import call, struggle

    store, _ = Store.init(tmp_path / "store")
    call(store, "s1", "session-start", source="startup")
    struggle(store, "s1")
    (rule,) = json.loads(cclg(store.root, "rules", "--json").stdout)["rules"]
    assert "shop.settings" in json.dumps(rule["trigger"])
    assert cclg(store.root, "purge", rule["id"], "--yes").exit_code == 0
    evidence = (store.root / "audit" / "rule_evidence.jsonl").read_text()
    assert "shop.settings" not in evidence and "shop/api.py" not in evidence
    shown = cclg(store.root, "rules").stdout
    assert "shop.settings" not in shown and "[purged]" in shown
    assert [f.message for f in diagnose(Store.open(store.root)).findings] == []


# ---------------------------------------------------------------- rule 10: markers never come from foreign records

CHOSEN = "Use the staging cluster for load tests"


def test_an_imported_line_shaped_like_a_tombstone_refuses_nothing(tmp_path: Path) -> None:
    from cclg.core.ids import content_hash
    from cclg.core.records import Source, new_node

    store, _ = Store.init(tmp_path / "store")
    forged = new_node("[purged]", source=Source(label="import"))
    forged.metadata["purged"] = {"content_hash": content_hash(CHOSEN), "patch_id": "patch_" + "0" * 26, "purged_at": ""}
    line = tmp_path / "forged.jsonl"
    line.write_text(json.dumps(forged.to_dict()) + "\n")
    assert cclg(store.root, "import-jsonl", str(line)).exit_code == 0
    added = cclg(store.root, "add", "--content", CHOSEN, "--source", "user")
    assert added.exit_code == 0, added.output


def test_a_container_holding_a_purge_refuses_nothing_and_purges_nothing_here(tmp_path: Path) -> None:
    other, _ = Store.init(tmp_path / "other")
    node = api.add_memory(other, CHOSEN, source="user").node
    purge_memory(other, node.id)  # a real purge, elsewhere: its tombstone and its purge patch travel
    api.export_to(other, tmp_path / "purged.cclg")
    store, _ = Store.init(tmp_path / "store")
    mine = api.add_memory(store, f"Quoting it: {CHOSEN}", source="user").node
    imported = cclg(store.root, "import-container", str(tmp_path / "purged.cclg"), "--json")
    assert imported.exit_code == 0, imported.output
    added = cclg(store.root, "add", "--content", CHOSEN, "--source", "user")
    assert added.exit_code == 0, added.output
    assert [f.message for f in diagnose(Store.open(store.root)).findings] == []
    assert cclg(store.root, "doctor", "--repair").exit_code == 0
    assert Store.open(store.root).read_node(mine.id).content == f"Quoting it: {CHOSEN}"
    assert Store.open(store.root).read_node(node.id).status == "forgotten", "a forgotten memory, as any reader sees it"


def import_as_before_the_fix(store: Store, path: Path) -> None:
    """Bring the container at ``path`` into ``store`` as the import of the code before rule 10 wrote it
    (``cclg.intake.container_import._write`` at c890eba): every record as it came, a purge patch keeping its rule and a
    tombstone its mark, each audited ``via: import``, then the index told."""
    from cclg.core.store import audit_record
    from cclg.intake.container import load_container
    from cclg.ledger.index import IndexChanges
    from cclg.ledger.writer import patch_audit

    container = load_container(path.read_text())
    audit = []
    for patch in container.patches:
        store.write_patch(patch)
        audit.append(patch_audit(patch, via="import"))
    for node in container.nodes:
        node.metadata["trust"] = "untrusted"  # the old cap_imported lowered trust and kept the mark
        store.write_node(node, new=True)
        audit.append(audit_record("node_written", node_id=node.id, via="import"))
    store.audit_many(audit)
    IndexChanges(store).changed([n.id for n in container.nodes], [p.id for p in container.patches])


@pytest.mark.parametrize("finished_by_the_old_doctor", [False, True])
def test_doctor_repair_settles_a_foreign_purge_an_old_import_wrote_and_keeps_every_record(
    tmp_path: Path, finished_by_the_old_doctor: bool
) -> None:
    """Rule 10 for a store poisoned before the fix; the old ``doctor --repair`` took such a purge for an
    interrupted one of this store and "finished" it (a ``node_purged`` audit record), which changes nothing."""
    other, _ = Store.init(tmp_path / "other")
    foreign = api.add_memory(other, CHOSEN, source="user").node
    foreign_patch = purge_memory(other, foreign.id).patch_id
    api.export_to(other, tmp_path / "purged.cclg")
    store, _ = Store.init(tmp_path / "store")
    own = api.add_memory(store, SECRET_TEXT, source="user").node
    purge_memory(store, own.id)  # this store's own purge: it keeps refusing its content
    import_as_before_the_fix(store, tmp_path / "purged.cclg")
    if finished_by_the_old_doctor:
        store.audit("node_purged", node_id=foreign.id, patch_id=foreign_patch, content_hash="", files={})
    poisoned = cclg(store.root, "add", "--content", CHOSEN, "--source", "user")
    assert poisoned.exit_code == 6, "the store is poisoned as the old import left it"
    before = {
        p.relative_to(store.root).as_posix() for d in ("nodes", "patches", "edges") for p in (store.root / d).iterdir()
    }
    found = [f for f in diagnose(Store.open(store.root)).findings if foreign_patch in f.message]
    assert len(found) == 1 and found[0].path == f"nodes/{foreign.id}.json", found
    assert "imported" in found[0].message and "--repair" in found[0].message, found[0].message
    repaired = cclg(store.root, "doctor", "--repair")
    assert repaired.exit_code == 0, repaired.output
    assert [f.message for f in diagnose(Store.open(store.root)).findings] == []
    after = {
        p.relative_to(store.root).as_posix() for d in ("nodes", "patches", "edges") for p in (store.root / d).iterdir()
    }
    assert after == before, "no record was lost"
    tombstone = Store.open(store.root).read_node(foreign.id)
    assert (tombstone.status, tombstone.content) == ("forgotten", "[purged]")
    assert Store.open(store.root).read_patch(foreign_patch).operation == "forget"
    added = cclg(store.root, "add", "--content", CHOSEN, "--source", "user")
    assert added.exit_code == 0, added.output
    mine = cclg(store.root, "add", "--content", SECRET_TEXT, "--source", "user")
    assert mine.exit_code == 6, "a purge of this store still refuses its content"


def test_purged_content_is_refused_also_by_a_write_to_a_store_without_its_index(purged: dict[str, Any]) -> None:
    """A write never builds the search index; without one, the purges are read from their patches."""
    root = purged["root"]
    (root / "index.sqlite").unlink()
    result = cclg(root, "patch", "update", "--target", purged["y"], "--content", SECRET_TEXT, "--reason", "r")
    assert result.exit_code == 6 and "purged" in result.stderr, result.output
    assert not (root / "index.sqlite").exists()


def test_redaction_rewrites_content_never_structure(template: dict[str, Any], tmp_path: Path) -> None:
    """``scan --store --redact`` runs on the same rewrite: a secret in a prompt goes, every log line keeps
    its structure, and config.json (the user's settings, never rewritten) is reported, not edited."""
    from cclg.core import secrets

    root = copy_of(template, tmp_path / "store")
    secret = "Xk9mQ2vL7pR4tW8zB3nY"
    config = json.loads((root / "config.json").read_text())
    (root / "config.json").write_text(json.dumps({**config, "db_password": secret}, indent=2) + "\n")
    prompt = {
        "session_id": SESSION,
        "cwd": str(template["work"]),
        "transcript_path": "",
        "prompt": "How do deploys go?",
    }
    hook.handle("user-prompt", prompt, "claude", str(root))
    log = Store.open(root).session_events_path(SESSION)
    lines = log.read_bytes().split(b"\n")
    planted = json.loads(lines[-2])
    planted["summary"]["prompt"] = f"db_password={secret}"
    lines[-2] = json.dumps(planted).encode()
    log.write_bytes(b"\n".join(lines))  # a log written before the guard: the secret on disk
    before = files_of(root)
    result = cclg(root, "scan", "--store", "--redact", "--json")
    report = json.loads(result.stdout)
    assert result.exit_code == 1 and [r["path"] for r in report["remaining"]] == [str(root / "config.json")]
    after = files_of(root)
    assert after["config.json"] == before["config.json"]
    name = store_relative(root, log)
    assert [structure(v) for v in parsed(name, after[name])] == [structure(v) for v in parsed(name, before[name])]
    assert secret.encode() not in after[name] and secrets.scan_bytes(after[name]) == []
    assert [f.message for f in diagnose(Store.open(root)).findings] == []


def store_relative(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()
