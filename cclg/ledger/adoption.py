"""Giving a folder name's memories to one repository: ``cclg project adopt [NAME]``.

A memory whose ``scope.project`` is a folder's name (a store written before a project was its
repository, ``--scope project=NAME``, an import-jsonl line) reaches every repository of that name
(``cclg.core.repository``): two clients' ``api`` share it. Nothing recorded which of them a memory
came from, so no rewrite could settle it without guessing; the user does, inside the repository
the memories belong to. Each current memory scoped by the name (``active``, or a live session
memory) gets a new version scoped by the repository's identity, by one ``update`` patch: the
same content, type, key, tags, priority, confidence, validity window, labels and evidence, only
the project changed. ``cclg log`` lists the patches, ``cclg rollback`` undoes each (the old
version is current again, shared by name), and the old version stays in its lineage. What the
ledger would refuse (a memory over the store's size limit, a secret) is looked for before the
first patch, so a refusal writes none.

One piece of evidence is read: a memory learned in hook sessions whose recorded events ran in
folders of one other repository belongs there, and is left shared (``elsewhere``, with why)
unless the user names it (``memory_ids``). ``cclg doctor`` notes the names still shared.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from cclg.core import secrets
from cclg.core.records import MemoryNode, Record, Scope, Source
from cclg.core.repository import Project, git_root, is_folder_name, project_of
from cclg.core.store import Store
from cclg.errors import CclgError, UsageError
from cclg.ledger import writer
from cclg.ledger.lattice import LIVE_STATUSES
from cclg.ledger.view import retired_ids


class Adoption(Record):
    """What ``adopt_project`` did, or would do (``dry_run``): the memories it re-scoped from the
    folder name ``name`` to the repository's ``project`` value, the patches that did it, and the
    memories of that name it left shared because their sessions ran in another repository."""

    def __init__(
        self,
        name: str,
        project: str,
        dry_run: bool,
        adopted: list[MemoryNode],
        elsewhere: list[tuple[MemoryNode, str]],
        written: list[writer.PatchResult],
    ) -> None:
        self.name = name
        self.project = project
        self.dry_run = dry_run
        self.adopted = adopted  # the versions scoped by the name (retired once written)
        self.elsewhere = elsewhere
        self.written = written  # one patch per adopted memory, in the same order (none in a dry run)

    @property
    def patch_ids(self) -> list[str]:
        return [done.patch.id for done in self.written]

    def to_dict(self) -> dict[str, Any]:
        adopted = [{"id": n.id, "content": n.content} for n in self.adopted]
        for entry, done in zip(adopted, self.written, strict=False):
            entry.update(new_id=done.new_nodes[0].id, patch_id=done.patch.id)
        return {
            "name": self.name,
            "project": self.project,
            "dry_run": self.dry_run,
            "adopted": adopted,
            "elsewhere": [{"id": n.id, "content": n.content, "why": why} for n, why in self.elsewhere],
            "patch_ids": self.patch_ids,
            "undo": [f"cclg rollback {patch_id}" for patch_id in self.patch_ids],
        }


def shared_by_name(node: MemoryNode) -> str | None:
    """The folder name a live memory is scoped by (every repository of that name reads it), else None."""
    name = node.scope.project
    return name if name and node.status in LIVE_STATUSES and is_folder_name(name) else None


def adopt_project(
    store: Store,
    folder: str | Path,
    name: str | None = None,
    *,
    memory_ids: Iterable[str] = (),
    dry_run: bool = False,
    reason: str | None = None,
) -> Adoption:
    """Re-scope the current memories scoped by the folder name ``name`` (by default the name of the
    repository holding ``folder``) to that repository's identity, one ``update`` patch each (see the
    module). ``memory_ids``: only these (each must be one of them), whatever their sessions say.
    ``dry_run``: say what would change, write nothing. A ``UsageError`` outside a repository, in one
    with no identity yet (no commit and no remote), or for a ``name`` that is no folder's name."""
    here = _repository(folder)
    name = here.name if name is None else name
    if not name or not is_folder_name(name):
        raise UsageError(f"{name!r} is not a folder's name: adopt takes the name memories are scoped by, such as api")
    value = here.id or here.url
    assert value is not None
    why = reason or f"project adopt: memories scoped by the folder name {name!r} belong to the repository {value}"
    ids = list(memory_ids)
    with store.lock():  # what is chosen is what is written: no other writer in between
        chosen = _chosen(scoped_by(store, name), ids, name)
        elsewhere = {} if ids else _sessions_elsewhere(store, chosen, here)
        adopted = [n for n in chosen if n.id not in elsewhere]
        writer.refuse_oversized(store, adopted)  # what the ledger would refuse, before the first patch
        secrets.refuse_secrets({n.id: n.content for n in adopted}, "the adoption")
        written = [] if dry_run else [_rescope(store, node, value, why) for node in adopted]
    left = [(n, elsewhere[n.id]) for n in chosen if n.id in elsewhere]
    return Adoption(name, value, dry_run, adopted, left, written)


def _repository(folder: str | Path) -> Project:
    found = project_of(folder)
    if found is None:
        where = Path(folder).absolute()
        raise UsageError(f"{where} is not inside a git repository: run adopt in the repository the memories belong to")
    if found.id is None and found.url is None:
        raise UsageError(
            f"the repository {git_root(folder)} has no identity yet (no commit, no origin remote): commit first"
        )
    return found


def scoped_by(store: Store, name: str) -> list[MemoryNode]:
    """The current memories whose project is ``name``, oldest first."""
    retired = retired_ids(store.load_patches())
    nodes = [n for n in store.load_nodes().values() if n.id not in retired and shared_by_name(n) == name]
    return sorted(nodes, key=lambda n: (n.created_at, n.id))


def _chosen(candidates: list[MemoryNode], memory_ids: list[str], name: str) -> list[MemoryNode]:
    if not memory_ids:
        return candidates
    by_id = {n.id: n for n in candidates}
    missing = [i for i in memory_ids if i not in by_id]
    if missing:
        raise UsageError(f"{missing[0]} is not one of the current memories scoped by {name!r}; nothing was written")
    return [by_id[i] for i in dict.fromkeys(memory_ids)]


def _rescope(store: Store, node: MemoryNode, value: str, reason: str) -> writer.PatchResult:
    """One ``update`` patch: ``node`` again, scoped by ``value`` (the ledger keeps its window,
    confidence, priority and labels)."""
    evidence = Source(
        label="manual",
        session_ids=list(node.source.session_ids),
        turn_ids=list(node.source.turn_ids),
        raw_spans=list(node.source.raw_spans),
        tool_result_ids=list(node.source.tool_result_ids),
        artifact_ids=list(node.source.artifact_ids),
        quote=node.source.quote,
    )
    return writer.apply_patch(
        store,
        "update",
        [node.id],
        reason=reason,
        contents=[node.content],
        source=evidence,
        scope=Scope(**{**node.scope.to_dict(), "project": value}),
    )


def _sessions_elsewhere(store: Store, nodes: list[MemoryNode], here: Project) -> dict[str, str]:
    """The memories whose sessions' recorded events all ran in one other repository: id -> why."""
    found: dict[str, str] = {}
    seen: dict[str, set[Path]] = {}
    projects: dict[Path, Project | None] = {}
    for node in nodes:
        roots: set[Path] = set()
        for session_id in node.source.session_ids:
            if session_id not in seen:
                seen[session_id] = _session_roots(store, session_id)
            roots |= seen[session_id]
        for root in roots - projects.keys():
            projects[root] = project_of(root)  # no cache: a dry run writes nothing
        values = {p.value for root in roots if (p := projects[root]) is not None}
        if len(values) == 1 and values.isdisjoint(here.keys):
            ran = ", ".join(sorted(str(r) for r in roots))
            found[node.id] = f"its sessions ran in {ran} ({values.pop()}): adopt it there, or name it with --memory"
    return found


def _session_roots(store: Store, session_id: str) -> set[Path]:
    """The repositories (work trees) holding the folders a session's recorded events ran in."""
    events: list[dict[str, Any]] = []
    with contextlib.suppress(CclgError, OSError, ValueError):
        events = store.session_events(session_id)
    roots = set()
    for event in events:
        recorded = event.get("summary") or event.get("payload")
        cwd = recorded.get("cwd") if isinstance(recorded, dict) else None
        if isinstance(cwd, str) and cwd and (root := git_root(cwd)) is not None:
            roots.add(root)
    return roots
