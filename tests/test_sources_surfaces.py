"""Sources through the surfaces: ``cclg sources``, ``cclg import``, a plugin installed as a real entry
point, and the ``session-start`` hook keeping a repository's instruction files in step."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from cclg.cli import cli
from cclg.core.store import Store
from tests.conftest import DATA
from tests.test_sources import current, files_of, git_repo

FIXTURES = DATA / "sources"


def cclg(root: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--root", str(root), *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_sources_commands(store: Store, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "shop")
    (repo / "CLAUDE.md").write_text("# Shop\n- Install with `uv sync`\n- Lint with ruff\n")
    code, out, _ = cclg(store.root, "sources", "add", "claude-md", str(repo))
    assert code == 0 and "2 new, 0 refined, 0 superseded, 0 expired, 0 unchanged" in out
    (repo / "CLAUDE.md").write_text("# Shop\n- Install with `uv sync --frozen`\n")
    code, out, _ = cclg(store.root, "sources", "sync")
    assert code == 0 and "0 new, 1 refined, 0 superseded, 1 expired, 0 unchanged" in out
    code, out, _ = cclg(store.root, "sources", "list", "--json")
    (listed,) = json.loads(out)
    assert listed["kind"] == "claude-md" and listed["items"] == 1
    assert cclg(store.root, "sources", "add", "nonsense", str(repo))[0] == 2
    assert cclg(store.root, "sources", "add", "claude-md", str(tmp_path / "missing"))[0] == 2
    assert cclg(store.root, "sources", "remove", listed["id"])[0] == 0
    assert cclg(store.root, "sources", "remove", listed["id"])[0] == 5
    code, out, _ = cclg(store.root, "sources", "sync")
    assert "no sources registered" in out


def test_import_is_one_off_and_jsonl_is_import_jsonl(store: Store, tmp_path: Path) -> None:
    code, out, _ = cclg(store.root, "import", "mem0-json", str(FIXTURES / "mem0-export.json"), "--json")
    assert code == 0 and len(json.loads(out)["new"]) == 2
    code, out, _ = cclg(store.root, "import", "mem0-json", str(FIXTURES / "mem0-export.json"), "--json")
    assert json.loads(out)["new"] == [] and len(json.loads(out)["adopted"]) == 2, "no copies"
    code, out, _ = cclg(store.root, "import", "jsonl", str(FIXTURES / "memories.jsonl"), "--json")
    assert code == 0 and json.loads(out)["imported"] == 2
    assert json.loads(cclg(store.root, "sources", "list", "--json")[1]) == [], "nothing kept in step"
    support = current(store)["The shop's support e-mail is support@shop.example"]
    assert support.key == "support.email", "jsonl goes through import-jsonl's writer, keys and all"


def install_example_plugin(site: Path) -> None:
    """The example plugin (tests/data/sources/plugin) as an installed distribution: its module and a
    dist-info whose entry_points.txt names it in the group ``cclg.sources``."""
    site.mkdir(parents=True)
    shutil.copy(FIXTURES / "plugin" / "cclg_example_source.py", site)
    info = site / "cclg_example_source-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cclg-example-source\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[cclg.sources]\nexample = cclg_example_source:NotesSource\n")


def test_a_plugin_is_a_source_and_stays_untrusted(store: Store, tmp_path: Path) -> None:
    site = tmp_path / "site"
    install_example_plugin(site)
    notes = tmp_path / "notes.txt"
    notes.write_text("n1 | Staging is reset on Mondays\nn2 | The API listens on 8080\n")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
        "EXAMPLE_NOTES": str(notes),
    }

    def run(*args: str) -> dict | list:
        done = subprocess.run(
            [sys.executable, "-m", "cclg", "--root", str(store.root), *args, "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    added = run("sources", "add", "plugin", "example")
    assert len(added["sync"][0]["new"]) == 2
    notes.write_text("n1 | Staging is reset on Mondays at 06:00 UTC\n")
    (report,) = run("sources", "sync")
    assert len(report["refined"]) == 1 and len(report["expired"]) == 1
    (node,) = current(store).values()
    assert node.content == "Staging is reset on Mondays at 06:00 UTC"
    assert node.metadata["trust"] == "untrusted", "a plugin's record cannot vouch for itself"
    done = subprocess.run(
        [sys.executable, "-m", "cclg", "--root", str(store.root), "sources", "add", "plugin", "nope"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "installed: example" in done.stderr


HOOK = [sys.executable, "-c", "from cclg.hook import main; main()"]


def session_start(root: Path, cwd: Path) -> dict:
    payload = {"session_id": "s-1", "hook_event_name": "SessionStart", "source": "startup", "cwd": str(cwd)}
    done = subprocess.run(
        [*HOOK, "--root", str(root), "session-start"],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    answer: dict = json.loads(done.stdout)
    return answer


def test_session_start_syncs_moved_instruction_files(store: Store, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "shop")
    claude = repo / "CLAUDE.md"
    claude.write_text("- Install with `uv sync`\n")
    assert cclg(store.root, "sources", "add", "claude-md", str(repo))[0] == 0
    session_start(store.root, repo)
    registry = store.sources_path.read_bytes()
    claude.write_text("- Install with `uv sync --frozen`\n")
    (repo / "src").mkdir()
    session_start(store.root, repo / "src")  # a session in a folder of the repository
    assert set(current(store)) == {"Install with `uv sync --frozen`"}
    assert store.sources_path.read_bytes() != registry
    before = {k: v for k, v in files_of(store).items() if not k.startswith(("sessions/", "audit/", "active/", "raw/"))}
    session_start(store.root, repo)
    after = {k: v for k, v in files_of(store).items() if not k.startswith(("sessions/", "audit/", "active/", "raw/"))}
    assert after == before, "nothing moved, nothing synced"


def test_session_start_survives_a_broken_registry(store: Store, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "shop")
    store.sources_path.write_text('{"schema": "cclg.sources.v1", "sources": [{"kind": "claude-md", "files": {"')
    assert session_start(store.root, repo) is not None
    store.sources_path.write_text(
        json.dumps(
            {
                "schema": "cclg.sources.v1",
                "sources": [
                    {
                        "id": "x",
                        "kind": "claude-md",
                        "path": str(repo),
                        "files": {str(repo / "CLAUDE.md"): [1, 2]},
                        "items": [],
                    }
                ],
            }
        )
    )
    assert isinstance(session_start(store.root, repo), dict), "a source that cannot be read costs nothing"


def test_conflicts_names_the_source_items_that_disagree(store: Store, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "shop")
    (repo / "CLAUDE.md").write_text("- Deploys go out from CI\n")
    assert cclg(store.root, "sources", "add", "claude-md", str(repo))[0] == 0
    (node,) = current(store).values()
    assert cclg(store.root, "patch", "refine", "--target", node.id, "--content", "Deploys go out from CD",
                "--reason", "renamed")[0] == 0  # fmt: skip
    code, out, err = cclg(store.root, "conflicts")
    assert code == 0 and "1 source item(s) disagree" in err
    code, out, _ = cclg(store.root, "sources", "conflicts", "--json")
    (conflict,) = json.loads(out)
    assert conflict["file_says"] == "Deploys go out from CI" and conflict["memory_says"] == "Deploys go out from CD"
