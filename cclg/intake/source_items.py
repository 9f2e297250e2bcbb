"""What a source yields: items (one future memory each) and the documents they were read from.

A reader (``cclg.intake.source_kinds``) turns a file, a folder or a database into ``SourceItem``s.
Each item names the ``Document`` it came from (the text kept verbatim in ``raw/`` as its
evidence) and the lines of that text it spans, a ``key`` that stays put while the item is edited
(its file and heading path, or the record's id in the tool's own store), a suggested type and tags.

Markdown is read here once for every kind that holds it (``markdown_blocks``): a list item (with its
continuation lines), a paragraph, a table or a fenced code block is one block, under the path of
headings above it; YAML-like front matter (``front_matter``) is read without a YAML library: plain
``key: value`` pairs, ``[a, b]`` lists and ``- item`` lists, true/false.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Document:
    """A text items were read from: ``name`` (a file's path as the source shows it) and ``text``,
    kept in ``raw/`` as the items' evidence (a database's or a JSON file's rows are rendered one JSON
    line each, so that a span names the row)."""

    name: str
    text: str


@dataclass(frozen=True)
class SourceItem:
    """One item of a source: its ``content``, the ``document`` and 1-based inclusive ``lines`` it spans,
    a ``key`` stable under edits (file and heading path, or ``record_id``), a suggested ``type`` and
    ``tags``, its heading path, the tool's own id for it, a ``project`` name the tool scoped it by
    (else the project of the file's repository), and what else the tool says of it (``extra``)."""

    content: str
    document: Document
    lines: tuple[int, int]
    key: str
    type: str = "memory"
    tags: tuple[str, ...] = ()
    heading: tuple[str, ...] = ()
    record_id: str | None = None
    project: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Block:
    """A block of Markdown: its text, first and last line (1-based), the headings above it and, for a
    list item, the marker it had (``-``, ``1.``)."""

    text: str
    first: int
    last: int
    heading: tuple[str, ...]
    marker: str | None = None


_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_LIST_ITEM = re.compile(r"^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_RULE = re.compile(r"^ {0,3}([-*_])(\s*\1){2,}\s*$")


def markdown_blocks(lines: list[str], first_line: int = 1) -> list[Block]:
    """The blocks of Markdown ``lines`` (``first_line``: the number of the first), in order."""
    blocks: list[Block] = []
    headings: list[tuple[int, str]] = []
    current: list[str] = []
    start, marker, kind = 0, None, ""
    fence: str | None = None

    def close(end: int) -> None:
        nonlocal current, marker, kind
        text = "\n".join(current).strip("\n")
        if text.strip() and not (text.lstrip().startswith("<!--") and text.rstrip().endswith("-->")):
            blocks.append(Block(text, start, end, tuple(h for _, h in headings), marker))
        current, marker, kind = [], None, ""

    for offset, line in enumerate(lines):
        number = first_line + offset
        if fence is not None:
            current.append(line)
            if line.strip().startswith(fence):
                fence = None
                close(number)
            continue
        opened = _FENCE.match(line)
        if opened:
            close(number - 1)
            fence, start, kind, current = opened.group(1)[0] * 3, number, "code", [line]
            continue
        heading = _HEADING.match(line)
        if heading or not line.strip() or _RULE.match(line):
            close(number - 1)
            if heading:
                level = len(heading.group(1))
                headings = [h for h in headings if h[0] < level] + [(level, heading.group(2))]
            continue
        item = _LIST_ITEM.match(line)
        table = line.lstrip().startswith("|")
        if item:
            close(number - 1)
            start, marker, kind, current = number, item.group(2), "item", [item.group(3)]
        elif kind == "item" and line[:1].isspace():
            current.append(line.strip())
        elif table and kind != "table":
            close(number - 1)
            start, kind, current = number, "table", [line]
        elif kind in ("para", "table") or (kind == "item" and not table):
            if kind == "item":  # a lazy continuation line of a list item
                current.append(line.strip())
            else:
                current.append(line)
        else:
            close(number - 1)
            start, kind, current = number, "para", [line]
    close(first_line + len(lines) - 1)
    return blocks


def split_front_matter(lines: list[str]) -> tuple[dict[str, Any], int]:
    """The front matter at the top of ``lines`` (between ``---`` lines) and the index of the first line
    after it (0 when there is none)."""
    if not lines or lines[0].strip() != "---":
        return {}, 0
    for end in range(1, len(lines)):
        if lines[end].strip() == "---":
            return front_matter(lines[1:end]), end + 1
    return {}, 0


def front_matter(lines: list[str]) -> dict[str, Any]:
    """``key: value`` lines read as a dict: ``[a, b]`` and following ``- item`` lines are lists,
    ``true``/``false`` booleans, quotes taken off; anything else is a string."""
    values: dict[str, Any] = {}
    last: str | None = None
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        listed = re.match(r"^\s+-\s+(.*)$", line) or (re.match(r"^-\s+(.*)$", line) if last else None)
        if listed and last is not None:
            previous = values.get(last)
            values[last] = [*(previous if isinstance(previous, list) else []), _scalar(listed.group(1))]
            continue
        key, sep, value = line.partition(":")
        if not sep or not key.strip() or key[:1].isspace():
            continue
        last = key.strip()
        values[last] = _value(value.strip())
    return values


def _value(text: str) -> Any:
    if text.startswith("[") and text.endswith("]"):
        return [_scalar(part) for part in text[1:-1].split(",") if part.strip()]
    return _scalar(text) if text else ""


def _scalar(text: str) -> Any:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return text


def as_list(value: Any) -> list[str]:
    """A front matter value as a list of strings: a list as it is, a string split at commas."""
    if isinstance(value, list):
        return [str(v).strip() for v in value if str(v).strip()]
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return []
