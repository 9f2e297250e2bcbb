"""Evaluation of the usage prior (issue 19) on a simulated usage stream.

Run by hand:

    python benchmarks/eval_usage.py [--pairs 20] [--sessions 6]

Each pair is two memories of one project that answer the same question about equally well (two
ways to run the tests, two deploy routes, ...), of which the team actually follows one. For each
pair, in a fresh store, through the hook as a host runs it: a first session asks the question
(both are delivered, in the order relevance gives); then ``--sessions`` sessions ask it and run
the command of the followed memory; a last session asks again. Reported: how often the followed
memory came first before the stream and after it, and that both were still delivered (usage
orders what relevance chose; it decides nothing about relevance). The retrieval evaluation, on
stores without usage evidence, must be unchanged: see ``eval_retrieval.py`` in RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
from pathlib import Path

from cclg import api
from cclg.core.store import Store
from cclg.hook import handle

TOOLS = [
    ("run the tests", "pytest -q", "tox -e py312"),
    ("deploy the api", "make deploy-blue", "kubectl apply -f k8s/api.yaml"),
    ("install dependencies", "pnpm install --frozen-lockfile", "yarn install --immutable"),
    ("build the docs", "mkdocs build --strict", "sphinx-build docs site"),
    ("format the code", "ruff format .", "black --line-length 100 ."),
    ("start the database", "docker compose up -d db", "pg_ctl -D ./pgdata start"),
    ("lint the frontend", "npm run lint", "eslint --cache src"),
    ("regenerate the client", "openapi-generator generate -g python", "make client-gen"),
]


def call(store: Store, session: str, event: str, **fields: object) -> str:
    names = {"user-prompt": "UserPromptSubmit", "post-tool": "PostToolUse", "session-end": "SessionEnd"}
    payload = {"session_id": session, "cwd": "/home/u/shop", "hook_event_name": names[event], **fields}
    return handle(event, payload, "claude", str(store.root)) or ""


def ask(store: Store, session: str, question: str, command: str | None) -> str:
    context = call(store, session, "user-prompt", prompt=f"how do we {question} here?")
    if command is not None:
        response = {"stdout": "ok", "stderr": "", "interrupted": False, "isImage": False}
        call(store, session, "post-tool", tool_name="Bash", tool_input={"command": command}, tool_response=response)
    call(store, session, "session-end", reason="exit")
    return context


def run_pair(work: Path, number: int, sessions: int, rng: random.Random) -> tuple[bool, bool, bool]:
    question, one, other = TOOLS[number % len(TOOLS)]
    followed, skipped = (one, other) if rng.random() < 0.5 else (other, one)
    root = work / f"pair-{number}"
    store, _ = Store.init(root)
    scope = api.parse_scope({"project": "shop"})
    texts = {}
    for command in (followed, skipped):
        texts[command] = f"To {question}, run `{command}` from the repository root."
        api.add_memory(store, texts[command], source="user", scope=scope)
    before = ask(store, "first", question, None)
    for session in range(sessions):
        ask(store, f"stream-{session}", question, followed)
    after = ask(store, "last", question, None)
    first_before = texts[followed] in before and before.index(texts[followed]) < before.index(texts[skipped])
    first_after = texts[followed] in after and after.index(texts[followed]) < after.index(texts[skipped])
    both = all(text in after for text in texts.values())
    shutil.rmtree(root, ignore_errors=True)
    return first_before, first_after, both


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--sessions", type=int, default=6)
    args = parser.parse_args()
    os.environ.setdefault("CCLG_SEMANTIC", "off")
    rng = random.Random(19)
    work = Path(tempfile.mkdtemp(prefix="cclg-eval-usage-"))
    try:
        results = [run_pair(work, n, args.sessions, rng) for n in range(args.pairs)]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    before, after, both = (sum(r[i] for r in results) for i in range(3))
    print(f"pairs {args.pairs}, sessions in the stream {args.sessions}")
    print(f"followed memory first: before the stream {before} of {args.pairs}, after it {after} of {args.pairs}")
    print(f"both memories still delivered after the stream: {both} of {args.pairs}")


if __name__ == "__main__":
    main()
