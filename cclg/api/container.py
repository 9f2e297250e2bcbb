"""The container: moving memory between stores as one ``.cclg`` file (export, load, import).

The file's format is ``cclg.intake.container``'s, bringing one into a store ``cclg.intake.container_import``'s; both are
imported on first use (``_LAZY``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cclg.api.lazy import served_on_first_use
from cclg.core.store import Store
from cclg.errors import UsageError

_LAZY = {  # module -> the public names it serves, imported on first use
    "cclg.intake.container": "Container ContainerError export_store load_container read_text",
    "cclg.intake.container_import": "ContainerImportReport import_container",
}

if TYPE_CHECKING:  # what type checkers see; at run time, __getattr__ below
    from cclg.intake.container import Container, ContainerError, export_store, load_container, read_text
    from cclg.intake.container_import import ContainerImportReport, import_container
else:
    __getattr__ = served_on_first_use(globals(), _LAZY)


__all__ = [
    "Container",
    "ContainerError",
    "ContainerImportReport",
    "export_store",
    "export_to",
    "import_container",
    "load_container",
    "read_text",
]


def export_to(store: Store, out: Path, *, session_ids: list[str] | None = None, force: bool = False) -> dict[str, Any]:
    """``cclg export FILE``: write the store's container to ``out``; returns the container's header."""
    if out.is_dir():
        raise UsageError(f"{out} is a folder; give a file name such as {out / 'memory.cclg'}")
    from cclg.intake.container import export_store

    text = export_store(store, session_ids or None)
    try:
        store.write_file(out, text.encode("utf-8"), replace=force)
    except FileExistsError:
        raise UsageError(f"{out} exists; pass --force to replace it") from None
    except FileNotFoundError:
        raise UsageError(f"no folder {out.parent} to write {out.name} into") from None
    header: dict[str, Any] = json.loads(text.split("\n", 2)[1])
    return header
