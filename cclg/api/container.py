"""Moving memory between stores: one ``.cclg`` file (export, load, import), or a table (JSON lines,
Arrow IPC, Parquet).

The container's format is ``cclg.intake.container``'s, bringing one into a store
``cclg.intake.container_import``'s; a table's is ``cclg.intake.tables``'s. All are imported on first
use (``_LAZY``), so pyarrow loads only when a table is written or read.
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
    "cclg.intake.tables": "TABLE_FORMATS read_records import_table",
}

if TYPE_CHECKING:  # what type checkers see; at run time, __getattr__ below
    from cclg.intake.container import Container, ContainerError, export_store, load_container, read_text
    from cclg.intake.container_import import ContainerImportReport, import_container
    from cclg.intake.tables import TABLE_FORMATS, import_table, read_records
else:
    __getattr__ = served_on_first_use(globals(), _LAZY)


__all__ = [
    "EXPORT_FORMATS",
    "TABLE_FORMATS",
    "Container",
    "ContainerError",
    "ContainerImportReport",
    "export_bytes",
    "export_store",
    "export_to",
    "import_container",
    "import_table",
    "load_container",
    "read_records",
    "read_text",
]

# What ``cclg export --format`` writes: the container (the default) and the table formats.
EXPORT_FORMATS = ("cclg", "jsonl", "arrow", "parquet")


def export_bytes(
    store: Store, format: str = "cclg", *, ledger: bool = False, session_ids: list[str] | None = None
) -> bytes:
    """The file ``cclg export --format`` writes: the ``.cclg`` container (always the whole ledger), or a
    table of the effective view (current memories) or, with ``ledger``, of every record."""
    if format not in EXPORT_FORMATS:
        raise UsageError(f"unknown export format {format!r}; use one of {', '.join(EXPORT_FORMATS)}")
    if format == "cclg":
        from cclg.intake.container import export_store

        return export_store(store, session_ids or None).encode("utf-8")
    if session_ids:
        raise UsageError("--session narrows a .cclg container's sessions; a table export takes no --session")
    from cclg.intake.tables import store_records, table_bytes

    return table_bytes(store_records(store, ledger=ledger), format, ledger=ledger)


def export_to(
    store: Store,
    out: Path,
    *,
    format: str = "cclg",
    ledger: bool = False,
    session_ids: list[str] | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """``cclg export FILE``: write the store's container (or a table, ``format``) to ``out``, whole or
    not at all; returns the container's header, or for a table its format, view and size."""
    if out.is_dir():
        raise UsageError(f"{out} is a folder; give a file name such as {out / 'memory.cclg'}")
    data = export_bytes(store, format, ledger=ledger, session_ids=session_ids)
    try:
        store.write_file(out, data, replace=force)
    except FileExistsError:
        raise UsageError(f"{out} exists; pass --force to replace it") from None
    except FileNotFoundError:
        raise UsageError(f"no folder {out.parent} to write {out.name} into") from None
    if format != "cclg":
        return {"format": format, "view": "ledger" if ledger else "effective", "bytes": len(data)}
    header: dict[str, Any] = json.loads(data.split(b"\n", 2)[1])
    return header
