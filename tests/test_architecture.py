"""The shape of the package: imports point one way, and no module or function grows too big.

``LAYERS`` lists every module of the package from the bottom up (the README's
architecture section shows the same picture). A module may import only modules
listed before it, at module level or inside a function alike: so the library
never imports a surface, the code graph never imports the pack compiler, and the
writer and the read model never point at each other. A new module fails here
until it is given its place.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "cclg"

LAYERS: list[list[str]] = [
    # the package itself: its version, and the library's names loaded on first use (a string import)
    [""],
    # foundations: no knowledge of stores
    [
        "errors",
        "format",
        "text",
        "hook_events",
        "embed",
        "ids",
        "fields",
        "records",
        "secrets",
        "labels",
        "fencing",
        "files",
        "repository",
        "config",
        "config_text",
        "codex_trust",
    ],
    # the files of a store, and connecting a host to one
    ["store", "install"],
    # the code graph: repositories, below everything that reads memories
    [
        "codegraph",
        "codegraph.tags",
        "codegraph.captures",
        "codegraph.resolvers",
        "codegraph.languages",
        "codegraph.parse",
        "codegraph.resolve",
        "codegraph.history",
        "codegraph.search_index",
        "codegraph.stored",
        "codegraph.rank",
        "codegraph.context",
        "codegraph.build",
    ],
    # the ledger and its projections
    ["lattice", "view", "index", "staging", "ledger", "undo", "lineage", "promotion"],
    # reading and compiling
    [
        "query",
        "search",
        "semantic",
        "relevance",
        "sessions",
        "usage_prior",
        "usage",
        "selection",
        "rendering",
        "sensors",
        "turns",
    ],
    # operations
    ["intake", "container", "container_import", "redaction", "purge", "adoption", "doctor", "demo", "rules", "distill"],
    # the library: what the surfaces share, one module per area, and the package that gathers them
    [
        "api.surfaces",
        "api.memories",
        "api.retrieval",
        "api.code",
        "api.learning",
        "api.hosts",
        "api.container",
        "api",
    ],
    # the surfaces
    ["hook", "mcp_tools", "mcp_server"],
    [
        "cli.common",
        "cli.memory",
        "cli.inspect",
        "cli.retrieval",
        "cli.containers",
        "cli.code",
        "cli.hosts",
        "cli.turns",
        "cli.sessions",
        "cli.projects",
        "cli",
    ],
    ["cli.__main__", "__main__"],
]
ORDER = [f"cclg.{name}" if name else "cclg" for layer in LAYERS for name in layer]
MAX_FUNCTION_LINES = 60  # lines of code, the docstring left out


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


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
            for alias in node.names:  # ``from cclg import x`` may name a module
                candidate = f"{node.module}.{alias.name}"
                found.add(candidate if candidate in MODULES else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "cclg")
    return found


def test_every_module_has_a_place() -> None:
    assert sorted(MODULES) == sorted(ORDER), "give each new module its place in LAYERS (and the README)"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down(module: str) -> None:
    rank = ORDER.index(module)
    upward = sorted(name for name in imported(MODULES[module]) - {module} if ORDER.index(name) > rank)
    assert not upward, f"{module} imports {upward}, which sit above it"


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


# The surfaces: the command line, the MCP server and its tools, the hook.
SURFACES = sorted(
    name for name in MODULES if name.split(".")[1:2] in (["cli"], ["hook"], ["mcp_tools"], ["mcp_server"])
)
# The hook's own start-up-light modules: what it imports before (or besides) a handler reaches the library,
# the payload's reading (``fields``), the token estimate (``text``) and session ids (``ids``).
HOOK_LIGHT_MODULES = ["cclg.text", "cclg.ids", "cclg.fields", "cclg.hook_events"]
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
        "from cclg import api, errors\nfrom cclg.api import learning\nfrom cclg.text import estimate_tokens\n"
        "def f():\n    from cclg import turns\n    from cclg.store import Store\n"
    )
    assert forbidden_for_a_surface(sample) == ["cclg.store", "cclg.turns"]


def test_the_checks_see_a_violation(tmp_path: Path) -> None:
    """The import scan is not blind: an upward import written in a function is found."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "if TYPE_CHECKING:\n    from cclg.hook import Call\n"
        "def f():\n    from cclg.api import status\n    from cclg import rendering\n"
    )
    assert imported(sample) == {"cclg.api", "cclg.rendering"}


# ---------------------------------------------------------------- the index owns its SQL

# The tables of the search index (``cclg/index.py``'s schema). ``meta`` is also a table of the code
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
    found = [line for name, path in MODULES.items() if name != "cclg.index" for line in index_sql(path)]
    assert not found, "ask cclg.index.Index a named query instead:\n" + "\n".join(found)


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
    from cclg.hook import HOST_EVENTS
    from cclg.hook_events import EVENTS, logged

    names = {*EVENTS, *map(logged, EVENTS), *HOST_EVENTS.values()}
    tree = ast.parse(source)
    fields = {id(key) for node in ast.walk(tree) if isinstance(node, ast.Dict) for key in node.keys}
    fields |= {id(node.slice) for node in ast.walk(tree) if isinstance(node, ast.Subscript)}
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in names and id(node) not in fields
    ]


@pytest.mark.parametrize("module", sorted(set(MODULES) - {"cclg.hook_events", "cclg.hook"}))
def test_hook_events_are_named_in_one_place(module: str) -> None:
    """Each hook event is spelled once, in ``cclg.hook_events`` (and the host's name only in
    ``cclg.hook.HOST_EVENTS``); everywhere else reads the constants, and ``logged`` for a log's name."""
    spelled = spelled_events(MODULES[module].read_text(encoding="utf-8"))
    assert not spelled, f"{module} spells hook events {spelled}: use cclg.hook_events"


def test_the_hook_spells_only_the_hosts_names() -> None:
    from cclg.hook import HOST_EVENTS

    spelled = spelled_events(MODULES["cclg.hook"].read_text(encoding="utf-8"))
    assert sorted(spelled) == sorted(HOST_EVENTS.values()), "the hook's own tables read cclg.hook_events"


def test_the_event_check_sees_a_spelled_event() -> None:
    assert spelled_events('if event.get("event") == "post_compact":\n    pass\n') == ["post_compact"]
    assert spelled_events('found = {"session_start": 1}["session_start"]\n') == []
