"""Per-language import resolvers: which repository files an import spec names.

Each resolver takes (importer, spec, the repository's ``FileIndex``, the Go module
path) and returns repository-relative POSIX paths; a ``Language`` record
(``cclg.codegraph.languages``) names its resolver and ``cclg.codegraph.resolve``
calls it. Only what can be known from the file list is resolved; anything else
(third-party packages, the standard library, system headers, aliases configured in
build files) is dropped. The per-file-set index (by path suffix and by folder) is
built once per ``files`` object (``file_index``), so resolving every file of a
large repository stays linear.
"""

from __future__ import annotations

import functools
import posixpath
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass

_SUFFIX_DEPTH = 3  # path suffixes of up to this many components are indexed

_JS_EXTENSIONS = (".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts", ".d.ts")
_JS_COMPILED = {".js": (".ts", ".tsx"), ".jsx": (".tsx",), ".mjs": (".mts",), ".cjs": (".cts",)}
_PYTHON_ROOTS = ("", "src/", "lib/")
_RUST_CRATE_ROOTS = frozenset({"lib.rs", "main.rs", "mod.rs", "build.rs"})
_RUST_ROOT_FOLDERS = frozenset({"bin", "tests", "examples", "benches"})
_SHELL_VARIABLE = re.compile(r"""^["']?(\$\{[^}]*\}|\$\([^)]*\)|\$\w+)["']?/""")


@dataclass(frozen=True, slots=True)
class FileIndex:
    """A repository's files, indexed for the lookups resolvers make."""

    files: frozenset[str]
    by_suffix: dict[str, list[str]]  # the last 1..3 components of a file path -> files
    folders: dict[str, list[str]]  # folder ("" for the root) -> files directly in it
    folder_suffix: dict[str, list[str]]  # the last 1..3 components of a folder -> folders

    def with_suffix(self, suffix: str) -> list[str]:
        """Files whose path is ``suffix`` or ends with ``/suffix``."""
        parts = suffix.split("/")
        candidates = self.by_suffix.get("/".join(parts[-_SUFFIX_DEPTH:]), [])
        if len(parts) <= _SUFFIX_DEPTH:
            return candidates
        return [path for path in candidates if path == suffix or path.endswith("/" + suffix)]

    def folders_with_suffix(self, suffix: str) -> list[str]:
        parts = suffix.split("/")
        candidates = self.folder_suffix.get("/".join(parts[-_SUFFIX_DEPTH:]), [])
        if len(parts) <= _SUFFIX_DEPTH:
            return candidates
        return [folder for folder in candidates if folder == suffix or folder.endswith("/" + suffix)]


Resolver = Callable[[str, str, FileIndex, str | None], Iterable[str]]
"""(importer, spec, the file index, the Go module path) -> the files the spec names."""


@functools.lru_cache(maxsize=4)
def file_index(files: frozenset[str]) -> FileIndex:
    """The index of ``files``, built once for the few file sets in use (one per build)."""
    by_suffix: dict[str, list[str]] = {}
    folders: dict[str, list[str]] = {}
    for path in sorted(files):
        parts = path.split("/")
        for depth in range(1, min(len(parts), _SUFFIX_DEPTH) + 1):
            by_suffix.setdefault("/".join(parts[-depth:]), []).append(path)
        folders.setdefault("/".join(parts[:-1]), []).append(path)
    folder_suffix: dict[str, list[str]] = {}
    for folder in folders:
        if folder:
            parts = folder.split("/")
            for depth in range(1, min(len(parts), _SUFFIX_DEPTH) + 1):
                folder_suffix.setdefault("/".join(parts[-depth:]), []).append(folder)
    return FileIndex(files, by_suffix, folders, folder_suffix)


def _join(folder: str, relative: str) -> str | None:
    """``relative`` taken from ``folder``, normalised; None if it leaves the repository."""
    path = posixpath.normpath(posixpath.join(folder, relative)) if folder else posixpath.normpath(relative)
    if path in (".", "..") or path.startswith(("../", "/")):
        return None
    return path


def _first(index: FileIndex, candidates: Iterable[str]) -> list[str]:
    for candidate in candidates:
        if candidate in index.files:
            return [candidate]
    return []


def _unique(paths: list[str]) -> list[str]:
    return paths if len(paths) == 1 else []


# ---------------------------------------------------------------------------
# Python


def _python_module_files(module: str) -> tuple[str, ...]:
    return (f"{module}.py", f"{module}/__init__.py", f"{module}.pyi", f"{module}/__init__.pyi")


def resolve_python(importer: str, spec: str, index: FileIndex, go_module: str | None) -> list[str]:
    if spec.startswith("."):
        dots = len(spec) - len(spec.lstrip("."))
        package = posixpath.dirname(importer)
        for _ in range(dots - 1):
            if not package:
                return []
            package = posixpath.dirname(package)
        rest = spec[dots:].replace(".", "/")
        if not rest:
            return _first(index, (f"{package}/__init__.py" if package else "__init__.py",))
        module = f"{package}/{rest}" if package else rest
        found = _first(index, _python_module_files(module))
        if not found and "/" not in rest:  # from . import name: a name defined in the package
            found = _first(index, (f"{package}/__init__.py" if package else "__init__.py",))
        return found
    parts = [part for part in spec.split(".") if part]
    if not parts:
        return []
    module = "/".join(parts)
    for root in _PYTHON_ROOTS:
        found = _first(index, _python_module_files(root + module))
        if found:
            return found
    folder = posixpath.dirname(importer)
    if folder:  # a script importing a module next to it
        found = _first(index, _python_module_files(f"{folder}/{module}"))
        if found:
            return found
    if len(parts) == 1 and parts[0] in sys.stdlib_module_names:
        return []
    for candidate in _python_module_files(module):
        found = _unique(index.with_suffix(candidate))
        if found:
            return found
    return []


# ---------------------------------------------------------------------------
# JavaScript / TypeScript


def resolve_js(importer: str, spec: str, index: FileIndex, go_module: str | None) -> list[str]:
    if not spec.startswith(("./", "../")) and spec not in (".", ".."):
        return []
    base = _join(posixpath.dirname(importer), spec.split("?")[0])
    if base is None:
        return []
    candidates = [base]
    stem, extension = posixpath.splitext(base)
    candidates.extend(stem + compiled for compiled in _JS_COMPILED.get(extension, ()))  # "./x.js" -> x.ts
    candidates.extend(base + extension for extension in _JS_EXTENSIONS)
    candidates.extend(f"{base}/index{extension}" for extension in _JS_EXTENSIONS)
    return _first(index, candidates)


# ---------------------------------------------------------------------------
# Go


def resolve_go(importer: str, spec: str, index: FileIndex, go_module: str | None) -> list[str]:
    if not go_module:
        return []
    module = go_module.rstrip("/")
    if spec == module:
        folder = ""
    elif spec.startswith(module + "/"):
        folder = spec[len(module) + 1 :].strip("/")
    else:
        return []
    if folder not in index.folders and folder:
        # go.mod below the repository root: the package folder ends with the import path.
        folder = next(iter(_unique(index.folders_with_suffix(folder))), folder)
    return [path for path in index.folders.get(folder, []) if path.endswith(".go") and not path.endswith("_test.go")]


# ---------------------------------------------------------------------------
# Rust


def _rust_children_folder(importer: str) -> str:
    """The folder holding the submodules of the module defined by ``importer``."""
    folder, name = posixpath.split(importer)
    if name in _RUST_CRATE_ROOTS or posixpath.basename(folder) in _RUST_ROOT_FOLDERS:
        return folder
    return posixpath.join(folder, posixpath.splitext(name)[0])


def _rust_src_root(importer: str, index: FileIndex) -> str:
    parts = importer.split("/")[:-1]
    for position in range(len(parts) - 1, -1, -1):
        if parts[position] == "src":
            return "/".join(parts[: position + 1])
    return "src" if "src" in index.folders else posixpath.dirname(importer)


def _rust_module_file(index: FileIndex, base: str, parts: list[str], skip_base: bool) -> list[str]:
    """The longest prefix of ``base/parts`` that is a module file (``x.rs`` or ``x/mod.rs``)."""
    for length in range(len(parts), -1, -1):
        if length == 0 and skip_base:
            return []
        path = "/".join([base, *parts[:length]]) if base else "/".join(parts[:length])
        if not path:
            return []
        found = _first(index, (f"{path}.rs", f"{path}/mod.rs"))
        if found:
            return found
    return []


def resolve_rust(importer: str, spec: str, index: FileIndex, go_module: str | None) -> list[str]:
    if spec.startswith("mod "):
        name = spec[4:].strip()
        folder = _rust_children_folder(importer)
        return _first(index, (posixpath.join(folder, f"{name}.rs"), posixpath.join(folder, name, "mod.rs")))
    parts = [part for part in spec.split("::") if part]
    if not parts:
        return []
    head = parts[0]
    if head == "crate":
        return _rust_module_file(index, _rust_src_root(importer, index), parts[1:], skip_base=True)
    if head in ("self", "super"):
        folder = _rust_children_folder(importer)
        rest = parts[1:]
        if head == "super":
            folder = posixpath.dirname(folder)
            while rest and rest[0] == "super":
                folder = posixpath.dirname(folder)
                rest = rest[1:]
        elif rest and rest[0] == "super":
            return resolve_rust(importer, "::".join(rest), index, go_module)
        return _rust_module_file(index, folder, rest, skip_base=head == "self")
    # A bare path may name a submodule of the current module (`mod foo; use foo::Bar;`).
    return _rust_module_file(index, _rust_children_folder(importer), parts, skip_base=True)


# ---------------------------------------------------------------------------
# Java, C#


def resolve_java(importer: str, spec: str, index: FileIndex, go_module: str | None) -> list[str]:
    parts = [part for part in spec.split(".") if part]
    if parts and parts[-1] == "*":
        folders = index.folders_with_suffix("/".join(parts[:-1])) if len(parts) > 1 else []
        return [path for folder in folders for path in index.folders[folder] if path.endswith(".java")]
    # a.b.C, or a static import a.b.C.member / a nested class a.b.C.Inner
    for length in range(len(parts), 1, -1):
        found = index.with_suffix("/".join(parts[:length]) + ".java")
        if found:
            return found
    return []


def resolve_csharp(importer: str, spec: str, index: FileIndex, go_module: str | None) -> list[str]:
    last = spec.rsplit(".", 1)[-1]
    return _unique(index.with_suffix(f"{last}.cs")) if last else []


# ---------------------------------------------------------------------------
# C, C++


def resolve_c(importer: str, spec: str, index: FileIndex, go_module: str | None) -> list[str]:
    if not spec or spec.startswith("<"):
        return []
    local = _join(posixpath.dirname(importer), spec)
    if local is not None and local in index.files:
        return [local]
    relative = posixpath.normpath(spec)
    if relative.startswith(("../", "/")) or relative in (".", ".."):
        return []
    return _unique(index.with_suffix(relative))


# ---------------------------------------------------------------------------
# Ruby, PHP, bash


def resolve_ruby(importer: str, spec: str, index: FileIndex, go_module: str | None) -> list[str]:
    with_extension = spec if spec.endswith(".rb") else f"{spec}.rb"
    if spec.startswith(("./", "../")):
        path = _join(posixpath.dirname(importer), with_extension)
        return [] if path is None else _first(index, (path,))
    if spec.startswith("/"):
        return []
    return _first(index, (f"lib/{with_extension}",))


def resolve_php(importer: str, spec: str, index: FileIndex, go_module: str | None) -> list[str]:
    if "\\" in spec:  # a namespace: PSR-4 keeps the last components as the path
        parts = [part for part in spec.split("\\") if part]
        for length in range(len(parts), 1, -1):
            found = index.with_suffix("/".join(parts[-length:]) + ".php")
            if found:
                return _unique(found)
        return []
    return _relative_path(importer, spec, index)


def resolve_bash(importer: str, spec: str, index: FileIndex, go_module: str | None) -> list[str]:
    match = _SHELL_VARIABLE.match(spec)
    if match:  # "$DIR/x.sh", "$(dirname "$0")/x.sh": taken as next to the script
        spec = "./" + spec[match.end() :]
    if "$" in spec or "`" in spec:
        return []
    return _relative_path(importer, spec.strip("\"'"), index)


def _relative_path(importer: str, spec: str, index: FileIndex) -> list[str]:
    if not spec or spec.startswith("/"):
        return []
    candidates = [_join(posixpath.dirname(importer), spec)]
    if not spec.startswith(("./", "../")):
        candidates.append(_join("", spec))
    return _first(index, (candidate for candidate in candidates if candidate is not None))
