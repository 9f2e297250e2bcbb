"""A project is its repository, not its folder's name: memories follow the repository's identity (its
root commit) through clones, worktrees and renames, and two repositories with the same folder name
never share them. Real git repositories, real ``cclg`` and ``cclg-hook`` processes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cclg.core import repository
from cclg.core.store import Store

GIT_ENV = {
    "GIT_AUTHOR_NAME": "a",
    "GIT_AUTHOR_EMAIL": "a@example.com",
    "GIT_COMMITTER_NAME": "a",
    "GIT_COMMITTER_EMAIL": "a@example.com",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}
CLI = shutil.which("cclg") or "cclg"
HOOK = shutil.which("cclg-hook") or "cclg-hook"


def git(folder: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=folder, check=True, capture_output=True, text=True, env={**os.environ, **GIT_ENV}
    )
    return done.stdout.strip()


def repo(folder: Path, first_file: str = "README", *, commit: bool = True) -> Path:
    """A git repository at ``folder`` with one commit of its own (unless ``commit`` is false)."""
    folder.mkdir(parents=True)
    git(folder, "init", "-q", "-b", "main")
    if commit:
        (folder / first_file).write_text(f"{folder}\n")
        git(folder, "add", ".")
        git(folder, "commit", "-qm", f"start {first_file}")
    return folder


def cclg(store: Store, cwd: Path, *args: str) -> Any:
    done = subprocess.run(
        [CLI, "--root", str(store.root), *args, "--json"], cwd=cwd, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def add(store: Store, cwd: Path, content: str, *extra: str) -> dict[str, Any]:
    node: dict[str, Any] = cclg(store, cwd, "add", "--content", content, "--source", "user", *extra)["node"]
    return node


def hook(store: Store, cwd: Path, event: str, session: str, **fields: Any) -> str:
    """The context a real ``cclg-hook`` process (run in ``cwd``, as a host runs it) answers with."""
    payload = {"session_id": session, "transcript_path": "/t.jsonl", "cwd": str(cwd), **fields}
    done = subprocess.run(
        [HOOK, "--root", str(store.root), "--agent", "claude", event],
        input=json.dumps(payload),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0
    output = json.loads(done.stdout)
    return str(output["hookSpecificOutput"]["additionalContext"]) if output else ""


def prompt(store: Store, cwd: Path, text: str, session: str) -> str:
    return hook(store, cwd, "user-prompt", session, hook_event_name="UserPromptSubmit", prompt=text)


def root_commit(folder: Path) -> str:
    return "git:" + git(folder, "rev-list", "--max-parents=0", "HEAD").splitlines()[-1]


def test_two_repositories_with_the_same_folder_name_do_not_share_memories(store: Store, tmp_path: Path) -> None:
    api_a = repo(tmp_path / "clientA" / "api")
    api_b = repo(tmp_path / "clientB" / "api")
    secret = add(store, api_a / "", "Client A deploys the api with the blue-green script")
    assert secret["scope"]["project"] == root_commit(api_a) != root_commit(api_b)
    assert "blue-green" in prompt(store, api_a, "how does the api deploy?", "s-a")
    assert "blue-green" not in prompt(store, api_b, "how does the api deploy?", "s-b")
    pinned = add(store, api_a, "Client A: never run migrations on Fridays", "--retention", "required")
    assert pinned["scope"]["project"] == root_commit(api_a)
    start = {"hook_event_name": "SessionStart", "source": "startup"}
    assert "migrations on Fridays" in hook(store, api_a, "session-start", "s-a2", **start)
    assert "migrations on Fridays" not in hook(store, api_b, "session-start", "s-b2", **start)


def test_a_clone_a_worktree_and_a_renamed_folder_keep_the_memories(store: Store, tmp_path: Path) -> None:
    original = repo(tmp_path / "work" / "api")
    (original / "src").mkdir()
    add(store, original / "src", "The api's tests run with make check")
    clone = tmp_path / "elsewhere" / "api-copy"
    clone.parent.mkdir()
    git(tmp_path, "clone", "-q", str(original), str(clone))
    worktree = tmp_path / "wt" / "feature"
    git(original, "worktree", "add", "-q", "-b", "feature", str(worktree))
    git(worktree, "commit", "-q", "--allow-empty", "-m", "more work")  # another HEAD, the same repository
    renamed = tmp_path / "work" / "api-renamed"
    for i, folder in enumerate((clone, worktree)):
        assert "make check" in prompt(store, folder, "how do the api tests run?", f"s-{i}"), folder
    original.rename(renamed)
    git(renamed, "worktree", "repair")
    assert "make check" in prompt(store, renamed / "src", "how do the api tests run?", "s-renamed")
    assert "make check" in prompt(store, worktree, "how do the api tests run?", "s-wt-again")


def test_the_identity_is_the_root_commit_of_the_first_parent_chain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Merging an unrelated history in (a second root) keeps the identity: it is the root reached by
    following first parents from HEAD."""
    main = repo(tmp_path / "main")
    first = root_commit(main)
    other = repo(tmp_path / "other", "OTHER")
    git(main, "fetch", "-q", str(other), "main:other")
    git(main, "merge", "-q", "--allow-unrelated-histories", "-m", "merge other", "other")
    assert len(git(main, "rev-list", "--max-parents=0", "HEAD").splitlines()) == 2
    git(main, "pack-refs", "--all")  # the branch's ref only in packed-refs now, as after a gc
    assert not (main / ".git" / "refs" / "heads" / "main").exists()
    (main / "sub").mkdir()
    monkeypatch.chdir(main / "sub")
    found = repository.project_of(".")  # a relative folder too: the walk up starts from where it is
    assert found is not None and found.id == first and found.name == "main"
    git(main, "checkout", "-q", "other")  # HEAD on the other history: the other repository's identity
    switched = repository.project_of(main)
    assert switched is not None and switched.id == root_commit(other)


def test_a_repository_without_commits_is_named_by_its_remote_then_by_its_folder(store: Store, tmp_path: Path) -> None:
    remote = repo(tmp_path / "fresh" / "web", commit=False)
    git(remote, "remote", "add", "origin", "https://someone:s3cret-token@GitHub.com/Org/Web.git")
    by_url = add(store, remote, "The web app builds with vite")
    assert by_url["scope"]["project"] == "url:github.com/org/web", "the hint, without the credentials"
    bare = repo(tmp_path / "fresh" / "tool", commit=False)
    by_name = add(store, bare, "The tool is written in Go")
    assert by_name["scope"]["project"] == "tool"
    for folder in (remote, bare):  # the first commit gives the identity; what was written before still reaches
        (folder / "f").write_text("x")
        git(folder, "add", ".")
        git(folder, "commit", "-qm", "first")
    assert "vite" in prompt(store, remote, "how does the web app build?", "s-web")
    assert "written in Go" in prompt(store, bare, "what is the tool written in?", "s-tool")
    assert add(store, remote, "The web app deploys on Netlify")["scope"]["project"] == root_commit(remote)


@pytest.mark.parametrize(
    ("url", "hint"),
    [
        ("git@github.com:Org/api.git", "url:github.com/org/api"),
        ("ssh://git@github.com:22/org/api.git/", "url:github.com/org/api"),
        ("https://user:token@github.com/org/api", "url:github.com/org/api"),
        ("/srv/git/api.git", "url:/srv/git/api"),
        ("file:///srv/git/api.git", "url:/srv/git/api"),
    ],
)
def test_a_remote_url_is_normalised_without_credentials(url: str, hint: str) -> None:
    assert repository.remote_hint(url) == hint


def test_the_identity_is_cached_per_git_folder_and_refreshed_when_head_changes(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = repo(tmp_path / "api")
    cache = store.project_cache_path
    first = repository.project_of(api, cache=cache)
    assert first is not None and cache.exists()
    monkeypatch.setenv("PATH", str(tmp_path / "no-git-here"))  # a cache hit runs no git at all
    cached = repository.project_of(api / "", cache=cache)
    assert cached is not None and cached.id == first.id
    monkeypatch.undo()
    shutil.rmtree(api)
    again = repo(tmp_path / "api", "OTHER")  # another repository at the same path: not the cached identity
    fresh = repository.project_of(again, cache=cache)
    assert fresh is not None and fresh.id == root_commit(again) != first.id


def test_a_git_folder_git_itself_would_refuse_is_a_project_of_the_folders_name(tmp_path: Path) -> None:
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / ".git").write_text("gitdir: /no\0where\n")
    found = repository.project_of(odd)
    assert found is not None and (found.name, found.id, found.value) == ("odd", None, "odd")


def test_a_memory_scoped_by_name_still_reaches_the_repositories_of_that_name(store: Store, tmp_path: Path) -> None:
    """Stores written before identities scope by the folder's name, as import-jsonl lines and
    ``--scope project=NAME`` may: such a memory reaches every repository of that name, as it did."""
    api = repo(tmp_path / "one" / "api")
    web = repo(tmp_path / "one" / "web")
    old = store.root / "old.jsonl"
    old.write_text(
        json.dumps({"content": "The api caches sessions in Redis", "source": "old", "scope": {"project": "api"}}) + "\n"
    )
    cclg(store, tmp_path, "import-jsonl", str(old))
    add(store, tmp_path, "The api logs to stdout in JSON", "--scope", "project=api")
    reply = prompt(store, api, "where does the api keep sessions and logs?", "s-api")
    assert "Redis" in reply and "stdout in JSON" in reply
    assert "Redis" not in prompt(store, web, "where does the api keep sessions and logs?", "s-web")


def test_cli_search_and_pack_take_the_current_repository_as_project(store: Store, tmp_path: Path) -> None:
    api_a = repo(tmp_path / "a" / "api")
    api_b = repo(tmp_path / "b" / "api")
    mine = add(store, api_a, "Client A's api uses Postgres 16")
    theirs = add(store, api_b, "Client B's api uses MySQL 8")
    found = cclg(store, api_a, "search", "api uses", "--project", ".")
    assert [h["id"] for h in found] == [mine["id"]]
    packed = json.loads(
        subprocess.run(
            [
                CLI,
                "--root",
                str(store.root),
                "pack",
                "--query",
                "does the api use MySQL or Postgres?",
                "--project",
                ".",
                "--format",
                "json",
            ],
            cwd=api_b,
            capture_output=True,
            check=True,
        ).stdout
    )
    assert [e["id"] for e in packed["memory_nodes"]] == [theirs["id"]]
    by_id = cclg(store, tmp_path, "search", "api uses", "--project", root_commit(api_a))
    assert [h["id"] for h in by_id] == [mine["id"]]
    status = cclg(store, api_a, "status")
    assert status["project"] == {"name": "api", "id": root_commit(api_a)}
    outside = subprocess.run([CLI, "--root", str(store.root), "search", "api", "--project", "."], cwd=tmp_path)
    assert outside.returncode == 2, "'.' outside a repository names nothing: a usage error"
    assert "project" not in cclg(store, tmp_path, "status")


def test_mcp_calls_use_the_servers_repository(store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cclg import mcp_server

    api_a = repo(tmp_path / "a" / "api")
    api_b = repo(tmp_path / "b" / "api")
    monkeypatch.chdir(api_a)
    added = mcp_server.memory_add(store, "Client A's api talks to Stripe", source="mcp")
    assert added["node"]["scope"]["project"] == root_commit(api_a)
    here = mcp_server.memory_search(store, "api talks to Stripe", project=".")
    assert [h["id"] for h in here["results"]] == [added["node"]["id"]]
    monkeypatch.chdir(api_b)
    assert mcp_server.memory_search(store, "api talks to Stripe", project=".")["results"] == []
    assert mcp_server.memory_pack(store, "what does the api talk to?", project=".")["memory_nodes"] == []
    clone = tmp_path / "c" / "api"
    git(tmp_path, "clone", "-q", str(api_a), str(clone))
    monkeypatch.chdir(clone)
    packed = mcp_server.memory_pack(store, "what does the api talk to?", project=".")
    assert [e["id"] for e in packed["memory_nodes"]] == [added["node"]["id"]]


def test_a_project_scope_travels_in_a_container_to_a_clone_on_another_machine(store: Store, tmp_path: Path) -> None:
    laptop = repo(tmp_path / "laptop" / "api")
    add(store, laptop, "The api's staging database is reset nightly")
    container = tmp_path / "api.cclg"
    exported = subprocess.run([CLI, "--root", str(store.root), "export", str(container)], capture_output=True)
    assert exported.returncode == 0, exported.stderr
    other, _ = Store.init(tmp_path / "other-store")
    cclg(other, tmp_path, "import-container", str(container))
    desktop = tmp_path / "desktop" / "service"  # another machine's clone, in a folder of another name
    desktop.parent.mkdir()
    git(tmp_path, "clone", "-q", str(laptop), str(desktop))
    assert "reset nightly" in prompt(other, desktop, "is the api staging database reset?", "s-desk")
    stranger = repo(tmp_path / "desktop" / "api")
    assert "reset nightly" not in prompt(other, stranger, "is the api staging database reset?", "s-str")


def test_a_rule_learned_in_one_repository_is_not_given_in_its_namesake(store: Store, tmp_path: Path) -> None:
    from cclg.hook import handle
    from cclg.learning import rules

    api_a = repo(tmp_path / "clientA" / "api")
    api_b = repo(tmp_path / "clientB" / "api")

    def call(cwd: Path, event: str, **fields: Any) -> str | None:
        payload = {"session_id": "s-rule", "transcript_path": "/t.jsonl", "cwd": str(cwd), **fields}
        return handle(event, payload, "claude", str(store.root))

    failure = {"tool_name": "Bash", "tool_input": {"command": "make test"}, "is_interrupt": False}
    for n in range(3):
        call(api_a, "post-tool-failure", **failure, error=f"Exit code 2\nE   ImportError: no module api.db ({n})")
    passed = {"stdout": "9 passed", "stderr": "", "interrupted": False, "isImage": False}
    call(api_a, "post-tool", tool_name="Bash", tool_input={"command": "make test"}, tool_response=passed)
    (learned,) = rules.read_rules(store).values()
    assert learned.project == root_commit(api_a)
    step = {"command": "make", "failure": learned.trigger["signature"]}
    here, there = repository.project_of(api_a), repository.project_of(api_b)
    assert [r.key for r, _ in rules.near(store, step, here, set())] == [learned.key]
    assert rules.near(store, step, there, set()) == []


def test_distill_corrects_a_memory_scoped_by_the_repositorys_old_name(store: Store, tmp_path: Path) -> None:
    from cclg.api import add_memory, parse_scope
    from cclg.hook import handle
    from cclg.learning import distill

    shop = repo(tmp_path / "shop")
    old = add_memory(
        store, "The staging database listens on port 5432", source="user", scope=parse_scope({"project": "shop"})
    ).node
    for text in ("can you check the staging config?", "no, the staging database is on port 5433 now, not 5432"):
        payload = {"session_id": "s-distill", "cwd": str(shop), "hook_event_name": "UserPromptSubmit", "prompt": text}
        handle("user-prompt", payload, "claude", str(store.root))
    (correction,) = distill.propose(store, "s-distill")
    assert correction["scope"] == {"project": root_commit(shop)}
    assert correction["action"] == "supersede" and correction["target"] == old.id


def test_a_shallow_clone_is_named_by_its_remote_until_it_has_its_root(store: Store, tmp_path: Path) -> None:
    origin = repo(tmp_path / "origin" / "api")
    git(origin, "commit", "-q", "--allow-empty", "-m", "second")
    shallow = tmp_path / "ci" / "api"
    shallow.parent.mkdir()
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{origin}", str(shallow))
    found = repository.project_of(shallow)
    assert found is not None and found.id is None and found.value == f"url:{str(origin).lower()}"
    add(store, shallow, "CI runs the api tests on three Python versions")
    git(shallow, "fetch", "-q", "--unshallow")
    assert repository.git_project(shallow) == root_commit(origin)
    assert "three Python versions" in prompt(store, shallow, "which Python versions do the api tests run on?", "s-ci")
