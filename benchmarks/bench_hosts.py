"""Issue 16: are cclg's MCP tools in Codex's first model request after a default ``cclg install codex``?

Runs the real Codex CLI (the version tests/hosts/codex.py pins, installed once from the npm registry into
its cache folder) ``--runs`` times against the loopback fake of the OpenAI Responses API, each run in a
fresh temporary HOME with ``cclg init``, one memory and ``cclg install codex`` exactly as a user gets it
(no ``required = true``). Counts the runs whose first ``/responses`` request already lists the
``mcp__cclg`` tool namespace, and reports per run the time from launching ``codex exec`` to its first
request and, separately after that run, the time a fresh ``cclg-mcp`` takes from spawn to its answer to
``tools/list``. ``--busy N`` keeps N extra processes spinning on the CPU meanwhile.

    python benchmarks/bench_hosts.py --runs 20 [--busy 1] [--project]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.hosts.codex import FAKE_KEY_VARIABLE, FakeResponses, install_codex, provider_config  # noqa: E402
from tests.hosts.common import bin_dir, isolated_env  # noqa: E402

NAMESPACE = "mcp__cclg"
PROMPT = "how do kestrel deploys go out?"


def _env(tmp: Path, codex: Path) -> dict[str, str]:
    home = tmp / "home"
    env = isolated_env(home, tmp, str(codex.parent))  # codex on PATH: install asks it for the hooks to trust
    env.update(CODEX_HOME=str(home / ".codex"), **{FAKE_KEY_VARIABLE: "sk-test-dummy-key"})
    return env


def _cclg(env: dict[str, str], cwd: Path, *args: str) -> None:
    subprocess.run(
        [str(Path(bin_dir()) / "cclg"), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
        check=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _tools_list_seconds(env: dict[str, str], cwd: Path) -> float:
    """Spawn ``cclg-mcp`` as Codex does and time spawn -> the answer to ``tools/list``."""
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]  # fmt: skip
    start = time.monotonic()
    proc = subprocess.Popen(
        [str(Path(bin_dir()) / "cclg-mcp"), "--root", env["CCLG_HOME"]], cwd=cwd, env=env,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    try:
        for message in messages:
            proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()
        for line in proc.stdout:
            reply = json.loads(line)
            if reply.get("id") == 2:
                assert reply.get("result", {}).get("tools"), reply
                return time.monotonic() - start
        raise RuntimeError("cclg-mcp closed its output before answering tools/list")
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def one_run(codex: Path, overrides: list[str], project_install: bool = False) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="cclg-bench-hosts-") as tmp_name, FakeResponses() as fake:
        tmp = Path(tmp_name)
        env = _env(tmp, codex)
        project = Path(env["HOME"]) / "work" / "kestrel"
        project.mkdir(parents=True)
        Path(env["CODEX_HOME"]).mkdir()
        user_config = provider_config(fake.url)
        if project_install:  # the user has trusted the project, as Codex asks on its first start there
            subprocess.run(["git", "init", "-q", str(project)], check=True)
            user_config += f'\n[projects."{project}"]\ntrust_level = "trusted"\n'
        (Path(env["CODEX_HOME"]) / "config.toml").write_text(user_config)
        _cclg(env, project, "init")
        _cclg(env, project, "add", "--content", "Kestrel deploys go out through the blue-green script",
              "--source", "user")  # fmt: skip
        _cclg(env, project, "install", "codex", *(["--project", str(project)] if project_install else []))
        start = time.monotonic()
        result = subprocess.run(
            [str(codex), "exec", "--json", "--skip-git-repo-check",
             *[arg for override in overrides for arg in ("-c", override)], PROMPT],
            cwd=project, env=env, capture_output=True, text=True, timeout=120, check=False,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        firsts = fake.posted("/responses")
        if result.returncode != 0 or not firsts:
            raise RuntimeError(f"codex exec failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
        first = firsts[0]
        names = [tool.get("name") for tool in first["body"].get("tools", [])]
        return {
            "present": NAMESPACE in names,
            "first_request_s": first["at"] - start,
            "tools_list_s": _tools_list_seconds(env, project),
        }


def _spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f} s, min {min(values):.2f}, max {max(values):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--busy", type=int, default=0, help="extra processes spinning on the CPU meanwhile")
    parser.add_argument(
        "-c",
        "--codex-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="passed to codex exec as -c KEY=VALUE (to try a setting; default: none)",
    )
    parser.add_argument(
        "--project", action="store_true", help="`cclg install codex --project` in a trusted project, not the user's"
    )
    args = parser.parse_args()

    codex = install_codex()
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL) for _ in range(args.busy)
    ]
    runs: list[dict[str, Any]] = []
    try:
        for number in range(1, args.runs + 1):
            run = one_run(codex, args.codex_config, args.project)
            runs.append(run)
            print(
                f"run {number:2d}: tools in first request: {'yes' if run['present'] else 'NO '}  "
                f"first request {run['first_request_s']:.2f} s  cclg-mcp tools/list {run['tools_list_s']:.2f} s",
                flush=True,
            )
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    present = sum(run["present"] for run in runs)
    settings = ", ".join(args.codex_config) or "none"
    print(f"\ncclg's MCP tools in the first request: {present} of {len(runs)} runs")
    print(f"busy processes: {args.busy}; codex -c: {settings}; install: {'project' if args.project else 'user'}")
    print(f"launch -> first request: {_spread([run['first_request_s'] for run in runs])}")
    print(f"cclg-mcp spawn -> tools/list answer: {_spread([run['tools_list_s'] for run in runs])}")


if __name__ == "__main__":
    main()
