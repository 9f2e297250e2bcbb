"""Where the store lives, every path in it, and every write to it.

The store's files are written here and nowhere else (through ``cclg.core.files``'
primitives). Its promises:

- Whole-file writes are atomic (``cclg.core.files.atomic_write``): a temp file in the
  store's ``tmp/`` folder, fsync, rename, fsync of the folder. A reader sees the old
  file or the new one, never half. Record files that must never be replaced
  (patches, edges, raw evidence) are published with a hard link, which fails
  instead of overwriting. A patch's new records can be staged (``stage_file``) and
  named once the patch is durable. The next process that takes the store lock
  finishes what a killed writer left in ``tmp/`` (names the staged records of a
  patch on disk, deletes the rest): one listing of a folder nearly always empty.
- Appends to logs (the audit log, session event logs) are one ``write`` per call under an
  exclusive ``flock`` (``locked_log``, which follows a log a purge or a redaction rewrote whole).
  A last line without its newline (left by a killed writer) is never parsed: readers skip it
  and report it, and the next append or ``recover()`` moves it to ``<log>.torn`` before writing.
- Changes to the ledger (nodes, patches, edges) happen under the store lock
  (``Store.lock()``), so two processes never interleave patches.
- Every file and folder of the store is its owner's only (0600 and 0700), SQLite
  files included (``cclg.core.files.create_private``); ``Store.open`` creates any folder of
  the layout that is missing (a store made by another implementation).
- The record folders hold records named ``<id>.json``; anything else there (a sync
  tool's conflict copy, a folder) is ignored by every reader and listed by
  ``stray_files`` for ``cclg doctor``.

The store's location is decided by ``resolve_root``: ``--root``, else
``$CCLG_HOME``, else ``~/.cclg``.
"""

from __future__ import annotations

import _thread
import contextlib
import fcntl
import os
import stat
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from cclg import format as fmt
from cclg.core.config import Settings
from cclg.core.fields import parse_json
from cclg.core.files import (
    TEMP_RE,
    atomic_write,
    flock_before,
    fsync_dir,
    jsonl_line,
    pid_alive,
    publish,
    read_jsonl,
    safe_name,
    set_aside_torn_tail,
    write_temp,
)
from cclg.core.ids import is_valid_id, is_valid_session_id, now_iso, parse_time, sha256_hex
from cclg.core.records import MemoryEdge, MemoryNode, MemoryPatch, Session, dumps
from cclg.errors import (
    ConcurrencyError,
    NotFoundError,
    StoreNotFoundError,
    UsageError,
    ValidationError,
    disk_refusal,
)

TYPE_CHECKING = False  # typing costs the hook ~4 ms of start-up; annotations are strings anyway
if TYPE_CHECKING:
    from datetime import datetime
    from typing import Any

LAYOUT = ("raw", "raw_records", "nodes", "patches", "edges", "sessions", "audit", "active", "active/codegraphs", "tmp")
LOCK_TIMEOUT_SECONDS = 30.0
HOOK_FAILURES = "audit/hook_failures.jsonl"
RULE_EVIDENCE = (
    "audit/rule_evidence.jsonl"  # the evidence of learned rules (cclg.learning.rules), which a purge reaches
)
INDEX_FILE = "index.sqlite"  # the search index: a projection, deleted and rebuilt at will
SEMANTIC_FILE = "semantic.sqlite"  # the memories' vectors (cclg.retrieval.semantic): a projection too
CODEGRAPHS = "active/codegraphs"
PROJECT_CACHE = "active/projects.json"  # root commits per git folder (cclg.core.repository): a cache
TEMP = "tmp"  # every temp file of the store's writes, until it is renamed into place
STAGING = "staging"  # the records of an import, written together (cclg.ledger.staging); made when one starts
USAGE_LOG = "audit/usage.jsonl"  # which delivered memories each session used or ignored (cclg.learning.usage)
USAGE_SUMMARY = "active/usage.json"  # the counts of that log, per memory: a projection of it
DIGESTS = "active/sessions"  # per session, the digest of its event log (cclg.ledger.sessions): a projection
TURNS = "active/turns"  # the last turn entry of each session (cclg.learning.turns)
SEMANTIC_REFUSALS = "active/semantic_refusals.json"  # when each refusal was last logged: a marker, safe to delete
SEMANTIC_ANSWERS = "active/semantic_answers.json"  # prompts the semantic helper answered and missed, per hour
SOURCES = "sources.json"  # the registered sources and what each sync last read of them (cclg.intake.source_sync)
SYNC = "sync"  # team memory (cclg.sync): the remotes, each one's clone, lock and state; made by the first remote
RECORD_PREFIXES = {"nodes": "mem", "patches": "patch", "edges": "edge", "sessions": None}  # None: a session id


def resolve_root(root: str | os.PathLike[str] | None = None) -> Path:
    """The store folder: ``root`` if given, else ``$CCLG_HOME``, else ``~/.cclg`` (``cclg.core.runtime.store_root``,
    which the hook reads before it imports this module)."""
    from cclg.core.runtime import store_root

    return Path(store_root(root))


class Store:
    """A cclg store on disk. Open one with ``Store.open(root)`` or create it with ``Store.init``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.config: dict[str, Any] = {}  # config.json, as read by ``open``
        self._settings: Settings | None = None
        self._config_seen: tuple[int, int, int] | None = None  # config.json's (inode, mtime, size) then
        # Threads sharing this object (the MCP server runs tools in worker threads)
        # take turns on this mutex before the file lock; its owner may re-enter.
        self._mutex = _thread.RLock()
        self._lock_depth = 0
        self._lock_fd: int | None = None
        self._batch_depth = 0
        self._temp_dirs: dict[Path, Path] = {}  # folder -> where its temp files go (see _temp_dir)
        self.healed: list[str] = []  # what the last taking of the store lock finished for killed writers
        # What a write left unfinished after its commit point (the index update refused by a full disk,
        # say): the write stands, and the surfaces show these as warnings (``after_commit``).
        self.warnings: list[str] = []

    # ------------------------------------------------------------ opening

    @staticmethod
    def holds_a_store(path: Path) -> bool:
        """Whether the folder ``path`` looks like a store: its config.json and its nodes/ are there."""
        return (path / fmt.PATHS["config"]).is_file() and (path / "nodes").is_dir()

    @classmethod
    def open(cls, root: str | os.PathLike[str] | None = None) -> Store:
        """Open an existing store; ``StoreNotFoundError`` when the folder is not one."""
        path = resolve_root(root)
        config = path / fmt.PATHS["config"]
        if not path.is_dir():
            raise StoreNotFoundError(
                f"no cclg store at {path}: the folder does not exist (run `cclg --root {path} init`)"
            )
        if not cls.holds_a_store(path):
            raise StoreNotFoundError(
                f"{path} is not a cclg store (no config.json and nodes/); run `cclg --root {path} init`"
            )
        try:
            settings = parse_json(config.read_bytes())
            schema = settings.get("schema_version")
        except (OSError, ValueError, AttributeError) as exc:
            raise StoreNotFoundError(f"{config} is not readable as a store config: {exc}") from exc
        if schema != fmt.STORE_SCHEMA:
            raise StoreNotFoundError(f"{config}: store schema {schema!r} is not {fmt.STORE_SCHEMA!r}")
        store = cls(path)
        store.config = settings
        store._complete_layout()
        return store

    def _complete_layout(self) -> None:
        """Create the missing folders of the layout (a store made by the reference implementation has no
        ``active/codegraphs/``), owner-only; a read-only store stays as it is."""
        for name in LAYOUT:
            with contextlib.suppress(OSError):
                os.mkdir(self.root / name, 0o700)

    @classmethod
    def init(cls, root: str | os.PathLike[str] | None = None) -> tuple[Store, bool]:
        """Create the layout (idempotent). Returns the store and whether it was new."""
        path = resolve_root(root)
        if path.exists() and not path.is_dir():
            raise UsageError(f"{path} exists and is not a folder")
        config = path / fmt.PATHS["config"]
        if path.is_dir() and any(path.iterdir()) and not config.exists():
            raise UsageError(f"{path} is a non-empty folder that is not a cclg store; choose another --root")
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        if stat.S_IMODE(path.stat().st_mode) & 0o077:
            path.chmod(0o700)  # a folder the user made for the store: the store is theirs alone
        for name in LAYOUT:
            (path / name).mkdir(exist_ok=True, mode=0o700)
        store = cls(path)
        if config.exists():
            return cls.open(path), False
        settings = {"schema_version": fmt.STORE_SCHEMA, "format": fmt.FORMAT_ID, "created_at": now_iso()}
        store.write_file(config, dumps(settings), replace=False)
        store.config = settings  # as ``open`` would read it
        store.audit("store_initialized", root=".")
        return store, True

    @property
    def settings(self) -> Settings:
        """The usable settings of ``config`` (``cclg.core.config``), checked once; config.json is read again
        only when it changed since (a long-running MCP server sees the user's edit at its next call; a
        file that no longer parses as an object keeps the settings it had)."""
        try:
            info = os.stat(self.config_path)
            seen: tuple[int, int, int] | None = (info.st_ino, info.st_mtime_ns, info.st_size)
        except OSError:
            seen = self._config_seen
        if self._settings is not None and seen == self._config_seen:
            return self._settings
        if self._settings is not None:
            with contextlib.suppress(OSError, ValueError):
                config = parse_json(self.config_path.read_bytes())
                self.config = config if isinstance(config, dict) else self.config
        self._settings, self._config_seen = Settings(self.config), seen
        return self._settings

    # ------------------------------------------------------------ paths

    def node_path(self, node_id: str) -> Path:
        return self._record_path("nodes", node_id, "a memory id")

    def patch_path(self, patch_id: str) -> Path:
        return self._record_path("patches", patch_id, "a patch id")

    def edge_path(self, edge_id: str) -> Path:
        return self._record_path("edges", edge_id, "an edge id")

    def _record_path(self, folder: str, record_id: str, noun: str) -> Path:
        prefix = RECORD_PREFIXES[folder] or ""
        if not is_valid_id(record_id, prefix):
            raise UsageError(f"not {noun}: {record_id!r} (ids look like {prefix}_...)")
        return self.root / folder / f"{record_id}.json"

    def session_path(self, session_id: str) -> Path:
        if not is_valid_session_id(session_id):
            raise UsageError(f"not a session id: {session_id!r}")
        return self.root / "sessions" / f"{session_id}.json"

    def session_events_path(self, session_id: str) -> Path:
        return self.session_path(session_id).with_suffix(".events.jsonl")

    def folder(self, name: str) -> Path:
        """One of the store's folders (``raw``, ``nodes``, ``patches``, ...; see ``LAYOUT``)."""
        if name not in LAYOUT:
            raise ValueError(f"{name!r} is not a folder of the store layout")
        return self.root / name

    def path_of(self, relative: str) -> Path:
        """The file or folder at ``relative``, a name inside the store as ``relative`` gives it (what a
        walk of the store found; "" is the store itself). Code that means a known file uses its property."""
        return self.root / relative

    @property
    def config_path(self) -> Path:
        return self.root / fmt.PATHS["config"]

    @property
    def audit_path(self) -> Path:
        return self.root / fmt.PATHS["audit"]

    @property
    def hook_failures_path(self) -> Path:
        return self.root / HOOK_FAILURES

    @property
    def index_path(self) -> Path:
        return self.root / INDEX_FILE

    @property
    def semantic_path(self) -> Path:
        return self.root / SEMANTIC_FILE

    @property
    def codegraphs_dir(self) -> Path:
        return self.root / CODEGRAPHS

    @property
    def project_cache_path(self) -> Path:
        """The root commit of each git folder the hook has seen (``cclg.core.repository``): a cache."""
        return self.root / PROJECT_CACHE

    @property
    def rule_evidence_path(self) -> Path:
        return self.root / RULE_EVIDENCE

    @property
    def usage_log_path(self) -> Path:
        return self.root / USAGE_LOG

    @property
    def usage_summary_path(self) -> Path:
        return self.root / USAGE_SUMMARY

    def digest_path(self, session_id: str) -> Path:
        """The digest of a session's event log (``cclg.ledger.sessions.digest``)."""
        return self.root / DIGESTS / f"{session_id}.json"

    @property
    def turns_dir(self) -> Path:
        return self.root / TURNS

    @property
    def staging_dir(self) -> Path:
        return self.root / STAGING

    @property
    def semantic_refusals_path(self) -> Path:
        return self.root / SEMANTIC_REFUSALS

    @property
    def sources_path(self) -> Path:
        """The registered sources (``cclg sources``) and, per source, the items its last sync read."""
        return self.root / SOURCES

    @property
    def semantic_answers_path(self) -> Path:
        """How many prompts the semantic helper answered in time, and missed, per hour (``cclg doctor``)."""
        return self.root / SEMANTIC_ANSWERS

    @property
    def sync_dir(self) -> Path:
        """Team memory's folder (``cclg.sync``): ``remotes.json``, and per remote its clone, lock and state."""
        return self.root / SYNC

    @property
    def sync_remotes_path(self) -> Path:
        return self.root / SYNC / "remotes.json"

    @property
    def sync_identity_path(self) -> Path:
        """This store's id among the stores that sync (made by the first sync)."""
        return self.root / SYNC / "store.json"

    @property
    def sync_settle_path(self) -> Path:
        """The memories an interrupted sync brought in whose statuses are still to be settled."""
        return self.root / SYNC / "settle.json"

    def sync_clone(self, remote: str) -> Path:
        """The git clone of ``remote`` the sync goes through (never the store's own files)."""
        return self.root / SYNC / "remotes" / remote

    def sync_lock_path(self, remote: str) -> Path:
        return self.root / SYNC / "remotes" / f"{remote}.lock"

    def sync_state_path(self, remote: str) -> Path:
        """When ``remote`` last synced and what went each way."""
        return self.root / SYNC / "remotes" / f"{remote}.state.json"

    def drop_index(self, *, vectors: bool = True) -> None:
        """Delete the search index, the memories' vectors (unless ``vectors`` is false) and their SQLite
        side files (the next reader rebuilds the index; the semantic helper embeds the memories again)."""
        for name in (INDEX_FILE, SEMANTIC_FILE) if vectors else (INDEX_FILE,):
            for leftover in self.root.glob(name + "*"):
                leftover.unlink(missing_ok=True)

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    # ------------------------------------------------------------ locking and batching

    @contextlib.contextmanager
    def lock(self, timeout: float = LOCK_TIMEOUT_SECONDS) -> Iterator[None]:
        """Exclusive store lock for ledger changes: across processes (``flock``) and
        across threads sharing this object; re-entrant within the thread holding it."""
        deadline = time.monotonic() + timeout
        if not self._mutex.acquire(timeout=timeout):
            raise ConcurrencyError(f"the store {self.root} stayed locked for {timeout:.0f}s (by another thread)")
        try:
            if self._lock_depth:
                self._lock_depth += 1
                try:
                    yield
                finally:
                    self._lock_depth -= 1
                return
            with self._file_lock(deadline, timeout):
                yield
        finally:
            self._mutex.release()

    @contextlib.contextmanager
    def _file_lock(self, deadline: float, timeout: float) -> Iterator[None]:
        fd = os.open(self.root / fmt.PATHS["lock"], os.O_RDWR | os.O_CREAT, 0o600)
        try:
            taken = flock_before(fd, deadline, poll=0.005)
        except OSError:
            os.close(fd)
            raise
        if not taken:
            os.close(fd)
            raise ConcurrencyError(f"the store {self.root} stayed locked for {timeout:.0f}s")
        self._lock_fd, self._lock_depth = fd, 1
        try:
            self.healed = self._finish_killed_writes()
            yield
        finally:
            self._lock_depth = 0
            self._lock_fd = None
            os.close(fd)

    def _finish_killed_writes(self) -> list[str]:
        """With the store lock just taken: what killed writers left in ``tmp/`` (one listing of a
        folder that is nearly always empty). A record staged for a patch that is on disk gets its
        name (the patch is finished); any other temp file is deleted. Audited; returns what was done."""
        try:
            with os.scandir(self.root / TEMP) as entries:
                names = sorted(entry.name for entry in entries)
        except OSError:
            return []
        done, named = [], set()
        for name in names:
            match = TEMP_RE.match(name)
            if match is None or pid_alive(int(match["pid"])):
                continue
            target = self._staged_target(match["name"])
            if target is not None and not target.exists():
                publish(self.root / TEMP / name, target, replace=False, exclusive=True, durable=False)
                named.add(target.parent)
                done.append(f"finished an interrupted patch: named {self.relative(target)}")
            else:
                (self.root / TEMP / name).unlink(missing_ok=True)
                done.append(f"removed orphan temp file {TEMP}/{name}")
        for folder in named:  # once per folder: a killed import may have staged thousands
            fsync_dir(folder)
        if done:
            self.audit("repair_applied", actions=done)
        return done

    def _staged_target(self, name: str) -> Path | None:
        """Where a record staged as ``<patch id>.<record id>.json`` goes, when its patch is on disk."""
        patch_id, _, file_name = name.partition(".")
        prefix = file_name.partition("_")[0]
        folder = {"mem": "nodes", "edge": "edges"}.get(prefix)
        if folder is None or not file_name.endswith(".json") or not is_valid_id(file_name[:-5], prefix):
            return None
        on_disk = is_valid_id(patch_id, "patch") and (self.root / "patches" / f"{patch_id}.json").exists()
        return self.root / folder / file_name if on_disk else None

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Defer fsyncs: many files are written, then one ``os.sync()`` makes them durable. Atomicity is
        unchanged (every file still appears whole by rename); only the durability point moves to the end."""
        self._batch_depth += 1
        try:
            yield
        finally:
            self._batch_depth -= 1
            if self._batch_depth == 0:
                os.sync()

    @contextlib.contextmanager
    def after_commit(
        self, what: str, then: str = "the next command (or `cclg doctor --repair`) finishes it"
    ) -> Iterator[None]:
        """The steps of a write that follow its commit point (the patch file on disk): naming its staged
        records, its audit lines, the targets it retires, the index. When the disk refuses one, the
        write still stands (the next command that takes the store lock names what is staged, and
        ``cclg doctor --repair`` replays the ledger), so the refusal is a warning in ``warnings``,
        never an error that would say nothing was written; ``then`` says what becomes of the rest."""
        try:
            yield
        except Exception as exc:
            if disk_refusal(exc) is None:
                raise
            self.warnings.append(f"{what} is written, but the disk refused what follows it ({exc}); {then}")

    # ------------------------------------------------------------ whole-file writes

    def write_file(self, path: Path, data: bytes, *, replace: bool = True, durable: bool = True) -> None:
        """Write ``data`` to ``path`` atomically. With ``replace=False`` an existing file is an error;
        with ``durable=False`` no fsync (a projection, rebuilt from the files when it is lost).

        Inside ``batch()`` the fsyncs wait for the batch's end. Under the store lock a
        new record is published by check-then-rename: every writer of ledger records
        holds the lock, so nothing can appear in between (and it costs one system
        call less than link + unlink, which matters for imports).
        """
        atomic_write(
            path,
            data,
            replace=replace,
            durable=durable and not self._batch_depth,
            exclusive=self._lock_depth > 0,
            temp_dir=self._temp_dir(path.parent),
        )

    def stage_file(self, path: Path, data: bytes, patch_id: str) -> Path:
        """Write ``data`` for the new record ``path`` that patch ``patch_id`` makes, without giving it its
        name yet; returns the staged file, which ``publish_file`` puts in place. If the writer is
        killed first, the next process that takes the store lock names it when the patch is on disk
        and deletes it when it is not."""
        name = f"{patch_id}.{path.name}"
        return write_temp(self._temp_dir(path.parent), name, data, durable=not self._batch_depth)

    def publish_file(self, staged: Path, path: Path) -> None:
        """Give a file staged by ``stage_file`` its name ``path``; an existing file is an error."""
        publish(staged, path, replace=False, exclusive=self._lock_depth > 0, durable=not self._batch_depth)

    def make_durable(self) -> None:
        """Make everything written so far durable (inside a batch; outside one, every write is already)."""
        if self._batch_depth:
            os.sync()

    def _temp_dir(self, folder: Path) -> Path:
        """Where the temp files of ``folder`` go: ``tmp/``, unless ``folder`` is on another file system
        than ``tmp/`` (a folder linked to another disk: a rename cannot cross) or ``tmp/`` is missing."""
        if folder not in self._temp_dirs:
            with contextlib.suppress(OSError):
                same = os.stat(folder).st_dev == os.stat(self.root / TEMP).st_dev
                self._temp_dirs[folder] = self.root / TEMP if same else folder
        return self._temp_dirs.get(folder, folder)

    def shrink_temp_folder(self) -> None:
        """Make ``tmp/`` anew: a folder keeps the size of the most entries it ever held, and once an import
        staged 100,000 files there, listing it (which every write does) cost 3 ms for good. A folder is
        renamed over another only while that one is empty, so no other writer's temp file is ever lost."""
        fresh = self.root / f"{TEMP}.{os.getpid()}.new"
        try:
            fresh.mkdir(mode=0o700)
            os.rename(fresh, self.root / TEMP)
        except OSError:  # not empty (another writer is at work), or no tmp/ here: it stays as it is
            with contextlib.suppress(OSError):
                fresh.rmdir()

    def write_node(self, node: MemoryNode, *, new: bool = False) -> None:
        self.write_file(self.node_path(node.id), dumps(node.to_dict()), replace=not new)

    def write_patch(self, patch: MemoryPatch) -> None:
        self.write_file(self.patch_path(patch.id), dumps(patch.to_dict()), replace=False)

    def write_session(self, session: Session, *, new: bool = False) -> None:
        self.write_file(self.session_path(session.id), dumps(session.to_dict()), replace=not new)

    # ------------------------------------------------------------ appends

    def append(self, path: Path, records: Iterable[dict[str, Any]]) -> None:
        """Append records to a JSON-lines log: one write, under an exclusive lock."""
        data = b"".join(jsonl_line(r) for r in records)
        if not data:
            return
        with self.locked_log(path) as fd:
            torn = set_aside_torn_tail(fd, path)
            if torn:
                note = {"event": "torn_tail_set_aside", "path": self.relative(path), "bytes": torn}
                data = jsonl_line({**note, "created_at": now_iso()}) + data
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if not self._batch_depth:
                os.fsync(fd)

    @contextlib.contextmanager
    def locked_log(self, path: Path) -> Iterator[int]:
        """The log ``path`` open to append, under its exclusive ``flock``. A log replaced while this waited
        (rewritten whole by ``cclg.ledger.redaction``) is opened again: no append goes to the replaced file."""
        while True:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                break
            os.close(fd)
        try:
            yield fd
        finally:
            os.close(fd)  # also releases the flock

    def audit(self, event: str, **fields: Any) -> None:
        self.audit_many([audit_record(event, **fields)])

    def audit_many(self, records: list[dict[str, Any]]) -> None:
        self.append(self.audit_path, records)

    # ------------------------------------------------------------ raw evidence

    def write_raw(self, data: bytes, name: str) -> tuple[str, bool]:
        """Keep ``data`` verbatim under ``raw/``. Returns (relative path, newly written).

        The file name is the sanitised ``name`` plus the start of the content's
        SHA-256, so the same bytes are stored once and different bytes never
        overwrite each other.
        """
        digest = sha256_hex(data)
        base = safe_name(Path(name).name)
        stem, dot, ext = base.rpartition(".")
        if not dot or not stem:
            stem, ext = base, ""
        suffix = f".{safe_name(ext, 16)}" if ext else ""
        for length in (12, 64):
            path = self.root / "raw" / f"{stem}-{digest[:length]}{suffix}"
            try:
                self.write_file(path, data, replace=False)
            except FileExistsError:
                if sha256_hex(path.read_bytes()) == digest:
                    return self.relative(path), False
                continue
            self.audit("raw_written", path=self.relative(path), sha256=digest, bytes=len(data))
            return self.relative(path), True
        raise UsageError(f"could not find a free raw file name for {name!r}")

    # ------------------------------------------------------------ reading

    def _read_json(self, path: Path) -> Any:
        try:
            return parse_json(path.read_bytes())
        except FileNotFoundError:
            raise
        except (ValueError, UnicodeDecodeError) as exc:
            raise ValidationError(f"{self.relative(path)}: not valid JSON: {exc}") from exc

    def read_node(self, node_id: str) -> MemoryNode:
        node: MemoryNode = self._read_record(self.node_path(node_id), MemoryNode.from_dict, f"memory {node_id}")
        if node.id != node_id:
            raise ValidationError(f"nodes/{node_id}.json: field 'id' is {node.id!r}, not the file name")
        return node

    def read_patch(self, patch_id: str) -> MemoryPatch:
        patch: MemoryPatch = self._read_record(self.patch_path(patch_id), MemoryPatch.from_dict, f"patch {patch_id}")
        return patch

    def read_session(self, session_id: str) -> Session:
        session: Session = self._read_record(self.session_path(session_id), Session.from_dict, f"session {session_id}")
        return session

    def _read_record(self, path: Path, parse: Any, name: str) -> Any:
        try:
            data = self._read_json(path)
        except FileNotFoundError:
            raise NotFoundError(f"no {name} in {self.root}") from None
        return parse(data, where=self.relative(path))

    def raw_record_path(self, raw_name: str) -> Path:
        """The record of the raw file ``raw_name`` (its MIME type, size and SHA-256 when kept), in
        ``raw_records/``: apart from the evidence, so ``raw/`` holds evidence only."""
        return self.root / "raw_records" / f"{safe_name(raw_name)}.json"

    def raw_record(self, raw_name: str) -> dict[str, Any] | None:
        """The record ``cclg raw`` kept for the raw file ``raw_name``; None when there is none (evidence
        the hook keeps has none) or it cannot be read."""
        try:
            data = parse_json(self.raw_record_path(raw_name).read_bytes())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def write_raw_record(self, raw_name: str, data: bytes, mime: str) -> None:
        """Keep the record of the raw file ``raw_name``, which holds ``data``: its MIME type, size and
        SHA-256, and when it was kept; unless one is kept already (never replaced)."""
        record = {"name": raw_name, "mime": mime, "bytes": len(data), "sha256": sha256_hex(data), "kept_at": now_iso()}
        with contextlib.suppress(FileExistsError):
            self.write_file(self.raw_record_path(raw_name), dumps(record), replace=False)

    def raw_files(self) -> list[Path]:
        """The raw evidence files, sorted by name."""
        return sorted(p for p in self.folder("raw").iterdir() if p.is_file() and not p.name.startswith("."))

    def raw_file(self, name: str) -> Path | None:
        """The raw evidence file ``name`` (as a span's ``source_id`` names it), or None when there is
        none or the name points outside ``raw/``."""
        raw = self.folder("raw").resolve()
        path = (raw / name).resolve()
        return path if path.parent == raw and path.is_file() else None

    def record_files(self, folder: str) -> list[Path]:
        """The record files of ``nodes``, ``patches``, ``edges`` or ``sessions``, sorted by name."""
        return sorted(Path(entry.path) for entry in self.scan_records(folder)[0])

    def stray_files(self, folder: str) -> list[Path]:
        """What a record folder holds under a ``*.json`` name that is no record: a sync tool's conflict
        copy (``mem_X.sync-conflict-....json``), a folder. Readers ignore them; ``cclg doctor`` lists them."""
        return sorted(Path(entry.path) for entry in self.scan_records(folder)[1])

    def scan_records(self, folder: str) -> tuple[list[os.DirEntry[str]], list[os.DirEntry[str]]]:
        """(the record files of ``folder``: regular files named ``<id>.json``, the id valid for the
        folder; the stray ``*.json`` entries), unsorted."""
        records: list[os.DirEntry[str]] = []
        strays: list[os.DirEntry[str]] = []
        with os.scandir(self.root / folder) as entries:
            for entry in entries:
                name = entry.name
                if name.startswith(".") or not name.endswith(".json"):
                    continue
                (records if is_record_name(folder, name) and entry.is_file() else strays).append(entry)
        return records, strays

    def _load_all(self, folder: str, parse: Any) -> list[Any]:
        """Every record of ``folder``; one whose id is not its file name's (a copy) is left out."""
        records, problems = [], []
        for path in self.record_files(folder):
            where = self.relative(path)
            try:
                record = parse(self._read_json(path), where)
            except ValidationError as exc:
                problems.extend(exc.problems)
                continue
            if record.id == path.stem:
                records.append(record)
        if problems:
            raise ValidationError(
                f"{len(problems)} problem(s) in {folder}/ (run `cclg doctor`): {problems[0]}", problems
            )
        return records

    def load_nodes(self) -> dict[str, MemoryNode]:
        return {n.id: n for n in self._load_all("nodes", MemoryNode.from_dict)}

    def load_patches(self) -> list[MemoryPatch]:
        """Every patch, in ledger order: by ``created_at``, then id."""
        patches = self._load_all("patches", MemoryPatch.from_dict)
        return sorted(patches, key=patch_order)

    def load_edges(self) -> list[MemoryEdge]:
        return self._load_all("edges", MemoryEdge.from_dict)

    def load_sessions(self) -> list[Session]:
        return self._load_all("sessions", Session.from_dict)

    def session_events(self, session_id: str) -> list[dict[str, Any]]:
        """A session's events: those embedded in its file, then those in its event log."""
        events: list[dict[str, Any]] = []
        if self.session_path(session_id).exists():
            events.extend(self.read_session(session_id).events)
        events.extend(read_jsonl(self.session_events_path(session_id)).records)
        return events

    # ------------------------------------------------------------ recovery

    def logs(self) -> list[Path]:
        """Every JSON-lines log of the store."""
        logs = sorted((self.root / "audit").glob("*.jsonl"))  # the audit, hook failures, rule evidence
        logs.extend(sorted((self.root / "sessions").glob("*.events.jsonl")))
        return logs

    def orphan_temp_files(self) -> list[Path]:
        """Temp files whose writer process is gone (left by a killed write)."""
        orphans = []
        for folder in (self.root, *(self.root / name for name in LAYOUT)):
            if not folder.is_dir():
                continue
            for path in folder.iterdir():
                match = TEMP_RE.match(path.name)
                if match and not pid_alive(int(match["pid"])):
                    orphans.append(path)
        return sorted(orphans)

    def set_aside(self, path: Path) -> str:
        """Move a leftover record file to ``recovered/<folder>/``, out of the store's record sets."""
        target = self.root / "recovered" / path.parent.name / path.name
        for folder in (target.parent.parent, target.parent):
            with contextlib.suppress(FileExistsError):
                folder.mkdir(mode=0o700)
        os.replace(path, target)
        fsync_dir(path.parent)
        return self.relative(target)

    def recover(self) -> list[str]:
        """Finish what killed writers left: staged records of a patch on disk named, torn log tails set
        aside, orphan temp files deleted."""
        actions = []
        with self.lock():
            healed = list(self.healed)  # tmp/, done as the lock was taken (and audited then)
            for path in self.orphan_temp_files():
                path.unlink(missing_ok=True)
                actions.append(f"removed orphan temp file {self.relative(path)}")
            for log in self.logs():
                with self.locked_log(log) as fd:
                    torn = set_aside_torn_tail(fd, log)
                if torn:
                    where = self.relative(log)
                    actions.append(f"set aside a torn last line of {where} ({torn} bytes) in {where}.torn")
        if actions:
            self.audit("repair_applied", actions=actions)
        return healed + actions


def is_record_name(folder: str, name: str) -> bool:
    """Whether ``name`` is a record's file name in the record folder ``folder``: ``<id>.json``, the id valid there."""
    if not name.endswith(".json"):
        return False
    prefix, stem = RECORD_PREFIXES[folder], name[:-5]
    return is_valid_session_id(stem) if prefix is None else is_valid_id(stem, prefix)


def patch_order(patch: MemoryPatch) -> tuple[datetime, str]:
    """Ledger order: creation time (as a moment, whatever the offset), then id."""
    return (parse_time(patch.created_at), patch.id)


def audit_record(event: str, **fields: Any) -> dict[str, Any]:
    if event not in fmt.AUDIT_EVENTS:
        raise ValueError(f"unknown audit event {event!r}")
    return {"event": event, **fields, "created_at": now_iso()}
