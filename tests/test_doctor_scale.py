"""`cclg doctor` on a store of many memories (issue 17): each node file is read once and dropped once
checked, so nothing it reports may depend on every node being held at the end.

The damage is spread among hundreds of healthy memories: a relation naming a missing memory, a
superseded memory made live again by hand, a content hash that no longer matches, memories no write
accounts for (one of them rescued by a whole but unterminated last line of the audit log), and each
finding must come exactly once, with nothing else reported.
"""

from __future__ import annotations

import json
import tracemalloc
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cclg.core.store import Store
from cclg.intake.new_memories import import_jsonl
from cclg.ledger import writer
from cclg.maintenance import doctor

HEALTHY = 400


def seed(store: Store, count: int, words: int = 8) -> list[str]:
    lines = [
        json.dumps({"content": f"memory {i}: " + " ".join(f"w{i}x{j}" for j in range(words)), "source": "test"})
        for i in range(count)
    ]
    return import_jsonl(store, "\n".join(lines).encode()).memory_ids


def edit(store: Store, node_id: str, change: Callable[[dict[str, Any]], object]) -> Path:
    path = store.node_path(node_id)
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2))
    return path


def copy_as(store: Store, node_id: str, new_id: str) -> None:
    """A memory file no patch names and no audit record mentions (a write killed before its patch)."""
    data = json.loads(store.node_path(node_id).read_text())
    data["id"] = new_id
    store.node_path(new_id).write_text(json.dumps(data, indent=2))


def test_damage_among_many_healthy_memories_is_each_reported_once(store: Store) -> None:
    ids = seed(store, HEALTHY)
    old = ids[7]
    newer = writer.apply_patch(store, "supersede", [old], reason="newer", contents=["memory 7, corrected"])
    replacement = newer.new_nodes[0].id
    assert doctor.diagnose(store).findings == []

    missing = "mem_01zzzzzzzzzzzzzzzzzzzzzzzz"
    edit(store, ids[100], lambda d: d["relations"]["refines"].append(missing))
    edit(store, old, lambda d: d.update(status="active"))  # superseded, made live again by hand
    edit(store, ids[250], lambda d: d.update(content=d["content"] + " (edited by hand)"))
    orphan, rescued = "mem_01yyyyyyyyyyyyyyyyyyyyyyyy", "mem_01xxxxxxxxxxxxxxxxxxxxxxxx"
    copy_as(store, ids[300], orphan)
    copy_as(store, ids[301], rescued)
    with store.audit_path.open("ab") as log:  # whole, but its newline never written
        log.write(json.dumps({"event": "node_written", "node_id": rescued}).encode())

    report = doctor.diagnose(store)

    found = Counter((f.check, f.path) for f in report.findings)
    assert found == Counter(
        {
            (doctor.RELATIONS, f"nodes/{ids[100]}.json"): 1,
            (doctor.SUPERSEDES, f"nodes/{replacement}.json"): 1,
            (doctor.LEDGER, f"nodes/{old}.json"): 1,
            (doctor.HASH, f"nodes/{ids[250]}.json"): 1,
            (doctor.ORPHAN, f"nodes/{orphan}.json"): 1,
            (doctor.LOGS, "audit/memory_audit.jsonl"): 1,
        }
    )
    messages = {f.check: f.message for f in report.findings}
    assert missing in messages[doctor.RELATIONS]
    assert f"supersedes {old}, which is still active" in messages[doctor.SUPERSEDES]
    assert "does not match the content" in messages[doctor.HASH]
    assert report.counts["nodes"] == HEALTHY + 3
    assert report.counts["patches"] == 2
    assert sorted(report.refreshed) == sorted(
        f"nodes/{i}.json" for i in (ids[100], old, ids[250], orphan, rescued)
    )  # the index re-read what was changed by hand, and agrees with the files again
    assert doctor.diagnose(store).findings == report.findings  # nothing it checks depends on a first run


def test_doctor_holds_no_more_than_a_little_of_each_memory(store: Store) -> None:
    """Memory used while checking grows with the number of memories, not with their text."""
    seed(store, 300, words=800)  # about 6 KB of content each, twice over in the file
    on_disk = sum(p.stat().st_size for p in (store.root / "nodes").iterdir())
    tracemalloc.start()
    try:
        report = doctor.diagnose(store)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert report.ok, report.findings
    assert report.counts["nodes"] == 300
    assert peak < on_disk / 4, f"doctor held {peak} bytes at its peak for {on_disk} bytes of memories"
