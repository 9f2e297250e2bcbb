"""`cclg doctor` and `cclg validate`: find everything wrong with a store, all at once.

``diagnose`` runs every check of the contract's ``[validation]`` table, plus the
content hashes, a replay of the patch ledger (a node whose status disagrees with
its patches was edited around the lattice, or a patch was interrupted), memories
that no patch accounts for (left by a write killed before its patch), creates
killed before all their files were named, the health of the logs (unreadable
lines, torn last lines), temp files left by killed writers, and files in the
record folders that are no records (a sync tool's conflict copies). It never
writes the store's files; it brings the disposable search index up to date (every
file that changed since the index saw it is re-read, and a damaged index is
rebuilt) and says which entries it refreshed. ``repair`` fixes what can be fixed
without judgement: it sets torn log tails aside, removes orphan temp files, moves
the leftovers of unfinished writes to ``recovered/``, and gives nodes the status
their patches say they have.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cclg import format as fmt
from cclg import staging
from cclg.errors import CclgError, UnknownPatchOperationError, ValidationError
from cclg.files import read_jsonl
from cclg.ids import content_hash, parse_time
from cclg.index import Index, connect, discard_damaged, is_damage, rebuild_index
from cclg.install import check_installation
from cclg.lattice import LIVE_STATUSES, RULES
from cclg.ledger import link_replacements
from cclg.records import MemoryEdge, MemoryNode, MemoryPatch, Session
from cclg.store import HOOK_FAILURES, INDEX_FILE, Store, audit_record, patch_order
from cclg.view import effective_view, expected_statuses, retired_ids, undone_patch_ids

CHECKS = dict(enumerate(fmt.DOCTOR_CHECKS))
SCHEMA = CHECKS[0]
SOURCE = CHECKS[1]
RELATIONS = CHECKS[2]
PATCH_IDS = CHECKS[3]
EDGE_IDS = CHECKS[4]
SUPERSEDES = CHECKS[5]
SUPPRESSED = CHECKS[6]
HASH = "content hash matches content"
LEDGER = "node status agrees with the patch ledger"
LOGS = "logs hold whole JSON lines"
TEMP = "no temp files left by interrupted writes"
ORPHAN = "no leftovers of a write that never committed"
STRAY = "record folders hold only records"
INDEX = "the search index agrees with the files"
HOOKS = "no hook failures in the last 24 hours"
INSTALL = "installed hooks can run"

PARSERS: dict[str, Any] = {
    fmt.NODE_SCHEMA: MemoryNode.from_dict,
    fmt.PATCH_SCHEMA: MemoryPatch.from_dict,
    fmt.EDGE_SCHEMA: MemoryEdge.from_dict,
    fmt.SESSION_SCHEMA: Session.from_dict,
}
FOLDER_SCHEMA = {
    "nodes": fmt.NODE_SCHEMA,
    "patches": fmt.PATCH_SCHEMA,
    "edges": fmt.EDGE_SCHEMA,
    "sessions": fmt.SESSION_SCHEMA,
}


@dataclass
class Finding:
    check: str
    path: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"check": self.check, "path": self.path, "message": self.message}


@dataclass
class Report:
    root: str
    counts: dict[str, int]
    findings: list[Finding]
    refreshed: list[str] = field(default_factory=list)  # search index entries re-read from their files

    @property
    def ok(self) -> bool:
        return not self.findings

    def to_dict(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "ok": self.ok,
            "counts": self.counts,
            "findings": [f.to_dict() for f in self.findings],
            "refreshed": self.refreshed,
        }


def _load(store: Store, folder: str, findings: list[Finding]) -> list[Any]:
    records = []
    parse = PARSERS[FOLDER_SCHEMA[folder]]
    for path in store.record_files(folder):
        where = store.relative(path)
        try:
            data = json.loads(path.read_bytes())
        except (ValueError, UnicodeDecodeError) as exc:
            findings.append(Finding(SCHEMA, where, f"not valid JSON: {exc}"))
            continue
        try:
            record = parse(data, where)
        except ValidationError as exc:
            findings.extend(Finding(SCHEMA, where, p.removeprefix(f"{where}: ")) for p in exc.problems)
            continue
        if path.stem != record.id:
            findings.append(
                Finding(SCHEMA, where, f"holds id {record.id!r}, not the id its file name says (a copy?); ignored")
            )
            continue
        records.append(record)
    return records


def diagnose(store: Store) -> Report:
    """Every finding about ``store``; an empty list means the store is healthy. An import a killed
    writer left past its commit point is finished first (``cclg.staging``), as every command does."""
    staging.finish(store)
    findings: list[Finding] = []
    nodes: dict[str, MemoryNode] = {n.id: n for n in _load(store, "nodes", findings)}
    patches: list[MemoryPatch] = _load(store, "patches", findings)
    edges: list[MemoryEdge] = _load(store, "edges", findings)
    sessions: list[Session] = _load(store, "sessions", findings)
    patch_ids = {p.id for p in patches}
    for node_id, why in unaccounted(store, nodes, patches).items():
        message = f"{why}; `cclg doctor --repair` moves it to recovered/"
        findings.append(Finding(ORPHAN, f"nodes/{node_id}.json", message))
    for node in nodes.values():
        findings.extend(_node_findings(node, nodes))
    for patch in patches:
        findings.extend(_patch_findings(patch, nodes, patch_ids))
    for edge in edges:
        findings.extend(_edge_findings(edge, nodes, patch_ids))
    findings.extend(_ledger_findings(nodes, patches))
    findings.extend(_hook_findings(store))
    findings.extend(Finding(INSTALL, path, message) for path, message in check_installation())
    refreshed: list[str] = []
    if store.index_path.exists():
        readable = {f"nodes/{i}" for i in nodes} | {f"patches/{p.id}" for p in patches}
        refreshed, stale = _index_health(store, readable)
        findings.extend(stale)
    findings.extend(_log_findings(store))
    for path in store.orphan_temp_files():
        message = "left by a write that was killed; the next write (or `cclg doctor --repair`) finishes or removes it"
        findings.append(Finding(TEMP, store.relative(path), message))
    findings.extend(_stray_findings(store))
    counts = {
        "nodes": len(nodes),
        "patches": len(patches),
        "edges": len(edges),
        "sessions": len(sessions),
        "raw": len(store.raw_files()),
    }
    return Report(root=str(store.root), counts=counts, findings=findings, refreshed=refreshed)


def unaccounted(store: Store, nodes: dict[str, MemoryNode], patches: list[MemoryPatch]) -> dict[str, str]:
    """The nodes that no write accounts for, each with why: no patch names them, no audit record
    says they were written (an import's nodes come without a patch, with that record), and this
    implementation wrote them, for a patch that never reached disk (``metadata.patch_id``) or at
    all (``metadata.content_hash``). A node with neither is left alone: the reference
    implementation writes memories without patches, and its stores must stay healthy here."""
    named = {n for p in patches for n in (*p.new_node_ids, *p.target_ids, *p.prior_states)}
    patch_ids = {p.id for p in patches}
    suspects = {}
    for node in nodes.values():
        patch_id = node.metadata.get("patch_id")
        if node.id in named:
            continue
        if isinstance(patch_id, str) and patch_id not in patch_ids:
            suspects[node.id] = f"written for patch {patch_id}, which never reached disk (an interrupted patch)"
        elif node.stored_hash is not None:
            suspects[node.id] = "no patch created it and no audit record says it was written (a write killed early)"
    if suspects:
        for node_id in _audited(store, "node_written", "node_id") & suspects.keys():
            del suspects[node_id]
    return suspects


def _audited(store: Store, event: str, field_name: str) -> set[str]:
    """The ``field_name`` of every ``event`` record in the audit log (the ids of the nodes it says were
    written, say)."""
    found: set[str] = set()
    try:
        data = store.audit_path.read_bytes()
    except FileNotFoundError:
        return found
    marker = f'"{event}"'.encode()
    for line in data.split(b"\n"):
        if marker not in line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("event") == event:
            found.add(str(record.get(field_name)))
    return found


def unfinished_creates(store: Store, patches: list[MemoryPatch]) -> list[MemoryPatch]:
    """The ``create`` patches of this store that never finished: nodes missing, and no audit record
    of the patch (written last, by the ledger and by imports alike). A create killed after its patch
    (``cclg.ledger._write_new``) left staged files that the next process to take the store lock
    names, so these lost theirs."""
    missing = [
        p for p in patches if p.operation == "create" and not all(store.node_path(n).exists() for n in p.new_node_ids)
    ]
    audited = _audited(store, "patch_written", "patch_id") if missing else set()
    return [p for p in missing if p.id not in audited]


def _stray_findings(store: Store) -> list[Finding]:
    found = []
    for folder in FOLDER_SCHEMA:
        for path in store.stray_files(folder):
            kind = "a folder" if path.is_dir() else "a file"
            message = (
                f"{kind} whose name is not <id>.json (a sync tool's conflict copy?), ignored by every command; "
                "merge what it holds by hand, then remove it"
            )
            found.append(Finding(STRAY, store.relative(path), message))
    return found


def _node_findings(node: MemoryNode, nodes: dict[str, MemoryNode]) -> list[Finding]:
    where = f"nodes/{node.id}.json"
    found = []
    stored = node.stored_hash
    if stored is not None and stored != content_hash(node.content):
        found.append(
            Finding(
                HASH,
                where,
                f"metadata.content_hash {stored} does not match the content "
                f"({content_hash(node.content)}): content changed by hand?",
            )
        )
    if node.status == "active" and not node.source.label and not node.source.raw_spans:
        found.append(Finding(SOURCE, where, "active memory has neither a source label nor a raw span"))
    for kind, ids in node.relations.items():
        for other in ids:
            if other not in nodes:
                found.append(Finding(RELATIONS, where, f"relations.{kind} names {other}, which does not exist"))
    if node.status in LIVE_STATUSES:
        for old in node.relations["supersedes"]:
            if old in nodes and nodes[old].status in LIVE_STATUSES:
                found.append(Finding(SUPERSEDES, where, f"supersedes {old}, which is still {nodes[old].status}"))
    return found


def _patch_findings(patch: MemoryPatch, nodes: dict[str, MemoryNode], patch_ids: set[str]) -> list[Finding]:
    where = f"patches/{patch.id}.json"
    found = []
    for field_name in ("target_ids", "new_node_ids"):
        for node_id in getattr(patch, field_name):
            if node_id not in nodes:
                message = f"{field_name} names {node_id}, which does not exist"
                if patch.operation == "create":
                    message += (
                        " (an interrupted create? the next write finishes it, or `cclg doctor --repair` undoes it)"
                    )
                found.append(Finding(PATCH_IDS, where, message))
    if patch.rollback_of and patch.rollback_of not in patch_ids:
        found.append(Finding(PATCH_IDS, where, f"rollback_of names {patch.rollback_of}, which does not exist"))
    return found


def _edge_findings(edge: MemoryEdge, nodes: dict[str, MemoryNode], patch_ids: set[str]) -> list[Finding]:
    where = f"edges/{edge.id}.json"
    found = []
    for end, node_id in (("from", edge.from_id), ("to", edge.to_id)):
        if node_id not in nodes:
            found.append(Finding(EDGE_IDS, where, f"'{end}' names {node_id}, which does not exist"))
    if edge.source_patch_id is not None and edge.source_patch_id not in patch_ids:
        found.append(
            Finding(
                EDGE_IDS,
                where,
                f"source_patch_id names {edge.source_patch_id}, which does not exist "
                "(an interrupted patch? `cclg doctor --repair` moves such edges to recovered/)",
            )
        )
    return found


def _ledger_findings(nodes: dict[str, MemoryNode], patches: list[MemoryPatch]) -> list[Finding]:
    findings = []
    try:
        expected = expected_statuses(nodes, patches)
        retired = retired_ids(patches)
    except UnknownPatchOperationError as exc:
        return [Finding(LEDGER, "patches/", str(exc))]
    for node_id, allowed in expected.items():
        node = nodes.get(node_id)
        if node is not None and node.status not in allowed:
            findings.append(
                Finding(
                    LEDGER,
                    f"nodes/{node_id}.json",
                    f"status is {node.status} but its patches leave it "
                    f"{' or '.join(sorted(allowed))}: edited by hand or an interrupted patch "
                    "(`cclg doctor --repair` restores the ledger's status)",
                )
            )
    overlays = {n.scope.session for n in nodes.values() if n.status == "active_session" and n.scope.session}
    session_ids = [None, *sorted(overlays)]
    for session_id in session_ids:
        for node in effective_view(nodes.values(), patches, session_id=session_id):
            if node.id in retired or node.status not in LIVE_STATUSES:
                findings.append(
                    Finding(SUPPRESSED, f"nodes/{node.id}.json", "a retired memory would be served as current truth")
                )
    return findings


def _index_health(store: Store, readable: set[str]) -> tuple[list[str], list[Finding]]:
    """(what the index re-read: every file that changed since it saw it, or the whole index when it
    was damaged; where it still disagrees with the files). ``readable``: see ``_index_findings``."""
    refreshed: list[str] = []
    index = connect(store)
    try:
        if index.damage:
            refreshed.append(f"{INDEX_FILE}: {index.damage}")
        try:
            changed = index.refresh_all()
            findings = _index_findings(store, index, readable)
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                raise
            index.close()
            refreshed.append(f"{INDEX_FILE}: {discard_damaged(store, exc)}")
            index = connect(store)
            changed, findings = [], _index_findings(store, index, readable)
    finally:
        index.close()
    # An unreadable file is left out of the index each time it is looked at: it is no refresh.
    refreshed += [e for e in changed if e[:-5] in readable or not (store.root / e).exists()]
    return refreshed, findings


def _index_findings(store: Store, index: Index, readable: set[str] | None = None) -> list[Finding]:
    """Where the search index disagrees with the files (it never changes them; repair rebuilds it).

    ``readable``: the ``folder/id`` of the records that parse; the index leaves the
    others out by design (they are reported as such), so their absence is no finding.
    """
    problems = []
    for folder in ("nodes", "patches"):
        on_disk = {p.stem: p.stat() for p in store.record_files(folder)}
        indexed = {row[0]: (row[1], row[2]) for row in index.db.execute(f"SELECT id, mtime_ns, size FROM {folder}")}
        for record_id, info in on_disk.items():
            if readable is not None and f"{folder}/{record_id}" not in readable and record_id not in indexed:
                continue
            if indexed.get(record_id) != (info.st_mtime_ns, info.st_size):
                state = "stale" if record_id in indexed else "missing"
                problems.append(f"{folder}/{record_id}.json is {state} in it")
        problems += [f"it still lists {folder}/{i}.json, which is gone" for i in indexed if i not in on_disk]
    if not problems:
        return []
    more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
    message = "the search index disagrees with the files: " + "; ".join(problems[:3]) + more
    return [Finding(INDEX, INDEX_FILE, message + "; `cclg reindex` or `cclg doctor --repair` rebuilds it")]


def _hook_findings(store: Store) -> list[Finding]:
    """Recent failures of cclg-hook, which fails open and so can only report here."""
    log = store.hook_failures_path
    since = datetime.now(UTC) - timedelta(hours=24)
    recent = []
    for record in read_jsonl(log).records:
        try:
            if parse_time(str(record.get("created_at"))) >= since:
                recent.append(record)
        except ValueError:
            continue
    if not recent:
        return []
    last = str(recent[-1].get("error", "")).strip().splitlines()
    return [
        Finding(
            HOOKS,
            HOOK_FAILURES,
            f"{len(recent)} hook call(s) failed and returned no context; the last "
            f"({recent[-1].get('event')}, {recent[-1].get('created_at')}): {last[-1] if last else '?'}",
        )
    ]


def _log_findings(store: Store) -> list[Finding]:
    findings = []
    for log in store.logs():
        where = store.relative(log)
        contents = read_jsonl(log)
        for number, problem in contents.bad_lines:
            findings.append(Finding(LOGS, where, f"line {number}: {problem}"))
        if contents.torn_tail:
            findings.append(
                Finding(
                    LOGS,
                    where,
                    f"the last line ({len(contents.torn_tail)} bytes) has no newline: "
                    "left by a killed writer; `cclg doctor --repair` sets it aside",
                )
            )
    return findings


def repair(store: Store) -> list[str]:
    """Fix what needs no judgement; returns what was done.

    Torn log lines and orphan temp files are set aside; what an unfinished write
    left (a create whose files were not all named, with what it wrote; nodes no
    patch accounts for; edges of a patch that never reached disk) is moved to
    ``recovered/``; nodes whose status disagrees with their patches get the status
    (and ``superseded_by`` links) the ledger gives them; the search index re-reads
    what changed.
    """
    actions = staging.finish(store) + store.recover()
    with store.lock():
        # Unreadable records are reported by diagnose and left as they are: repair
        # works around them rather than giving up on the rest of the store.
        unreadable: list[Finding] = []
        nodes = {n.id: n for n in _load(store, "nodes", unreadable)}
        patches = sorted(_load(store, "patches", unreadable), key=patch_order)
        fixed = _set_aside_unfinished(store, nodes, patches)
        for node_id, why in sorted(unaccounted(store, nodes, patches).items()):
            moved = store.set_aside(store.node_path(node_id))
            del nodes[node_id]
            fixed.append(f"moved {node_id} ({why}) to {moved}")
        patch_ids = {p.id for p in patches}
        for edge in _load(store, "edges", unreadable):
            if edge.source_patch_id is not None and edge.source_patch_id not in patch_ids and edge.from_id not in nodes:
                moved = store.set_aside(store.edge_path(edge.id))
                fixed.append(f"moved {edge.id}, written for the unfinished patch {edge.source_patch_id}, to {moved}")
        fixed += _replay_statuses(store, nodes, patches)
        if fixed:
            store.audit_many([audit_record("repair_applied", actions=fixed)])
        if store.index_path.exists():
            readable = {f"nodes/{i}" for i in nodes} | {f"patches/{p.id}" for p in patches}
            refreshed, stale = _index_health(store, readable)
            fixed += [f"refreshed the search index: {entry}" for entry in refreshed]
            if stale:
                rebuild_index(store)
                fixed.append("rebuilt the search index from the files")
    return actions + fixed


def _set_aside_unfinished(store: Store, nodes: dict[str, MemoryNode], patches: list[MemoryPatch]) -> list[str]:
    """Move each unfinished create (``unfinished_creates``) to ``recovered/`` with the nodes it wrote
    (those no other patch names and no audit record says were written): all or nothing. ``nodes``
    and ``patches`` lose what was moved."""
    fixed = []
    for patch in unfinished_creates(store, patches):
        patches.remove(patch)
        named = {n for p in patches for n in (*p.new_node_ids, *p.target_ids, *p.prior_states)}
        named |= _audited(store, "node_written", "node_id")
        written = [n for n in patch.new_node_ids if store.node_path(n).exists() and n not in named]
        for node_id in written:
            store.set_aside(store.node_path(node_id))
            nodes.pop(node_id, None)
        moved = store.set_aside(store.patch_path(patch.id))
        fixed.append(
            f"moved the unfinished create {patch.id} to {moved}, with the {len(written)} of its "
            f"{len(patch.new_node_ids)} memories that were written"
        )
    return fixed


def _replay_statuses(store: Store, nodes: dict[str, MemoryNode], patches: list[MemoryPatch]) -> list[str]:
    """Give each node whose status disagrees with the ledger the one status the ledger leaves it."""
    fixed = []
    expected = expected_statuses(nodes, patches)
    undone = undone_patch_ids(patches)
    for node_id, allowed in sorted(expected.items()):
        target = nodes.get(node_id)
        if target is None or target.status in allowed or len(allowed) != 1:
            continue
        (status,) = allowed
        target.status = status
        retiring = [
            p
            for p in patches
            if node_id in p.target_ids and p.id not in undone and RULES[p.operation].target_status == status
        ]
        if retiring:
            link_replacements(target, [nodes[n] for n in retiring[-1].new_node_ids if n in nodes])
        store.write_node(target)
        fixed.append(f"set {node_id} to {status}, as its patches say")
    return fixed


def validate_paths(paths: list[Path]) -> tuple[int, list[Finding]]:
    """Check record files (folders are searched for ``*.json``). Returns (files checked, findings)."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*.json") if not p.name.startswith(".")))
        else:
            files.append(path)
    findings = []
    for path in files:
        where = str(path)
        try:
            data = json.loads(path.read_bytes())
        except FileNotFoundError:
            findings.append(Finding(SCHEMA, where, "no such file"))
            continue
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            findings.append(Finding(SCHEMA, where, f"not valid JSON: {exc}"))
            continue
        schema = data.get("schema_version") if isinstance(data, dict) else None
        parse = PARSERS.get(schema) if isinstance(schema, str) else None
        if parse is None:
            if schema == fmt.STORE_SCHEMA:
                continue
            findings.append(Finding(SCHEMA, where, f"schema_version {schema!r} is not a record of {fmt.FORMAT_ID}"))
            continue
        try:
            parse(data, where)
        except CclgError as exc:
            problems = exc.problems if isinstance(exc, ValidationError) else [str(exc)]
            findings.extend(Finding(SCHEMA, where, p.removeprefix(f"{where}: ")) for p in problems)
    return len(files), findings
