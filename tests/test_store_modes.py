"""Issue 27, rule 17: permissions are checked, not only set. The store makes every file 0600 and every
folder 0700; ``cclg doctor`` reports any that is more open (a store copied or unpacked with 0644 and
0755), and ``cclg doctor --repair`` tightens them back."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from tests.test_disk_refusals import HOOK, cclg

MODES_CHECK = "store files and folders are the owner's only"


def run_with_umask(command: list[str], umask: int, payload: dict[str, object] | None = None) -> None:
    def apply() -> None:
        os.umask(umask)

    data = None if payload is None else json.dumps(payload).encode()
    subprocess.run(command, input=data, capture_output=True, timeout=60, check=True, preexec_fn=apply)


def used_store(tmp_path: Path, umask: int = 0o022) -> Path:
    """A store that has been through what users do: memories, a session's hooks, a code graph, a reindex."""
    root = tmp_path / "store"
    env_cclg = [sys.executable, "-m", "cclg", "--root", str(root)]
    run_with_umask([*env_cclg, "init"], umask)
    run_with_umask([*env_cclg, "add", "--content", "Tests run with pytest -q", "--source", "user"], umask)
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "app.py").write_text("def main():\n    return 1\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    run_with_umask([*env_cclg, "code-index", str(repo)], umask)
    base = {"session_id": "s1", "cwd": str(repo)}
    run_with_umask([*HOOK, "--root", str(root), "session-start"], umask, {**base, "hook_event_name": "SessionStart"})
    prompt = {**base, "hook_event_name": "UserPromptSubmit", "prompt": "how do I run pytest"}
    run_with_umask([*HOOK, "--root", str(root), "user-prompt"], umask, prompt)
    run_with_umask([*HOOK, "--root", str(root), "stop"], umask, {**base, "hook_event_name": "Stop"})
    turn = [*env_cclg, "turn", "write", "--session", "s1"]
    subprocess.run(
        turn,
        input=b'{"current_focus": "x"}',
        cwd=repo,
        capture_output=True,
        check=True,
        preexec_fn=lambda: os.umask(umask),
    )
    run_with_umask([*env_cclg, "reindex"], umask)
    run_with_umask([*env_cclg, "search", "pytest"], umask)
    return root


def too_open(root: Path) -> list[str]:
    found = []
    for path in [root, *root.rglob("*")]:
        info = path.lstat()
        if not stat.S_ISLNK(info.st_mode) and stat.S_IMODE(info.st_mode) & 0o077:
            found.append(f"{path.relative_to(root)} {oct(stat.S_IMODE(info.st_mode))}")
    return found


def test_rule17_a_store_used_under_umask_022_is_private_and_doctor_clean(tmp_path: Path) -> None:
    root = used_store(tmp_path)
    assert too_open(root) == []
    report = cclg(root, "doctor", "--json")
    assert MODES_CHECK not in report.stdout, report.stdout


def test_rule17_doctor_reports_a_store_copied_with_open_modes_and_repair_tightens_it(tmp_path: Path) -> None:
    root = used_store(tmp_path)
    everything = [root, *root.rglob("*")]
    for path in everything:  # what a copy made with 0644 files and 0755 folders looks like
        path.chmod(0o755 if path.is_dir() else 0o644)
    folders = sum(1 for path in everything if path.is_dir())
    report = cclg(root, "doctor", "--json")
    assert report.returncode == 1, report.stdout
    findings = [f for f in json.loads(report.stdout)["findings"] if f["check"] == MODES_CHECK]
    assert len(findings) == 1, findings
    message = findings[0]["message"]
    assert message.startswith(f"{len(everything) - folders} file(s) and {folders} folder(s) are open"), message
    assert "(0644)" in message and "(0755)" in message and "--repair" in message, message

    repaired = cclg(root, "doctor", "--repair")
    assert "tightened" in repaired.stdout, repaired.stdout
    assert too_open(root) == []
    files = [p for p in root.rglob("*") if p.is_file()]
    assert {stat.S_IMODE(p.stat().st_mode) for p in files} == {0o600}
    assert {stat.S_IMODE(p.stat().st_mode) for p in [root, *root.rglob("*")] if p.is_dir()} == {0o700}
    assert cclg(root, "doctor").returncode == 0


def test_rule17_one_open_file_among_private_ones_is_named(tmp_path: Path) -> None:
    root = used_store(tmp_path)
    node = next((root / "nodes").glob("*.json"))
    node.chmod(0o640)
    (root / "audit").chmod(0o750)
    report = cclg(root, "doctor", "--json")
    findings = [f for f in json.loads(report.stdout)["findings"] if f["check"] == MODES_CHECK]
    assert len(findings) == 1 and report.returncode == 1
    message = findings[0]["message"]
    assert f"nodes/{node.name} (0640)" in message and "audit (0750)" in message, message


def test_rule17_a_store_in_a_git_work_tree_has_its_open_modes_noted_not_failed(tmp_path: Path) -> None:
    """A store kept in a git work tree (the demo store, a store a team commits) gets git's modes at every
    checkout: doctor notes them and passes; --repair still tightens them. Outside git the same modes
    fail doctor (the test above)."""
    root = used_store(tmp_path)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    report = cclg(root, "doctor", "--json")
    assert report.returncode == 0, report.stdout
    data = json.loads(report.stdout)
    assert [f for f in data["findings"] if f["check"] == MODES_CHECK] == []
    noted = [n for n in data["notices"] if n["check"] == MODES_CHECK]
    assert len(noted) == 1 and "git work tree" in noted[0]["message"] and "--repair" in noted[0]["message"], noted
    assert "tightened" in cclg(root, "doctor", "--repair").stdout
    assert too_open(root) == []
