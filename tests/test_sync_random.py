"""Two teammates and CI on one bare remote, random operations, random syncs (issue 30).

Each of two stores runs random operations (add, refine, supersede, forget, rollback, label), many on
memories the other side changes too, and syncs at random moments, several times in real processes at
once. After final syncs in both directions and a sync of the third store (CI): every patch of either
side is in all three, git holds no conflict, every semantic conflict is listed on all three, doctor is
clean on all three, and the pack for the same prompt is byte-identical on all three.

``CCLG_SYNC_OPS`` (operations a side, default 60) and ``CCLG_SYNC_SEEDS`` (how many seeds, default 2)
make it longer; the issue's full run is ``CCLG_SYNC_OPS=1000 CCLG_SYNC_SEEDS=1``, and the figures it
prints (ops, syncs, conflicts surfaced, records lost) are in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cclg import api
from cclg.core.records import Scope
from cclg.core.store import Store
from cclg.errors import CclgError

OPS = int(os.environ.get("CCLG_SYNC_OPS", "60"))
SEEDS = int(os.environ.get("CCLG_SYNC_SEEDS", "2"))
PROJECT = "git:feedfacefeedfacefeedfacefeedfacefeedface"
WORDS = "deploy build tests runner port cache queue staging release migrations vite webpack lint docker".split()
PROMPTS = ("how do we deploy to staging", "which port does the queue use", "how are the tests run")


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(5)) + f" {rng.randrange(10**6)}"


def current_ids(store: Store) -> list[str]:
    listed = api.list_memories(store, {"status": "active"}, limit=10_000)["memories"]
    return sorted(m.id for m in listed)


def operate(store: Store, rng: random.Random, own_patches: list[str]) -> str | None:
    """One random operation on ``store``; the name of what was done, or None when the ledger refused it."""
    ids = current_ids(store)
    kind = rng.choice(["add", "add", "refine", "supersede", "forget", "rollback", "label"]) if ids else "add"
    try:
        if kind == "add":
            done: Any = api.add_memory(
                store,
                sentence(rng),
                source="user",
                scope=Scope(project=PROJECT),
                key=rng.choice([None, None, "team." + rng.choice(WORDS)]),
            )
            own_patches.append(done.patch.id)
        elif kind in ("refine", "supersede"):
            result = api.patch(store, kind, [rng.choice(ids)], contents=[sentence(rng)], reason=kind)
            own_patches.append(result.patch.id)
        elif kind == "forget":
            own_patches.append(api.forget(store, rng.choice(ids)).patch.id)
        elif kind == "label":
            labels = {"trust": rng.choice(["trusted", "untrusted"]), "retention": rng.choice(["preferred", "optional"])}
            own_patches.append(api.label(store, rng.choice(ids), reason="relabel", **labels).patch.id)
        else:
            patches = [p.id for p in api.history(store, limit=30)]
            own_patches.append(api.rollback(store, rng.choice(patches)).patch.id)
    except CclgError:
        return None
    return kind


def run_sync(root: Path) -> subprocess.Popen[bytes]:
    env = {k: os.environ[k] for k in ("HOME", "CCLG_HOME", "CCLG_SEMANTIC", "PATH") if k in os.environ}
    return subprocess.Popen([sys.executable, "-m", "cclg", "--root", str(root), "sync"], env=env)


def git_clean(store: Store) -> None:
    clone = store.sync_clone("team")
    unmerged = subprocess.run(["git", "ls-files", "-u"], cwd=clone, capture_output=True, text=True, check=True)
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True, check=True)
    assert unmerged.stdout == "" and status.stdout == ""
    assert not (clone / ".git" / "MERGE_HEAD").exists()


def pack_text(root: Path, prompt: str) -> bytes:
    env = {k: os.environ[k] for k in ("HOME", "CCLG_HOME", "CCLG_SEMANTIC", "PATH") if k in os.environ}
    args = [sys.executable, "-m", "cclg", "--root", str(root), "pack", "--query", prompt, "--format", "markdown"]
    return subprocess.run(args, capture_output=True, check=True, env=env).stdout


def play(tmp_path: Path, seed: int, ops: int) -> dict[str, int]:
    """The whole game for one seed; its figures."""
    rng = random.Random(seed)
    remote = tmp_path / "team.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    roots = [tmp_path / name for name in ("a", "b", "ci")]
    stores = []
    for root in roots:
        store, _ = api.init_store(root)
        api.add_remote(store, "team", str(remote), trust="trusted")
        stores.append(store)
    own: list[list[str]] = [[], []]
    figures = {"ops": 0, "refused": 0, "syncs": 0, "concurrent": 0}
    for _ in range(2 * ops):
        side = rng.randrange(2)
        done = operate(stores[side], rng, own[side])
        figures["ops" if done else "refused"] += 1
        roll = rng.random()
        if roll < 0.06:
            api.sync_remote(stores[side], "team")
            figures["syncs"] += 1
        elif roll < 0.08:  # both teammates sync at once, in processes of their own, while one keeps working
            running = [run_sync(roots[0]), run_sync(roots[1])]
            for _ in range(3):
                figures["ops" if operate(stores[side], rng, own[side]) else "refused"] += 1
            assert [process.wait() for process in running] == [0, 0]
            figures["syncs"] += 2
            figures["concurrent"] += 1
    for index in (0, 1, 0, 2):
        api.sync_remote(stores[index], "team")
        figures["syncs"] += 1
    patch_sets = [{p.name for p in (root / "patches").iterdir()} for root in roots]
    written = set(own[0]) | set(own[1])
    lost = {f"{p}.json" for p in written} - patch_sets[2]
    assert patch_sets[0] == patch_sets[1] == patch_sets[2] and not lost
    for store in stores:
        git_clean(store)
    conflicts = [sorted(entry["node"]["id"] for entry in api.conflicts(Store.open(root))) for root in roots]
    assert conflicts[0] == conflicts[1] == conflicts[2]
    for root in roots:
        report = api.diagnose(Store.open(root))
        assert report.ok, [f.to_dict() for f in report.findings]
    for prompt in PROMPTS:
        packs = [pack_text(root, prompt) for root in roots]
        assert packs[0] == packs[1] == packs[2]
    figures.update(patches=len(patch_sets[0]), conflicts=len(conflicts[0]), lost=len(lost))
    return figures


@pytest.mark.parametrize("seed", range(SEEDS))
def test_random_operations_and_syncs_lose_nothing_and_agree_everywhere(tmp_path: Path, seed: int) -> None:
    figures = play(tmp_path, seed, OPS)
    print(f"seed {seed}: {figures}")
    assert figures["lost"] == 0
