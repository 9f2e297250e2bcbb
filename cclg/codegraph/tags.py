"""Tag queries: one tree-sitter query per language, kept as a tuple of patterns.

One query per language finds, in a single pass over the syntax tree, everything
``cclg.codegraph.parse`` needs. Its capture names say what a node is:

- ``name.<kind>``: the name of a definition (``name.function``, ``name.class``,
  ...); ``parse`` decides from the enclosing scopes whether a function is a
  method, and drops definitions local to a function body. ``name.proto`` is a
  C/C++ function prototype, ``name.gotype`` a Go type spec, refined by the
  language's capture spec (``cclg.codegraph.captures``).
- ``import.<style>``: an import, either its module string (``import.str``) or a
  node that the language's import reader for that style reads
  (``cclg.codegraph.captures``); every style a language's patterns capture must
  have a reader in its ``Language`` record (``cclg.codegraph.languages`` checks).
- ``ref``: an identifier-like node whose text is a reference.
- captures starting with ``_`` only serve predicates.

The queries are kept as tuples of patterns, one string per pattern: if a grammar
release renames a node type, the patterns that still compile are used and the
others are reported (``cclg.codegraph.languages.query_problems``).

Plain data: no imports, so the language table can name these without loading
tree-sitter.
"""

from __future__ import annotations

PYTHON = (
    "(function_definition name: (identifier) @name.function)",
    "(class_definition name: (identifier) @name.class)",
    "(expression_statement (assignment left: (identifier) @name.constant))",
    "(type_alias_statement left: (type (identifier) @name.type))",
    "(type_alias_statement left: (type (generic_type . (identifier) @name.type)))",
    "(import_statement) @import.python",
    "(import_from_statement) @import.python",
    "(identifier) @ref",
)

_JS_COMMON = (
    "(function_declaration name: (identifier) @name.function)",
    "(generator_function_declaration name: (identifier) @name.function)",
    "(class_declaration name: (_) @name.class)",
    "(class_body (method_definition name: [(property_identifier) (private_property_identifier)] @name.method))",
    # Top-level declarations: functions bound to a name, or constants (refined by the JavaScript capture spec).
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
)

JAVASCRIPT = _JS_COMMON

TYPESCRIPT = (
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
)

GO = (
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
)

RUST = (
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
)

JAVA = (
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
)

_C_COMMON = (
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
)

C = _C_COMMON

CPP = (
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
)

RUBY = (
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
)

CSHARP = (
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
)

PHP = (
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
)

BASH = (
    "(function_definition name: (word) @name.function)",
    '((command name: (command_name (word) @_c)) @import.bash (#any-of? @_c "source" "."))',
    "(command_name (word) @ref)",
    "(variable_name) @ref",
)
