"""The kinds of source cclg reads, one table: ``SOURCE_KINDS`` maps a kind's name to its reader.

A reader takes a path and yields ``SourceItem``s (``cclg.intake.source_items``). A new kind (Arrow,
Parquet) is one more row. The trust a kind's memories get is in its row: the user's own
instruction files (``claude-md``, ``cursor-rules``) are trusted; what another tool wrote (its memory
files, its database, its export) and what a plugin yields are untrusted until the user labels them.

The shapes read, as those tools write them:

- ``claude-md``: ``CLAUDE.md``, ``AGENTS.md``, ``GEMINI.md``, ``.github/copilot-instructions.md`` in
  any folder (``INSTRUCTION_FILES``); each list item or paragraph is an item under its headings;
- ``cursor-rules``: ``.cursor/rules/*.mdc``, front matter ``description``, ``globs``, ``alwaysApply``;
- ``claude-auto-memory``: Claude Code's ``~/.claude/projects/<project>/memory/``: ``MEMORY.md``, an
  index of ``- [Title](file.md) — hook`` lines, and topic files with ``name``, ``description`` and
  ``type`` (user, feedback, project, reference) in front matter; a topic file is one item, and an
  index line that points to no file is one too;
- ``codex-memories``: ``~/.codex/memories/``: ``MEMORY.md`` (blocks, each a front matter of
  ``rollout_summary_files``, ``description``, ``keywords``, then bullets) and ``memory_summary.md``
  (its ``User Profile`` and ``General Tips``); rollout summaries and raw memories are Codex's evidence;
- ``claude-mem``: its SQLite database, opened read-only: ``observations`` (title, narrative, facts,
  concepts, project) and ``session_summaries`` (what was learned);
- ``basic-memory``: a folder of notes: ``- [category] text #tag (context)`` observations and
  ``- relation [[Target]]`` relations;
- ``mem0-json``: mem0's export, a list of memories or ``{"results": [...]}`` / ``{"memories": [...]}``;
- ``jsonl``: import-jsonl's lines;
- ``plugin``: a Python entry point of the group ``cclg.sources`` (``PLUGIN_GROUP``), named by its id.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cclg.core.fields import parse_json
from cclg.errors import UsageError, ValidationError
from cclg.intake.source_items import Document, SourceItem, as_list, markdown_blocks, split_front_matter

Reader = Callable[[Path], Iterable[SourceItem]]

INSTRUCTION_FILES = ("CLAUDE.md", "AGENTS.md", "GEMINI.md")  # in any folder
COPILOT_FILE = ".github/copilot-instructions.md"
SKIPPED_FOLDERS = frozenset({".git", "node_modules", ".venv", "venv", "__pycache__", ".tox", "dist", "build"})
MAX_FILE_BYTES = 4 * 1024 * 1024  # an instruction file larger than this is not one


@dataclass(frozen=True)
class SourceKind:
    """A row of ``SOURCE_KINDS``: the reader, the trust its memories get, whether its location is a
    path (a plugin's is its id) and a line for ``--help``."""

    name: str
    read: Reader
    trust: str
    summary: str
    is_path: bool = True


# ---------------------------------------------------------------- instruction files


def instruction_files(folder: Path) -> list[Path]:
    """The instruction files under ``folder`` (``INSTRUCTION_FILES`` in any folder, and copilot's),
    sorted; folders of tools and dependencies (``SKIPPED_FOLDERS``) and other hidden ones but
    ``.github`` and ``.claude`` are not entered."""
    found = []
    for top, folders, files in os.walk(folder):
        folders[:] = sorted(
            f for f in folders if f not in SKIPPED_FOLDERS and (not f.startswith(".") or f in (".github", ".claude"))
        )
        here = Path(top)
        found += [here / name for name in INSTRUCTION_FILES if name in files]
        if here.name == ".github" and "copilot-instructions.md" in files:
            found.append(here / "copilot-instructions.md")
    return sorted(p for p in found if p.is_file() and not p.is_symlink())


def read_text(path: Path) -> str:
    """A regular file's text (UTF-8; a BOM and CRLF line ends dropped); ``UsageError`` for anything else."""
    if not path.is_file():
        raise UsageError(f"{path} is not a regular file")
    data = path.read_bytes()[: MAX_FILE_BYTES + 1]
    if len(data) > MAX_FILE_BYTES:
        raise UsageError(f"{path} is over {MAX_FILE_BYTES:,} bytes; not read")
    try:
        return data.decode("utf-8-sig").replace("\r\n", "\n")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def markdown_items(document: Document, kind_type: str, start: int = 0, **extra: Any) -> Iterator[SourceItem]:
    """Each block of ``document``'s Markdown from line index ``start``, as an item keyed by its file and
    heading path."""
    lines = document.text.split("\n")
    for block in markdown_blocks(lines[start:], first_line=start + 1):
        yield SourceItem(
            content=block.text,
            document=document,
            lines=(block.first, block.last),
            key=f"{document.name}#{'/'.join(block.heading)}",
            type=kind_type,
            heading=block.heading,
            extra=dict(extra),
        )


def _files(path: Path, find: Callable[[Path], list[Path]]) -> list[tuple[Path, str]]:
    """(file, name shown) for a file or for the files ``find`` finds in a folder (names relative to it)."""
    if path.is_dir():
        return [(f, f.relative_to(path).as_posix()) for f in find(path)]
    if path.is_file():
        return [(path, path.name)]
    raise UsageError(f"{path}: no such file or folder")


def read_claude_md(path: Path) -> Iterator[SourceItem]:
    """``claude-md``: the items of an instruction file, or of every one found in a folder."""
    for file, name in _files(path, instruction_files):
        yield from markdown_items(Document(name, read_text(file)), "constraint")


def read_cursor_rules(path: Path) -> Iterator[SourceItem]:
    """``cursor-rules``: ``.cursor/rules/**/*.mdc`` of a repository (or of that folder, or one file)."""

    def rules(folder: Path) -> list[Path]:
        base = folder / ".cursor" / "rules" if (folder / ".cursor" / "rules").is_dir() else folder
        return sorted(p for p in base.rglob("*.mdc") if p.is_file() and not p.is_symlink())

    for file, name in _files(path, rules):
        document = Document(name, read_text(file))
        meta, start = split_front_matter(document.text.split("\n"))
        globs = as_list(meta.get("globs"))
        cursor = {
            "description": meta.get("description") or None,
            "globs": globs,
            "alwaysApply": bool(meta.get("alwaysApply")),
        }
        tags = (["always-apply"] if cursor["alwaysApply"] else []) + [f"glob:{g}" for g in globs]
        for item in markdown_items(document, "constraint", start, cursor=cursor):
            yield _with(item, tags=tuple(tags))


def _with(item: SourceItem, **changes: Any) -> SourceItem:
    values = {**item.__dict__, **changes}
    return SourceItem(**values)


# ---------------------------------------------------------------- other tools' memory files

AUTO_MEMORY_TYPES = {
    "user": "identity_fact",
    "feedback": "correction",
    "project": "project_fact",
    "reference": "artifact_reference",
}


def read_claude_auto_memory(path: Path) -> Iterator[SourceItem]:
    """``claude-auto-memory``: each topic file of the memory folder is one item (its body, typed by its
    front matter), and each ``MEMORY.md`` line that points to no topic file is one too."""
    folder = path if path.is_dir() else path.parent
    if not folder.is_dir():
        raise UsageError(f"{path}: no such folder")
    topics = sorted(p for p in folder.glob("*.md") if p.name != "MEMORY.md" and p.is_file() and not p.is_symlink())
    for file in topics:
        document = Document(file.name, read_text(file))
        lines = document.text.split("\n")
        meta, start = split_front_matter(lines)
        body = [i for i in range(start, len(lines)) if lines[i].strip()]
        if not body:
            continue
        kind = str(meta.get("type") or "")
        yield SourceItem(
            content="\n".join(lines[body[0] : body[-1] + 1]),
            document=document,
            lines=(body[0] + 1, body[-1] + 1),
            key=file.name,
            type=AUTO_MEMORY_TYPES.get(kind, "memory"),
            tags=(kind,) if kind else (),
            record_id=str(meta.get("name") or file.stem),
            extra={"name": meta.get("name"), "description": meta.get("description")},
        )
    index = folder / "MEMORY.md"
    if index.is_file():
        document = Document("MEMORY.md", read_text(index))
        names = {p.name for p in topics}
        for item in markdown_items(document, "memory"):
            if not any(f"({name})" in item.content for name in names):
                yield item


def read_codex_memories(path: Path) -> Iterator[SourceItem]:
    """``codex-memories``: the bullets of ``MEMORY.md``'s blocks (under each block's description) and the
    ``User Profile`` and ``General Tips`` of ``memory_summary.md``."""
    folder = path if path.is_dir() else path.parent
    handbook = folder / "MEMORY.md"
    if handbook.is_file():
        yield from _codex_handbook(Document("MEMORY.md", read_text(handbook)))
    summary = folder / "memory_summary.md"
    if summary.is_file():
        for item in markdown_items(Document("memory_summary.md", read_text(summary)), "memory"):
            if item.heading and item.heading[0].lower() in ("user profile", "general tips"):
                yield item
    if not handbook.is_file() and not summary.is_file():
        raise UsageError(f"{folder}: no MEMORY.md or memory_summary.md (is it Codex's memories folder?)")


def _codex_handbook(document: Document) -> Iterator[SourceItem]:
    lines = document.text.split("\n")
    starts = [i for i, line in enumerate(lines) if line.strip() == "---"]
    headers = [(a, b) for a, b in zip(starts[::2], starts[1::2], strict=False)]  # (open, close) of each header
    if not headers:
        yield from markdown_items(document, "memory")
        return
    for number, (opened, closed) in enumerate(headers):
        meta, _ = split_front_matter(lines[opened : closed + 1])
        end = headers[number + 1][0] if number + 1 < len(headers) else len(lines)
        description = str(meta.get("description") or f"block {number + 1}")
        keywords = tuple(as_list(meta.get("keywords")))
        for block in markdown_blocks(lines[closed + 1 : end], first_line=closed + 2):
            yield SourceItem(
                content=block.text,
                document=document,
                lines=(block.first, block.last),
                key=f"MEMORY.md#{description}",
                heading=(description, *block.heading),
                tags=keywords,
            )


def read_basic_memory(path: Path) -> Iterator[SourceItem]:
    """``basic-memory``: the observations (``- [category] text``) and relations (``- relation [[Target]]``)
    of each note of a folder (or one note)."""
    import re

    observation = re.compile(r"^\[([^\]]+)\]\s+(.+)$")
    relation = re.compile(r"^([\w-]+)\s+\[\[([^\]]+)\]\](.*)$")
    notes = lambda folder: sorted(p for p in folder.rglob("*.md") if p.is_file() and not p.is_symlink())  # noqa: E731
    for file, name in _files(path, notes):
        document = Document(name, read_text(file))
        meta, start = split_front_matter(document.text.split("\n"))
        title = str(meta.get("title") or file.stem)
        note_tags = tuple(as_list(meta.get("tags")))
        for item in markdown_items(document, "memory", start):
            if item.content.startswith("[") and (found := observation.match(item.content)):
                category, text = found.group(1), found.group(2)
                hashtags = tuple(w[1:] for w in text.split() if w.startswith("#") and len(w) > 1)
                kind = {"decision": "project_decision", "preference": "preference"}.get(category, "memory")
                yield _with(
                    item, content=text, type=kind, tags=(category, *note_tags, *hashtags), key=f"{name}#{title}"
                )
            elif found := relation.match(item.content):
                text = f"{title} {found.group(1).replace('_', ' ')} {found.group(2)}{found.group(3)}".strip()
                yield _with(item, content=text, type="relationship", tags=note_tags, key=f"{name}#{title}#relations")


# ---------------------------------------------------------------- other tools' stores


def _rows_document(name: str, rows: list[dict[str, Any]]) -> Document:
    """Rows rendered one JSON line each: the evidence of a database's or an export's items."""
    return Document(name, "\n".join(json.dumps(row, sort_keys=True, ensure_ascii=False) for row in rows) + "\n")


def read_claude_mem(path: Path) -> Iterator[SourceItem]:
    """``claude-mem``: its database, opened read-only (it is never written): each observation, and what
    each session summary says was learned."""
    if not path.is_file():
        raise UsageError(f"{path} is not a file (claude-mem's database is ~/.claude-mem/claude-mem.db)")
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise UsageError(f"{path}: cannot open read-only: {exc}") from None
    try:
        observations = _table(db, "observations")
        summaries = _table(db, "session_summaries")
    except sqlite3.DatabaseError as exc:
        raise ValidationError(f"{path}: not claude-mem's database ({exc})") from None
    finally:
        db.close()
    document = _rows_document(
        path.name,
        [{"table": "observations", **r} for r in observations]
        + [{"table": "session_summaries", **r} for r in summaries],
    )
    for line, row in enumerate(observations, start=1):
        parts = [row.get("title"), row.get("narrative") or row.get("text")]
        facts = _json_list(row.get("facts"))
        content = "\n".join([str(p) for p in parts if p] + [f"- {f}" for f in facts])
        if content.strip():
            kind = {"decision": "project_decision", "bugfix": "correction"}.get(str(row.get("type")), "memory")
            yield SourceItem(
                content,
                document,
                (line, line),
                f"observations/{row.get('id')}",
                kind,
                tuple(_json_list(row.get("concepts"))),
                record_id=f"observations/{row.get('id')}",
                project=row.get("project") or None,
            )
    for line, row in enumerate(summaries, start=len(observations) + 1):
        if str(row.get("learned") or "").strip():
            yield SourceItem(
                str(row["learned"]),
                document,
                (line, line),
                f"session_summaries/{row.get('id')}",
                record_id=f"session_summaries/{row.get('id')}",
                project=row.get("project") or None,
            )


def _table(db: sqlite3.Connection, table: str) -> list[dict[str, Any]]:
    cursor = db.execute(f"SELECT * FROM {table} ORDER BY id")  # a fixed table name, never the user's
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _json_list(value: Any) -> list[str]:
    if not isinstance(value, str) or not value.strip():
        return []
    try:
        parsed = json.loads(value)
    except ValueError:
        return [value]
    return [str(v) for v in parsed] if isinstance(parsed, list) else [str(parsed)]


def read_mem0_json(path: Path) -> Iterator[SourceItem]:
    """``mem0-json``: mem0's export: a list of memories, or an object holding one under ``results`` or
    ``memories``; each has its text under ``memory`` (or ``content``/``text``) and an ``id``."""
    try:
        data = parse_json(read_text(path))
    except ValueError as exc:
        raise ValidationError(f"{path}: not JSON ({exc})") from None
    records = data.get("results", data.get("memories")) if isinstance(data, dict) else data
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise ValidationError(f"{path}: not a mem0 export (a list of memories, or results/memories holding one)")
    document = _rows_document(path.name, records)
    for line, record in enumerate(records, start=1):
        text = record.get("memory", record.get("content", record.get("text")))
        if not isinstance(text, str) or not text.strip():
            continue
        tags = [str(c) for c in record.get("categories") or [] if isinstance(c, str)]
        who = [f"user:{record['user_id']}"] if isinstance(record.get("user_id"), str) else []
        rid = str(record.get("id") or line)
        yield SourceItem(text, document, (line, line), f"mem0/{rid}", tags=(*tags, *who), record_id=rid)


def read_jsonl(path: Path) -> Iterator[SourceItem]:
    """``jsonl``: import-jsonl's lines (short lines or full records, checked by the same parser)."""
    from cclg.intake.new_memories import parse_import_line

    document = Document(path.name, read_text(path))
    problems = []
    for number, line in enumerate(document.text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            node = parse_import_line(parse_json(line), number, path.name)
        except ValidationError as exc:
            problems += exc.problems or [str(exc)]
            continue
        except ValueError as exc:
            problems.append(f"{path.name} line {number}: not JSON ({exc})")
            continue
        rid = node.key or (node.id if '"schema_version"' in line else None)
        yield SourceItem(
            node.content,
            document,
            (number, number),
            f"{path.name}#{rid or ''}",
            node.type,
            tuple(node.tags),
            record_id=rid,
            project=node.scope.project,
        )
    if problems:
        raise ValidationError(f"{len(problems)} bad line(s) in {path.name}; nothing was read", problems)


# ---------------------------------------------------------------- plugins

PLUGIN_GROUP = "cclg.sources"
PLUGIN_FIELDS = ("content", "key", "id", "type", "tags", "file", "lines", "project")


def plugins() -> dict[str, Any]:
    """The installed source plugins by id: entry points of ``PLUGIN_GROUP``, each an object with an
    ``id`` and a ``load()`` (or a class or factory making one)."""
    from importlib.metadata import entry_points

    found: dict[str, Any] = {}
    for point in entry_points(group=PLUGIN_GROUP):
        try:
            value = point.load()
            plugin = value() if isinstance(value, type) or not hasattr(value, "load") else value
        except Exception as exc:  # a plugin's bug is its own: reported, never a crash of cclg
            raise UsageError(f"source plugin {point.name} ({point.value}) failed to load: {exc!r}") from None
        if not callable(getattr(plugin, "load", None)):
            raise UsageError(f"source plugin {point.name} ({point.value}) has no load()")
        found[str(getattr(plugin, "id", point.name))] = plugin
    return found


def read_plugin(path: Path) -> Iterator[SourceItem]:
    """``plugin``: the records the plugin named ``path`` (its id) yields; each is a mapping (or an object)
    with ``content`` and, optionally, the other ``PLUGIN_FIELDS``. What it says of its trust is not read."""
    plugin_id = str(path)
    found = plugins()
    if plugin_id not in found:
        raise UsageError(f"no source plugin {plugin_id!r}; installed: {', '.join(sorted(found)) or 'none'}")
    try:
        records = [_record(r) for r in found[plugin_id].load()]
    except Exception as exc:  # a plugin's bug is its own: reported, never a crash of cclg
        raise UsageError(f"source plugin {plugin_id} failed: {exc!r}") from None
    document = _rows_document(
        f"plugin-{plugin_id}.jsonl", [{k: v for k, v in r.items() if k in PLUGIN_FIELDS} for r in records]
    )
    for line, record in enumerate(records, start=1):
        content = record.get("content")
        if not isinstance(content, str) or not content.strip():
            raise ValidationError(f"source plugin {plugin_id}: record {line} has no content")
        rid = record.get("id", record.get("key"))
        yield SourceItem(
            content,
            document,
            (line, line),
            f"{plugin_id}#{rid if rid is not None else ''}",
            str(record.get("type") or "memory"),
            tuple(str(t) for t in record.get("tags") or ()),
            record_id=None if rid is None else str(rid),
            project=record.get("project"),
        )


def _record(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    return {name: getattr(value, name) for name in PLUGIN_FIELDS if hasattr(value, name)}


SOURCE_KINDS: dict[str, SourceKind] = {
    kind.name: kind
    for kind in (
        SourceKind("claude-md", read_claude_md, "trusted", "CLAUDE.md, AGENTS.md, GEMINI.md, copilot instructions"),
        SourceKind("cursor-rules", read_cursor_rules, "trusted", ".cursor/rules/*.mdc of a repository"),
        SourceKind("claude-auto-memory", read_claude_auto_memory, "untrusted", "Claude Code's auto memory folder"),
        SourceKind("codex-memories", read_codex_memories, "untrusted", "Codex's memories folder (~/.codex/memories)"),
        SourceKind("claude-mem", read_claude_mem, "untrusted", "claude-mem's SQLite database, read-only"),
        SourceKind("basic-memory", read_basic_memory, "untrusted", "a basic-memory folder of notes"),
        SourceKind("mem0-json", read_mem0_json, "untrusted", "mem0's JSON export"),
        SourceKind("jsonl", read_jsonl, "untrusted", "import-jsonl lines"),
        SourceKind("plugin", read_plugin, "untrusted", f"a {PLUGIN_GROUP} entry point (PATH: its id)", is_path=False),
    )
}


def source_kind(name: str) -> SourceKind:
    """The row of ``SOURCE_KINDS`` named ``name``; ``UsageError`` naming the kinds otherwise."""
    if name not in SOURCE_KINDS:
        raise UsageError(f"unknown source kind {name!r}; use one of {', '.join(SOURCE_KINDS)}")
    return SOURCE_KINDS[name]
