"""The MCP tools' functions: each one a module-level function over the store and a thin call into
the library (``cclg.api`` only), with its arguments' types and limits; ``cclg.mcp_server`` serves
them from its table (``TOOLS``). A caller is not the user, and the limits below say what it may
send and do.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from cclg import api
from cclg import format as fmt
from cclg.api import learning
from cclg.api.memories import Store
from cclg.api.surfaces import (
    DEFAULT_RETENTION,
    DEFAULT_SENSITIVITY,
    MAX_QUESTIONS,
    QUESTION_CHARS,
    RETENTION,
    SENSITIVITY,
    project_filter,
)
from cclg.errors import UsageError

# Limits on what a caller may send: generous for real use, small enough that a
# runaway argument is refused with a clear message instead of filling the store.
MAX_QUERY_CHARS = 10_000
MAX_CONTENT_CHARS = 100_000
MAX_RAW_CHARS = 8 * 1024 * 1024
MAX_LIMIT = 200
MAX_TARGETS = 100

# The pack's formats beside json, whose text the pack tool adds under "rendered".
RENDERED_FORMATS = " or ".join(f for f in api.FORMATS if f != "json")
# The trust an MCP caller may give: never trusted (only the user can, through the CLI).
CALLER_TRUST = ("untrusted", "quarantined")
# The retention an MCP caller may give: never required, which pins a memory into every pack.
CALLER_RETENTION = tuple(r for r in RETENTION if r != "required")

Query = Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What to look for.")]
Limit = Annotated[int, Field(ge=1, le=MAX_LIMIT, description="At most this many results.")]
SessionId = Annotated[str | None, Field(max_length=200, description="Include this session's overlay memories.")]
Project = Annotated[
    str | None,
    Field(
        max_length=200,
        description="Only memories of this project (or of none): a scope value (git:SHA, a name), "
        "or . for the repository the server runs in.",
    ),
]
Workspace = Annotated[str | None, Field(max_length=200, description="Only memories of this workspace (or of none).")]
MemoryId = Annotated[
    str,
    Field(
        min_length=4, max_length=100, description="A memory id (mem_...), a unique prefix, or its short form (mem~...)."
    ),
]
Content = Annotated[str, Field(min_length=1, max_length=MAX_CONTENT_CHARS, description="One self-contained statement.")]
Reason = Annotated[
    str, Field(min_length=1, max_length=2_000, description="Why; kept in the patch for the audit trail.")
]
ValidTime = Annotated[str | None, Field(max_length=40, description="ISO 8601 date or time (UTC unless it says).")]
Questions = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=QUESTION_CHARS)]],
    Field(
        max_length=MAX_QUESTIONS,
        description='The questions this memory answers, as the user would ask them ("how do I set up the env?"): '
        "found by those words too, never shown as the memory.",
    ),
]
SourceLabel = Annotated[
    str, Field(min_length=1, max_length=200, description="Where it came from: user, doc:README.md, session:ID, ...")
]


def _where(session_id: str | None, project: str | None, workspace: str | None) -> api.Where:
    return api.Where(session_id=session_id, project=project_filter(project, Path.cwd()), workspace=workspace)


# ---------------------------------------------------------------- reading


def memory_search(
    store: Store,
    query: Query,
    mode: Annotated[
        str,
        Field(
            json_schema_extra={"enum": list(api.MODES)},
            description="bm25: ranked words; grep: exact text; graph: hits and what they relate to; "
            "temporal: newest first; auto: all fused with the memories nearest in meaning "
            "('semantic' says whether that signal answered, was cold or off).",
        ),
    ] = "auto",
    limit: Limit = 10,
    session_id: SessionId = None,
    project: Project = None,
    workspace: Workspace = None,
    status: Annotated[
        str | None,
        Field(
            json_schema_extra={"enum": [None, "all", *fmt.NODE_STATUSES]},
            description="Search memories of this status instead of current ones ('all' for every one).",
        ),
    ] = None,
) -> dict[str, Any]:
    hits = api.search_memories(
        store, query, mode=mode, limit=limit, where=_where(session_id, project, workspace), status=status
    )
    return {"results": [h.to_dict() for h in hits], "semantic": hits.semantic}


def memory_bm25(
    store: Store,
    query: Query,
    limit: Limit = 10,
    session_id: SessionId = None,
    project: Project = None,
    workspace: Workspace = None,
) -> dict[str, Any]:
    hits = api.search_memories(store, query, mode="bm25", limit=limit, where=_where(session_id, project, workspace))
    return {"results": [h.to_dict() for h in hits]}


def memory_grep(
    store: Store,
    pattern: Annotated[str, Field(min_length=1, max_length=1_000, description="Text (or regex) to find.")],
    regex: Annotated[bool, Field(description="The pattern is a regular expression.")] = False,
    ignore_case: bool = False,
    raw: Annotated[bool, Field(description="Also search raw evidence.")] = False,
    limit: Limit = 50,
    session_id: SessionId = None,
    project: Project = None,
    workspace: Workspace = None,
) -> dict[str, Any]:
    where = _where(session_id, project, workspace)
    matches = api.grep(store, pattern, regex=regex, ignore_case=ignore_case, raw=raw, where=where, limit=limit)
    return {"matches": [m.to_dict() for m in matches]}


def memory_pack(
    store: Store,
    query: Annotated[
        str, Field(max_length=MAX_QUERY_CHARS, description="The task at hand; empty for pinned memories only.")
    ] = "",
    session_id: SessionId = None,
    project: Project = None,
    workspace: Workspace = None,
    max_nodes: Annotated[int, Field(ge=0, le=MAX_LIMIT)] = api.DEFAULT_MAX_NODES,
    max_chars: Annotated[int, Field(ge=0, le=1_000_000)] = api.DEFAULT_MAX_CHARS,
    max_tokens: Annotated[int | None, Field(ge=0, le=250_000)] = None,
    format: Annotated[
        str,
        Field(
            json_schema_extra={"enum": list(api.FORMATS)},
            description=f"json: the pack alone; {RENDERED_FORMATS}: the pack plus its text in that format "
            "under rendered.",
        ),
    ] = "json",
) -> dict[str, Any]:
    budget = api.Budget(max_nodes=max_nodes, max_chars=max_chars, max_tokens=max_tokens)
    pack = api.compile_pack(store, api.PackRequest(query, where=_where(session_id, project, workspace), budget=budget))
    if format == "json":
        return pack
    return {**pack, "rendered": api.render(pack, format)}


def memory_recall(
    store: Store,
    query: Query,
    limit: Annotated[int, Field(ge=1, le=50)] = 5,
    session_id: SessionId = None,
    project: Project = None,
    workspace: Workspace = None,
) -> dict[str, Any]:
    return {"results": api.recall(store, query, where=_where(session_id, project, workspace), limit=limit)}


def memory_cite(store: Store, memory_id: MemoryId) -> dict[str, Any]:
    return api.cite(store, memory_id)


def memory_conflicts(store: Store) -> dict[str, Any]:
    return {"conflicts": api.conflicts(store)}


def sync_status(store: Store) -> dict[str, Any]:
    return api.sync_status(store)


def memory_audit(
    store: Store,
    limit: Annotated[int, Field(ge=1, le=1_000)] = 50,
    event: Annotated[str | None, Field(json_schema_extra={"enum": [None, *fmt.AUDIT_EVENTS]})] = None,
    memory_id: Annotated[str | None, Field(max_length=100, description="Only records naming this memory.")] = None,
) -> dict[str, Any]:
    return {"records": api.audit_log(store, limit=limit, event=event, memory_id=memory_id)}


# ---------------------------------------------------------------- writing


def memory_add(
    store: Store,
    content: Content,
    source: SourceLabel = "mcp",
    type: Annotated[str, Field(json_schema_extra={"enum": list(fmt.NODE_TYPES)})] = "memory",
    key: Annotated[
        str | None,
        Field(max_length=200, description="Stable key: same-key memories collapse to the narrowest scope."),
    ] = None,
    quote: Annotated[str | None, Field(max_length=10_000, description="The words of the source this rests on.")] = None,
    confidence: Annotated[float, Field(ge=0, le=1)] = 1.0,
    scope: Annotated[
        dict[str, str | None] | None, Field(description=f"Scope keys: {', '.join(fmt.SCOPE_KEYS)}.")
    ] = None,
    global_scope: Annotated[
        bool,
        Field(
            description="A memory of every project. Without it, when the server runs inside a git repository "
            "and scope names no project, the memory belongs to that repository's project."
        ),
    ] = False,
    tags: Annotated[list[Annotated[str, Field(max_length=100)]], Field(max_length=50)] = [],  # noqa: B006
    trust: Annotated[
        str,
        Field(
            json_schema_extra={"enum": list(CALLER_TRUST)},
            description="An MCP caller cannot mark a memory trusted; only the user can (cclg add).",
        ),
    ] = "untrusted",
    sensitivity: Annotated[
        str,
        Field(
            json_schema_extra={"enum": list(SENSITIVITY)},
            description="confidential is packed only where the store allows; restricted never.",
        ),
    ] = DEFAULT_SENSITIVITY,
    retention: Annotated[
        str,
        Field(
            json_schema_extra={"enum": list(CALLER_RETENTION)},
            description="An MCP caller cannot pin a memory (retention required); only the user can (cclg label).",
        ),
    ] = DEFAULT_RETENTION,
    valid_from: ValidTime = None,
    valid_until: Annotated[
        str | None, Field(max_length=40, description="ISO 8601: a temporary fact expires by itself then.")
    ] = None,
    questions: Questions = [],  # noqa: B006
) -> dict[str, Any]:
    result = api.add_memory(
        store,
        content,
        source=source,
        type=type,
        key=key,
        quote=quote,
        confidence=confidence,
        scope=api.scope_for(scope, folder=Path.cwd(), global_scope=global_scope),
        tags=list(tags),
        trust=trust,
        sensitivity=sensitivity,
        retention=retention,
        max_trust="untrusted",
        valid_from=valid_from,
        valid_until=valid_until,
        questions=list(questions),
    )
    return result.to_dict()


def memory_patch(
    store: Store,
    operation: Annotated[str, Field(json_schema_extra={"enum": list(fmt.PATCH_OPERATIONS)})],
    reason: Reason,
    targets: Annotated[
        list[Annotated[str, Field(max_length=100)]],
        Field(max_length=MAX_TARGETS, description="Memory ids to change; for rollback, the patch id."),
    ] = [],  # noqa: B006
    contents: Annotated[
        list[Annotated[str, Field(max_length=MAX_CONTENT_CHARS)]],
        Field(max_length=MAX_TARGETS, description="New content (several for split)."),
    ] = [],  # noqa: B006
    source: SourceLabel = "mcp",
    confidence: Annotated[
        float | None, Field(ge=0, le=1, description="The new memories' confidence; by default the targets'.")
    ] = None,
    questions: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=QUESTION_CHARS)]] | None,
        Field(
            max_length=MAX_QUESTIONS,
            description="The questions the new memory answers, as the user would ask them; by default the target's.",
        ),
    ] = None,
) -> dict[str, Any]:
    result = api.patch(
        store,
        operation,
        list(targets),
        contents=list(contents),
        reason=reason,
        source=source,
        confidence=confidence,
        max_trust="untrusted",
        questions=None if questions is None else list(questions),
    )
    return result.to_dict()


def memory_raw(
    store: Store,
    content: Annotated[str, Field(max_length=MAX_RAW_CHARS, description="The evidence, verbatim.")],
    name: Annotated[
        str, Field(min_length=1, max_length=200, description="File name to keep it under, such as notes.md.")
    ] = "mcp.txt",
) -> dict[str, Any]:
    return api.keep_raw(store, content.encode("utf-8"), name)


def memory_resolve(
    store: Store,
    memory_ids: Annotated[
        list[Annotated[str, Field(max_length=100)]],
        Field(min_length=1, max_length=MAX_TARGETS, description="The memories in conflict."),
    ],
    content: Content,
    reason: Reason,
    source: SourceLabel = "mcp",
) -> dict[str, Any]:
    return api.resolve(
        store, list(memory_ids), content=content, reason=reason, source=source, max_trust="untrusted"
    ).to_dict()


def memory_label(
    store: Store,
    memory_id: MemoryId,
    reason: Reason,
    trust: Annotated[
        str | None,
        Field(
            json_schema_extra={"enum": [None, *CALLER_TRUST]},
            description="quarantined keeps it out of every pack. An MCP caller cannot mark a memory trusted; "
            "only the user can (cclg label).",
        ),
    ] = None,
    sensitivity: Annotated[
        str | None,
        Field(
            json_schema_extra={"enum": [None, *SENSITIVITY]},
            description="confidential is packed only where the store allows; restricted never.",
        ),
    ] = None,
    retention: Annotated[
        str | None,
        Field(
            json_schema_extra={"enum": [None, *CALLER_RETENTION]},
            description="An MCP caller only makes labels stricter: it cannot pin (retention required) or unpin a "
            "memory, raise its trust or lower its sensitivity; the user can (cclg label).",
        ),
    ] = None,
) -> dict[str, Any]:
    return api.label(
        store,
        memory_id,
        reason=reason,
        trust=trust,
        sensitivity=sensitivity,
        retention=retention,
        max_trust="untrusted",
    ).to_dict()


def memory_reindex(store: Store) -> dict[str, Any]:
    return api.reindex(store)


# ---------------------------------------------------------------- the code graph


def code_index(
    store: Store,
    repo: Annotated[
        str,
        Field(
            min_length=1,
            max_length=4_096,
            description="The repository folder to index: the server's own repository, or one the user allowed.",
        ),
    ],
) -> dict[str, Any]:
    return api.code_index(store, api.allowed_repository(store, repo))


def code_search(
    store: Store,
    query: Query,
    repo: Annotated[str, Field(min_length=1, max_length=4_096, description="The indexed repository's folder.")],
    limit: Annotated[int, Field(ge=1, le=100)] = 10,
) -> dict[str, Any]:
    return api.code_search(store, query, repo, limit=limit)


# ---------------------------------------------------------------- the previous turn (CogLog)

TurnSession = Annotated[
    str | None,
    Field(
        max_length=128,
        description="Your session (its id comes with the context); default: the one with the latest prompt "
        "from this folder. Another folder's session is refused.",
    ),
]
Interpretation = Annotated[str | None, Field(max_length=learning.MAX_FIELD_CHARS)]


def coglog_read(store: Store, session_id: TurnSession = None) -> dict[str, Any]:
    return api.read_turn(store, session_id, coglog=True)


def coglog_write(
    store: Store,
    current_focus: Annotated[Interpretation, Field(description="Present: what am I working on?")] = None,
    theory_of_mind: Annotated[Interpretation, Field(description="Other: the user's state?")] = None,
    self_narrative: Annotated[Interpretation, Field(description="Self: who am I now?")] = None,
    annotation: Annotated[Interpretation, Field(description="Future: what to do next?")] = None,
    session_id: TurnSession = None,
) -> dict[str, Any]:
    """The interpretation layer only: the fact layer (user, thinking, assistant) is the hook's, from
    the session's recorded evidence."""
    given = dict(current_focus=current_focus, theory_of_mind=theory_of_mind, self_narrative=self_narrative)
    given.update(annotation=annotation)
    return api.write_turn(store, {k: v for k, v in given.items() if v is not None}, session_id)


def coglog_clear(store: Store, session_id: TurnSession = None) -> dict[str, Any]:
    return {"cleared": api.clear_turn(store, session_id)}


# ---------------------------------------------------------------- distilling a session


def memory_distill(
    store: Store,
    session_id: Annotated[str, Field(min_length=1, max_length=128, description="The session to read.")],
) -> dict[str, Any]:
    return api.distill_review(store, session_id)


# ---------------------------------------------------------------- erasure


def memory_purge(
    store: Store,
    memory_id: MemoryId,
    reason: Reason,
    confirm_id: Annotated[
        str, Field(min_length=4, max_length=100, description="The memory's full id again: the purge cannot be undone.")
    ],
) -> dict[str, Any]:
    """Only where the user allowed it (``"mcp": {"allow_purge": true}`` in config.json): an MCP caller
    is not the user, and a purge cannot be undone."""
    if not store.settings.get("mcp", "allow_purge"):
        raise UsageError(
            f'purging through MCP is off: the user can run `cclg purge ID`, or allow it with "mcp": '
            f'{{"allow_purge": true}} in {store.config_path}'
        )
    return api.purge_memory(store, memory_id, reason=reason, source="mcp", confirm_id=confirm_id).to_dict()


def memory_stats(
    store: Store,
    dead_weight: Annotated[bool, Field(description="Only memories delivered often and never used.")] = False,
    min_delivered: Annotated[int, Field(ge=1, le=1_000_000)] = 10,
) -> dict[str, Any]:
    return api.usage_report(store, dead_weight=dead_weight, min_delivered=min_delivered)
