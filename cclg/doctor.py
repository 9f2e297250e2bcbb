"""`cclg doctor` and `cclg validate`: find everything wrong with a store, all at once.

``diagnose`` runs every check of the contract's ``[validation]`` table, plus the
content hashes, a replay of the patch ledger (a node whose status disagrees with
its patches was edited around the lattice, or a patch was interrupted), the
health of the logs (unreadable lines, torn last lines) and temp files left by
killed writers. It never writes the store's files (opening the disposable search
index may bring it up to date). ``repair`` fixes what can be fixed
without judgement: it sets torn log tails aside, removes orphan temp files, and
gives nodes the status their patches say they have.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cclg import format as fmt
from cclg.errors import CclgError, UnknownPatchOperationError, ValidationError
from cclg.files import read_jsonl
from cclg.ids import content_hash, parse_time
from cclg.index import Index, connect
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
ORPHAN = "no leftovers of a patch that never reached disk"
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

    @property
    def ok(self) -> bool:
        return not self.findings

    def to_dict(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "ok": self.ok,
            "counts": self.counts,
            "findings": [f.to_dict() for f in self.findings],
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
            findings.append(Finding(SCHEMA, where, f"holds id {record.id!r}, not the id its file name says"))
        records.append(record)
    return records


def diagnose(store: Store) -> Report:
    """Every finding about ``store``; an empty list means the store is healthy."""
    findings: list[Finding] = []
    nodes: dict[str, MemoryNode] = {n.id: n for n in _load(store, "nodes", findings)}
    patches: list[MemoryPatch] = _load(store, "patches", findings)
    edges: list[MemoryEdge] = _load(store, "edges", findings)
    sessions: list[Session] = _load(store, "sessions", findings)
    patch_ids = {p.id for p in patches}
    for node in nodes.values():
        findings.extend(_node_findings(node, nodes, patch_ids))
    for patch in patches:
        findings.extend(_patch_findings(patch, nodes, patch_ids))
    for edge in edges:
        findings.extend(_edge_findings(edge, nodes, patch_ids))
    findings.extend(_ledger_findings(nodes, patches))
    findings.extend(_hook_findings(store))
    findings.extend(Finding(INSTALL, path, message) for path, message in check_installation())
    if store.index_path.exists():
        index = connect(store)
        try:
            readable = {f"nodes/{i}" for i in nodes} | {f"patches/{p.id}" for p in patches}
            findings.extend(_index_findings(store, index, readable))
        finally:
            index.close()
    findings.extend(_log_findings(store))
    for path in store.orphan_temp_files():
        findings.append(
            Finding(TEMP, store.relative(path), "left by a write that was killed; `cclg doctor --repair` removes it")
        )
    counts = {
        "nodes": len(nodes),
        "patches": len(patches),
        "edges": len(edges),
        "sessions": len(sessions),
        "raw": len(store.raw_files()),
    }
    return Report(root=str(store.root), counts=counts, findings=findings)


def _node_findings(node: MemoryNode, nodes: dict[str, MemoryNode], patch_ids: set[str]) -> list[Finding]:
    where = f"nodes/{node.id}.json"
    found = []
    if _orphan_patch_id(node, patch_ids):
        found.append(
            Finding(
                ORPHAN,
                where,
                f"written for patch {node.metadata['patch_id']}, which never reached disk "
                "(an interrupted patch); `cclg doctor --repair` moves it to recovered/",
            )
        )
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
                found.append(Finding(PATCH_IDS, where, f"{field_name} names {node_id}, which does not exist"))
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


def _orphan_patch_id(node: MemoryNode, patch_ids: set[str]) -> bool:
    """A node that ``apply_patch`` wrote for a patch whose file never followed."""
    patch_id = node.metadata.get("patch_id")
    return node.metadata.get("created_by") == "patch" and isinstance(patch_id, str) and patch_id not in patch_ids


def repair(store: Store) -> list[str]:
    """Fix what needs no judgement; returns what was done.

    Torn log lines and orphan temp files are set aside; the nodes and edges of a
    patch that never reached disk are moved to ``recovered/``; nodes whose status
    disagrees with their patches get the status (and ``superseded_by`` links) the
    ledger gives them.
    """
    actions = store.recover()
    with store.lock():
        # Unreadable records are reported by diagnose and left as they are: repair
        # works around them rather than giving up on the rest of the store.
        unreadable: list[Finding] = []
        nodes = {n.id: n for n in _load(store, "nodes", unreadable)}
        patches = sorted(_load(store, "patches", unreadable), key=patch_order)
        patch_ids = {p.id for p in patches}
        fixed = []
        for node in sorted(nodes.values(), key=lambda n: n.id):
            if _orphan_patch_id(node, patch_ids):
                moved = store.set_aside(store.node_path(node.id))
                del nodes[node.id]
                fixed.append(
                    f"moved {node.id}, written for the unfinished patch {node.metadata['patch_id']}, to {moved}"
                )
        for edge in _load(store, "edges", unreadable):
            if edge.source_patch_id is not None and edge.source_patch_id not in patch_ids and edge.from_id not in nodes:
                moved = store.set_aside(store.edge_path(edge.id))
                fixed.append(f"moved {edge.id}, written for the unfinished patch {edge.source_patch_id}, to {moved}")
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
        if fixed:
            store.audit_many([audit_record("repair_applied", actions=fixed)])
        if store.index_path.exists():
            index = connect(store)
            try:
                if _index_findings(store, index):
                    index.rebuild()
                    fixed.append("rebuilt the search index from the files")
            finally:
                index.close()
    return actions + fixed


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
