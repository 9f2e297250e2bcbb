"""Commands about what a session taught: ``distill`` (corrections and decisions proposed as
memories); ``cclg.distill`` does the work."""

from __future__ import annotations

import click

from cclg.cli.common import emit, json_option, store_of


@click.command("distill")
@click.argument("session_id")
@click.option("--accept", "numbers", multiple=True, type=click.IntRange(1), help="Write proposal N (repeatable).")
@click.option("--accept-all", is_flag=True, help="Write every proposal.")
@json_option
@click.pass_context
def distill(ctx: click.Context, session_id: str, numbers: tuple[int, ...], accept_all: bool, as_json: bool) -> None:
    """Propose memories from a session: the prompts where you corrected the agent or decided something.

    Each proposal shows its evidence (the sentence, in the prompt's raw evidence) and what accepting
    it does: a correction supersedes the current memory it contradicts, if there is one; the rest
    are added, scoped to the session's project. Nothing is written until you accept.

    Example: cclg distill 4f1c... then cclg distill 4f1c... --accept 2
    """
    from cclg import distill as distilling

    store = store_of(ctx)
    if numbers or accept_all:
        emit({"accepted": distilling.accept(store, session_id, None if accept_all else list(numbers))}, as_json)
        return
    proposals = distilling.propose(store, session_id)
    if as_json:
        emit({"proposals": proposals}, True)
        return
    if not proposals:
        click.echo("no corrections or decisions found in this session's prompts")
    for p in proposals:
        action = f"supersede {p['target']} ({p['target_content']!r})" if p["action"] == "supersede" else "add"
        click.echo(f"{p['number']}. [{p['kind']}] {p['content']}\n   would {action}, scope {p['scope']}")
    if proposals:
        click.echo(f"accept with: cclg distill {session_id} --accept N (or --accept-all)")


COMMANDS = [distill]
