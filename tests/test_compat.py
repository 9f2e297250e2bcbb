"""Compatibility with the reference implementation (cclg 0.2.3): its demo store.

Its conformance vectors are loaded as containers in ``tests/test_container.py``."""

from __future__ import annotations

from cclg.doctor import diagnose
from cclg.ledger import effective_view
from cclg.records import Source
from cclg.store import Store


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
