"""Parse one source file into its definitions, references and import specs.

``parse_source`` parses the bytes with the language's tree-sitter grammar and
runs the language's tag query once over the tree, then reads the captured nodes
(never the whole tree) with the language's capture spec and import readers; all three
come from the language's record (``cclg.codegraph.languages``):

- definitions: the captured names, in source order. A definition inside a
  function body is local and dropped (nested helpers, closures, local classes);
  a function directly or indirectly inside a class-like body (class, impl,
  trait, struct, interface, module in Ruby) is a method. The line is the line of
  the name (so a decorator or annotation does not count) and the signature is
  that source line, stripped, at most 200 characters.
- references: the text of every identifier-like node, minus the file's own
  definition names, names shorter than 3 characters and the language's
  keywords.
- imports: the specs as written (see ``parse_source``).

Nothing here raises on odd input: tree-sitter recovers from syntax errors, text
is decoded with ``errors="replace"``, and an unexpected failure gives an empty
result rather than an exception.
"""

from __future__ import annotations

import threading
from typing import Any

import tree_sitter
from tree_sitter import Node, Parser, Query, QueryCursor

from cclg.codegraph.captures import CaptureSpec, node_text
from cclg.codegraph.languages import LANGUAGES, Language, grammar, query

SIGNATURE_CHARS = 200
MIN_REFERENCE_CHARS = 3

_local = threading.local()


def parse_source(language: str, source: bytes) -> dict[str, Any] | None:
    """Definitions, references and imports of one file; None if the language's grammar is unavailable.

    Returns ``{"definitions": [...], "references": [...], "imports": [...]}``:

    - definitions: ``{"name", "kind", "line", "signature"}`` in source order,
      kind one of function, class, method, type, interface, enum, constant,
      module, macro;
    - references: sorted unique identifier names used in the file that are not
      its own definitions' names;
    - imports: import specs as written, in source order, de-duplicated:
      Python ``a.b`` / ``.x`` / ``..m.y`` (``from a import b`` gives ``a`` and
      ``a.b``), JS/TS module strings, Go import paths, Rust use paths
      (``crate::a::B``) and ``mod foo``, Java ``a.b.C``, C/C++ include paths
      (``<stdio.h>`` keeps its brackets), Ruby require paths (``./x`` for
      require_relative), C# namespaces, PHP ``A\\B`` and require strings, bash
      sourced files.
    """
    lang = grammar(language)
    tag_query = query(language)
    known = LANGUAGES.get(language)
    if lang is None or tag_query is None or known is None:
        return None
    try:
        return _extract(_parser(language, lang), tag_query, known, bytes(source))
    except Exception:  # pragma: no cover - tree-sitter input we did not foresee
        return {"definitions": [], "references": [], "imports": []}


def _parser(language: str, lang: tree_sitter.Language) -> Parser:
    """A parser for the language, one per thread (parsers are not thread-safe)."""
    parsers: dict[str, Parser] | None = getattr(_local, "parsers", None)
    if parsers is None:
        parsers = _local.parsers = {}
    parser = parsers.get(language)
    if parser is None or parser.language is not lang:
        parser = Parser(lang)
        parsers[language] = parser
    return parser


def _extract(parser: Parser, tag_query: Query, language: Language, source: bytes) -> dict[str, Any]:
    tree = parser.parse(source)
    captured = QueryCursor(tag_query).captures(tree.root_node)
    spec = language.capture_spec
    found = _definitions(captured, spec)
    definitions = [
        {"name": name, "kind": kind, "line": node.start_point[0] + 1, "signature": _signature(source, node)}
        for _, (name, kind, node) in sorted(found.items())
    ]
    own = {name for name, _, _ in found.values()}
    raw_references = {source[node.start_byte : node.end_byte] for node in captured.get("ref", ())}
    references = sorted(
        name
        for name in (raw.decode("utf-8", "replace") for raw in raw_references if len(raw) >= MIN_REFERENCE_CHARS)
        if len(name) >= MIN_REFERENCE_CHARS and name not in own and name not in spec.keywords
    )
    return {"definitions": definitions, "references": references, "imports": _imports(captured, language)}


def _definitions(captured: dict[str, list[Node]], spec: CaptureSpec) -> dict[int, tuple[str, str, Node]]:
    """The definitions captured: name start byte -> (name, kind, name node).

    The first capture of a node wins. A prototype (``name.proto``) counts only where
    the file does not also define the function.
    """
    found: dict[int, tuple[str, str, Node]] = {}
    prototypes: dict[int, tuple[str, str, Node]] = {}
    for capture, nodes in captured.items():
        if not capture.startswith("name."):
            continue
        base_kind = capture[5:]
        for node in nodes:
            if node.start_byte in found or node.start_byte in prototypes:
                continue
            definition = _definition(node, base_kind, spec)
            if definition is None:
                continue
            name, kind = definition
            if base_kind == "proto":
                prototypes[node.start_byte] = (name, kind, node)
            else:
                found[node.start_byte] = (name, kind, node)
    if prototypes:
        defined = {name for name, _, _ in found.values()}
        for start, (name, kind, node) in prototypes.items():
            if name not in defined:
                found[start] = (name, kind, node)
    return found


def _imports(captured: dict[str, list[Node]], language: Language) -> list[str]:
    """The import specs of the ``import.<style>`` captures, read by the style's reader, in source order,
    each once."""
    imports: list[tuple[int, str]] = []
    for capture, nodes in captured.items():
        if capture.startswith("import."):
            reader = language.import_readers[capture[7:]]  # the record has one for every style it captures
            for node in nodes:
                imports.extend((node.start_byte, spec) for spec in reader(node) if spec)
    seen: set[str] = set()
    ordered: list[str] = []
    for _, spec in sorted(imports, key=lambda item: item[0]):
        if spec not in seen:
            seen.add(spec)
            ordered.append(spec)
    return ordered


def _definition(node: Node, kind: str, spec: CaptureSpec) -> tuple[str, str] | None:
    name = node_text(node)
    if not name or name == "_":
        return None
    if spec.refine is not None:
        refined = spec.refine(kind, node, name)
        if refined is None:
            return None
        kind = refined
    if kind == "proto":
        kind = "function"
    context = _context(node, spec)
    if context == "local":
        return None
    if context == "class":
        if kind == "function":
            kind = "method"
        elif kind == "constant" and not spec.class_constants:
            return None
    return name, kind


def _context(node: Node, spec: CaptureSpec) -> str:
    """Where a definition's name sits: "local" (in a function body), "class" (in a class-like body) or "top"."""
    position = node.start_byte
    context = "top"
    parent = node.parent
    while parent is not None:
        kind = parent.type
        in_function = kind in spec.function_scopes
        if in_function or kind in spec.class_scopes:
            body = parent.child_by_field_name("body")
            if body is not None and body.start_byte <= position < body.end_byte:
                if in_function:
                    return "local"
                context = "class"
        parent = parent.parent
    return context


def _signature(source: bytes, node: Node) -> str:
    """The source line holding the node, stripped, at most SIGNATURE_CHARS characters."""
    position = node.start_byte
    column = node.start_point[1]  # tuple access: Point.row/.column were unsafe in tree-sitter 0.26.0
    start = position - column
    if column > SIGNATURE_CHARS:  # minified or generated code: start at the definition itself
        holder = node.parent
        start = holder.start_byte if holder is not None and holder.start_byte >= start else position
    end = source.find(b"\n", position, start + 4 * SIGNATURE_CHARS)
    if end < 0:
        end = min(len(source), start + 4 * SIGNATURE_CHARS)
    return source[start:end].decode("utf-8", "replace").strip()[:SIGNATURE_CHARS].rstrip()
