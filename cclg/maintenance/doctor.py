"""`cclg doctor` and `cclg validate`: find everything wrong with a store, all at once.

``diagnose`` runs every check of the contract's ``[validation]`` table, plus the content
hashes, the raw evidence's digests the audit log recorded (``RawDigests``), a replay of the
patch ledger (a node whose status disagrees with its patches was edited around the lattice,
or a patch was interrupted), memories that no patch accounts for (left by a write killed before
its patch), creates killed before all their files were named,
purges that did not finish (``cclg.ledger.purge``), the health of the logs (unreadable lines, torn
last lines), temp files left by killed writers, and files in the record folders that are no
records (a sync tool's conflict copies), and the ``config.json`` values left for their defaults
(``cclg.core.config``). It never writes the store's files; it brings the
disposable search index up to date (every file that changed since the index saw it is re-read,
and a damaged index is rebuilt) and says which entries it refreshed. ``repair`` fixes what can
be fixed without judgement: it sets torn log tails aside, removes orphan temp files, finishes
interrupted purges, makes a purge an old import took from another store a plain forget
(``purge.settle_imported``), moves the leftovers of unfinished writes to ``recovered/``, and gives nodes
the status their patches say they have. Each record file is read once (``Scan``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import sqlite3
import stat
import sys
import zlib
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

from cclg import format as fmt
from cclg.codegraph import search_index
from cclg.core.fields import parse_json
from cclg.core.files import read_jsonl, read_regular
from cclg.core.ids import content_hash, parse_time
from cclg.core.records import MemoryEdge, MemoryNode, MemoryPatch, Retrieval, Session, Source
from cclg.core.repository import git_root
from cclg.core.store import HOOK_FAILURES, INDEX_FILE, Store, audit_record, is_record_name, patch_order
from cclg.errors import CclgError, UnknownPatchOperationError, ValidationError
from cclg.hosts.install import check_installation
from cclg.learning import sensors
from cclg.ledger import purge, staging
from cclg.ledger.adoption import shared_by_name
from cclg.ledger.index import Index, connect, discard_damaged, is_damage, rebuild_index
from cclg.ledger.lattice import INITIAL_STATUSES, LIVE_STATUSES, OPERATIONS
from cclg.ledger.redaction import RAW_REWRITTEN
from cclg.ledger.view import Ledger, effective_view, expected_statuses, retired_ids, undone_patch_ids
from cclg.ledger.writer import PURGE_RULE, link_replacements
from cclg.retrieval import semantic, usage_prior

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
PURGE = "every purge finished"
PRIVATE = "store files and folders are the owner's only"
CONFIG = "config.json's settings are usable"
RAW = "raw evidence holds the bytes cclg kept"
OWNER_ONLY = {False: 0o600, True: 0o700}  # a file's mode, a folder's (is it a folder?): what the store sets
SHARED = "projects named by a folder's name only"  # a notice: a legitimate scope, which fails nothing
Readable = Mapping[str, Container[str]]  # the ids of the records that parse, by folder

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
    healed: list[str] = field(default_factory=list)  # the other projections found damaged, and what was done
    sensors: dict[str, int] = field(default_factory=dict)  # the thresholds post-tool's sensors use
    notices: list[Finding] = field(default_factory=list)  # worth knowing, not wrong: ``ok`` ignores them
    # prompts of the last 24 hours the semantic helper answered in time, and missed (``semantic.answer_counts``)
    semantic: dict[str, int] = field(default_factory=dict)

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
            "healed": self.healed,
            "sensors": self.sensors,
            "notices": [n.to_dict() for n in self.notices],
            "semantic": self.semantic,
        }


def _records(
    store: Store,
    folder: str,
    findings: list[Finding],
    strays: dict[str, list[Path]] | None = None,
    checksums: dict[str, int] | None = None,
    modes: OpenModes | None = None,
) -> Iterator[Any]:
    """Each record of ``folder`` that parses, in file-name order, read one at a time; what is wrong
    with the others goes to ``findings``, ``strays`` gets the folder's stray files, ``checksums``
    the CRC-32 of each record's bytes (for ``Index.read_through``) and ``modes`` each file's mode."""
    parse = PARSERS[FOLDER_SCHEMA[folder]]
    entries, stray = store.scan_records(folder)
    if strays is not None:
        strays[folder] = sorted(Path(entry.path) for entry in stray)
    names = sorted(entry.name for entry in entries)
    del entries
    directory = str(store.folder(folder))
    for name in names:
        where = f"{folder}/{name}"
        try:
            raw, mode = _read_bytes(os.path.join(directory, name))
            if modes is not None:
                modes.see(where, mode)
            data = parse_json(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            findings.append(Finding(SCHEMA, where, f"not valid JSON: {exc}"))
            continue
        try:
            record = parse(data, where)
        except ValidationError as exc:
            findings.extend(Finding(SCHEMA, where, p.removeprefix(f"{where}: ")) for p in exc.problems)
            continue
        if name[:-5] != record.id:
            message = f"holds id {record.id!r}, not the id its file name says (a copy?); ignored"
            findings.append(Finding(SCHEMA, where, message))
            continue
        if checksums is not None:
            checksums[record.id] = zlib.crc32(raw)
        yield record


def _read_bytes(path: str) -> tuple[bytes, int]:
    """``Path.read_bytes`` without a file object (a store's records are read by the hundred thousand),
    with the file's mode (an ``fstat`` of the open file costs next to nothing)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return b"".join(iter(lambda: os.read(fd, 1 << 16), b"")), os.fstat(fd).st_mode
    finally:
        os.close(fd)


class OpenModes:
    """The store's files and folders more open than the store makes them (``OWNER_ONLY``), as they are met:
    the records as ``_records`` reads them, everything else by one walk (``walk``)."""

    def __init__(self) -> None:
        self.found: dict[str, int] = {}  # path in the store -> its permission bits

    def see(self, where: str, mode: int) -> None:
        if mode & 0o077 and not stat.S_ISLNK(mode):
            self.found[where] = mode

    def walk(self, store: Store, read: Container[str]) -> None:
        """Every file and folder of ``store`` (links are not followed), but for the records of the
        folders in ``read``, whose modes ``_records`` saw as it read them."""
        self.see(".", os.lstat(store.root).st_mode)
        pending = [""]
        while pending:
            folder = pending.pop()
            with contextlib.suppress(OSError), os.scandir(store.path_of(folder)) as entries:
                for entry in entries:
                    if folder in read and is_record_name(folder, entry.name) and entry.is_file(follow_symlinks=False):
                        continue
                    where = f"{folder}/{entry.name}" if folder else entry.name
                    info = entry.stat(follow_symlinks=False)
                    self.see(where, info.st_mode)
                    if stat.S_ISDIR(info.st_mode):
                        pending.append(where)

    def findings(self, store: Store) -> tuple[list[Finding], list[Finding]]:
        """(findings, notices): open modes are a finding, but for a store inside a git work tree (the
        demo store, a store a team commits), whose every checkout gives its files git's modes (0644,
        0755): there they are a notice, which fails nothing. ``--repair`` tightens them either way."""
        if not self.found:
            return [], []
        folders = sorted(p for p, m in self.found.items() if stat.S_ISDIR(m))
        files = sorted(p for p, m in self.found.items() if not stat.S_ISDIR(m))
        shown = [f"{p} ({stat.S_IMODE(self.found[p]):04o})" for p in [*folders[:3], *files[:3]]]
        more = len(self.found) - len(shown)
        message = f"{len(files)} file(s) and {len(folders)} folder(s) are open to others than their owner: "
        message += ", ".join(shown) + (f" and {more} more" if more else "")
        file_mode, folder_mode = OWNER_ONLY[False], OWNER_ONLY[True]
        message += f"; `cclg doctor --repair` tightens them to {file_mode:04o} (files), {folder_mode:04o} (folders)"
        if git_root(store.root) is None:
            return [Finding(PRIVATE, ".", message)], []
        message += " (the store is in a git work tree, whose checkouts give files git's modes: noted, not failed)"
        return [], [Finding(PRIVATE, ".", message)]

    def tighten(self, store: Store) -> list[str]:
        """Give each file and folder found the store's own mode; returns what was done (one line)."""
        done = {False: 0, True: 0}
        for where, mode in sorted(self.found.items()):
            with contextlib.suppress(FileNotFoundError):
                os.chmod(store.path_of(where), OWNER_ONLY[stat.S_ISDIR(mode)])
                done[stat.S_ISDIR(mode)] += 1
        if not any(done.values()):
            return []
        return [f"tightened {done[False]} file(s) to {OWNER_ONLY[False]:04o} and {done[True]} folder(s) to "
                f"{OWNER_ONLY[True]:04o}, which were open to others than their owner"]  # fmt: skip


class Seen(NamedTuple):
    """What the checks across nodes keep of one node, which is dropped once its own checks have run."""

    status: str
    relations: tuple[tuple[str, tuple[str, ...]], ...]  # the relation kinds that name nodes, in order
    problems: tuple[Finding, ...]  # what its own file shows: a content hash that does not match, no source


class Scan:
    """Checks each node file as it is read, against itself and the ledger (the patches are read first), and
    keeps only what the checks across nodes need (``Seen``): memory grows with a store's ids, not its text."""

    def __init__(self, patches: list[MemoryPatch]) -> None:
        self.patches, self.patch_ids, self.named = patches, {p.id for p in patches}, _named(patches)
        self.expected: dict[str, frozenset[str]] = {}  # the statuses the patches allow, of the nodes they touch
        self.retired: dict[str, str] = {}
        self.error: str | None = None  # why the ledger cannot be replayed (an unknown operation)
        self.ledger: Ledger | None = None  # what the set of patches says, for a ledger written on several machines
        try:
            self.expected, self.retired = expected_statuses({}, patches), retired_ids(patches)
            self.ledger = Ledger(patches)
        except UnknownPatchOperationError as exc:
            self.error = str(exc)
        self.nodes: dict[str, Seen] = {}
        self.suspects: dict[str, str] = {}  # unaccounted, but for what the audit log says: id -> why
        self.disagreements: list[Finding] = []  # the statuses the ledger disagrees with
        self.overlays: set[str] = set()  # the sessions of active_session nodes
        self.viewed: list[MemoryNode] = []  # the retired and no longer live nodes, for ``ledger_findings``
        self.shared: dict[str, int] = {}  # folder name -> the current memories scoped by it (``shared_notices``)

    def see(self, node: MemoryNode) -> None:
        node_id, status, where = node.id, sys.intern(node.status), f"nodes/{node.id}.json"
        problems = []
        if (stored := node.stored_hash) is not None and stored != (actual := content_hash(node.content)):
            message = f"metadata.content_hash {stored} does not match the content ({actual}): content changed by hand?"
            problems.append(Finding(HASH, where, message))
        if status == "active" and not node.source.label and not node.source.raw_spans:
            problems.append(Finding(SOURCE, where, "active memory has neither a source label nor a raw span"))
        relations = tuple((kind, tuple(ids)) for kind, ids in node.relations.items() if ids)
        self.nodes[node_id] = Seen(status, relations, tuple(problems))
        if (why := _unaccounted_reason(node, self.named, self.patch_ids)) is not None:
            self.suspects[node_id] = why
        allowed = self.expected.get(node_id, INITIAL_STATUSES)
        if self.error is None and status not in allowed and not self._settled(node):
            why = f"status is {status} but its patches leave it {' or '.join(sorted(allowed))}: edited by hand or "
            why += "an interrupted patch (`cclg doctor --repair` restores the ledger's status)"
            self.disagreements.append(Finding(LEDGER, where, why))
        if status == "active_session" and node.scope.session:
            self.overlays.add(node.scope.session)
        if node_id not in self.retired and (name := shared_by_name(node)) is not None:
            self.shared[name] = self.shared.get(name, 0) + 1
        if node_id in self.retired or status not in LIVE_STATUSES:  # kept, less what ``effective_view`` never reads
            node.content, node.tags, node.relations, node.source, node.retrieval = "", [], {}, Source(), Retrieval()
            self.viewed.append(node)

    def _settled(self, node: MemoryNode) -> bool:
        """Whether the node has the status the whole set of patches gives it (``Ledger.settle``): patches
        synced from other machines (``cclg sync``) are replayed as a set, not in their order of arrival."""
        if self.ledger is None or node.id not in self.ledger.naming:
            return False
        settled = self.ledger.settle(node)
        return settled.decided and settled.status == node.status

    def shared_notices(self) -> list[Finding]:
        """One notice per folder name that current memories are scoped by, with the command that settles them."""
        notices = []
        for name, count in sorted(self.shared.items()):
            one = count == 1
            memories, they, them = (
                ("1 current memory is", "it belongs", "it")
                if one
                else (f"{count} current memories are", "they belong", "them")
            )
            message = f"{memories} scoped by the folder name {name!r}: every repository of that name reads {them}. "
            message += f"Inside the repository {they} to, `cclg project adopt {shlex.quote(name)}` gives {them} "
            message += "to it alone (`--dry-run` lists first; each is a patch `cclg rollback` undoes)"
            notices.append(Finding(SHARED, "nodes/", message))
        return notices

    def ledger_findings(self) -> list[Finding]:
        """The statuses the ledger disagrees with, then any retired memory the read model would serve.
        ``effective_view`` is given only the retired and no longer live nodes: it decides on each node
        alone but for a key's winner, and a node that wins among all wins among fewer."""
        if self.error is not None:
            return [Finding(LEDGER, "patches/", self.error)]
        findings = list(self.disagreements)
        for session_id in [None, *sorted(self.overlays)]:
            for node in effective_view(self.viewed, self.patches, session_id=session_id):
                if node.id in self.retired or node.status not in LIVE_STATUSES:
                    message = "a retired memory would be served as current truth"
                    findings.append(Finding(SUPPRESSED, f"nodes/{node.id}.json", message))
        return findings


def diagnose(store: Store) -> Report:
    """Every finding about ``store``; an empty list means the store is healthy. An import a killed
    writer left past its commit point is finished first (``cclg.ledger.staging``), as every command does."""
    staging.finish(store)
    schema: dict[str, list[Finding]] = {folder: [] for folder in FOLDER_SCHEMA}
    strays: dict[str, list[Path]] = {}
    checksums: dict[str, int] = {}
    modes = OpenModes()
    scan = Scan(list(_records(store, "patches", schema["patches"], strays, modes=modes)))
    for node in _records(store, "nodes", schema["nodes"], strays, checksums, modes):
        scan.see(node)
    nodes, patch_ids = scan.nodes, scan.patch_ids
    later = [f for patch in scan.patches for f in _patch_findings(patch, nodes, patch_ids)]
    counts = {"nodes": len(nodes), "patches": len(scan.patches), "edges": 0, "sessions": 0}
    for edge in _records(store, "edges", schema["edges"], strays, modes=modes):
        later += _edge_findings(edge, nodes, patch_ids)
        counts["edges"] += 1
    counts["sessions"] = sum(1 for _ in _records(store, "sessions", schema["sessions"], strays, modes=modes))
    modes.walk(store, read=FOLDER_SCHEMA)
    counts["raw"] = len(store.raw_files())
    written = Audited("node_written", "node_id") if scan.suspects else None
    digests = RawDigests()
    logs = _log_findings(store, [digests] if written is None else [written, digests])
    findings = [f for folder in FOLDER_SCHEMA for f in schema[folder]]
    for node_id, why in scan.suspects.items():
        if written is None or node_id not in written.found:
            message = f"{why}; `cclg doctor --repair` moves it to recovered/"
            findings.append(Finding(ORPHAN, f"nodes/{node_id}.json", message))
    findings += _node_findings(nodes)
    findings += later
    findings += scan.ledger_findings()
    findings += [Finding(PURGE, path, message) for path, message in purge.findings(store, scan.patches)]
    scan.viewed.clear()
    findings.extend(_hook_findings(store))
    findings.extend(Finding(INSTALL, path, message) for path, message in check_installation())
    refreshed: list[str] = []
    if store.index_path.exists():
        refreshed, stale = _index_health(store, {"nodes": nodes, "patches": patch_ids}, checksums)
        findings.extend(stale)
    findings.extend(logs)
    findings.extend(digests.findings(store))
    for path in store.orphan_temp_files():
        message = "left by a write that was killed; the next write (or `cclg doctor --repair`) finishes or removes it"
        findings.append(Finding(TEMP, store.relative(path), message))
    findings.extend(_stray_findings(store, strays))
    open_modes, modes_noted = modes.findings(store)
    findings.extend(open_modes)
    findings.extend(Finding(CONFIG, fmt.PATHS["config"], message) for message in store.settings.ignored)
    thresholds = sensors.settings(store)
    report = Report(root=str(store.root), counts=counts, findings=findings, refreshed=refreshed, sensors=thresholds)
    report.notices = [*modes_noted, *scan.shared_notices(), *sync_notices(store), *semantic_notices()]
    report.healed = _projection_health(store)
    report.semantic = semantic.answer_counts(store)
    return report


SEMANTIC = "semantic recall"  # a notice: packs and search match words only, and why


def semantic_notices() -> list[Finding]:
    """A notice when the semantic signal is off by choice (``semantic.off_reason``): then a question
    worded unlike the memory it needs (a paraphrase, another language) finds nothing."""
    reason = semantic.off_reason()
    if reason is None:
        return []
    message = f"off, since {reason}: packs and search match words only, and a question worded unlike its memory"
    return [Finding(SEMANTIC, "semantic.sqlite", message + " (a paraphrase, another language) finds nothing")]


SYNC = "team memory (cclg sync)"  # a notice: when each remote last synced, what waits, the open conflicts


def sync_notices(store: Store) -> list[Finding]:
    """When each remote last synced and what waits to go out; each open conflict between patches written
    on different machines (``cclg conflicts`` lists them, ``cclg resolve`` settles them). Worth knowing, not
    wrong: none of it fails the store."""
    if not store.sync_remotes_path.is_file():
        return []
    from cclg.sync import engine, remotes

    try:
        state = engine.status(store, remotes.load(store))
    except CclgError as exc:
        return [Finding(SYNC, "sync/", f"the sync status cannot be read: {exc}")]
    notices = []
    for remote in state["remotes"]:
        waiting = sum(remote["waiting"].values())
        last = remote["last_sync"] or "never"
        message = f"remote {remote['name']!r}: last sync {last}; {waiting} record(s) wait to go out"
        notices.append(Finding(SYNC, "sync/", message + (" (`cclg sync`)" if waiting else "")))
    for conflict in state["conflicts"]:
        message = f"open conflict ({conflict['kind']}) over {conflict['node']}: {', '.join(conflict['flagged'])} "
        message += "wait for a decision (`cclg conflicts`, then `cclg resolve`)"
        notices.append(Finding(SYNC, f"nodes/{conflict['node']}.json", message))
    return notices


def _projection_health(store: Store) -> list[str]:
    """The disposable projections besides the memory index, read through as ``_index_health`` reads it:
    each code graph's search index (``search_index.read_through``; a damaged one is deleted, and the
    next prompt in its repository or ``cclg code-index`` builds it again), the usage counts
    (``usage_prior.heal``: compared with their log) and the memories' vectors (``semantic.heal_vectors``).
    Returns what was done about each damaged one."""
    healed = []
    for path in sorted(store.codegraphs_dir.glob("*.search.sqlite")):
        try:
            search_index.read_through(path)
        except sqlite3.DatabaseError as exc:
            where = store.relative(path)
            try:
                search_index.remove_with_journals(path)
            except OSError as error:
                healed.append(f"{where}: the code graph search index is damaged ({exc}) and stays ({error})")
                continue
            healed.append(f"{where}: deleted the damaged code graph search index ({exc}), built again on next use")
    found = [usage_prior.heal(store), semantic.heal_vectors(store)]
    return healed + [done for done in found if done]


def _named(patches: list[MemoryPatch]) -> set[str]:
    """Every node some patch creates, targets or recorded the prior status of."""
    return {n for p in patches for n in (*p.new_node_ids, *p.target_ids, *p.prior_states)}


def _unaccounted_reason(node: MemoryNode, named: Container[str], patch_ids: Container[str]) -> str | None:
    """Why no write accounts for ``node``, but for the audit log (``unaccounted``); None when one does."""
    if node.id in named:
        return None
    patch_id = node.metadata.get("patch_id")
    if isinstance(patch_id, str) and patch_id not in patch_ids:
        return f"written for patch {patch_id}, which never reached disk (an interrupted patch)"
    if node.stored_hash is not None:
        return "no patch created it and no audit record says it was written (a write killed early)"
    return None


def unaccounted(store: Store, nodes: dict[str, MemoryNode], patches: list[MemoryPatch]) -> dict[str, str]:
    """The nodes that no write accounts for, each with why: no patch names them, no audit record
    says they were written (an import's nodes come without a patch, with that record), and this
    implementation wrote them, for a patch that never reached disk (``metadata.patch_id``) or at
    all (``metadata.content_hash``). A node with neither is left alone: the reference
    implementation writes memories without patches, and its stores must stay healthy here."""
    named, patch_ids = _named(patches), {p.id for p in patches}
    suspects = {n.id: why for n in nodes.values() if (why := _unaccounted_reason(n, named, patch_ids)) is not None}
    if suspects:
        for node_id in _audited(store, "node_written", "node_id") & suspects.keys():
            del suspects[node_id]
    return suspects


def _audited(store: Store, event: str, field_name: str) -> set[str]:
    """The ``field_name`` of every ``event`` record in the audit log (the nodes it says were written, say)."""
    audited = Audited(event, field_name)
    _read_log(store.audit_path, "", [audited])
    return audited.found


class Audited:
    """Gathers the ``field_name`` of each ``event`` record of a log as ``_read_log`` reads it (a torn tail too)."""

    def __init__(self, event: str, field_name: str) -> None:
        self.event, self.field_name, self.marker = event, field_name, f'"{event}"'.encode()
        self.found: set[str] = set()

    def __call__(self, record: Any, line: bytes) -> None:
        if self.marker in line and isinstance(record, dict) and record.get("event") == self.event:
            self.found.add(str(record.get(self.field_name)))


class RawDigests:
    """The SHA-256 each raw file should have, from the audit log read in order: the digest its
    ``raw_written`` record gave, or the ``raw_rewritten`` record of an erasure after it (a purge, ``scan
    --store --redact``). An erasure's own records make the digests before them unknown (all of them
    for a purge, from its patch on, the named file for a redaction), so neither a purge that was
    killed nor a store erased by a release before ``raw_rewritten`` gives a false finding."""

    def __init__(self) -> None:
        self.known: dict[str, str] = {}

    def __call__(self, record: Any, line: bytes) -> None:
        event = record.get("event") if isinstance(record, dict) else None
        if event in ("raw_written", RAW_REWRITTEN):
            path, digest = record.get("path"), record.get("sha256")
            if isinstance(path, str) and isinstance(digest, str):
                self.known[path] = digest
        elif event == purge.PURGED_EVENT or (event == "patch_written" and record.get("rule") == PURGE_RULE):
            self.known.clear()  # a purge begins (a killed one records nothing more), or ends
        elif event == "repair_applied" and isinstance(record.get("file"), str):
            self.known.pop(record["file"], None)

    def findings(self, store: Store) -> list[Finding]:
        """A finding for each raw file whose bytes are not those its digest says."""
        found = []
        for path in store.raw_files():
            relative = store.relative(path)
            expected = self.known.get(relative)
            if expected is not None and _file_sha256(path) != expected:
                message = f"its bytes are not those cclg kept (SHA-256 {expected[:12]}... in the audit log): changed"
                message += " by something other than cclg, or by a redaction that was killed; compare it with a backup"
                found.append(Finding(RAW, relative, message))
        return found


def _file_sha256(path: Path) -> str:
    """The SHA-256 of the file ``path``, read in blocks: raw evidence can be large."""
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def unfinished_creates(store: Store, patches: list[MemoryPatch]) -> list[MemoryPatch]:
    """The ``create`` patches of this store that never finished: nodes missing, and no audit record
    of the patch (written last, by the ledger and by imports alike). A create killed after its patch
    (``cclg.ledger.writer._write_new``) left staged files that the next process to take the store lock
    names, so these lost theirs."""
    missing = [
        p for p in patches if p.operation == "create" and not all(store.node_path(n).exists() for n in p.new_node_ids)
    ]
    audited = _audited(store, "patch_written", "patch_id") if missing else set()
    return [p for p in missing if p.id not in audited]


def _stray_findings(store: Store, strays: dict[str, list[Path]]) -> list[Finding]:
    """``strays``: each record folder's stray files (``Store.stray_files``), as ``_records`` found them."""
    found = []
    for folder in FOLDER_SCHEMA:
        for path in strays.get(folder, []):
            kind = "a folder" if path.is_dir() else "a file"
            message = f"{kind} whose name is not <id>.json (a sync tool's conflict copy?), ignored by every command; "
            found.append(Finding(STRAY, store.relative(path), message + "merge what it holds by hand, then remove it"))
    return found


def _node_findings(nodes: dict[str, Seen]) -> list[Finding]:
    """Each node's own findings, then the nodes its relations name that do not exist, the live ones it supersedes."""
    found: list[Finding] = []
    for node_id, seen in nodes.items():
        if not seen.problems and not seen.relations:
            continue
        found += seen.problems
        where = f"nodes/{node_id}.json"
        for kind, ids in seen.relations:
            for other in ids:
                if other not in nodes:
                    found.append(Finding(RELATIONS, where, f"relations.{kind} names {other}, which does not exist"))
        if seen.status in LIVE_STATUSES:
            for old in dict(seen.relations).get("supersedes", ()):
                status = nodes[old].status if old in nodes else None
                if status in LIVE_STATUSES:
                    found.append(Finding(SUPERSEDES, where, f"supersedes {old}, which is still {status}"))
    return found


def _patch_findings(patch: MemoryPatch, nodes: Container[str], patch_ids: set[str]) -> list[Finding]:
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


def _edge_findings(edge: MemoryEdge, nodes: Container[str], patch_ids: set[str]) -> list[Finding]:
    where = f"edges/{edge.id}.json"
    found = []
    for end, node_id in (("from", edge.from_id), ("to", edge.to_id)):
        if node_id not in nodes:
            found.append(Finding(EDGE_IDS, where, f"'{end}' names {node_id}, which does not exist"))
    if edge.source_patch_id is not None and edge.source_patch_id not in patch_ids:
        message = f"source_patch_id names {edge.source_patch_id}, which does not exist "
        message += "(an interrupted patch? `cclg doctor --repair` moves such edges to recovered/)"
        found.append(Finding(EDGE_IDS, where, message))
    return found


def _index_health(store: Store, readable: Readable, checksums: dict[str, int]) -> tuple[list[str], list[Finding]]:
    """(what the index re-read: every file that changed since it saw it, or the whole index when it
    was damaged; where it still disagrees with the files). ``readable``: see ``_index_findings``;
    ``checksums``: of the node files, to read every record through the index (``Index.read_through``)."""
    refreshed: list[str] = []
    index = connect(store)
    try:
        if index.damage:
            refreshed.append(f"{INDEX_FILE}: {index.damage}")
        try:
            changed = index.refresh_all()
            index.read_through(checksums)
            findings = _index_findings(store, index, readable, changed)
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                raise
            index.close()
            refreshed.append(f"{INDEX_FILE}: {discard_damaged(store, exc)}")
            index = connect(store)  # built again from the files
            changed, findings = [], _index_findings(store, index, readable, index.refresh_all())
    finally:
        index.close()
    # An unreadable file is left out of the index each time it is looked at: it is no refresh.
    for entry in changed:  # folder/<id>.json
        folder, _, name = entry.partition("/")
        if name[:-5] in readable.get(folder, ()) or not store.path_of(entry).exists():
            refreshed.append(entry)
    return refreshed, findings


def _index_findings(store: Store, index: Index, readable: Readable, changed: list[str]) -> list[Finding]:
    """Where the search index disagrees with the files (it never changes them; repair rebuilds it). Only
    what ``Index.refresh_all`` just re-read (``changed``) is looked at: it found every other file in
    agreement with its row. ``readable``: the ids of the records that parse, by folder; the index
    leaves the others out by design (they are reported as such), so their absence is no finding."""
    problems = []
    for entry in changed:
        folder, _, name = entry.partition("/")
        row = index.file_seen(folder, name[:-5])
        try:
            info = os.stat(store.path_of(entry))
        except FileNotFoundError:
            if row is not None:
                problems.append(f"it still lists {entry}, which is gone")
            continue
        if row is None and name[:-5] not in readable.get(folder, ()):
            continue
        if row != (info.st_mtime_ns, info.st_size):
            problems.append(f"{entry} is {'missing' if row is None else 'stale'} in it")
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
    message = f"{len(recent)} hook call(s) failed and returned no context; the last "
    message += f"({recent[-1].get('event')}, {recent[-1].get('created_at')}): {last[-1] if last else '?'}"
    return [Finding(HOOKS, HOOK_FAILURES, message)]


def _log_findings(store: Store, audited: Sequence[Callable[[Any, bytes], None]] = ()) -> list[Finding]:
    """What is wrong with the logs (unreadable lines, a torn last line); each of ``audited`` reads the audit
    log along."""
    findings: list[Finding] = []
    for log in store.logs():
        findings += _read_log(log, store.relative(log), audited if log == store.audit_path else ())
    return findings


def _read_log(path: Path, where: str, audited: Sequence[Callable[[Any, bytes], None]]) -> list[Finding]:
    """What is wrong with the log ``path``, read as ``files.read_jsonl`` reads it: a last line without
    its newline is never taken for a record (``audited`` sees it, like every line)."""
    findings = []
    with contextlib.suppress(FileNotFoundError), open(path, "rb") as file:
        for number, line in enumerate(file, start=1):
            if not line.endswith(b"\n"):
                message = f"the last line ({len(line)} bytes) has no newline: left by a killed writer; "
                findings.append(Finding(LOGS, where, message + "`cclg doctor --repair` sets it aside"))
                with contextlib.suppress(ValueError):
                    torn = parse_json(line) if audited else None
                    for read in audited:
                        read(torn, line)
                break
            line = line[:-1]
            if not line.strip():
                continue
            try:
                record = parse_json(line)
            except ValueError as exc:  # not JSON, not UTF-8 or nested too deep
                findings.append(Finding(LOGS, where, f"line {number}: not JSON: {exc}"))
                continue
            if not isinstance(record, dict):
                findings.append(Finding(LOGS, where, f"line {number}: not a JSON object"))
            else:
                for read in audited:
                    read(record, line)
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
    actions = staging.finish(store) + store.recover() + purge.finish_interrupted(store)
    actions += purge.settle_imported(store)
    with store.lock():
        # Unreadable records are reported by diagnose and left as they are: repair
        # works around them rather than giving up on the rest of the store.
        unreadable: list[Finding] = []
        checksums: dict[str, int] = {}
        modes = OpenModes()
        nodes = {n.id: n for n in _records(store, "nodes", unreadable, checksums=checksums, modes=modes)}
        patches = sorted(_records(store, "patches", unreadable, modes=modes), key=patch_order)
        modes.walk(store, read=("nodes", "patches"))
        fixed = modes.tighten(store) + _set_aside_unfinished(store, nodes, patches)
        for node_id, why in sorted(unaccounted(store, nodes, patches).items()):
            moved = store.set_aside(store.node_path(node_id))
            del nodes[node_id]
            fixed.append(f"moved {node_id} ({why}) to {moved}")
        patch_ids = {p.id for p in patches}
        for edge in _records(store, "edges", unreadable):
            if edge.source_patch_id is not None and edge.source_patch_id not in patch_ids and edge.from_id not in nodes:
                moved = store.set_aside(store.edge_path(edge.id))
                fixed.append(f"moved {edge.id}, written for the unfinished patch {edge.source_patch_id}, to {moved}")
        fixed += _replay_statuses(store, nodes, patches)
        if fixed:
            store.audit_many([audit_record("repair_applied", actions=fixed)])
        if store.index_path.exists():
            refreshed, stale = _index_health(store, {"nodes": nodes, "patches": patch_ids}, checksums)
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
        named = _named(patches) | _audited(store, "node_written", "node_id")
        written = [n for n in patch.new_node_ids if store.node_path(n).exists() and n not in named]
        for node_id in written:
            store.set_aside(store.node_path(node_id))
            nodes.pop(node_id, None)
        moved = store.set_aside(store.patch_path(patch.id))
        counted = f"the {len(written)} of its {len(patch.new_node_ids)} memories that were written"
        fixed.append(f"moved the unfinished create {patch.id} to {moved}, with {counted}")
    return fixed


def _replay_statuses(store: Store, nodes: dict[str, MemoryNode], patches: list[MemoryPatch]) -> list[str]:
    """Give each node whose status disagrees with the ledger the one status the ledger leaves it."""
    fixed = []
    expected = expected_statuses(nodes, patches)
    undone = undone_patch_ids(patches)
    ledger = Ledger(patches)
    for node_id, allowed in sorted(expected.items()):
        target = nodes.get(node_id)
        if target is None or target.status in allowed or len(allowed) != 1:
            continue
        settled = ledger.settle(target)
        if settled.decided and settled.status == target.status:  # what the whole set says (patches synced in)
            continue
        (status,) = allowed
        target.status = status
        live = [p for p in patches if node_id in p.target_ids and p.id not in undone]
        retiring = [p for p in live if OPERATIONS[p.operation].target_status == status]
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
            data = parse_json(read_regular(path))  # never a FIFO or a device: a folder may hold anything
        except FileNotFoundError:
            findings.append(Finding(SCHEMA, where, "no such file"))
            continue
        except OSError as exc:
            findings.append(Finding(SCHEMA, where, exc.strerror or str(exc)))
            continue
        except (ValueError, UnicodeDecodeError) as exc:
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
