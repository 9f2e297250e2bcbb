"""Issue 27, rule 15 for the store's own files: a record another program wrote (a sync tool, a container
unpacked by hand) nested too deep is bad JSON like any other, never a RecursionError traceback, and
the semantic helper's socket reads its requests with the same bounded reader."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cclg.fields import MAX_JSON_DEPTH
from cclg.store import Store
from tests.test_hook import claude_prompt, run_hook

DEEP = "[" * 100_000 + "]" * 100_000
CCLG = str(Path(sys.executable).parent / "cclg")


def _cclg(store: Store, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CCLG, "--root", str(store.root), *args], capture_output=True, text=True, timeout=60)


def _added(store: Store) -> tuple[Path, Path]:
    """(the node file, the patch file) of one memory added by the real command."""
    added = _cclg(store, "add", "--content", "the build runs with make", "--source", "seed")
    assert added.returncode == 0, added.stderr
    (node,) = (store.root / "nodes").iterdir()
    (patch,) = (store.root / "patches").iterdir()
    return node, patch


def _nested(record: Path, nesting: str) -> str:
    """The record's text with its metadata replaced by ``nesting``."""
    data = json.loads(record.read_bytes())
    data["metadata"] = {"x": "NESTED"}
    return json.dumps(data).replace('"NESTED"', nesting)


@pytest.mark.parametrize("folder", ["nodes", "patches"])
@pytest.mark.parametrize("nesting", [DEEP, "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH])
def test_rule15_a_record_file_nested_too_deep_is_bad_json_for_every_command(
    store: Store, folder: str, nesting: str
) -> None:
    """Each command answers a deep record file exactly as it answers a record that is not JSON at all
    (its exit code, a validation error or a doctor finding naming the file), never with a traceback;
    the hook still answers."""
    node, patch = _added(store)
    record = node if folder == "nodes" else patch
    deep = _nested(record, nesting)
    commands = [["status"], ["log"], ["doctor"], ["search", "make"], ["show", node.stem], ["stats"], ["reindex"]]
    commands.append(["conflicts"])
    record.write_text('{"broken')
    broken = {tuple(command): _cclg(store, *command) for command in commands}
    record.write_text(deep)
    for command in commands:
        result, expected = _cclg(store, *command), broken[tuple(command)]
        said = result.stdout + result.stderr
        assert "Traceback" not in result.stderr, (command, result.stderr[-2000:])
        assert result.returncode == expected.returncode, (command, said[-2000:], expected.stderr)
        if "not valid JSON" in expected.stdout + expected.stderr:
            assert "nested more than 64 levels deep" in said and record.name in said, (command, said[-2000:])
    hooked = run_hook(store.root, "user-prompt", claude_prompt("how do I run the build?"))
    assert hooked.returncode == 0 and isinstance(json.loads(hooked.stdout), dict)
