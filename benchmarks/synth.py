"""Synthetic software-project memories for the benchmarks (not part of the package).

``facts(count, seed)`` yields import-jsonl lines (dicts with content, source,
type, key, scope, tags) that read like what a coding agent would remember about
many projects: test and build commands, owners, ports, environment variables,
pinned versions, known bugs, decisions, preferences. Vocabulary grows with the
store: project, service and identifier names are made up from syllables, so a
large store has many distinct rare words beside the common software words that
every fact shares, much as a real one does. A small share of the lines are in
Korean or Japanese.

``bench_queries(count, seed)`` gives task-like prompts over the same vocabulary
(and a few off-topic ones), for timing; they are not relevance judgements.

``reserved`` names can be kept out of the generated names. (The retrieval
evaluation no longer uses these facts: its distractors come from the richer
grammar in ``benchmarks/distractors.py``.)
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

_ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "kr", "st", "tr", "pl", "sh"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ou"]
_CODAS = ["", "", "", "n", "r", "l", "x", "k", "s"]

VERBS = [
    "parse",
    "load",
    "sync",
    "render",
    "fetch",
    "flush",
    "resolve",
    "validate",
    "encode",
    "merge",
    "schedule",
    "dispatch",
    "compact",
    "refresh",
    "index",
    "publish",
    "archive",
    "reconcile",
    "throttle",
    "migrate",
]
NOUNS = [
    "invoice",
    "session",
    "token",
    "header",
    "ledger",
    "payload",
    "cursor",
    "manifest",
    "snapshot",
    "tenant",
    "webhook",
    "quota",
    "shard",
    "batch",
    "profile",
    "catalog",
    "receipt",
    "schema",
    "bucket",
    "report",
    "channel",
    "order",
    "sensor",
    "metric",
    "asset",
    "thumbnail",
    "cart",
    "coupon",
    "playlist",
    "workspace",
]
ROLES = [
    "gateway",
    "worker",
    "scheduler",
    "api",
    "frontend",
    "indexer",
    "exporter",
    "proxy",
    "collector",
    "bridge",
    "dashboard",
    "cli",
    "sdk",
    "daemon",
    "importer",
    "notifier",
]
TOOLS = {
    "test": [
        "pytest -q",
        "pytest -x --ff",
        "go test ./...",
        "cargo test",
        "cargo nextest run",
        "npm test",
        "yarn jest",
        "pnpm vitest run",
        "mvn -q verify",
        "gradle check",
        "bundle exec rspec",
        "mix test",
        "tox -e py311",
        "nox -s tests",
        "dotnet test",
        "make check",
    ],
    "lint": [
        "ruff check",
        "flake8",
        "eslint .",
        "golangci-lint run",
        "cargo clippy",
        "rubocop",
        "ktlint",
        "mypy --strict",
        "tsc --noEmit",
        "shellcheck",
        "hadolint",
        "stylelint",
    ],
    "fmt": ["black", "ruff format", "prettier", "gofmt", "rustfmt", "clang-format", "isort", "google-java-format"],
    "db": [
        "PostgreSQL",
        "MySQL",
        "SQLite",
        "MongoDB",
        "Redis",
        "Cassandra",
        "DynamoDB",
        "ClickHouse",
        "Elasticsearch",
        "CockroachDB",
        "MariaDB",
        "Neo4j",
    ],
    "ci": ["GitHub Actions", "GitLab CI", "Jenkins", "Buildkite", "CircleCI", "Drone", "Azure Pipelines"],
    "deploy": ["Argo CD", "Helm", "Terraform", "Ansible", "Nomad", "Fly.io", "Heroku", "Kubernetes", "ECS"],
    "lib": [
        "requests",
        "httpx",
        "pydantic",
        "sqlalchemy",
        "celery",
        "fastapi",
        "django",
        "flask",
        "tokio",
        "serde",
        "axum",
        "react",
        "vue",
        "svelte",
        "express",
        "nestjs",
        "spring-boot",
        "grpc",
        "protobuf",
        "numpy",
        "pandas",
        "polars",
        "kafka-python",
        "boto3",
        "redis-py",
        "alembic",
        "jinja2",
        "lodash",
    ],
}
PEOPLE = [
    "Ana",
    "Bilal",
    "Chen",
    "Dmitri",
    "Elif",
    "Farah",
    "Gustavo",
    "Hiro",
    "Ines",
    "Jonas",
    "Keiko",
    "Luca",
    "Maya",
    "Nnamdi",
    "Olga",
    "Priya",
    "Quentin",
    "Rosa",
    "Sven",
    "Tariq",
    "Uma",
    "Viktor",
    "Wen",
    "Yusuf",
]
ERRORS = [
    "TimeoutError",
    "KeyError",
    "ValueError",
    "ConnectionResetError",
    "PermissionError",
    "OverflowError",
    "IntegrityError",
    "DeadlockDetected",
    "NullPointerException",
    "PanicError",
]
CONDITIONS = [
    "the upstream returns 429",
    "the cache is cold",
    "two writers race on the same row",
    "the payload is empty",
    "the clock skews by more than a second",
    "the disk is almost full",
    "a retry hits a half-open circuit",
    "the tenant has no default region",
    "the token has expired",
    "a batch spans midnight UTC",
]
REASONS = [
    "it halves cold-start time",
    "its licence is compatible",
    "the old one is unmaintained",
    "it streams instead of buffering",
    "the team already knows it",
    "it supports async natively",
    "memory use dropped by a third",
    "it has first-class typing",
]
PREFS = [
    "small commits with one change each",
    "explicit type hints on public functions",
    "tabs over spaces",
    "early returns over nested conditionals",
    "table-driven tests",
    "no new dependencies without discussion",
    "descriptive branch names like feature/<ticket>",
    "logging through the shared logger only",
]
KO_TEMPLATES = [
    "{project} {role}의 테스트는 `{test}` 명령으로 실행하고, 실패하면 {person}에게 알린다.",
    "{project} 배포 전에 {db} 마이그레이션을 먼저 적용해야 한다.",
    "{project}에서 {function} 함수는 {n}초 동안 결과를 캐시한다.",
    "{project} {role} 담당자는 {person}이며, 설정 파일은 {path}에 있다.",
]
JA_TEMPLATES = [
    "{project}の{role}のテストは`{test}`で実行し、失敗したら{person}さんに連絡します。",
    "{project}では{function}が{n}秒間結果をキャッシュします。",
    "{project}の設定ファイルは{path}にあり、環境変数{env}で上書きできます。",
]


def _syllables(rng: random.Random, count: int) -> str:
    return "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(count))


class Vocabulary:
    """Name pools that grow with the number of facts."""

    def __init__(self, count: int, rng: random.Random, reserved: set[str] | frozenset[str] = frozenset()) -> None:
        self.rng = rng
        projects: set[str] = set()
        while len(projects) < max(8, count // 120):
            name = _syllables(rng, rng.choice([2, 2, 3]))
            if name not in reserved and len(name) > 3:
                projects.add(name)
        self.projects = sorted(projects)
        self.components = {p: [f"{p}-{rng.choice(ROLES)}" for _ in range(rng.randint(2, 5))] for p in self.projects}
        coined: set[str] = set()
        while len(coined) < max(40, count // 8):
            coined.add(_syllables(rng, 2))
        self.coined = sorted(coined - set(reserved))

    def noun(self) -> str:
        """A common noun or, half the time, a coined word (an identifier part few facts share)."""
        return self.rng.choice(NOUNS) if self.rng.random() < 0.5 else self.rng.choice(self.coined)

    def function(self) -> str:
        rng = self.rng
        verb, noun = rng.choice(VERBS), self.noun()
        if rng.random() < 0.5:
            return f"{verb}{noun.capitalize()}{rng.choice(['', 'Async', 'Batch', 'V2', 'Header'])}"
        return f"{verb}_{noun}{rng.choice(['', '_async', '_batch', '_v2', '_safe'])}"

    def path(self, project: str) -> str:
        rng = self.rng
        ext = rng.choice(["py", "ts", "go", "rs", "toml", "yaml", "java", "rb"])
        return f"{rng.choice(['src', 'lib', 'cmd', 'app', 'config'])}/{project}/{self.noun()}.{ext}"

    def env(self, project: str) -> str:
        return (
            f"{project.upper()}_{self.rng.choice(NOUNS).upper()}_{self.rng.choice(['URL', 'TOKEN', 'TIMEOUT', 'DSN'])}"
        )

    def version(self) -> str:
        return f"{self.rng.randint(0, 9)}.{self.rng.randint(0, 30)}"


def _english(vocab: Vocabulary, project: str) -> tuple[str, str, str]:
    """(content, type, topic) for one English fact about ``project``."""
    rng = vocab.rng
    comp = rng.choice(vocab.components[project])
    fn = vocab.function()
    lib, lib2 = rng.sample(TOOLS["lib"], 2)
    person = rng.choice(PEOPLE)
    choices = [
        (
            "tests",
            "runbook",
            f"Run the {comp} tests with `{rng.choice(TOOLS['test'])}`; the {rng.choice(NOUNS)} "
            f"suite needs {rng.choice(TOOLS['db'])} listening on port {rng.randint(1024, 65000)}.",
        ),
        (
            "config",
            "project_fact",
            f"{comp} reads {vocab.env(project)} at start-up; without it {fn}() raises {rng.choice(ERRORS)}.",
        ),
        ("owner", "relationship", f"{person} owns {comp}; ask {person} before changing {vocab.path(project)}."),
        (
            "deploy",
            "runbook",
            f"Deploys of {project} go through {rng.choice(TOOLS['ci'])} and "
            f"{rng.choice(TOOLS['deploy'])}; staging is {project}-staging.internal and needs the "
            f"{rng.choice(['release', 'canary', 'hotfix', 'approved'])} label.",
        ),
        (
            "cache",
            "project_fact",
            f"In {project}, {fn} caches {rng.choice(NOUNS)} lookups for {rng.randint(5, 900)} "
            f"seconds in {rng.choice(['Redis', 'memcached', 'an in-process LRU', 'the CDN'])}.",
        ),
        (
            "pin",
            "constraint",
            f"{project} pins {lib} to {vocab.version()} because {lib} {vocab.version()} broke "
            f"{fn} in {vocab.path(project)}.",
        ),
        (
            "migrations",
            "runbook",
            f"Database migrations for {project} live in migrations/{project}/; apply them "
            f"before running `{rng.choice(TOOLS['test'])}` against {rng.choice(TOOLS['db'])}.",
        ),
        (
            "style",
            "preference",
            f"Code style in {project}: {rng.choice(TOOLS['fmt'])} with line length "
            f"{rng.choice([79, 88, 100, 120])}, {rng.choice(TOOLS['lint'])} in CI, and {rng.choice(PREFS)}.",
        ),
        (
            "api",
            "project_fact",
            f"The {comp} endpoint /{rng.choice(NOUNS)}s/{{id}} returns "
            f"{rng.choice([400, 404, 409, 422, 503])} when {rng.choice(CONDITIONS)}.",
        ),
        ("decision", "project_decision", f"We chose {lib} over {lib2} for {comp} because {rng.choice(REASONS)}."),
        (
            "bug",
            "warning",
            f"Known bug: {fn} in {vocab.path(project)} leaks "
            f"{rng.choice(['file handles', 'goroutines', 'connections', 'memory', 'threads'])} when "
            f"{rng.choice(CONDITIONS)}; workaround: restart {comp} nightly.",
        ),
        ("pref", "preference", f"The user prefers {rng.choice(PREFS)} when working on {project}."),
        (
            "perf",
            "benchmark_requirement",
            f"{comp} must answer {fn} within {rng.choice([5, 20, 50, 200])} ms at "
            f"p99 for {rng.choice([100, 1000, 5000])} requests per second.",
        ),
        (
            "event",
            "temporal_event",
            f"On {rng.randint(2021, 2025)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} "
            f"{project} moved {comp} from {rng.choice(TOOLS['deploy'])} to {rng.choice(TOOLS['deploy'])}.",
        ),
    ]
    topic, kind, content = rng.choice(choices)
    return content, kind, topic


def facts(count: int, seed: int = 7, reserved: set[str] | frozenset[str] = frozenset()) -> Iterator[dict[str, Any]]:
    """``count`` import-jsonl lines; about a third carry a key, about 5% are in Korean or Japanese."""
    rng = random.Random(seed)
    vocab = Vocabulary(count, rng, reserved)
    for i in range(count):
        project = rng.choice(vocab.projects)
        roll = rng.random()
        if roll < 0.03:
            content = rng.choice(KO_TEMPLATES).format(
                project=project,
                role=rng.choice(ROLES),
                test=rng.choice(TOOLS["test"]),
                person=rng.choice(PEOPLE),
                db=rng.choice(TOOLS["db"]),
                function=vocab.function(),
                n=rng.randint(5, 600),
                path=vocab.path(project),
            )
            kind, topic = "project_fact", "ko"
        elif roll < 0.05:
            content = rng.choice(JA_TEMPLATES).format(
                project=project,
                role=rng.choice(ROLES),
                test=rng.choice(TOOLS["test"]),
                person=rng.choice(PEOPLE),
                function=vocab.function(),
                n=rng.randint(5, 600),
                path=vocab.path(project),
                env=vocab.env(project),
            )
            kind, topic = "project_fact", "ja"
        else:
            content, kind, topic = _english(vocab, project)
        line: dict[str, Any] = {
            "content": content,
            "source": rng.choice(["session:synthetic", "doc:README.md", "user", "tool:ci-log"]),
            "type": kind,
            "scope": {"project": project},
            "tags": [topic, project],
        }
        if rng.random() < 0.33:
            line["key"] = f"{project}.{topic}.{i}"
        yield line


def bench_queries(count: int, seed: int = 11, size: int = 1000) -> list[str]:
    """Task-like prompts over the vocabulary ``facts(size)`` uses, plus about one in eight off-topic."""
    rng = random.Random(seed)
    vocab = Vocabulary(size, random.Random(7))
    off_topic = [
        "what should I cook for dinner tonight",
        "who won the tennis final yesterday",
        "write me a haiku about rain",
        "오늘 날씨 어때?",
        "週末のおすすめの映画は何ですか",
    ]
    shapes = [
        "how do I run the tests for {c}",
        "deploy {p} to staging",
        "who owns {c} and where is its config",
        "why is the library pinned in {p}",
        "{f} raises an error at start-up",
        "which database does {p} use for migrations",
        "fix the memory leak in {c}",
        "code style and linter settings for {p}",
        "latency requirement for {c} at p99",
        "flaky tests in CI after the cache change",
        "{p} 테스트 실행 방법",
        "{p}の設定ファイルはどこ",
    ]
    queries = []
    for i in range(count):
        if i % 8 == 7:
            queries.append(off_topic[(i // 8) % len(off_topic)])
            continue
        project = rng.choice(vocab.projects)
        component = rng.choice(vocab.components[project])
        shape = shapes[i % len(shapes)]
        queries.append(shape.format(p=project, c=component, f=vocab.function() if "{f}" in shape else ""))
    return queries
