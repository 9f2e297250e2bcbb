"""How each language's tag-query captures are read: scopes, keywords, kinds and imports.

The per-language parts that ``cclg.codegraph.parse`` applies to what a language's
tag query (``cclg.codegraph.tags``) captured, named by that language's
``Language`` record (``cclg.codegraph.languages``):

- ``CaptureSpec``: which syntax nodes are function bodies (a definition inside one is
  local and dropped) and class-like bodies (a function inside one is a method,
  and a constant in one is kept only where the language has class constants),
  the keywords that are never references, and an optional ``refine`` that
  corrects or drops a captured kind (``const x = () => 1`` is a function, a
  Python constant is ALL_CAPS);
- import readers: for a capture ``import.<style>``, the import specs written in
  one captured node (``from a import b`` gives ``a`` and ``a.b``).

Nothing here looks a language up by name; the language table does that.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Callable
from dataclasses import dataclass

from tree_sitter import Node

_ALL_CAPS = re.compile(r"_*[A-Z][A-Z0-9_]+")
_JS_FUNCTION_VALUES = frozenset({"arrow_function", "function_expression", "function", "generator_function"})

Refine = Callable[[str, Node, str], str | None]
ImportReader = Callable[[Node], list[str]]


@dataclass(frozen=True, slots=True)
class CaptureSpec:
    """How to read one language's captures."""

    function_scopes: frozenset[str]  # a definition inside one of these bodies is local
    class_scopes: frozenset[str]  # a function inside one of these bodies is a method
    class_constants: bool  # constants may live in class bodies (Java, C#, PHP, Ruby)
    keywords: frozenset[str]
    refine: Refine | None = None  # (kind, name node, name) -> kind, or None to drop


def node_text(node: Node | None) -> str:
    """A node's source text ("" for no node), undecodable bytes replaced."""
    if node is None:
        return ""
    raw = node.text
    return "" if raw is None else raw.decode("utf-8", "replace")


def _compact(node: Node | None) -> str:
    """Node text without whitespace (dotted names may be split over lines)."""
    return "".join(node_text(node).split())


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
    return function is not None and (function.type == "import" or node_text(function) == "require")


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
# Import readers: the spec strings of one node captured as ``import.<style>``.


def import_string(node: Node) -> list[str]:
    return [node_text(node).strip()]


def python_import(node: Node) -> list[str]:
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


def rust_use(node: Node) -> list[str]:
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


def rust_mod(node: Node) -> list[str]:
    return [f"mod {node_text(node)}"]


def java_import(node: Node) -> list[str]:
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


def ruby_relative(node: Node) -> list[str]:
    path = node_text(node).strip()
    if not path:
        return []
    return [path if path.startswith(("./", "../", "/")) else f"./{path}"]


def csharp_using(node: Node) -> list[str]:
    named = [child for child in node.named_children if child.type not in ("comment",)]
    return [_compact(named[-1])] if named else []


def php_use(node: Node) -> list[str]:
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


def php_require(node: Node) -> list[str]:
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
            anchor = node_text(left)
            content = _string_content(right)
            if content and anchor in ("__DIR__", "dirname(__FILE__)"):
                return ["." + content if content.startswith("/") else f"./{content}"]
    return []


def _string_content(node: Node) -> str:
    parts = node.named_children
    if len(parts) != 1 or parts[0].type != "string_content":
        return ""  # empty, or interpolated
    return node_text(parts[0])


def bash_source(node: Node) -> list[str]:
    argument = node.child_by_field_name("argument")
    if argument is None:
        return []
    text = node_text(argument).strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    return [text] if text else []


# ---------------------------------------------------------------------------
# Per-language capture specs.


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

PYTHON_CAPTURES = CaptureSpec(
    function_scopes=_words("function_definition lambda"),
    class_scopes=_words("class_definition"),
    class_constants=False,
    keywords=frozenset(keyword.kwlist) | _words("self cls"),
    refine=_refine_python,
)

JAVASCRIPT_CAPTURES = CaptureSpec(
    function_scopes=_words(
        "function_declaration generator_function_declaration function_expression function generator_function"
        " arrow_function method_definition"
    ),
    class_scopes=_words("class_declaration class"),
    class_constants=False,
    keywords=_JS_KEYWORDS,
    refine=_refine_js,
)

TYPESCRIPT_CAPTURES = CaptureSpec(
    function_scopes=JAVASCRIPT_CAPTURES.function_scopes,
    class_scopes=JAVASCRIPT_CAPTURES.class_scopes | _words("abstract_class_declaration interface_declaration"),
    class_constants=False,
    keywords=_JS_KEYWORDS | _words("any unknown never"),
    refine=_refine_js,
)

GO_CAPTURES = CaptureSpec(
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
)

RUST_CAPTURES = CaptureSpec(
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
)

JAVA_CAPTURES = CaptureSpec(
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
)

C_CAPTURES = CaptureSpec(
    function_scopes=_words("function_definition"),
    class_scopes=_words("struct_specifier union_specifier"),
    class_constants=False,
    keywords=_C_KEYWORDS,
)

CPP_CAPTURES = CaptureSpec(
    function_scopes=_words("function_definition lambda_expression"),
    class_scopes=_words("class_specifier struct_specifier union_specifier"),
    class_constants=False,
    keywords=_CPP_KEYWORDS,
)

RUBY_CAPTURES = CaptureSpec(
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
)

CSHARP_CAPTURES = CaptureSpec(
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
)

PHP_CAPTURES = CaptureSpec(
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
)

BASH_CAPTURES = CaptureSpec(
    function_scopes=frozenset(),
    class_scopes=frozenset(),
    class_constants=False,
    keywords=_words("if then else elif fi case esac for while until do done in function select time"),
)
