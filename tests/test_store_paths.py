"""Every path in the store comes from ``Store`` (cclg/core/store.py).

The layout is written down once: ``store.py`` names each folder and file of the store and offers
a property or method for each (``store.usage_log_path``, ``store.turns_dir``, ``store.folder``...).
A module elsewhere that joins a name onto the store's root, or writes out a path inside one of the
store's folders (``"audit/usage.jsonl"``), keeps a second copy of the layout that a change to it
would miss. Relative names that only label or classify (``"nodes/"`` as a finding's place, a
``startswith("raw/")`` test) are no paths and pass.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from cclg.core.store import LAYOUT, STAGING

PACKAGE = Path(__file__).resolve().parent.parent / "cclg"
FOLDERS = sorted({name.split("/")[0] for name in LAYOUT} | {STAGING})
STORE_PATH = re.compile(rf"^({'|'.join(FOLDERS)})/\S+$")  # a file or folder inside a store folder


def _is_store(node: ast.expr) -> bool:
    """``store`` or ``<anything>.store``: how the package names a ``Store``."""
    return (isinstance(node, ast.Name) and node.id == "store") or (
        isinstance(node, ast.Attribute) and node.attr == "store"
    )


def _is_store_root(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "root" and _is_store(node.value)


def _names_store_path(value: object) -> bool:
    return isinstance(value, str) and STORE_PATH.match(value) is not None


def _docstrings(tree: ast.Module) -> set[int]:
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, kinds)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def store_paths_built(source: str) -> list[str]:
    """Where ``source`` builds a store path itself: ``store.root / ...``, ``os.path.join(store.root, ...)``
    or ``Path(store.root, ...)``, and string literals naming a path inside a store folder (docstrings
    and the parts of f-strings aside: those are prose and labels)."""
    tree = ast.parse(source)
    prose = _docstrings(tree) | {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and _is_store_root(node.left):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Call) and node.args and _is_store_root(node.args[0]):
            if ast.unparse(node.func) in ("os.path.join", "Path", "pathlib.Path"):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Constant) and _names_store_path(node.value) and id(node) not in prose:
            found.append(f"line {node.lineno}: {node.value!r}")
    return found


def test_only_the_store_module_builds_store_paths() -> None:
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "core" / "store.py":
            continue
        found = store_paths_built(path.read_text(encoding="utf-8"))
        if found:
            offenders[path.relative_to(PACKAGE).as_posix()] = found
    assert offenders == {}, f"store paths built outside cclg/core/store.py (give Store a property): {offenders}"


def test_the_check_sees_each_way_of_building_one() -> None:
    built = [
        'store.root / "audit" / "usage.jsonl"',
        'os.path.join(self.store.root, "active", "turns")',
        'Path(store.root, "staging")',
        'LOG = "audit/usage.jsonl"',
    ]
    for line in built:
        assert store_paths_built(line), line
    labels = [
        'def f():\n    """Reads ``active/usage.json``."""',
        'where = f"patches/{patch_id}.json"',
        'relative.startswith("raw/")',
        "store.usage_log_path",
        'store.folder("nodes") / name',
        'repo.root / "go.mod"',
    ]
    for line in labels:
        assert not store_paths_built(line), line
