"""The ActiveMemoryPack compiler (first version) and its renderings.

A pack holds the current memories relevant to a query, under a budget, and
lists apart the retired memories that match it, so the agent knows the old
fact is dead. Retired memories are never emitted as truth.
"""

from __future__ import annotations

import json
from typing import Any

import tomli_w

from cclg import format as fmt
from cclg.ledger import effective_view
from cclg.records import MemoryNode, now_iso
from cclg.search import match, rank
from cclg.store import Store

SUPPRESSED_PREFIX_CHARS = 160
DEFAULT_MAX_NODES = 12
DEFAULT_MAX_CHARS = int(fmt.contract()["prompt"]["active_memory_pack_toml"]["max_content_chars_default"])


def _entry(node: MemoryNode) -> dict[str, Any]:
    return {
        "id": node.id,
        "type": node.type,
        "status": node.status,
        "key": node.key,
        "scope": node.scope.level,
        "source": node.source.label or "",
        "content": node.content,
    }


def compile_pack(
    store: Store,
    query: str,
    *,
    session_id: str | None = None,
    max_nodes: int = DEFAULT_MAX_NODES,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> dict[str, Any]:
    """An ActiveMemoryPack (``cclg.active_memory_pack.v0.1``) as a dict in canonical order."""
    nodes = store.load_nodes()
    patches = store.load_patches()
    view = effective_view(nodes.values(), patches, session_id=session_id)
    view_ids = {n.id for n in view}
    if query.strip():
        selected = [hit.node for hit in rank(query, view, max_nodes)]
    else:
        selected = sorted(view, key=lambda n: (n.updated_at, n.id), reverse=True)[:max_nodes]
    used = 0
    packed = []
    for node in selected:
        if used + len(node.content) > max_chars:
            continue
        used += len(node.content)
        packed.append(_entry(node))
    suppressed = []
    for node in sorted(nodes.values(), key=lambda n: n.id):
        if node.id in view_ids or node.status in ("active", "active_session"):
            continue
        if query.strip() and match(query, node) is None:
            continue
        suppressed.append(
            {
                "id": node.id,
                "status": node.status,
                "content": node.content[:SUPPRESSED_PREFIX_CHARS],
                "supersedes": node.relations["supersedes"],
                "superseded_by": node.relations["superseded_by"],
            }
        )
    values = {
        "schema_version": fmt.PACK_SCHEMA,
        "query": query,
        "generated_at": now_iso(),
        "memory_nodes": packed,
        "suppressed_nodes": suppressed,
        "budget": {
            "max_nodes": max_nodes,
            "max_chars": max_chars,
            "used_chars": used,
            "omitted_nodes": len(selected) - len(packed),
        },
    }
    return {name: values[name] for name in fmt.canonical_order("active_memory_pack")}


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def to_toml(data: dict[str, Any]) -> str:
    """TOML for inspection (TOML has no null: null fields are left out)."""
    return tomli_w.dumps(_without_nulls(data))


def render(pack: dict[str, Any], style: str) -> str:
    if style == "json":
        return json.dumps(pack, ensure_ascii=False, indent=2)
    if style == "toml":
        return to_toml(pack)
    lines = [f"# Active memory ({pack['schema_version']})", "", f"Query: {pack['query']}", ""]
    lines.append("## Current memories")
    for entry in pack["memory_nodes"]:
        lines.append(f"- [{entry['id']}] ({entry['type']}, source: {entry['source']}) {entry['content']}")
    if not pack["memory_nodes"]:
        lines.append("- none")
    if pack["suppressed_nodes"]:
        lines += ["", "## Retired (no longer true; do not rely on them)"]
        for entry in pack["suppressed_nodes"]:
            lines.append(f"- [{entry['id']}] {entry['status']}: {entry['content']}")
    return "\n".join(lines) + "\n"
