"""Compatibility with the reference implementation (cclg 0.2.3): its demo store.

Its conformance vectors are loaded as containers in ``tests/test_container.py``."""

from __future__ import annotations

import json

from cclg.core.records import Source
from cclg.core.store import Store
from cclg.intake.container import export_store, load_container
from cclg.ledger.view import effective_view
from cclg.maintenance.doctor import diagnose
from tests.conftest import DATA


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
    from cclg.ledger.writer import apply_patch

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


def test_our_export_of_the_reference_store_is_the_reference_container(reference_store: Store) -> None:
    """The reference implementation packed its demo store into ``reference-demo-store.cclg``;
    ours must write the same file (only the generation time differs), and read it back."""
    theirs = (DATA / "reference-demo-store.cclg").read_text("utf-8")
    ours = export_store(reference_store)

    def without_time(text: str) -> list[str]:
        lines = text.split("\n")
        header = json.loads(lines[1])
        del header["generated_at"]
        return [lines[0], json.dumps(header), *lines[2:]]

    assert without_time(ours) == without_time(theirs)
    container = load_container(theirs)
    store_view = effective_view(reference_store.load_nodes().values(), reference_store.load_patches())
    assert [n.id for n in container.effective_view()] == [n.id for n in store_view]
