"""Languages of the code graph: file suffixes, tree-sitter grammars and tag queries.

Each grammar comes from its own wheel (``tree_sitter_python``, ...), imported
lazily the first time a file of that language is parsed and cached for the
process. A wheel that is missing or fails to load never raises: ``grammar``
returns None and ``missing_grammars`` tells why, so the indexer can print a note
and carry on with the other languages.

One query per language finds, in a single pass over the syntax tree, everything
``cclg.codegraph.parse`` needs. Its capture names say what a node is:

- ``name.<kind>``: the name of a definition (``name.function``, ``name.class``,
  ...); ``parse`` decides from the enclosing scopes whether a function is a
  method, and drops definitions local to a function body. ``name.proto`` is a
  C/C++ function prototype, ``name.gotype`` a Go type spec, refined by ``parse``.
- ``import.<style>``: an import, either its module string (``import.str``) or a
  node that ``parse`` reads with a language-specific helper.
- ``ref``: an identifier-like node whose text is a reference.
- captures starting with ``_`` only serve predicates.

The queries are kept as lists of patterns: if a grammar release renames a node
type, the patterns that still compile are used and the others are reported by
``query_problems``.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterable
from pathlib import PurePosixPath

import tree_sitter

EXTENSIONS: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".hxx": "cpp",
    ".rb": "ruby",
    ".cs": "csharp",
    ".php": "php",
    ".sh": "bash",
    ".bash": "bash",
}

# language -> (wheel module, function returning the language pointer)
_WHEELS: dict[str, tuple[str, str]] = {
    "python": ("tree_sitter_python", "language"),
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "go": ("tree_sitter_go", "language"),
    "rust": ("tree_sitter_rust", "language"),
    "java": ("tree_sitter_java", "language"),
    "c": ("tree_sitter_c", "language"),
    "cpp": ("tree_sitter_cpp", "language"),
    "ruby": ("tree_sitter_ruby", "language"),
    "csharp": ("tree_sitter_c_sharp", "language"),
    "php": ("tree_sitter_php", "language_php"),
    "bash": ("tree_sitter_bash", "language"),
}

LANGUAGES: tuple[str, ...] = tuple(_WHEELS)

_LOCK = threading.Lock()
_GRAMMARS: dict[str, tree_sitter.Language | None] = {}
_MISSING: dict[str, str] = {}
_QUERIES: dict[str, tree_sitter.Query | None] = {}
_QUERY_PROBLEMS: dict[str, list[str]] = {}


def language_of(path: str) -> str | None:
    """The language of a file from its suffix (case-insensitive), or None."""
    return EXTENSIONS.get(PurePosixPath(path).suffix.lower())


def _load(language: str) -> tree_sitter.Language:
    module_name, function = _WHEELS[language]
    module = importlib.import_module(module_name)
    return tree_sitter.Language(getattr(module, function)())


def grammar(language: str) -> tree_sitter.Language | None:
    """The tree-sitter grammar of a language, loaded once per process; None if unavailable."""
    try:
        return _GRAMMARS[language]
    except KeyError:
        pass
    with _LOCK:
        if language in _GRAMMARS:
            return _GRAMMARS[language]
        loaded: tree_sitter.Language | None = None
        if language not in _WHEELS:
            _MISSING[language] = "no grammar is known for this language"
        else:
            try:
                loaded = _load(language)
            except Exception as exc:  # ImportError, ABI mismatch (ValueError), anything else
                module_name = _WHEELS[language][0]
                _MISSING[language] = f"cannot load {module_name}: {type(exc).__name__}: {exc}"
        _GRAMMARS[language] = loaded
        return loaded


def missing_grammars(languages: Iterable[str] | None = None) -> dict[str, str]:
    """Languages whose grammar could not be loaded, with the reason.

    Without arguments: the languages tried so far in this process. With
    ``languages``, those are tried first (a process that parses in worker
    processes learns nothing from them, so it passes the languages it saw).
    """
    for language in languages or ():
        grammar(language)
    with _LOCK:
        return dict(sorted(_MISSING.items()))


def query(language: str) -> tree_sitter.Query | None:
    """The tag query of a language, compiled once per process; None if the grammar is unavailable."""
    try:
        return _QUERIES[language]
    except KeyError:
        pass
    lang = grammar(language)
    with _LOCK:
        if language in _QUERIES:
            return _QUERIES[language]
        compiled = None if lang is None else _compile(language, lang)
        _QUERIES[language] = compiled
        return compiled


def query_problems() -> dict[str, list[str]]:
    """Patterns that did not compile against the installed grammars (normally empty)."""
    with _LOCK:
        return {language: list(problems) for language, problems in sorted(_QUERY_PROBLEMS.items())}


def _compile(language: str, lang: tree_sitter.Language) -> tree_sitter.Query | None:
    patterns = PATTERNS.get(language, [])
    try:
        return tree_sitter.Query(lang, "\n".join(patterns))
    except Exception:
        pass
    # Some pattern does not fit this grammar release: keep the ones that compile.
    good: list[str] = []
    problems: list[str] = []
    for pattern in patterns:
        try:
            tree_sitter.Query(lang, pattern)
        except Exception as exc:
            problems.append(f"{pattern.strip()} ({type(exc).__name__}: {exc})")
        else:
            good.append(pattern)
    _QUERY_PROBLEMS[language] = problems
    if not good:
        _MISSING[language] = "no tag pattern compiles against the installed grammar"
        return None
    try:
        return tree_sitter.Query(lang, "\n".join(good))
    except Exception as exc:
        _MISSING[language] = f"tag query does not compile: {type(exc).__name__}: {exc}"
        return None


# ---------------------------------------------------------------------------
# Tag queries. One string per pattern (see the module docstring).

_PYTHON = [
    "(function_definition name: (identifier) @name.function)",
    "(class_definition name: (identifier) @name.class)",
    "(expression_statement (assignment left: (identifier) @name.constant))",
    "(type_alias_statement left: (type (identifier) @name.type))",
    "(type_alias_statement left: (type (generic_type . (identifier) @name.type)))",
    "(import_statement) @import.python",
    "(import_from_statement) @import.python",
    "(identifier) @ref",
]

_JS_COMMON = [
    "(function_declaration name: (identifier) @name.function)",
    "(generator_function_declaration name: (identifier) @name.function)",
    "(class_declaration name: (_) @name.class)",
    "(class_body (method_definition name: [(property_identifier) (private_property_identifier)] @name.method))",
    # Top-level declarations: functions bound to a name, or constants (refined in parse).
    "(program [(lexical_declaration (variable_declarator name: (identifier) @name.constant))"
    " (variable_declaration (variable_declarator name: (identifier) @name.constant))])",
    "(program (export_statement declaration:"
    " [(lexical_declaration (variable_declarator name: (identifier) @name.constant))"
    " (variable_declaration (variable_declarator name: (identifier) @name.constant))]))",
    # exports.foo = function () {}, Foo.prototype.bar = () => {}
    "((program (expression_statement (assignment_expression"
    " left: (member_expression property: (property_identifier) @name.function)"
    " right: [(function_expression) (arrow_function)])))"
    ' (#not-eq? @name.function "exports"))',  # module.exports = function () {} defines no "exports"
    "(import_statement source: (string (string_fragment) @import.str))",
    "(export_statement source: (string (string_fragment) @import.str))",
    "((call_expression function: (identifier) @_fn arguments: (arguments . (string (string_fragment) @import.str)))"
    ' (#eq? @_fn "require"))',
    "(call_expression function: (import) arguments: (arguments . (string (string_fragment) @import.str)))",
    "(identifier) @ref",
    "(property_identifier) @ref",
    "(shorthand_property_identifier) @ref",
    "(shorthand_property_identifier_pattern) @ref",
]

_JAVASCRIPT = list(_JS_COMMON)

_TYPESCRIPT = [
    *_JS_COMMON,
    "(abstract_class_declaration name: (type_identifier) @name.class)",
    "(interface_declaration name: (type_identifier) @name.interface)",
    "(type_alias_declaration name: (type_identifier) @name.type)",
    "(enum_declaration name: (identifier) @name.enum)",
    "(function_signature name: (identifier) @name.function)",
    "(interface_body (method_signature name: (property_identifier) @name.method))",
    "(class_body (method_signature name: (property_identifier) @name.method))",
    "(class_body (abstract_method_signature name: (property_identifier) @name.method))",
    "(internal_module name: (identifier) @name.module)",
    "(import_require_clause source: (string (string_fragment) @import.str))",
    "(type_identifier) @ref",
]

_GO = [
    "(function_declaration name: (identifier) @name.function)",
    "(method_declaration name: (field_identifier) @name.method)",
    "(type_spec name: (type_identifier) @name.gotype)",
    "(type_alias name: (type_identifier) @name.type)",
    "(source_file (const_declaration (const_spec name: (identifier) @name.constant)))",
    "(interface_type (method_elem name: (field_identifier) @name.method))",
    "(import_spec path: (interpreted_string_literal (interpreted_string_literal_content) @import.str))",
    "(identifier) @ref",
    "(type_identifier) @ref",
    "(field_identifier) @ref",
]

_RUST = [
    "(function_item name: (identifier) @name.function)",
    "(function_signature_item name: (identifier) @name.function)",
    "(struct_item name: (type_identifier) @name.type)",
    "(union_item name: (type_identifier) @name.type)",
    "(enum_item name: (type_identifier) @name.enum)",
    "(trait_item name: (type_identifier) @name.interface)",
    "(type_item name: (type_identifier) @name.type)",
    "(const_item name: (identifier) @name.constant)",
    "(static_item name: (identifier) @name.constant)",
    "(macro_definition name: (identifier) @name.macro)",
    "(mod_item name: (identifier) @name.module body: (declaration_list))",
    "(use_declaration argument: (_) @import.rust_use)",
    "(mod_item name: (identifier) @import.rust_mod !body)",
    "(identifier) @ref",
    "(type_identifier) @ref",
    "(field_identifier) @ref",
]

_JAVA = [
    "(class_declaration name: (identifier) @name.class)",
    "(interface_declaration name: (identifier) @name.interface)",
    "(annotation_type_declaration name: (identifier) @name.interface)",
    "(enum_declaration name: (identifier) @name.enum)",
    "(record_declaration name: (identifier) @name.class)",
    "(method_declaration name: (identifier) @name.method)",
    '(field_declaration (modifiers "static") declarator: (variable_declarator name: (identifier) @name.constant))',
    "(constant_declaration declarator: (variable_declarator name: (identifier) @name.constant))",
    "(import_declaration) @import.java",
    "(identifier) @ref",
    "(type_identifier) @ref",
]

_C_COMMON = [
    "(function_definition declarator: (function_declarator declarator: (identifier) @name.function))",
    "(function_definition declarator: (_ (function_declarator declarator: (identifier) @name.function)))",
    "(function_definition declarator: (_ (_ (function_declarator declarator: (identifier) @name.function))))",
    "(declaration declarator: (function_declarator declarator: (identifier) @name.proto))",
    "(declaration declarator: (_ (function_declarator declarator: (identifier) @name.proto)))",
    "(struct_specifier name: (type_identifier) @name.type body: (_))",
    "(union_specifier name: (type_identifier) @name.type body: (_))",
    "(enum_specifier name: (type_identifier) @name.enum body: (_))",
    "(type_definition declarator: (type_identifier) @name.type)",
    "(type_definition declarator: (_ (type_identifier) @name.type))",
    "(preproc_def name: (identifier) @name.macro)",
    "(preproc_function_def name: (identifier) @name.macro)",
    "(preproc_include path: (string_literal (string_content) @import.str))",
    "(preproc_include path: (system_lib_string) @import.str)",
    "(identifier) @ref",
    "(type_identifier) @ref",
    "(field_identifier) @ref",
]

_C = list(_C_COMMON)

_CPP = [
    *_C_COMMON,
    "(function_definition declarator: (function_declarator declarator: (field_identifier) @name.function))",
    "(function_definition declarator: (function_declarator declarator:"
    " (qualified_identifier name: (identifier) @name.method)))",
    "(function_definition declarator: (function_declarator declarator:"
    " (qualified_identifier name: (qualified_identifier name: (identifier) @name.method))))",
    "(function_definition declarator: (_ (function_declarator declarator:"
    " (qualified_identifier name: (identifier) @name.method))))",
    "(field_declaration declarator: (function_declarator declarator: (field_identifier) @name.method))",
    "(field_declaration declarator: (_ (function_declarator declarator: (field_identifier) @name.method)))",
    "(class_specifier name: (type_identifier) @name.class body: (_))",
    "(namespace_definition name: (namespace_identifier) @name.module)",
    "(alias_declaration name: (type_identifier) @name.type)",
    "(namespace_identifier) @ref",
]

_RUBY = [
    "(method name: (_) @name.function)",
    "(singleton_method name: (_) @name.method)",
    "(class name: (constant) @name.class)",
    "(class name: (scope_resolution name: (constant) @name.class))",
    "(module name: (constant) @name.module)",
    "(module name: (scope_resolution name: (constant) @name.module))",
    "(assignment left: (constant) @name.constant)",
    "((call method: (identifier) @_m arguments: (argument_list . (string . (string_content) @import.str .)))"
    ' (#any-of? @_m "require" "load"))',
    "((call method: (identifier) @_m arguments: (argument_list . (string . (string_content) @import.ruby_relative .)))"
    ' (#eq? @_m "require_relative"))',
    "(identifier) @ref",
    "(constant) @ref",
]

_CSHARP = [
    "(class_declaration name: (identifier) @name.class)",
    "(interface_declaration name: (identifier) @name.interface)",
    "(enum_declaration name: (identifier) @name.enum)",
    "(struct_declaration name: (identifier) @name.type)",
    "(record_declaration name: (identifier) @name.class)",
    "(delegate_declaration name: (identifier) @name.type)",
    "(method_declaration name: (identifier) @name.method)",
    "(namespace_declaration name: (_) @name.module)",
    "(file_scoped_namespace_declaration name: (_) @name.module)",
    '(field_declaration (modifier "const")'
    " (variable_declaration (variable_declarator name: (identifier) @name.constant)))",
    "(using_directive) @import.csharp",
    "(identifier) @ref",
]

_PHP = [
    "(function_definition name: (name) @name.function)",
    "(class_declaration name: (name) @name.class)",
    "(interface_declaration name: (name) @name.interface)",
    "(trait_declaration name: (name) @name.class)",
    "(enum_declaration name: (name) @name.enum)",
    "(method_declaration name: (name) @name.method)",
    "(const_declaration (const_element (name) @name.constant))",
    "(namespace_definition name: (namespace_name) @name.module)",
    "(namespace_use_declaration) @import.php_use",
    "[(require_expression) (require_once_expression) (include_expression) (include_once_expression)]"
    " @import.php_require",
    "(name) @ref",
]

_BASH = [
    "(function_definition name: (word) @name.function)",
    '((command name: (command_name (word) @_c)) @import.bash (#any-of? @_c "source" "."))',
    "(command_name (word) @ref)",
    "(variable_name) @ref",
]

PATTERNS: dict[str, list[str]] = {
    "python": _PYTHON,
    "javascript": _JAVASCRIPT,
    "typescript": _TYPESCRIPT,
    "tsx": _TYPESCRIPT,
    "go": _GO,
    "rust": _RUST,
    "java": _JAVA,
    "c": _C,
    "cpp": _CPP,
    "ruby": _RUBY,
    "csharp": _CSHARP,
    "php": _PHP,
    "bash": _BASH,
}
