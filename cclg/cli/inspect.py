"""Commands that look at a store without changing what it says: counts, records, history, provenance,
the audit log, and health checks (doctor, validate, scan).

``doctor --repair`` and ``scan --store --redact`` are the exceptions: they fix files,
each fix audited, but never change what a memory says.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from cclg import api
from cclg.cli.common import count, emit, json_option, shown, skipped_line, store_of
from cclg.errors import UsageError, ValidationError


@click.command()
@json_option
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """Summarise the store: memories by status, patches, sessions, raw files; inside a git
    repository, also its project (the folder's name and the id memories added there are scoped by)."""
    emit(api.status(store_of(ctx), Path.cwd()), as_json)


@click.command()
@click.argument("memory_id")
@json_option
@click.pass_context
def show(ctx: click.Context, memory_id: str, as_json: bool) -> None:
    """Print one memory record.

    Example: cclg show mem_01...
    """
    emit(api.show(store_of(ctx), memory_id).to_dict(), as_json)


@click.command()
@click.option("--memory", "memory_id", help="Only patches touching this memory.")
@click.option("--lineage", "lineage_id", help="The whole chain of versions this memory belongs to, oldest first.")
@click.option("--limit", type=count(1), help="At most this many patches.")
@json_option
@click.pass_context
def log(ctx: click.Context, memory_id: str | None, lineage_id: str | None, limit: int | None, as_json: bool) -> None:
    """The patch ledger, newest first; or, with --lineage, one memory's whole chain of versions.

    Example: cclg log --memory mem_01... --limit 5
    """
    if lineage_id is not None:
        _lineage(store_of(ctx), lineage_id, as_json)
        return
    patches = api.history(store_of(ctx), memory_id=memory_id, limit=limit)
    if as_json:
        emit([p.to_dict() for p in patches], True)
        return
    for p in patches:
        line = f"{p.id}  {p.created_at}  {p.operation:<16} {', '.join(p.target_ids) or '-'}"
        if p.new_node_ids:
            line += f" -> {', '.join(p.new_node_ids[:3])}{' ...' if len(p.new_node_ids) > 3 else ''}"
        click.echo(f"{line}\n    {shown(p.reason)}")


def _lineage(store: api.Store, memory_id: str, as_json: bool) -> None:
    chain = api.memory_lineage(store, memory_id)
    if as_json:
        emit(chain, True)
        return
    for step in chain["steps"]:
        undone = "  (undone)" if step["undone"] else ""
        made = f"{', '.join(step['targets']) or '-'} -> {', '.join(step['new']) or '-'}"
        click.echo(f"{step['created_at']}  {step['operation']:<16} {made}{undone}\n    {shown(step['reason'])}")
    for member in chain["members"]:
        click.echo(f"{member['id']}  [{member['status']}]  {shown(member['content'][:100])}")
    if chain["dangling"]:
        one, many = "version named by these patches is", "versions named by these patches are"
        click.echo(skipped_line(chain["dangling"], f"{one} no longer in the store", f"{many} no longer in the store"))


@click.command()
@click.argument("patch_id")
@json_option
@click.pass_context
def diff(ctx: click.Context, patch_id: str, as_json: bool) -> None:
    """What a patch changed: status moves and a content diff.

    Example: cclg diff patch_01...
    """
    result = api.patch_diff(store_of(ctx), patch_id)
    if as_json:
        emit(result, True)
        return
    p = result["patch"]
    click.echo(f"{p['id']} {p['operation']} at {p['created_at']}\nreason: {shown(p['reason'])}")
    for change in result["status_changes"]:
        click.echo(f"  {change['id']}: {change['before'] or '?'} -> {change['now'] or 'missing'}")
    for node in result["new_nodes"]:
        click.echo(f"  + {node['id']} ({node['status']})")
    for text in result["content_diff"]:
        click.echo(shown(text.rstrip("\n")))


@click.command()
@click.argument("memory_id")
@json_option
@click.pass_context
def cite(ctx: click.Context, memory_id: str, as_json: bool) -> None:
    """Where a memory came from: source, quote, raw evidence, patches.

    Example: cclg cite mem_01...
    """
    emit(api.cite(store_of(ctx), memory_id), as_json)


@click.command()
@click.option("--limit", type=count(1), default=50, show_default=True)
@click.option("--event", help="Only this kind of audit record (memory_created, patch_applied, ...).")
@click.option("--memory", "memory_id", help="Only records naming this memory.")
@json_option
@click.pass_context
def audit(ctx: click.Context, limit: int, event: str | None, memory_id: str | None, as_json: bool) -> None:
    """The audit log, newest first: every change to the store, who made it and when.

    Example: cclg audit --event patch_applied --limit 10
    """
    emit(api.audit_log(store_of(ctx), limit=limit, event=event, memory_id=memory_id), as_json)


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@json_option
def validate(paths: tuple[Path, ...], as_json: bool) -> None:
    """Check record files (or folders of them) against cclg.format.v0.1.

    Example: cclg validate ~/.cclg/nodes
    """
    checked, findings = api.validate_paths(list(paths))
    if as_json:
        emit({"checked": checked, "ok": not findings, "findings": [f.to_dict() for f in findings]}, True)
    else:
        for f in findings:
            click.echo(f"{shown(f.path)}: {shown(f.message)}")
        click.echo(f"{checked} file(s) checked, {len(findings)} problem(s)")
    if findings:
        sys.exit(ValidationError.exit_code)


@click.command("doctor")
@click.option(
    "--repair",
    is_flag=True,
    help="First fix what needs no judgement (torn log lines, orphan temp files, statuses the ledger disagrees with).",
)
@json_option
@click.pass_context
def doctor_command(ctx: click.Context, repair: bool, as_json: bool) -> None:
    """Check the whole store: records, hashes, ids, the patch ledger, logs.

    Exits 1 when there are findings; notes (memories every repository of a folder's name shares)
    fail nothing. Example: cclg doctor --json
    """
    store = store_of(ctx)
    actions = api.repair(store) if repair else []
    report = api.diagnose(store)
    if as_json:
        emit({**report.to_dict(), "repairs": actions}, True)
    else:
        for action in actions:
            click.echo(f"repaired: {shown(action)}")
        for entry in report.refreshed:
            click.echo(f"refreshed the search index: {shown(entry)}")
        for entry in report.healed:
            click.echo(f"healed a projection: {shown(entry)}")
        counts = ", ".join(f"{v} {k}" for k, v in report.counts.items())
        click.echo(f"store {report.root}: {counts}")
        thresholds = ", ".join(f"{k}={v}" for k, v in report.sensors.items())
        click.echo(f'sensors (config.json "sensors"): {thresholds}')
        asked = report.semantic.get("answered", 0) + report.semantic.get("missed", 0)
        click.echo(
            f"semantic helper, last 24 hours: answered {report.semantic.get('answered', 0)} of {asked} prompts"
            f" in time, missed {report.semantic.get('missed', 0)}"
        )
        for f in report.findings:
            click.echo(f"[{f.check}] {shown(f.path)}: {shown(f.message)}")
        for f in report.notices:
            click.echo(f"note [{f.check}]: {shown(f.message)}")
        click.echo("ok: no findings" if report.ok else f"{len(report.findings)} finding(s)")
    if not report.ok:
        sys.exit(1)


@click.command("scan")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--store", "in_store", is_flag=True, help="Scan the store's own files instead of PATHS.")
@click.option("--redact", is_flag=True, help="With --store: replace each secret found with [REDACTED:rule].")
@json_option
@click.pass_context
def scan_command(ctx: click.Context, paths: tuple[Path, ...], in_store: bool, redact: bool, as_json: bool) -> None:
    """Report secrets (API keys, tokens, private keys, passwords) in files or in the store.

    Exits 1 when any is found, 0 when none. Only the first four characters of a
    secret are shown. --store --redact rewrites the store's files without them
    (one audited repair per file), rebuilds the search index, deletes any code
    graph holding one (run cclg code-index again), then scans again: it exits 1
    if anything is left ("remaining").

    Example: cclg scan --store    or    cclg scan ./notes
    """
    if redact and not in_store:
        raise UsageError("--redact works on the store only: cclg scan --store --redact")
    if in_store == bool(paths):
        raise UsageError("give PATHS to scan, or --store")
    store = store_of(ctx) if in_store else None
    found = api.scan_secrets([store.root] if store else list(paths))
    result: dict[str, Any] = {"secrets": found}
    if redact and store is not None and found:
        result["redacted"] = api.redact_store(store)
        found = result["remaining"] = api.scan_secrets([store.root])
    emit(result, as_json)
    if found:
        ctx.exit(1)


@click.command("rules")
@click.option("--accept", "accept_id", metavar="ID", help="Label this rule trusted: it may open sessions.")
@json_option
@click.pass_context
def rules_command(ctx: click.Context, accept_id: str | None, as_json: bool) -> None:
    """Rules learned from failures, with their evidence.

    A rule is written when a command that failed the same way several times in a row
    passes again (the sensors' pain). A detection is its failure seen again; a session
    given the rule that ended without the failure is a suppression. Both count, and
    nothing decays. Once its evidence is strong a rule opens every session of its
    project, but one whose text (or the tool output it quotes) reads as instructions
    does so only after you accept it: --accept ID labels it trusted, through the
    ledger (cclg rollback undoes it). Rules are memories: label, narrow or forget
    them like any other.

    Example: cclg rules --json    or    cclg rules --accept mem_01...
    """
    store = store_of(ctx)
    if accept_id is not None:
        result = api.accept_rule(store, accept_id)
        if as_json:
            emit(result.to_dict(), True)
        else:
            click.echo(f"accepted: {result.new_nodes[0].id} states the rule now, labelled trusted ({result.patch.id})")
        return
    listed = api.list_rules(store)
    if as_json:
        emit({"rules": listed}, True)
        return
    if not listed:
        click.echo("no rules yet: they are learned when a command that kept failing the same way passes again")
    for rule in listed:
        counts = f"{rule['detection']} detection(s), {rule['suppression']} suppression(s), {rule['delivered']} given"
        click.echo(f"{rule['id'] or rule['key']}  [{rule['status']}, {rule['trust']}]  {counts}")
        click.echo(f"    {shown(rule['content'])}")
        trigger = rule["trigger"]
        click.echo(f"    trigger: {shown(trigger.get('command'))} with {shown(trigger.get('signature'))}")
        if (
            rule["id"]
            and rule["status"] == "active"
            and rule["session_start"] is None
            and rule["trust"] != "quarantined"
        ):
            click.echo(
                "    not given at session start: its text reads as instructions;"
                f" cclg rules --accept {rule['id']} if you trust it"
            )
        if rule["id"] and rule["status"] == "active":
            click.echo(
                f"    keep it: cclg label {rule['id']} --trust trusted --reason ...;"
                f" drop it: cclg patch forget --target {rule['id']} --reason ..."
            )


COMMANDS = [status, show, log, diff, cite, audit, validate, doctor_command, scan_command, rules_command]
