"""Parse one source file into its definitions, references and import specs.

``parse_source`` parses the bytes with the language's tree-sitter grammar and
runs the language's tag query (``cclg.codegraph.languages``) once over the
tree; everything below works on the captured nodes, never on the whole tree:

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

import keyword
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tree_sitter import Language, Node, Parser, Query, QueryCursor

from cclg.codegraph.languages import grammar, query

SIGNATURE_CHARS = 200
MIN_REFERENCE_CHARS = 3

_ALL_CAPS = re.compile(r"_*[A-Z][A-Z0-9_]+")
_JS_FUNCTION_VALUES = frozenset({"arrow_function", "function_expression", "function", "generator_function"})

Refine = Callable[[str, Node, str], str | None]
ImportReader = Callable[[Node], list[str]]


@dataclass(frozen=True, slots=True)
class _Rules:
    """How to read one language's captures."""

    function_scopes: frozenset[str]  # a definition inside one of these bodies is local
    class_scopes: frozenset[str]  # a function inside one of these bodies is a method
    class_constants: bool  # constants may live in class bodies (Java, C#, PHP, Ruby)
    keywords: frozenset[str]
    refine: Refine | None = None  # (kind, name node, name) -> kind, or None to drop


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
    rules = _RULES.get(language)
    if lang is None or tag_query is None or rules is None:
        return None
    try:
        return _extract(_parser(language, lang), tag_query, rules, bytes(source))
    except Exception:  # pragma: no cover - tree-sitter input we did not foresee
        return {"definitions": [], "references": [], "imports": []}


def _parser(language: str, lang: Language) -> Parser:
    """A parser for the language, one per thread (parsers are not thread-safe)."""
    parsers: dict[str, Parser] | None = getattr(_local, "parsers", None)
    if parsers is None:
        parsers = _local.parsers = {}
    parser = parsers.get(language)
    if parser is None or parser.language is not lang:
        parser = Parser(lang)
        parsers[language] = parser
    return parser


def _extract(parser: Parser, tag_query: Query, rules: _Rules, source: bytes) -> dict[str, Any]:
    tree = parser.parse(source)
    captures = QueryCursor(tag_query).captures(tree.root_node)

    found: dict[int, tuple[str, str, Node]] = {}  # name start byte -> (name, kind, node)
    prototypes: dict[int, tuple[str, str, Node]] = {}
    raw_references: set[bytes] = set()
    imports: list[tuple[int, str]] = []
    for capture, nodes in captures.items():
        if capture == "ref":
            raw_references = {source[node.start_byte : node.end_byte] for node in nodes}
        elif capture.startswith("name."):
            base_kind = capture[5:]
            for node in nodes:
                if node.start_byte in found or node.start_byte in prototypes:
                    continue
                definition = _definition(node, base_kind, rules)
                if definition is None:
                    continue
                name, kind = definition
                if base_kind == "proto":
                    prototypes[node.start_byte] = (name, kind, node)
                else:
                    found[node.start_byte] = (name, kind, node)
        elif capture.startswith("import."):
            reader = _IMPORT_READERS.get(capture[7:])
            if reader is None:
                continue
            for node in nodes:
                imports.extend((node.start_byte, spec) for spec in reader(node) if spec)

    if prototypes:
        # A prototype is a definition only where the file does not also define the function.
        defined = {name for name, _, _ in found.values()}
        for start, (name, kind, node) in prototypes.items():
            if name not in defined:
                found[start] = (name, kind, node)

    definitions = [
        {"name": name, "kind": kind, "line": node.start_point[0] + 1, "signature": _signature(source, node)}
        for _, (name, kind, node) in sorted(found.items())
    ]
    own = {name for name, _, _ in found.values()}
    references = sorted(
        name
        for name in (raw.decode("utf-8", "replace") for raw in raw_references if len(raw) >= MIN_REFERENCE_CHARS)
        if len(name) >= MIN_REFERENCE_CHARS and name not in own and name not in rules.keywords
    )
    seen: set[str] = set()
    ordered: list[str] = []
    for _, spec in sorted(imports, key=lambda item: item[0]):
        if spec not in seen:
            seen.add(spec)
            ordered.append(spec)
    return {"definitions": definitions, "references": references, "imports": ordered}


def _definition(node: Node, kind: str, rules: _Rules) -> tuple[str, str] | None:
    name = _text(node)
    if not name or name == "_":
        return None
    if rules.refine is not None:
        refined = rules.refine(kind, node, name)
        if refined is None:
            return None
        kind = refined
    if kind == "proto":
        kind = "function"
    context = _context(node, rules)
    if context == "local":
        return None
    if context == "class":
        if kind == "function":
            kind = "method"
        elif kind == "constant" and not rules.class_constants:
            return None
    return name, kind


def _context(node: Node, rules: _Rules) -> str:
    """Where a definition's name sits: "local" (in a function body), "class" (in a class-like body) or "top"."""
    position = node.start_byte
    context = "top"
    parent = node.parent
    while parent is not None:
        kind = parent.type
        in_function = kind in rules.function_scopes
        if in_function or kind in rules.class_scopes:
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


def _text(node: Node | None) -> str:
    if node is None:
        return ""
    raw = node.text
    return "" if raw is None else raw.decode("utf-8", "replace")


def _compact(node: Node | None) -> str:
    """Node text without whitespace (dotted names may be split over lines)."""
    return "".join(_text(node).split())


# ---------------------------------------------------------------------------
# Refinements of captured kinds.


def _refine_python(kind: str, node: Node, name: str) -> str | None:
    if kind == "constant" and not _ALL_CAPS.fullmatch(name):
        return None
    return kind


def _refine_js(kind: str, node: Node, name: str) -> str | None:
    if kind != "constant":
        return kind
    declarator = node.parent
    declaration = None if declarator is None else declarator.parent
    if declarator is None or declaration is None:
        return None
    value = declarator.child_by_field_name("value")
    if value is not None and value.type in _JS_FUNCTION_VALUES:
        return "function"
    first = declaration.child(0)
    if declaration.type != "lexical_declaration" or first is None or first.type != "const":
        return None  # let/var: not a constant
    if value is not None and (value.type == "await_expression" or _is_require(value)):
        return None  # const fs = require("fs") is an import, not a definition
    return "constant"


def _is_require(value: Node) -> bool:
    while value.type == "member_expression":  # require("x").y
        inner = value.child_by_field_name("object")
        if inner is None:
            return False
        value = inner
    if value.type != "call_expression":
        return False
    function = value.child_by_field_name("function")
    return function is not None and (function.type == "import" or _text(function) == "require")


def _refine_go(kind: str, node: Node, name: str) -> str | None:
    if kind != "gotype":
        return kind
    spec = node.parent
    shape = None if spec is None else spec.child_by_field_name("type")
    return "interface" if shape is not None and shape.type == "interface_type" else "type"


def _refine_java(kind: str, node: Node, name: str) -> str | None:
    if kind == "constant" and not _ALL_CAPS.fullmatch(name):
        return None
    return kind


# ---------------------------------------------------------------------------
# Import readers: capture suffix -> spec strings of one captured node.


def _import_string(node: Node) -> list[str]:
    return [_text(node).strip()]


def _python_import(node: Node) -> list[str]:
    if node.type == "import_statement":
        specs = []
        for child in node.children_by_field_name("name"):
            target = child.child_by_field_name("name") if child.type == "aliased_import" else child
            specs.append(_compact(target))
        return specs
    module = node.child_by_field_name("module_name")
    base = _compact(module)
    if not base or base == "__future__":
        return []
    names = []
    for child in node.children_by_field_name("name"):
        target = child.child_by_field_name("name") if child.type == "aliased_import" else child
        names.append(_compact(target))
    relative_only = base.endswith(".")  # from . import x / from .. import y
    specs = [] if relative_only and names else [base]
    specs.extend(base + name if relative_only else f"{base}.{name}" for name in names if name)
    return specs


def _rust_use(node: Node) -> list[str]:
    return _rust_paths(node, "")


def _rust_join(prefix: str, path: str) -> str:
    return f"{prefix}::{path}" if prefix and path else prefix or path


def _rust_paths(node: Node, prefix: str) -> list[str]:
    kind = node.type
    if kind == "use_as_clause":
        path = node.child_by_field_name("path")
        return [] if path is None else _rust_paths(path, prefix)
    if kind == "use_wildcard":
        inner = node.named_children
        return [_rust_join(prefix, _compact(inner[0]))] if inner else ([prefix] if prefix else [])
    if kind == "scoped_use_list":
        path = node.child_by_field_name("path")
        listing = node.child_by_field_name("list")
        nested = _rust_join(prefix, _compact(path)) if path is not None else prefix
        return [] if listing is None else _rust_paths(listing, nested)
    if kind == "use_list":
        return [spec for child in node.named_children for spec in _rust_paths(child, prefix)]
    if kind in ("line_comment", "block_comment"):
        return []
    text = _compact(node)
    if text == "self" and prefix:
        return [prefix]
    return [_rust_join(prefix, text)]


def _rust_mod(node: Node) -> list[str]:
    return [f"mod {_text(node)}"]


def _java_import(node: Node) -> list[str]:
    path = ""
    wildcard = False
    for child in node.named_children:
        if child.type in ("scoped_identifier", "identifier"):
            path = _compact(child)
        elif child.type == "asterisk":
            wildcard = True
    if not path:
        return []
    return [f"{path}.*" if wildcard else path]


def _ruby_relative(node: Node) -> list[str]:
    path = _text(node).strip()
    if not path:
        return []
    return [path if path.startswith(("./", "../", "/")) else f"./{path}"]


def _csharp_using(node: Node) -> list[str]:
    named = [child for child in node.named_children if child.type not in ("comment",)]
    return [_compact(named[-1])] if named else []


def _php_use(node: Node) -> list[str]:
    specs: list[str] = []
    prefix = ""
    for child in node.named_children:
        if child.type == "namespace_name":
            prefix = _compact(child).strip("\\")
        elif child.type == "namespace_use_clause":
            specs.append(_php_clause(child, ""))
        elif child.type == "namespace_use_group":
            specs.extend(
                _php_clause(clause, prefix) for clause in child.named_children if clause.type == "namespace_use_clause"
            )
    return specs


def _php_clause(clause: Node, prefix: str) -> str:
    names = [child for child in clause.named_children if child.type in ("qualified_name", "name", "namespace_name")]
    if not names:
        return ""
    name = _compact(names[0]).strip("\\")
    return f"{prefix}\\{name}" if prefix else name


def _php_require(node: Node) -> list[str]:
    argument = node.named_children[0] if node.named_child_count else None
    while argument is not None and argument.type == "parenthesized_expression":
        argument = argument.named_children[0] if argument.named_child_count else None
    if argument is None:
        return []
    if argument.type in ("string", "encapsed_string"):
        content = _string_content(argument)
        return [content] if content else []
    if argument.type == "binary_expression":
        left = argument.child_by_field_name("left")
        right = argument.child_by_field_name("right")
        if left is not None and right is not None and right.type in ("string", "encapsed_string"):
            anchor = _text(left)
            content = _string_content(right)
            if content and anchor in ("__DIR__", "dirname(__FILE__)"):
                return ["." + content if content.startswith("/") else f"./{content}"]
    return []


def _string_content(node: Node) -> str:
    parts = node.named_children
    if len(parts) != 1 or parts[0].type != "string_content":
        return ""  # empty, or interpolated
    return _text(parts[0])


def _bash_source(node: Node) -> list[str]:
    argument = node.child_by_field_name("argument")
    if argument is None:
        return []
    text = _text(argument).strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    return [text] if text else []


_IMPORT_READERS: dict[str, ImportReader] = {
    "str": _import_string,
    "python": _python_import,
    "rust_use": _rust_use,
    "rust_mod": _rust_mod,
    "java": _java_import,
    "ruby_relative": _ruby_relative,
    "csharp": _csharp_using,
    "php_use": _php_use,
    "php_require": _php_require,
    "bash": _bash_source,
}


# ---------------------------------------------------------------------------
# Per-language rules.


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_JS_KEYWORDS = _words(
    """
    await break case catch class const continue debugger default delete do else enum export extends false
    finally for function if implements import in instanceof interface let new null package private protected
    public return static super switch this throw true try typeof var void while with yield async undefined
    arguments
    """
)
_C_KEYWORDS = _words(
    """
    auto break case char const continue default do double else enum extern float for goto if inline int long
    register restrict return short signed sizeof static struct switch typedef union unsigned void volatile
    while _Bool _Complex _Alignas _Alignof _Atomic _Generic _Noreturn _Static_assert _Thread_local bool true
    false
    """
)
_CPP_KEYWORDS = _C_KEYWORDS | _words(
    """
    alignas alignof and and_eq asm bitand bitor catch char8_t char16_t char32_t class compl concept consteval
    constexpr constinit const_cast co_await co_return co_yield decltype delete dynamic_cast explicit export
    friend mutable namespace new noexcept not not_eq nullptr operator or or_eq override final private
    protected public reinterpret_cast requires static_assert static_cast template this thread_local throw try
    typeid typename using virtual wchar_t xor xor_eq
    """
)

_RULES: dict[str, _Rules] = {
    "python": _Rules(
        function_scopes=_words("function_definition lambda"),
        class_scopes=_words("class_definition"),
        class_constants=False,
        keywords=frozenset(keyword.kwlist) | _words("self cls"),
        refine=_refine_python,
    ),
    "javascript": _Rules(
        function_scopes=_words(
            "function_declaration generator_function_declaration function_expression function generator_function"
            " arrow_function method_definition"
        ),
        class_scopes=_words("class_declaration class"),
        class_constants=False,
        keywords=_JS_KEYWORDS,
        refine=_refine_js,
    ),
    "go": _Rules(
        function_scopes=_words("function_declaration method_declaration func_literal"),
        class_scopes=frozenset(),
        class_constants=False,
        keywords=_words(
            """
            break case chan const continue default defer else fallthrough for func go goto if import interface
            map package range return select struct switch type var bool byte complex64 complex128 error float32
            float64 int int8 int16 int32 int64 rune string uint uint8 uint16 uint32 uint64 uintptr any comparable
            true false iota nil
            """
        ),
        refine=_refine_go,
    ),
    "rust": _Rules(
        function_scopes=_words("function_item closure_expression"),
        class_scopes=_words("impl_item trait_item"),
        class_constants=False,
        keywords=_words(
            """
            as async await break const continue crate dyn else enum extern false fn for if impl in let loop match
            mod move mut pub ref return self Self static struct super trait true type unsafe use where while union
            macro_rules
            """
        ),
    ),
    "java": _Rules(
        function_scopes=_words(
            "method_declaration constructor_declaration compact_constructor_declaration lambda_expression"
        ),
        class_scopes=_words(
            "class_declaration interface_declaration enum_declaration record_declaration annotation_type_declaration"
        ),
        class_constants=True,
        keywords=_words(
            """
            abstract assert boolean break byte case catch char class const continue default do double else enum
            extends final finally float for goto if implements import instanceof int interface long native new
            package private protected public return short static strictfp super switch synchronized this throw
            throws transient try void volatile while true false null var record yield
            """
        ),
        refine=_refine_java,
    ),
    "c": _Rules(
        function_scopes=_words("function_definition"),
        class_scopes=_words("struct_specifier union_specifier"),
        class_constants=False,
        keywords=_C_KEYWORDS,
    ),
    "cpp": _Rules(
        function_scopes=_words("function_definition lambda_expression"),
        class_scopes=_words("class_specifier struct_specifier union_specifier"),
        class_constants=False,
        keywords=_CPP_KEYWORDS,
    ),
    "ruby": _Rules(
        function_scopes=_words("method singleton_method lambda"),
        class_scopes=_words("class module singleton_class"),
        class_constants=True,
        keywords=_words(
            """
            BEGIN END alias and begin break case class def defined? do else elsif end ensure false for if in module
            next nil not or redo rescue retry return self super then true undef unless until when while yield
            __FILE__ __LINE__ __ENCODING__ __method__
            """
        ),
    ),
    "csharp": _Rules(
        function_scopes=_words(
            "method_declaration constructor_declaration destructor_declaration local_function_statement"
            " lambda_expression anonymous_method_expression accessor_declaration operator_declaration"
        ),
        class_scopes=_words("class_declaration struct_declaration interface_declaration record_declaration"),
        class_constants=True,
        keywords=_words(
            """
            abstract as base bool break byte case catch char checked class const continue decimal default delegate
            do double else enum event explicit extern false finally fixed float for foreach goto if implicit in int
            interface internal is lock long namespace new null object operator out override params private
            protected public readonly ref return sbyte sealed short sizeof stackalloc static string struct switch
            this throw true try typeof uint ulong unchecked unsafe ushort using virtual void volatile while var
            dynamic nameof
            """
        ),
    ),
    "php": _Rules(
        function_scopes=_words(
            "function_definition method_declaration anonymous_function anonymous_function_creation_expression"
            " arrow_function"
        ),
        class_scopes=_words("class_declaration interface_declaration trait_declaration enum_declaration"),
        class_constants=True,
        keywords=_words(
            """
            abstract and array as break callable case catch class clone const continue declare default do echo
            else elseif empty enddeclare endfor endforeach endif endswitch endwhile eval exit extends final finally
            fn for foreach function global goto if implements include include_once instanceof insteadof interface
            isset list match namespace new null or print private protected public readonly require require_once
            return static switch throw trait try unset use var while xor yield true false this self parent
            TRUE FALSE NULL __DIR__ __FILE__ __LINE__ __CLASS__ __FUNCTION__ __METHOD__ __NAMESPACE__
            """
        ),
    ),
    "bash": _Rules(
        function_scopes=frozenset(),
        class_scopes=frozenset(),
        class_constants=False,
        keywords=_words("if then else elif fi case esac for while until do done in function select time"),
    ),
}
_RULES["typescript"] = _Rules(
    function_scopes=_RULES["javascript"].function_scopes,
    class_scopes=_RULES["javascript"].class_scopes | _words("abstract_class_declaration interface_declaration"),
    class_constants=False,
    keywords=_JS_KEYWORDS | _words("any unknown never"),
    refine=_refine_js,
)
_RULES["tsx"] = _RULES["typescript"]
