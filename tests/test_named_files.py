"""Files someone else names (a command's argument, a folder it walks, a host's payload) are read only
when they are regular files, and never past their size: a FIFO never hangs a command, a link to
/dev/zero never reads until memory runs out (issue 27, rule 5, beyond the code graph: see
tests/test_codegraph.py for the repository side).

Every command runs as a real process with a minute to finish and 1 GiB of address space, so that
a command that waits on the FIFO or reads the device fails its test instead of the machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cclg.core.store import Store
from tests.test_codegraph import run_capped
from tests.test_hook import HOOK


def _cclg(store: Store, *args: str) -> subprocess.CompletedProcess[bytes]:
    return run_capped([sys.executable, "-m", "cclg", "--root", str(store.root), *args])


@pytest.fixture(params=["fifo", "link to /dev/zero", "/dev/zero"])
def not_a_file(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A path that names no regular file: a FIFO nobody writes to, a link to a device, the device."""
    if request.param == "/dev/zero":
        return Path("/dev/zero")
    path = tmp_path / "input.jsonl"
    if request.param == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    return path


@pytest.mark.parametrize("command", ["raw", "import-jsonl", "import-container", "open", "scan"])
def test_a_command_reading_a_named_file_refuses_what_is_not_a_regular_file(
    store: Store, not_a_file: Path, command: str
) -> None:
    """``cclg import-container`` and ``cclg open`` waited on a FIFO for ever and read /dev/zero until MemoryError;
    ``raw`` and ``import-jsonl`` called one "no such file"; ``scan`` scanned nothing and said so with 0."""
    done = _cclg(store, command, str(not_a_file))
    assert done.returncode == 2, done.stderr
    assert f"{not_a_file}: not a regular file" in done.stderr.decode()
    assert b"Traceback" not in done.stderr


def test_validate_reports_what_is_not_a_regular_file_and_checks_the_rest(
    store: Store, tmp_path: Path, not_a_file: Path
) -> None:
    """``cclg validate`` hung on a FIFO named ``*.json`` in the folder it searched, and read a link to
    /dev/zero until MemoryError; each is now a finding, and the other files are still checked."""
    folder = tmp_path / "records"
    folder.mkdir()
    (folder / "bad.json").write_text("{}")
    odd = folder / "odd.json"
    if not_a_file.parent == tmp_path:
        not_a_file.rename(odd)
    else:
        odd.symlink_to(not_a_file)
    done = _cclg(store, "validate", str(folder), "--json")
    report = json.loads(done.stdout)
    assert done.returncode == 4 and report["checked"] == 2, done.stderr
    messages = {Path(f["path"]).name: f["message"] for f in report["findings"]}
    assert messages["odd.json"] == "not a regular file"
    assert "schema_version" in messages["bad.json"]


def test_scan_of_a_folder_skips_fifos_and_devices(store: Store, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    os.mkfifo(folder / "pipe.txt")
    (folder / "zero.txt").symlink_to("/dev/zero")
    (folder / "key.txt").write_text("aws_access_key_id = AKIAQWERTYUIOPASDFGH\n")
    done = _cclg(store, "scan", str(folder), "--json")
    assert done.returncode == 1, done.stderr
    assert [Path(s["path"]).name for s in json.loads(done.stdout)["secrets"]] == ["key.txt"]


def test_the_hook_reads_a_transcript_only_when_it_is_a_regular_file(
    store: Store, tmp_path: Path, not_a_file: Path
) -> None:
    """A host's payload names the transcript: a FIFO or a device there costs the turn its thinking and
    answer, never the hook's exit or its JSON."""
    payload = {
        "session_id": "transcript-s1",
        "hook_event_name": "Stop",
        "stop_hook_active": False,
        "transcript_path": str(not_a_file),
        "cwd": str(tmp_path),
    }
    done = run_capped([*HOOK, "--root", str(store.root), "stop"], json.dumps(payload).encode())
    assert done.returncode == 0 and json.loads(done.stdout) == {}, done.stderr
