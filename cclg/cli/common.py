"""What every command module shares: the store of the invocation, printing, input, options.

Command modules import from here, never from ``cclg.cli`` itself (``cclg/cli/__init__.py``
imports them to run their commands, so the other way round would be an import cycle).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from cclg import api
from cclg.errors import UsageError
from cclg.fencing import escape_invisible, terminal_text
from cclg.repository import project_filter


def store_of(ctx: click.Context) -> api.Store:
    """The store named by ``--root`` (else ``$CCLG_HOME``, else ``~/.cclg``); exit 3 if it is not one."""
    root: str | None = ctx.obj["root"]
    store = api.open_store(root)
    ctx.obj["store"] = store  # what it committed but could not finish is printed as a warning at the end
    return store


def emit(data: Any, as_json: bool) -> None:
    """Print a record, a report or a list of them: TOML for people, JSON for programs. Their encoders
    escape line breaks and C0 controls; what they leave raw (C1 controls, DEL, bidirectional marks,
    tag characters) is escaped too (``cclg.fencing.escape_invisible``): the same values, nothing active
    on a terminal."""
    if as_json:
        click.echo(escape_invisible(json.dumps(data, ensure_ascii=False, indent=2)))
    else:
        text = api.to_toml(data if isinstance(data, dict) else {"items": data}).rstrip("\n")
        click.echo(escape_invisible(text, toml=True))


def shown(value: object) -> str:
    """Outside text (a memory's content, a file name, a reason, a command, a path) in a line of plain
    output: every control character (ESC included), line break and invisible mark shown as
    ``[U+XXXX]`` (``cclg.fencing.terminal_text``), so no stored string can drive the terminal or forge
    a line of its own. Every plain-text line of the command line shows outside text through this."""
    return terminal_text(str(value))


def read_input(value: str) -> bytes:
    """The bytes of a file, or of stdin for ``-``: a regular file only (a FIFO or a device is refused,
    never waited on or read without end; ``cclg.files.read_regular``)."""
    if value == "-":
        return sys.stdin.buffer.read()
    from cclg.files import read_regular

    try:
        return read_regular(value)
    except FileNotFoundError:
        raise UsageError(f"no such file: {value}") from None
    except OSError as exc:
        raise UsageError(f"cannot read {value}: {exc.strerror or exc}") from None


def input_name(value: str) -> str:
    """The name evidence read by ``read_input`` is kept under: the file's name, or ``stdin``."""
    return "stdin" if value == "-" else Path(value).name


def text_arg(value: str) -> str:
    """An option's text, or stdin's for ``-`` (which must be UTF-8: a usage error otherwise)."""
    if value != "-":
        return value
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"standard input is not valid UTF-8 text (byte {exc.start}: {exc.reason})") from None


MAX_COUNT = 1_000_000_000  # the largest count or size an option takes: far past any use, inside SQLite's integers


def count(minimum: int = 0) -> click.IntRange:
    """The type of a count or size option: a whole number from ``minimum`` to ``MAX_COUNT``."""
    return click.IntRange(min=minimum, max=MAX_COUNT)


def where(session_id: str | None, project: str | None, workspace: str | None) -> api.Where:
    """The view a search or pack looks at, from the shared scope options (``--project .``: the
    repository of the current folder)."""
    return api.Where(session_id=session_id, project=project_filter(project, Path.cwd()), workspace=workspace)


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of TOML.")
session_option = click.option(
    "--session", "--session-id", "session_id", help="Include this session's overlay memories."
)
project_option = click.option(
    "--project",
    help="Only memories of this project (or of no project): a scope value (git:SHA, a name), "
    "or . for the current folder's repository.",
)
workspace_option = click.option("--workspace", help="Only memories of this workspace (or of no workspace).")

valid_from_option = click.option(
    "--valid-from", help="In effect from this ISO 8601 date or time (UTC unless it says), not before."
)
valid_until_option = click.option(
    "--valid-until",
    help="In effect until this ISO 8601 date or time: a temporary fact expires by itself ('never': no end, "
    "where a patch's new memory would keep its target's).",
)


def skipped_line(number: int, one: str, many: str) -> str:
    """What a view says of the references it skipped (``1 {one}``, ``N {many}``): a memory a log
    names that the store no longer holds, say."""
    return f"{number} {one if number == 1 else many} (skipped)"
