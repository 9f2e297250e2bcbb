"""Sources kept in step with the store, as patches: ``cclg sources add|list|remove|sync`` and ``cclg import``.

The registry (``Store.sources_path``) lists each source (kind, location) and what its last sync read:
per item, its key, file, lines, text and the memory it became. A sync reads the source again
(``cclg.intake.source_kinds``) and matches the items it finds with those it read last time
(``match_items``): the same text in the same file is the same item wherever it moved; then the same
record id; then, in the same file, the most alike text (a changed line). Then, under the store lock:

- a new item is a new memory (one ``create`` patch for all of a source's new items), with its file
  kept in ``raw/`` (secrets redacted, line numbers kept) and its span as evidence; content already
  current in its scope is not written again (that memory is the item's), thrown-out content is refused;
- a changed item is a ``refine`` of its memory (``supersede`` when only its record id matched), so the
  file's history is the memory's lineage (``cclg log --lineage``);
- a removed item expires its memory (one ``expire`` patch);
- nothing is written when nothing changed, not even the registry.

A memory the user changed in cclg (a patch not made by the sync: refined, forgotten, rolled back) is
theirs: the sync never writes over it. While the file says otherwise it is a conflict
(``source_conflicts``, also shown by ``cclg conflicts``); when the file comes to say what the
memory says, the sync follows the user's version. Items holding a secret are refused and reported.

``changed_sources`` is the hook's cheap check: a stat of each file of the sources under a folder.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cclg.core import media, secrets
from cclg.core.fields import parse_json
from cclg.core.ids import normalize_text, now_iso
from cclg.core.records import MemoryNode, Scope, Source
from cclg.core.repository import git_project
from cclg.core.store import Store
from cclg.errors import CclgError, NotFoundError, UsageError
from cclg.intake.source_items import SourceItem
from cclg.intake.source_kinds import SourceKind, source_kind
from cclg.ledger.lattice import LIVE_STATUSES
from cclg.ledger.staging import finish

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cclg.ledger.index import Index

REGISTRY_SCHEMA = "cclg.sources.v1"
SIMILAR = 0.6  # how alike (difflib ratio) an item's old and new text must be to count as one item changed
SAME_KEY_BONUS = 0.1  # a candidate under the same headings (or record) is preferred


# ---------------------------------------------------------------- the registry


def load_registry(store: Store) -> dict[str, Any]:
    """The registry: ``{"schema", "sources": [...]}`` (empty when no source was added)."""
    try:
        data = parse_json(store.sources_path.read_bytes())
    except FileNotFoundError:
        return {"schema": REGISTRY_SCHEMA, "sources": []}
    except ValueError as exc:
        raise UsageError(f"{store.sources_path} is not valid JSON ({exc}); fix or remove it") from None
    if not isinstance(data, dict) or data.get("schema") != REGISTRY_SCHEMA or not isinstance(data.get("sources"), list):
        raise UsageError(f"{store.sources_path} is not a cclg sources registry ({REGISTRY_SCHEMA})")
    return data


def save_registry(store: Store, registry: dict[str, Any]) -> None:
    store.write_file(store.sources_path, (json.dumps(registry, indent=1, ensure_ascii=False) + "\n").encode())


def _location(kind: SourceKind, path: str) -> str:
    if not kind.is_path:  # a plugin's id: it must be installed
        from cclg.intake.source_kinds import plugins

        installed = plugins()
        if path not in installed:
            raise UsageError(f"no source plugin {path!r}; installed: {', '.join(sorted(installed)) or 'none'}")
        return path
    resolved = Path(path).expanduser().resolve()
    if not resolved.exists():
        raise UsageError(f"{path}: no such file or folder")
    return str(resolved)


def source_id(kind: str, location: str) -> str:
    """A source's id: its kind and the start of the hash of its location (``claude-md-1a2b3c4d``)."""
    digest = hashlib.sha256(f"{kind}:{location}".encode()).hexdigest()
    return f"{kind}-{digest[:8]}"


def add_source(store: Store, kind_name: str, path: str) -> dict[str, Any]:
    """Register a source (``UsageError`` for an unknown kind or a missing path); an already registered
    one comes back as it is."""
    kind = source_kind(kind_name)
    location = _location(kind, path)
    with store.lock():
        registry = load_registry(store)
        entry_id = source_id(kind.name, location)
        for entry in registry["sources"]:
            if entry["id"] == entry_id:
                return dict(entry)
        entry = {"id": entry_id, "kind": kind.name, "path": location, "added_at": now_iso(), "files": {}, "items": []}
        registry["sources"].append(entry)
        save_registry(store, registry)
    return dict(entry)


def find_source(registry: dict[str, Any], name: str) -> dict[str, Any]:
    """The registered source with id ``name`` (or a unique prefix of it), or at the path ``name``."""
    sources: list[dict[str, Any]] = registry["sources"]
    exact = [e for e in sources if name in (e["id"], e["path"])]
    if not exact:
        resolved = str(Path(name).expanduser().resolve())
        exact = [e for e in sources if e["path"] == resolved] or [e for e in sources if e["id"].startswith(name)]
    if len(exact) == 1:
        return exact[0]
    if len(exact) > 1:
        raise UsageError(f"{name} names {len(exact)} sources; give its id ({', '.join(e['id'] for e in exact)})")
    raise NotFoundError(f"no source {name}; `cclg sources list` shows them")


def remove_source(store: Store, name: str) -> dict[str, Any]:
    """Stop keeping a source in step: its memories stay as they are (``cclg forget`` retires one)."""
    with store.lock():
        registry = load_registry(store)
        entry = find_source(registry, name)
        registry["sources"] = [e for e in registry["sources"] if e["id"] != entry["id"]]
        save_registry(store, registry)
    return {"id": entry["id"], "kind": entry["kind"], "path": entry["path"], "memories_kept": len(entry["items"])}


# ---------------------------------------------------------------- matching


def _norm(text: str) -> str:
    return normalize_text(text).strip()


@dataclass
class Matched:
    """Old items (as the registry keeps them) and new ones (``SourceItem``), paired by ``match_items``."""

    unchanged: list[tuple[dict[str, Any], SourceItem]] = field(default_factory=list)
    changed: list[tuple[dict[str, Any], SourceItem, float]] = field(default_factory=list)  # with their likeness
    removed: list[dict[str, Any]] = field(default_factory=list)
    added: list[SourceItem] = field(default_factory=list)


def match_items(old: list[dict[str, Any]], new: list[SourceItem]) -> Matched:
    """Pair ``old`` items with ``new`` ones: by the same text in the same file (wherever it moved), then
    the same record id, then the most alike text in the same file (``SIMILAR`` at least; the same key
    counts ``SAME_KEY_BONUS`` more); what is left was removed or added."""
    found = Matched()
    by_text: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for entry in old:
        by_text.setdefault((entry["file"], _norm(entry["content"])), []).append(entry)
    rest = []
    for item in new:
        twins = by_text.get((item.document.name, _norm(item.content)))
        if twins:
            found.unchanged.append((twins.pop(0), item))
        else:
            rest.append(item)
    left = [o for group in by_text.values() for o in group]
    by_record = {(o["file"], o["record_id"]): o for o in left if o.get("record_id")}
    unmatched = []
    for item in rest:
        other = by_record.pop((item.document.name, item.record_id), None) if item.record_id else None
        if other is not None:
            likeness = difflib.SequenceMatcher(None, _norm(other["content"]), _norm(item.content)).ratio()
            found.changed.append((other, item, likeness))
        else:
            unmatched.append(item)
    taken = {id(o) for o, _, _ in found.changed}
    left = [o for o in left if id(o) not in taken]
    pairs = _alike(left, unmatched)
    found.changed += pairs
    paired_old, paired_new = {id(o) for o, _, _ in pairs}, {id(n) for _, n, _ in pairs}
    found.removed = [o for o in left if id(o) not in paired_old]
    found.added = [n for n in unmatched if id(n) not in paired_new]
    return found


def _alike(old: list[dict[str, Any]], new: list[SourceItem]) -> list[tuple[dict[str, Any], SourceItem, float]]:
    """Greedy pairs of the most alike texts in the same file, each at least ``SIMILAR``."""
    scored = []
    for o in old:
        a = _norm(o["content"])
        for n in new:
            if n.document.name != o["file"]:
                continue
            matcher = difflib.SequenceMatcher(None, a, _norm(n.content))
            if matcher.real_quick_ratio() < SIMILAR or matcher.quick_ratio() < SIMILAR:
                continue
            ratio = matcher.ratio()
            if ratio >= SIMILAR:
                scored.append((ratio + (SAME_KEY_BONUS if n.key == o["key"] else 0.0), ratio, id(o), id(n), o, n))
    pairs, used_old, used_new = [], set(), set()
    for _, ratio, oid, nid, o, n in sorted(scored, key=lambda s: -s[0]):
        if oid not in used_old and nid not in used_new:
            used_old.add(oid)
            used_new.add(nid)
            pairs.append((o, n, ratio))
    return pairs


# ---------------------------------------------------------------- syncing


@dataclass
class SyncReport:
    """What one sync of one source did."""

    source: str
    kind: str
    created: list[str] = field(default_factory=list)
    refined: list[dict[str, str]] = field(default_factory=list)  # {"from", "to", "operation"}
    expired: list[str] = field(default_factory=list)
    unchanged: int = 0
    adopted: list[str] = field(default_factory=list)  # content already current: that memory is the item's
    refused: list[dict[str, str]] = field(default_factory=list)  # {"where", "why"}
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None

    @property
    def changed(self) -> bool:
        return bool(self.created or self.refined or self.expired or self.adopted)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "kind": self.kind,
            "new": self.created,
            "refined": self.refined,
            "expired": self.expired,
            "unchanged": self.unchanged,
            "adopted": self.adopted,
            "refused": self.refused,
            "conflicts": self.conflicts,
            "error": self.error,
        }


def read_source(entry: dict[str, Any]) -> list[SourceItem]:
    """The items of a registered source now, one per distinct text in each file (a repeated line is one item)."""
    kind = source_kind(entry["kind"])
    seen: set[tuple[str, str]] = set()
    items = []
    for item in kind.read(Path(entry["path"])):
        mark = (item.document.name, _norm(item.content))
        if mark not in seen:
            seen.add(mark)
            items.append(item)
    return items


def sync_sources(
    store: Store,
    names: list[str] | None = None,
    *,
    only_changed_under: str | None = None,
    lock_wait: float | None = None,
) -> list[SyncReport]:
    """Bring the registered sources (all, or those ``names`` names) up to date; a source that cannot be
    read is reported (``error``) and the others still sync. ``only_changed_under``: only the sources
    whose files under that folder changed since (``changed_sources``: what the hook asks for);
    ``lock_wait``: how long to wait for the store lock (a ``ConcurrencyError`` after)."""
    with store.lock() if lock_wait is None else store.lock(timeout=lock_wait):
        finish(store)
        registry = load_registry(store)
        entries = [find_source(registry, n) for n in names] if names else list(registry["sources"])
        if only_changed_under is not None:
            changed = {e["id"] for e in changed_sources(registry, only_changed_under)}
            entries = [e for e in entries if e["id"] in changed]
        results = [_sync_entry(store, entry) for entry in entries]
        if any(touched for _, touched in results):
            save_registry(store, registry)
    return [report for report, _ in results]


def _sync_entry(store: Store, entry: dict[str, Any]) -> tuple[SyncReport, bool]:
    """Sync one source (its registry ``entry`` updated in place); returns the report and whether the
    entry changed (new memories, or only its files' stats)."""
    report = SyncReport(entry["id"], entry["kind"])
    try:
        items = read_source(entry)
    except (CclgError, OSError) as exc:
        report.error = str(exc)
        return report, False
    files = _stats(entry, items)
    touched = files != entry.get("files")
    entry["files"] = files
    new_items = _sync_items(store, entry, items, report)
    if new_items != entry["items"]:
        entry["items"] = new_items
        entry["synced_at"] = now_iso()
        touched = True
    return report, touched


def _stats(entry: dict[str, Any], items: list[SourceItem]) -> dict[str, list[int]]:
    """(mtime_ns, size) of each file the source's items were read from: the hook's cheap check."""
    kind = source_kind(entry["kind"])
    if not kind.is_path:
        return {}
    base = Path(entry["path"])
    found = {}
    for name in sorted({i.document.name for i in items} | ({base.name} if base.is_file() else set())):
        path = base if base.is_file() and name == base.name else base / name
        try:
            stat = path.stat()
        except OSError:
            continue
        found[str(path)] = [stat.st_mtime_ns, stat.st_size]
    return found


@dataclass
class _Plan:
    """What one sync of a source writes."""

    create: list[tuple[SourceItem, MemoryNode]] = field(default_factory=list)
    refine: list[tuple[dict[str, Any], SourceItem, str]] = field(default_factory=list)  # old, new, operation
    expire: list[dict[str, Any]] = field(default_factory=list)
    kept: list[dict[str, Any]] = field(default_factory=list)  # registry items carried over as they are


def _sync_items(
    store: Store, entry: dict[str, Any], items: list[SourceItem], report: SyncReport
) -> list[dict[str, Any]]:
    """Match, decide and write one source's changes; returns its registry items after. The index is
    opened only when some item was added, changed or removed."""
    matched = match_items(entry["items"], items)
    plan = _Plan()
    for old, item in matched.unchanged:  # their text was checked when it was written
        report.unchanged += 1
        plan.kept.append({**old, "lines": list(item.lines), "key": item.key})
    added = [item for item in matched.added if _clean(item, report)]
    changed, removed = [], matched.removed
    for old, item, likeness in matched.changed:
        if _clean(item, report):
            changed.append((old, item, likeness))
        else:  # its memory keeps what the file said before
            plan.kept.append(old)
    if not (changed or removed or added):
        return sorted(plan.kept, key=_order)
    for old, item, likeness in changed:
        head, owned = memory_head(store, old["memory_id"])
        if owned:
            plan.refine.append((old, item, "refine" if likeness >= SIMILAR else "supersede"))
        elif head is not None and _norm(head.content) == _norm(item.content):
            report.adopted.append(head.id)
            plan.kept.append(_tracked(item, head.id))
        else:  # the user's version stands; the file's new text is what the conflict shows
            plan.kept.append(_tracked(item, old["memory_id"]))
    for old in removed:
        if memory_head(store, old["memory_id"])[1]:
            plan.expire.append(old)

    from cclg.ledger.index import healing  # the writing half, loaded only when something is to be written

    def write(index: Index) -> list[dict[str, Any]]:
        _plan_creates(store, index, entry, added, plan, report)
        return _write(store, index, entry, plan, report)

    return healing(store, write)


def _order(item: dict[str, Any]) -> tuple[str, int, str]:
    return (item["file"], item["lines"][0], item["key"])


def _clean(item: SourceItem, report: SyncReport) -> bool:
    """Whether ``item`` holds no secret; one that does is refused (reported with its place and rule)."""
    found = secrets.scan(item.content)
    if found:
        where = f"{item.document.name}:{item.lines[0]}-{item.lines[1]}"
        report.refused.append({"where": where, "why": f"holds {found[0].description} (rule {found[0].rule})"})
    return not found


def memory_head(store: Store, memory_id: str) -> tuple[MemoryNode | None, bool]:
    """The memory now standing for ``memory_id`` and whether the sync still owns it: the memory itself
    while it is current (owned); else the current version that replaced it, through the user's
    patches (not owned), or None when none did (forgotten, rolled back, expired by hand)."""
    seen: set[str] = set()
    node_id: str | None = memory_id
    first = True
    while node_id is not None and node_id not in seen:
        seen.add(node_id)
        try:
            node = store.read_node(node_id)
        except (NotFoundError, CclgError):
            return None, False
        if node.status in LIVE_STATUSES:
            return node, first
        first = False
        following = node.relations.get("superseded_by", [])
        node_id = following[-1] if following else None
    return None, False


def _tracked(item: SourceItem, memory_id: str) -> dict[str, Any]:
    return {
        "key": item.key,
        "file": item.document.name,
        "lines": list(item.lines),
        "content": item.content,  # a content field: a purge or a redaction of the store rewrites it here too
        "record_id": item.record_id,
        "memory_id": memory_id,
    }


def _plan_creates(
    store: Store, index: Index, entry: dict[str, Any], added: list[SourceItem], plan: _Plan, report: SyncReport
) -> None:
    """The new memories of ``added`` items; content already current in its scope is that memory's, and
    thrown-out content (forgotten, discarded, purged) is refused."""
    if not added:
        return
    from cclg.intake.new_memories import build_node, seen_content
    from cclg.ledger.writer import purged_contents

    kind = source_kind(entry["kind"])
    purged = purged_contents(store, index)
    projects: dict[str, str | None] = {}
    for item in added:
        node = build_node(
            item.content,
            source=_label(entry, item),
            type=item.type,
            scope=Scope(project=_project(entry, kind, item, projects)),
            tags=list(item.tags),
            created_by="source",
            trust=kind.trust,
        )
        existing, thrown_out = seen_content(store, index, node, purged)
        if existing is not None:
            report.adopted.append(existing.id)
            plan.kept.append(_tracked(item, existing.id))
        elif thrown_out is not None:
            where = f"{item.document.name}:{item.lines[0]}-{item.lines[1]}"
            report.refused.append({"where": where, "why": thrown_out})
        else:
            plan.create.append((item, node))


def _label(entry: dict[str, Any], item: SourceItem) -> str:
    return f"{entry['kind']}:{item.document.name}:{item.lines[0]}-{item.lines[1]}"


def _project(entry: dict[str, Any], kind: SourceKind, item: SourceItem, cache: dict[str, str | None]) -> str | None:
    """The project of an item: the one its tool scoped it by, else the repository holding its file."""
    if item.project:
        return str(item.project)
    if not kind.is_path:
        return None
    base = Path(entry["path"])
    folder = (base if base.is_dir() else base.parent) / Path(item.document.name).parent
    if kind.name == "claude-auto-memory":
        folder = _auto_memory_project(folder) or folder
    key = str(folder)
    if key not in cache:
        cache[key] = git_project(folder)
    return cache[key]


def _auto_memory_project(folder: Path) -> Path | None:
    """The repository a Claude Code project folder (``~/.claude/projects/-home-me-repo/memory``) names,
    when that folder exists (its name is the path with ``/`` spelt ``-``)."""
    name = folder.parent.name if folder.name == "memory" else folder.name
    if not name.startswith("-"):
        return None
    candidate = Path("/" + name[1:].replace("-", "/"))
    return candidate if candidate.is_dir() else None


def _write(store: Store, index: Index, entry: dict[str, Any], plan: _Plan, report: SyncReport) -> list[dict[str, Any]]:
    """Write the plan: the raw files its new versions cite, the create, each refine, the expire."""
    from cclg.ledger import writer

    after = list(plan.kept)
    documents: dict[str, tuple[str, str]] = {}  # name -> (raw name, raw text)
    if plan.create:
        nodes = []
        for item, node in plan.create:
            node.source.raw_spans = [_span(store, item, documents)]
            nodes.append(node)
        result = writer.create_nodes(
            store,
            nodes,
            reason=f"sources sync {entry['id']}",
            source=Source(label=f"sources:{entry['id']}"),
            new_content=lambda count: f"{count} items of {entry['kind']} {entry['path']}",
            index=index,
        )
        report.created = [n.id for n in nodes]
        after += [_tracked(item, node.id) for item, node in plan.create]
        assert result.patch is not None
    for old, item, operation in plan.refine:
        span = _span(store, item, documents)
        where = f"{item.document.name} lines {item.lines[0]}-{item.lines[1]}"
        result = writer.apply_patch(
            store,
            operation,
            [old["memory_id"]],
            contents=[item.content],
            reason=f"{entry['kind']} {where} changed (sources sync {entry['id']})",
            source=Source(label=f"sources:{entry['id']}", raw_spans=[span]),
        )
        new_id = result.new_nodes[0].id
        report.refined.append({"from": old["memory_id"], "to": new_id, "operation": operation})
        after.append(_tracked(item, new_id))
    if plan.expire:
        ids = [old["memory_id"] for old in plan.expire]
        files = ", ".join(sorted({old["file"] for old in plan.expire}))
        writer.apply_patch(
            store,
            "expire",
            ids,
            reason=f"removed from {files} (sources sync {entry['id']})",
            source=Source(label=f"sources:{entry['id']}"),
        )
        report.expired = ids
    return sorted(after, key=_order)


def _span(store: Store, item: SourceItem, documents: dict[str, tuple[str, str]]) -> dict[str, Any]:
    """The raw span of ``item``: its document kept in ``raw/`` once (secrets redacted, line numbers kept)
    and the characters of its lines there."""
    if item.document.name not in documents:
        text = secrets.redact(item.document.text, keep_lines=True)[0]
        data, name = text.encode("utf-8"), Path(item.document.name).name
        relative, _ = store.write_raw(data, name)
        raw_name = Path(relative).name
        if media.readable_text(data, raw_name) is None:  # a database's rows, rendered as text: say it is text
            store.write_raw_record(raw_name, data, "text/plain")
        documents[item.document.name] = (raw_name, text)
    raw_name, text = documents[item.document.name]
    starts = [0]
    for line in text.split("\n"):
        starts.append(starts[-1] + len(line) + 1)
    first, last = item.lines
    end = min(starts[min(last, len(starts) - 1)] - 1, len(text))
    return {
        "source_id": raw_name,
        "turn_id": None,
        "char_start": starts[first - 1],
        "char_end": max(end, starts[first - 1]),
    }


# ---------------------------------------------------------------- one-off imports, conflicts, the hook's check


def import_items(store: Store, kind_name: str, path: str) -> SyncReport:
    """``cclg import KIND PATH``: every item as a new memory (content already current in its scope is
    not written again), nothing kept in step."""
    kind = source_kind(kind_name)
    entry: dict[str, Any] = {"id": f"import-{kind.name}", "kind": kind.name, "path": _location(kind, path), "items": []}
    report = SyncReport(entry["id"], kind.name)
    with store.lock():
        finish(store)
        _sync_items(store, entry, read_source(entry), report)
    return report


def source_conflicts(store: Store) -> list[dict[str, Any]]:
    """Items whose memory the user changed in cclg while the file says otherwise: the file's text, the
    memory standing for it now (None when it was forgotten or rolled back) and where the item is."""
    found = []
    for entry in load_registry(store)["sources"]:
        for item in entry["items"]:
            head, owned = memory_head(store, item["memory_id"])
            if owned or (head is not None and _norm(head.content) == _norm(item["content"])):
                continue
            found.append(
                {
                    "source": entry["id"],
                    "where": f"{entry['path']} {item['file']}:{item['lines'][0]}-{item['lines'][1]}",
                    "file_says": item["content"],
                    "memory_id": None if head is None else head.id,
                    "memory_says": None if head is None else head.content,
                    "tracked": item["memory_id"],
                }
            )
    return found


def changed_sources(registry: dict[str, Any], folder: str) -> list[dict[str, Any]]:
    """The registered path sources with a file under ``folder`` whose size or time moved since the last
    sync (a stat per file; nothing is read)."""
    root = os.path.realpath(folder)
    changed = []
    for entry in registry["sources"]:
        files: dict[str, list[int]] = entry.get("files") or {}
        mine = [f for f in files if f == root or f.startswith(root + os.sep)]
        if entry["path"] != root and not entry["path"].startswith(root + os.sep) and not mine:
            continue
        for name in mine or [entry["path"]]:
            try:
                stat = os.stat(name)
            except OSError:
                changed.append(entry)
                break
            if [stat.st_mtime_ns, stat.st_size] != files.get(name):
                changed.append(entry)
                break
    return changed


def registry_summary(store: Store) -> list[dict[str, Any]]:
    """``cclg sources list``: each source with the count of items it tracks and when it last synced."""
    return [
        {
            "id": e["id"],
            "kind": e["kind"],
            "path": e["path"],
            "trust": source_kind(e["kind"]).trust,
            "items": len(e["items"]),
            "files": len(e.get("files") or {}),
            "added_at": e.get("added_at"),
            "synced_at": e.get("synced_at"),
        }
        for e in load_registry(store)["sources"]
    ]
