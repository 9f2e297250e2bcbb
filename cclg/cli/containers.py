"""Commands for the portable ``.cclg`` container: write one, describe one, bring one in."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cclg import api
from cclg.cli.common import emit, json_option, shown, store_of


@click.command("export")
@click.argument("out")
@click.option(
    "--format",
    "format_",
    type=click.Choice(api.EXPORT_FORMATS),
    default="cclg",
    show_default=True,
    help="cclg: the .cclg container (the whole ledger); jsonl, arrow (Arrow IPC file), parquet: a table "
    "(arrow and parquet need the 'arrow' extra).",
)
@click.option("--ledger", is_flag=True, help="A table of every record (nodes, patches, edges, sessions), not the view.")
@click.option("--session", "session_ids", multiple=True, help="Only this session's record in @sessions (repeatable).")
@click.option("--force", is_flag=True, help="Replace OUT if it exists.")
@click.pass_context
def export_command(
    ctx: click.Context, out: str, format_: str, ledger: bool, session_ids: tuple[str, ...], force: bool
) -> None:
    """Write the store's whole ledger into one portable .cclg container, or a table ('-' writes stdout).

    A container holds nodes, patches and edges whole; --session narrows only the
    session records. The file is checksummed and other runtimes can load it.
    --format jsonl|arrow|parquet writes a table of the current memories (the
    effective view) or, with --ledger, of every record: one row per record, its
    columns in the README's "Tables" section.

    Example: cclg export backup.cclg; cclg export --format parquet --ledger memory.parquet
    """
    sessions = list(session_ids) or None
    if out == "-":
        sys.stdout.buffer.write(api.export_bytes(store_of(ctx), format_, ledger=ledger, session_ids=sessions))
        return
    header = api.export_to(store_of(ctx), Path(out), format=format_, ledger=ledger, session_ids=sessions, force=force)
    if format_ != "cclg":
        click.echo(f"wrote {out}: {header['format']}, {header['view']}, {header['bytes']:,} bytes")
        return
    summary = ", ".join(f"{n} {name}" for name, n in header["counts"].items())
    click.echo(f"wrote {out}: {summary} (sha256 {header['content_sha256'][:12]})")


@click.command("open")
@click.argument("file")
@click.option("--session", "session_id", help="The effective view as this session sees it (with its overlay).")
@click.option("--no-validate", is_flag=True, help="Skip record validation (framing, checksum, auth are still checked).")
@json_option
def open_command(file: str, session_id: str | None, no_validate: bool, as_json: bool) -> None:
    """Check a .cclg container and describe it, without touching any store ('-' reads stdin).

    Shows the header, the record counts, warnings (unknown sections) and the ids
    of the effective view: the memories that are current truth in it.

    Example: cclg open backup.cclg --json
    """
    container = api.load_container(api.read_text(file), validate=not no_validate)
    emit(container.describe(session_id), as_json)
    for warning in container.warnings:
        click.echo(f"warning: {shown(warning)}", err=True)


@click.command("import-container")
@click.argument("file")
@click.option("--dry-run", is_flag=True, help="Report what would happen; write nothing.")
@json_option
@click.pass_context
def import_container_command(ctx: click.Context, file: str, dry_run: bool, as_json: bool) -> None:
    """Bring a .cclg container's records into the store ('-' reads stdin), all or nothing.

    Known records are skipped. A container never changes your memories: a known
    memory whose content differs is kept as it is, the incoming version waits
    beside it in conflict_pending; a patch that would change one of your memories
    is not applied and waits there as a conflict too (see `cclg conflicts`, settle
    with `cclg resolve`). Imported memories are untrusted and never pinned until
    you `cclg label` them. The file is checked in full before anything is written.

    Example: cclg import-container backup.cclg --dry-run
    """
    container = api.load_container(api.read_text(file))
    report = api.import_container(store_of(ctx), container, dry_run=dry_run)
    for warning in container.warnings:
        click.echo(f"warning: {shown(warning)}", err=True)
    emit(report.to_dict(), as_json)


COMMANDS = [export_command, open_command, import_container_command]
