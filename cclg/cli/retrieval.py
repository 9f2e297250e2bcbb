"""Commands that find memories for a task: search, grep, recall, and the pack an agent is given.

All of them read the effective view (current truth) unless told otherwise, through
the search index, which ``cclg reindex`` rebuilds from the files.
"""

from __future__ import annotations

import click

from cclg import api
from cclg.api.surfaces import escape_invisible
from cclg.cli.common import (
    count,
    emit,
    json_option,
    project_option,
    session_option,
    shown,
    store_of,
    where,
    workspace_option,
)


@click.command("search")
@click.argument("query")
@click.option(
    "--mode",
    type=click.Choice(api.MODES),
    default="auto",
    show_default=True,
    help="bm25: ranked words; grep: exact text; graph: hits plus what they depend on or refine; "
    "temporal: newest first; auto: all fused with the memories nearest in meaning (the last line says "
    "whether that semantic signal answered, was cold or off).",
)
@click.option("--limit", type=count(1), default=10, show_default=True)
@session_option
@project_option
@workspace_option
@click.option(
    "--status",
    help="Search memories of this status instead of current truth ('all' for every one, "
    "'retired' for those no longer true).",
)
@click.option("--since", help="Only memories recorded at or after this ISO date/time.")
@click.option("--until", help="Only memories recorded before this ISO date/time.")
@click.option("--as-of", "as_of", help="Search the effective view as it was at this ISO date/time.")
@json_option
@click.pass_context
def search_command(
    ctx: click.Context,
    query: str,
    mode: str,
    limit: int,
    session_id: str | None,
    project: str | None,
    workspace: str | None,
    status: str | None,
    since: str | None,
    until: str | None,
    as_of: str | None,
    as_json: bool,
) -> None:
    """Search current memories (only the effective view unless --status says otherwise).

    Example: cclg search "pytest command" --mode bm25 --project cclg
    """
    hits = api.search_memories(
        store_of(ctx),
        query,
        mode=mode,
        limit=limit,
        where=where(session_id, project, workspace),
        status=status,
        since=api.parse_moment(since, "--since"),
        until=api.parse_moment(until, "--until"),
        as_of=api.parse_moment(as_of, "--as-of"),
    )
    if as_json:
        emit([h.to_dict() for h in hits], True)
        return
    for h in hits:
        click.echo(f"{h.score:8.4f}  {h.node.id}  [{h.node.status}] {shown(h.node.content)}")
    if not hits:
        click.echo("no matches")
    if mode == "auto":
        click.echo(f"semantic: {hits.semantic}")


@click.command("grep")
@click.argument("pattern")
@click.option("--regex", "-E", is_flag=True, help="PATTERN is a regular expression.")
@click.option("--ignore-case", "-i", is_flag=True)
@click.option("--raw", is_flag=True, help="Also search raw evidence.")
@click.option("--limit", type=count(1), default=50, show_default=True)
@session_option
@project_option
@workspace_option
@json_option
@click.pass_context
def grep_command(
    ctx: click.Context,
    pattern: str,
    regex: bool,
    ignore_case: bool,
    raw: bool,
    limit: int,
    session_id: str | None,
    project: str | None,
    workspace: str | None,
    as_json: bool,
) -> None:
    """Exact (or --regex) matches, line by line, in current memories (and raw evidence with --raw).

    Example: cclg grep -i "pytest -q" --raw
    """
    matches = api.grep(
        store_of(ctx),
        pattern,
        regex=regex,
        ignore_case=ignore_case,
        raw=raw,
        where=where(session_id, project, workspace),
        limit=limit,
    )
    if as_json:
        emit([m.to_dict() for m in matches], True)
        return
    for m in matches:
        click.echo(f"{shown(m.where)}:{m.line}: {shown(m.text)}")
    if not matches:
        click.echo("no matches")


@click.command()
@click.argument("query")
@click.option("--limit", type=count(1), default=5, show_default=True)
@session_option
@project_option
@workspace_option
@json_option
@click.pass_context
def recall(
    ctx: click.Context,
    query: str,
    limit: int,
    session_id: str | None,
    project: str | None,
    workspace: str | None,
    as_json: bool,
) -> None:
    """Current memories for QUERY, each with where it came from (source, quote, raw spans).

    Example: cclg recall "how do deploys go out" --limit 3
    """
    emit(api.recall(store_of(ctx), query, where=where(session_id, project, workspace), limit=limit), as_json)


@click.command("pack")
@click.option("--query", default="", help="The task at hand. Only pinned memories without one.")
@session_option
@project_option
@workspace_option
@click.option("--max-nodes", type=count(), default=api.DEFAULT_MAX_NODES, show_default=True)
@click.option("--max-chars", type=count(), default=api.DEFAULT_MAX_CHARS, show_default=True)
@click.option("--max-tokens", type=count(), help="Also cap the estimated tokens.")
@click.option("--format", "style", type=click.Choice(api.FORMATS), default="toml", show_default=True)
@click.option(
    "--explain", is_flag=True, help="Then say, on stderr, why each memory is in and why the runner-up stayed out."
)
@click.pass_context
def pack_command(
    ctx: click.Context,
    query: str,
    session_id: str | None,
    project: str | None,
    workspace: str | None,
    max_nodes: int,
    max_chars: int,
    max_tokens: int | None,
    style: str,
    explain: bool,
) -> None:
    """Compile the ActiveMemoryPack: current memories for a task, retired ones listed apart.

    Example: cclg pack --query "how do I run the tests" --format markdown --explain
    """
    budget = api.Budget(max_nodes=max_nodes, max_chars=max_chars, max_tokens=max_tokens)
    request = api.PackRequest(query, where=where(session_id, project, workspace), budget=budget)
    explained = api.explain_pack(store_of(ctx), request)
    click.echo(escape_invisible(api.render(explained["pack"], style).rstrip("\n"), toml=style == "toml"))
    if explain:
        for entry in explained["pack"]["memory_nodes"]:
            click.echo(f"in:  {entry['id']}: {shown(entry['why'])}", err=True)
        for entry in explained["left_out"]:
            click.echo(f"out: {entry['id']}: {shown(entry['why_not'])}", err=True)
        if not explained["pack"]["memory_nodes"] and not explained["left_out"]:
            click.echo("nothing in the store matches the query's words", err=True)


@click.command()
@click.pass_context
def reindex(ctx: click.Context) -> None:
    """Rebuild the search index (index.sqlite) from the files. Safe at any time.

    Example: cclg reindex
    """
    result = api.reindex(store_of(ctx))
    click.echo(f"indexed {result['memories']} memories in {result['seconds']:.2f}s")


COMMANDS = [search_command, grep_command, recall, pack_command, reindex]
