"""Hosts: connecting cclg to Claude Code and Codex (``cclg install`` / ``cclg uninstall``).

The policy (what is checked before anything is written, the store, the code-graph setting, Codex's
trust) is ``cclg.hosts.install``'s; these are the library's names for it, and ``install`` (with the host
templates and TOML editing) is imported only when a host is installed or removed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cclg.hosts.install import Change

__all__ = ["install_host", "present_hosts", "uninstall_host"]


def install_host(
    host: str, *, project: Path | None = None, root: str | None = None, dry_run: bool = False, trust: bool = True
) -> list[Change]:
    """``cclg install``: register cclg-hook and cclg-mcp with ``host``, creating the store if needed
    (``cclg.hosts.install.install_host``)."""
    from cclg.hosts import install

    return install.install_host(host, project=project, root=root, dry_run=dry_run, trust=trust)


def uninstall_host(host: str, *, project: Path | None = None, dry_run: bool = False) -> list[Change]:
    """``cclg uninstall``: remove exactly what ``install_host`` added (``cclg.hosts.install.uninstall_host``)."""
    from cclg.hosts import install

    return install.uninstall_host(host, project=project, dry_run=dry_run)


def present_hosts() -> dict[str, bool]:
    """The agent hosts this machine has (``claude``, ``codex``), each with whether its command is on
    ``PATH`` (``cclg.hosts.install.present_hosts``): what ``cclg quickstart`` offers to connect."""
    from cclg.hosts import install

    return install.present_hosts()
