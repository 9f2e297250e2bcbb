"""``cclg-mcp``: the MCP server, on the official SDK (``mcp`` 2.x, ``MCPServer``).

Every tool is a module-level function over the store and a thin call into the
library (``cclg.api`` only), so a write through MCP goes through the same ledger,
lattice and audit log as the CLI, and the CLI's ``--json`` output and a tool's
structured result are the same records. One table, ``TOOLS``, names each tool's
verb, function, description and annotations; ``build_server`` walks it.

The tools: search, grep, bm25, pack, add, patch, raw, recall, cite, conflicts,
resolve, audit, label, reindex; and the code graph's code_index, code_search.

Each tool is served under two names: ``cclg_<verb>`` and the standard's
``memory_<verb>`` alias (the code graph's tools only as ``cclg_<verb>``: the
standard names none). Clients such as Claude Desktop and Codex reject a tool
list holding any name outside ``^[a-zA-Z0-9_-]{1,64}$``, so the CCLG standard's
dotted names (``cclg.search``, ``memory.search``) are served only with
``--dotted-names``.

A caller is not the user: it cannot mark a memory trusted, pin one (retention
required), loosen a memory's labels, or roll back a change of labels or a patch
whose undoing would bring back a trusted memory; ``code_index`` indexes only the
repository the server runs in and those the store's ``config.json`` lists under
``"mcp": {"code_index_repos": [...]}``.

A failing call (unknown id, illegal patch, bad argument) comes back as an MCP tool
error carrying the library's message; the server keeps serving.
"""

from __future__ import annotations

import functools
import inspect
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import click
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from cclg import __version__, api, guard
from cclg import format as fmt
from cclg.errors import CclgError, UsageError
from cclg.repository import git_root
from cclg.store import Store

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
CALLER_RETENTION = tuple(r for r in guard.RETENTION if r != "required")

Query = Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What to look for.")]
Limit = Annotated[int, Field(ge=1, le=MAX_LIMIT, description="At most this many results.")]
SessionId = Annotated[str | None, Field(max_length=200, description="Include this session's overlay memories.")]
Project = Annotated[str | None, Field(max_length=200, description="Only memories of this project (or of none).")]
Workspace = Annotated[str | None, Field(max_length=200, description="Only memories of this workspace (or of none).")]
MemoryId = Annotated[str, Field(min_length=4, max_length=100, description="A memory id (mem_...) or a unique prefix.")]
Content = Annotated[str, Field(min_length=1, max_length=MAX_CONTENT_CHARS, description="One self-contained statement.")]
Reason = Annotated[
    str, Field(min_length=1, max_length=2_000, description="Why; kept in the patch for the audit trail.")
]
SourceLabel = Annotated[
    str, Field(min_length=1, max_length=200, description="Where it came from: user, doc:README.md, session:ID, ...")
]

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
# Adds a memory each call (nothing is overwritten).
ADDITIVE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
# Writes, but calling again with the same arguments changes nothing (raw evidence is stored once,
# the code graph and the search index are rebuilt from what is there).
IDEMPOTENT = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
# Retires or relabels memories (reversible with a rollback, but it changes what is current).
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)


def _where(session_id: str | None, project: str | None, workspace: str | None) -> api.Where:
    return api.Where(session_id=session_id, project=project, workspace=workspace)


# ---------------------------------------------------------------- reading


def memory_search(
    store: Store,
    query: Query,
    mode: Annotated[
        str,
        Field(
            json_schema_extra={"enum": list(api.MODES)},
            description="bm25: ranked words; grep: exact text; graph: hits and what they relate to; "
            "temporal: newest first; auto: all fused.",
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
    return {"results": [h.to_dict() for h in hits]}


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
    pack = api.compile_pack(
        store,
        query,
        session_id=session_id,
        project=project,
        workspace=workspace,
        max_nodes=max_nodes,
        max_chars=max_chars,
        max_tokens=max_tokens,
    )
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
            json_schema_extra={"enum": list(guard.SENSITIVITY)},
            description="confidential is packed only where the store allows; restricted never.",
        ),
    ] = guard.DEFAULT_SENSITIVITY,
    retention: Annotated[
        str,
        Field(
            json_schema_extra={"enum": list(CALLER_RETENTION)},
            description="An MCP caller cannot pin a memory (retention required); only the user can (cclg label).",
        ),
    ] = guard.DEFAULT_RETENTION,
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
    confidence: Annotated[float, Field(ge=0, le=1)] = 1.0,
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
            json_schema_extra={"enum": [None, *guard.SENSITIVITY]},
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
    return api.code_index(store, allowed_repository(store, repo))


def allowed_repository(store: Store, repo: str) -> Path:
    """``repo`` as a folder, when it lies in a git repository the user allowed an MCP caller to index:
    the one the server runs in, or one listed under ``"mcp": {"code_index_repos": [...]}`` in the
    store's ``config.json`` (read at each call). Anything else (``/etc``, another repository) is refused."""
    folder = Path(repo).expanduser()
    if not folder.is_dir():
        raise UsageError(f"no such folder: {folder}")
    folder = folder.resolve()
    root = git_root(folder)
    settings = Store.open(store.root).config.get("mcp")
    listed = settings.get("code_index_repos") if isinstance(settings, dict) else None
    allowed = {git_root(Path.cwd().resolve())}
    if isinstance(listed, list):
        allowed |= {git_root(Path(p).expanduser().resolve()) for p in listed if isinstance(p, str) and p}
    if root is None or root not in allowed:
        where = "is not in a git repository" if root is None else f"is in {root}, a repository not allowed here"
        raise UsageError(
            f"{folder} {where}: an MCP caller indexes only the server's own repository and those listed under "
            f'"mcp": {{"code_index_repos": [...]}} in {store.root / "config.json"}; `cclg code-index` has no limit'
        )
    return folder


def code_search(
    store: Store,
    query: Query,
    repo: Annotated[str, Field(min_length=1, max_length=4_096, description="The indexed repository's folder.")],
    limit: Annotated[int, Field(ge=1, le=100)] = 10,
) -> dict[str, Any]:
    return api.code_search(store, query, repo, limit=limit)


# ---------------------------------------------------------------- the table


@dataclass(frozen=True)
class ToolSpec:
    """One tool: served as ``<prefix><sep><verb>`` for each prefix, calling ``function(store, ...)``."""

    verb: str
    function: Callable[..., dict[str, Any]]
    description: str
    annotations: ToolAnnotations
    prefixes: tuple[str, ...] = ("cclg", "memory")


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("search", memory_search, "Search current memories (ranked; optional scope filters).", READ_ONLY),
    ToolSpec("grep", memory_grep, "Find exact text (or a regex) line by line in memories and raw evidence.", READ_ONLY),
    ToolSpec("bm25", memory_bm25, "Ranked word search over current memories (BM25 only).", READ_ONLY),
    ToolSpec(
        "pack",
        memory_pack,
        "Compile the ActiveMemoryPack: current memories for a task, under a budget. With format json the result "
        f"is the pack; with {RENDERED_FORMATS} it is the pack plus its text in that format under rendered.",
        READ_ONLY,
    ),
    ToolSpec(
        "add",
        memory_add,
        "Record a new memory: one self-contained statement with its source. Content already stored comes back as "
        "duplicate_of; content that was forgotten is refused; close memories are listed in similar (patch those).",
        ADDITIVE,
    ),
    ToolSpec(
        "patch",
        memory_patch,
        "Change memories through the ledger: refine, supersede, forget, rollback, ... with a reason.",
        DESTRUCTIVE,
    ),
    ToolSpec("raw", memory_raw, "Keep text verbatim as raw evidence (stored once, never overwritten).", IDEMPOTENT),
    ToolSpec(
        "recall", memory_recall, "Current memories for a query, each with its source, quote and raw spans.", READ_ONLY
    ),
    ToolSpec("cite", memory_cite, "Where one memory came from: source, quote, raw evidence, patches.", READ_ONLY),
    ToolSpec("conflicts", memory_conflicts, "Memories waiting for a decision (conflict_pending).", READ_ONLY),
    ToolSpec("resolve", memory_resolve, "Settle a conflict with one memory that says what is true now.", DESTRUCTIVE),
    ToolSpec("audit", memory_audit, "The audit log, newest first: every change to the store.", READ_ONLY),
    ToolSpec(
        "label",
        memory_label,
        "Change a memory's trust (untrusted or quarantined, never trusted), sensitivity or retention, with a "
        "reason: an update patch, same content, new labels.",
        DESTRUCTIVE,
    ),
    ToolSpec(
        "reindex", memory_reindex, "Rebuild the search index from the store's files (safe at any time).", IDEMPOTENT
    ),
    # The code graph's tools have no memory_ alias: the CCLG standard names none.
    ToolSpec(
        "code_index",
        code_index,
        "Index a repository's code graph (files, symbols, imports, churn) into the store; reruns parse changes.",
        IDEMPOTENT,
        prefixes=("cclg",),
    ),
    ToolSpec(
        "code_search",
        code_search,
        "Which files of an indexed repository to read first for a task, with key symbols and why.",
        READ_ONLY,
        prefixes=("cclg",),
    ),
)


def _bind(function: Callable[..., dict[str, Any]], store: Store) -> Callable[..., dict[str, Any]]:
    """``function`` over ``store``, its library errors turned into MCP tool errors carrying their message.

    The SDK builds a tool's input schema from ``inspect.signature`` of what it is given, and names
    the schema after its ``__name__``: the wrapper keeps the function's name and shows the
    signature of ``function`` without its first parameter, so no ``store`` reaches the client.
    """
    bound = functools.partial(function, store)

    @functools.wraps(function)
    def call(**arguments: Any) -> dict[str, Any]:
        try:
            return bound(**arguments)
        except CclgError as error:
            raise ToolError(str(error)) from error

    call.__signature__ = inspect.signature(bound, eval_str=True)  # type: ignore[attr-defined]
    return call


def build_server(store: Store, *, dotted_names: bool = False) -> MCPServer:
    """The server with every tool of ``TOOLS`` registered under its names."""
    sep = "." if dotted_names else "_"
    server = MCPServer(
        name="cclg",
        version=__version__,
        instructions=(
            f"cclg is the user's local memory store. Search it (cclg{sep}search, cclg{sep}recall) before relying "
            f"on what you assume about this project; record what you learn (cclg{sep}add); correct what is wrong "
            f"(cclg{sep}patch). Retired memories are history, never current truth."
        ),
    )
    for tool in TOOLS:
        function = _bind(tool.function, store)
        for prefix in tool.prefixes:
            server.add_tool(
                function,
                name=f"{prefix}{sep}{tool.verb}",
                description=tool.description,
                annotations=tool.annotations,
                structured_output=True,
            )
    return server


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--root",
    envvar="CCLG_HOME",
    type=click.Path(file_okay=False),
    help="Store folder. Default: $CCLG_HOME, else ~/.cclg.",
)
@click.option("--transport", type=click.Choice(["stdio", "streamable-http"]), default="stdio", show_default=True)
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address for streamable-http (loopback by default)."
)
@click.option(
    "--port", type=click.IntRange(1, 65535), default=8765, show_default=True, help="Port for streamable-http."
)
@click.option("--dotted-names", is_flag=True, help="Serve the standard's dotted tool names (cclg.search) instead.")
@click.version_option(__version__, prog_name="cclg-mcp")
def main(root: str | None, transport: str, host: str, port: int, dotted_names: bool) -> None:
    """Serve the cclg store to MCP clients (stdio by default).

    Register it with Claude Code: claude mcp add cclg -- cclg-mcp
    """
    try:
        store = api.open_store(root)
    except CclgError as error:
        click.echo(f"cclg-mcp: {error}", err=True)
        sys.exit(error.exit_code)
    server = build_server(store, dotted_names=dotted_names)
    if transport == "stdio":
        # A host stops its servers with SIGINT. The SDK reads stdin in a worker thread that a
        # KeyboardInterrupt cannot end, so the process would wait for the host's SIGTERM: exit now.
        # Every store write is crash-safe (the next write finishes or clears what this one left).
        signal.signal(signal.SIGINT, lambda signum, frame: os._exit(128 + signum))
        server.run("stdio")
    else:
        server.run("streamable-http", host=host, port=port)


if __name__ == "__main__":
    main()
