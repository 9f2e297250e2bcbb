"""Compatibility with the reference implementation (cclg 0.2.3): its demo store and conformance vectors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cclg.doctor import diagnose
from cclg.errors import UnknownPatchOperationError, ValidationError
from cclg.ledger import effective_view
from cclg.records import MemoryNode, MemoryPatch, Source
from cclg.store import Store
from tests.conftest import DATA

CONFORMANCE = DATA / "reference-conformance"


def test_reference_store_is_doctor_clean(reference_store: Store) -> None:
    report = diagnose(reference_store)
    assert report.findings == []
    assert report.counts == {"nodes": 4, "patches": 1, "edges": 1, "sessions": 1, "raw": 2}


def test_reference_store_effective_view(reference_store: Store) -> None:
    nodes = reference_store.load_nodes()
    patches = reference_store.load_patches()
    assert [n.id for n in effective_view(nodes.values(), patches)] == ["mem_d6caa4a716ff", "mem_efe299fc91f9"]
    with_session = effective_view(nodes.values(), patches, session_id="demo-session")
    assert [n.id for n in with_session] == ["mem_abedb4edaeb1", "mem_d6caa4a716ff", "mem_efe299fc91f9"]
    assert "mem_0524abcafba4" not in {n.id for n in with_session}
    assert [e["event"] for e in reference_store.session_events("demo-session")] == ["user_prompt"]


def test_reference_store_accepts_our_writes(reference_store: Store) -> None:
    from cclg.api import add_memory
    from cclg.ledger import apply_patch

    added = add_memory(reference_store, "Written by cclg into a reference store", source="test")
    apply_patch(
        reference_store,
        "supersede",
        ["mem_efe299fc91f9"],
        reason="newer gates",
        contents=["Gates: unit, property, concurrency, benchmark."],
        source=Source(label="test"),
    )
    assert diagnose(reference_store).findings == []
    view = {n.id for n in effective_view(reference_store.load_nodes().values(), reference_store.load_patches())}
    assert added.new_nodes[0].id in view and "mem_efe299fc91f9" not in view


def sections(path: Path) -> dict[str, list[dict]]:
    lines = path.read_text(encoding="utf-8").split("\n")
    assert lines[0] == "CCLG\t0.1"
    result: dict[str, list[dict]] = {}
    current = None
    for line in lines[2:]:
        if line.startswith("@"):
            current = result.setdefault(line[1:], [])
        elif line:
            assert current is not None
            current.append(json.loads(line))
    return result


POSITIVE = sorted(p.stem for p in CONFORMANCE.glob("0[1-6]_*.cclg"))


@pytest.mark.parametrize("name", POSITIVE)
def test_conformance_effective_view(name: str) -> None:
    expected = json.loads((CONFORMANCE / f"{name}.expected.json").read_text())
    body = sections(CONFORMANCE / f"{name}.cclg")
    nodes = [MemoryNode.from_dict(n, where=f"{name} @nodes") for n in body["nodes"]]
    patches = [MemoryPatch.from_dict(p, where=f"{name} @patches") for p in body["patches"]]
    view = effective_view(nodes, patches, session_id=expected["session_id"])
    assert sorted(n.id for n in view) == sorted(expected["effective_view_node_ids"])


def test_conformance_unknown_operation_is_refused_at_load_and_in_the_view() -> None:
    body = sections(CONFORMANCE / "07_unknown_patch_operation.cclg")
    with pytest.raises(ValidationError, match="operation"):
        MemoryPatch.from_dict(body["patches"][0], where="07 @patches")
    nodes = [MemoryNode.from_dict(n) for n in body["nodes"]]
    raw = body["patches"][0]
    unvalidated = MemoryPatch(
        id=raw["id"],
        operation=raw["operation"],
        target_ids=raw["target_ids"],
        new_node_ids=raw["new_node_ids"],
        reason=raw["reason"],
        new_content=raw["new_content"],
        source=Source(label="x"),
        confidence=1.0,
        resolution_policy=raw["resolution_policy"],
        created_at=raw["created_at"],
        applied_at=raw["applied_at"],
    )
    with pytest.raises(UnknownPatchOperationError, match="archive"):
        effective_view(nodes, [unvalidated])
