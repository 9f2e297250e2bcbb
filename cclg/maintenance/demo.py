"""The demo store: the CCLG walk-through, generated deterministically.

``cclg demo-store PATH`` writes it with fixed ids and timestamps, so the copy in
the repository (``demo-store/``) can be regenerated and compared byte for byte.
It holds an old project decision that a ``refine`` patch superseded, the new
active decision (``relations.refines``) and the edge between them, two more
current memories, raw evidence, a session whose prompt event reached
``sessions/``, ``raw/`` and ``audit/``, and the code graph of a small sample
project (``active/codegraphs/``).

The sample project is committed into a scratch git repository with fixed
authors and dates, so its history (commit ids included) is the same on every
machine; it is indexed like any repository, and the graph is stored with the
project's name, ``demo-project``, as its root instead of the scratch folder's
path. Generating the demo store therefore needs ``git``.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cclg.core.hook_events import USER_PROMPT, logged
from cclg.core.ids import FixedClock, fixed_clock
from cclg.core.records import Source
from cclg.core.store import Store
from cclg.errors import UsageError
from cclg.intake import new_memories
from cclg.ledger import sessions, writer

DEMO_START = "2026-06-30T09:58:47+00:00"
DEMO_SESSION = "demo-session"

SOURCE_NOTE = """# Demo source

Notes from the design review where the memory layout was agreed.

- Original evidence is kept verbatim in `raw/`.
- Long-term memories are MemoryNodes in `nodes/`.
- Every change is a MemoryPatch in `patches/`.
- Hooks hand the agent only current memories and the code graph, as `additionalContext`.
"""


_STORE_PY = (
    "import json\n"
    "\n"
    "from tasks.model import Task\n"
    "\n"
    "\n"
    "def load_tasks(path):\n"
    "    with open(path) as handle:\n"
    '        return [Task(item["title"], item["done"]) for item in json.load(handle)]\n'
    "\n"
    "\n"
    "def save_tasks(path, tasks):\n"
    '    with open(path, "w") as handle:\n'
    "        json.dump([task.to_dict() for task in tasks], handle)\n"
)
# The fix of the last commit: UTF-8 files, titles kept readable.
_STORE_PY_UTF8 = (
    _STORE_PY.replace("open(path)", 'open(path, encoding="utf-8")')
    .replace('open(path, "w")', 'open(path, "w", encoding="utf-8")')
    .replace("handle)\n", "handle, ensure_ascii=False)\n")
)

# The sample project's history: (author, unix time, subject, files written).
DEMO_PROJECT_ROOT = "demo-project"
DEMO_PROJECT_HISTORY: list[tuple[str, int, str, dict[str, str]]] = [
    (
        "Ada",
        1_782_723_600,  # 2026-06-29T09:00:00Z, the day before the store
        "Add the task model and its JSON store",
        {
            "tasks/__init__.py": '"""A tiny task list."""\n',
            "tasks/model.py": (
                "class Task:\n"
                "    def __init__(self, title, done=False):\n"
                "        self.title = title\n"
                "        self.done = done\n"
                "\n"
                "    def to_dict(self):\n"
                '        return {"title": self.title, "done": self.done}\n'
            ),
            "tasks/store.py": _STORE_PY,
        },
    ),
    (
        "Ada",
        1_782_727_200,
        "Add the command line: list and add tasks",
        {
            "tasks/cli.py": (
                "import sys\n"
                "\n"
                "from tasks.model import Task\n"
                "from tasks.store import load_tasks, save_tasks\n"
                "\n"
                "\n"
                "def main(path, argv=sys.argv[1:]):\n"
                "    tasks = load_tasks(path)\n"
                '    if argv[:1] == ["add"]:\n'
                '        tasks.append(Task(" ".join(argv[1:])))\n'
                "        save_tasks(path, tasks)\n"
                "    for task in tasks:\n"
                '        print(("[x] " if task.done else "[ ] ") + task.title)\n'
            ),
        },
    ),
    (
        "Grace",
        1_782_730_800,
        "Add a web page that lists the tasks",
        {
            "web/api.js": (
                "export async function fetchTasks() {\n"
                '  const response = await fetch("/tasks");\n'
                "  return response.json();\n"
                "}\n"
            ),
            "web/page.js": (
                'import { fetchTasks } from "./api.js";\n'
                "\n"
                "export async function renderTaskList(element) {\n"
                "  const tasks = await fetchTasks();\n"
                '  element.innerHTML = tasks.map((task) => `<li>${task.title}</li>`).join("");\n'
                "}\n"
            ),
        },
    ),
    (
        "Grace",
        1_782_734_400,
        "Keep non-ASCII task titles readable in the saved file",
        {
            "tasks/store.py": _STORE_PY_UTF8,
        },
    ),
]

# Git without anyone's configuration: the same commits on every machine.
_GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "LC_ALL": "C"}
_GIT_LEAKS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_CEILING_DIRECTORIES")


@contextmanager
def _isolated_git() -> Iterator[None]:
    """Within this block, git (ours and gitpython's) runs without system or user configuration."""
    saved = dict(os.environ)
    for name in _GIT_LEAKS:
        os.environ.pop(name, None)
    os.environ.update(_GIT_ENV)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _write_demo_project(root: Path) -> None:
    """The sample project as a git repository with its fixed history."""

    def git(*args: str, author: str = "Ada", when: int = 0) -> None:
        env = dict(os.environ)
        for role in ("AUTHOR", "COMMITTER"):
            env[f"GIT_{role}_NAME"] = author
            env[f"GIT_{role}_EMAIL"] = f"{author.lower()}@example.com"
            env[f"GIT_{role}_DATE"] = f"@{when} +0000"
        done = subprocess.run(["git", *args], cwd=root, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise UsageError(f"git {args[0]} failed while writing the demo project: {done.stderr.strip()}")

    git("-c", "init.defaultBranch=main", "init", "-q")
    for author, when, subject, files in DEMO_PROJECT_HISTORY:
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(text.encode("utf-8"))
        git("add", "--", *files)
        git("commit", "-q", "--no-verify", "--no-gpg-sign", "-m", subject, author=author, when=when)


def _add_demo_code_graph(store: Store) -> None:
    """Index the sample project and keep its graph, rooted at ``demo-project``, in the store."""
    from cclg.codegraph.build import build_graph, graph_bytes
    from cclg.codegraph.stored import build_lock_path, cache_path, graph_path, history_path, search_index_path

    try:
        with tempfile.TemporaryDirectory(prefix="cclg-demo-") as scratch, _isolated_git():
            root = Path(scratch).resolve() / DEMO_PROJECT_ROOT
            root.mkdir()
            _write_demo_project(root)
            graph = build_graph(store, root)
            made_files = (graph_path, cache_path, search_index_path, history_path, build_lock_path)
            for made in (path_of(store, root) for path_of in made_files):
                made.unlink(missing_ok=True)
    except FileNotFoundError as error:  # no git on PATH
        raise UsageError(f"the demo store's code graph needs git: {error}") from error
    graph.pop("summary")
    graph["root"] = DEMO_PROJECT_ROOT
    store.write_file(graph_path(store, Path(DEMO_PROJECT_ROOT)), graph_bytes(graph))


def build_demo_store(path: Path) -> Store:
    """Write the demo store into ``path`` (which must be empty or absent)."""
    if path.exists() and any(path.iterdir()):
        raise UsageError(f"{path} is not empty; the demo store is written into an empty folder")
    with fixed_clock(FixedClock(DEMO_START)):
        store, _ = Store.init(path)
        raw_path, _ = store.write_raw(SOURCE_NOTE.encode("utf-8"), "demo-source.md")
        span = {"source_id": Path(raw_path).name, "turn_id": None, "char_start": 0, "char_end": 0}
        start = SOURCE_NOTE.index("- Original evidence")
        span.update(char_start=start, char_end=SOURCE_NOTE.index("\n", start))
        old = new_memories.add_memory(
            store,
            "Memories are accumulated directly inside the prompt.",
            source="demo:old-assumption",
            type="project_decision",
            key="demo.memory.delivery",
            priority="high",
            trust="trusted",  # the user's own words, as `cclg add` records them
        ).node
        writer.apply_patch(
            store,
            "refine",
            [old.id],
            reason="The user corrected it: memory is a source-grounded graph that "
            "hooks and tools consume, not text piled into the prompt.",
            contents=[
                "Raw evidence is kept verbatim; only active MemoryNodes reach the agent, through hook and MCP context."
            ],
            source=Source(label="demo:correction", raw_spans=[span]),
        )
        new_memories.add_memory(
            store,
            "Checks are split into local gates (mutation, retrieval, pack, hook, MCP, code graph) "
            "and external memory, tool and code benchmark tracks.",
            source="demo:benchmark",
            type="benchmark_requirement",
            key="demo.benchmark.gates",
            priority="high",
            trust="trusted",
        )
        sessions.start_session(
            store, DEMO_SESSION, agent="codex", workspace="local", project="cclg", branch_name="main"
        )
        new_memories.add_memory(
            store,
            "This overlay memory is visible only in packs for demo-session.",
            source="demo:session-overlay",
            scope=new_memories.parse_scope(
                ["workspace=local", "project=cclg", "agent=codex", f"session={DEMO_SESSION}"]
            ),
            trust="trusted",
        )
        sessions.record_event(
            store,
            DEMO_SESSION,
            logged(USER_PROMPT),
            {"prompt": "How does cclg deliver memory to the agent?", "session_id": DEMO_SESSION},
        )
        _add_demo_code_graph(store)
    return store
