"""One sync with one remote: fetch, merge, take in what arrived, write what may leave, push.

The sync goes through a git clone kept under the store (``Store.sync_clone``), never through the
store's own files. Its branch (``cclg/memory`` by default) holds ``nodes/``, ``patches/``, ``edges/``
and, for a remote that asks, ``raw/``: each record a file written once by the store that made it,
under a name no other record has, so merging two stores' commits never meets two versions of a file.

- Two syncs of one store take turns (``flock`` on ``Store.sync_lock_path``; the kernel releases it
  when a sync is killed, so a lock never outlives its process).
- A clone a killed sync left (a merge under way, an index lock, files not committed) is reset to its
  last commit before anything else; what was not committed is written again from the store.
- A push the remote refuses because another store pushed first is retried: fetch, merge, take in, push.
- The store lock is taken only to read what leaves and to write what arrives, never across the network.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cclg.core.files import flock_before
from cclg.core.ids import now_iso
from cclg.core.store import Store
from cclg.errors import ConcurrencyError, SyncError
from cclg.sync import git, incoming, outgoing
from cclg.sync.remotes import Remote, store_id

FOLDERS = ("nodes", "patches", "edges", "raw")
PUSH_ATTEMPTS = 5
LOCK_SECONDS = 300.0  # another sync of this store may be pushing over a slow network


@contextlib.contextmanager
def sync_lock(store: Store, remote: Remote) -> Iterator[None]:
    """This store's turn to sync with ``remote``; ``ConcurrencyError`` after ``LOCK_SECONDS``."""
    path = store.sync_lock_path(remote.name)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if not flock_before(fd, time.monotonic() + LOCK_SECONDS, poll=0.05):
            raise ConcurrencyError(f"another sync with {remote.name} held its lock for {LOCK_SECONDS:.0f}s")
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        os.close(fd)


def ready_clone(store: Store, remote: Remote) -> Path:
    """The clone of ``remote``, made if missing, and back at its last commit if a killed sync left it
    in the middle of something."""
    clone = store.sync_clone(remote.name)
    if not (clone / ".git").is_dir():
        shutil.rmtree(clone, ignore_errors=True)
        clone.mkdir(mode=0o700, parents=True)
        git.run(["init", "-q"], clone)
        git.run(["remote", "add", "origin", remote.url], clone)
        return clone
    git.run(["remote", "set-url", "origin", remote.url], clone)
    (clone / ".git" / "index.lock").unlink(missing_ok=True)  # ours alone: we hold the sync lock
    for leftover in ("MERGE_HEAD", "MERGE_MSG", "MERGE_MODE", "CHERRY_PICK_HEAD", "REVERT_HEAD"):
        (clone / ".git" / leftover).unlink(missing_ok=True)
    for folder in ("rebase-merge", "rebase-apply"):
        shutil.rmtree(clone / ".git" / folder, ignore_errors=True)
    if has_head(clone):
        git.run(["reset", "-q", "--hard", "HEAD"], clone)
    else:
        git.run(["read-tree", "--empty"], clone)
    git.run(["clean", "-q", "-fdx"], clone)
    return clone


def has_head(clone: Path) -> bool:
    return git.run(["rev-parse", "-q", "--verify", "HEAD^{commit}"], clone, check=False).returncode == 0


def tracking(remote: Remote) -> str:
    return f"refs/remotes/origin/{remote.branch}"


def fetch(clone: Path, remote: Remote) -> bool:
    """Fetch the remote's branch; whether it exists there (it does not before the first push)."""
    refspec = f"+refs/heads/{remote.branch}:{tracking(remote)}"
    done = git.run(["fetch", "-q", "--no-tags", "origin", refspec], clone, check=False)
    if done.returncode == 0:
        return True
    message = done.stderr.decode("utf-8", "replace")
    if "couldn't find remote ref" in message:
        git.run(["update-ref", "-d", tracking(remote)], clone, check=False)
        return False
    raise SyncError(f"could not fetch from {remote.name}: {message.strip().splitlines()[-1] if message else '?'}")


def merge(clone: Path, remote: Remote, identity: tuple[str, str]) -> str | None:
    """Merge the fetched branch into the clone; the commit the clone was at before (None: none yet)."""
    before = git.text(["rev-parse", "HEAD"], clone).strip() if has_head(clone) else None
    if before is None:
        git.run(["reset", "-q", "--hard", tracking(remote)], clone)
        return None
    args = ["merge", "-q", "--no-edit", "--no-ff", "--allow-unrelated-histories", "-m", "cclg sync: merge"]
    done = git.run([*args, tracking(remote)], clone, identity=identity, check=False)
    if done.returncode != 0:
        conflicted = git.text(["diff", "--name-only", "--diff-filter=U"], clone).split()
        git.run(["merge", "--abort"], clone, check=False)
        said = done.stderr.decode("utf-8", "replace").strip().splitlines() or [str(done.returncode)]
        raise SyncError(f"git could not merge {remote.name}'s records: {', '.join(conflicted[:5]) or said[-1]}")
    return before


def names(clone: Path) -> set[str]:
    """The record files the clone's work tree holds (``nodes/<id>.json``, ...)."""
    found: set[str] = set()
    for folder in FOLDERS:
        with contextlib.suppress(FileNotFoundError), os.scandir(clone / folder) as entries:
            # regular files only: a link a remote committed (to a file outside the clone) is never read
            found.update(f"{folder}/{entry.name}" for entry in entries if entry.is_file(follow_symlinks=False))
    return found


def tree_names(clone: Path, ref: str) -> set[str]:
    listed = git.text(["ls-tree", "-r", "--name-only", "-z", ref, "--", *FOLDERS], clone)
    return {name for name in listed.split("\0") if name}


def authors(clone: Path, before: str | None, remote: Remote) -> dict[str, tuple[str, str]]:
    """For each file the fetched commits added: (the author of its commit, the commit)."""
    span = f"{before}..{tracking(remote)}" if before else tracking(remote)
    listed = git.text(
        ["log", "--no-renames", "--diff-filter=A", "--name-only", "-z", "--format=%x01%H%x02%an <%ae>", span], clone
    )
    found: dict[str, tuple[str, str]] = {}
    for block in listed.split("\x01")[1:]:
        head, _, files = block.partition("\x00")
        commit, _, author = head.strip("\n").partition("\x02")
        for name in files.replace("\n", "\0").split("\0"):
            if name and name not in found:
                found[name] = (author, commit)
    return found


def missing_here(store: Store, listed: set[str]) -> list[str]:
    """Of the clone's files, those the store does not hold."""
    return sorted(name for name in listed if not store.path_of(name).exists())


def write_out(store: Store, clone: Path, remote: Remote, origin: str, identity: tuple[str, str]) -> dict[str, int]:
    """Write what may leave into the clone and commit it; counts by folder, and by why what stayed."""
    with store.lock():
        going = outgoing.select(store, names(clone), raw=remote.raw, origin=origin)
        leaving = [item for item in going.items if item.path.startswith("patches/")]
        incoming.mark(store, [n for item in leaving for n in outgoing.named_by_patch(item)])
    written: list[str] = []
    for item in going.items:
        why = outgoing.recheck(item, raw=remote.raw)
        if why is not None:
            going.hold(why)
            continue
        path = clone / item.path
        path.parent.mkdir(mode=0o700, exist_ok=True)
        path.write_bytes(item.data)
        written.append(item.path)
    if written:
        # Each path as it is, not as a pathspec: ``git add`` matches every file against every pathspec it
        # is given, which took minutes for the first sync of 100,000 memories (20,000 files: 5 s, against
        # 0.1 s for the same files here).
        git.run(["update-index", "--add", "-z", "--stdin"], clone, stdin="\0".join(written).encode())
        message = f"cclg sync: {len(written)} record(s) from {origin}\n\nCclg-Store: {origin}\n"
        git.run(["commit", "-q", "--no-verify", "-m", message], clone, identity=identity)
    counts = {kind: sum(1 for p in written if p.startswith(kind + "/")) for kind in FOLDERS}
    return {k: v for k, v in counts.items() if v}


def ahead(clone: Path, remote: Remote, fetched: bool) -> bool:
    if not has_head(clone):
        return False
    if not fetched:
        return True
    count = git.text(["rev-list", "--count", f"{tracking(remote)}..HEAD"], clone).strip()
    return count != "0"


def push(clone: Path, remote: Remote) -> bool:
    """Push the clone's commits; False when the remote moved on meanwhile (fetch and merge again)."""
    done = git.run(["push", "-q", "origin", f"HEAD:refs/heads/{remote.branch}"], clone, check=False)
    if done.returncode == 0:
        return True
    message = done.stderr.decode("utf-8", "replace")
    if any(word in message for word in ("rejected", "fetch first", "non-fast-forward", "cannot lock ref")):
        return False
    raise SyncError(f"could not push to {remote.name}: {message.strip().splitlines()[-1] if message else '?'}")


def sync(store: Store, remote: Remote) -> dict[str, Any]:
    """Fetch, merge, take in, write out, push (again after a refused push); the sync's report."""
    origin = store_id(store)
    received: dict[str, int] = {}
    refused: dict[str, str] = {}
    sent: dict[str, int] = {}
    with sync_lock(store, remote):
        clone = ready_clone(store, remote)
        identity = git.user_identity(clone, origin)
        settled = incoming.settle(store)  # what a killed sync left unsettled
        attempts = 0
        while attempts < PUSH_ATTEMPTS:
            attempts += 1
            fetched = fetch(clone, remote)
            before = merge(clone, remote, identity) if fetched else None
            if fetched:
                arrived = incoming.take(
                    store, clone, missing_here(store, names(clone)), remote, authors(clone, before, remote)
                )
                for kind, count in arrived.written.items():
                    received[kind] = received.get(kind, 0) + count
                refused.update(arrived.refused)
            for kind, count in write_out(store, clone, remote, origin, identity).items():
                sent[kind] = sent.get(kind, 0) + count
            settled += incoming.settle(store)
            if not ahead(clone, remote, fetched) or push(clone, remote):
                break
        else:
            raise SyncError(f"{remote.name} refused the push {PUSH_ATTEMPTS} times (other stores pushing); sync again")
        report = {"remote": remote.name, "at": now_iso(), "attempts": attempts, "sent": sent, "received": received}
        report.update(refused=refused, settled=len(settled))
        report["head"] = git.text(["rev-parse", "HEAD"], clone).strip() if has_head(clone) else None
        store.write_file(store.sync_state_path(remote.name), (json.dumps(report, indent=2) + "\n").encode())
        store.audit("sync_done", remote=remote.name, sent=sent, received=received, refused=len(refused))
    return report


def preview(store: Store, remote: Remote) -> dict[str, Any]:
    """``--dry-run``: fetch, then list what would come in and what would go out; the store is not written."""
    origin = store_id(store)
    with sync_lock(store, remote):
        clone = ready_clone(store, remote)
        fetched = fetch(clone, remote)
        there = names(clone) | (tree_names(clone, tracking(remote)) if fetched else set())
        coming = missing_here(store, there)
        with store.lock():
            going = outgoing.select(store, there, raw=remote.raw, origin=origin)
    return {
        "remote": remote.name,
        "incoming": coming,
        "outgoing": [item.path for item in going.items],
        "withheld": {why: count for why, count in going.withheld.items() if count},
    }


def open_conflicts(store: Store) -> list[dict[str, Any]]:
    """The conflicts between patches written apart that still wait: a flagged memory still in ``conflict_pending``."""
    from cclg.ledger.view import Ledger

    found = []
    for conflict in Ledger(store.load_patches()).conflicts:
        waiting = []
        for node_id in conflict.flagged:
            with contextlib.suppress(Exception):
                if store.read_node(node_id).status == "conflict_pending":
                    waiting.append(node_id)
        if waiting:
            found.append({**conflict.to_dict(), "flagged": waiting})
    return found


def status(store: Store, remotes: dict[str, Remote]) -> dict[str, Any]:
    """Per remote: when it last synced, what it sent and received then, what waits to go out now; and
    the open conflicts. Reads only: the network is not reached, the store not written."""
    found = []
    for remote in remotes.values():
        state: dict[str, Any] = {}
        path = store.sync_state_path(remote.name)
        with contextlib.suppress(OSError, ValueError):
            state = json.loads(path.read_bytes())
        clone = store.sync_clone(remote.name)
        on_remote = names(clone) if clone.is_dir() else set()
        going = outgoing.select(store, on_remote, raw=remote.raw, origin="")
        entry = {**remote.to_dict(), "last_sync": state.get("at"), "last_sent": state.get("sent", {})}
        entry.update(last_received=state.get("received", {}), waiting=going.counts())
        found.append(entry)
    return {"remotes": found, "conflicts": open_conflicts(store)}
