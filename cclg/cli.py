"""The ``cclg`` command line: a thin click layer over the library.

Each command opens the store, calls one library function and prints the result:
TOML for people (``--json`` for programs). Errors from the library are turned
into a message on stderr and an exit code in one place, ``CclgGroup.invoke``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import click

from cclg import __version__, api, doctor, guard, ledger, search
from cclg import format as fmt
from cclg import install as install_mod
from cclg.errors import CclgError, UsageError, ValidationError
from cclg.index import connect
from cclg.pack import DEFAULT_MAX_CHARS, DEFAULT_MAX_NODES, compile_pack, render, to_toml
from cclg.store import Store, resolve_root


class CclgGroup(click.Group):
    """Turns library errors into ``error: ...`` on stderr and the error's exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except CclgError as exc:
            click.echo(f"error: {exc}", err=True)
            if isinstance(exc, ValidationError) and exc.problems != [str(exc)]:
                for problem in exc.problems:
                    click.echo(f"  {problem}", err=True)
            ctx.exit(exc.exit_code)
        except BrokenPipeError:
            ctx.exit(0)


def _store(ctx: click.Context) -> Store:
    root: str | None = ctx.obj["root"]
    return Store.open(root)


def _emit(data: Any, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(data, ensure_ascii=False, indent=2))
    else:
        click.echo(to_toml(data if isinstance(data, dict) else {"items": data}).rstrip("\n"))


def _read_input(value: str) -> bytes:
    """The bytes of a file, or of stdin for ``-``."""
    if value == "-":
        return sys.stdin.buffer.read()
    path = Path(value)
    if not path.is_file():
        raise UsageError(f"no such file: {value}")
    return path.read_bytes()


def _text_arg(value: str) -> str:
    return sys.stdin.read() if value == "-" else value


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of TOML.")


def _where(session_id: str | None, project: str | None, workspace: str | None) -> search.Where:
    return search.Where(session_id=session_id, project=project, workspace=workspace)


session_option = click.option(
    "--session", "--session-id", "session_id", help="Include this session's overlay memories."
)
project_option = click.option("--project", help="Only memories of this project (or of no project).")
workspace_option = click.option("--workspace", help="Only memories of this workspace (or of no workspace).")


@click.group(cls=CclgGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--root",
    envvar="CCLG_HOME",
    type=click.Path(file_okay=False),
    help="Store folder. Default: $CCLG_HOME, else ~/.cclg.",
)
@click.version_option(__version__, prog_name="cclg")
@click.pass_context
def cli(ctx: click.Context, root: str | None) -> None:
    """cclg: local-first memory for coding agents.

    Evidence is kept verbatim in raw/, memories are small JSON records that
    change only through recorded patches, and `cclg pack` compiles what is
    current and relevant into a compact context pack.

    Start with `cclg init`, then `cclg add`, `cclg pack`, `cclg doctor`.
    """
    ctx.obj = {"root": root}


@cli.command()
@click.pass_context
def init(ctx: click.Context) -> None:
    """Create a store (safe to run again).

    Example: cclg --root ./memory init
    """
    store, created = Store.init(ctx.obj["root"])
    click.echo(f"{'created' if created else 'already a store:'} {store.root}")


@cli.command()
@click.option("--content", required=True, help="The memory, one self-contained statement ('-' reads stdin).")
@click.option("--source", required=True, help="Where it came from: a label such as user, doc:README.md, session:ID.")
@click.option(
    "--type", "type_", default="memory", show_default=True, type=click.Choice(fmt.NODE_TYPES), help="Kind of memory."
)
@click.option("--key", help="Stable key: memories sharing a key collapse to the narrowest scope.")
@click.option("--quote", help="The words of the source this memory rests on.")
@click.option("--confidence", type=click.FloatRange(0, 1), default=1.0, show_default=True)
@click.option("--priority", default="normal", show_default=True, help="low, normal, high, ...")
@click.option("--scope", multiple=True, metavar="KEY=VALUE", help=f"Scope ({', '.join(fmt.SCOPE_KEYS)}); repeatable.")
@click.option("--tag", multiple=True, help="A tag; repeatable.")
@click.option(
    "--trust", type=click.Choice(guard.TRUST), default="trusted", show_default=True, help="You wrote it: trusted."
)
@click.option(
    "--sensitivity",
    type=click.Choice(guard.SENSITIVITY),
    default=guard.DEFAULT_SENSITIVITY,
    show_default=True,
    help="confidential is packed only where the store allows; restricted never.",
)
@click.option(
    "--retention",
    type=click.Choice(guard.RETENTION),
    default=guard.DEFAULT_RETENTION,
    show_default=True,
    help="required memories are packed first, whatever the query.",
)
@click.option("--force", is_flag=True, help="Add it even if the same content was forgotten or discarded before.")
@json_option
@click.pass_context
def add(
    ctx: click.Context,
    content: str,
    source: str,
    type_: str,
    key: str | None,
    quote: str | None,
    confidence: float,
    priority: str,
    scope: tuple[str, ...],
    tag: tuple[str, ...],
    trust: str,
    sensitivity: str,
    retention: str,
    force: bool,
    as_json: bool,
) -> None:
    """Add a memory (written with its `create` patch).

    Content already stored in the same scope is not written twice (the existing
    memory is shown); content that was forgotten is refused unless --force; close
    memories (same key, very similar text) are named so you can patch them instead.

    Example: cclg add --type project_decision --content "Tests run with pytest -q" --source user --key test.command
    """
    result = api.add_memory(
        _store(ctx),
        _text_arg(content),
        source=source,
        type=type_,
        key=key,
        quote=quote,
        confidence=confidence,
        priority=priority,
        scope=api.parse_scope(list(scope)),
        tags=list(tag),
        trust=trust,
        sensitivity=sensitivity,
        retention=retention,
        force=force,
    )
    _emit(result.to_dict(), as_json)
    if result.duplicate_of:
        click.echo(f"note: {result.duplicate_of} already holds this content; nothing was written", err=True)
    for other in result.similar:
        click.echo(
            f"note: {other['id']} is close ({other['why']}); to replace it instead: "
            f"cclg patch supersede --target {other['id']} --content ... --reason ...",
            err=True,
        )


@cli.command()
@click.argument("path")
@click.option("--name", help="File name to keep the evidence under (default: the file's name, or 'stdin').")
@json_option
@click.pass_context
def raw(ctx: click.Context, path: str, name: str | None, as_json: bool) -> None:
    """Keep a file (or stdin, '-') verbatim as raw evidence; never overwrites.

    Example: cclg raw notes/meeting.md
    """
    data = _read_input(path)
    _emit(api.keep_raw(_store(ctx), data, name or ("stdin" if path == "-" else Path(path).name)), as_json)


@cli.command("import-jsonl")
@click.argument("path")
@click.option("--force", is_flag=True, help="Import lines whose content was forgotten or discarded before.")
@json_option
@click.pass_context
def import_jsonl(ctx: click.Context, path: str, force: bool, as_json: bool) -> None:
    """Import memories from JSON lines ('-' reads stdin), all or nothing.

    Each line is a full MemoryNode record or a short line such as
    {"content": "...", "source": "label", "type": "...", "key": "...", "scope": {...}, "tags": [...]}.
    Bad lines are reported by number and nothing is written. Content already
    current in its scope is skipped and listed; forgotten content needs --force.

    Example: cclg import-jsonl seed.jsonl
    """
    result = api.import_jsonl(
        _store(ctx), _read_input(path), name="stdin" if path == "-" else Path(path).name, force=force
    )
    _emit(result.to_dict(), as_json)


@cli.command("scan")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--store", "in_store", is_flag=True, help="Scan the store's own files instead of PATHS.")
@click.option("--redact", is_flag=True, help="With --store: replace each secret found with [REDACTED:rule].")
@json_option
@click.pass_context
def scan_command(ctx: click.Context, paths: tuple[Path, ...], in_store: bool, redact: bool, as_json: bool) -> None:
    """Report secrets (API keys, tokens, private keys, passwords) in files or in the store.

    Exits 1 when any is found, 0 when none. Only the first four characters of a
    secret are shown. --store --redact rewrites the store's files without them
    (one audited repair per file) and rebuilds the search index.

    Example: cclg scan --store    or    cclg scan ./notes
    """
    if redact and not in_store:
        raise UsageError("--redact works on the store only: cclg scan --store --redact")
    if in_store == bool(paths):
        raise UsageError("give PATHS to scan, or --store")
    store = _store(ctx) if in_store else None
    found = api.scan_secrets([store.root] if store else list(paths))
    result: dict[str, Any] = {"secrets": found}
    if redact and store is not None and found:
        result["redacted"] = api.redact_store(store)
    _emit(result, as_json)
    if found and not redact:
        ctx.exit(1)


@cli.command("export")
@click.argument("out")
@click.option("--session", "session_ids", multiple=True, help="Only this session's record in @sessions (repeatable).")
@click.option("--force", is_flag=True, help="Replace OUT if it exists.")
@click.pass_context
def export_command(ctx: click.Context, out: str, session_ids: tuple[str, ...], force: bool) -> None:
    """Write the store's whole ledger into one portable .cclg container ('-' writes stdout).

    Nodes, patches and edges always travel whole; --session narrows only the
    session records. The file is checksummed and other runtimes can load it.

    Example: cclg export backup.cclg
    """
    from cclg.container import export_store

    text = export_store(_store(ctx), session_ids or None)
    if out == "-":
        sys.stdout.write(text)
        return
    path = Path(out)
    if path.is_dir():
        raise UsageError(f"{out} is a folder; give a file name such as {Path(out) / 'memory.cclg'}")
    try:
        _store(ctx).write_file(path, text.encode("utf-8"), replace=force)
    except FileExistsError:
        raise UsageError(f"{out} exists; pass --force to replace it") from None
    except FileNotFoundError:
        raise UsageError(f"no folder {path.parent} to write {path.name} into") from None
    header = json.loads(text.split("\n", 2)[1])
    summary = ", ".join(f"{n} {name}" for name, n in header["counts"].items())
    click.echo(f"wrote {out}: {summary} (sha256 {header['content_sha256'][:12]})")


@cli.command("open")
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
    from cclg.container import load_container, read_text

    container = load_container(read_text(file), validate=not no_validate)
    _emit(container.describe(session_id), as_json)
    for warning in container.warnings:
        click.echo(f"warning: {warning}", err=True)


@cli.command("import")
@click.argument("file")
@click.option("--dry-run", is_flag=True, help="Report what would happen; write nothing.")
@json_option
@click.pass_context
def import_command(ctx: click.Context, file: str, dry_run: bool, as_json: bool) -> None:
    """Bring a .cclg container's records into the store ('-' reads stdin).

    Known records are skipped. A known memory whose content differs is not
    overwritten: both versions wait in conflict_pending (see `cclg conflicts`,
    settle with `cclg resolve`). The file is checked in full before anything is written.

    Example: cclg import backup.cclg --dry-run
    """
    from cclg.container import import_container, load_container, read_text

    container = load_container(read_text(file))
    report = import_container(_store(ctx), container, dry_run=dry_run)
    for warning in container.warnings:
        click.echo(f"warning: {warning}", err=True)
    _emit(report.to_dict(), as_json)


@cli.command()
@click.argument("operation", type=click.Choice(fmt.PATCH_OPERATIONS))
@click.option("--target", "targets", multiple=True, help="Memory id to change (repeatable); for rollback, a patch id.")
@click.option("--content", "contents", multiple=True, help="New content (repeat for split; '-' reads stdin).")
@click.option("--reason", required=True, help="Why: kept in the patch for the audit trail.")
@click.option("--source", default="manual", show_default=True, help="Source label of the change.")
@click.option("--confidence", type=click.FloatRange(0, 1), default=1.0, show_default=True)
@json_option
@click.pass_context
def patch(
    ctx: click.Context,
    operation: str,
    targets: tuple[str, ...],
    contents: tuple[str, ...],
    reason: str,
    source: str,
    confidence: float,
    as_json: bool,
) -> None:
    """Change memories through the ledger: OPERATION is one of the thirteen patch operations.

    update, supersede, refine, expand, narrow, merge, split and resolve_conflict
    write new memories and retire the targets; expire, deprecate and forget only
    retire; create adds; rollback undoes a patch (give its id as --target).

    Example: cclg patch refine --target mem_01... --content "pytest -q -x" --reason "stop early"
    """
    result = api.patch(
        _store(ctx),
        operation,
        list(targets),
        contents=[_text_arg(c) for c in contents],
        reason=reason,
        source=source,
        confidence=confidence,
    )
    _emit(result.to_dict(), as_json)


@cli.command()
@click.argument("memory_id")
@click.option("--reason", default="forgotten at the user's request", show_default=True)
@json_option
@click.pass_context
def forget(ctx: click.Context, memory_id: str, reason: str, as_json: bool) -> None:
    """Retire a memory for good (a `forget` patch; undo with `cclg rollback`).

    Example: cclg forget mem_01... --reason "no longer true"
    """
    store = _store(ctx)
    result = ledger.apply_patch(store, "forget", [api.resolve_node_id(store, memory_id)], reason=reason)
    _emit(result.to_dict(), as_json)


@cli.command("label")
@click.argument("memory_id")
@click.option("--trust", type=click.Choice(guard.TRUST), help="trusted: you have checked it.")
@click.option("--sensitivity", type=click.Choice(guard.SENSITIVITY))
@click.option("--retention", type=click.Choice(guard.RETENTION))
@click.option("--reason", required=True, help="Why: kept in the patch for the audit trail.")
@json_option
@click.pass_context
def label(
    ctx: click.Context,
    memory_id: str,
    trust: str | None,
    sensitivity: str | None,
    retention: str | None,
    reason: str,
    as_json: bool,
) -> None:
    """Change a memory's trust, sensitivity or retention (an `update` patch: same content, new labels).

    Only here, on your own command line, can a memory become trusted.
    Example: cclg label mem_01... --trust trusted --reason "checked against the runbook"
    """
    chosen = {k: v for k, v in (("trust", trust), ("sensitivity", sensitivity), ("retention", retention)) if v}
    if not chosen:
        raise UsageError("give at least one of --trust, --sensitivity, --retention")
    store = _store(ctx)
    node_id = api.resolve_node_id(store, memory_id)
    content = store.read_node(node_id).content
    result = ledger.apply_patch(store, "update", [node_id], reason=reason, contents=[content], labels=chosen)
    _emit(result.to_dict(), as_json)


@cli.command()
@click.argument("patch_id")
@click.option("--reason", default="", help="Why (default: 'rollback of PATCH_ID').")
@json_option
@click.pass_context
def rollback(ctx: click.Context, patch_id: str, reason: str, as_json: bool) -> None:
    """Undo a patch: restore the statuses it recorded, discard the memories it wrote.

    Example: cclg rollback patch_01...
    """
    result = ledger.rollback(_store(ctx), patch_id, reason=reason)
    _emit(result.to_dict(), as_json)


@cli.command()
@json_option
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """Summarise the store: memories by status, patches, sessions, raw files."""
    _emit(api.status(_store(ctx)), as_json)


@cli.command()
@click.argument("memory_id")
@json_option
@click.pass_context
def show(ctx: click.Context, memory_id: str, as_json: bool) -> None:
    """Print one memory record.

    Example: cclg show mem_01...
    """
    store = _store(ctx)
    _emit(store.read_node(api.resolve_node_id(store, memory_id)).to_dict(), as_json)


@cli.command()
@click.option("--memory", "memory_id", help="Only patches touching this memory.")
@click.option("--limit", type=click.IntRange(min=1), help="At most this many patches.")
@json_option
@click.pass_context
def log(ctx: click.Context, memory_id: str | None, limit: int | None, as_json: bool) -> None:
    """The patch ledger, newest first.

    Example: cclg log --memory mem_01... --limit 5
    """
    store = _store(ctx)
    node_id = api.resolve_node_id(store, memory_id) if memory_id else None
    patches = api.history(store, node_id=node_id, limit=limit)
    if as_json:
        _emit([p.to_dict() for p in patches], True)
        return
    for p in patches:
        line = f"{p.id}  {p.created_at}  {p.operation:<16} {', '.join(p.target_ids) or '-'}"
        if p.new_node_ids:
            line += f" -> {', '.join(p.new_node_ids[:3])}{' ...' if len(p.new_node_ids) > 3 else ''}"
        click.echo(f"{line}\n    {p.reason}")


@cli.command()
@click.argument("patch_id")
@json_option
@click.pass_context
def diff(ctx: click.Context, patch_id: str, as_json: bool) -> None:
    """What a patch changed: status moves and a content diff.

    Example: cclg diff patch_01...
    """
    result = api.patch_diff(_store(ctx), patch_id)
    if as_json:
        _emit(result, True)
        return
    p = result["patch"]
    click.echo(f"{p['id']} {p['operation']} at {p['created_at']}\nreason: {p['reason']}")
    for change in result["status_changes"]:
        click.echo(f"  {change['id']}: {change['before'] or '?'} -> {change['now'] or 'missing'}")
    for node in result["new_nodes"]:
        click.echo(f"  + {node['id']} ({node['status']})")
    for text in result["content_diff"]:
        click.echo(text)


@cli.command()
@click.argument("memory_id")
@json_option
@click.pass_context
def cite(ctx: click.Context, memory_id: str, as_json: bool) -> None:
    """Where a memory came from: source, quote, raw evidence, patches.

    Example: cclg cite mem_01...
    """
    store = _store(ctx)
    _emit(api.cite(store, api.resolve_node_id(store, memory_id)), as_json)


@cli.command()
@click.argument("query")
@click.option("--limit", type=click.IntRange(min=1), default=5, show_default=True)
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
    _emit(api.recall(_store(ctx), query, where=_where(session_id, project, workspace), limit=limit), as_json)


@cli.command()
@json_option
@click.pass_context
def conflicts(ctx: click.Context, as_json: bool) -> None:
    """Memories in conflict_pending, with the memories that contradict them.

    Settle one with `cclg resolve`. Example: cclg conflicts
    """
    _emit(api.conflicts(_store(ctx)), as_json)


@cli.command()
@click.argument("memory_ids", nargs=-1, required=True)
@click.option("--content", required=True, help="What is true now ('-' reads stdin).")
@click.option("--reason", required=True, help="Why: kept in the patch for the audit trail.")
@click.option("--source", default="manual", show_default=True, help="Source label of the decision.")
@json_option
@click.pass_context
def resolve(
    ctx: click.Context, memory_ids: tuple[str, ...], content: str, reason: str, source: str, as_json: bool
) -> None:
    """Settle a conflict: one new memory replaces the MEMORY_IDS in conflict (a resolve_conflict patch).

    Example: cclg resolve mem_01a mem_01b --content "Deploys go out from CI" --reason "checked the workflow"
    """
    result = api.resolve(_store(ctx), list(memory_ids), content=_text_arg(content), reason=reason, source=source)
    _emit(result.to_dict(), as_json)


@cli.command()
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--event", help="Only this kind of audit record (memory_created, patch_applied, ...).")
@click.option("--memory", "memory_id", help="Only records naming this memory.")
@json_option
@click.pass_context
def audit(ctx: click.Context, limit: int, event: str | None, memory_id: str | None, as_json: bool) -> None:
    """The audit log, newest first: every change to the store, who made it and when.

    Example: cclg audit --event patch_applied --limit 10
    """
    _emit(api.audit_log(_store(ctx), limit=limit, event=event, memory_id=memory_id), as_json)


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@json_option
def validate(paths: tuple[Path, ...], as_json: bool) -> None:
    """Check record files (or folders of them) against cclg.format.v0.1.

    Example: cclg validate ~/.cclg/nodes
    """
    checked, findings = doctor.validate_paths(list(paths))
    if as_json:
        _emit({"checked": checked, "ok": not findings, "findings": [f.to_dict() for f in findings]}, True)
    else:
        for f in findings:
            click.echo(f"{f.path}: {f.message}")
        click.echo(f"{checked} file(s) checked, {len(findings)} problem(s)")
    if findings:
        sys.exit(ValidationError.exit_code)


@cli.command("doctor")
@click.option(
    "--repair",
    is_flag=True,
    help="First fix what needs no judgement (torn log lines, orphan temp files, statuses the ledger disagrees with).",
)
@json_option
@click.pass_context
def doctor_command(ctx: click.Context, repair: bool, as_json: bool) -> None:
    """Check the whole store: records, hashes, ids, the patch ledger, logs.

    Exits 1 when there are findings. Example: cclg doctor --json
    """
    store = _store(ctx)
    actions = doctor.repair(store) if repair else []
    report = doctor.diagnose(store)
    if as_json:
        _emit({**report.to_dict(), "repairs": actions}, True)
    else:
        for action in actions:
            click.echo(f"repaired: {action}")
        counts = ", ".join(f"{v} {k}" for k, v in report.counts.items())
        click.echo(f"store {report.root}: {counts}")
        for f in report.findings:
            click.echo(f"[{f.check}] {f.path}: {f.message}")
        click.echo("ok: no findings" if report.ok else f"{len(report.findings)} finding(s)")
    if not report.ok:
        sys.exit(1)


@cli.command("search")
@click.argument("query")
@click.option(
    "--mode",
    type=click.Choice(search.MODES),
    default="auto",
    show_default=True,
    help="bm25: ranked words; grep: exact text; graph: hits plus what they depend on or refine; "
    "temporal: newest first; auto: all fused.",
)
@click.option("--limit", type=click.IntRange(min=1), default=10, show_default=True)
@session_option
@project_option
@workspace_option
@click.option("--status", help="Search memories of this status instead of current truth ('all' for every one).")
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
    if status is not None and status != "all" and status not in fmt.NODE_STATUSES:
        raise UsageError(f"unknown status {status!r}; use all or one of {', '.join(fmt.NODE_STATUSES)}")
    hits = search.search(
        _store(ctx),
        query,
        mode=mode,
        limit=limit,
        where=_where(session_id, project, workspace),
        status=status,
        since=search.parse_moment(since, "--since"),
        until=search.parse_moment(until, "--until"),
        as_of=search.parse_moment(as_of, "--as-of"),
    )
    if as_json:
        _emit([h.to_dict() for h in hits], True)
        return
    for h in hits:
        click.echo(f"{h.score:8.4f}  {h.node.id}  [{h.node.status}] {h.node.content}")
    if not hits:
        click.echo("no matches")


@cli.command("grep")
@click.argument("pattern")
@click.option("--regex", "-E", is_flag=True, help="PATTERN is a regular expression.")
@click.option("--ignore-case", "-i", is_flag=True)
@click.option("--raw", is_flag=True, help="Also search raw evidence.")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
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
    matches = search.grep(
        _store(ctx),
        pattern,
        regex=regex,
        ignore_case=ignore_case,
        raw=raw,
        where=_where(session_id, project, workspace),
        limit=limit,
    )
    if as_json:
        _emit([m.to_dict() for m in matches], True)
        return
    for m in matches:
        click.echo(f"{m.where}:{m.line}: {m.text}")
    if not matches:
        click.echo("no matches")


@cli.command()
@click.pass_context
def reindex(ctx: click.Context) -> None:
    """Rebuild the search index (index.sqlite) from the files. Safe at any time.

    Example: cclg reindex
    """
    store = _store(ctx)
    start = time.perf_counter()
    index = connect(store)
    try:
        count = index.rebuild()
    finally:
        index.close()
    click.echo(f"indexed {count} memories in {time.perf_counter() - start:.2f}s")


@cli.command("pack")
@click.option("--query", default="", help="The task at hand. Only pinned memories without one.")
@session_option
@project_option
@workspace_option
@click.option("--max-nodes", type=click.IntRange(min=0), default=DEFAULT_MAX_NODES, show_default=True)
@click.option("--max-chars", type=click.IntRange(min=0), default=DEFAULT_MAX_CHARS, show_default=True)
@click.option("--max-tokens", type=click.IntRange(min=0), help="Also cap the estimated tokens.")
@click.option("--format", "style", type=click.Choice(["toml", "json", "markdown"]), default="toml", show_default=True)
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
) -> None:
    """Compile the ActiveMemoryPack: current memories for a task, retired ones listed apart.

    Example: cclg pack --query "how do I run the tests" --format markdown
    """
    pack = compile_pack(
        _store(ctx),
        query,
        session_id=session_id,
        project=project,
        workspace=workspace,
        max_nodes=max_nodes,
        max_chars=max_chars,
        max_tokens=max_tokens,
    )
    click.echo(render(pack, style).rstrip("\n"))


@cli.command("code-index")
@click.argument("repo", default=".", type=click.Path(exists=True, file_okay=False))
@click.option("--commits", type=click.IntRange(min=0), default=5000, show_default=True, help="History read for churn.")
@json_option
@click.pass_context
def code_index_command(ctx: click.Context, repo: str, commits: int, as_json: bool) -> None:
    """Index a repository's code graph (files, symbols, imports, churn) into the store.

    The repository is only read. A second run re-parses only files that changed.
    Example: cclg code-index ~/src/myproject
    """
    from cclg.codegraph.build import build_graph

    store = _store(ctx)
    interactive = sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        if interactive and total >= 100 and (done % 50 == 0 or done == total):
            click.echo(f"\rparsing {done}/{total} files", nl=done == total, err=True)

    graph = build_graph(store, repo, progress=progress, max_commits=commits)
    summary = graph["summary"]
    if as_json:
        _emit(summary, True)
        return
    languages = ", ".join(f"{name} {count}" for name, count in summary["languages"].items()) or "none"
    click.echo(
        f"indexed {graph['root']}: {summary['files']} files ({languages}), {summary['symbols']} symbols, "
        f"{summary['edges']} edges; parsed {summary['parsed']} in {summary['seconds']:.2f}s"
    )
    for language, reason in summary["missing_grammars"].items():
        click.echo(f"note: {language} files were listed but not parsed: {reason}")


@cli.command("code-search")
@click.argument("query")
@click.option("--repo", default=".", type=click.Path(exists=True, file_okay=False), show_default=True)
@click.option("--limit", type=click.IntRange(min=1, max=200), default=10, show_default=True)
@json_option
@click.pass_context
def code_search_command(ctx: click.Context, query: str, repo: str, limit: int, as_json: bool) -> None:
    """Rank a repository's files for a task: which to read first, with their key symbols.

    Needs `cclg code-index` first. Example: cclg code-search "fix the retry in the upload client" --repo .
    """
    from cclg.codegraph.rank import rank_files
    from cclg.codegraph.stored import find_search_index

    root, index = find_search_index(_store(ctx), repo)
    files = rank_files(index, query, limit=limit)
    if as_json:
        _emit({"query": query, "root": str(root), "files": files}, True)
        return
    for rank, entry in enumerate(files, 1):
        symbols = ", ".join(s["name"] for s in entry["symbols"][:3])
        click.echo(f"{rank:>3}. {entry['path']}  ({entry['score']:.3f}; {'; '.join(entry['why'])})")
        if symbols:
            click.echo(f"     {symbols}")
    if not files:
        click.echo("no matching files")


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


def _print_changes(changes: list[install_mod.Change], as_json: bool, verb: str) -> None:
    if as_json:
        _emit([change.to_dict() for change in changes], True)
        return
    for change in changes:
        lines = change.added if verb == "added" else change.removed
        if not lines:
            click.echo(f"nothing to change in {change.path}")
            continue
        click.echo(f"{'would change' if not change.written else 'changed'} {change.path}:")
        for line in lines:
            click.echo(f"  {verb} {line}")
        if change.backup:
            click.echo(f"previous version kept as {change.backup}")


@cli.command("install")
@host_argument
@place_option
@user_option
@dry_run_option
@json_option
@click.pass_context
def install_command(
    ctx: click.Context, host: str, project: Path | None, user: bool, dry_run: bool, as_json: bool
) -> None:
    """Register cclg-hook and cclg-mcp with Claude Code or Codex (merged; other settings are kept; safe to repeat).

    Creates the store if there is none. Example: cclg install claude
    """
    project = _place(project, user)
    store_root = ctx.obj["root"]
    if not dry_run:
        Store.init(store_root)
    root = str(resolve_root(store_root).resolve()) if store_root else None
    install_mod.register_mcp(host, project=project, root=root, dry_run=True)  # refuses before anything is written
    changes = [install_mod.install(host, project=project, root=root, dry_run=dry_run)]
    server = install_mod.register_mcp(host, project=project, root=root, dry_run=dry_run)
    if server is not None:
        changes.append(server)
    _print_changes(changes, as_json, "added")
    if as_json:
        return
    if server is None:
        click.echo(
            "Codex reads MCP servers from ~/.codex/config.toml only: run `cclg install codex` (no --project) "
            f"or `{install_mod.manual_mcp_command(host, root)}` to register cclg-mcp."
        )
    if host == "codex" and changes[0].added:
        click.echo("Codex runs a new hook only once you trust it: open /hooks in Codex and trust each cclg-hook.")


@cli.command("uninstall")
@host_argument
@place_option
@user_option
@dry_run_option
@json_option
def uninstall_command(host: str, project: Path | None, user: bool, dry_run: bool, as_json: bool) -> None:
    """Remove exactly what `cclg install` added: the cclg-hook handlers and the cclg-mcp registration.

    Example: cclg uninstall codex --project .
    """
    project = _place(project, user)
    changes = [install_mod.uninstall(host, project=project, dry_run=dry_run)]
    server = install_mod.unregister_mcp(host, project=project, dry_run=dry_run)
    if server is not None:
        changes.append(server)
    _print_changes(changes, as_json, "removed")


@cli.command("demo-store")
@click.argument("path", type=click.Path(file_okay=False, path_type=Path))
def demo_store_command(path: Path) -> None:
    """Write the demo store (fixed ids and timestamps) into an empty folder PATH.

    Example: cclg demo-store ./demo-store
    """
    from cclg.demo import build_demo_store

    build_demo_store(path)
    click.echo(f"wrote the demo store to {path}")


def main() -> None:
    cli(prog_name="cclg")


if __name__ == "__main__":
    main()
