"""Memory as a table: JSON lines, Arrow IPC and Parquet (``cclg export --format``), and back.

One table shape holds every record kind: a row per record, its kind in ``record``
(``node``, ``patch``, ``edge``, ``session``). ``COLUMNS`` defines it once: each
column, its type, and the field of the record it holds; the Arrow schema
(``arrow_schema``) and the README's table are read from it. The columns follow
cognoxium's item shape where they mean the same thing (``content_hash`` as a
SHA-256 hex digest, ``trust``, ``sensitivity``, ``retention``, ``expires_at``,
``parent_ids``, ``sources``); whatever a record holds that no column takes stays in
``fields``, a JSON object, so a row gives back its record exactly.

- A column holds a field only when the record has it, not null, in the column's
  shape; otherwise the field stays in ``fields`` (a null column means "see
  ``fields``"). Reading puts every non-null column back where it came from.
- ``parent_ids`` and ``sources`` are derived (from ``relations`` and ``source``):
  written for readers of the table, checked against the record when read back.
- Records are written in their canonical form (``to_dict``, ``metadata`` keys
  sorted), so a JSON-lines file cclg wrote goes through Parquet or Arrow and back
  byte for byte; any other file of full records comes back record-equal.

JSON lines: an effective view is one MemoryNode per line (``cclg import-jsonl`` reads
the ones that carry no history); a ledger line is its record with ``"record": KIND``
first. Readers (``read_records``) take a path and yield records, checking each;
``import_table`` brings a file into a store: a view's memories as new memories
(``cclg.intake.new_memories.import_jsonl``'s rules), a ledger's records as a
``.cclg`` container's (``cclg.intake.container_import``: foreign records never change
local memories). pyarrow comes with the ``arrow`` extra, imported on first use.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from cclg.core.fields import parse_json
from cclg.core.files import read_regular
from cclg.core.records import MemoryEdge, MemoryNode, MemoryPatch, Session
from cclg.core.store import Store
from cclg.errors import UsageError, ValidationError

TableRecord = MemoryNode | MemoryPatch | MemoryEdge | Session
TABLE_SCHEMA = "cclg.table.v0.1"
TABLE_FORMATS = ("jsonl", "arrow", "parquet")
KINDS: dict[str, Any] = {"node": MemoryNode, "patch": MemoryPatch, "edge": MemoryEdge, "session": Session}
KIND_OF = {cls: kind for kind, cls in KINDS.items()}
BATCH_ROWS = 1024
# The relations that name a memory this one was made from (cognoxium's parent_ids), in this order.
PARENT_RELATIONS = ("supersedes", "refines", "expands", "narrows", "derived_from")
_HASH = re.compile(r"sha256:[0-9a-f]{64}")

# ---------------------------------------------------------------- the columns, defined once

STR, F64, I64 = "string", "float64", "int64"
LIST_STR = ("list", STR)
SCOPE_TYPE = ("struct", (("user", STR), ("org", STR), ("workspace", STR), ("project", STR), ("agent", STR),
                         ("session", STR)))  # fmt: skip
SPAN_TYPE = ("struct", (("source_id", STR), ("turn_id", STR), ("char_start", I64), ("char_end", I64)))
SOURCE_TYPE = ("struct", (("label", STR), ("session_ids", LIST_STR), ("turn_ids", LIST_STR),
                          ("raw_spans", ("list", SPAN_TYPE)), ("tool_result_ids", LIST_STR),
                          ("artifact_ids", LIST_STR), ("quote", STR)))  # fmt: skip
RELATIONS_TYPE = ("struct", tuple((kind, LIST_STR) for kind in
                                  ("supersedes", "superseded_by", "refines", "expands", "narrows", "contradicts",
                                   "depends_on", "derived_from")))  # fmt: skip
REF_TYPE = ("list", ("struct", (("kind", STR), ("uri", STR))))
OPTIONAL_KEYS = {"source": ("quote",)}  # struct keys a record leaves out when null


class Column:
    """One column: its name, type, the record field it holds (``path``) and the kinds that have it.
    A derived column (``derive``) is computed from the record and checked when read back."""

    def __init__(
        self,
        name: str,
        type: Any,
        path: tuple[str, ...] = (),
        kinds: str = "node patch edge session",
        about: str = "",
        derive: Callable[[dict[str, Any]], Any] | None = None,
    ) -> None:
        self.name, self.type, self.path, self.kinds = name, type, path, tuple(kinds.split())
        self.about, self.derive = about, derive


def _parent_ids(data: dict[str, Any]) -> list[str]:
    relations = data.get("relations") or {}
    found = [i for kind in PARENT_RELATIONS for i in relations.get(kind, []) if isinstance(i, str)]
    return list(dict.fromkeys(found))


def _sources(data: dict[str, Any]) -> list[dict[str, str]]:
    """The source's pointers as cognoxium's source references: a kind and a URI each."""
    source = data.get("source") or {}
    refs = [{"kind": "session", "uri": f"cclg:session/{s}"} for s in source.get("session_ids", [])]
    refs += [{"kind": "turn", "uri": f"cclg:turn/{t}"} for t in source.get("turn_ids", [])]
    refs += [
        {"kind": "raw", "uri": f"cclg:raw/{s.get('source_id')}#char={s.get('char_start')},{s.get('char_end')}"}
        for s in source.get("raw_spans", [])
    ]
    refs += [{"kind": "tool_result", "uri": f"cclg:tool_result/{t}"} for t in source.get("tool_result_ids", [])]
    refs += [{"kind": "artifact", "uri": f"cclg:artifact/{a}"} for a in source.get("artifact_ids", [])]
    return refs


COLUMNS = (
    Column("record", STR, about="the record's kind: node, patch, edge or session (never null)"),
    Column("id", STR, ("id",), about="the record's id"),
    Column("schema_version", STR, ("schema_version",)),
    Column("type", STR, ("type",), "node edge", "a memory's type; an edge's kind"),
    Column("status", STR, ("status",), "node session"),
    Column("operation", STR, ("operation",), "patch"),
    Column("scope", SCOPE_TYPE, ("scope",), "node"),
    Column("key", STR, ("key",), "node"),
    Column("content", STR, ("content",), "node", "the memory's text"),
    Column("content_hash", STR, ("metadata", "content_hash"), "node", "SHA-256 hex of the NFC, `\\n` text"),
    Column("trust", STR, ("metadata", "trust"), "node", "trusted, untrusted or quarantined"),
    Column("sensitivity", STR, ("metadata", "sensitivity"), "node", "public, internal, confidential, restricted"),
    Column("retention", STR, ("metadata", "retention"), "node", "required, preferred or optional"),
    Column("confidence", F64, ("confidence",), "node patch"),
    Column("priority", STR, ("priority",), "node"),
    Column("created_at", STR, ("created_at",), about="ISO 8601, as in the record"),
    Column("updated_at", STR, ("updated_at",), "node session"),
    Column("effective_from", STR, ("effective_from",), "node", "when the memory starts to hold"),
    Column("expires_at", STR, ("effective_until",), "node", "when it stops holding (the record's effective_until)"),
    Column("tags", LIST_STR, ("tags",), "node"),
    Column("parent_ids", LIST_STR, (), "node", "derived: the memories it was made from", _parent_ids),
    Column("target_ids", LIST_STR, ("target_ids",), "patch"),
    Column("new_node_ids", LIST_STR, ("new_node_ids",), "patch"),
    Column("reason", STR, ("reason",), "patch"),
    Column("from_id", STR, ("from",), "edge"),
    Column("to_id", STR, ("to",), "edge"),
    Column("source", SOURCE_TYPE, ("source",), "node patch", "the record's source, as in the record"),
    Column("sources", REF_TYPE, (), "node patch", "derived: the source's pointers as (kind, uri)", _sources),
    Column("relations", RELATIONS_TYPE, ("relations",), "node"),
    Column("fields", STR, about="a JSON object: every field of the record no column holds"),
)
COLUMN_NAMES = tuple(c.name for c in COLUMNS)


def type_text(spec: Any) -> str:
    """A column type as the README writes it: ``string``, ``list<string>``, ``struct<...>``."""
    if isinstance(spec, str):
        return spec
    if spec[0] == "list":
        return f"list<{type_text(spec[1])}>"
    return "struct<" + ", ".join(f"{name}: {type_text(t)}" for name, t in spec[1]) + ">"


# ---------------------------------------------------------------- pyarrow, on first use


def pyarrow() -> Any:
    """The ``pyarrow`` module, or a ``UsageError`` naming the extra that brings it."""
    try:
        return importlib.import_module("pyarrow")
    except ImportError:
        raise UsageError(
            "Arrow and Parquet need pyarrow, which the 'arrow' extra installs: pip install 'cclg[arrow]'"
        ) from None


def _arrow_type(pa: Any, spec: Any) -> Any:
    if isinstance(spec, str):
        return {"string": pa.string(), "float64": pa.float64(), "int64": pa.int64()}[spec]
    if spec[0] == "list":
        return pa.list_(_arrow_type(pa, spec[1]))
    return pa.struct([pa.field(name, _arrow_type(pa, t)) for name, t in spec[1]])


def arrow_schema() -> Any:
    """The Arrow schema of a table of records (from ``COLUMNS``)."""
    pa = pyarrow()
    fields = [pa.field(c.name, _arrow_type(pa, c.type), nullable=c.name != "record") for c in COLUMNS]
    return pa.schema(fields, metadata={"cclg.table": TABLE_SCHEMA})


# ---------------------------------------------------------------- records <-> rows


def canonical(record: TableRecord) -> dict[str, Any]:
    """A record's canonical JSON object: its field order, and its ``metadata`` keys sorted."""
    data: dict[str, Any] = record.to_dict()
    if isinstance(data.get("metadata"), dict):
        data["metadata"] = dict(sorted(data["metadata"].items()))
    return data


def record_line(record: TableRecord, *, ledger: bool) -> str:
    """One JSON line: the record's canonical form, with ``"record": KIND`` first in a ledger."""
    data = canonical(record)
    if ledger:
        data = {"record": KIND_OF[type(record)], **data}
    return json.dumps(data, ensure_ascii=False)


def _fits(spec: Any, value: Any, optional: tuple[str, ...] = ()) -> bool:
    if isinstance(spec, str):
        wanted = {"string": str, "float64": float, "int64": int}[spec]
        return value is None or (isinstance(value, wanted) and not isinstance(value, bool))
    if spec[0] == "list":
        return isinstance(value, list) and all(v is not None and _fits(spec[1], v) for v in value)
    names = {name for name, _ in spec[1]}
    if not isinstance(value, dict) or not set(names) - set(optional) <= set(value) <= names:
        return False
    return all(_fits(t, value.get(name)) for name, t in spec[1])


def to_row(record: TableRecord) -> dict[str, Any]:
    """The row of one record (its canonical form): each column's field lifted out, the rest in ``fields``."""
    kind = KIND_OF[type(record)]
    rest = canonical(record)
    row: dict[str, Any] = {**dict.fromkeys(COLUMN_NAMES), "record": kind}
    for column in COLUMNS:
        if column.derive is not None and kind in column.kinds:
            row[column.name] = column.derive(rest)
    for column in COLUMNS:
        if not column.path or kind not in column.kinds:
            continue
        holder: dict[str, Any] = rest
        for step in column.path[:-1]:
            inner = holder.get(step)
            holder = inner if isinstance(inner, dict) else {}
        value = holder.get(column.path[-1])
        if column.name == "content_hash":
            value = value[len("sha256:") :] if isinstance(value, str) and _HASH.fullmatch(value) else None
        if value is not None and _fits(column.type, value, OPTIONAL_KEYS.get(column.name, ())):
            row[column.name] = value
            del holder[column.path[-1]]
    row["fields"] = json.dumps(rest, ensure_ascii=False)
    return row


def from_row(row: dict[str, Any], where: str) -> TableRecord:
    """The record of one row (``ValidationError`` naming ``where`` and the field when it is wrong)."""
    kind = row.get("record")
    if kind not in KINDS:
        raise ValidationError(f"{where}: record must be one of {', '.join(KINDS)}, got {kind!r}")
    try:
        data = parse_json(row.get("fields") or "{}")
    except ValueError as exc:
        raise ValidationError(f"{where}: fields is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValidationError(f"{where}: fields must be a JSON object")
    for column in COLUMNS:
        value = row.get(column.name)
        if not column.path or value is None:
            continue
        if kind not in column.kinds:
            raise ValidationError(f"{where}: column {column.name} is for {', '.join(column.kinds)}, not a {kind}")
        _put(data, column, value, where)
    record: TableRecord = KINDS[kind].from_dict(data, where=where)
    check = canonical(record)
    for column in COLUMNS:
        derived = column.derive is not None and kind in column.kinds and row.get(column.name) is not None
        if derived and row[column.name] != column.derive(check):  # type: ignore[misc]
            raise ValidationError(f"{where}: {column.name} disagrees with the record (a derived column)")
    return record


def _put(data: dict[str, Any], column: Column, value: Any, where: str) -> None:
    holder = data
    for step in column.path[:-1]:
        holder = holder.setdefault(step, {})
        if not isinstance(holder, dict):
            raise ValidationError(f"{where}: fields.{step} must be an object")
    name = column.path[-1]
    if name in holder:
        raise ValidationError(f"{where}: {'.'.join(column.path)} is both in column {column.name} and in fields")
    if column.name == "content_hash":
        value = f"sha256:{value}"
    if isinstance(value, dict):
        optional = OPTIONAL_KEYS.get(column.name, ())
        value = {k: v for k, v in value.items() if not (k in optional and v is None)}
    holder[name] = value


# ---------------------------------------------------------------- writing


def table_bytes(records: Iterable[TableRecord], fmt: str, *, ledger: bool) -> bytes:
    """The file of ``records`` in ``fmt`` (``jsonl``, ``arrow``: Arrow IPC file, ``parquet``)."""
    if fmt == "jsonl":
        return "".join(record_line(r, ledger=ledger) + "\n" for r in records).encode("utf-8")
    if fmt not in TABLE_FORMATS:
        raise UsageError(f"unknown table format {fmt!r}; use one of {', '.join(TABLE_FORMATS)}")
    pa = pyarrow()
    schema = arrow_schema().with_metadata({"cclg.table": TABLE_SCHEMA, "cclg.view": "ledger" if ledger else "view"})
    sink = pa.BufferOutputStream()
    writer = _table_writer(pa, sink, schema, fmt)
    try:
        rows: list[dict[str, Any]] = []
        for record in records:
            rows.append(to_row(record))
            if len(rows) == BATCH_ROWS:
                writer.write_batch(pa.RecordBatch.from_pylist(rows, schema=schema))
                rows = []
        if rows or fmt == "arrow":
            writer.write_batch(pa.RecordBatch.from_pylist(rows, schema=schema))
    except (pa.ArrowException, UnicodeEncodeError) as exc:
        raise ValidationError(f"a record cannot be written as {fmt}: {exc}") from None
    finally:
        writer.close()
    return bytes(sink.getvalue())


def _table_writer(pa: Any, sink: Any, schema: Any, fmt: str) -> Any:
    if fmt == "arrow":
        return pa.ipc.new_file(sink, schema)
    parquet = importlib.import_module("pyarrow.parquet")
    return parquet.ParquetWriter(sink, schema, compression="zstd")


# ---------------------------------------------------------------- reading


def format_of(path: str | Path, fmt: str | None = None) -> str:
    """``fmt``, or the format a file name says (``.jsonl``, ``.arrow``/``.feather``/``.ipc``, ``.parquet``)."""
    if fmt is not None:
        if fmt not in TABLE_FORMATS:
            raise UsageError(f"unknown table format {fmt!r}; use one of {', '.join(TABLE_FORMATS)}")
        return fmt
    suffix = Path(path).suffix.lower()
    found = {".jsonl": "jsonl", ".arrow": "arrow", ".feather": "arrow", ".ipc": "arrow", ".parquet": "parquet"}
    if suffix not in found:
        raise UsageError(f"cannot tell the format of {Path(path).name}; say it ({', '.join(TABLE_FORMATS)})")
    return found[suffix]


def read_records(path: str | Path, fmt: str | None = None) -> Iterator[TableRecord]:
    """The records of a table file, one at a time, each checked (``ValidationError`` at the end lists
    every bad row or line). ``fmt`` defaults to the file name's (``format_of``)."""
    fmt = format_of(path, fmt)
    try:
        data = read_regular(path)
    except FileNotFoundError:
        raise UsageError(f"no such file: {path}") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    problems: list[str] = []
    rows = _jsonl_rows(data, str(path), problems) if fmt == "jsonl" else _table_rows(data, str(path), fmt)
    for where, row in rows:
        try:
            yield from_row(row, where) if fmt != "jsonl" else _from_line(row, where)
        except ValidationError as exc:
            problems.extend(exc.problems)
    if problems:
        summary = problems[0] if len(problems) == 1 else f"{len(problems)} problems in {path}: {problems[0]}"
        raise ValidationError(summary, problems)


def _jsonl_rows(data: bytes, name: str, problems: list[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    for number, raw in enumerate(data.split(b"\n"), start=1):
        where = f"{name} line {number}"
        if not raw.strip():
            continue
        try:
            value = parse_json(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            problems.append(f"{where}: not UTF-8 text (byte {exc.start})")
            continue
        except ValueError as exc:
            problems.append(f"{where}: not JSON ({getattr(exc, 'msg', exc)})")
            continue
        if not isinstance(value, dict):
            problems.append(f"{where}: must be a JSON object")
            continue
        yield where, value


def _from_line(value: dict[str, Any], where: str) -> TableRecord:
    kind = value.pop("record", "node")
    if kind not in KINDS:
        raise ValidationError(f"{where}: record must be one of {', '.join(KINDS)}, got {kind!r}")
    record: TableRecord = KINDS[kind].from_dict(value, where=where)
    return record


def _table_rows(data: bytes, name: str, fmt: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The rows of an Arrow IPC or Parquet file, a batch at a time; a column this schema does not have,
    or of another type, is a ``ValidationError``."""
    pa = pyarrow()
    try:
        source = pa.BufferReader(data)
        if fmt == "arrow":
            reader = pa.ipc.open_file(source)
            schema, batches = reader.schema, (reader.get_batch(i) for i in range(reader.num_record_batches))
        else:
            parquet = importlib.import_module("pyarrow.parquet").ParquetFile(source)
            schema, batches = parquet.schema_arrow, parquet.iter_batches(batch_size=BATCH_ROWS)
    except (pa.ArrowException, OSError) as exc:
        raise ValidationError(f"{name}: not an {'Arrow IPC' if fmt == 'arrow' else 'Parquet'} file: {exc}") from None
    expected = arrow_schema()
    wrong = [f"{name}: column {f.name!r} is not a column of a cclg table" for f in schema if f.name not in COLUMN_NAMES]
    wrong += [
        f"{name}: column {f.name!r} is {f.type}, not {expected.field(f.name).type}"
        for f in schema
        if f.name in COLUMN_NAMES and not f.type.equals(expected.field(f.name).type)
    ]
    if "record" not in schema.names:
        wrong.append(f"{name}: no column 'record' (the kind of each row)")
    if wrong:
        raise ValidationError(wrong[0] if len(wrong) == 1 else f"{len(wrong)} problems: {wrong[0]}", wrong)
    number = 0
    for batch in batches:
        for row in batch.to_pylist():
            number += 1
            yield f"{name} row {number}", row


# ---------------------------------------------------------------- a store's records, and back in


def store_records(store: Store, *, ledger: bool) -> Iterator[TableRecord]:
    """What ``cclg export --format`` writes: the effective view (current memories, by id) or, with
    ``ledger``, every record: nodes by id, patches in ledger order, edges and sessions by id."""
    from cclg.ledger import view

    nodes = store.load_nodes()
    patches = store.load_patches()
    if not ledger:
        yield from view.effective_view(nodes.values(), patches)
        return
    yield from sorted(nodes.values(), key=lambda n: n.id)
    yield from patches
    yield from sorted(store.load_edges(), key=lambda e: e.id)
    yield from sorted(store.load_sessions(), key=lambda s: s.id)


def import_table(
    store: Store, path: str | Path, fmt: str | None = None, *, force: bool = False, dry_run: bool = False
) -> dict[str, Any]:
    """Bring a table file into the store, all or nothing; returns the report.

    A file of memories only (an effective view) brings them as new memories, by ``import-jsonl``'s
    rules: untrusted at most, never pinned, current content skipped, thrown-out content refused
    unless ``force``; relations to memories neither in the file nor in the store (the history a view
    leaves out) are dropped and counted. A file holding patches, edges or sessions too (a ledger)
    is imported as a ``.cclg`` container is, checked whole first: foreign records never change
    local memories. ``dry_run`` (a ledger only) writes nothing.
    """
    records = list(read_records(path, fmt))
    name = Path(path).name
    if any(not isinstance(r, MemoryNode) for r in records):
        from cclg.intake.container import load_container, write_container
        from cclg.intake.container_import import import_container

        grouped: dict[type, list[Any]] = {cls: [] for cls in KIND_OF}
        for record in records:
            grouped[type(record)].append(record)
        text = write_container(*(grouped[cls] for cls in (MemoryNode, MemoryPatch, MemoryEdge, Session)))
        report = import_container(store, load_container(text), dry_run=dry_run)
        return {"view": "ledger", **report.to_dict()}
    if dry_run:
        raise UsageError("--dry-run reads a ledger export only; a view's import is one patch that rollback undoes")
    from cclg.intake.new_memories import import_jsonl

    nodes, known = _unknown_nodes(store, [r for r in records if isinstance(r, MemoryNode)], name)
    dropped = _drop_outside_relations(store, nodes)
    data = "".join(record_line(n, ledger=False) + "\n" for n in nodes).encode("utf-8")
    result = import_jsonl(store, data, name=name, force=force)
    return {"view": "memories", **result.to_dict(), "known": known, "relations_dropped": dropped}


def _unknown_nodes(store: Store, nodes: list[MemoryNode], name: str) -> tuple[list[MemoryNode], list[str]]:
    """(the memories whose id is new here, the ids of those the store holds already with the same
    content: an import run twice); a known id with other content is a ``ValidationError``."""
    fresh, known, differing = [], [], []
    for node in nodes:
        if not store.node_path(node.id).exists():
            fresh.append(node)
        elif store.read_node(node.id).content == node.content:
            known.append(node.id)
        else:
            differing.append(f"{name}: {node.id} is in the store with other content")
    if differing:
        raise ValidationError(
            f"{differing[0]}; nothing was imported (a --ledger export keeps both versions, as a conflict)",
            differing,
        )
    return fresh, known


def _drop_outside_relations(store: Store, nodes: list[MemoryNode]) -> int:
    """Drop, in place, relations naming a memory neither in ``nodes`` nor in the store (and the retiring
    ones, which a new memory cannot hold); returns how many were dropped."""
    from cclg.intake.new_memories import RETIRING_RELATIONS

    held = {n.id for n in nodes}
    dropped = 0
    for node in nodes:
        for kind, ids in node.relations.items():
            kept = [i for i in ids if kind not in RETIRING_RELATIONS and (i in held or store.node_path(i).exists())]
            dropped += len(ids) - len(kept)
            node.relations[kind] = kept
    return dropped
