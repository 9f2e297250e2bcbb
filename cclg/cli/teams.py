"""``cclg remote`` and ``cclg sync``: team memory over git (``cclg.api.sync``)."""

from __future__ import annotations

import click

from cclg import api
from cclg.cli.common import emit, json_option, store_of


@click.group("remote")
def remote() -> None:
    """The git remotes this store syncs its project memories with.

    Example: cclg remote add team git@github.com:org/api.git
    """


@remote.command("add")
@click.argument("name")
@click.argument("url")
@click.option(
    "--trust",
    type=click.Choice(["untrusted", "trusted"]),
    default="untrusted",
    show_default=True,
    help="The most trust a memory from this remote may have (trusted also lets it bring pinned memories).",
)
@click.option("--raw", is_flag=True, help="Also send the raw evidence the memories cite (off: it holds private text).")
@click.option("--branch", help="The branch the records live on (default: cclg/memory).")
@json_option
@click.pass_context
def remote_add(
    ctx: click.Context, name: str, url: str, trust: str, raw: bool, branch: str | None, as_json: bool
) -> None:
    """Add the remote NAME at the git URL (any remote: the project's own repository, another one, a folder).

    Example: cclg remote add team ../memory.git --trust trusted
    """
    emit(api.add_remote(store_of(ctx), name, url, trust=trust, raw=raw, branch=branch), as_json)


@remote.command("list")
@json_option
@click.pass_context
def remote_list(ctx: click.Context, as_json: bool) -> None:
    """List the remotes (name, URL, branch, trust, raw).

    Example: cclg remote list --json
    """
    emit({"remotes": api.list_remotes(store_of(ctx))}, as_json)


@remote.command("remove")
@click.argument("name")
@json_option
@click.pass_context
def remote_remove(ctx: click.Context, name: str, as_json: bool) -> None:
    """Remove the remote NAME and its clone; the memories it brought stay.

    Example: cclg remote remove team
    """
    emit(api.remove_remote(store_of(ctx), name), as_json)


@click.command("sync")
@click.argument("name", required=False)
@click.option("--dry-run", is_flag=True, help="List what would come in and go out; change nothing.")
@json_option
@click.pass_context
def sync(ctx: click.Context, name: str | None, dry_run: bool, as_json: bool) -> None:
    """Sync with the remote NAME (needed when there are several): fetch, merge, push.

    Memories of shared scopes (project, workspace, org) travel with their patches and edges; session
    memories, confidential and restricted ones, anything holding a secret and (unless the remote was
    added with --raw) raw evidence never leave. What arrives is trusted at most as the remote is.
    Exit code 9 when git or the remote refused.

    Example: cclg sync team --dry-run
    """
    emit(api.sync_remote(store_of(ctx), name, dry_run=dry_run), as_json)


COMMANDS = [remote, sync]
