"""Records arriving from a remote, taken into the store.

Each record is read strictly (a file that is no valid record, or whose id is not its name, is
refused), and what holds a secret or content this store purged is refused, with whatever depends on
it (the closure of ``cclg.sync.outgoing``), so nothing arrives half. A memory's trust is capped at the
remote's (``untrusted`` unless the user said ``trusted``), and only a trusted remote may bring a pinned
or required memory. Who wrote it stays in its provenance (``metadata.sync``: the remote, the git
author and commit of the sync that brought it to the remote, the id of the store it was written in),
which ``cclg cite`` shows.

The records are written as a patch is: the memories and edges of each patch staged, the patches
written, then the staged files named, so a sync killed in between is finished by the next process
that takes the store lock. Then the statuses the whole set of patches gives are settled
(``cclg.ledger.view.Ledger``) for every memory the new patches reach, and the search index is told.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cclg.core import labels
from cclg.core.fields import parse_json
from cclg.core.files import safe_name
from cclg.core.ids import content_hash, sha256_hex
from cclg.core.records import MemoryEdge, MemoryNode, MemoryPatch, dumps
from cclg.core.store import Store, audit_record
from cclg.errors import ValidationError
from cclg.ledger.index import COMPACT_AFTER, IndexChanges
from cclg.ledger.view import Ledger, touched_ids
from cclg.ledger.writer import foreign_patch, purged_contents
from cclg.sync.outgoing import ORIGIN, _close, patch_secret, withheld_reason
from cclg.sync.remotes import Remote

PROVENANCE = "sync"  # metadata: who and what brought a memory from a remote


class Arrived:
    """What a sync took in (``written``: counts by folder; ``refused``: path -> why)."""

    def __init__(self) -> None:
        self.written: dict[str, int] = {}
        self.refused: dict[str, str] = {}

    def to_dict(self) -> dict[str, Any]:
        return {"written": self.written, "refused": self.refused}


def _parse(clone: Path, path: str, arrived: Arrived) -> Any:
    kind, _, name = path.partition("/")
    parsers: dict[str, Any] = {
        "nodes": MemoryNode.from_dict,
        "patches": MemoryPatch.from_dict,
        "edges": MemoryEdge.from_dict,
    }
    parse = parsers[kind]
    try:
        record = parse(parse_json((clone / path).read_bytes()), where=path)
    except (ValidationError, ValueError, OSError) as exc:
        arrived.refused[path] = str(exc)
        return None
    if f"{record.id}.json" != name:
        arrived.refused[path] = f"its id {record.id} is not its file name"
        return None
    return record


def capped(node: MemoryNode, remote: Remote, author: tuple[str, str] | None) -> MemoryNode:
    """``node`` as this store keeps it: trust at most the remote's, a pin only from a trusted remote,
    and where it came from."""
    trust, _, retention = labels.labels_of(node.metadata)
    metadata = dict(node.metadata)
    metadata["trust"] = labels.least_trusted(trust, remote.trust)
    if remote.trust != "trusted":
        metadata.pop("pinned", None)
        if retention == "required":
            metadata["retention"] = labels.UNPINNED_RETENTION
    who, commit = author or ("", "")
    metadata[PROVENANCE] = {"remote": remote.name, "author": who, "commit": commit, "store": metadata.get(ORIGIN)}
    node.metadata = metadata
    return node


def take(store: Store, clone: Path, paths: list[str], remote: Remote, authors: dict[str, tuple[str, str]]) -> Arrived:
    """Take the records at ``paths`` of ``clone`` (which the store lacks) into the store, under its lock."""
    arrived = Arrived()
    with store.lock():
        nodes: dict[str, MemoryNode] = {}
        patches: dict[str, MemoryPatch] = {}
        edges: list[MemoryEdge] = []
        purged = purged_contents(store)
        for path in sorted(p for p in paths if p.startswith(("nodes/", "patches/", "edges/"))):
            if store.path_of(path).exists():
                continue
            record = _parse(clone, path, arrived)
            if isinstance(record, MemoryNode):
                why = withheld_reason(record)
                why = why or ("content this store purged" if content_hash(record.content) in purged else None)
                if why is None:
                    nodes[record.id] = capped(record, remote, authors.get(path))
                else:
                    arrived.refused[path] = why
            elif isinstance(record, MemoryPatch):
                if patch_secret(record):
                    arrived.refused[path] = "a secret"
                else:
                    patches[record.id] = foreign_patch(record)
            elif isinstance(record, MemoryEdge):
                edges.append(record)
        local = _local_names(store)
        maker = {n: p.id for p in patches.values() if p.operation != "rollback" for n in p.new_node_ids}
        maker.update(_local_makers(store, nodes, maker))
        nodes, patches = _close(local, nodes, patches, maker)
        _write(store, clone, paths, nodes, patches, edges, arrived)
        IndexChanges(store).changed(list(nodes), list(patches), compact=len(nodes) >= COMPACT_AFTER)
    return arrived


def _local_names(store: Store) -> set[str]:
    names: set[str] = set()
    for folder in ("nodes", "patches"):
        names.update(f"{folder}/{entry.name}" for entry in store.scan_records(folder)[0])
    return names


def _local_makers(store: Store, nodes: dict[str, MemoryNode], maker: dict[str, str]) -> dict[str, str]:
    """For arriving memories whose patch is here already (it came first): that patch."""
    found = {}
    for node_id, node in nodes.items():
        patch_id = node.metadata.get("patch_id")
        if node_id not in maker and isinstance(patch_id, str) and store.patch_path(patch_id).exists():
            found[node_id] = patch_id
    return found


def _write(
    store: Store,
    clone: Path,
    paths: list[str],
    nodes: dict[str, MemoryNode],
    patches: dict[str, MemoryPatch],
    edges: list[MemoryEdge],
    arrived: Arrived,
) -> None:
    """Raw evidence, then per patch its memories and edges staged, the patches, the staged files named."""
    records = []
    for path in paths:
        name = path[4:] if path.startswith("raw/") else ""
        if name and safe_name(name) == name and not store.path_of(path).exists():
            data = (clone / path).read_bytes()
            store.write_file(store.path_of(path), data, replace=False)
            arrived.written["raw"] = arrived.written.get("raw", 0) + 1
            digest = sha256_hex(data)
            records.append(audit_record("raw_written", path=path, sha256=digest, bytes=len(data), synced=True))
    of_patch: dict[str, list[tuple[Path, bytes]]] = {}
    for node in nodes.values():
        owner = next((p.id for p in patches.values() if node.id in p.new_node_ids), None)
        of_patch.setdefault(owner or "", []).append((store.node_path(node.id), dumps(node.to_dict())))
    for edge in edges:
        ok = edge.source_patch_id is None or edge.source_patch_id in patches or store.edge_path(edge.id).exists()
        there = all(n in nodes or store.node_path(n).exists() for n in (edge.from_id, edge.to_id))
        if ok and there and not store.edge_path(edge.id).exists():
            of_patch.setdefault(edge.source_patch_id or "", []).append(
                (store.edge_path(edge.id), dumps(edge.to_dict()))
            )
    mark(store, [n for p in patches.values() for n in touched_ids(p)])
    with store.batch():
        for target, data in of_patch.pop("", []):  # a memory whose patch is here already: named at once
            store.write_file(target, data, replace=False)
        staged = [(store.stage_file(to, data, pid), to) for pid, files in of_patch.items() for to, data in files]
        for patch in sorted(patches.values(), key=lambda p: p.id):
            store.write_patch(patch)
        store.make_durable()
        for temp, target in staged:
            store.publish_file(temp, target)
    records += [
        audit_record("patch_written", patch_id=p.id, operation=p.operation, synced=True) for p in patches.values()
    ]
    store.audit_many(records)  # the raw files' digests too: doctor checks their bytes
    edge_count = sum(1 for files in of_patch.values() for to, _ in files if to.parent.name == "edges")
    arrived.written.update(nodes=len(nodes), patches=len(patches), edges=edge_count)


def marked(store: Store) -> list[str]:
    """The memories waiting to be settled (``Store.sync_settle_path``)."""
    path = store.sync_settle_path
    if not path.is_file():
        return []
    data = parse_json(path.read_bytes())
    listed = data.get("nodes", []) if isinstance(data, dict) else []
    return [str(n) for n in listed]


def mark(store: Store, node_ids: list[str]) -> None:
    """Note (durably, before the records that change them are written) memories to settle: what patches
    arriving or leaving name. A sync killed before it settles them leaves the note for the next."""
    if node_ids:
        listed = sorted({*marked(store), *node_ids})
        store.write_file(store.sync_settle_path, (json.dumps({"nodes": listed}) + "\n").encode("utf-8"))


def settle(store: Store) -> list[str]:
    """Give each memory noted by ``mark``, and each the patches naming it reach, what the whole set of
    patches says of it (``Ledger.settle``: the same on every store holding the same set, whatever order
    the patches came in); the note goes. Locally written patches are settled too before they leave, so
    a rollback or a change made here over a memory in conflict ends as every other store will have it."""
    changed: list[str] = []
    with store.lock():
        reached = marked(store)
        if reached:
            ledger = Ledger(store.load_patches())
            around = set(reached)
            # Each patch once: an import names all its memories in one patch, and taking that patch's
            # names once per memory was quadratic (a first sync of 100,000 imported memories ran past 15 minutes).
            naming = {patch.id: patch for node_id in reached for patch in ledger.naming.get(node_id, ())}
            for patch in naming.values():
                around.update(touched_ids(patch))
            for conflict in ledger.conflicts:
                if conflict.node in around or around.intersection(conflict.flagged):
                    around.update(conflict.flagged)
            changed = [node_id for node_id in sorted(around) if settle_node(store, ledger, node_id)]
            IndexChanges(store).changed(changed, [])
        store.sync_settle_path.unlink(missing_ok=True)
    return changed


def settle_node(store: Store, ledger: Ledger, node_id: str) -> bool:
    """Rewrite one memory as the ledger settles it; whether it changed."""
    path = store.node_path(node_id)
    if not path.exists():
        return False
    node = store.read_node(node_id)
    settled = ledger.settle(node)
    before = (node.status, node.updated_at, node.relations["superseded_by"], node.relations["contradicts"])
    node.status = settled.status
    node.updated_at = settled.updated_at or node.updated_at
    node.relations["superseded_by"] = settled.superseded_by
    node.relations["contradicts"] = settled.contradicts
    if before == (node.status, node.updated_at, node.relations["superseded_by"], node.relations["contradicts"]):
        return False
    store.write_node(node)
    return True
