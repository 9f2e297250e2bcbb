"""Team memory: the remotes a store syncs with, the sync itself, and what it says of its state
(the work is ``cclg.sync``'s)."""

from __future__ import annotations

from typing import Any

from cclg.core.store import Store
from cclg.errors import SyncError

__all__ = ["SyncError", "add_remote", "list_remotes", "remove_remote", "sync_remote", "sync_status"]


def add_remote(store: Store, name: str, url: str, *, trust: str = "untrusted", raw: bool = False,
               branch: str | None = None) -> dict[str, Any]:  # fmt: skip
    """``cclg remote add``: a remote whose records are trusted at most ``trust`` (``untrusted`` unless the
    user says ``trusted``), raw evidence sent to it only if ``raw``."""
    from cclg.sync import remotes
    from cclg.sync.git import BRANCH

    return remotes.add(store, remotes.Remote(name, url, trust, raw, branch or BRANCH)).to_dict()


def list_remotes(store: Store) -> list[dict[str, Any]]:
    """``cclg remote list``."""
    from cclg.sync import remotes

    return [remote.to_dict() for remote in remotes.load(store).values()]


def remove_remote(store: Store, name: str) -> dict[str, Any]:
    """``cclg remote remove``: the remote and its clone go; what it brought stays."""
    from cclg.sync import remotes

    return remotes.remove(store, name).to_dict()


def sync_remote(store: Store, name: str | None = None, *, dry_run: bool = False) -> dict[str, Any]:
    """``cclg sync [NAME]``: fetch, merge, take in, push; with ``dry_run``, what would come in and go out."""
    from cclg.sync import engine, remotes

    remote = remotes.get(store, name)
    return engine.preview(store, remote) if dry_run else engine.sync(store, remote)


def sync_status(store: Store) -> dict[str, Any]:
    """When each remote last synced, what waits to go out, the open conflicts (reads only, no network)."""
    from cclg.sync import engine, remotes

    return engine.status(store, remotes.load(store))
