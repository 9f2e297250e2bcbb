"""What the code graph learns from git history, and the copy of it kept until HEAD moves.

One ``git log`` over the last ``CHURN_COMMITS`` commits (merges left out, read by
``cclg.codegraph.build.Repository.churn``) gives, per file, how often and how
lately it changed and by how many authors (churn); how often two files changed
together (co-change); and the messages of the commits that changed a few files,
with those files (history as experience, which ``cclg.codegraph.rank`` searches).
``tally`` reads that log.

Reading thousands of commits is most of a re-index of a small repository with a
long history (0.15 s of 0.23 s on expressjs/express), yet its result changes only
when HEAD moves, while git's index, whose changes start the hook's background
re-index, changes on every ``git add`` and many a ``git status``. So the last
tally is kept beside the graph (``active/codegraphs/<repo>.history.json``, keyed by
HEAD and the number of commits read: ``read_saved``, ``saved_bytes``) and git is read
again only when that key changes. Its messages are redacted like the index's.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, NamedTuple

from cclg.core import secrets

CHURN_COMMITS = 5_000  # how far back one `git log` looks
CO_CHANGE_MAX_FILES = 30  # commits touching more files (mass renames, reformatting) say nothing
LOG_FORMAT = "%x00%at%x09%aE%x09%s%x1f%b%x1f"  # time, author, subject; the body; then the file names
HISTORY_MAX_FILES = 20  # a commit touching more files says little about any one of them
HISTORY_BODY_CHARS = 600
SAVED_SCHEMA = "cclg.code_graph_history.v0.1"


class Churn(NamedTuple):
    per_file: dict[str, dict[str, Any]]  # path -> {"commits", "last_commit", "authors"}
    pairs: Counter[tuple[str, str]]  # co-change counts
    commits: int  # commits read
    history: list[tuple[str, list[str]]]  # (message, files) of the commits that changed a few files


def tally(log: str) -> Churn:
    """Churn, co-change counts and history from ``git log --format=LOG_FORMAT --name-only``."""
    per_file: dict[str, dict[str, Any]] = {}
    authors: dict[str, set[str]] = defaultdict(set)
    pairs: Counter[tuple[str, str]] = Counter()
    history: list[tuple[str, list[str]]] = []
    commits = 0
    for chunk in log.split("\0")[1:]:
        meta, _, names = chunk.rpartition("\x1f")
        header, _, body = meta.partition("\x1f")
        stamp, _, rest = header.partition("\t")
        author, _, subject = rest.partition("\t")
        files = sorted({n for n in names.split("\n") if n})
        if 1 <= len(files) <= HISTORY_MAX_FILES and subject.strip():
            message = f"{subject.strip()}\n{body.strip()[:HISTORY_BODY_CHARS]}".strip()
            history.append((secrets.redact(message)[0], files))  # a message is text of the repository too
        commits += 1
        when = int(stamp) if stamp.isdigit() else 0
        for name in files:
            entry = per_file.setdefault(name, {"commits": 0, "last_commit": 0})
            entry["commits"] += 1
            entry["last_commit"] = max(entry["last_commit"], when)
            authors[name].add(author)
        if 2 <= len(files) <= CO_CHANGE_MAX_FILES:
            for i, a in enumerate(files):
                for b in files[i + 1 :]:
                    pairs[(a, b)] += 1
    for name, entry in per_file.items():
        entry["authors"] = len(authors[name])
    return Churn(per_file, pairs, commits, history)


def saved_key(head: str | None, max_commits: int) -> list[Any] | None:
    """What a saved tally must match to stand for ``git log`` now: HEAD and the commits read (None
    without a commit: then there is nothing to read or keep)."""
    return None if head is None else [SAVED_SCHEMA, head, max_commits]


def read_saved(path: Path, key: list[Any] | None) -> Churn | None:
    """The tally saved at ``path`` if it was made for ``key``, else None (also when it is missing or
    unreadable: git is read again)."""
    if key is None:
        return None
    try:
        data = json.loads(path.read_bytes())
        if data["key"] != key:
            return None
        pairs = Counter({(a, b): count for a, b, count in data["pairs"]})
        history = [(message, files) for message, files in data["history"]]
        return Churn(data["per_file"], pairs, data["commits"], history)
    except (OSError, ValueError, KeyError, TypeError, RecursionError):  # damaged, nested too deep: read again
        return None


def saved_bytes(key: list[Any], churn: Churn) -> bytes:
    """``churn`` as ``read_saved`` reads it back."""
    pairs = [[a, b, count] for (a, b), count in sorted(churn.pairs.items())]
    document = {"key": key, "per_file": churn.per_file, "pairs": pairs, "commits": churn.commits}
    document["history"] = [[message, files] for message, files in churn.history]
    return (json.dumps(document, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
