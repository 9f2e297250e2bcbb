"""The demo store: the CCLG walk-through, generated deterministically.

``cclg demo-store PATH`` writes it with fixed ids and timestamps, so the copy in
the repository (``demo-store/``) can be regenerated and compared byte for byte.
It holds an old project decision that a ``refine`` patch superseded, the new
active decision (``relations.refines``) and the edge between them, two more
current memories, raw evidence, and a session whose prompt event reached
``sessions/``, ``raw/`` and ``audit/``.
"""

from __future__ import annotations

from pathlib import Path

from cclg import api, ledger, sessions
from cclg.errors import UsageError
from cclg.records import FixedClock, Source, fixed_clock
from cclg.store import Store

DEMO_START = "2026-06-30T09:58:47+00:00"
DEMO_SESSION = "demo-session"

SOURCE_NOTE = """# Demo source

Notes from the design review where the memory layout was agreed.

- Original evidence is kept verbatim in `raw/`.
- Long-term memories are MemoryNodes in `nodes/`.
- Every change is a MemoryPatch in `patches/`.
- Hooks hand the agent only current memories and the code graph, as `additionalContext`.
"""


def build_demo_store(path: Path) -> Store:
    """Write the demo store into ``path`` (which must be empty or absent)."""
    if path.exists() and any(path.iterdir()):
        raise UsageError(f"{path} is not empty; the demo store is written into an empty folder")
    with fixed_clock(FixedClock(DEMO_START)):
        store, _ = Store.init(path)
        raw_path, _ = store.write_raw(SOURCE_NOTE.encode("utf-8"), "demo-source.md")
        span = {"source_id": Path(raw_path).name, "turn_id": None, "char_start": 0, "char_end": 0}
        start = SOURCE_NOTE.index("- Original evidence")
        span.update(char_start=start, char_end=SOURCE_NOTE.index("\n", start))
        old = api.add_memory(
            store,
            "Memories are accumulated directly inside the prompt.",
            source="demo:old-assumption",
            type="project_decision",
            key="demo.memory.delivery",
            priority="high",
        ).new_nodes[0]
        ledger.apply_patch(
            store,
            "refine",
            [old.id],
            reason="The user corrected it: memory is a source-grounded graph that "
            "hooks and tools consume, not text piled into the prompt.",
            contents=[
                "Raw evidence is kept verbatim; only active MemoryNodes reach the agent, through hook and MCP context."
            ],
            source=Source(label="demo:correction", raw_spans=[span]),
        )
        api.add_memory(
            store,
            "Checks are split into local gates (mutation, retrieval, pack, hook, MCP, code graph) "
            "and external memory, tool and code benchmark tracks.",
            source="demo:benchmark",
            type="benchmark_requirement",
            key="demo.benchmark.gates",
            priority="high",
        )
        sessions.start_session(
            store, DEMO_SESSION, agent="codex", workspace="local", project="cclg", branch_name="main"
        )
        api.add_memory(
            store,
            "This overlay memory is visible only in packs for demo-session.",
            source="demo:session-overlay",
            scope=api.parse_scope(["workspace=local", "project=cclg", "agent=codex", f"session={DEMO_SESSION}"]),
        )
        sessions.record_event(
            store,
            DEMO_SESSION,
            "user_prompt",
            {"prompt": "How does cclg deliver memory to the agent?", "session_id": DEMO_SESSION},
        )
    return store
