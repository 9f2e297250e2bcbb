"""Commands that bring in what users already have: ``cclg sources add|list|remove|sync|conflicts`` and
``cclg import KIND PATH`` (``cclg.api.sources``)."""

from __future__ import annotations

from typing import Any

import click

from cclg.api import sources
from cclg.cli.common import emit, json_option, shown, store_of

KINDS_HELP = "\n".join(f"  {name:<19} {kind.summary} ({kind.trust})" for name, kind in sources.SOURCE_KINDS.items())
KINDS_HELP += "".join(f"\n  {name:<19} what `cclg export --format {name}` wrote" for name in sources.TABLE_KINDS)


@click.group("sources")
def sources_group() -> None:
    """Sources kept in step with the store: instruction files, other tools' memories, plugins.

    A source is registered once; each `cclg sources sync` (and each session's start, for the
    instruction files of the session's repository) reads it again: a new item becomes a memory, a
    changed one a refine patch of its memory, a removed one expires it, and nothing is written when
    nothing changed. A memory you changed in cclg is never overwritten: while the file says
    otherwise it is listed by `cclg sources conflicts`.

    Example: cclg sources add claude-md . && cclg sources sync
    """


@sources_group.command(
    "add",
    help=f"""Register a source of KIND at PATH and bring it in.

\b
Kinds (trust of their memories in parentheses):
{KINDS_HELP}

Example: cclg sources add claude-md ~/src/api""",
)
@click.argument("kind", type=click.Choice(list(sources.SOURCE_KINDS)))
@click.argument("path")
@click.option("--no-sync", is_flag=True, help="Only register it; the next `cclg sources sync` brings it in.")
@json_option
@click.pass_context
def add(ctx: click.Context, kind: str, path: str, no_sync: bool, as_json: bool) -> None:
    result = sources.add_source(store_of(ctx), kind, path, sync=not no_sync)
    if as_json:
        emit(result, True)
        return
    click.echo(
        f"source {shown(result['source']['id'])}: {shown(result['source']['kind'])} {shown(result['source']['path'])}"
    )
    for report in result["sync"]:
        _print_report(report)


@sources_group.command("list")
@json_option
@click.pass_context
def list_(ctx: click.Context, as_json: bool) -> None:
    """The registered sources: kind, path, trust, items tracked, last sync.

    Example: cclg sources list
    """
    emit(sources.list_sources(store_of(ctx)), as_json)


@sources_group.command("remove")
@click.argument("source")
@json_option
@click.pass_context
def remove(ctx: click.Context, source: str, as_json: bool) -> None:
    """Stop keeping SOURCE (its id or path) in step; the memories it made stay.

    Example: cclg sources remove claude-md-1a2b3c4d
    """
    emit(sources.remove_source(store_of(ctx), source), as_json)


@sources_group.command("sync")
@click.argument("source_ids", nargs=-1)
@json_option
@click.pass_context
def sync(ctx: click.Context, source_ids: tuple[str, ...], as_json: bool) -> None:
    """Bring every registered source (or the SOURCE_IDS given) up to date, and say what changed:
    new, refined or superseded, expired, unchanged, refused (secrets, thrown-out content), conflicts.

    Example: cclg sources sync
    """
    reports = [r.to_dict() for r in sources.sync_sources(store_of(ctx), list(source_ids))]
    if as_json:
        emit(reports, True)
        return
    for report in reports:
        _print_report(report)
    if not reports:
        click.echo("no sources registered: `cclg sources add KIND PATH`")


@sources_group.command("conflicts")
@json_option
@click.pass_context
def conflicts(ctx: click.Context, as_json: bool) -> None:
    """Items whose memory you changed in cclg while the file still says otherwise (never overwritten).

    Settle one by editing the file to say what the memory says, or by patching the memory.
    Example: cclg sources conflicts
    """
    emit(sources.source_conflicts(store_of(ctx)), as_json)


def _print_report(report: dict[str, Any]) -> None:
    head = f"{shown(report['source'])}:"
    if report["error"]:
        click.echo(f"{head} not read: {shown(report['error'])}")
        return
    refined = [r for r in report["refined"] if r["operation"] == "refine"]
    counts = [
        f"{len(report['new'])} new",
        f"{len(refined)} refined",
        f"{len(report['refined']) - len(refined)} superseded",
        f"{len(report['expired'])} expired",
        f"{report['unchanged']} unchanged",
    ]
    if report["adopted"]:
        counts.append(f"{len(report['adopted'])} already current")
    click.echo(f"{head} {', '.join(counts)}")
    for refused in report["refused"]:
        click.echo(f"  refused {shown(refused['where'])}: {shown(refused['why'])}")
    for change in report["refined"]:
        click.echo(f"  {change['operation']} {change['from']} -> {change['to']}")


@click.command(
    "import",
    help=f"""A one-off import of KIND at PATH: each item a new memory, nothing kept in step
(`cclg sources add` keeps it in step). `jsonl` is `cclg import-jsonl`; `arrow`, `parquet` (and a
`jsonl --ledger` export) read back what `cclg export --format` wrote.

\b
Kinds (trust of their memories in parentheses):
{KINDS_HELP}

Example: cclg import mem0-json export.json""",
)
@click.argument("kind", type=click.Choice([*sources.SOURCE_KINDS, *sources.TABLE_KINDS]))
@click.argument("path")
@click.option("--force", is_flag=True, help="jsonl and tables: import content that was forgotten or discarded before.")
@json_option
@click.pass_context
def import_(ctx: click.Context, kind: str, path: str, force: bool, as_json: bool) -> None:
    emit(sources.import_source(store_of(ctx), kind, path, force=force), as_json)


COMMANDS = [sources_group, import_]
