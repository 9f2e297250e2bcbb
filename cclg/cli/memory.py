"""Commands that write memories: create a store, add, keep evidence, import, patch, erase, relabel, undo, settle.

Every write is a recorded patch (``cclg log`` lists them, ``cclg rollback`` undoes one).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cclg import api
from cclg import format as fmt
from cclg.api import surfaces
from cclg.cli.common import (
    emit,
    input_name,
    json_option,
    read_input,
    shown,
    store_of,
    text_arg,
    valid_from_option,
    valid_until_option,
)
from cclg.errors import CclgError, UsageError


@click.command()
@click.pass_context
def init(ctx: click.Context) -> None:
    """Create a store (safe to run again).

    Example: cclg --root ./memory init
    """
    store, created = api.init_store(ctx.obj["root"])
    click.echo(f"{'created' if created else 'already a store:'} {shown(store.root)}")


@click.command()
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
@click.option(
    "--global",
    "global_scope",
    is_flag=True,
    help="A memory of every project. Without it, inside a git repository the memory belongs to that project.",
)
@click.option("--tag", multiple=True, help="A tag; repeatable.")
@click.option(
    "--question",
    multiple=True,
    help=f"A question this memory answers, worded as you would ask it; found by those words too, never shown as "
    f"the memory. Repeatable, at most {surfaces.MAX_QUESTIONS}, each one line of at most {surfaces.QUESTION_CHARS} "
    "characters.",
)
@click.option(
    "--trust", type=click.Choice(surfaces.TRUST), default="trusted", show_default=True, help="You wrote it: trusted."
)
@click.option(
    "--sensitivity",
    type=click.Choice(surfaces.SENSITIVITY),
    default=surfaces.DEFAULT_SENSITIVITY,
    show_default=True,
    help="confidential is packed only where the store allows; restricted never.",
)
@click.option(
    "--retention",
    type=click.Choice(surfaces.RETENTION),
    default=surfaces.DEFAULT_RETENTION,
    show_default=True,
    help="required memories are packed first, whatever the query.",
)
@click.option(
    "--raw",
    "raw_names",
    multiple=True,
    metavar="PATH",
    help="Raw evidence it rests on, as `cclg raw` printed it (raw/NAME); repeatable. A binary file (a screenshot, "
    "a HAR) is named in packs, never inlined.",
)
@click.option("--force", is_flag=True, help="Add it even if the same content was forgotten or discarded before.")
@valid_from_option
@valid_until_option
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
    global_scope: bool,
    tag: tuple[str, ...],
    question: tuple[str, ...],
    trust: str,
    sensitivity: str,
    retention: str,
    raw_names: tuple[str, ...],
    force: bool,
    valid_from: str | None,
    valid_until: str | None,
    as_json: bool,
) -> None:
    """Add a memory (written with its `create` patch).

    Inside a git repository the memory belongs to that project (the one the hooks
    read memories for there) unless --scope names a project or --global says it is
    for every project. Content already stored in the same scope is not written
    twice (the existing memory is shown); content that was forgotten is refused
    unless --force; close memories (same key, very similar text) are named so you
    can patch them instead.

    Example: cclg add --type project_decision --content "Tests run with pytest -q" --source user --key test.command
    """
    store = store_of(ctx)
    spans, attachments = api.raw_citation(store, list(raw_names))
    result = api.add_memory(
        store,
        text_arg(content),
        source=source,
        type=type_,
        key=key,
        quote=quote,
        confidence=confidence,
        priority=priority,
        scope=api.scope_for(list(scope), folder=Path.cwd(), global_scope=global_scope),
        tags=list(tag),
        questions=list(question),
        trust=trust,
        sensitivity=sensitivity,
        retention=retention,
        force=force,
        valid_from=valid_from,
        valid_until=valid_until,
        raw_spans=spans,
        attachments=attachments,
    )
    emit(result.to_dict(), as_json)
    if result.duplicate_of:
        click.echo(f"note: {result.duplicate_of} already holds this content; nothing was written", err=True)
    for other in result.similar:
        click.echo(
            f"note: {other['id']} is close ({shown(other['why'])}); to replace it instead: "
            f"cclg patch supersede --target {other['id']} --content ... --reason ...",
            err=True,
        )


@click.command()
@click.argument("path")
@click.option("--name", help="File name to keep the evidence under (default: the file's name, or 'stdin').")
@click.option("--mime", help="Its MIME type (default: read from its first bytes, then its name).")
@json_option
@click.pass_context
def raw(ctx: click.Context, path: str, name: str | None, mime: str | None, as_json: bool) -> None:
    """Keep a file (or stdin, '-') verbatim as raw evidence, any bytes; never overwrites.

    Prints where it is kept, its size, SHA-256 and MIME type. A memory cites it
    with `cclg add --raw PATH`; a binary file is named, never shown as text.

    Example: cclg raw screenshots/failing-login.png
    """
    data = read_input(path)
    emit(api.keep_raw(store_of(ctx), data, name or input_name(path), mime=mime), as_json)


@click.command("import-jsonl")
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
    Imported memories are untrusted and never pinned until you `cclg label` them;
    a full record supersedes nothing and names only memories in the file or the store.

    Example: cclg import-jsonl seed.jsonl
    """
    result = api.import_jsonl(store_of(ctx), read_input(path), name=input_name(path), force=force)
    emit(result.to_dict(), as_json)


@click.command()
@click.argument("operation", type=click.Choice(fmt.PATCH_OPERATIONS))
@click.option("--target", "targets", multiple=True, help="Memory id to change (repeatable); for rollback, a patch id.")
@click.option("--content", "contents", multiple=True, help="New content (repeat for split; '-' reads stdin).")
@click.option("--reason", required=True, help="Why: kept in the patch for the audit trail.")
@click.option("--source", default="manual", show_default=True, help="Source label of the change.")
@click.option("--confidence", type=click.FloatRange(0, 1), help="The new memories' (default: what the targets have).")
@valid_from_option
@valid_until_option
@json_option
@click.pass_context
def patch(
    ctx: click.Context,
    operation: str,
    targets: tuple[str, ...],
    contents: tuple[str, ...],
    reason: str,
    source: str,
    confidence: float | None,
    valid_from: str | None,
    valid_until: str | None,
    as_json: bool,
) -> None:
    """Change memories through the ledger: OPERATION is one of the thirteen patch operations.

    update, supersede, refine, expand, narrow, merge, split and resolve_conflict
    write new memories and retire the targets; expire, deprecate and forget only
    retire; create adds; rollback undoes a patch (give its id as --target). A new
    memory keeps its target's validity window, confidence and priority unless
    --valid-from, --valid-until or --confidence set them.

    Example: cclg patch refine --target mem_01... --content "pytest -q -x" --reason "stop early"
    """
    result = api.patch(
        store_of(ctx),
        operation,
        list(targets),
        contents=[text_arg(c) for c in contents],
        reason=reason,
        source=source,
        confidence=confidence,
        valid_from=valid_from,
        valid_until=valid_until,
    )
    emit(result.to_dict(), as_json)


@click.command()
@click.argument("memory_id")
@click.option("--reason", default="forgotten at the user's request", show_default=True)
@json_option
@click.pass_context
def forget(ctx: click.Context, memory_id: str, reason: str, as_json: bool) -> None:
    """Retire a memory for good (a `forget` patch; undo with `cclg rollback`).

    Example: cclg forget mem_01... --reason "no longer true"
    """
    emit(api.forget(store_of(ctx), memory_id, reason=reason).to_dict(), as_json)


@click.command()
@click.argument("memory_id")
@click.option("--reason", default="kept beyond its session at the user's request", show_default=True)
@json_option
@click.pass_context
def promote(ctx: click.Context, memory_id: str, reason: str, as_json: bool) -> None:
    """Make a session memory durable: a copy for the project (or wherever it was scoped, without the
    session) becomes active, and the session memory is marked promoted (undo with `cclg rollback`).

    Example: cclg promote mem_01... --reason "true beyond this session"
    """
    emit(api.promote(store_of(ctx), memory_id, reason=reason).to_dict(), as_json)


@click.command()
@click.argument("memory_id")
@click.option("--reason", default="purged at the user's request", show_default=True, help="Kept in the purge patch.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation (required when stdin is not a terminal).")
@json_option
@click.pass_context
def purge(ctx: click.Context, memory_id: str, reason: str, yes: bool, as_json: bool) -> None:
    """Erase a memory's content for good, from every file of the store and its indexes.

    Unlike `forget`, nothing of the text stays: its node file, the patches,
    session logs, raw evidence and audit lines that quote it verbatim are
    rewritten without it (raw evidence keeps its length: a marker of the same
    size), code graphs holding it are deleted, and the search index and vectors
    are rebuilt. A tombstone keeps only the content's hash, so adding the same
    content again is refused (as forgotten content is; --force adds it anyway).
    It cannot be rolled back, nor can any earlier patch that touched the memory.

    Only this memory's content is erased: other versions in its lineage (the
    memory it superseded, the one that replaced it) and any other memory holding
    the same text keep theirs; they are listed (held_elsewhere) so you can purge
    each. Asks for confirmation unless --yes. If it is interrupted, run it again
    (or `cclg doctor --repair`) to finish.

    MEMORY_ID is the full id or at least its 8 characters after mem_.

    Example: cclg purge mem_01... --yes
    """
    store = store_of(ctx)
    node, preview = api.purge_preview(store, memory_id)
    if not yes:
        if not sys.stdin.isatty():
            raise UsageError("purge erases for good and asks for confirmation: run it in a terminal, or add --yes")
        text = shown(repr(preview))
        question = f"Erase the content of {node.id} ({node.status}: {text}) for good? It cannot be undone"
        if not click.confirm(question, default=False):
            raise CclgError("not confirmed: nothing was erased")
    result = api.purge_memory(store, node.id, reason=reason)
    emit(result.to_dict(), as_json)
    if result.status == "already purged":
        click.echo(f"{node.id} was purged by {result.patch_id} already: nothing left to erase", err=True)
    else:
        erased = ", ".join(f"{count} in {folder}/" for folder, count in result.counts().items())
        click.echo(f"{result.status}: {node.id} (files rewritten: {erased}; indexes rebuilt)", err=True)
    for other in result.held_elsewhere:
        click.echo(f"note: {other} holds the same text as its own; purge it too to erase every copy", err=True)


@click.command("label")
@click.argument("memory_id")
@click.option("--trust", type=click.Choice(surfaces.TRUST), help="trusted: you have checked it.")
@click.option("--sensitivity", type=click.Choice(surfaces.SENSITIVITY))
@click.option("--retention", type=click.Choice(surfaces.RETENTION))
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
    result = api.label(
        store_of(ctx), memory_id, reason=reason, trust=trust, sensitivity=sensitivity, retention=retention
    )
    emit(result.to_dict(), as_json)


@click.command()
@click.argument("patch_id")
@click.option("--reason", default="", help="Why (default: 'rollback of PATCH_ID').")
@json_option
@click.pass_context
def rollback(ctx: click.Context, patch_id: str, reason: str, as_json: bool) -> None:
    """Undo a patch: restore the statuses it recorded, discard the memories it wrote.

    Example: cclg rollback patch_01...
    """
    emit(api.rollback(store_of(ctx), patch_id, reason=reason).to_dict(), as_json)


@click.command()
@json_option
@click.pass_context
def conflicts(ctx: click.Context, as_json: bool) -> None:
    """Memories in conflict_pending, with the memories that contradict them.

    Settle one with `cclg resolve`. Items of registered sources whose memory you changed while the
    file still says otherwise are counted on stderr (`cclg sources conflicts` lists them).
    Example: cclg conflicts
    """
    store = store_of(ctx)
    emit(api.conflicts(store), as_json)
    disagree = len(api.source_conflicts(store))
    if disagree:
        click.echo(f"{disagree} source item(s) disagree with a memory you changed: cclg sources conflicts", err=True)


@click.command()
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
    result = api.resolve(store_of(ctx), list(memory_ids), content=text_arg(content), reason=reason, source=source)
    emit(result.to_dict(), as_json)


COMMANDS = [init, add, raw, import_jsonl, patch, forget, promote, purge, label, rollback, conflicts, resolve]
