"""``cclg project adopt``: give the memories scoped by a folder's name to the repository they belong
to (``cclg.ledger.adoption`` does the work)."""

from __future__ import annotations

import click

from cclg import api
from cclg.cli.common import emit, json_option, store_of


@click.group("project")
def project() -> None:
    """The project memories are scoped by: the repository of the current folder.

    Example: cclg project adopt --dry-run
    """


@project.command("adopt")
@click.argument("name", required=False)
@click.option("--memory", "memory_ids", multiple=True, help="Only this memory of the name (repeatable).")
@click.option("--dry-run", is_flag=True, help="List the memories it would re-scope; write nothing.")
@click.option("--reason", help="Why (default: says the name and the repository).")
@json_option
@click.pass_context
def adopt(
    ctx: click.Context, name: str | None, memory_ids: tuple[str, ...], dry_run: bool, reason: str | None, as_json: bool
) -> None:
    """Give the current memories scoped by the folder name NAME to this repository alone.

    A memory scoped by a name (a store written before projects were repositories, --scope
    project=NAME, an import-jsonl line) reaches every repository of that name. Run this inside the
    repository they belong to (NAME: by default this repository's folder name): each gets a new
    version scoped by the repository's identity (one update patch each: same content, type, key,
    tags, window and labels), which `cclg log` lists and `cclg rollback` undoes. A memory whose hook
    sessions ran in another repository is left shared, and said so, unless --memory names it.

    Example: cclg project adopt --dry-run, then cclg project adopt
    """
    store = store_of(ctx)
    done = api.adopt_project(store, ".", name, memory_ids=list(memory_ids), dry_run=dry_run, reason=reason)
    emit(done.to_dict(), as_json)


COMMANDS = [project]
