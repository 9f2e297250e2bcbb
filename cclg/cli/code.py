"""Commands for a repository's code graph: index it into the store, rank its files for a task."""

from __future__ import annotations

import sys

import click

from cclg import api
from cclg.cli.common import count, emit, json_option, shown, store_of


@click.command("code-index")
@click.argument("repo", default=".", type=click.Path(exists=True, file_okay=False))
@click.option("--commits", type=count(), default=5000, show_default=True, help="History read for churn.")
@json_option
@click.pass_context
def code_index_command(ctx: click.Context, repo: str, commits: int, as_json: bool) -> None:
    """Index a repository's code graph (files, symbols, imports, churn) into the store.

    The repository is only read. A second run re-parses only files that changed.
    Example: cclg code-index ~/src/myproject
    """
    interactive = sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        if interactive and total >= 100 and (done % 50 == 0 or done == total):
            click.echo(f"\rparsing {done}/{total} files", nl=done == total, err=True)

    summary = api.code_index(store_of(ctx), repo, max_commits=commits, progress=progress)
    if as_json:
        emit({k: v for k, v in summary.items() if k != "root"}, True)  # the build summary, as before
        return
    languages = ", ".join(f"{name} {count}" for name, count in summary["languages"].items()) or "none"
    click.echo(
        f"indexed {shown(summary['root'])}: {summary['files']} files ({languages}), {summary['symbols']} symbols, "
        f"{summary['edges']} edges; parsed {summary['parsed']} in {summary['seconds']:.2f}s"
    )
    for language, reason in summary["missing_grammars"].items():
        click.echo(f"note: {language} files were listed but not parsed: {shown(reason)}")


@click.command("code-search")
@click.argument("query")
@click.option("--repo", default=".", type=click.Path(exists=True, file_okay=False), show_default=True)
@click.option("--limit", type=click.IntRange(min=1, max=200), default=10, show_default=True)
@click.option("--explain", is_flag=True, help="Show what each signal added to each file's score.")
@json_option
@click.pass_context
def code_search_command(ctx: click.Context, query: str, repo: str, limit: int, explain: bool, as_json: bool) -> None:
    """Rank a repository's files for a task: which to read first, with their key symbols.

    The signals: the task's words in a file's text, path and names (text), the names it defines
    (symbols), the definition of a name the task spells as code (definition), the file named in the
    task (named), the part of the code the task names (component),
    the past commits most like the task (history), what the matching files import or reference
    (graph), all times a small prior for files that changed often and lately. --explain shows each.

    Needs `cclg code-index` first. Example: cclg code-search "fix the retry in the upload client" --repo .
    """
    result = api.code_search(store_of(ctx), query, repo, limit=limit)
    if "note" in result:
        click.echo(f"note: {shown(result['note'])}", err=True)
    if as_json:
        emit(result, True)
        return
    files = result["files"]
    for rank, entry in enumerate(files, 1):
        symbols = ", ".join(shown(s["name"]) for s in entry["symbols"][:3])
        why = "; ".join(shown(reason) for reason in entry["why"])
        click.echo(f"{rank:>3}. {shown(entry['path'])}  ({entry['score']:.3f}; {why})")
        if symbols:
            click.echo(f"     {symbols}")
        if explain:
            shares = ", ".join(f"{name} {value:.3f}" for name, value in entry["signals"].items())
            click.echo(f"     signals: {shares}")
    if not files:
        click.echo("no matching files")


COMMANDS = [code_index_command, code_search_command]
