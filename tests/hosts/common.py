"""What the Claude Code and Codex host tests share: the memories, the temporary host, cclg run inside
it, and the checks of what reached the model and what the store recorded."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CURRENT = "Deploys of the kestrel service go out through the blue-green script"
RETIRED = "Deploys of the kestrel service go out through the Jenkins pipeline"
PROMPT = "how do kestrel deploys go out?"
RETIRED_HEADING = "### Retired"


@dataclass
class Host:
    home: Path
    store: Path
    project: Path
    env: dict[str, str]
    current_id: str
    retired_id: str


def bin_dir() -> str:
    """The folder holding this environment's ``cclg``, ``cclg-hook`` and ``cclg-mcp``."""
    found = shutil.which("cclg-hook")
    return str(Path(found).parent) if found else str(Path(sys.executable).parent)


def isolated_env(home: Path, tmp: Path, *path_dirs: str) -> dict[str, str]:
    """The environment of a host run in the temporary ``home``: this environment's cclg first on PATH,
    then ``path_dirs`` and node; XDG folders and the store inside ``home``; no semantic helper; and a
    dead loopback proxy for anything that would still try to reach another host. Each host adds its own."""
    node_dir = str(Path(shutil.which("node") or "/usr/bin/node").parent)
    return {
        "PATH": os.pathsep.join([bin_dir(), *path_dirs, node_dir, "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": str(home),
        "USER": "cclg-test",
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "TMPDIR": str(tmp),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "CCLG_HOME": str(home / ".cclg-store"),
        "CCLG_SEMANTIC": "off",
        "HTTP_PROXY": "http://127.0.0.1:9",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost",
    }


def cclg(host: Host, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(bin_dir()) / "cclg"), *args], cwd=host.project, env=host.env, capture_output=True,
        text=True, timeout=120, check=check, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def strings(value: Any) -> list[str]:
    """Every string leaf of a JSON value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in strings(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in strings(item)]
    return []


def section(text: str, heading: str) -> str:
    """The Markdown section under ``heading``, up to the next heading of any level."""
    start = text.index(heading) + len(heading)
    end = text.find("\n#", start)
    return text[start:end] if end != -1 else text[start:]


def assert_current_reached_not_retired(leaves: list[str], where: str) -> None:
    """The current memory is among the texts the CLI sent to the model (``where`` names them); the
    retired one only as history, under the retired heading."""
    assert [leaf for leaf in leaves if CURRENT in leaf], f"the current memory never reached {where}"
    for leaf in leaves:
        if RETIRED not in leaf:
            continue
        assert RETIRED_HEADING in leaf, f"retired memory outside the retired heading:\n{leaf}"
        assert leaf.index(RETIRED) > leaf.index(RETIRED_HEADING), leaf
        if "### Current memories" in leaf:
            assert RETIRED not in section(leaf, "### Current memories"), leaf
            assert CURRENT in section(leaf, "### Current memories"), leaf


def events(host: Host, session_id: str) -> list[dict[str, Any]]:
    path = host.store / "sessions" / f"{session_id}.events.jsonl"
    assert path.is_file(), f"no events for session {session_id}: {sorted(p.name for p in path.parent.iterdir())}"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def assert_store_clean(host: Host) -> None:
    failures = host.store / "audit" / "hook_failures.jsonl"
    assert not failures.exists() or not failures.read_text().strip(), failures.read_text()
    doctor = cclg(host, "doctor", check=False)
    assert doctor.returncode == 0, f"cclg doctor:\n{doctor.stdout}\n{doctor.stderr}"


# A command that fails the same way each time (the sensors' pain, issue 18), and the line the model
# must get after its third failure.
FAILING_COMMAND = "python3 -c \"import sys; print('boom'); sys.exit('ValueError: bad thing 42')\""
PAIN_LINE = '- pain: "python3" failed 3 times in a row with the same error: "ValueError: bad thing N"'


def assert_pain_reached_model_once(requests_text: list[str]) -> None:
    """``requests_text``: the text of each model request after each failure. The first two carry no
    sensor line, the third the pain line (and nothing else from the sensors)."""
    assert len(requests_text) >= 3, len(requests_text)
    assert not any("cclg sensors" in text for text in requests_text[:2]), requests_text[:2]
    assert PAIN_LINE in requests_text[2], requests_text[2][-3000:]


# The project as a git repository with a code graph (issue 20): the prompt's CodeGraphPack names the
# file that deploys kestrel, with its reason.
CODE_FILE = "deploy/blue_green.py"
CODE_FILES = {
    CODE_FILE: (
        '"""Kestrel deploys: the blue-green switch."""\n\n\n'
        "def deploy_kestrel(release):\n    switch_traffic(release, to='green')\n\n\n"
        "def switch_traffic(release, to):\n    return (release, to)\n"
    ),
    "billing/invoice.py": "class Invoice:\n    def total(self):\n        return 0\n",
    "README.md": "kestrel\n",
}
CODE_GRAPH_HEADING = "## Code graph: files to read first"


def index_project(host: Host) -> None:
    """Make the host's project a git repository of ``CODE_FILES`` and index its code graph."""
    for relative, text in CODE_FILES.items():
        path = host.project / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    identity = ["-c", "user.name=Test", "-c", "user.email=test@example.com"]
    for args in (["init", "-q"], ["add", "-A"], [*identity, "commit", "-q", "-m", "kestrel deploys"]):
        subprocess.run(["git", *args], cwd=host.project, env=host.env, check=True, capture_output=True)
    cclg(host, "code-index", str(host.project))


def assert_code_graph_reached(leaves: list[str]) -> None:
    """One text the CLI sent to the model holds the CodeGraphPack, which lists the deploy file first."""
    packs = [leaf[leaf.index(CODE_GRAPH_HEADING) :] for leaf in leaves if CODE_GRAPH_HEADING in leaf]
    assert packs, "the code graph never reached the model"
    assert f'1. "{CODE_FILE}": ' in packs[0], packs[0]


# Prompts of one working day, each its own session (session-start wakes the store's helper): the helper's
# share of the prompts after the first (issue 29's target: at least 95%).
HELPER_PROMPTS = (
    PROMPT,
    "which script deploys kestrel?",
    "remind me how a kestrel release goes out",
    "kestrel deploy: blue-green or Jenkins?",
    "how do I ship kestrel to production?",
    "what do kestrel deploys use now?",
)


@contextlib.contextmanager
def semantic_helper(host: Host) -> Iterator[Callable[[], dict[str, int]]]:
    """Semantic recall on for ``host`` (a runtime folder of its own, short enough for a socket's path),
    the helpers started in it ended afterwards; yields the store's answer counts (``cclg doctor``'s)."""
    folder = Path(tempfile.mkdtemp(prefix="ch", dir="/tmp"))
    os.chmod(folder, 0o700)
    saved = dict(host.env)
    host.env.update(CCLG_SEMANTIC="", CCLG_SEMANTIC_DIR=str(folder), CCLG_SEMANTIC_IDLE="120")

    def counts() -> dict[str, int]:
        path = host.store / "active" / "semantic_answers.json"
        pairs = json.loads(path.read_text()).values() if path.exists() else []
        return {"answered": sum(p[0] for p in pairs), "missed": sum(p[1] for p in pairs)}

    try:
        yield counts
    finally:
        host.env.clear()
        host.env.update(saved)
        pids = [int(p) for p in (lock.read_text().strip() for lock in folder.glob("*.lock")) if p.isdigit()]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while list(folder.glob("*.lock")) and time.monotonic() < deadline:
            time.sleep(0.1)
        shutil.rmtree(folder, ignore_errors=True)


def helper_share(host: Host, run_prompt: Callable[[str], None]) -> tuple[int, int]:
    """Run ``HELPER_PROMPTS`` through the host (``run_prompt``) with the helper on; (answered, asked) of the
    prompts after the first, printed for the benchmark's record."""
    with semantic_helper(host) as counts:
        seen = [counts()]
        for prompt in HELPER_PROMPTS:  # the first session's start starts the helper: it may still be loading
            run_prompt(prompt)
            seen.append(counts())
    answered, asked = seen[-1]["answered"] - seen[1]["answered"], len(HELPER_PROMPTS) - 1
    each = "".join("a" if now["answered"] > then["answered"] else "m" for then, now in itertools.pairwise(seen))
    print(f"the helper answered {answered} of the {asked} prompts after the first (each prompt: {each})")
    return answered, asked
