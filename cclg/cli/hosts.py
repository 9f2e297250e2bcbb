"""Commands that connect cclg to agent hosts (Claude Code, Codex), and write the demo store."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from cclg import api
from cclg.api.surfaces import escape_invisible, git_root
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
    _say_if_semantic_off()


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


HOST_NAMES = {"claude": "Claude Code", "codex": "Codex"}
SAMPLE_PROMPT = "how do I build this project and run its tests?"


@click.command("quickstart")
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path), default=".")
@click.option("--yes", "-y", is_flag=True, help="Take every step without asking (for scripts).")
@click.option("--prompt", default=SAMPLE_PROMPT, show_default=True, help="The sample prompt shown at the end.")
@click.pass_context
def quickstart_command(ctx: click.Context, folder: Path, yes: bool, prompt: str) -> None:
    """Set cclg up for the repository in FOLDER (default: here), asking before each step.

    It creates the store if there is none, finds the repository's instruction files (CLAUDE.md, AGENTS.md,
    GEMINI.md, copilot instructions, .cursor/rules) and offers to import them, kept in step from then
    on; it offers to connect each agent host this machine has (Claude Code, Codex: hooks and MCP, in
    your home folder); and it prints what the agent now gets for a sample prompt.
    Example: cclg quickstart --yes
    """
    if not yes and not sys.stdin.isatty():
        raise UsageError("quickstart asks before each step, and this is not a terminal: give --yes to take them all")
    store_root: str | None = ctx.obj["root"]
    store, created = api.init_store(store_root)
    click.echo(f"{'created the store' if created else 'the store'}: {store.root}")
    project = api.session_project(str(folder.resolve()))
    top = folder.resolve()
    if project is None:
        click.echo(f"{top} is not inside a git repository: its memories get no project scope")
    else:
        top = git_root(top) or top
        click.echo(f"project: {shown(project.name)} ({shown(project.value)}), the repository at {top}")
    _offer_instructions(store, top, yes)
    _offer_hosts(store_root, yes)
    request = api.PackRequest(prompt, where=api.Where(project=project))
    pack = api.explain_pack(store, request)["pack"]
    click.echo(f"\nFor the prompt {shown(prompt)!r} in this repository, the agent now gets:\n")
    if pack["memory_nodes"] or pack.get("possibly_related"):
        click.echo(escape_invisible(api.render(pack, "markdown").rstrip("\n")))
    else:
        click.echo("nothing: no memory is about it yet (try --prompt with words of your instruction files)")
    _say_if_semantic_off()


def _say_if_semantic_off() -> None:
    """The line quickstart and install end with when packs will match words only (``api.semantic_off_reason``)."""
    off = api.semantic_off_reason()
    if off is not None:
        click.echo(f"\nsemantic recall is off, since {shown(off)}: the agent gets memories that share its words only")


def _offer_instructions(store: api.Store, top: Path, yes: bool) -> None:
    found = api.find_instruction_files(top)
    files = [path for paths in found.values() for path in paths]
    if not files:
        click.echo("no instruction files (CLAUDE.md, AGENTS.md, GEMINI.md, copilot instructions, .cursor/rules) here")
        return
    click.echo("instruction files:")
    for path in files:
        click.echo(f"  {shown(str(path.relative_to(top)))}")
    if not (yes or click.confirm("Import them, and keep their memories in step with them?", default=True)):
        return
    imported = api.import_instruction_files(store, top)
    reports = [report for added in imported["sources"] for report in added["sync"]]
    new = sum(len(r["new"]) + len(r["adopted"]) for r in reports)
    refused = sum(len(r["refused"]) for r in reports)
    noun = "file" if len(files) == 1 else "files"
    click.echo(f"imported {new} memories from {len(files)} {noun}" + (f" ({refused} refused)" if refused else ""))


def _offer_hosts(store_root: str | None, yes: bool) -> None:
    present = api.present_hosts()
    if not present:
        click.echo(
            "no agent host found (claude or codex on PATH, ~/.claude or ~/.codex): install one, then `cclg install`"
        )
    for host, command in present.items():
        if not (
            yes or click.confirm(f"Connect {HOST_NAMES[host]} (its hooks and MCP, in your home folder)?", default=True)
        ):
            continue
        changes = api.install_host(host, root=store_root, trust=command)  # Codex's trust is asked of its command
        added = sum(len(change.added) for change in changes)
        click.echo(
            f"connected {HOST_NAMES[host]}: {added} entries added"
            if added
            else f"{HOST_NAMES[host]}: already connected"
        )


COMMANDS = [install_command, uninstall_command, demo_store_command, quickstart_command]
