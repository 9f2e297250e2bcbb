"""Retrieval and packs: searching memories, recalling them with their provenance, and compiling,
explaining, fitting and rendering the memory pack.

The search runs in ``cclg.retrieval.search``; a pack is asked for with one ``PackRequest`` (its query, its
``Where``, its ``Budget``), chosen in ``cclg.retrieval.selection`` and shown in ``cclg.retrieval.rendering``. The pack's
names are imported on first use (``_LAZY``), so a command that only searches never loads the compiler.
"""

from __future__ import annotations

from cclg.api.lazy import served_on_first_use
from cclg.retrieval.query import Hit, Where
from cclg.retrieval.search import MODES, GrepMatch, grep
from cclg.retrieval.search import search as search_memories  # the package's ``search`` attribute is the module

_LAZY = {  # module -> the public names it serves, imported on first use
    "cclg.retrieval.selection": "DEFAULT_MAX_CHARS DEFAULT_MAX_NODES Budget PackRequest compile_pack explain_pack",
    "cclg.retrieval.rendering": "FORMATS fit_markdown render to_toml",
}

TYPE_CHECKING = False  # typing costs the hook ~4 ms of start-up; annotations are strings anyway
if TYPE_CHECKING:  # what type checkers see; at run time, __getattr__ below
    from collections.abc import Callable
    from typing import Any

    from cclg.core.store import Store
    from cclg.retrieval.rendering import FORMATS, fit_markdown, render, to_toml
    from cclg.retrieval.selection import (
        DEFAULT_MAX_CHARS,
        DEFAULT_MAX_NODES,
        Budget,
        PackRequest,
        compile_pack,
        explain_pack,
    )
else:
    __getattr__ = served_on_first_use(globals(), _LAZY)


__all__ = [
    "DEFAULT_MAX_CHARS",
    "DEFAULT_MAX_NODES",
    "FORMATS",
    "MODES",
    "Budget",
    "GrepMatch",
    "Hit",
    "PackRequest",
    "Where",
    "compile_pack",
    "explain_pack",
    "fit_markdown",
    "grep",
    "recall",
    "render",
    "search_memories",
    "semantic_off_reason",
    "serve_helper",
    "to_toml",
    "wake_semantic",
]


def recall(store: Store, query: str, *, where: Where | None = None, limit: int = 5) -> list[dict[str, Any]]:
    """Current memories for ``query``, each with its provenance (source, quote, raw spans)."""
    from cclg.api.memories import cite  # the writer's modules: not on the hook's path, which packs

    hits = search_memories(store, query, mode="bm25", limit=limit, where=where)
    return [
        {"id": h.id, "score": round(h.score, 4), "node": h.node.to_dict(), "provenance": cite(store, h.id)}
        for h in hits
    ]


def wake_semantic(store: Store) -> str:
    """Start the store's semantic helper, or wake the one that runs, without waiting for it beyond its
    budget (a session's start: its first prompt, seconds later, finds it ready); its state
    (``cclg.retrieval.semantic.wake``: answered, cold or off). Never raises."""
    from cclg.retrieval import semantic

    return semantic.wake(store)


def semantic_off_reason() -> str | None:
    """Why packs and searches get no semantic signal by choice (``CCLG_SEMANTIC`` off, or the ``semantic``
    extra not installed), in words for the user; None when the helper may answer."""
    from cclg.retrieval import semantic

    return semantic.off_reason()


def serve_helper(argv: list[str], events: Callable[[dict[str, Any], bytes], tuple[str, Callable[[], None]]]) -> int:
    """Run the store's helper (``python -m cclg.hook --helper --root STORE``): it answers the semantic
    questions and takes the hook's events, each run by ``events`` (``cclg.retrieval.semantic.serve``)."""
    from cclg.retrieval import semantic

    return semantic.main(argv, events=events, prog="python -m cclg.hook --helper")
