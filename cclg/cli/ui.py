"""``cclg ui``: the local web view (``cclg.ui``), served on 127.0.0.1 until interrupted."""

from __future__ import annotations

import click

from cclg import api
from cclg.cli.common import store_of


@click.command("ui")
@click.option("--store", "root", type=click.Path(file_okay=False), help="The store to show (as `cclg --root`).")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True, help="0: a free port.")
@click.option("--open/--no-browser", "open_browser", default=False, help="Open the URL in a browser (default: not).")
@click.pass_context
def ui_command(ctx: click.Context, root: str | None, port: int, open_browser: bool) -> None:
    """See and correct what the store remembers, in a local web page.

    Binds 127.0.0.1 only and prints the URL with a random token (every request needs it; every
    write also needs the page's CSRF token; a Host header other than its own is refused). Each
    correction (forget, supersede, refine, label, promote, resolve, purge) is the library call the
    command line makes: a patch with its reason. Ctrl-C stops it.

    Example: cclg ui --open
    """
    from cclg.ui.app import serve  # starlette and uvicorn: only when serving

    store = api.open_store(root) if root else store_of(ctx)
    serve(store, port=port, announce=lambda url: click.echo(f"cclg ui: {url}", err=False), open_browser=open_browser)


COMMANDS = [ui_command]
