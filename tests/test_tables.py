"""Tables: `cclg export --format jsonl|arrow|parquet` (the effective view, or every record with --ledger),
reading them back (cclg.intake.tables.read_records) and bringing them into a store (import_table).

Identity in the round trips: a JSON-lines file cclg wrote comes back byte for byte through Parquet
or Arrow IPC; and every record read back equals the record written (``to_dict()`` equal)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result

from cclg import api
from cclg.cli import cli
from cclg.core.records import Scope, Source
from cclg.core.store import Store
from cclg.errors import UsageError, ValidationError
from cclg.intake.tables import (
    COLUMNS,
    arrow_schema,
    from_row,
    import_table,
    read_records,
    store_records,
    table_bytes,
    to_row,
    type_text,
)
from cclg.ledger.sessions import start_session
from tests.conftest import REPO

FORMATS = ("arrow", "parquet")


def run(root: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--root", str(root), *args], catch_exceptions=False)


def rich_store(root: Path) -> Store:
    """A store with history: a supersede, a refine, a forget, a label, tags, a scope, a quote, a raw span,
    a session memory and a session, non-ASCII text and a line break."""
    store, _ = Store.init(root)
    first = api.add_memory(store, "Deploys run with make deploy", source="user", key="deploy", tags=["ops"])
    api.patch(store, "supersede", [first.node.id], contents=["Deploys run with make ship"], reason="renamed")
    second = api.add_memory(
        store, "Tests: pytest -q\nthen ruff — «ok» 테스트", source="doc:README.md", quote="pytest -q",
        scope=Scope(project="proj-1"), trust="untrusted", sensitivity="confidential",
    )  # fmt: skip
    api.patch(store, "refine", [second.node.id], contents=["Tests: pytest -q -x, then ruff"], reason="stop early")
    gone = api.add_memory(store, "The staging host is old-box", source="user")
    api.forget(store, gone.node.id)
    raw, _ = store.write_raw(b"the user said: use make ship", "prompt.txt")
    span = {"source_id": raw.split("/", 1)[1], "turn_id": None, "char_start": 15, "char_end": 28}
    api.add_memory(store, "Use make ship", source="session:s1", valid_until="2030-01-01")
    node = api.add_memory(store, "Raw-cited fact", source="user").node
    node.source = Source(label="user", raw_spans=[span], quote="make ship")
    store.write_node(node)
    start_session(store, "sess-1", agent="claude")
    api.add_memory(store, "A session note", source="user", scope=Scope(session="sess-1"))
    return store


def records_of(store: Store, ledger: bool) -> list[dict[str, Any]]:
    return [r.to_dict() for r in store_records(store, ledger=ledger)]


@pytest.mark.parametrize("ledger", [False, True])
@pytest.mark.parametrize("fmt", FORMATS)
def test_jsonl_through_a_table_and_back_is_byte_identical(tmp_path: Path, fmt: str, ledger: bool) -> None:
    store = rich_store(tmp_path / "s")
    jsonl = tmp_path / "a.jsonl"
    jsonl.write_bytes(table_bytes(store_records(store, ledger=ledger), "jsonl", ledger=ledger))
    table = tmp_path / f"a.{fmt}"
    table.write_bytes(table_bytes(read_records(jsonl), fmt, ledger=ledger))
    back = table_bytes(read_records(table), "jsonl", ledger=ledger)
    assert back == jsonl.read_bytes()
    assert [r.to_dict() for r in read_records(table)] == records_of(store, ledger)
    kinds = {json.loads(line).get("record", "node") for line in jsonl.read_text().splitlines()}
    assert kinds == ({"node", "patch", "edge", "session"} if ledger else {"node"})


def test_the_cli_exports_each_format_and_the_files_read_back(tmp_path: Path) -> None:
    store = rich_store(tmp_path / "s")
    for fmt in ("jsonl", *FORMATS):
        for ledger in (False, True):
            out = tmp_path / f"out-{ledger}.{fmt}"
            result = run(store.root, "export", "--format", fmt, *(["--ledger"] if ledger else []), str(out))
            assert result.exit_code == 0, result.output
            assert result.stdout.startswith(f"wrote {out}: {fmt}, {'ledger' if ledger else 'effective'}")
            assert [r.to_dict() for r in read_records(out)] == records_of(store, ledger)
    again = run(store.root, "export", "--format", "parquet", str(tmp_path / "out-False.parquet"))
    assert again.exit_code == 2 and "--force" in again.output
    assert run(store.root, "export", str(tmp_path / "plain.cclg")).stdout.startswith("wrote")  # the default
    assert (tmp_path / "plain.cclg").read_text().startswith("CCLG\t0.1\n")


def test_the_view_holds_current_memories_and_the_columns_follow_cognoxium(tmp_path: Path) -> None:
    store = rich_store(tmp_path / "s")
    out = tmp_path / "v.parquet"
    assert run(store.root, "export", "--format", "parquet", str(out)).exit_code == 0
    table = pq.read_table(out)
    assert table.schema.equals(arrow_schema(), check_metadata=False)
    assert table.schema.metadata[b"cclg.view"] == b"view"
    rows = table.to_pylist()
    contents = {r["content"] for r in rows}
    assert "Deploys run with make ship" in contents and "Deploys run with make deploy" not in contents
    assert "The staging host is old-box" not in contents
    ship = next(r for r in rows if r["content"] == "Deploys run with make ship")
    old = next(n for n in store.load_nodes().values() if n.content == "Deploys run with make deploy")
    assert ship["parent_ids"] == [old.id]
    stored = store.read_node(ship["id"]).metadata
    assert "sha256:" + ship["content_hash"] == stored["content_hash"] and len(ship["content_hash"]) == 64
    assert (ship["trust"], ship["retention"]) == (stored["trust"], stored["retention"]) == ("untrusted", "optional")
    tests = next(r for r in rows if r["content"].startswith("Tests: pytest -q -x"))
    assert tests["sensitivity"] == "confidential" and tests["scope"]["project"] == "proj-1"
    assert next(r for r in rows if r["content"] == "Use make ship")["expires_at"].startswith("2030-01-01")
    cited = next(r for r in rows if r["content"] == "Raw-cited fact")
    assert cited["sources"][0]["kind"] == "raw" and cited["sources"][0]["uri"].endswith("#char=15,28")
    assert "content" not in json.loads(cited["fields"])  # nothing is stored twice but the retrieval text


def test_a_field_a_column_cannot_hold_stays_in_fields(tmp_path: Path) -> None:
    store = rich_store(tmp_path / "s")
    node = next(iter(store_records(store, ledger=False)))
    node.metadata.update(trust=3, content_hash="md5:abc", extra={"deep": [1, 2.5, None]})
    node.source.raw_spans = [{"source_id": "x", "char_start": 0, "char_end": 1, "note": "foreign"}]
    row = to_row(node)
    assert row["trust"] is None and row["content_hash"] is None and row["source"] is None
    assert json.loads(row["fields"])["metadata"]["trust"] == 3
    back = from_row(row, "row 1")
    assert back.to_dict() == node.to_dict()
    assert pa.Table.from_pylist([row], schema=arrow_schema()).num_rows == 1


def test_bad_rows_are_refused_each_named(tmp_path: Path) -> None:
    store = rich_store(tmp_path / "s")
    rows = [to_row(r) for r in store_records(store, ledger=False)]
    rows[0]["content"] = "edited by hand"  # the content hash no longer holds... as the record reader sees it
    rows[1]["parent_ids"] = ["mem_01aaaaaaaaaaaaaaaaaaaaaaaa"]
    rows[2]["record"] = "memo"
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=arrow_schema()), path)
    with pytest.raises(ValidationError) as caught:
        list(read_records(path))
    problems = "\n".join(caught.value.problems)
    assert "row 2: parent_ids disagrees with the record" in problems
    assert "row 3: record must be one of node, patch, edge, session, got 'memo'" in problems
    wrong = pa.table({"record": ["node"], "colour": ["red"]})
    pq.write_table(wrong, tmp_path / "wrong.parquet")
    with pytest.raises(ValidationError, match="column 'colour' is not a column of a cclg table"):
        list(read_records(tmp_path / "wrong.parquet"))
    (tmp_path / "junk.arrow").write_bytes(b"not arrow at all")
    with pytest.raises(ValidationError, match="not an Arrow IPC file"):
        list(read_records(tmp_path / "junk.arrow"))
    (tmp_path / "bad.jsonl").write_text('{"record": "node"}\nnot json\n')
    with pytest.raises(ValidationError) as caught:
        list(read_records(tmp_path / "bad.jsonl"))
    assert any("line 2: not JSON" in p for p in caught.value.problems)
    with pytest.raises(UsageError, match="cannot tell the format"):
        list(read_records(tmp_path / "x.csv"))


@pytest.mark.parametrize("fmt", ["jsonl", *FORMATS])
def test_importing_a_view_brings_current_memories_untrusted_and_once(tmp_path: Path, fmt: str) -> None:
    source = rich_store(tmp_path / "a")
    out = tmp_path / f"view.{fmt}"
    api.export_to(source, out, format=fmt)
    target, _ = Store.init(tmp_path / "b")
    mine = api.add_memory(target, "Deploys run with make ship", source="user").node  # already current here
    report = import_table(target, out)
    nodes = target.load_nodes()
    current = {n.content for n in nodes.values() if n.status in ("active", "active_session")}
    exported = {r["content"] for r in records_of(source, False)}
    assert exported <= current
    assert report["view"] == "memories" and report["duplicates"][0]["duplicate_of"] == mine.id
    assert report["relations_dropped"] == 3  # the old versions a supersede and a refine replaced stay behind
    imported = [nodes[i] for i in report["memory_ids"]]
    assert imported and all(n.metadata.get("trust") != "trusted" for n in imported)
    again = import_table(target, out)  # twice changes nothing
    assert again["imported"] == 0 and sorted(again["known"]) == sorted(report["memory_ids"])


@pytest.mark.parametrize("fmt", ["jsonl", *FORMATS])
def test_importing_a_ledger_is_a_container_import(tmp_path: Path, fmt: str) -> None:
    source = rich_store(tmp_path / "a")
    out = tmp_path / f"ledger.{fmt}"
    api.export_to(source, out, format=fmt, ledger=True)
    target, _ = Store.init(tmp_path / "b")
    dry = import_table(target, out, dry_run=True)
    assert dry["dry_run"] and not target.load_nodes()
    report = import_table(target, out)
    assert report["view"] == "ledger" and report["added"]["patches"] == len(source.load_patches())
    here = target.load_nodes()
    assert set(here) == set(source.load_nodes())
    assert all(n.metadata.get("trust") != "trusted" for n in here.values())  # capped as a container's
    assert {n.id: n.status for n in here.values()} == {n.id: n.status for n in source.load_nodes().values()}
    assert import_table(target, out)["added"]["nodes"] == 0  # twice changes nothing


@pytest.mark.parametrize(("fmt", "ledger"), [("parquet", False), ("arrow", True), ("jsonl", True), ("jsonl", False)])
def test_cclg_import_reads_back_what_cclg_export_wrote(tmp_path: Path, fmt: str, ledger: bool) -> None:
    """`cclg import KIND PATH` is the one import command: the tables `cclg export --format` writes come
    back through it (a ledger as a container, a view as new memories), as they do through the library."""
    source = rich_store(tmp_path / "a")
    out = tmp_path / f"out.{fmt}"
    exported = run(source.root, "export", "--format", fmt, *(["--ledger"] if ledger else []), str(out))
    assert exported.exit_code == 0, exported.output
    target, _ = Store.init(tmp_path / "b")
    done = run(target.root, "import", fmt, str(out), "--json")
    assert done.exit_code == 0, done.output
    here = target.load_nodes()
    if ledger:
        assert set(here) == set(source.load_nodes())
    else:
        current = {r["content"] for r in records_of(source, False)}
        assert current == {n.content for n in here.values() if n.status in ("active", "active_session")}


def test_a_ledger_row_that_edits_a_local_memory_never_changes_it(tmp_path: Path) -> None:
    store = rich_store(tmp_path / "a")
    out = tmp_path / "ledger.jsonl"
    api.export_to(store, out, format="jsonl", ledger=True)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    node = next(line for line in lines if line["record"] == "node" and line["status"] == "active")
    node["content"] = "someone else's version"
    node["metadata"].pop("content_hash")
    out.write_text("".join(json.dumps(line) + "\n" for line in lines))
    report = import_table(store, out)
    assert report["conflicts"][0]["local"] == node["id"]
    assert store.read_node(node["id"]).content != "someone else's version"


def test_the_readme_documents_every_column() -> None:
    readme = (REPO / "README.md").read_text()
    for column in COLUMNS:
        assert f"| `{column.name}` | `{type_text(column.type)}` |" in readme, column.name


def test_without_pyarrow_the_error_names_the_extra_and_nothing_else_loads_it(tmp_path: Path) -> None:
    store = rich_store(tmp_path / "s")
    script = (
        "import sys; sys.modules['pyarrow'] = None\n"
        "from click.testing import CliRunner\n"
        "from cclg.cli import cli\n"
        f"r = CliRunner().invoke(cli, ['--root', {str(store.root)!r}, 'export', '--format', 'parquet', 'x.parquet'])\n"
        "print(r.exit_code); print(r.output)\n"
        f"r = CliRunner().invoke(cli, ['--root', {str(store.root)!r}, 'export', '--format', 'jsonl', 'x.jsonl'])\n"
        "print(r.exit_code)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, check=True)
    code, *rest = done.stdout.splitlines()
    assert code == "2" and "pip install 'cclg[arrow]'" in "\n".join(rest)
    assert rest[-1] == "0"  # JSON lines need no pyarrow
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, cclg.cli, cclg.hook, cclg.api; print('pyarrow' in sys.modules)"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert loaded.stdout.strip() == "False"


def test_import_jsonl_reads_a_view_export_of_memories_without_history(tmp_path: Path) -> None:
    source, _ = Store.init(tmp_path / "a")
    api.add_memory(source, "Tests run with pytest -q", source="user", tags=["tests"])
    api.add_memory(source, "Lint with ruff", source="user", scope=Scope(project="p"))
    out = tmp_path / "view.jsonl"
    assert run(source.root, "export", "--format", "jsonl", str(out)).exit_code == 0
    target = tmp_path / "b"
    run(target, "init")
    result = run(target, "import-jsonl", str(out), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["imported"] == 2
    assert {n.content for n in Store.open(target).load_nodes().values()} == {
        "Tests run with pytest -q",
        "Lint with ruff",
    }
