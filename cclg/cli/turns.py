"""``cclg turn``: the previous turn's entry (CogLog's fact and interpretation layers), read, written
and cleared; ``cclg.api.learning`` does the work (``cclg.learning.turns`` holds the entry)."""

from __future__ import annotations

import sys

import click

from cclg import api
from cclg.api import learning
from cclg.cli.common import emit, json_option, store_of
from cclg.core.fields import read_json
from cclg.errors import UsageError

session_choice = click.option(
    "--session",
    "session_id",
    help="The session (default: the one with the latest prompt from this folder; a write or a clear takes only "
    "a session of this folder).",
)


@click.group("turn")
def turn() -> None:
    """The previous turn: what happened (recorded by the hook at each stop) and how the agent read it.

    Example: cclg turn read --coglog
    """


@turn.command("read")
@session_choice
@click.option("--coglog", is_flag=True, help="Exactly CogLog's current.json shape (JSON).")
@json_option
@click.pass_context
def read_command(ctx: click.Context, session_id: str | None, coglog: bool, as_json: bool) -> None:
    """Print the session's current entry.

    Example: cclg turn read --session 4f1c... --json
    """
    entry = api.read_turn(store_of(ctx), session_id, coglog=coglog)
    emit(entry, as_json or coglog)


@turn.command("write")
@session_choice
@json_option
@click.pass_context
def write_command(ctx: click.Context, session_id: str | None, as_json: bool) -> None:
    """Write the agent's reading of its turn: a JSON object on stdin with any of current_focus,
    theory_of_mind, self_narrative and annotation (strings, empty allowed), kept until the stop that
    ends the turn, in the writer's own session. What happened (user, thinking, assistant) is the hook's.

    Example: echo '{"current_focus": "the flaky cache test"}' | cclg turn write
    """
    try:
        fields = read_json(sys.stdin.buffer, learning.MAX_WRITE_BYTES, "standard input")
    except ValueError as exc:
        raise UsageError(f"standard input is not a JSON object: {exc}") from None
    if not isinstance(fields, dict):
        raise UsageError("standard input must be a JSON object")
    emit(api.write_turn(store_of(ctx), fields, session_id), as_json)


@turn.command("clear")
@session_choice
@click.pass_context
def clear_command(ctx: click.Context, session_id: str | None) -> None:
    """Drop the session's current entry (the history stays in raw/ and the session log).

    Example: cclg turn clear --session 4f1c...
    """
    dropped = api.clear_turn(store_of(ctx), session_id)
    click.echo("cleared" if dropped else "nothing to clear")


COMMANDS = [turn]
