"""What may leave the machine for a remote, and in what form.

A memory travels when its scope is shared (a project, a workspace or an org: never a session's, never
the user's own global memories), its sensitivity is neither ``confidential`` nor ``restricted``, the
secret detector finds nothing in its text fields, it was not purged, and the patch that made it
travels. A patch travels when every memory it names does (or is on the remote already) and, for a
rollback, the patch it undoes does; an edge, when both its ends and its patch do. Raw evidence goes
only to a remote that asks for it (``raw``), only the files travelling memories cite, and only when
the detector finds nothing in them. Logs (the audit log, sessions) never travel.

A memory goes out in the form it was born with (``birth_form``): the status it had before any patch
changed it and only the links no patch made. The receiving store settles it from the patches it
holds (``cclg.ledger.view.Ledger``), so a file on the remote is written once and never changed, and
git never sees two versions of it. Every record is checked again, from the very bytes to be written,
right before it is written into the clone (``recheck``).
"""

from __future__ import annotations

from typing import Any

from cclg.core import labels, secrets
from cclg.core.fields import parse_json
from cclg.core.records import MemoryEdge, MemoryNode, MemoryPatch, dumps
from cclg.core.store import Store
from cclg.ledger.view import Ledger, touched_ids
from cclg.ledger.writer import PURGED, TEXT_FIELDS

WITHHELD_SENSITIVITY = ("confidential", "restricted")
LINKS_MADE_BY_PATCHES = ("superseded_by", "contradicts")  # settled by the receiver from the patches
ORIGIN = "sync_origin"  # metadata: the id of the store a synced memory was written in


class Item:
    """One file to write into the clone: its path there (``nodes/<id>.json``, ``raw/<name>``) and bytes."""

    def __init__(self, path: str, data: bytes) -> None:
        self.path = path
        self.data = data


class Outgoing:
    """What would go to a remote (``items``) and what stays, counted by why (``withheld``)."""

    def __init__(self) -> None:
        self.items: list[Item] = []
        self.withheld: dict[str, int] = {}

    def hold(self, why: str) -> None:
        self.withheld[why] = self.withheld.get(why, 0) + 1

    def counts(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for item in self.items:
            kind = item.path.partition("/")[0]
            found[kind] = found.get(kind, 0) + 1
        return found


def withheld_reason(node: MemoryNode) -> str | None:
    """Why ``node`` must not leave the machine, or None."""
    if node.scope.session or node.status in ("active_session", "pending_promotion"):
        return "session scope"
    if not (node.scope.project or node.scope.workspace or node.scope.org):
        return "not a shared scope (global)"
    if labels.labels_of(node.metadata)[1] in WITHHELD_SENSITIVITY:
        return f"sensitivity {labels.labels_of(node.metadata)[1]}"
    if PURGED in node.metadata:
        return "purged"
    records = {"scope": node.scope.to_dict(), "source": node.source.to_dict()}
    fields = {name: records[name] if name in records else getattr(node, name) for name in TEXT_FIELDS}
    if secrets.secrets_in(fields):
        return "a secret"
    return None


def patch_secret(patch: MemoryPatch) -> bool:
    fields = {"reason": patch.reason, "new_content": patch.new_content, "source": patch.source.to_dict()}
    return bool(secrets.secrets_in(fields))


def birth_form(node: MemoryNode, ledger: Ledger, travelling: set[str], origin: str) -> MemoryNode:
    """``node`` as it goes out: the status it was born with, the links no patch made (to travelling
    memories only), and the id of the store it was written in."""
    data = node.to_dict()
    out = MemoryNode.from_dict(data)
    out.status = ledger.birth(node)
    made = {n for p in ledger.naming.get(node.id, ()) if not ledger.made(p, node.id) for n in p.new_node_ids}
    for kind in LINKS_MADE_BY_PATCHES:
        out.relations[kind] = [n for n in out.relations.get(kind, []) if n not in made and n in travelling]
    if node.id in ledger.naming and out.status != node.status:
        out.updated_at = out.created_at
    out.metadata = {**out.metadata, ORIGIN: out.metadata.get(ORIGIN, origin)}
    return out


def _named_by(node: MemoryNode) -> set[str]:
    """The memories a node's own relations name (those it was made with)."""
    return {n for kind, ids in node.relations.items() if kind not in LINKS_MADE_BY_PATCHES for n in ids}


def select(store: Store, on_remote: set[str], *, raw: bool, origin: str) -> Outgoing:
    """What goes to a remote whose clone holds ``on_remote`` (paths such as ``nodes/<id>.json``)."""
    out = Outgoing()
    patches = store.load_patches()
    ledger = Ledger(patches)
    new_patches = {p.id: p for p in patches if f"patches/{p.id}.json" not in on_remote}
    candidates: dict[str, MemoryNode] = {}
    for path in store.record_files("nodes"):
        if f"nodes/{path.name}" in on_remote:
            continue
        node = store.read_node(path.stem)
        why = withheld_reason(node)
        if why is None:
            candidates[node.id] = node
        else:
            out.hold(why)
    for patch in list(new_patches.values()):
        if patch_secret(patch):
            out.hold("a secret")
            del new_patches[patch.id]
    maker = {n: p.id for p in patches if p.operation != "rollback" for n in p.new_node_ids}
    nodes, sent = _close(on_remote, candidates, new_patches, maker)
    out.withheld["memories held back with what they depend on"] = len(candidates) - len(nodes)
    travelling = set(nodes) | {name[6:-5] for name in on_remote if name.startswith("nodes/")}
    for node in sorted(nodes.values(), key=lambda n: n.id):
        out.items.append(Item(f"nodes/{node.id}.json", dumps(birth_form(node, ledger, travelling, origin).to_dict())))
    for patch_id in sorted(sent):
        out.items.append(Item(f"patches/{patch_id}.json", dumps(sent[patch_id].to_dict())))
    for path in store.record_files("edges"):
        if f"edges/{path.name}" in on_remote:
            continue
        edge = MemoryEdge.from_dict(parse_json(path.read_bytes()), where=store.relative(path))
        patch_ok = edge.source_patch_id is None or edge.source_patch_id in sent
        patch_ok = patch_ok or f"patches/{edge.source_patch_id}.json" in on_remote
        if edge.from_id in travelling and edge.to_id in travelling and patch_ok:
            out.items.append(Item(f"edges/{edge.id}.json", dumps(edge.to_dict())))
    if raw:
        out.items.extend(_raw_items(store, nodes.values(), on_remote, out))
    return out


def _close(
    on_remote: set[str], candidates: dict[str, MemoryNode], patches: dict[str, MemoryPatch], maker: dict[str, str]
) -> tuple[dict[str, MemoryNode], dict[str, MemoryPatch]]:
    """The largest part of ``candidates`` and ``patches`` that holds together: a memory with the patch
    that made it, a patch with every memory it names (and the patch a rollback undoes)."""
    nodes, sent = dict(candidates), dict(patches)

    def there(node_id: str) -> bool:
        return node_id in nodes or f"nodes/{node_id}.json" in on_remote

    def made(node_id: str) -> bool:
        patch_id = maker.get(node_id)
        return patch_id is not None and (patch_id in sent or f"patches/{patch_id}.json" in on_remote)

    changed = True
    while changed:
        changed = False
        for node_id, node in list(nodes.items()):
            if not made(node_id) or not all(there(n) for n in _named_by(node)):
                del nodes[node_id]
                changed = True
        for patch_id, patch in list(sent.items()):
            undone = patch.rollback_of
            undone_ok = undone is None or undone in sent or f"patches/{undone}.json" in on_remote
            if not undone_ok or not all(there(n) for n in touched_ids(patch)):
                del sent[patch_id]
                changed = True
    return nodes, sent


def _raw_items(store: Store, nodes: Any, on_remote: set[str], out: Outgoing) -> list[Item]:
    """The raw files the travelling memories cite, but for those holding a secret."""
    items, seen = [], set()
    for node in nodes:
        for span in node.source.raw_spans:
            name = str(span.get("source_id", ""))
            path = store.raw_file(name)
            if path is None or path.name in seen or f"raw/{path.name}" in on_remote:
                continue
            seen.add(path.name)
            data = path.read_bytes()
            if secrets.scan_bytes(data):
                out.hold("raw evidence with a secret")
                continue
            items.append(Item(f"raw/{path.name}", data))
    return items


def named_by_patch(item: Item) -> list[str]:
    """The memories the patch about to leave as ``item`` names."""
    return sorted(touched_ids(MemoryPatch.from_dict(parse_json(item.data), where=item.path)))


def recheck(item: Item, *, raw: bool) -> str | None:
    """Why the bytes about to be written into the clone must not go after all, or None: the record is read
    back from them and checked again (scope, sensitivity, secrets; raw evidence only when asked)."""
    kind = item.path.partition("/")[0]
    if kind == "raw":
        return None if raw and not secrets.scan_bytes(item.data) else "raw evidence"
    data = parse_json(item.data)
    if kind == "nodes":
        return withheld_reason(MemoryNode.from_dict(data, where=item.path))
    if kind == "patches":
        return "a secret" if patch_secret(MemoryPatch.from_dict(data, where=item.path)) else None
    if kind == "edges":
        MemoryEdge.from_dict(data, where=item.path)
        return None
    return "not a record"
