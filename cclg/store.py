"""Where the store lives, every path in it, and every write to it.

The store's files are written here and nowhere else (through ``cclg.files``'
primitives). Its promises:

- Whole-file writes are atomic (``cclg.files.atomic_write``): a temp file in the
  same folder, fsync, rename, fsync of the folder. A reader sees the old file or
  the new one, never half.
  Record files that must never be replaced (patches, edges, raw evidence) are
  published with a hard link, which fails instead of overwriting.
- Appends to logs (the audit log, session event logs) are one ``write`` per call
  under an exclusive ``flock``. A last line without its newline (left by a killed
  writer) is never parsed: readers skip it and report it, and the next append or
  ``recover()`` moves it to ``<log>.torn`` before writing.
- Changes to the ledger (nodes, patches, edges) happen under the store lock
  (``Store.lock()``), so two processes never interleave patches.

The store's location is decided by ``resolve_root``: ``--root``, else
``$CCLG_HOME``, else ``~/.cclg``.
"""

from __future__ import annotations

import _thread
import contextlib
import errno
import fcntl
import json
import os
import re
import time
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path

from cclg import format as fmt
from cclg.errors import ConcurrencyError, NotFoundError, StoreNotFoundError, UsageError, ValidationError
from cclg.files import atomic_write, fsync_dir, jsonl_line, pid_alive, read_jsonl, safe_name
from cclg.ids import is_valid_id, is_valid_session_id, now_iso, parse_time, sha256_hex
from cclg.records import MemoryEdge, MemoryNode, MemoryPatch, Session, dumps

TYPE_CHECKING = False  # typing costs the hook ~4 ms of start-up; annotations are strings anyway
if TYPE_CHECKING:
    from typing import Any

LAYOUT = ("raw", "nodes", "patches", "edges", "sessions", "audit", "active", "active/codegraphs")
LOCK_TIMEOUT_SECONDS = 30.0
HOOK_FAILURES = "audit/hook_failures.jsonl"
INDEX_FILE = "index.sqlite"  # the search index: a projection, deleted and rebuilt at will
SEMANTIC_FILE = "semantic.sqlite"  # the memories' vectors (cclg.semantic): a projection too
CODEGRAPHS = "active/codegraphs"
_TEMP_RE = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.[0-9a-f]+\.tmp$")


def resolve_root(root: str | os.PathLike[str] | None = None) -> Path:
    """The store folder: ``root`` if given, else ``$CCLG_HOME``, else ``~/.cclg``."""
    if root is not None and str(root) != "":
        return Path(root).expanduser()
    env = os.environ.get("CCLG_HOME")
    if env:
        return Path(env).expanduser()
    return Path("~/.cclg").expanduser()


class Store:
    """A cclg store on disk. Open one with ``Store.open(root)`` or create it with ``Store.init``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.config: dict[str, Any] = {}  # config.json, as read by ``open``
        # Threads sharing this object (the MCP server runs tools in worker threads)
        # take turns on this mutex before the file lock; its owner may re-enter.
        self._mutex = _thread.RLock()
        self._lock_depth = 0
        self._lock_fd: int | None = None
        self._batch_depth = 0

    # ------------------------------------------------------------ opening

    @classmethod
    def open(cls, root: str | os.PathLike[str] | None = None) -> Store:
        """Open an existing store; ``StoreNotFoundError`` when the folder is not one."""
        path = resolve_root(root)
        config = path / fmt.PATHS["config"]
        if not path.is_dir():
            raise StoreNotFoundError(
                f"no cclg store at {path}: the folder does not exist (run `cclg --root {path} init`)"
            )
        if not config.is_file() or not (path / "nodes").is_dir():
            raise StoreNotFoundError(
                f"{path} is not a cclg store (no config.json and nodes/); run `cclg --root {path} init`"
            )
        try:
            settings = json.loads(config.read_text(encoding="utf-8"))
            schema = settings.get("schema_version")
        except (OSError, ValueError, AttributeError) as exc:
            raise StoreNotFoundError(f"{config} is not readable as a store config: {exc}") from exc
        if schema != fmt.STORE_SCHEMA:
            raise StoreNotFoundError(f"{config}: store schema {schema!r} is not {fmt.STORE_SCHEMA!r}")
        store = cls(path)
        store.config = settings
        return store

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
        for name in LAYOUT:
            (path / name).mkdir(exist_ok=True, mode=0o700)
        store = cls(path)
        if config.exists():
            return cls.open(path), False
        created = now_iso()
        store.write_file(
            config,
            dumps({"schema_version": fmt.STORE_SCHEMA, "format": fmt.FORMAT_ID, "created_at": created}),
            replace=False,
        )
        store.audit("store_initialized", root=".")
        return store, True

    # ------------------------------------------------------------ paths

    def node_path(self, node_id: str) -> Path:
        if not is_valid_id(node_id, "mem"):
            raise UsageError(f"not a memory id: {node_id!r} (ids look like mem_...)")
        return self.root / "nodes" / f"{node_id}.json"

    def patch_path(self, patch_id: str) -> Path:
        if not is_valid_id(patch_id, "patch"):
            raise UsageError(f"not a patch id: {patch_id!r} (ids look like patch_...)")
        return self.root / "patches" / f"{patch_id}.json"

    def edge_path(self, edge_id: str) -> Path:
        if not is_valid_id(edge_id, "edge"):
            raise UsageError(f"not an edge id: {edge_id!r} (ids look like edge_...)")
        return self.root / "edges" / f"{edge_id}.json"

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

    def drop_index(self) -> None:
        """Delete the search index, the memories' vectors and their SQLite side files (the next reader
        rebuilds the index; the semantic helper embeds the memories again)."""
        for name in (INDEX_FILE, SEMANTIC_FILE):
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
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    raise
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise ConcurrencyError(f"the store {self.root} stayed locked for {timeout:.0f}s") from exc
                time.sleep(0.005)
        self._lock_fd, self._lock_depth = fd, 1
        try:
            yield
        finally:
            self._lock_depth = 0
            self._lock_fd = None
            os.close(fd)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Defer fsyncs: many files are written, then one ``os.sync()`` makes them durable.

        Atomicity is unchanged (every file still appears whole by rename); only the
        durability point moves to the end of the batch.
        """
        self._batch_depth += 1
        try:
            yield
        finally:
            self._batch_depth -= 1
            if self._batch_depth == 0:
                os.sync()

    # ------------------------------------------------------------ whole-file writes

    def write_file(self, path: Path, data: bytes, *, replace: bool = True) -> None:
        """Write ``data`` to ``path`` atomically. With ``replace=False`` an existing file is an error.

        Inside ``batch()`` the fsyncs wait for the batch's end. Under the store lock a
        new record is published by check-then-rename: every writer of ledger records
        holds the lock, so nothing can appear in between (and it costs one system
        call less than link + unlink, which matters for imports).
        """
        atomic_write(path, data, replace=replace, durable=not self._batch_depth, exclusive=self._lock_depth > 0)

    def write_node(self, node: MemoryNode, *, new: bool = False) -> None:
        self.write_file(self.node_path(node.id), dumps(node.to_dict()), replace=not new)

    def write_patch(self, patch: MemoryPatch) -> None:
        self.write_file(self.patch_path(patch.id), dumps(patch.to_dict()), replace=False)

    def write_edge(self, edge: MemoryEdge) -> None:
        self.write_file(self.edge_path(edge.id), dumps(edge.to_dict()), replace=False)

    def write_session(self, session: Session) -> None:
        self.write_file(self.session_path(session.id), dumps(session.to_dict()))

    # ------------------------------------------------------------ appends

    def append(self, path: Path, records: Iterable[dict[str, Any]]) -> None:
        """Append records to a JSON-lines log: one write, under an exclusive lock."""
        data = b"".join(jsonl_line(r) for r in records)
        if not data:
            return
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            torn = self._set_aside_torn_tail(fd, path)
            if torn:
                data = (
                    jsonl_line(
                        {
                            "event": "torn_tail_set_aside",
                            "path": self.relative(path),
                            "bytes": torn,
                            "created_at": now_iso(),
                        }
                    )
                    + data
                )
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if not self._batch_depth:
                os.fsync(fd)
        finally:
            os.close(fd)  # also releases the flock

    def _set_aside_torn_tail(self, fd: int, path: Path) -> int:
        """With the log locked: move a final line lacking its newline to ``<log>.torn``."""
        size = os.fstat(fd).st_size
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return 0
        chunk = 1 << 16
        end = size
        while True:
            start = max(0, end - chunk)
            block = os.pread(fd, end - start, start)
            cut = block.rfind(b"\n")
            if cut >= 0:
                keep = start + cut + 1
                break
            if start == 0:
                keep = 0
                break
            end = start
        fragment = os.pread(fd, size - keep, keep)
        torn_path = path.with_name(path.name + ".torn")
        tfd = os.open(torn_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(tfd, fragment + b"\n")
            os.fsync(tfd)
        finally:
            os.close(tfd)
        os.ftruncate(fd, keep)
        return len(fragment)

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
            return json.loads(path.read_bytes())
        except FileNotFoundError:
            raise
        except (ValueError, UnicodeDecodeError) as exc:
            raise ValidationError(f"{self.relative(path)}: not valid JSON: {exc}") from exc

    def read_node(self, node_id: str) -> MemoryNode:
        path = self.node_path(node_id)
        try:
            data = self._read_json(path)
        except FileNotFoundError:
            raise NotFoundError(f"no memory {node_id} in {self.root}") from None
        node = MemoryNode.from_dict(data, where=self.relative(path))
        if node.id != node_id:
            raise ValidationError(f"{self.relative(path)}: field 'id' is {node.id!r}, not the file name")
        return node

    def read_patch(self, patch_id: str) -> MemoryPatch:
        path = self.patch_path(patch_id)
        try:
            data = self._read_json(path)
        except FileNotFoundError:
            raise NotFoundError(f"no patch {patch_id} in {self.root}") from None
        return MemoryPatch.from_dict(data, where=self.relative(path))

    def read_session(self, session_id: str) -> Session:
        path = self.session_path(session_id)
        try:
            data = self._read_json(path)
        except FileNotFoundError:
            raise NotFoundError(f"no session {session_id} in {self.root}") from None
        return Session.from_dict(data, where=self.relative(path))

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
        return sorted(p for p in (self.root / folder).glob("*.json") if not p.name.startswith("."))

    def _load_all(self, folder: str, parse: Any) -> list[Any]:
        records, problems = [], []
        for path in self.record_files(folder):
            where = self.relative(path)
            try:
                records.append(parse(self._read_json(path), where))
            except ValidationError as exc:
                problems.extend(exc.problems)
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
        logs = [p for p in (self.audit_path, self.hook_failures_path) if p.exists()]
        logs.extend(sorted((self.root / "sessions").glob("*.events.jsonl")))
        return logs

    def orphan_temp_files(self) -> list[Path]:
        """Temp files whose writer process is gone (left by a killed write)."""
        orphans = []
        for folder in (self.root, *(self.root / name for name in LAYOUT)):
            if not folder.is_dir():
                continue
            for path in folder.iterdir():
                match = _TEMP_RE.match(path.name)
                if match and not pid_alive(int(match["pid"])):
                    orphans.append(path)
        return sorted(orphans)

    def set_aside(self, path: Path) -> str:
        """Move a leftover record file to ``recovered/<folder>/``, out of the store's record sets."""
        target = self.root / "recovered" / path.parent.name / path.name
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.replace(path, target)
        fsync_dir(path.parent)
        return self.relative(target)

    def recover(self) -> list[str]:
        """Finish what killed writers left: set torn log tails aside, delete orphan temp files."""
        actions = []
        with self.lock():
            for path in self.orphan_temp_files():
                path.unlink(missing_ok=True)
                actions.append(f"removed orphan temp file {self.relative(path)}")
            for log in self.logs():
                fd = os.open(log, os.O_RDWR)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                    torn = self._set_aside_torn_tail(fd, log)
                finally:
                    os.close(fd)
                if torn:
                    actions.append(
                        f"set aside a torn last line of {self.relative(log)} ({torn} bytes) "
                        f"in {self.relative(log)}.torn"
                    )
        if actions:
            self.audit("repair_applied", actions=actions)
        return actions


def patch_order(patch: MemoryPatch) -> tuple[datetime, str]:
    """Ledger order: creation time (as a moment, whatever the offset), then id."""
    return (parse_time(patch.created_at), patch.id)


def audit_record(event: str, **fields: Any) -> dict[str, Any]:
    if event not in fmt.AUDIT_EVENTS:
        raise ValueError(f"unknown audit event {event!r}")
    return {"event": event, **fields, "created_at": now_iso()}
