"""The package keeps the shape the README's architecture section draws.

The README's table under "## Architecture" is the one description of the parts: each row is one
part, its package and its modules from the bottom up. This test reads that table, so the map and
the code cannot disagree:

- every module of the package sits in exactly one row, and every module a row names exists;
- a module imports only modules listed before it (at module level or inside a function alike),
  so the library never imports a surface and the code graph never imports the pack compiler;
- a sub-package is one row: its modules sit together, and imports between packages point one way;
- each sub-package's ``__init__`` docstring maps every module in it.

Below them: the surfaces reach cclg only through the library, only the index writes SQL on its
tables, and each hook event is spelled in one place.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "cclg"
MAX_FUNCTION_LINES = 60  # lines of code, the docstring left out


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def architecture_table(readme: str) -> list[tuple[str, str, list[str]]]:
    """(part, package, modules bottom up) for each row of the README's architecture table."""
    section = readme.split("\n## Architecture\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 4 or not cells[1].startswith("`cclg"):
            continue
        package = cells[1].strip("`")
        names = re.findall(r"`([\w.]+)`", cells[2])
        modules = [package if name == "__init__" else f"{package}.{name}" for name in names]
        rows.append((cells[0], package, modules))
    return rows


ROWS = architecture_table((ROOT / "README.md").read_text(encoding="utf-8"))
ORDER = [module for _, _, modules in ROWS for module in modules]


def part_of(module: str) -> str:
    """The part (the row) a module belongs to: ``cclg.ledger.index`` -> ``the ledger``; the package's
    own top-level modules sit in several parts (the contract at the bottom, the surfaces at the top)."""
    for part, _, modules in ROWS:
        if module in modules:
            return part
    raise KeyError(module)


def imported(path: Path) -> set[str]:
    """The cclg modules ``path`` imports, wherever the import statement is (but under ``if
    TYPE_CHECKING:``, which type checkers read and Python never runs)."""
    found = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for block in ast.walk(tree):
        if isinstance(block, ast.If) and isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING":
            block.body = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "cclg":
            for alias in node.names:  # ``from cclg.ledger import index`` names a module
                candidate = f"{node.module}.{alias.name}"
                found.add(candidate if candidate in MODULES else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "cclg")
    return found


def test_the_table_is_read() -> None:
    """The parser is not blind: the table has rows, and the bottom and top are where they belong."""
    assert len(ROWS) >= 8
    assert ORDER[0] == "cclg" and "cclg.errors" in ORDER[:3]
    assert ORDER.index("cclg.api") < ORDER.index("cclg.cli")


def test_every_module_has_one_place() -> None:
    assert len(ORDER) == len(set(ORDER)), "a module is named in two rows of the README's architecture table"
    missing = sorted(set(MODULES) - set(ORDER))
    assert not missing, f"give each module its place in the README's architecture table: {missing}"
    gone = sorted(set(ORDER) - set(MODULES))
    assert not gone, f"the README's architecture table names modules that do not exist: {gone}"


def test_a_package_is_one_row() -> None:
    """A sub-package is one part: its modules are not spread over several rows."""
    for _, package, modules in ROWS:
        strays = [module for module in modules if module != package and module.rsplit(".", 1)[0] != package]
        assert not strays, f"{package}'s row names modules of another package: {strays}"
    packages = [package for _, package, _ in ROWS if package != "cclg"]
    assert len(packages) == len(set(packages)), f"a package has two rows: {packages}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down(module: str) -> None:
    rank = ORDER.index(module)
    upward = sorted(name for name in imported(MODULES[module]) - {module} if ORDER.index(name) > rank)
    assert not upward, f"{module} imports {upward}, which sit above it in the README's architecture table"


def test_parts_import_one_way() -> None:
    """Between two parts imports go one way only (the lower never imports the higher)."""
    edges = {
        (part_of(module), part_of(name))
        for module, path in MODULES.items()
        for name in imported(path)
        if part_of(name) != part_of(module)
    }
    both = sorted((a, b) for a, b in edges if (b, a) in edges and a < b)
    assert not both, f"parts that import each other: {both}"


@pytest.mark.parametrize("package", sorted({p for _, p, _ in ROWS if p != "cclg" and MODULES[p].name == "__init__.py"}))
def test_a_package_maps_its_modules(package: str) -> None:
    """Each sub-package's docstring names every module in it: the folder explains itself."""
    tree = ast.parse(MODULES[package].read_text(encoding="utf-8"))
    doc = ast.get_docstring(tree) or ""
    inside = [m.rsplit(".", 1)[1] for m in MODULES if m.rsplit(".", 1)[0] == package and m != package]
    unnamed = [name for name in inside if f"``{name}``" not in doc]
    assert not unnamed, f"{package}/__init__.py's docstring does not map {unnamed}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_functions_stay_small(module: str) -> None:
    source = MODULES[module].read_text(encoding="utf-8")
    long = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            has_docstring = len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
            start = body[1].lineno if has_docstring else body[0].lineno
            if (node.end_lineno or start) - start + 1 > MAX_FUNCTION_LINES:
                long.append(node.name)
    assert not long, f"{module}: functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_the_checks_see_a_violation(tmp_path: Path) -> None:
    """The import scan is not blind: an upward import written in a function is found."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "if TYPE_CHECKING:\n    from cclg.hook import Call\n"
        "def f():\n    from cclg.api import status\n    from cclg.ledger import index\n"
    )
    assert imported(sample) == {"cclg.api", "cclg.ledger.index"}


# The surfaces: the command line, the web view, the MCP server and its tools, the hook.
SURFACES = sorted(
    name for name in MODULES if name.split(".")[1:2] in (["cli"], ["ui"], ["hook"], ["mcp_tools"], ["mcp_server"])
)
# The hook's own start-up-light modules: what it imports before (or besides) a handler reaches the library,
# the payload's reading (``fields``), the token estimate (``text``) and session ids (``ids``).
HOOK_LIGHT_MODULES = [
    "cclg.core.text",
    "cclg.core.ids",
    "cclg.core.fields",
    "cclg.core.hook_events",
    "cclg.core.runtime",
]
SURFACES_MAY_IMPORT = {
    "cclg",  # the package itself: its version
    "cclg.errors",
    "cclg.format",
    *HOOK_LIGHT_MODULES,
    *(name for name in MODULES if name == "cclg.api" or name.startswith("cclg.api.")),
    *SURFACES,  # a command module imports ``cli.common``, the MCP server its tools
}


def forbidden_for_a_surface(path: Path) -> list[str]:
    """The cclg modules ``path`` imports that a surface may not: anything but the library, the errors,
    the contract's vocabularies and the hook's light modules."""
    return sorted(imported(path) - SURFACES_MAY_IMPORT)


@pytest.mark.parametrize("module", SURFACES)
def test_the_surfaces_reach_cclg_only_through_the_library(module: str) -> None:
    """The library is the surface: every operation the command line, MCP or the hook offers is one
    ``cclg.api`` function, so a surface parses, calls and prints, and a change of the modules below
    the library never reaches a surface."""
    forbidden = forbidden_for_a_surface(MODULES[module])
    assert not forbidden, f"{module} imports {forbidden}: go through cclg.api (give the operation an api function)"


def test_the_surface_check_sees_a_violation(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from cclg import api, errors\nfrom cclg.api import learning\nfrom cclg.core.text import estimate_tokens\n"
        "def f():\n    from cclg.learning import turns\n    from cclg.core.store import Store\n"
    )
    assert forbidden_for_a_surface(sample) == ["cclg.core.store", "cclg.learning.turns"]


# ---------------------------------------------------------------- the index owns its SQL

# The tables of the search index (``cclg/ledger/index.py``'s schema). ``meta`` is also a table of the code
# graph's own search index, so the index's is caught by its connection instead (``index.db``).
INDEX_TABLES = ("nodes", "nodes_fts", "nodes_vocab", "patches", "patch_nodes")
INDEX_SQL = re.compile(
    r"\b(?:FROM|INTO|UPDATE|JOIN)\s+(?:" + "|".join(INDEX_TABLES) + r")\b"  # a statement on one of its tables
    r"|\bindex\.db\b"  # the index's own connection, which only its named queries use
    r"|\brow_factory\b"  # how the index's rows read is the index's business
    r"|connect\([^)]*index_path"  # opening the index's file
)  # SQL keywords in capitals, as cclg writes them: prose "from nodes" is no statement


def index_sql(path: Path) -> list[str]:
    """The lines of ``path`` that write SQL against the search index's tables or reach its connection."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [f"{path.name}:{number}: {line.strip()}" for number, line in enumerate(lines, 1) if INDEX_SQL.search(line)]


def test_only_the_index_writes_sql_against_its_tables() -> None:
    """Every other module asks ``Index`` a named query: the tables can change in one place."""
    found = [line for name, path in MODULES.items() if name != "cclg.ledger.index" for line in index_sql(path)]
    assert not found, "ask cclg.ledger.index.Index a named query instead:\n" + "\n".join(found)


def test_the_sql_check_sees_a_query(tmp_path: Path) -> None:
    """The SQL scan is not blind: a query on ``nodes``, the index's connection and a row factory are found."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        'rows = db.execute("SELECT id FROM nodes WHERE current = 1")\n'
        "index.db.commit()\n"
        "db.row_factory = sqlite3.Row\n"
        "# the nodes of the pack, from the index\n"
    )
    assert len(index_sql(sample)) == 3


def spelled_events(source: str) -> list[str]:
    """The hook events ``source`` spells out as string literals: the hook's own names, the names a
    session's log gives them, the host's names. A dict key or a subscript is a field name, not an event
    (a learned rule's ``session_start`` says whether it may open a session), and is left out."""
    from cclg.core.hook_events import EVENTS, logged
    from cclg.hook import HOST_EVENTS

    names = {*EVENTS, *map(logged, EVENTS), *HOST_EVENTS.values()}
    tree = ast.parse(source)
    fields = {id(key) for node in ast.walk(tree) if isinstance(node, ast.Dict) for key in node.keys}
    fields |= {id(node.slice) for node in ast.walk(tree) if isinstance(node, ast.Subscript)}
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in names and id(node) not in fields
    ]


@pytest.mark.parametrize("module", sorted(set(MODULES) - {"cclg.core.hook_events", "cclg.hook"}))
def test_hook_events_are_named_in_one_place(module: str) -> None:
    """Each hook event is spelled once, in ``cclg.core.hook_events`` (and the host's name only in
    ``cclg.hook.HOST_EVENTS``); everywhere else reads the constants, and ``logged`` for a log's name."""
    spelled = spelled_events(MODULES[module].read_text(encoding="utf-8"))
    assert not spelled, f"{module} spells hook events {spelled}: use cclg.core.hook_events"


def test_the_hook_spells_only_the_hosts_names() -> None:
    from cclg.hook import HOST_EVENTS

    spelled = spelled_events(MODULES["cclg.hook"].read_text(encoding="utf-8"))
    assert sorted(spelled) == sorted(HOST_EVENTS.values()), "the hook's own tables read cclg.core.hook_events"


def test_the_event_check_sees_a_spelled_event() -> None:
    assert spelled_events('if event.get("event") == "post_compact":\n    pass\n') == ["post_compact"]
    assert spelled_events('found = {"session_start": 1}["session_start"]\n') == []
