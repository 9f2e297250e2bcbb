"""The bundled demo store is exactly what `cclg demo-store` generates, and it is healthy."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from cclg.cli import cli
from cclg.doctor import diagnose
from cclg.ledger import effective_view
from cclg.store import Store
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
