"""All-or-nothing writes of many records: an import becomes current whole, or not at all.

A ``Stage`` gathers the record files of one import and writes them under
``staging/<pid>-<random>/``, at their paths in the store (``nodes/<id>.json``,
``patches/<id>.json``, ...), where no reader looks. ``Stage.commit`` then:

1. makes the staged files durable (one ``os.sync``);
2. writes ``COMMIT`` durably, naming the records and holding the audit records:
   the commit point;
3. appends those audit records to the store's audit log and marks the stage
   ``AUDITED``;
4. moves each file into place, patches, edges and sessions first and nodes last,
   so no memory shows before the patch that made it; fsyncs the folders, removes
   the stage and tells the search index.

A killed writer leaves its stage behind (its name starts with the writer's pid).
``finish`` deletes a stage that never reached its commit point, of which nothing
ever showed, and completes one that did (steps 3 and 4, each at most once more;
the audit records may then be appended twice, never lost), so all of it shows.
It is cheap when there is nothing to finish, and takes the store lock only when a
stage's writer is gone. ``cclg.api.open_store``, ``add`` and both imports call it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from cclg.core.files import fsync_dir, pid_alive
from cclg.core.records import MemoryEdge, MemoryNode, MemoryPatch, Session, dumps
from cclg.core.store import Store, audit_record
from cclg.ledger.index import COMPACT_AFTER, IndexChanges

COMMIT = "COMMIT"
AUDITED = "AUDITED"
# The order files are moved into place: every memory after the patch that creates it.
ORDER = ("patches", "edges", "sessions", "nodes")


class Stage:
    """The records of one import, written together by ``commit`` (call it under the store lock)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.files: dict[str, dict[str, bytes]] = {name: {} for name in ORDER}

    def add_node(self, node: MemoryNode) -> None:
        self.files["nodes"][self.store.node_path(node.id).name] = dumps(node.to_dict())

    def add_patch(self, patch: MemoryPatch) -> None:
        self.files["patches"][self.store.patch_path(patch.id).name] = dumps(patch.to_dict())

    def add_edge(self, edge: MemoryEdge) -> None:
        self.files["edges"][self.store.edge_path(edge.id).name] = dumps(edge.to_dict())

    def add_session(self, session: Session) -> None:
        self.files["sessions"][self.store.session_path(session.id).name] = dumps(session.to_dict())

    def commit(self, audit: list[dict[str, Any]]) -> None:
        """Write everything, all or nothing (see the module docstring); ``audit`` is appended once."""
        store = self.store
        store.staging_dir.mkdir(mode=0o700, exist_ok=True)
        folder = store.staging_dir / f"{os.getpid()}-{os.urandom(6).hex()}"
        folder.mkdir(mode=0o700)
        try:
            with store.batch():  # one os.sync at its end makes every staged file durable
                for name, files in self.files.items():
                    if files:
                        (folder / name).mkdir(mode=0o700)
                    for file_name, data in files.items():
                        store.write_file(folder / name / file_name, data, replace=False)
            manifest = {"audit": audit, **{name: sorted(Path(f).stem for f in self.files[name]) for name in ORDER}}
            store.write_file(folder / COMMIT, json.dumps(manifest, ensure_ascii=False).encode("utf-8"))
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)  # never committed: nothing of it shows
            raise
        with store.after_commit("the import"):  # committed: the next command finishes what the disk refuses now
            _complete(store, folder)


def _complete(store: Store, folder: Path) -> int:
    """Steps 3 and 4 for a committed stage; returns how many files it moved into place."""
    manifest = json.loads((folder / COMMIT).read_bytes())
    audit, node_ids, patch_ids = manifest["audit"], list(manifest["nodes"]), list(manifest["patches"])
    if not (folder / AUDITED).exists():
        store.audit_many(audit)
        store.write_file(folder / AUDITED, b"")
    moved = 0
    with store.batch():  # the folders are fsynced one by one below; the batch saves a sync per file
        for name in ORDER:
            staged = folder / name
            if not staged.is_dir():
                continue
            target = store.folder(name)
            for path in sorted(staged.iterdir()):
                try:
                    store.publish_file(path, target / path.name)
                    moved += 1
                except FileExistsError:  # moved there before a crash: a record is never overwritten
                    pass
            fsync_dir(target)
    shutil.rmtree(folder)
    _remove_if_empty(folder.parent)
    IndexChanges(store).changed(node_ids, patch_ids, compact=len(node_ids) >= COMPACT_AFTER)
    return moved


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        return
    fsync_dir(folder.parent)


def finish(store: Store) -> list[str]:
    """Complete or discard the stages of killed writers; returns what was done.

    Cheap when there is nothing to do (one ``stat``), and takes the store lock only when a
    stage's writer is gone: a running import's stage is left to it."""
    if not _dead_stages(store):
        return []
    actions = []
    with store.lock():
        for folder in _dead_stages(store):
            where = store.relative(folder)
            if not (folder / COMMIT).is_file():
                shutil.rmtree(folder)
                actions.append(f"discarded the unfinished import {where}: it never reached its commit point")
                continue
            try:
                moved = _complete(store, folder)
            except (ValueError, KeyError, TypeError):  # a damaged manifest: kept for a human, out of the way
                actions.append(f"set aside the damaged import {where} in {store.set_aside(folder)}")
                continue
            actions.append(f"finished the interrupted import {where} ({moved} file(s) moved into place)")
        _remove_if_empty(store.staging_dir)
        if actions:
            store.audit_many([audit_record("repair_applied", actions=actions)])
    return actions


def _dead_stages(store: Store) -> list[Path]:
    """The stages whose writer process is gone, sorted."""
    try:
        with os.scandir(store.staging_dir) as entries:
            names = sorted(entry.name for entry in entries if entry.is_dir())
    except OSError:
        return []
    pids = {name: name.partition("-")[0] for name in names}
    return [store.staging_dir / n for n in names if not (pids[n].isdigit() and pid_alive(int(pids[n])))]
