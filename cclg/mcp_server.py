"""``cclg-mcp``: the MCP server, on the official SDK (``mcp`` 2.x, ``MCPServer``).

Every tool is a module-level function over the store (in ``cclg.mcp_tools``) and a
thin call into the library, so a write through MCP goes through the same ledger,
lattice and audit log as the CLI, and the CLI's ``--json`` output and a tool's
structured result are the same records. One table, ``TOOLS``, names each tool's
verb, function, description and annotations; ``build_server`` walks it.

The tools: search, grep, bm25, pack, add, patch, raw, recall, cite, conflicts,
resolve, audit, label, purge (off unless allowed), reindex; the code graph's code_index, code_search; distill
(proposals only), stats; and the
previous turn's coglog_read, coglog_write, coglog_clear (CogLog's names).

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
error carrying the library's message; the server keeps serving. Over stdio every
message is read with the bounded reader first (``BoundedStdin``: at most
``MAX_MESSAGE_BYTES``, nested at most ``cclg.core.fields.MAX_JSON_DEPTH`` levels); one it
refuses is answered with a JSON-RPC error naming why (the SDK drops a message it
cannot parse, and the client would wait forever). Over streamable-http each request body has the
same bounds (``BoundedBodies``), answered with an HTTP 413 or 400 carrying that error.
"""

from __future__ import annotations

import functools
import inspect
import io
import json
import os
import re
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

import click
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

from cclg import __version__, api
from cclg.api.memories import Store
from cclg.core.fields import parse_json
from cclg.errors import CclgError, disk_refusal
from cclg.mcp_tools import (
    MAX_RAW_CHARS,
    RENDERED_FORMATS,
    code_index,
    code_search,
    coglog_clear,
    coglog_read,
    coglog_write,
    memory_add,
    memory_audit,
    memory_bm25,
    memory_cite,
    memory_conflicts,
    memory_distill,
    memory_grep,
    memory_label,
    memory_pack,
    memory_patch,
    memory_purge,
    memory_raw,
    memory_recall,
    memory_reindex,
    memory_resolve,
    memory_search,
    memory_stats,
    sync_status,
)

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
# Adds a memory each call (nothing is overwritten).
ADDITIVE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
# Writes, but calling again with the same arguments changes nothing (raw evidence is stored once,
# the code graph and the search index are rebuilt from what is there).
IDEMPOTENT = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
# Retires or relabels memories (reversible with a rollback, but it changes what is current).
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)


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
        "Compile the ActiveMemoryPack: current memories for a task, under a budget, and up to three possibly "
        "related ones as one line each (open one with cite). With format json the result "
        f"is the pack; with {RENDERED_FORMATS} it is the pack plus its text in that format under rendered.",
        READ_ONLY,
    ),
    ToolSpec(
        "add",
        memory_add,
        "Record a new memory: one self-contained statement with its source. Content already stored comes back as "
        "duplicate_of; content that was forgotten is refused; close memories are listed in similar (patch those). "
        "Give questions: the few questions it answers, worded as the user asks them, so it is found by those words.",
        ADDITIVE,
    ),
    ToolSpec(
        "patch",
        memory_patch,
        "Change memories through the ledger: refine, supersede, forget, rollback, ... with a reason. "
        "A rewording keeps the questions the memory answers; give questions to replace them.",
        DESTRUCTIVE,
    ),
    ToolSpec("raw", memory_raw, "Keep text verbatim as raw evidence (stored once, never overwritten).", IDEMPOTENT),
    ToolSpec(
        "recall", memory_recall, "Current memories for a query, each with its source, quote and raw spans.", READ_ONLY
    ),
    ToolSpec(
        "cite",
        memory_cite,
        "One memory in full and where it came from: content, source, quote, raw evidence, patches. Opens a "
        "pack's possibly related line.",
        READ_ONLY,
    ),
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
        "purge",
        memory_purge,
        "Erase a memory's content for good from every file and index, leaving a tombstone with its hash; cannot be "
        "undone. Off unless the user allowed it in config.json; confirm_id must repeat the full id.",
        ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False),
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
    ToolSpec(
        "distill",
        memory_distill,
        "Propose memories from a session: the user's corrections and decisions, each with its evidence and what "
        "accepting it would do. Writes nothing: the user accepts with `cclg distill SESSION --accept N`.",
        READ_ONLY,
        prefixes=("cclg",),
    ),
    ToolSpec(
        "stats",
        memory_stats,
        "How often each memory was delivered to a session and used or ignored there; dead_weight lists those "
        "delivered often and never used.",
        READ_ONLY,
        prefixes=("cclg",),
    ),
    ToolSpec(
        "sync_status",
        sync_status,
        "Team memory: when each git remote last synced, what waits to go out, and the open conflicts between "
        "patches written on different machines. Reads only; it never syncs (run `cclg sync`).",
        READ_ONLY,
        prefixes=("cclg",),
    ),
    # CogLog's own names: a CogLog client finds its three tools.
    ToolSpec(
        "read",
        coglog_read,
        "The previous turn: what the user said, your thinking and output, and how you read them (CogLog).",
        READ_ONLY,
        prefixes=("coglog",),
    ),
    ToolSpec(
        "write",
        coglog_write,
        "Write how you read this turn (current_focus, theory_of_mind, self_narrative, annotation; empty is fine): "
        "kept until your turn ends, in your own session. What happened in the turn is recorded by the hook.",
        IDEMPOTENT,
        prefixes=("coglog",),
    ),
    ToolSpec("clear", coglog_clear, "Drop the current turn entry (its history is kept).", DESTRUCTIVE, ("coglog",)),
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
        store.warnings.clear()
        try:
            result = bound(**arguments)
        except CclgError as error:
            raise ToolError(str(error)) from error
        except Exception as error:  # the disk refusing, said plainly; anything else is the SDK's to report
            refused = disk_refusal(error)
            if refused is None:
                raise
            raise ToolError(str(refused)) from error
        if store.warnings:  # committed, with something after it left for the next command (``Store.after_commit``)
            result = {**result, "warnings": list(store.warnings)}
        return result

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
                name=f"{prefix}{'_' if prefix == 'coglog' else sep}{tool.verb}",  # CogLog's names have no dot form
                description=tool.description,
                annotations=tool.annotations,
                structured_output=True,
            )
    return server


MAX_MESSAGE_BYTES = 6 * MAX_RAW_CHARS + 65_536  # the largest call: raw's content, every character escaped
# The request's id, where it comes before any nested value (as clients write it): a message too deep
# to parse is still answered to the call that sent it.
_LEADING_ID = re.compile(
    rb'^\s*\{(?:\s*"[^"\\]*"\s*:\s*(?:"[^"\\]*"|[-\w.]+)\s*,)*?\s*"id"\s*:\s*(-?\d{1,18}|"[^"\\]{0,200}")'
)


class BoundedStdin(io.RawIOBase):
    """Standard input as the stdio transport reads it, one JSON-RPC message a line, each read with the
    bounded reader: a line over ``MAX_MESSAGE_BYTES`` (never held whole) or that ``parse_json`` refuses
    becomes a call of an unknown method named after the reason, which the SDK answers with an error to
    the same id (a line whose id cannot be found is dropped, as the SDK drops what it cannot parse)."""

    def __init__(self, source: BinaryIO) -> None:
        super().__init__()
        self.source = source
        self.pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self.pending:
            line = self.source.readline(MAX_MESSAGE_BYTES + 1)
            if not line:
                return 0
            self.pending = self.checked(line)
        size = min(len(buffer), len(self.pending))
        buffer[:size], self.pending = self.pending[:size], self.pending[size:]
        return size

    def checked(self, line: bytes) -> bytes:
        """The line itself, or the refusal that replaces it (b"" to drop it)."""
        reason = None
        if len(line) > MAX_MESSAGE_BYTES and not line.endswith(b"\n"):
            while (rest := self.source.readline(1 << 20)) and not rest.endswith(b"\n"):
                pass  # the rest of the line, read and let go
            reason = f"the message is larger than {MAX_MESSAGE_BYTES:,} bytes"
        elif line.strip():
            try:
                parse_json(line)
            except ValueError as exc:
                reason = f"the message is not JSON: {exc}"
        if reason is None:
            return line
        found = _LEADING_ID.match(line)
        if found is None:
            print(f"cclg-mcp: dropped a message: {reason}", file=sys.stderr)
            return b""
        refusal = {"jsonrpc": "2.0", "id": json.loads(found.group(1)), "method": f"refused: {reason}"}
        return json.dumps(refusal).encode() + b"\n"


class BoundedBodies:
    """The streamable-http transport's request bodies read as ``BoundedStdin`` reads stdio's lines: a
    body over ``MAX_MESSAGE_BYTES`` is answered 413 (never held whole), one that ``parse_json`` refuses 400
    with a JSON-RPC parse error to its id naming why; any other goes on to the SDK's app unchanged."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body, more = bytearray(), True
        declared = dict(scope["headers"]).get(b"content-length", b"")
        while more and not (declared.isdigit() and int(declared) > MAX_MESSAGE_BYTES):
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > MAX_MESSAGE_BYTES:
                break
        data = bytes(body)
        if more or len(data) > MAX_MESSAGE_BYTES:
            await _refused(send, 413, f"the message is larger than {MAX_MESSAGE_BYTES:,} bytes", data)
            return
        try:
            parse_json(data)
        except ValueError as exc:
            await _refused(send, 400, f"the message is not JSON: {exc}", data)
            return
        whole = [{"type": "http.request", "body": data, "more_body": False}]

        async def replay() -> Any:
            return whole.pop() if whole else await receive()

        await self.app(scope, replay, send)


async def _refused(send: Any, status: int, reason: str, body: bytes) -> None:
    """Answer an HTTP request with a JSON-RPC parse error (to the id ``body`` starts with, if found)."""
    found = _LEADING_ID.match(body)
    error = {"code": -32700, "message": f"Parse error: {reason}"}
    answer = json.dumps({"jsonrpc": "2.0", "id": json.loads(found.group(1)) if found else None, "error": error})
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": answer.encode()})


def bounded_stdin() -> io.TextIOWrapper:
    """``sys.stdin`` read through ``BoundedStdin`` (the SDK's stdio transport reads ``sys.stdin``)."""
    return io.TextIOWrapper(io.BufferedReader(BoundedStdin(sys.stdin.buffer)), encoding="utf-8", errors="replace")


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
        sys.stdin = bounded_stdin()
        server.run("stdio")
    else:
        import uvicorn  # the SDK's own server for this transport

        app = server.streamable_http_app(host=host, max_request_body_size=MAX_MESSAGE_BYTES)
        uvicorn.run(BoundedBodies(app), host=host, port=port, log_level=server.settings.log_level.lower())


if __name__ == "__main__":
    main()
