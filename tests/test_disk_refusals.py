"""Issue 27, rule 13: every failure has its documented exit code (8: the disk refused the write), and a
command reports failure only if nothing was committed.

The disk refuses for real here, never by a mock: a file-size limit (``RLIMIT_FSIZE``, which the kernel
enforces with EFBIG) set in the child process only; a small tmpfs filled to the brim (root only); a
folder without write permission, which root is made to respect by dropping its override capabilities
(``setpriv``); and a ``.lock`` that is a folder. Every surface is run as a real process: ``cclg``,
``cclg-mcp`` over stdio, and ``cclg-hook`` (which must print valid JSON and exit 0 whatever happens).
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from cclg.core.store import Store

CCLG = [sys.executable, "-m", "cclg"]
HOOK = [sys.executable, "-c", "from cclg.hook import main; main()"]
MCP = [sys.executable, "-m", "cclg.mcp_server"]
DISK_EXIT = 8
# A limit the index's shared-memory file (32 KiB) fits under, and a memory's files and the audit log
# too, but not the index's write-ahead log of one added memory (about 70 KiB): the index update, done
# after the memory is committed, is the one write the disk refuses.
INDEX_ONLY_LIMIT = 48 * 1024


def file_size_limit(limit: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def cclg(
    root: Path, *args: str, limit: int | None = None, prefix: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*prefix, *CCLG, "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=None if limit is None else file_size_limit(limit),
    )


def node_files(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "nodes").glob("*.json"))


def refused_cleanly(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == DISK_EXIT, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr and "error: the disk refused" in result.stderr, result.stderr


@pytest.fixture
def root(tmp_path: Path) -> Path:
    store, _ = Store.init(tmp_path / "store")
    result = cclg(store.root, "add", "--content", "Tests run with pytest -q", "--source", "user")
    assert result.returncode == 0 and (store.root / "index.sqlite").exists()
    return store.root


@pytest.mark.parametrize("write", ["add", "import-jsonl", "patch refine"])
def test_rule13_a_write_committed_before_the_index_update_failed_says_done_and_the_index_heals(
    root: Path, tmp_path: Path, write: str
) -> None:
    before = node_files(root)
    content = "Deploys go out with make ship"
    if write == "add":
        args = ["add", "--content", content, "--source", "user"]
    elif write == "import-jsonl":
        lines = tmp_path / "lines.jsonl"
        lines.write_text(json.dumps({"content": content, "source": "user"}) + "\n")
        args = ["import-jsonl", str(lines)]
    else:
        target = before[0][:-5]
        args = ["patch", "refine", "--target", target, "--content", content, "--reason", "the deploy line"]
    result = cclg(root, *args, limit=INDEX_ONLY_LIMIT)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "warning:" in result.stderr and "search index" in result.stderr, result.stderr
    added = sorted(set(node_files(root)) - set(before))
    assert len(added) == 1, "the memory is committed"
    found = cclg(root, "search", "ship", "--json")  # the next reader brings the index up to date
    assert found.returncode == 0 and added[0][:-5] in found.stdout, found.stdout + found.stderr
    doctor = cclg(root, "doctor")
    assert doctor.returncode == 0, doctor.stdout


def test_rule13_an_audit_line_refused_after_the_commit_leaves_the_memory_written(root: Path) -> None:
    """The audit log has grown past the file-size limit; the memory's own files fit under it. The
    append, after the patch is on disk, is refused: the command says done and warns, and the next
    command that takes the store lock gives the staged memory its name."""
    store = Store.open(root)
    store.audit_many(
        [{"event": "repair_applied", "actions": ["padding " * 20], "created_at": "2026-01-01T00:00:00+00:00"}] * 200
    )
    assert (root / "audit" / "memory_audit.jsonl").stat().st_size > 16 * 1024
    before = node_files(root)
    result = cclg(root, "add", "--content", "Deploys go out with make ship", "--source", "user", limit=16 * 1024)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert "is written, but the disk refused" in result.stderr, result.stderr
    assert len(list((root / "patches").iterdir())) == 2, "the patch is committed"
    assert cclg(root, "doctor", "--repair").returncode in (0, 1)
    assert len(set(node_files(root)) - set(before)) == 1
    found = cclg(root, "search", "ship")
    assert found.returncode == 0 and "make ship" in found.stdout, found.stdout + found.stderr


def test_rule13_the_hook_answers_with_the_memories_when_the_disk_refuses_every_write(
    root: Path, tmp_path: Path
) -> None:
    """Valid JSON and exit 0 on every event whatever the disk does; and the prompt's memories still go
    out: reading them needs no write, so a refused record of the session costs only that record."""
    payload = {"session_id": "s1", "cwd": str(tmp_path), "hook_event_name": "UserPromptSubmit",
               "prompt": "how do I run pytest here"}  # fmt: skip
    answers = {}
    for event in ("session-start", "user-prompt", "post-tool", "stop"):
        result = subprocess.run([*HOOK, "--root", str(root), event], input=json.dumps(payload).encode(),
                                capture_output=True, timeout=60, preexec_fn=file_size_limit(0))  # fmt: skip
        assert result.returncode == 0 and isinstance(json.loads(result.stdout), dict), (event, result.stderr)
        answers[event] = json.loads(result.stdout)
    context = answers["user-prompt"].get("hookSpecificOutput", {}).get("additionalContext", "")
    assert "Tests run with pytest -q" in context, answers["user-prompt"]


def test_rule13_a_write_the_disk_refuses_before_the_commit_exits_8_and_writes_nothing(root: Path) -> None:
    before = node_files(root)
    patches = sorted((root / "patches").iterdir())
    result = cclg(root, "add", "--content", "A memory too big for the limit " * 40, "--source", "user", limit=1024)
    refused_cleanly(result)
    assert node_files(root) == before and sorted((root / "patches").iterdir()) == patches
    assert list((root / "tmp").iterdir()) == []


def test_rule13_a_full_disk_never_lies_about_what_was_committed(tmp_path: Path) -> None:
    """On a real full file system (a 2 MiB tmpfs), at every amount of space left: exit 0 exactly when the
    memory was committed, else exit 8 with nothing of it written; never a traceback."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        store, _ = Store.init(disk / "store")
        assert cclg(store.root, "add", "--content", "Tests run with pytest -q", "--source", "user").returncode == 0
        outcomes = set()
        for free_kib in (4, 8, 12, 16, 20, 24, 32, 40, 48, 64, 96):
            filler = disk / "filler"
            filler.unlink(missing_ok=True)
            left = shutil.disk_usage(disk).free - free_kib * 1024
            with open(filler, "wb") as out:
                out.truncate(0)
                out.write(b"\0" * max(left, 0))
            before = set(node_files(store.root))
            content = f"Release {free_kib} ships on a Tuesday"
            result = cclg(store.root, "add", "--content", content, "--source", "user")
            added = set(node_files(store.root)) - before
            assert "Traceback" not in result.stderr, (free_kib, result.stderr)
            assert result.returncode in (0, DISK_EXIT), (free_kib, result.stderr)
            assert (result.returncode == 0) == bool(added), (free_kib, result.returncode, added, result.stderr)
            outcomes.add(result.returncode)
        (disk / "filler").unlink()
        assert cclg(store.root, "doctor", "--repair").returncode in (0, 1)
        doctor = cclg(store.root, "doctor")
        assert doctor.returncode == 0, doctor.stdout
        committed = node_files(store.root)
        listed = cclg(store.root, "search", "Tuesday", "--json", "--limit", "100")
        assert listed.returncode == 0, listed.stderr
        assert sum(name[:-5] in listed.stdout for name in committed) == len(committed) - 1  # all but the first
        assert outcomes == {0, DISK_EXIT}, "the sizes tried cover both outcomes"
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


# ---------------------------------------------------------------- permission denied, for real


def unprivileged() -> tuple[str, ...]:
    """A command prefix under which permission bits hold: nothing for a user; for root, ``setpriv``
    dropping the capabilities that let root ignore them."""
    if os.geteuid() != 0:
        return ()
    if shutil.which("setpriv") is None:
        pytest.skip("root ignores permission bits and setpriv is not here to drop that")
    caps = "-dac_override,-dac_read_search,-fowner"
    return ("setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}")


def read_only(folder: Path) -> None:
    for path in [folder, *folder.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)


def test_rule13_init_in_a_folder_without_write_permission_exits_8(tmp_path: Path) -> None:
    parent = tmp_path / "locked"
    parent.mkdir(mode=0o500)
    try:
        result = cclg(parent / "store", "init", prefix=unprivileged())
        refused_cleanly(result)
        assert "Permission denied" in result.stderr and str(parent / "store") in result.stderr
    finally:
        parent.chmod(0o700)


def test_rule13_add_in_a_read_only_store_exits_8_and_reads_still_work(root: Path) -> None:
    read_only(root)
    try:
        before = node_files(root)
        result = cclg(
            root, "add", "--content", "Deploys go out with make ship", "--source", "user", prefix=unprivileged()
        )
        refused_cleanly(result)
        assert node_files(root) == before
        found = cclg(root, "search", "pytest", prefix=unprivileged())
        assert found.returncode == 0 and "pytest" in found.stdout, found.stderr
    finally:
        for path in [root, *root.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)


def test_rule13_a_lock_that_is_a_folder_is_a_clear_error_on_every_surface(root: Path, tmp_path: Path) -> None:
    (root / ".lock").unlink()
    (root / ".lock").mkdir()
    result = cclg(root, "add", "--content", "Deploys go out with make ship", "--source", "user")
    refused_cleanly(result)
    assert ".lock" in result.stderr
    # The hook: valid JSON, exit 0, for an event that writes under the store lock.
    payload = {"session_id": "s1", "cwd": str(tmp_path), "hook_event_name": "SessionStart", "source": "startup"}
    hook = subprocess.run([*HOOK, "--root", str(root), "session-start"], input=json.dumps(payload).encode(),
                          capture_output=True, timeout=60)  # fmt: skip
    assert hook.returncode == 0 and isinstance(json.loads(hook.stdout), dict), hook.stderr
    # MCP: a tool error that says what the disk refused, and the server lives on.
    message, alive = asyncio.run(_mcp_add_then_search(root, tmp_path))
    assert "disk refused" in message and ".lock" in message and "Traceback" not in message, message
    assert alive


async def _mcp_add_then_search(root: Path, tmp_path: Path, *prefix: str) -> tuple[str, bool]:
    """(the message of a failed ``cclg_add``, or the JSON of its result; whether a search after it works)."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "CCLG_SEMANTIC": "off"}
    env.update({k: v for k, v in os.environ.items() if k == "PYTHONPATH"})  # the cclg under test
    command = [*prefix, *MCP, "--root", str(root)]
    params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=str(tmp_path))
    with open(os.devnull, "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=60) as client:
            added = await client.call_tool("cclg_add", {"content": "Deploys go out with make ship", "source": "agent"})
            message = "\n".join(getattr(block, "text", "") for block in added.content)
            found = await client.call_tool("cclg_search", {"query": "pytest"})
            return (message if added.is_error else json.dumps(added.structured_content)), not found.is_error


def test_rule13_mcp_add_committed_before_the_index_update_failed_is_a_result_with_a_warning(
    root: Path, tmp_path: Path
) -> None:
    if shutil.which("prlimit") is None:
        pytest.skip("prlimit sets the server's file-size limit")
    before = node_files(root)
    result, alive = asyncio.run(_mcp_add_then_search(root, tmp_path, "prlimit", f"--fsize={INDEX_ONLY_LIMIT}"))
    assert alive
    data = json.loads(result)
    assert data["patch_id"] and any("search index" in w for w in data["warnings"]), data
    assert len(set(node_files(root)) - set(before)) == 1
