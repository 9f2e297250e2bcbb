"""Commands that connect cclg to agent hosts (Claude Code, Codex), and write the demo store."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from cclg import api
from cclg.cli.common import emit, json_option, shown
from cclg.errors import UsageError

if TYPE_CHECKING:
    from cclg.hosts.install import Change

host_argument = click.argument("host", type=click.Choice(["claude", "codex"]))
place_option = click.option(
    "--project",
    type=click.Path(file_okay=False, path_type=Path),
    help="Configure this project folder (.claude/settings.json and .mcp.json, or .codex/hooks.json) "
    "instead of your home folder.",
)
user_option = click.option("--user", is_flag=True, help="Configure your home folder (the default).")
dry_run_option = click.option("--dry-run", is_flag=True, help="Show what would change; write nothing.")


def _place(project: Path | None, user: bool) -> Path | None:
    if project is not None and user:
        raise UsageError("give --project DIR or --user, not both")
    return project


def _print_changes(changes: list[Change], as_json: bool, verb: str) -> None:
    if as_json:
        emit([change.to_dict() for change in changes], True)
        return
    for change in changes:
        lines = change.added if verb == "added" else change.removed
        if not lines:
            click.echo(f"nothing to change in {change.path}")
            continue
        click.echo(f"{'would change' if not change.written else 'changed'} {change.path}:")
        for line in lines:
            click.echo(f"  {verb} {shown(line)}")
        if change.backup:
            click.echo(f"previous version kept as {change.backup}")


@click.command("install")
@host_argument
@place_option
@user_option
@dry_run_option
@click.option(
    "--no-trust",
    is_flag=True,
    help="Codex: do not record your trust in the cclg-hook handlers; approve them yourself in Codex's /hooks.",
)
@json_option
@click.pass_context
def install_command(
    ctx: click.Context, host: str, project: Path | None, user: bool, dry_run: bool, no_trust: bool, as_json: bool
) -> None:
    """Register cclg-hook and cclg-mcp with Claude Code or Codex (merged; other settings are kept; safe to repeat).

    Creates the store if there is none. Codex runs a hook only once you trust it: for Codex, install
    records that trust for exactly the cclg-hook handlers it wrote (asking `codex app-server` for
    their hashes), unless --no-trust. Example: cclg install claude
    """
    store_root: str | None = ctx.obj["root"]
    place = _place(project, user)
    changes = api.install_host(host, project=place, root=store_root, dry_run=dry_run, trust=not no_trust)
    _print_changes(changes, as_json, "added")
    if as_json:
        return
    if host == "codex" and place is not None:
        click.echo("Codex reads a project's .codex/ only once you trust the project (Codex asks when it starts there).")
    trusted = any(line.startswith("Codex trust") for change in changes for line in change.added)
    if host == "codex" and not trusted and not no_trust and place is not None:
        click.echo(
            "Codex runs a new hook only once you trust it: after you trust the project, run this install again"
            " (it records your trust in cclg's hooks), or open /hooks in Codex and trust each cclg-hook."
        )
    elif host == "codex" and changes[0].added and not trusted:
        click.echo("Codex runs a new hook only once you trust it: open /hooks in Codex and trust each cclg-hook.")


@click.command("uninstall")
@host_argument
@place_option
@user_option
@dry_run_option
@json_option
def uninstall_command(host: str, project: Path | None, user: bool, dry_run: bool, as_json: bool) -> None:
    """Remove exactly what `cclg install` added: the cclg-hook handlers and the cclg-mcp registration.

    Example: cclg uninstall codex --project .
    """
    changes = api.uninstall_host(host, project=_place(project, user), dry_run=dry_run)
    _print_changes(changes, as_json, "removed")


@click.command("demo-store")
@click.argument("path", type=click.Path(file_okay=False, path_type=Path))
def demo_store_command(path: Path) -> None:
    """Write the demo store (fixed ids and timestamps) into an empty folder PATH.

    Example: cclg demo-store ./demo-store
    """
    api.build_demo_store(path)
    click.echo(f"wrote the demo store to {path}")


COMMANDS = [install_command, uninstall_command, demo_store_command]
