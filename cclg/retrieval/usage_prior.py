"""The usage prior: how often each delivered memory was used, as a small multiplier on its relevance.

``audit/usage.jsonl`` is the log the session-learning part writes (``cclg.learning.usage``: which delivered
memories a session used or ignored). ``active/usage.json`` is its projection (memory id ->
delivered, used), rebuilt from the log at each session end and by ``cclg doctor`` when it is damaged.
``prior`` turns the counts into a multiplier between 0.9 and 1.1 that the pack applies to memories
relevance and the budget already let in (``cclg.retrieval.selection.usage_order``): a retrieval signal, so it
sits with retrieval, below the learning that feeds it.
"""

from __future__ import annotations

import contextlib
import json
import math

from cclg.core.fields import parse_json
from cclg.core.files import read_jsonl
from cclg.core.store import USAGE_LOG, USAGE_SUMMARY, Store

PRIOR_RANGE = 0.1  # the prior moves a score by at most this share


def counts(store: Store) -> dict[str, list[int]]:
    """Memory id -> [sessions delivered to, sessions that used it], from the usage log."""
    found: dict[str, list[int]] = {}
    for record in read_jsonl(store.usage_log_path).records:
        for node_id in record.get("used", ()):
            entry = found.setdefault(node_id, [0, 0])
            entry[0] += 1
            entry[1] += 1
        for node_id in record.get("ignored", ()):
            found.setdefault(node_id, [0, 0])[0] += 1
    return found


def rebuild(store: Store) -> None:
    """Write the projection ``active/usage.json`` from the log."""
    data = json.dumps(counts(store), sort_keys=True, separators=(",", ":")).encode()
    store.write_file(store.usage_summary_path, data)


def heal(store: Store) -> str | None:
    """``cclg doctor``: the projection compared with its log, and rebuilt when it is not what the log
    says (a byte that breaks it, or one that only changes a count); returns what was done, else None."""
    try:
        with open(store.usage_summary_path, "rb") as handle:
            data = parse_json(handle.read())
    except FileNotFoundError:
        return None
    except ValueError:
        data = None
    if data == counts(store):
        return None
    try:
        rebuild(store)
    except OSError as exc:
        return f"{USAGE_SUMMARY}: the usage counts are damaged and could not be rebuilt ({exc})"
    return f"{USAGE_SUMMARY}: rebuilt the damaged usage counts from {USAGE_LOG}"


def prior(delivered: int, used: int) -> float:
    """A multiplier in [0.9, 1.1]: above 1 for a memory that keeps being used, below for one
    delivered often and never used; 1 for one never delivered."""
    ignored = delivered - used
    return 1.0 + PRIOR_RANGE * math.tanh((used - 0.25 * ignored) / 4)


def priors(store: Store) -> dict[str, float]:
    """Each delivered memory's prior, from the projection (empty when there is none). A projection that
    cannot be read back (not UTF-8, not JSON, not counts) is damage: it is rebuilt from the log."""
    try:
        with open(store.usage_summary_path, "rb") as handle:
            data = parse_json(handle.read())
        if not isinstance(data, dict) or not all(isinstance(v, list) and len(v) == 2 for v in data.values()):
            raise ValueError("not counts by memory")
    except FileNotFoundError:
        return {}
    except ValueError:
        data = counts(store)
        with contextlib.suppress(OSError):  # a read-only store: counted for this read only
            rebuild(store)
    return {k: prior(*v) for k, v in data.items()}
