"""The portable ``.cclg`` container (``cclg.container.v0.1``, frozen as v1).

A whole ledger in one checksummed UTF-8 file that other runtimes can load::

    CCLG<TAB>0.1
    {"container": "cclg.container.v0.1", "format_id": ..., "content_sha256": ...}
    @nodes
    {one MemoryNode per line, in the record's canonical field order}
    @patches
    ...
    @edges
    ...
    @sessions
    ...

The four sections are always written, in that order, even when empty; the file
ends with one ``\\n``. ``content_sha256`` covers every line after the header,
joined with ``\\n`` (split and joined on ``\\n`` only: JSON leaves U+2028 and
the other Unicode line separators unescaped, so ``splitlines`` would cut a
record in two). The header's ``sections`` and ``counts`` say the same thing
twice on purpose: a hand-edited or truncated header disagrees with itself or
with the body. The container holds raw records only (never an effective view),
no platform auth field at any depth, and nothing of the store's folder layout.

Loading fails closed: each way a file can be wrong has its own error, and every
record problem is reported at once. Unknown header keys are ignored; an unknown
``@section`` is kept apart with a warning. The effective view of a loaded
container is ``cclg.ledger.view.effective_view`` over its nodes and patches, which
excludes every node a live retiring patch targets whatever the node's own status
says, and raises on an operation outside the closed set.

``cclg.intake.container_import.import_container`` brings a loaded container into a store.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any

from cclg import format as fmt
from cclg.core import secrets
from cclg.core.fields import parse_json
from cclg.core.files import read_regular
from cclg.core.ids import content_hash, now_iso, sha256_hex
from cclg.core.records import MemoryEdge, MemoryNode, MemoryPatch, Record, Session
from cclg.core.store import Store
from cclg.errors import UsageError, ValidationError
from cclg.ledger import view

MAGIC = "CCLG"
VERSION = "0.1"
CONTAINER_ID = "cclg.container.v0.1"
SECTIONS = ("nodes", "patches", "edges", "sessions")
# The header's ``versions``, under the reference implementation's names for the record kinds.
RECORD_VERSIONS = {
    "memory_node": fmt.NODE_SCHEMA,
    "memory_patch": fmt.PATCH_SCHEMA,
    "edge": fmt.EDGE_SCHEMA,
    "session": fmt.SESSION_SCHEMA,
}
SINGULAR = {"nodes": "node", "patches": "patch", "edges": "edge", "sessions": "session"}
HEADER_KEYS = ("container", "format_id", "versions", "sections", "counts", "generated_at", "content_sha256")


class ContainerError(ValidationError):
    """A ``.cclg`` file that must not be trusted (exit code 4)."""


class Container(Record):
    """A loaded container: its header, its records, and what a reader should know."""

    def __init__(
        self,
        header: dict[str, Any],
        nodes: list[MemoryNode],
        patches: list[MemoryPatch],
        edges: list[MemoryEdge],
        sessions: list[Session],
        unknown_sections: dict[str, list[str]],
        warnings: list[str],
    ) -> None:
        self.header = header
        self.nodes = nodes
        self.patches = patches
        self.edges = edges
        self.sessions = sessions
        self.unknown_sections = unknown_sections  # section name -> its lines, unread
        self.warnings = warnings

    def counts(self) -> dict[str, int]:
        return {name: len(getattr(self, name)) for name in SECTIONS}

    def effective_view(self, session_id: str | None = None) -> list[MemoryNode]:
        """The memories that are current truth (for ``session_id``, with its overlay), sorted by id."""
        return view.effective_view(self.nodes, self.patches, session_id=session_id)

    def describe(self, session_id: str | None = None) -> dict[str, Any]:
        """What ``cclg open`` shows: header, counts, warnings, and the effective view's ids."""
        return {
            "header": self.header,
            "counts": self.counts(),
            "unknown_sections": {name: len(lines) for name, lines in self.unknown_sections.items()},
            "warnings": self.warnings,
            "session_id": session_id,
            "effective_view_node_ids": [node.id for node in self.effective_view(session_id)],
        }


# ---------------------------------------------------------------- writing


def write_container(
    nodes: Iterable[MemoryNode],
    patches: Iterable[MemoryPatch] = (),
    edges: Iterable[MemoryEdge] = (),
    sessions: Iterable[Session] = (),
    *,
    generated_at: str | None = None,
) -> str:
    """The text of a container holding these records, in the order given."""
    sections: dict[str, list[Any]] = {
        "nodes": list(nodes),
        "patches": list(patches),
        "edges": list(edges),
        "sessions": list(sessions),
    }
    body: list[str] = []
    for name in SECTIONS:
        body.append(f"@{name}")
        for record in sections[name]:
            data = record.to_dict()
            _refuse_auth_keys(data, f"@{name} {record.id}")
            body.append(json.dumps(data, ensure_ascii=False))
    counts = {name: len(sections[name]) for name in SECTIONS}
    header = {
        "container": CONTAINER_ID,
        "format_id": fmt.FORMAT_ID,
        "versions": dict(RECORD_VERSIONS),
        "sections": [{"name": name, "count": counts[name]} for name in SECTIONS],
        "counts": counts,
        "generated_at": generated_at or now_iso(),
        "content_sha256": sha256_hex("\n".join(body).encode("utf-8")),
    }
    return "\n".join([f"{MAGIC}\t{VERSION}", json.dumps(header, ensure_ascii=False), *body]) + "\n"


def export_store(store: Store, session_ids: Iterable[str] | None = None) -> str:
    """The store's whole ledger as a container. ``session_ids`` narrows only ``@sessions``:
    nodes, patches and edges always travel whole, since they refer to each other."""
    sessions = store.load_sessions()
    if session_ids is not None:
        wanted = set(session_ids)
        missing = wanted - {s.id for s in sessions}
        if missing:
            raise UsageError(f"no session {', '.join(sorted(missing))} in {store.root}")
        sessions = [s for s in sessions if s.id in wanted]
    nodes = sorted(store.load_nodes().values(), key=lambda n: n.id)
    edges = sorted(store.load_edges(), key=lambda e: e.id)
    sessions = sorted(sessions, key=lambda s: s.id)
    return write_container(nodes, store.load_patches(), edges, sessions)  # patches in ledger order


# ---------------------------------------------------------------- reading


def read_text(path: str) -> str:
    """A container file's text; ``-`` reads standard input. A path must name a regular file (a FIFO or a
    device is refused, never waited on or read without end)."""
    try:
        data = sys.stdin.buffer.read() if path == "-" else read_regular(path)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ContainerError(f"not a .cclg container: not UTF-8 (byte {exc.start})") from exc


def load_container(text: str, *, validate: bool = True) -> Container:
    """Check and read a container's text. ``ContainerError`` says what is wrong.

    ``validate=False`` skips the checks a reader can do without (the closed set
    of patch operations and references between records); the framing, counts,
    checksum and the auth-field guard are always checked, and a record that
    cannot be read at all is always an error.
    """
    lines = text.split("\n")
    magic, _, version = lines[0].partition("\t")
    if magic != MAGIC:
        raise ContainerError(f"not a .cclg container: line 1 is {lines[0][:40]!r}, not {MAGIC!r}, a tab and a version")
    if version != VERSION:
        raise ContainerError(f"container version {version!r} is not supported: this reader reads {VERSION} only")
    if lines[-1] != "" or len(lines) < 3:
        raise ContainerError("the container does not end with a newline: it is truncated")
    header = _read_header(lines[1])
    body = lines[2:-1]
    if sha256_hex("\n".join(body).encode("utf-8")) != header["content_sha256"]:
        raise ContainerError(
            "checksum mismatch: the body does not match the header's content_sha256 "
            "(the file was truncated, edited or damaged)"
        )
    found = _split_sections(body)
    _check_counts(header, found)
    _refuse_auth_keys(header, "the header")
    records: dict[str, list[dict[str, Any]]] = {}
    for name, numbered in found.items():
        records[name] = []
        for number, line in numbered:
            try:
                data = parse_json(line)
            except ValueError as exc:
                raise ContainerError(f"line {number} (@{name}): not JSON: {exc}") from None
            _refuse_auth_keys(data, f"line {number} (@{name})")
            records[name].append(data)
    unknown = {name: [line for _, line in found[name]] for name in found if name not in SECTIONS}
    warnings = [
        f"unknown section @{name} ({len(lines)} record(s)) kept apart, not read" for name, lines in unknown.items()
    ]
    container = _read_records(header, records, found, validate)
    container.unknown_sections, container.warnings = unknown, warnings
    return container


def _read_header(line: str) -> dict[str, Any]:
    try:
        header = parse_json(line)
    except ValueError as exc:
        raise ContainerError(f"line 2: the header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise ContainerError("line 2: the header must be a JSON object")
    missing = [key for key in HEADER_KEYS if key not in header]
    if missing:
        raise ContainerError(f"the header lacks {', '.join(missing)}")
    if header["container"] != CONTAINER_ID:
        raise ContainerError(f"the header names container {header['container']!r}, not {CONTAINER_ID!r}")
    if header["format_id"] != fmt.FORMAT_ID:
        raise ContainerError(
            f"the records are of format {header['format_id']!r}; this reader knows {fmt.FORMAT_ID} only"
        )
    if not isinstance(header["content_sha256"], str):
        raise ContainerError("the header's content_sha256 must be a string")
    if not isinstance(header["counts"], dict) or not isinstance(header["sections"], list):
        raise ContainerError("the header's counts must be an object and its sections a list")
    return header


def _split_sections(body: list[str]) -> dict[str, list[tuple[int, str]]]:
    """Section name -> its (line number, line) pairs, in file order; the known four must be
    there, once each, in their order."""
    found: dict[str, list[tuple[int, str]]] = {}
    current: list[tuple[int, str]] | None = None
    for number, line in enumerate(body, start=3):
        if line.startswith("@"):
            name = line[1:]
            if name in found:
                raise ContainerError(f"line {number}: section @{name} appears twice")
            current = found[name] = []
        elif current is None:
            raise ContainerError(f"line {number}: a record before the first @section marker")
        elif not line.strip():
            raise ContainerError(f"line {number}: a blank line inside @{list(found)[-1]}")
        else:
            current.append((number, line))
    known = [name for name in found if name in SECTIONS]
    if known != list(SECTIONS):
        raise ContainerError(
            f"the sections are {', '.join('@' + n for n in known) or 'missing'}; "
            f"a container has {', '.join('@' + n for n in SECTIONS)}, in that order"
        )
    return found


def _check_counts(header: dict[str, Any], found: dict[str, list[tuple[int, str]]]) -> None:
    listed: dict[str, Any] = {}
    for entry in header["sections"]:
        if not isinstance(entry, dict) or "name" not in entry or "count" not in entry:
            raise ContainerError("the header's sections must be objects with a name and a count")
        if entry["name"] in listed:
            raise ContainerError(f"the header's sections list @{entry['name']} twice")
        listed[entry["name"]] = entry["count"]
    for where, declared in (("counts", header["counts"]), ("sections", listed)):
        for name, count in declared.items():
            if name not in found:
                raise ContainerError(f"the header's {where} lists @{name}, which the body does not have")
            if not isinstance(count, int) or isinstance(count, bool):
                raise ContainerError(f"the header's {where} gives @{name} a count of {count!r}, not a number")
    for name, lines in found.items():
        for where, declared in (("counts", header["counts"]), ("sections", listed)):
            if name not in declared:
                raise ContainerError(f"@{name} is in the body but not in the header's {where}")
            if declared[name] != len(lines):
                raise ContainerError(
                    f"@{name} holds {len(lines)} record(s) but the header's {where} says {declared[name]!r}"
                )


def _refuse_auth_keys(value: Any, where: str) -> None:
    found = sorted(secrets.auth_keys(value))
    if found:
        raise ContainerError(f"{where} carries the auth field(s) {', '.join(found)}, which a container never holds")


def _read_records(
    header: dict[str, Any],
    records: dict[str, list[dict[str, Any]]],
    found: dict[str, list[tuple[int, str]]],
    validate: bool,
) -> Container:
    problems: list[str] = []

    def read(name: str, parse: Any) -> list[Any]:
        out = []
        for (number, _), data in zip(found[name], records[name], strict=True):
            try:
                out.append(parse(data, f"line {number} (@{name})"))
            except ValidationError as exc:
                problems.extend(exc.problems or [str(exc)])
        return out

    nodes = read("nodes", MemoryNode.from_dict)
    patches = read("patches", lambda data, where: MemoryPatch.from_dict(data, where, check_operation=validate))
    edges = read("edges", MemoryEdge.from_dict)
    sessions = read("sessions", Session.from_dict)
    if validate:
        problems += _reference_problems(nodes, patches, edges, sessions)
    if problems:
        summary = problems[0] if len(problems) == 1 else f"{len(problems)} problems in the records: {problems[0]}"
        raise ContainerError(summary, problems)
    return Container(header, nodes, patches, edges, sessions, {}, [])


def _reference_problems(
    nodes: list[MemoryNode], patches: list[MemoryPatch], edges: list[MemoryEdge], sessions: list[Session]
) -> list[str]:
    """Duplicate ids, and ids a record names that the container does not hold."""
    problems = []
    for name, records in (("nodes", nodes), ("patches", patches), ("edges", edges), ("sessions", sessions)):
        seen: set[str] = set()
        for record in records:
            if record.id in seen:
                problems.append(f"@{name}: id {record.id} appears twice")
            seen.add(record.id)
    node_ids = {n.id for n in nodes}
    patch_ids = {p.id for p in patches}
    for node in nodes:
        if node.stored_hash is not None and node.stored_hash != content_hash(node.content):
            problems.append(f"node {node.id}: metadata.content_hash does not match its content (edited by hand?)")
        for kind, others in node.relations.items():
            problems += [
                f"node {node.id}: relations.{kind} names {o}, which is not in the container"
                for o in others
                if o not in node_ids
            ]
    for patch in patches:
        for field, ids in (("target_ids", patch.target_ids), ("new_node_ids", patch.new_node_ids)):
            problems += [
                f"patch {patch.id}: {field} names {i}, which is not in the container" for i in ids if i not in node_ids
            ]
        if patch.rollback_of is not None and patch.rollback_of not in patch_ids:
            problems.append(f"patch {patch.id}: rollback_of names {patch.rollback_of}, which is not in the container")
    for edge in edges:
        for end, node_id in (("from", edge.from_id), ("to", edge.to_id)):
            if node_id not in node_ids:
                problems.append(f"edge {edge.id}: '{end}' names {node_id}, which is not in the container")
        if edge.source_patch_id is not None and edge.source_patch_id not in patch_ids:
            problems.append(f"edge {edge.id}: source_patch_id names {edge.source_patch_id}, not in the container")
    return problems
