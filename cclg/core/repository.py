"""The repository a folder belongs to, and the project memories are scoped by.

A project is its repository, not its folder's name. Its identity, the value a new memory's
``scope.project`` holds, is ``git:<sha>``: the root commit reached by following first parents from
HEAD. It is the same in every clone, worktree and renamed folder, differs between repositories,
and survives merging an unrelated history in (that root is a second parent). A repository with no
commit yet (or a shallow clone, whose root is not known) is named by its ``origin`` remote,
normalised (``url:github.com/org/api``, credentials dropped); with no remote either, by its folder's
name. The folder's name stays the project's display name.

A repository's memories are those whose project is any value it answers to: its identity, its
remote hint and its folder's name. So a memory written before its repository had a commit, and one
scoped by name (stores written before identities, ``--scope project=NAME``, an import-jsonl line)
still reach it. A name names every repository of that name; an identity, one repository.

Light on purpose: the hook calls it on every event. Files are read directly (HEAD, config), and
``git`` runs only when the root commit is not in the cache, which is keyed by the git folder and
stamped with HEAD's and the config's file identity: a cache hit costs three stats and a read.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

GIT_TIMEOUT_SECONDS = 10
CACHE_ENTRIES = 256  # git folders remembered; the oldest are dropped past this


class Project:
    """A project as memories name it: ``name`` (the folder's, for display), ``id`` (``git:<root sha>``,
    or None before the first commit or in a shallow clone) and ``url`` (the origin hint, or None)."""

    def __init__(self, name: str, id: str | None = None, url: str | None = None) -> None:
        self.name = name
        self.id = id
        self.url = url

    @property
    def value(self) -> str:
        """The scope value a new memory of this project holds."""
        return self.id or self.url or self.name

    @property
    def keys(self) -> tuple[str, ...]:
        """Every scope value a memory of this project may hold."""
        return tuple(dict.fromkeys(v for v in (self.id, self.url, self.name) if v))

    def __repr__(self) -> str:
        return f"Project(name={self.name!r}, id={self.id!r}, url={self.url!r})"


# A project filter: one scope value, the values a project answers to, or the project itself.
ProjectKeys = str | Sequence[str] | Project | None


def project_keys(project: ProjectKeys) -> tuple[str, ...]:
    """The scope values a filter accepts: none (any project), one, or a project's ``keys``."""
    if project is None:
        return ()
    if isinstance(project, Project):
        return project.keys
    return (project,) if isinstance(project, str) else tuple(project)


IDENTITY_PREFIXES = ("git:", "url:")  # a root commit, a remote hint: every other project value is a name


def is_folder_name(value: str) -> bool:
    """Whether a project scope value is a folder's name, which every repository of that name answers
    to (a store written before identities, ``--scope project=NAME``), not a repository's identity or
    remote hint. ``cclg project adopt`` gives such memories to one repository."""
    return not value.startswith(IDENTITY_PREFIXES)


def project_filter(value: str | None, folder: str | Path) -> ProjectKeys:
    """A ``--project`` value (CLI, MCP) as a filter: ``.`` is the project of the git repository
    holding ``folder``, every value it answers to; any other value is a scope value as written."""
    if value != ".":
        return value
    found = project_of(folder)
    if found is None:
        from cclg.errors import UsageError

        raise UsageError(f"{folder} is not inside a git repository: project '.' names the current folder's")
    return found


def git_root(folder: str | Path) -> Path | None:
    """The nearest folder at or above ``folder`` that holds ``.git`` (a work tree), or None."""
    path = Path(os.path.abspath(folder))  # a relative folder has no parents to walk up
    for candidate in (path, *path.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def git_project(folder: str | Path) -> str | None:
    """The scope value of the project holding ``folder`` (``Project.value``), or None outside git."""
    found = project_of(folder)
    return found.value if found is not None else None


def project_of(folder: str | Path, *, cache: Path | None = None) -> Project | None:
    """The project of the git work tree holding ``folder``, or None outside git. ``cache``: a JSON
    file remembering root commits per git folder (the hook's, in the store)."""
    root = git_root(folder)
    if root is None:
        return None
    name = root.name or str(root)
    try:
        return _identify(root, name, cache)
    except (OSError, ValueError):  # a .git file or HEAD git itself would refuse (a NUL byte, a loop)
        return Project(name)


def _identify(root: Path, name: str, cache: Path | None) -> Project:
    """``project_of`` once the work tree is found: the remote hint from the config, and the root
    commit unless there is none to find (no commit yet, a shallow clone), from the cache or git."""
    git_dir = _git_dir(root)
    if git_dir is None:
        return Project(name)
    common = _common_dir(git_dir)
    url = _origin_url(common / "config")
    hint = remote_hint(url) if url else None
    if (common / "shallow").exists() or not _has_commits(git_dir, common):
        return Project(name, None, hint)
    stamp = _stamp(git_dir, common)
    found = _cached(cache, git_dir, stamp)
    if found is None:
        found = _root_commit(root)
        if found is not None and cache is not None:
            _remember(cache, git_dir, stamp, found)
    return Project(name, found, hint)


def _git_dir(root: Path) -> Path | None:
    """The git folder of a work tree: ``.git`` itself, or where a ``.git`` file (a worktree, a
    submodule) points."""
    dot_git = root / ".git"
    if dot_git.is_dir():
        return dot_git
    try:
        text = dot_git.read_text("utf-8", "replace").strip()
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    target = Path(text[len("gitdir:") :].strip())
    return target if target.is_absolute() else root / target


def _common_dir(git_dir: Path) -> Path:
    """The folder holding refs and config: a worktree's ``commondir``, else the git folder."""
    try:
        named = (git_dir / "commondir").read_text("utf-8", "replace").strip()
    except OSError:
        return git_dir
    target = Path(named)
    return target if target.is_absolute() else git_dir / target


def _has_commits(git_dir: Path, common: Path) -> bool:
    """Whether HEAD names a commit: detached, or on a branch whose ref exists (loose, packed, or in
    a reftable, which only git reads)."""
    try:
        head = (git_dir / "HEAD").read_text("utf-8", "replace").strip()
    except OSError:
        return False
    if not head.startswith("ref:"):
        return bool(head)
    ref = head[len("ref:") :].strip()
    if (common / ref).is_file() or (common / "reftable").is_dir():
        return True
    with contextlib.suppress(OSError):
        return any(line.endswith(" " + ref) for line in (common / "packed-refs").read_text("utf-8").splitlines())
    return False


def _stamp(git_dir: Path, common: Path) -> str:
    """What a cached root commit is valid for: HEAD's file (rewritten when it names another branch
    or commit) and the config's (a new repository at the same path has a new one)."""
    parts = []
    for path in (git_dir / "HEAD", common / "config"):
        try:
            info = path.stat()
            parts.append(f"{info.st_ino}.{info.st_mtime_ns}.{info.st_size}")
        except OSError:
            parts.append("-")
    return ":".join(parts)


def _cached(cache: Path | None, git_dir: Path, stamp: str) -> str | None:
    if cache is None:
        return None
    from cclg.core.files import read_json_object

    entry = read_json_object(cache).get(str(git_dir))
    if isinstance(entry, dict) and entry.get("stamp") == stamp and isinstance(entry.get("id"), str):
        return str(entry["id"])
    return None


def _remember(cache: Path, git_dir: Path, stamp: str, found: str) -> None:
    """Keep ``found`` for ``git_dir`` in the cache; best effort (a read-only store just pays git again)."""
    from cclg.core.files import atomic_write, private_folders, read_json_object

    entries = read_json_object(cache)
    entries.pop(str(git_dir), None)
    entries[str(git_dir)] = {"stamp": stamp, "id": found}
    kept = dict(list(entries.items())[-CACHE_ENTRIES:])
    with contextlib.suppress(OSError):
        private_folders(cache.parent)
        atomic_write(cache, json.dumps(kept, indent=1).encode("utf-8"), durable=False)


def _root_commit(root: Path) -> str | None:
    """``git:<sha>`` of the root commit on HEAD's first-parent chain, or None if git cannot say."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}  # not a caller's GIT_DIR
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "rev-list", "--max-parents=0", "--first-parent", "HEAD"],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_SECONDS,
            env=env,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.split()
    if done.returncode != 0 or not lines or not re.fullmatch(r"[0-9a-f]{40,64}", lines[-1]):
        return None
    return "git:" + lines[-1]


def _origin_url(config: Path) -> str | None:
    """The ``url`` of ``[remote "origin"]`` in a git config file, or None."""
    try:
        text = config.read_text("utf-8", "replace")
    except OSError:
        return None
    inside = False
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("["):
            inside = re.fullmatch(r'\[\s*remote\s+"origin"\s*\]', line) is not None
        elif inside:
            key, sep, value = line.partition("=")
            if sep and key.strip().lower() == "url":
                return value.strip().strip('"') or None
    return None


def remote_hint(url: str) -> str:
    """A remote URL as the same repository's every clone names it: ``url:host/path``, lower case,
    without scheme, user, password, port or a trailing ``.git``; a local path stays a path."""
    text = url.strip()
    scheme = re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://(?:[^@/]*@)?([^/:]*)(?::\d*)?(/.*)?$", text)
    scp = re.match(r"^(?:[^@/:]+@)?([^/:]+):(?!//)(.*)$", text)
    if text.lower().startswith("file://"):
        host, path = "", "/" + text[len("file://") :].lstrip("/")
    elif scheme:
        host, path = scheme.group(1), scheme.group(2) or ""
    elif scp and not text.startswith("/"):
        host, path = scp.group(1), scp.group(2)
    else:
        host, path = "", text
    path = path.rstrip("/")
    path = path[: -len(".git")] if path.endswith(".git") else path
    joined = f"{host}/{path.lstrip('/')}" if host else path
    return "url:" + joined.lower()
