"""The agent CLIs of the host tests: each pinned release installed once from the npm registry into a
cache folder outside the repository, and reused while it reports its version."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

# Read at import time: tests/conftest.py points HOME at a temporary folder for every test.
CACHE_ROOT = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cclg-test-hosts"


def install(package: str, version: str, command: str, env: dict[str, str] | None = None) -> Path:
    """The path of ``command`` from ``package@version``, installed on first use; skips the test (one line
    saying why) without node and npm or when the install fails. ``env`` is added when it runs
    ``command --version`` to check an install (in a temporary home, never the real one)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("host tests need node and npm on PATH")
    prefix = CACHE_ROOT / f"{package.rpartition('/')[2]}-{version}"
    executable = prefix / "node_modules" / ".bin" / command
    if not _reports(executable, version, env or {}):
        prefix.mkdir(parents=True, exist_ok=True)
        try:
            result = subprocess.run(
                [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--no-save",
                 f"{package}@{version}"],
                capture_output=True, text=True, timeout=600, check=False, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            pytest.skip(f"host tests: npm install {package} failed: {exc}")
        if result.returncode != 0 or not _reports(executable, version, env or {}):
            last = (result.stderr.strip().splitlines() or ["no output"])[-1]
            pytest.skip(f"host tests: npm install {package}@{version} failed: {last}")
    return executable


def _reports(executable: Path, version: str, env: dict[str, str]) -> bool:
    """Whether ``executable --version`` runs and names ``version``."""
    if not executable.exists():
        return False
    with tempfile.TemporaryDirectory(prefix="cclg-host-home-") as home:
        extra = {name: value.replace("{home}", home) for name, value in env.items()}
        for value in extra.values():
            if value.startswith(home):
                Path(value).mkdir(parents=True, exist_ok=True)
        try:
            out = subprocess.run(
                [str(executable), "--version"], capture_output=True, text=True, timeout=60, check=False,
                stdin=subprocess.DEVNULL, env={**os.environ, "HOME": home, **extra}, cwd=home,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired):
            return False
    return out.returncode == 0 and version in out.stdout
