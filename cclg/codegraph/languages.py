"""The languages of the code graph: one ``Language`` record each, in one table, and their grammars.

A ``Language`` holds everything the code graph needs to know of a language: its
file suffixes, the wheel and function giving its tree-sitter grammar, its tag
query (``cclg.codegraph.tags``), the capture spec for reading its captures and its
import readers (``cclg.codegraph.captures``) and its import resolver
(``cclg.codegraph.resolvers``). Adding a language means adding one record to
``LANGUAGES``; a record with a part missing (no suffix, no wheel, no pattern, an
``import.<style>`` capture without a reader, a reader no pattern uses, no
resolver) or a suffix claimed twice raises ``ValueError`` when this module is
imported, so a forgotten part cannot silently give a language without imports.

Why here: the table must see every part, so it sits above the modules holding
them (``tags``, ``captures``, ``resolvers``, which import nothing of the code
graph) and below the engines that look a language up by name (``parse``,
``resolve``, and the grammar loading further down this module). Imports point
one way, without cycles.

Each grammar comes from its own wheel (``tree_sitter_python``, ...), imported
lazily the first time a file of that language is parsed and cached for the
process. A wheel that is missing or fails to load never raises: ``grammar``
returns None and ``missing_grammars`` tells why, so the indexer can print a note
and carry on with the other languages. The tag query is compiled once per
process (``query``); patterns that do not compile against the installed grammar
are skipped and reported by ``query_problems``.
"""

from __future__ import annotations

import importlib
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath

import tree_sitter

from cclg.codegraph import captures, resolvers, tags
from cclg.codegraph.captures import CaptureSpec, ImportReader
from cclg.codegraph.resolvers import Resolver

_IMPORT_CAPTURE = re.compile(r"@import\.(\w+)")


@dataclass(frozen=True, slots=True)
class Language:
    """Everything the code graph knows of one language; checked complete when made."""

    name: str
    extensions: tuple[str, ...]  # file suffixes, lower-case, with their dot
    wheel: str  # the module holding the tree-sitter grammar
    wheel_function: str  # its function returning the language pointer
    patterns: tuple[str, ...]  # the tag query, one string per pattern
    capture_spec: CaptureSpec  # how the captures are read
    import_readers: Mapping[str, ImportReader]  # capture style (import.<style>) -> reader
    resolver: Resolver  # import spec -> repository files

    def __post_init__(self) -> None:
        problems = self.problems()
        if problems:
            raise ValueError(f"language {self.name!r} is incomplete: {'; '.join(problems)}")

    def problems(self) -> list[str]:
        """What this record lacks (empty when it is complete)."""
        problems = []
        if not self.name:
            problems.append("no name")
        if not self.extensions or any(not e.startswith(".") or e != e.lower() for e in self.extensions):
            problems.append(f"extensions must be lower-case suffixes with their dot, not {self.extensions!r}")
        if not self.wheel or not self.wheel_function:
            problems.append("no grammar wheel or function")
        if not self.patterns or not all(isinstance(p, str) and p.strip() for p in self.patterns):
            problems.append("no tag patterns (or an empty one)")
        if not isinstance(self.capture_spec, CaptureSpec):
            problems.append("no capture rules")
        styles = {style for pattern in self.patterns for style in _IMPORT_CAPTURE.findall(pattern)}
        if not styles:
            problems.append("no pattern captures imports")
        if styles - set(self.import_readers):
            problems.append(f"no import reader for {sorted(styles - set(self.import_readers))}")
        if set(self.import_readers) - styles:
            problems.append(f"import readers no pattern uses: {sorted(set(self.import_readers) - styles)}")
        if not all(callable(reader) for reader in self.import_readers.values()):
            problems.append("an import reader is not callable")
        if not callable(self.resolver):
            problems.append("no import resolver")
        return problems


def _table(*languages: Language) -> dict[str, Language]:
    """The language table, refusing a name or a suffix given twice."""
    table: dict[str, Language] = {}
    owners: dict[str, str] = {}
    for language in languages:
        if language.name in table:
            raise ValueError(f"language {language.name!r} is registered twice")
        for extension in language.extensions:
            if extension in owners:
                raise ValueError(f"{extension} is claimed by {owners[extension]!r} and {language.name!r}")
            owners[extension] = language.name
        table[language.name] = language
    return table


# Languages whose imports are all captured as the module string itself (import.str).
_STRING_IMPORTS = {"str": captures.import_string}

LANGUAGES: dict[str, Language] = _table(
    Language(
        name="python",
        extensions=(".py", ".pyi"),
        wheel="tree_sitter_python",
        wheel_function="language",
        patterns=tags.PYTHON,
        capture_spec=captures.PYTHON_CAPTURES,
        import_readers={"python": captures.python_import},
        resolver=resolvers.resolve_python,
    ),
    Language(
        name="javascript",
        extensions=(".js", ".mjs", ".cjs", ".jsx"),
        wheel="tree_sitter_javascript",
        wheel_function="language",
        patterns=tags.JAVASCRIPT,
        capture_spec=captures.JAVASCRIPT_CAPTURES,
        import_readers=_STRING_IMPORTS,
        resolver=resolvers.resolve_js,
    ),
    Language(
        name="typescript",
        extensions=(".ts", ".mts", ".cts"),
        wheel="tree_sitter_typescript",
        wheel_function="language_typescript",
        patterns=tags.TYPESCRIPT,
        capture_spec=captures.TYPESCRIPT_CAPTURES,
        import_readers=_STRING_IMPORTS,
        resolver=resolvers.resolve_js,
    ),
    Language(
        name="tsx",
        extensions=(".tsx",),
        wheel="tree_sitter_typescript",
        wheel_function="language_tsx",
        patterns=tags.TYPESCRIPT,
        capture_spec=captures.TYPESCRIPT_CAPTURES,
        import_readers=_STRING_IMPORTS,
        resolver=resolvers.resolve_js,
    ),
    Language(
        name="go",
        extensions=(".go",),
        wheel="tree_sitter_go",
        wheel_function="language",
        patterns=tags.GO,
        capture_spec=captures.GO_CAPTURES,
        import_readers=_STRING_IMPORTS,
        resolver=resolvers.resolve_go,
    ),
    Language(
        name="rust",
        extensions=(".rs",),
        wheel="tree_sitter_rust",
        wheel_function="language",
        patterns=tags.RUST,
        capture_spec=captures.RUST_CAPTURES,
        import_readers={"rust_use": captures.rust_use, "rust_mod": captures.rust_mod},
        resolver=resolvers.resolve_rust,
    ),
    Language(
        name="java",
        extensions=(".java",),
        wheel="tree_sitter_java",
        wheel_function="language",
        patterns=tags.JAVA,
        capture_spec=captures.JAVA_CAPTURES,
        import_readers={"java": captures.java_import},
        resolver=resolvers.resolve_java,
    ),
    Language(
        name="c",
        extensions=(".c", ".h"),
        wheel="tree_sitter_c",
        wheel_function="language",
        patterns=tags.C,
        capture_spec=captures.C_CAPTURES,
        import_readers=_STRING_IMPORTS,
        resolver=resolvers.resolve_c,
    ),
    Language(
        name="cpp",
        extensions=(".cc", ".cpp", ".cxx", ".hpp", ".hh", ".hxx"),
        wheel="tree_sitter_cpp",
        wheel_function="language",
        patterns=tags.CPP,
        capture_spec=captures.CPP_CAPTURES,
        import_readers=_STRING_IMPORTS,
        resolver=resolvers.resolve_c,
    ),
    Language(
        name="ruby",
        extensions=(".rb",),
        wheel="tree_sitter_ruby",
        wheel_function="language",
        patterns=tags.RUBY,
        capture_spec=captures.RUBY_CAPTURES,
        import_readers={"str": captures.import_string, "ruby_relative": captures.ruby_relative},
        resolver=resolvers.resolve_ruby,
    ),
    Language(
        name="csharp",
        extensions=(".cs",),
        wheel="tree_sitter_c_sharp",
        wheel_function="language",
        patterns=tags.CSHARP,
        capture_spec=captures.CSHARP_CAPTURES,
        import_readers={"csharp": captures.csharp_using},
        resolver=resolvers.resolve_csharp,
    ),
    Language(
        name="php",
        extensions=(".php",),
        wheel="tree_sitter_php",
        wheel_function="language_php",
        patterns=tags.PHP,
        capture_spec=captures.PHP_CAPTURES,
        import_readers={"php_use": captures.php_use, "php_require": captures.php_require},
        resolver=resolvers.resolve_php,
    ),
    Language(
        name="bash",
        extensions=(".sh", ".bash"),
        wheel="tree_sitter_bash",
        wheel_function="language",
        patterns=tags.BASH,
        capture_spec=captures.BASH_CAPTURES,
        import_readers={"bash": captures.bash_source},
        resolver=resolvers.resolve_bash,
    ),
)

# File suffix -> language name, from the records.
EXTENSIONS: dict[str, str] = {extension: name for name, record in LANGUAGES.items() for extension in record.extensions}


def language_of(path: str) -> str | None:
    """The language of a file from its suffix (case-insensitive), or None."""
    return EXTENSIONS.get(PurePosixPath(path).suffix.lower())


# ---------------------------------------------------------------------------
# Grammars and tag queries, loaded once per process.

_LOCK = threading.Lock()
_GRAMMARS: dict[str, tree_sitter.Language | None] = {}
_MISSING: dict[str, str] = {}
_QUERIES: dict[str, tree_sitter.Query | None] = {}
_QUERY_PROBLEMS: dict[str, list[str]] = {}


def _load(language: Language) -> tree_sitter.Language:
    module = importlib.import_module(language.wheel)
    return tree_sitter.Language(getattr(module, language.wheel_function)())


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
        known = LANGUAGES.get(language)
        if known is None:
            _MISSING[language] = "no grammar is known for this language"
        else:
            try:
                loaded = _load(known)
            except Exception as exc:  # ImportError, ABI mismatch (ValueError), anything else
                _MISSING[language] = f"cannot load {known.wheel}: {type(exc).__name__}: {exc}"
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
    patterns = LANGUAGES[language].patterns  # the grammar loaded, so the language is in the table
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
