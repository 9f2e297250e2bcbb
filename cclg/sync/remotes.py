"""The remotes a store syncs with: ``sync/remotes.json`` (``Store.sync_remotes_path``).

A remote is a name, a git URL (any git remote: the project's own repository, a separate one, a bare
folder), the branch the records live on (``cclg/memory``), the trust the records it brings may have
at most (``untrusted`` unless the user says ``trusted``) and whether raw evidence travels to it
(``raw``: off unless asked, because evidence holds private text).
"""

from __future__ import annotations

import json
import re
from typing import Any

from cclg.core import labels
from cclg.core.fields import parse_json
from cclg.core.ids import new_id
from cclg.core.store import Store
from cclg.errors import NotFoundError, UsageError
from cclg.sync.git import BRANCH

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
BRANCH_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_./-]{0,99}$")


class Remote:
    """One remote of ``sync/remotes.json``."""

    def __init__(self, name: str, url: str, trust: str = labels.DEFAULT_TRUST, raw: bool = False, branch: str = BRANCH):
        self.name = name
        self.url = url
        self.trust = trust
        self.raw = raw
        self.branch = branch

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "url": self.url, "trust": self.trust, "raw": self.raw, "branch": self.branch}

    @classmethod
    def from_dict(cls, data: Any) -> Remote:
        if not isinstance(data, dict):
            raise UsageError(f"sync/remotes.json: a remote must be an object, got {data!r}")
        remote = cls(
            str(data.get("name", "")),
            str(data.get("url", "")),
            str(data.get("trust", labels.DEFAULT_TRUST)),
            data.get("raw") is True,
            str(data.get("branch", BRANCH)),
        )
        check(remote)
        return remote


def check(remote: Remote) -> None:
    """``UsageError`` for a name, URL, branch or trust level a remote may not have."""
    if not NAME_RE.match(remote.name):
        raise UsageError(f"not a remote name: {remote.name!r} (letters, digits, '.', '_', '-'; 64 at most)")
    if not remote.url or remote.url.startswith("-") or any(ord(c) < 32 for c in remote.url):
        raise UsageError(f"not a git URL: {remote.url!r}")
    if not BRANCH_RE.match(remote.branch) or ".." in remote.branch or remote.branch.endswith((".lock", "/")):
        raise UsageError(f"not a branch name: {remote.branch!r}")
    if remote.trust not in ("trusted", "untrusted"):
        raise UsageError(f"--trust is trusted or untrusted, not {remote.trust!r}")


def load(store: Store) -> dict[str, Remote]:
    """The store's remotes by name (none before the first ``cclg remote add``)."""
    path = store.sync_remotes_path
    if not path.is_file():
        return {}
    try:
        data = parse_json(path.read_bytes())
    except ValueError as exc:
        raise UsageError(f"sync/remotes.json is not valid JSON: {exc}") from exc
    entries = data.get("remotes", []) if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise UsageError("sync/remotes.json: expected an object with a list of remotes")
    remotes = [Remote.from_dict(entry) for entry in entries]
    return {remote.name: remote for remote in remotes}


def _save(store: Store, remotes: dict[str, Remote]) -> None:
    store.sync_dir.mkdir(mode=0o700, exist_ok=True)
    data = {"remotes": [remotes[name].to_dict() for name in sorted(remotes)]}
    store.write_file(store.sync_remotes_path, (json.dumps(data, indent=2) + "\n").encode("utf-8"))


def get(store: Store, name: str | None) -> Remote:
    """The remote ``name``; with no name, the only remote (``UsageError`` when there are none or several)."""
    remotes = load(store)
    if name is None:
        if len(remotes) != 1:
            known = ", ".join(sorted(remotes)) or "none yet: `cclg remote add NAME URL`"
            raise UsageError(f"name the remote to sync with (remotes: {known})")
        return next(iter(remotes.values()))
    if name not in remotes:
        raise NotFoundError(f"no remote {name!r} (`cclg remote list`)")
    return remotes[name]


def add(store: Store, remote: Remote) -> Remote:
    """Add ``remote``; a name already taken is refused."""
    check(remote)
    with store.lock():
        remotes = load(store)
        if remote.name in remotes:
            raise UsageError(f"a remote {remote.name!r} exists already (`cclg remote remove {remote.name}` first)")
        remotes[remote.name] = remote
        _save(store, remotes)
        store.audit("sync_remote_added", remote=remote.name, trust=remote.trust, raw=remote.raw)
    return remote


def remove(store: Store, name: str) -> Remote:
    """Remove the remote ``name`` and its clone; what it brought stays in the store."""
    import shutil

    with store.lock():
        remotes = load(store)
        if name not in remotes:
            raise NotFoundError(f"no remote {name!r} (`cclg remote list`)")
        removed = remotes.pop(name)
        _save(store, remotes)
        shutil.rmtree(store.sync_clone(name), ignore_errors=True)
        for path in (store.sync_state_path(name), store.sync_lock_path(name)):
            path.unlink(missing_ok=True)
        store.audit("sync_remote_removed", remote=name)
    return removed


def store_id(store: Store) -> str:
    """This store's id among the stores that sync (``sync/store.json``), made on first use."""
    path = store.sync_identity_path
    if path.is_file():
        data = parse_json(path.read_bytes())
        if isinstance(data, dict) and isinstance(data.get("store_id"), str):
            return str(data["store_id"])
    with store.lock():
        if path.is_file():
            return store_id(store)
        store.sync_dir.mkdir(mode=0o700, exist_ok=True)
        made = "store_" + new_id("mem")[4:].lower()
        store.write_file(path, (json.dumps({"store_id": made}) + "\n").encode("utf-8"), replace=False)
    return made
