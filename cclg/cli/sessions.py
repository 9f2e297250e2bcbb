"""Commands about what sessions taught and used: ``distill`` (corrections and decisions proposed as
memories) and ``stats`` (which delivered memories were used): ``cclg.api.learning`` does the work."""

from __future__ import annotations

import click

from cclg import api
from cclg.cli.common import emit, json_option, shown, skipped_line, store_of


@click.command("distill")
@click.argument("session_id")
@click.option("--accept", "numbers", multiple=True, type=click.IntRange(1), help="Write proposal N (repeatable).")
@click.option("--accept-all", is_flag=True, help="Write every proposal.")
@json_option
@click.pass_context
def distill(ctx: click.Context, session_id: str, numbers: tuple[int, ...], accept_all: bool, as_json: bool) -> None:
    """Propose memories from a session: your corrections, your decisions, and what you said twice.

    Each proposal shows its evidence (the sentence, in the prompt's raw evidence) and what accepting
    it does: a correction supersedes the current memory it contradicts, if there is one; the rest
    are added, scoped to the session's project. Each shows the labels accepting sets: at most
    untrusted and never pinned, whatever it supersedes. Nothing is written until you accept.

    Example: cclg distill 4f1c... then cclg distill 4f1c... --accept 2
    """
    store = store_of(ctx)
    if numbers or accept_all:
        emit({"accepted": api.distill_accept(store, session_id, None if accept_all else list(numbers))}, as_json)
        return
    found = api.distill_review(store, session_id)
    if as_json:
        emit(found, True)
        return
    proposals = found["proposals"]
    if not proposals:
        click.echo("no corrections or decisions found in this session's prompts")
    for p in proposals:
        action = f"supersede {p['target']} ({shown(p['target_content'])})" if p["action"] == "supersede" else "add"
        click.echo(f"{p['number']}. [{p['kind']}] {shown(p['content'])}\n   would {action}, scope {shown(p['scope'])}")
        click.echo(f"   labels: {', '.join(f'{k} {v}' for k, v in p['labels'].items())}")
        if p.get("keeps"):
            click.echo(f"   keeps: {', '.join(f'{k} {shown(v)}' for k, v in p['keeps'].items() if v is not None)}")
        if p.get("lowered"):
            click.echo(f"   lower than what it supersedes: {', '.join(p['lowered'])} (cclg label raises them)")
    if proposals:
        click.echo(f"accept with: cclg distill {session_id} --accept N (or --accept-all)")
    if found["dangling"]:
        one, many = "prompt of this session has", "prompts of this session have"
        click.echo(skipped_line(found["dangling"], f"{one} no raw evidence left", f"{many} no raw evidence left"))


@click.command("stats")
@click.option("--dead-weight", is_flag=True, help="Only memories delivered often and never used.")
@click.option("--min-delivered", type=click.IntRange(1), default=10, show_default=True, help="For --dead-weight.")
@json_option
@click.pass_context
def stats(ctx: click.Context, dead_weight: bool, min_delivered: int, as_json: bool) -> None:
    """How often each memory was delivered to a session, and used or ignored there.

    A memory counts as used in a session when its code spans or rarest words show up in what the
    agent did after it was delivered (tool calls, edits, answers). --dead-weight lists those
    delivered at least --min-delivered times and never used, with the commands to narrow or forget
    each: they cost tokens in every pack they join.

    Example: cclg stats --dead-weight
    """
    found = api.usage_report(store_of(ctx), dead_weight=dead_weight, min_delivered=min_delivered)
    if as_json:
        emit(found, True)
        return
    rows = found["memories"]
    if not rows:
        click.echo("no dead weight" if dead_weight else "no memory has been delivered to a finished session yet")
    for row in rows:
        click.echo(f"{row['id']}  [{row['status']}]  delivered {row['delivered']}, used {row['used']}")
        click.echo(f"    {shown(row['content'][:100])}")
        if dead_weight:
            click.echo(
                f"    narrow it: cclg patch narrow --target {row['id']} --content ... --reason ...;"
                f" or: cclg forget {row['id']} --reason ..."
            )
    if found["dangling"]:
        one, many = "memory named in the usage log is", "memories named in the usage log are"
        click.echo(skipped_line(found["dangling"], f"{one} no longer in the store", f"{many} no longer in the store"))


COMMANDS = [distill, stats]
