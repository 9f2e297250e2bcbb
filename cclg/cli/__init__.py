"""The ``cclg`` command line: a thin click layer over ``cclg.api``.

Each command opens the store, calls the library and prints the result: TOML for
people (``--json`` for programs). Errors from the library become a message on
stderr and an exit code in one place, ``CclgGroup.invoke``.

Where a command lives is ``COMMAND_MODULES``; a command's module is imported only
when the command runs (or ``cclg --help`` lists it), so ``cclg add`` loads what
adding needs and no more. ``common`` holds what the command modules share (the
store of the invocation, printing, options). The command modules: ``memory`` (init, add,
raw, patch, purge...), ``inspect`` (status, show, log, audit, doctor, rules...),
``retrieval`` (search, grep, recall, pack, reindex), ``containers`` (export, open,
import-container), ``code`` (code-index, code-search), ``hosts`` (install, uninstall,
demo-store, quickstart), ``turns`` (turn), ``sessions`` (distill, stats), ``projects`` (project),
``teams`` (remote, sync: team memory over git, ``cclg.sync``), ``ui`` (ui: the web view, ``cclg.ui``),
``sources`` (sources, import);
``__main__`` runs the group.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from typing import Any

import click

from cclg import __version__
from cclg.errors import CclgError, ValidationError, disk_refusal

COMMAND_MODULES = {  # module of cclg.cli -> the commands it defines (in its COMMANDS)
    "memory": [
        "init",
        "add",
        "raw",
        "import-jsonl",
        "patch",
        "forget",
        "promote",
        "purge",
        "label",
        "rollback",
        "conflicts",
        "resolve",
    ],
    "inspect": ["status", "show", "log", "diff", "cite", "audit", "validate", "doctor", "scan", "rules"],
    "retrieval": ["search", "grep", "recall", "pack", "reindex"],
    "containers": ["export", "open", "import-container"],
    "code": ["code-index", "code-search"],
    "hosts": ["install", "uninstall", "demo-store", "quickstart"],
    "turns": ["turn"],
    "sessions": ["distill", "stats"],
    "projects": ["project"],
    "teams": ["remote", "sync"],
    "ui": ["ui"],
    "sources": ["sources", "import"],
}


class LazyCommands(MutableMapping[str, click.Command]):
    """The group's commands by name (``Group.commands``): a command's module is imported the first
    time the command is looked up. Names alone (``cclg --help``'s list, suggestions for a typo)
    import nothing."""

    def __init__(self, modules: dict[str, list[str]]) -> None:
        self._commands: dict[str, click.Command | str] = {
            name: module for module, names in modules.items() for name in names
        }

    def __getitem__(self, name: str) -> click.Command:
        command = self._commands[name]
        if isinstance(command, str):
            module = importlib.import_module(f"cclg.cli.{command}")
            command = next(c for c in module.COMMANDS if c.name == name)
            self._commands[name] = command
        return command

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._commands[name] = command

    def __delitem__(self, name: str) -> None:
        del self._commands[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._commands)

    def __len__(self) -> int:
        return len(self._commands)


class CclgGroup(click.Group):
    """Turns library errors into ``error: ...`` on stderr and the error's exit code."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # An argument holding bytes that are not UTF-8 (the shell passes them through as surrogates)
        # is refused before any command runs, so nothing is written.
        for arg in args:
            try:
                arg.encode("utf-8")
            except UnicodeEncodeError as exc:
                why = f"{exc.reason} at position {exc.start}"
                raise click.UsageError(f"an argument is not valid UTF-8 text ({why})") from None
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except CclgError as exc:
            from cclg.api.surfaces import terminal_text  # a message may quote outside text (a name, an id)

            click.echo(f"error: {terminal_text(str(exc), lines=True)}", err=True)
            if isinstance(exc, ValidationError) and exc.problems != [str(exc)]:
                for problem in exc.problems:
                    click.echo(f"  {terminal_text(problem, lines=True)}", err=True)
            ctx.exit(exc.exit_code)
        except BrokenPipeError:
            ctx.exit(0)
        except Exception as exc:  # the disk refusing (an OSError or SQLite's), else a bug: its traceback
            refused = disk_refusal(exc)
            if refused is None:
                raise
            click.echo(f"error: {refused}", err=True)
            ctx.exit(refused.exit_code)
        finally:
            store = ctx.obj.get("store") if isinstance(ctx.obj, dict) else None
            for warning in [] if store is None else store.warnings:
                click.echo(f"warning: {warning}", err=True)


@click.group(
    cls=CclgGroup, commands=LazyCommands(COMMAND_MODULES), context_settings={"help_option_names": ["-h", "--help"]}
)
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
    if root == "":
        raise click.BadParameter("an empty path names no store folder", param_hint="--root")
    ctx.obj = {"root": root}


def main() -> None:
    cli(prog_name="cclg")


__all__ = ["COMMAND_MODULES", "CclgGroup", "LazyCommands", "cli", "main"]
