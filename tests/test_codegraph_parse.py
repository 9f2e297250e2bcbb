"""The parsing layer of the code graph: definitions, references and imports per language, and import resolution."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import pytest
import tree_sitter

from cclg.codegraph import languages
from cclg.codegraph.captures import CaptureSpec
from cclg.codegraph.languages import EXTENSIONS, LANGUAGES, grammar, language_of, missing_grammars, query
from cclg.codegraph.parse import parse_source
from cclg.codegraph.resolve import resolve_imports


def parsed(language: str, source: str | bytes) -> dict[str, Any]:
    result = parse_source(language, source.encode() if isinstance(source, str) else source)
    assert result is not None
    return result


def kinds(result: dict[str, Any]) -> list[tuple[str, str]]:
    return [(d["name"], d["kind"]) for d in result["definitions"]]


def definition(result: dict[str, Any], name: str) -> dict[str, Any]:
    matches: list[dict[str, Any]] = [d for d in result["definitions"] if d["name"] == name]
    assert len(matches) == 1, matches
    return matches[0]


# ---------------------------------------------------------------- languages


def test_language_of_maps_suffixes() -> None:
    assert language_of("pkg/mod.py") == "python"
    assert language_of("pkg/mod.pyi") == "python"
    assert language_of("web/App.TSX") == "tsx"
    assert language_of("web/x.mjs") == "javascript"
    assert language_of("src/lib.rs") == "rust"
    assert language_of("inc/a.h") == "c"
    assert language_of("inc/a.hpp") == "cpp"
    assert language_of("scripts/run.bash") == "bash"
    assert language_of("README.md") is None
    assert language_of("Makefile") is None
    assert set(EXTENSIONS.values()) == set(LANGUAGES)


def test_every_grammar_and_query_loads() -> None:
    for language in LANGUAGES:
        assert grammar(language) is not None, language
        assert query(language) is not None, language
    assert not set(missing_grammars()) & set(LANGUAGES)
    assert not set(languages.query_problems()) & set(LANGUAGES)


def test_missing_grammar_gives_none_and_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(languages, "_GRAMMARS", {})
    monkeypatch.setattr(languages, "_QUERIES", {})
    monkeypatch.setattr(languages, "_MISSING", {})
    monkeypatch.setitem(sys.modules, "tree_sitter_bash", None)  # makes `import tree_sitter_bash` fail

    assert parse_source("bash", b"echo hi\n") is None
    assert grammar("bash") is None
    missing = missing_grammars()
    assert list(missing) == ["bash"]
    assert "tree_sitter_bash" in missing["bash"]
    assert parsed("python", "def f(): pass\n")["definitions"]  # the other languages still work

    # Languages can be probed by name, as a process whose workers did the parsing does.
    assert list(missing_grammars(["ruby", "bash"])) == ["bash"]
    assert grammar("ruby") is not None

    assert parse_source("cobol", b"DISPLAY 'HI'.") is None
    assert list(missing_grammars()) == ["bash", "cobol"]


def test_a_pattern_that_does_not_fit_the_grammar_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(languages, "_QUERIES", {})
    monkeypatch.setattr(languages, "_QUERY_PROBLEMS", {})
    bash = LANGUAGES["bash"]
    monkeypatch.setitem(LANGUAGES, "bash", replace(bash, patterns=(*bash.patterns, "(no_such_node) @ref")))

    result = parsed("bash", "deploy() { build_all; }\n")
    assert kinds(result) == [("deploy", "function")]
    assert result["references"] == ["build_all"]
    problems = languages.query_problems()
    assert list(problems) == ["bash"] and "no_such_node" in problems["bash"][0]


def test_every_registered_language_is_complete() -> None:
    """One record per language holds every part; a part missing cannot pass unnoticed."""
    for name, record in LANGUAGES.items():
        assert record.name == name and record.problems() == [], name
        assert record.extensions and all(language_of(f"x{suffix}") == name for suffix in record.extensions)
        assert record.wheel.startswith("tree_sitter_") and record.wheel_function, name
        assert isinstance(record.capture_spec, CaptureSpec) and callable(record.resolver), name
        lang = grammar(name)
        assert lang is not None, name
        for pattern in record.patterns:
            tree_sitter.Query(lang, pattern)  # every pattern compiles on its own against the installed grammar
        tag_query = query(name)
        assert tag_query is not None, name
        captured = {tag_query.capture_name(i) for i in range(tag_query.capture_count)}
        styles = {capture.removeprefix("import.") for capture in captured if capture.startswith("import.")}
        assert styles and styles == set(record.import_readers), name
        assert all(callable(reader) for reader in record.import_readers.values()), name


def test_an_incomplete_language_is_refused_when_registered() -> None:
    python = LANGUAGES["python"]
    with pytest.raises(ValueError, match="no import reader for \\['python'\\]"):
        replace(python, import_readers={})
    with pytest.raises(ValueError, match="import readers no pattern uses: \\['str'\\]"):
        replace(python, import_readers={**python.import_readers, "str": python.import_readers["python"]})
    with pytest.raises(ValueError, match="extensions"):
        replace(python, extensions=())
    with pytest.raises(ValueError, match="no grammar wheel"):
        replace(python, wheel="")
    with pytest.raises(ValueError, match="no tag patterns"):
        replace(python, patterns=())
    with pytest.raises(ValueError, match="no capture rules"):
        replace(python, capture_spec=None)
    with pytest.raises(ValueError, match="no import resolver"):
        replace(python, resolver=None)
    with pytest.raises(ValueError, match="claimed by 'python' and 'python2'"):
        languages._table(python, replace(python, name="python2"))
    with pytest.raises(ValueError, match="registered twice"):
        languages._table(python, replace(python, extensions=(".py3",)))


def test_parsing_from_several_threads() -> None:
    sources = [("python", PYTHON), ("go", GO), ("rust", RUST), ("java", JAVA)] * 4
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda job: parsed(*job), sources))
    assert [kinds(result) for result in results[:4]] == [kinds(result) for result in results[4:8]]


# ---------------------------------------------------------------- Python

PYTHON = '''\
"""Doc."""
from __future__ import annotations
import os.path as osp, sys
from ..m import y as z, w
from . import x
from .pkg import *
from cclg.core.store import Store

MAX_SIZE: int = 10
T = TypeVar("T")
lower = 1


@decorator
def parse_source(language: str, source: bytes) -> dict | None:
    LOCAL_CONST = 1

    def inner():
        pass

    return helper(language).strip()


class Index(Base):
    LIMIT = 3

    def open(self, path):
        self.reader.read_all(path)

    class Inner:
        def deep(self): ...
'''


def test_python_definitions() -> None:
    result = parsed("python", PYTHON)
    assert kinds(result) == [
        ("MAX_SIZE", "constant"),
        ("parse_source", "function"),
        ("Index", "class"),
        ("open", "method"),
        ("Inner", "class"),
        ("deep", "method"),
    ]
    function = definition(result, "parse_source")
    assert function["line"] == 15  # the def line, not the decorator
    assert function["signature"] == "def parse_source(language: str, source: bytes) -> dict | None:"
    assert definition(result, "open")["signature"] == "def open(self, path):"
    assert definition(result, "Index")["line"] == 24


def test_python_references_and_imports() -> None:
    result = parsed("python", PYTHON)
    refs = result["references"]
    assert refs == sorted(set(refs))
    for name in ("helper", "strip", "read_all", "reader", "Base", "decorator", "TypeVar", "Store"):
        assert name in refs
    for name in ("self", "def", "parse_source", "Index", "x", "os"):  # own definitions, keywords, short names
        assert name not in refs
    assert result["imports"] == [
        "os.path",
        "sys",
        "..m",
        "..m.y",
        "..m.w",
        ".x",
        ".pkg",
        "cclg.core.store",
        "cclg.core.store.Store",
    ]


def test_python_module_level_constants_only() -> None:
    source = "import sys\nif sys.platform == 'win32':\n    SEP = '\\\\'\nelse:\n    SEP = '/'\nclass A:\n    B_C = 1\n"
    assert kinds(parsed("python", source)) == [("SEP", "constant"), ("SEP", "constant"), ("A", "class")]


# ---------------------------------------------------------------- JavaScript, TypeScript

JAVASCRIPT = """\
const fs = require('fs'), {join} = require("./paths");
import def, { named } from "./lib/util.js";
export { again } from '../shared';
export const MAX_ITEMS = 100;
export const handler = async (event) => process(event);
let counter = 0;
export default class Widget extends Base {
  static count = 1;
  render() { return this.view.draw(counter); }
  #secret() {}
}
function helper() { function local() {} return import("./lazy"); }
exports.legacy = function () {};
"""


def test_javascript() -> None:
    result = parsed("javascript", JAVASCRIPT)
    assert kinds(result) == [
        ("MAX_ITEMS", "constant"),
        ("handler", "function"),
        ("Widget", "class"),
        ("render", "method"),
        ("#secret", "method"),
        ("helper", "function"),
        ("legacy", "function"),
    ]
    assert definition(result, "MAX_ITEMS")["signature"] == "export const MAX_ITEMS = 100;"
    assert definition(result, "render")["line"] == 9
    assert result["imports"] == ["fs", "./paths", "./lib/util.js", "../shared", "./lazy"]
    assert {"draw", "view", "process", "Base", "counter", "local"} <= set(result["references"])
    assert "this" not in result["references"] and "const" not in result["references"]


TYPESCRIPT = """\
import type { Config } from "./config";
import legacy = require("./legacy");
export interface Store { get(key: string): Value; }
export type Value = string | number;
export enum Mode { Fast, Slow }
export abstract class Base implements Store {
  abstract get(key: string): Value;
  protected log(message: string): void { console.info(message); }
}
export function make(config: Config): Store { return new Impl(config); }
namespace Internal { export const LIMIT = 3; }
"""


def test_typescript() -> None:
    result = parsed("typescript", TYPESCRIPT)
    assert kinds(result) == [
        ("Store", "interface"),
        ("get", "method"),
        ("Value", "type"),
        ("Mode", "enum"),
        ("Base", "class"),
        ("get", "method"),
        ("log", "method"),
        ("make", "function"),
        ("Internal", "module"),
    ]
    assert result["imports"] == ["./config", "./legacy"]
    assert {"Config", "Impl", "console", "info"} <= set(result["references"])
    assert "Store" not in result["references"]


def test_tsx() -> None:
    source = (
        'import { Button } from "./Button";\n'
        "export function App(props: Props) {\n"
        "  return <Button label={props.title} />;\n"
        "}\n"
    )
    result = parsed("tsx", source)
    assert kinds(result) == [("App", "function")]
    assert result["imports"] == ["./Button"]
    assert {"Button", "Props", "props", "title"} <= set(result["references"])


# ---------------------------------------------------------------- Go, Rust

GO = """\
package store

import (
	"fmt"
	db "example.com/app/internal/db"
)

const Version = "1.0"

const (
	ModeA = iota
	ModeB
)

type Store struct{ conn *db.Conn }

type Reader interface {
	Read(key string) ([]byte, error)
}

func (s *Store) Get(key string) string {
	type local struct{}
	return fmt.Sprintf("%s", s.conn.Lookup(key))
}

func New() *Store { return &Store{} }
"""


def test_go() -> None:
    result = parsed("go", GO)
    assert kinds(result) == [
        ("Version", "constant"),
        ("ModeA", "constant"),
        ("ModeB", "constant"),
        ("Store", "type"),
        ("Reader", "interface"),
        ("Read", "method"),
        ("Get", "method"),
        ("New", "function"),
    ]
    assert definition(result, "Get")["signature"] == "func (s *Store) Get(key string) string {"
    assert result["imports"] == ["fmt", "example.com/app/internal/db"]
    assert {"Sprintf", "Lookup", "conn", "Conn"} <= set(result["references"])
    assert "string" not in result["references"]


RUST = """\
use crate::store::index::Index;
use std::{io::{self, Read}, fmt as f};
use super::*;
mod parser;
pub mod inline { pub fn inner() {} }
pub const MAX: usize = 10;
static NAME: &str = "x";
pub struct Store<T> { items: Vec<T> }
pub enum Kind { A, B }
pub trait Source { fn read(&self) -> Kind; }
type Alias = Store<u8>;
impl<T> Store<T> {
    const LIMIT: usize = 3;
    pub fn new() -> Self { let index = Index::open(); Self { items: Vec::new() } }
}
macro_rules! square { ($x:expr) => { $x * $x }; }
fn helper() { fn nested() {} }
"""


def test_rust() -> None:
    result = parsed("rust", RUST)
    assert kinds(result) == [
        ("inline", "module"),
        ("inner", "function"),
        ("MAX", "constant"),
        ("NAME", "constant"),
        ("Store", "type"),
        ("Kind", "enum"),
        ("Source", "interface"),
        ("read", "method"),
        ("Alias", "type"),
        ("new", "method"),
        ("square", "macro"),
        ("helper", "function"),
    ]
    assert result["imports"] == [
        "crate::store::index::Index",
        "std::io",
        "std::io::Read",
        "std::fmt",
        "super",
        "mod parser",
    ]
    assert {"Index", "open", "Vec", "items"} <= set(result["references"])


# ---------------------------------------------------------------- Java, C#

JAVA = """\
package com.acme.store;

import com.acme.util.Strings;
import static com.acme.util.Checks.notNull;
import java.util.*;

@Service
public class Store extends Base implements Source {
    public static final int MAX_SIZE = 10;
    private static final Logger log = Logger.get();

    @Override
    public String read(String key) {
        Runnable r = new Runnable() { public void run() {} };
        return Strings.trim(notNull(key));
    }

    interface Listener { void changed(); }
    enum Mode { FAST }
    record Entry(String key) {}
}
"""


def test_java() -> None:
    result = parsed("java", JAVA)
    assert kinds(result) == [
        ("Store", "class"),
        ("MAX_SIZE", "constant"),
        ("read", "method"),
        ("Listener", "interface"),
        ("changed", "method"),
        ("Mode", "enum"),
        ("Entry", "class"),
    ]
    assert definition(result, "read")["line"] == 13  # the name's line, after the annotation
    assert definition(result, "read")["signature"] == "public String read(String key) {"
    assert result["imports"] == ["com.acme.util.Strings", "com.acme.util.Checks.notNull", "java.util.*"]
    assert {"Strings", "trim", "notNull", "Service", "Logger", "Base"} <= set(result["references"])


CSHARP = """\
using System;
using Acme.Util;
using static Acme.Checks;
using Alias = Acme.Other.Thing;

namespace Acme.Store {
    public class Store : IStore {
        public const int MaxSize = 10;
        public string Read(string key) { return Helpers.Trim(key); }
    }
    public interface IStore { string Read(string key); }
    public enum Mode { Fast }
    public struct Point { }
    public record Entry(string Key);
}
"""


def test_csharp() -> None:
    result = parsed("csharp", CSHARP)
    assert kinds(result) == [
        ("Acme.Store", "module"),
        ("Store", "class"),
        ("MaxSize", "constant"),
        ("Read", "method"),
        ("IStore", "interface"),
        ("Read", "method"),
        ("Mode", "enum"),
        ("Point", "type"),
        ("Entry", "class"),
    ]
    assert result["imports"] == ["System", "Acme.Util", "Acme.Checks", "Acme.Other.Thing"]
    assert {"Helpers", "Trim"} <= set(result["references"])


# ---------------------------------------------------------------- C, C++

C_SOURCE = """\
#include <stdio.h>
#include "store/index.h"
#ifndef STORE_H
#define STORE_H
#define MAX_ITEMS 64
#define SQUARE(x) ((x) * (x))
typedef struct store { int count; } store_t;
typedef int handle;
enum mode { FAST, SLOW };
int store_open(const char *path);
int store_close(handle h);
static char *store_name(store_t *s) { return lookup(s->count); }
int store_close(handle h) { return release(h); }
#endif
"""


def test_c() -> None:
    result = parsed("c", C_SOURCE)
    assert kinds(result) == [
        ("STORE_H", "macro"),
        ("MAX_ITEMS", "macro"),
        ("SQUARE", "macro"),
        ("store", "type"),
        ("store_t", "type"),
        ("handle", "type"),
        ("mode", "enum"),
        ("store_open", "function"),  # a prototype with no definition here
        ("store_name", "function"),
        ("store_close", "function"),  # the definition, not the prototype
    ]
    assert definition(result, "store_close")["line"] == 13
    assert result["imports"] == ["<stdio.h>", "store/index.h"]
    assert {"lookup", "release", "count"} <= set(result["references"])


CPP = """\
#include <vector>
#include "index.hpp"
namespace acme {
class Store : public Base {
public:
    void open();
    int size() const { return items.size(); }
private:
    std::vector<int> items;
};
struct Point { int x; };
using Items = std::vector<int>;
}
void acme::Store::open() { this->reset(); }
template <typename T> T twice(T x) { return x + x; }
"""


def test_cpp() -> None:
    result = parsed("cpp", CPP)
    assert kinds(result) == [
        ("acme", "module"),
        ("Store", "class"),
        ("open", "method"),
        ("size", "method"),
        ("Point", "type"),
        ("Items", "type"),
        ("open", "method"),
        ("twice", "function"),
    ]
    assert result["imports"] == ["<vector>", "index.hpp"]
    assert {"reset", "items", "vector", "Base"} <= set(result["references"])


# ---------------------------------------------------------------- Ruby, PHP, bash

RUBY = """\
require "json"
require_relative "store/index"
require_relative "../shared"
MAX = 3
module Acme
  class Store < Base
    LIMIT = 1
    def read(key) = index.fetch(key)
    def self.build; new; end
  end
end
def helper; Acme::Store.build; end
"""


def test_ruby() -> None:
    result = parsed("ruby", RUBY)
    assert kinds(result) == [
        ("MAX", "constant"),
        ("Acme", "module"),
        ("Store", "class"),
        ("LIMIT", "constant"),
        ("read", "method"),
        ("build", "method"),
        ("helper", "function"),
    ]
    assert result["imports"] == ["json", "./store/index", "../shared"]
    assert {"fetch", "index", "Base"} <= set(result["references"])


PHP = """\
<?php
namespace App\\Models;
use App\\Support\\Str;
use Vendor\\Pkg\\{Alpha, Beta\\Gamma};
require_once __DIR__ . '/helpers.php';
include 'config.php';
const VERSION = '1.0';
function helper($value) { return Str::lower($value); }
interface Repository { public function find($id); }
class User extends Model implements Repository {
    const TABLE = 'users';
    public function find($id) { return $this->query()->where($id); }
}
"""


def test_php() -> None:
    result = parsed("php", PHP)
    assert kinds(result) == [
        ("App\\Models", "module"),
        ("VERSION", "constant"),
        ("helper", "function"),
        ("Repository", "interface"),
        ("find", "method"),
        ("User", "class"),
        ("TABLE", "constant"),
        ("find", "method"),
    ]
    assert result["imports"] == [
        "App\\Support\\Str",
        "Vendor\\Pkg\\Alpha",
        "Vendor\\Pkg\\Beta\\Gamma",
        "./helpers.php",
        "config.php",
    ]
    assert {"Str", "lower", "Model", "query", "where"} <= set(result["references"])


def test_bash() -> None:
    source = (
        "#!/bin/bash\n"
        "source ./lib/common.sh\n"
        '. "$DIR/other.sh"\n'
        'function setup { prepare_env "$HOME"; }\n'
        "teardown() { cleanup; }\n"
        "setup\n"
    )
    result = parsed("bash", source)
    assert kinds(result) == [("setup", "function"), ("teardown", "function")]
    assert definition(result, "teardown")["signature"] == "teardown() { cleanup; }"
    assert result["imports"] == ["./lib/common.sh", "$DIR/other.sh"]
    assert {"prepare_env", "cleanup", "HOME", "DIR"} <= set(result["references"])
    assert "setup" not in result["references"]


# ---------------------------------------------------------------- robustness

JUNK = {
    "empty": b"",
    "binary": bytes(range(256)) * 8 + b"\x00\x00\xff",
    "invalid utf-8": b"def f\xff\xfe(x):\n    return x\xc3\x28 + caf\xe9\n\xed\xa0\x80 = 1\n",
    "syntax error": b"class (:\n  def def def {{{ ]] ) \n  return ;;; <?php } fn mod use import from\n",
    "only newlines": b"\n" * 1000,
    "nul bytes": b"\x00" * 500,
    "unbalanced": b"(" * 2000 + b"{" * 2000,
}


@pytest.mark.parametrize("language", tuple(LANGUAGES))
def test_odd_input_never_raises(language: str) -> None:
    for label, source in JUNK.items():
        result = parse_source(language, source)
        assert result is not None, label
        assert set(result) == {"definitions", "references", "imports"}
        for item in result["definitions"]:
            assert isinstance(item["name"], str) and isinstance(item["line"], int) and item["line"] >= 1
            assert len(item["signature"]) <= 200
        assert all(isinstance(name, str) and len(name) >= 3 for name in result["references"])
        assert all(isinstance(spec, str) for spec in result["imports"])


def test_invalid_utf8_is_replaced() -> None:
    result = parsed("javascript", b'import x from "./caf\xe9.js";\nfunction caf\xe9_x() { return x; }\n')
    assert result["imports"] == ["./caf\ufffd.js"]
    assert all(isinstance(d["name"], str) for d in result["definitions"])


def test_long_lines_give_short_signatures() -> None:
    source = "var a = 1;" * 500 + "function deep() { return 1; }" + "var b = 2;" * 500
    result = parsed("javascript", source)
    found = definition(result, "deep")
    assert found["line"] == 1
    assert found["signature"].startswith("function deep()")
    assert len(found["signature"]) <= 200


# ---------------------------------------------------------------- resolution


def resolve(importer: str, language: str, specs: list[str], files: set[str], **kwargs: Any) -> list[str]:
    return resolve_imports(importer, language, specs, frozenset(files), **kwargs)


def test_resolve_python() -> None:
    files = {
        "app/__init__.py",
        "app/core/__init__.py",
        "app/core/store.py",
        "app/core/index.py",
        "app/util.py",
        "src/lib2/__init__.py",
        "src/lib2/api.py",
        "tools/scripts/helper.py",
        "tools/scripts/run.py",
        "vendored/deep/thing/mod.py",
    }
    importer = "app/core/store.py"
    specs = ["app.util", "app.util.helper", "os.path", "lib2.api", ".index", ".index.Index", "..util", ".", ".name"]
    assert resolve(importer, "python", specs, files) == [
        "app/core/__init__.py",
        "app/core/index.py",
        "app/util.py",
        "src/lib2/api.py",
    ]
    assert resolve(importer, "python", ["app", "app.core"], files) == ["app/__init__.py", "app/core/__init__.py"]
    assert resolve(importer, "python", ["...too.far", "thing.mod"], files) == ["vendored/deep/thing/mod.py"]
    assert resolve("tools/scripts/run.py", "python", ["helper"], files) == ["tools/scripts/helper.py"]
    assert resolve(importer, "python", ["app.core.store"], files) == []  # never the importer itself


def test_resolve_javascript_and_typescript() -> None:
    files = {
        "web/src/app.ts",
        "web/src/lib/util.ts",
        "web/src/lib/index.ts",
        "web/src/components/Button.tsx",
        "web/src/legacy.js",
        "web/src/types.d.ts",
        "web/shared/config.json",
    }
    importer = "web/src/app.ts"
    specs = ["./lib/util.js", "./lib", "./components/Button", "./legacy", "./types", "../shared/config.json", "react"]
    assert resolve(importer, "typescript", specs, files) == [
        "web/shared/config.json",
        "web/src/components/Button.tsx",
        "web/src/legacy.js",
        "web/src/lib/index.ts",
        "web/src/lib/util.ts",
        "web/src/types.d.ts",
    ]
    assert resolve(importer, "javascript", ["../../../outside", "@/lib/util"], files) == []


def test_resolve_go() -> None:
    files = {
        "go.mod",
        "main.go",
        "pkg/store/store.go",
        "pkg/store/index.go",
        "pkg/store/store_test.go",
        "pkg/store/sub/x.go",
    }
    specs = ["example.com/app/pkg/store", "fmt", "example.com/other/pkg"]
    assert resolve("main.go", "go", specs, files, go_module="example.com/app") == [
        "pkg/store/index.go",
        "pkg/store/store.go",
    ]
    assert resolve("main.go", "go", specs, files) == []  # no module path, no resolution


def test_resolve_rust() -> None:
    files = {
        "src/lib.rs",
        "src/store.rs",
        "src/store/index.rs",
        "src/store/cache/mod.rs",
        "src/parser/mod.rs",
        "src/parser/lexer.rs",
    }
    assert resolve("src/lib.rs", "rust", ["mod store", "mod parser", "mod missing"], files) == [
        "src/parser/mod.rs",
        "src/store.rs",
    ]
    assert resolve("src/store.rs", "rust", ["mod index", "mod cache"], files) == [
        "src/store/cache/mod.rs",
        "src/store/index.rs",
    ]
    assert resolve("src/parser/mod.rs", "rust", ["mod lexer"], files) == ["src/parser/lexer.rs"]
    specs = ["crate::store::index::Index", "crate::parser::Parser", "std::io::Read", "crate::Thing"]
    assert resolve("src/lib.rs", "rust", specs, files) == ["src/parser/mod.rs", "src/store/index.rs"]
    assert resolve("src/store/index.rs", "rust", ["super::cache::Cache", "super", "self::x"], files) == [
        "src/store.rs",
        "src/store/cache/mod.rs",
    ]


def test_resolve_java_and_csharp() -> None:
    files = {
        "core/src/main/java/com/acme/util/Strings.java",
        "core/src/main/java/com/acme/util/Checks.java",
        "app/src/main/java/com/acme/App.java",
        "cs/Util/Helpers.cs",
        "cs/Models/Thing.cs",
        "cs/Other/Thing.cs",
    }
    importer = "app/src/main/java/com/acme/App.java"
    specs = ["com.acme.util.Strings", "com.acme.util.Checks.notNull", "java.util.List"]
    assert resolve(importer, "java", specs, files) == [
        "core/src/main/java/com/acme/util/Checks.java",
        "core/src/main/java/com/acme/util/Strings.java",
    ]
    assert resolve(importer, "java", ["com.acme.util.*"], files) == [
        "core/src/main/java/com/acme/util/Checks.java",
        "core/src/main/java/com/acme/util/Strings.java",
    ]
    assert resolve("cs/Program.cs", "csharp", ["Acme.Util.Helpers", "Acme.Thing", "System"], files) == [
        "cs/Util/Helpers.cs"  # Thing.cs is ambiguous
    ]


def test_resolve_c_and_cpp() -> None:
    files = {"src/main.c", "src/util.h", "include/store/index.h", "lib/a/config.h", "lib/b/config.h"}
    specs = ["util.h", "store/index.h", "config.h", "<stdio.h>"]
    assert resolve("src/main.c", "c", specs, files) == ["include/store/index.h", "src/util.h"]
    assert resolve("lib/a/x.cpp", "cpp", ["config.h"], files) == ["lib/a/config.h"]


def test_resolve_ruby_php_bash() -> None:
    files = {
        "lib/acme/store.rb",
        "lib/acme/store/index.rb",
        "lib/shared.rb",
        "app/models/user.php",
        "app/helpers.php",
        "config.php",
        "app/Support/Str.php",
        "scripts/run.sh",
        "scripts/lib/common.sh",
        "scripts/other.sh",
    }
    ruby = resolve("lib/acme/store.rb", "ruby", ["./store/index", "../shared", "acme/store", "json"], files)
    assert ruby == ["lib/acme/store/index.rb", "lib/shared.rb"]
    assert resolve("bin/tool.rb", "ruby", ["acme/store"], files) == ["lib/acme/store.rb"]
    php = resolve(
        "app/models/user.php", "php", ["../helpers.php", "config.php", "App\\Support\\Str", "Vendor\\X"], files
    )
    assert php == ["app/Support/Str.php", "app/helpers.php", "config.php"]
    specs = ["./lib/common.sh", "$DIR/other.sh", "$(dirname $0)/missing.sh", "$HOME/.bashrc"]
    assert resolve("scripts/run.sh", "bash", specs, files) == ["scripts/lib/common.sh", "scripts/other.sh"]


def test_resolve_unknown_language_or_no_specs() -> None:
    assert resolve("a.py", "python", [], {"a.py", "b.py"}) == []
    assert resolve("a.xyz", "cobol", ["b"], {"b"}) == []


def test_parse_then_resolve_round_trip() -> None:
    files = {"pkg/__init__.py", "pkg/a.py", "pkg/b.py"}
    facts = parsed("python", "from . import b\nfrom pkg.a import thing\nimport json\n")
    assert resolve("pkg/c.py", "python", facts["imports"], files) == ["pkg/a.py", "pkg/b.py"]
