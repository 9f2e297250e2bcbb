"""Edits of a host's configuration file as text: cclg's entries go in and come out, and every other
byte of the user's file stays as it was.

A host's settings file is the user's: its key order, indentation (tabs or spaces), line ends (LF
or CRLF), comments (TOML), blank lines and final newline. cclg never serialises one again; it
splices its own entries in and out:

- JSON: a member at the end of an object, or an element at the end of an array, laid out as the
  container's own (on one line, or one entry a line in the file's indentation and line end); and
  out again with the separator it came with. Taking out what was put in gives back the text it was
  put into, byte for byte.
- TOML: a table at the end of the file, one blank line before it (a file that ended without a
  newline still does), and a line at the top; and out again likewise.

Each function takes text that parses (the caller read it) and the caller checks that the result
parses to what it meant (``install``), so a layout these edits did not foresee is refused whole.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

JsonPath = tuple[str | int, ...]
_DECODER = json.JSONDecoder()
_SPACE = " \t\r\n"  # JSON's whitespace
_EMPTY_OBJECT = re.compile(r"\s*\{\s*\}\s*")


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


# ---------------------------------------------------------------- JSON


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in _SPACE:
        at += 1
    return at


def _children(text: str, at: int) -> tuple[list[tuple[str | int, int, int, int]], int]:
    """(key or index, where the entry starts (its key, in an object), where its value starts, where it
    ends) for each entry of the object or array opened at ``at``; and where it closes."""
    if text[at] not in "{[":
        raise ValueError("not an object or an array")
    close = "}" if text[at] == "{" else "]"
    children: list[tuple[str | int, int, int, int]] = []
    i = _skip(text, at + 1)
    while text[i] != close:
        start, key = i, len(children)
        if close == "}":
            key, i = _DECODER.raw_decode(text, i)
            i = _skip(text, _skip(text, i) + 1)  # past the colon
        value = i
        i = _DECODER.raw_decode(text, value)[1]
        children.append((key, start, value, i))
        i = _skip(text, i)
        if text[i] == ",":
            i = _skip(text, i + 1)
    return children, i


def _locate(text: str, path: JsonPath) -> int:
    """Where the value at ``path`` starts (the last of repeated keys, as ``json.loads`` reads them)."""
    at = _skip(text, 0)
    for step in path:
        found = [value for key, _, value, _ in _children(text, at)[0] if key == step]
        if not found:
            raise ValueError(f"nothing at {path!r}")
        at = found[-1]
    return at


def _layout(text: str, at: int, close: int) -> tuple[str, str]:
    """The line end and the indentation unit of the entries of the container ``text[at:close + 1]``;
    ("", "") when it is laid out on one line. An empty one takes the file's layout (a file that is
    only ``{}`` is laid out one entry a line); the unit is that of the file's first indented line."""
    inside = text[at + 1 : close]
    if inside.strip(_SPACE):
        one_line = "\n" not in inside
    else:
        one_line = "\n" not in text.strip() and not _EMPTY_OBJECT.fullmatch(text)
    if one_line:
        return "", ""
    found = re.search(r"\n([ \t]+)\S", text)
    return _newline(text), found.group(1) if found else "  "


def _render(value: Any, newline: str, unit: str, depth: int) -> str:
    """``value`` as JSON for an entry at ``depth`` (on one line when ``newline`` is empty)."""
    if not newline:
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, indent=unit, ensure_ascii=False).replace("\n", newline + unit * depth)


def json_insert(text: str, path: JsonPath, key: str | None, value: Any) -> str:
    """``text`` with ``value`` added at the end of the object at ``path`` as its member ``key``, or
    (``key`` None) at the end of the array at ``path``."""
    at = _locate(text, path)
    children, close = _children(text, at)
    newline, unit = _layout(text, at, close)
    depth = len(path) + 1
    entry = _render(value, newline, unit, depth)
    if key is not None:
        entry = f"{json.dumps(key, ensure_ascii=False)}: {entry}"
    if not children:
        lead, outer = (newline + unit * depth, newline + unit * (depth - 1)) if newline else ("", "")
        return text[: at + 1] + lead + entry + outer + text[at + 1 :]
    start, end = children[-1][1], children[-1][3]
    gap = text[len(text[:start].rstrip(_SPACE)) : start]  # the whitespace the last entry came with
    if len(children) == 1 and "\n" not in gap:
        gap = " "
    return text[:end] + "," + gap + entry + text[end:]


def json_replace(text: str, path: JsonPath, value: Any) -> str:
    """``text`` with the value at ``path`` replaced by ``value``."""
    parent = _locate(text, path[:-1])
    newline, unit = _layout(text, parent, _children(text, parent)[1])
    at = _locate(text, path)
    end = _DECODER.raw_decode(text, at)[1]
    return text[:at] + _render(value, newline, unit, len(path)) + text[end:]


def json_remove(text: str, path: JsonPath) -> str:
    """``text`` without the member or element at ``path``, and the separator it came with (taking out
    what ``json_insert`` put in gives back the text it was put into)."""
    at = _locate(text, path[:-1])
    children, close = _children(text, at)
    index = [n for n, child in enumerate(children) if child[0] == path[-1]][-1]
    start, end = children[index][1], children[index][3]
    if index > 0:
        return text[: children[index - 1][3]] + text[end:]
    if len(children) > 1:
        return text[:start] + text[children[1][1] :]
    newline, unit = _layout(text, at, close)
    outer = newline + unit * (len(path) - 1) if newline else ""
    rest = text[end:]
    return text[: at + 1] + (rest[len(outer) :] if outer and rest.startswith(outer) else rest)


# ---------------------------------------------------------------- TOML


def _lines(text: str) -> list[str]:
    """The lines of ``text``, each with its line end (TOML's are LF and CRLF only)."""
    return re.findall(r"[^\n]*\n|[^\n]+\Z", text)


def _is_header(line: str) -> bool:
    return line.lstrip().startswith("[")


def toml_append_table(text: str, lines: list[str]) -> str:
    """``text`` with a table (its header and key lines) at the end, one blank line before it; a file
    that ended without a newline still does."""
    newline = _newline(text)
    block = newline.join(lines)
    if not text:
        return block + newline
    if text.endswith("\n"):
        return text + newline + block + newline
    return text + newline + newline + block


def toml_remove_tables(text: str, ours: Callable[[str], bool]) -> str:
    """``text`` without each table whose header line ``ours`` accepts, and the blank line before it
    (``toml_append_table`` put it there). A table runs to the next header ``ours`` does not accept,
    less the blank and comment lines just before that header: they belong to what follows."""
    lines, kept = _lines(text), []
    i = 0
    while i < len(lines):
        if not (_is_header(lines[i]) and ours(lines[i])):
            kept.append(lines[i])
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not (_is_header(lines[end]) and not ours(lines[end])):
            end += 1
        while end > i + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
            end -= 1
        if kept and not kept[-1].strip():
            kept.pop()
        if end == len(lines) and not lines[-1].endswith("\n") and kept:
            kept[-1] = kept[-1].rstrip("\n").removesuffix("\r")  # the file ended without a newline
        i = end
    return "".join(kept)


def toml_prepend_line(text: str, line: str) -> str:
    return line + _newline(text) + text


def toml_remove_line(text: str, line: str) -> str:
    """``text`` without its lines that are exactly ``line``."""
    return "".join(kept for kept in _lines(text) if kept.rstrip("\r\n") != line)
