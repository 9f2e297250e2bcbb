"""Strict reading of JSON records: every problem of a record found at once.

``FieldReader`` reads the fields of one JSON object against the shapes the
contract gives them, collecting each problem (``<file>: field 'x' must be ...``)
instead of stopping at the first; ``finish`` raises one ``ValidationError`` that
lists them all. ``ordered`` writes a record's fields in the contract's canonical
order, and ``indented_json`` gives a record the on-disk text it has always had
(``json.dumps`` with ``indent=2``) at a third less cost. The record classes
(``cclg.core.records``) are built on these. ``parse_json``
reads JSON text from outside (an import line, a container line, a record to validate, a
transcript line), and ``read_json`` a JSON stream from outside (the hook's stdin, ``cclg turn
write``'s) with a bound on its size: too deep a nesting or too large an input is a ``ValueError``
like any other bad JSON, not a crash.
"""

from __future__ import annotations

import functools
import json
import math
from json.encoder import encode_basestring  # the C encoder of a string (ensure_ascii=False)

from cclg import format as fmt
from cclg.core.ids import is_valid_id, parse_time
from cclg.errors import ValidationError

TYPE_CHECKING = False  # typing costs the hook ~4 ms of start-up; annotations are strings anyway
if TYPE_CHECKING:
    from typing import Any, BinaryIO


MAX_JSON_DEPTH = 64  # far past any record of the format, far short of Python's recursion limit


def parse_json(text: str | bytes) -> Any:
    """The JSON value of ``text``; ``ValueError`` when it is not JSON or nests arrays and objects more
    than ``MAX_JSON_DEPTH`` deep (every reader of records walks them recursively)."""
    try:
        value = json.loads(text)
    except RecursionError:  # CPython's decoder raises it cleanly, past ~1,000 levels
        raise ValueError(f"nested more than {MAX_JSON_DEPTH} levels deep") from None
    if _openings(text) <= MAX_JSON_DEPTH:  # a record has a dozen: no walk (records are read by the hundred thousand)
        return value
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        for child in children:
            if isinstance(child, dict | list):
                if depth >= MAX_JSON_DEPTH:
                    raise ValueError(f"nested more than {MAX_JSON_DEPTH} levels deep")
                stack.append((child, depth + 1))
    return value


def _openings(text: str | bytes) -> int:
    """How many ``[`` and ``{`` ``text`` holds, in strings or not: no value nests deeper."""
    if isinstance(text, str):
        return text.count("[") + text.count("{")
    return text.count(b"[") + text.count(b"{")


def read_json(stream: BinaryIO, limit: int, what: str) -> Any:
    """The JSON value ``stream`` holds, read with ``parse_json`` once its size is known to be at most
    ``limit`` bytes (never more is read); ``ValueError`` when it is larger, not UTF-8 or not JSON."""
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{what} is larger than {limit:,} bytes")
    return parse_json(data.decode("utf-8"))  # a UnicodeDecodeError is a ValueError


class FieldReader:
    """Reads fields out of one JSON object, collecting every problem found."""

    def __init__(self, data: Any, where: str, kind: str) -> None:
        self.where = where
        self.problems: list[str] = []
        if not isinstance(data, dict):
            self.problems.append(f"{where}: a {kind} record must be a JSON object")
            data = {}
        self.data: dict[str, Any] = data

    def problem(self, name: str, message: str) -> None:
        self.problems.append(f"{self.where}: field '{name}' {message}")

    def check_fields(self, kind: str) -> None:
        known = _field_names(kind)
        for name in fmt.required_fields(kind):
            if name not in self.data:
                self.problem(name, "is required but missing")
        for name in self.data:
            if name not in known:
                self.problem(name, "is not a field of this record")

    def finish(self) -> None:
        if self.problems:
            raise ValidationError(
                self.problems[0] if len(self.problems) == 1 else f"{len(self.problems)} problems in {self.where}",
                self.problems,
            )

    def get(self, name: str, expected: str, value: Any) -> Any:
        """Validate ``value`` against an ``expected`` shape name; returns it or a fallback."""
        if not _CHECKS[expected](value):
            self.problem(name, f"must be {_DESCRIBE[expected]}, got {_json_type(value)}")
            return _FALLBACK[expected]()
        return value

    def field(self, name: str, expected: str, default: Any = None) -> Any:
        if name not in self.data:
            return default
        return self.get(name, expected, self.data[name])

    def const(self, name: str, expected_value: str) -> str:
        value = self.data.get(name)
        if name in self.data and value != expected_value:
            self.problem(name, f"must be {expected_value!r}, got {value!r} (unknown schema version?)")
        return expected_value

    def ident(self, name: str, prefix: str, value: Any = None, nullable: bool = False) -> Any:
        if value is None and name in self.data:
            value = self.data[name]
        if value is None and nullable:
            return None
        if not is_valid_id(value, prefix):
            self.problem(name, f"must be an id starting with '{prefix}_', got {value!r}")
            return f"{prefix}_invalid"
        return value

    def id_list(self, name: str, prefix: str, value: Any) -> list[str]:
        if value == []:  # most lists of ids are empty
            return []
        items = self.get(name, "list[str]", value)
        for item in items:
            if not is_valid_id(item, prefix):
                self.problem(name, f"must list ids starting with '{prefix}_', got {item!r}")
        return list(items)

    def enum(self, name: str, vocabulary: tuple[str, ...]) -> str:
        value = self.data.get(name)
        if value not in vocabulary:
            if name in self.data:
                self.problem(name, f"must be one of {', '.join(vocabulary)}; got {value!r}")
            return vocabulary[0]
        return str(value)

    def time(self, name: str, nullable: bool = False) -> Any:
        value = self.data.get(name)
        if value is None and (nullable or name not in self.data):
            return None
        if not isinstance(value, str):
            self.problem(name, f"must be an ISO 8601 timestamp, got {_json_type(value)}")
            return None
        try:
            parse_time(value)
        except ValueError:
            self.problem(name, f"must be an ISO 8601 timestamp with a timezone, got {value!r}")
        return value

    def confidence(self, name: str) -> float:
        value = self.data.get(name, 1.0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            self.problem(name, f"must be a number from 0 to 1, got {_json_type(value)}")
            return 1.0
        if not 0.0 <= value <= 1.0:
            self.problem(name, f"must be from 0 to 1, got {value}")
        return float(value)


_CHECKS: dict[str, Any] = {  # one shape checked per read: records are read by the ten thousand
    "str": lambda v: isinstance(v, str),
    "str?": lambda v: v is None or isinstance(v, str),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
    "dict": lambda v: isinstance(v, dict),
    "list[str]": lambda v: isinstance(v, list) and (not v or all(isinstance(item, str) for item in v)),
    "list[dict]": lambda v: isinstance(v, list) and (not v or all(isinstance(item, dict) for item in v)),
}
_DESCRIBE = {
    "str": "a string",
    "str?": "a string or null",
    "int": "an integer",
    "bool": "true or false",
    "dict": "an object",
    "list[str]": "a list of strings",
    "list[dict]": "a list of objects",
}
_FALLBACK: dict[str, Any] = {
    "str": str,
    "str?": lambda: None,
    "int": int,
    "bool": bool,
    "dict": dict,
    "list[str]": list,
    "list[dict]": list,
}


@functools.cache
def _field_names(kind: str) -> frozenset[str]:
    return frozenset(fmt.canonical_order(kind))


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "an object",
    }.get(type(value), type(value).__name__)


def ordered(kind: str, values: dict[str, Any], optional: tuple[str, ...] = ()) -> dict[str, Any]:
    """Values in the contract's canonical order; ``optional`` fields are left out when None."""
    return {
        name: values[name] for name in fmt.canonical_order(kind) if not (name in optional and values.get(name) is None)
    }


def indented_json(value: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, indent=2)``, the same text: the standard library's
    encoder runs in Python when it indents, and every record written pays for it."""
    parts: list[str] = []
    _indented(value, parts, "\n")
    return "".join(parts)


def _indented(value: Any, parts: list[str], indent: str) -> None:
    if isinstance(value, str):
        parts.append(encode_basestring(value))
    elif isinstance(value, (dict, list, tuple)):
        if not value:
            parts.append("{}" if isinstance(value, dict) else "[]")
            return
        inner = indent + "  "
        separator = ("{" if isinstance(value, dict) else "[") + inner
        if isinstance(value, dict):
            for key, item in value.items():
                parts += (separator, encode_basestring(key), ": ")  # records have string keys only
                _indented(item, parts, inner)
                separator = "," + inner
        else:
            for item in value:
                parts.append(separator)
                _indented(item, parts, inner)
                separator = "," + inner
        parts += (indent, "}" if isinstance(value, dict) else "]")
    elif value is None:
        parts.append("null")
    elif value is True or value is False:
        parts.append("true" if value else "false")
    elif type(value) is int or (type(value) is float and math.isfinite(value)):
        parts.append(repr(value))
    else:  # NaN and the infinities; anything else is the TypeError json.dumps raises
        parts.append(json.dumps(value))
