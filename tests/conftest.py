"""Shared fixtures. No test touches a real home directory: CCLG_HOME and HOME point into tmp_path,
and each test runs in a folder of its own (outside any git repository, so a memory added there has
no project scope unless the test makes one)."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cclg.core.store import Store

# No semantic helper started behind the tests' backs, not even by module-scoped fixtures that run
# before the autouse one (tests/test_semantic.py turns it on for itself).
os.environ["CCLG_SEMANTIC"] = "off"
# The commands the tests run (cclg, cclg-hook, cclg-mcp) are those of the interpreter that runs them,
# whether or not its environment is activated (the README runs `.venv/bin/python -m pytest`).
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
DATA = Path(__file__).parent / "data"
REPO = Path(__file__).parent.parent


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CCLG_HOME", str(tmp_path / "cclg-home"))
    monkeypatch.delenv("CODEX_HOME", raising=False)  # Codex's configuration is under the test's HOME
    # No semantic helpers started behind the tests' backs (tests/test_semantic.py turns it on).
    monkeypatch.setenv("CCLG_SEMANTIC", "off")
    work = tmp_path.parent / f"{tmp_path.name}-cwd"  # beside tmp_path: tests may check what appears in it
    work.mkdir(exist_ok=True)
    monkeypatch.chdir(work)


@pytest.fixture(autouse=True)
def _private_umask() -> Iterator[None]:
    """Files a test makes by hand in a store (a conflict copy, an edited record) are private, as the store's
    own are, so that doctor's modes check stays out of tests about other things; the tests of that check
    (tests/test_store_modes.py) and of modes under a given umask set theirs."""
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """A fresh, empty store."""
    created, _ = Store.init(tmp_path / "store")
    return created


@pytest.fixture
def reference_store(tmp_path: Path) -> Store:
    """A copy of the demo store written by the reference implementation (cclg 0.2.3)."""
    target = tmp_path / "reference-store"
    shutil.copytree(DATA / "reference-demo-store", target)
    owner_only(target)  # a checkout's modes are git's (0644, 0755); a store's own are 0600 and 0700
    return Store.open(target)


def owner_only(root: Path) -> None:
    """Give every file under ``root`` mode 0600 and every folder 0700, as cclg makes a store's."""
    for path in [root, *root.rglob("*")]:
        path.chmod(0o700 if path.is_dir() else 0o600)


@pytest.fixture(autouse=True, scope="session")
def _no_helper_outlives_the_tests(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """End the semantic helpers that tests started for their stores (a host's MCP server wakes one, a test
    of the client starts one): each would otherwise stay up for its idle time after the run. Found by
    their command line (``--helper --root`` a store under this run's temporary folder); where processes
    cannot be listed so (no ``/proc``), they end on their own when their store's folder goes."""
    yield
    import signal

    base = str(tmp_path_factory.getbasetemp())
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        root = args[args.index(b"--root") + 1 :][:1] if b"--helper" in args and b"--root" in args else []
        if root and os.fsdecode(root[0]).startswith(base):
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(cmdline.parent.name), signal.SIGTERM)
