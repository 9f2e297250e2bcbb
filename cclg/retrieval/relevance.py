"""Which memories a prompt is about: the relevance decision, with the evidence for each.

Prompts run from "which formatter?" to five thousand characters of pasted
traceback, and stores from five memories to a hundred thousand, so no single
share of anything decides. Each BM25 candidate gathers three kinds of evidence,
and one is enough:

- **query share**: the weight of the prompt's words the memory matches over the
  weight of all the prompt's words (a word weighs its inverse document frequency;
  a word the store has never seen weighs like its rarest word, not more). Alone
  it would let one common word carry a short prompt, so with a single word
  matched the memory must also be about the prompt (its memory share at least
  ``QUERY_SHARE_MEMORY``) or the word carry half the prompt ("deploys and tests");
- **memory share**: the weight of the memory's own words that the prompt
  contains over the weight of all of them, with at least two words: what lets a
  long pasted log find the one note it is about. It is weighed for the
  ``MEMORY_SHARE_RANKS`` best BM25 candidates only: a short note far down the
  ranking that a long prompt happens to contain is not the note it is about;
- **lead**: the best match scores at least ``LEAD`` times the runner-up and
  matches two of the prompt's words: the clear answer of a store too small for
  shares to mean much (in five notes about one project, every word is common).
  Current and retired memories each have their own best match.

A fourth kind comes from meaning rather than words: **semantic**, the cosine
similarity of the prompt's and the memory's sentence embeddings
(``cclg.retrieval.semantic``, when its helper answers). A similarity of at least
``SEMANTIC`` makes a memory a candidate even when BM25 did not find it (a paraphrase
shares no word), judged in the same round as the lexical evidence. Meaning backs
words: a candidate's strength gains ``SEMANTIC_WEIGHT`` for each unit of similarity
over ``SEMANTIC_FLOOR`` (a note that shares two words with the prompt and also means
much the same passes where the words alone fall short), so meaning alone passes only
where that gain reaches the bar by itself (0.25 + 1 / 3: a similarity of 0.58). Under
it a similarity is no proof: at 10,000 memories and more, nearly every memory the
model put at 0.45 to 0.58 with no word in common was not the one the prompt needed (see
``benchmarks/RESULTS.md``); the nearest is offered as possibly related instead
(``cclg.retrieval.selection.choose_related``). Without an answer (``similar`` is None)
the decision is the lexical one alone.

A **follow-up** ("and in staging?", "what about the tests?") says little on its own: a
prompt of at most ``FOLLOW_UP_WORDS`` words is judged together with the session's
previous prompt. The previous prompt's words join the query at ``PREVIOUS_WEIGHT`` of
their weight (secondary evidence), and a memory passes only with evidence from the
prompt's own words too (one of them matched, or its meaning): "thanks, that worked"
after a deploy question packs no deploy memory. The own words that count are the new
ones, those the previous prompt does not hold (when the prompt has any): the words it
repeats are the subject carried over, so "how is tern released?" after "how do I run the
tern tests?" packs no test memory on "tern" and "tests". A longer prompt is judged alone.

A memory's **questions** (the ones it answers) are read like its content when its content
already matches ``QUESTION_CONTENT_WORDS`` of the prompt's words (the questions then add to
what the words point at); otherwise only the questions the prompt asks count: those of
which it holds the rarest word in the store, what the question is about (``_asked``). "how
should I handle mypy errors?" is not asked by a prompt about handling errors in Go, which
holds its two common words and not "mypy"; a prompt's word matched only by a question that
does not count is no evidence. A word's scrap
that is a stop word ("ipv4" -> "i") matches nothing, and questions are full of "I".

A candidate's strength is its best evidence over its threshold; it passes at
strength 1 and at least ``RELATIVE`` of the strongest candidate's. Retired
memories are judged in the same round, so a retired fact passes only where a
current one with the same evidence would.

The thresholds were chosen on the tune half of ``benchmarks/eval_retrieval.py``
(see ``benchmarks/RESULTS.md``). Chinese and Japanese runs count as their
bigrams (``words``); a long prompt searches with its ``MAX_SEARCH_TERMS`` rarest
terms that the store holds.
"""

from __future__ import annotations

from cclg.core.text import (
    STOPWORDS,
    compound_parts,
    is_cjk,
    is_hangul,
    matched_words,
    matching_terms,
    query_words,
    spelled,
    stem,
    tokens,
)
from cclg.retrieval.query import Hit, View, Where
from cclg.retrieval.search import bm25, idf, rarest_terms

TYPE_CHECKING = False  # typing costs the hook ~4 ms of start-up; annotations are strings anyway
if TYPE_CHECKING:
    from cclg.ledger.index import Index

QUERY_SHARE = 0.25
QUERY_SHARE_MEMORY = 0.2  # a single matched word also needs this memory share,
QUERY_SHARE_SINGLE = 0.5  # or to carry this share of the prompt alone
MEMORY_SHARE = 0.4
LEAD = 1.5
LEAD_WORDS = 2
RELATIVE = 0.6
SEMANTIC = 0.45  # cosine similarity (cclg.retrieval.embed's model) that makes a candidate; tuned on the tune half
SEMANTIC_FLOOR = 0.25  # similarity over this adds to the lexical strength,
SEMANTIC_WEIGHT = 3.0  # this much per unit (0.35 adds 0.3); both tuned on the tune half
MAX_SEARCH_TERMS = 128
MEMORY_SHARE_RANKS = 10  # the memory share is weighed for the best BM25 candidates only
# The candidates are found with the prompt's rarest terms that hold at most this many memories together
# (``search.bm25``'s ``postings``; the decision then weighs every term): a median prompt's terms held 7,600
# of 100,000 memories, all scored by FTS5. Tune half: 500-8,000 and none.
MATCH_POSTINGS = 2000
FOLLOW_UP_WORDS = 3  # "and in staging?" has 1, "what about the flaky tests?" 2; a question of its own has more
PREVIOUS_WEIGHT = 0.5  # the previous prompt's words weigh half what the prompt's own words weigh
QUESTION_CONTENT_WORDS = 2  # content matching this many prompt words lets every question count (_asked)


class Evidence:
    """Why a candidate is (or is not) about the prompt."""

    __slots__ = ("lead", "matched", "memory_share", "query_share", "similarity", "strength")

    def __init__(
        self, query_share: float, memory_share: float, lead: bool, matched: list[str], similarity: float | None = None
    ) -> None:
        self.query_share = query_share
        self.memory_share = memory_share
        self.lead = lead
        self.matched = matched  # the prompt's words it matches
        self.similarity = similarity  # the cosine of the embeddings, when the semantic helper answered
        self.strength = 0.0

    def to_dict(self) -> dict[str, object]:
        found: dict[str, object] = {
            "query_share": round(self.query_share, 3),
            "memory_share": round(self.memory_share, 3),
            "lead": self.lead,
            "strength": round(self.strength, 3),
            "matched": self.matched,
        }
        if self.similarity is not None:
            found["similarity"] = round(self.similarity, 3)
        return found

    def reason(self) -> str:
        """The evidence that carried it, in words."""
        parts = []
        if self.query_share >= QUERY_SHARE:
            parts.append(f"matches {self.query_share:.0%} of the prompt's weight")
        if self.memory_share >= MEMORY_SHARE:
            parts.append(f"{self.memory_share:.0%} of its own words are in the prompt")
        if self.lead:
            parts.append(f"the clear best match ({LEAD}x the runner-up)")
        if self.similarity is not None and self.similarity >= SEMANTIC:
            parts.append(f"means much what the prompt means (semantic similarity {self.similarity:.2f})")
        elif self.similarity is not None and self.similarity > SEMANTIC_FLOOR and self.strength >= 1 and not parts:
            parts.append(f"its words, backed by their meaning (semantic similarity {self.similarity:.2f})")
        found = "; ".join(parts) or "no evidence strong enough"
        shown = ", ".join(spelled(word) for word in matched_words(self.matched)[:8])
        return f"{found}; words: {shown or 'none'}"


def words(text: str) -> list[tuple[str, ...]]:
    """The words the decision weighs, each with its variants; a run of Chinese or Japanese counts
    as its character bigrams, each a word of its own.

    Chinese and Japanese put no spaces between words, so such a run is a phrase,
    often a whole sentence: its bigrams are its parts, not alternative spellings,
    and one shared bigram (say the polite ending ます) must not cover the weight of
    the whole run. Korean separates words with spaces: a Hangul run is one word with
    its particles, and any of its bigrams still stands for it.
    """
    result: list[tuple[str, ...]] = []
    for word in query_words(text):
        run = word[0]
        if len(word) > 1 and is_cjk(run[0]) and not all(is_hangul(c) for c in run):
            result.extend((bigram,) for bigram in word[1:])
        elif _is_junk(word):
            result.append(word[:1])
        else:
            result.append(word)
    return result


def _is_junk(word: tuple[str, ...]) -> bool:
    """Whether a word falls apart into scraps (base64, a hash, a minified blob: "iVBORw0KGgo" gives
    i, vbo, rw, 0, k, ggo): then only the whole of it is a word, or its scraps would match everything.
    (A Korean word's variants are its bigrams, which are short by nature: only ASCII words count.)"""
    parts = word[1:]
    return word[0].isascii() and len(parts) >= 4 and 2 * sum(len(p) <= 2 for p in parts) > len(parts)


def _weights(index: Index, groups: list[tuple[str, ...]]) -> list[float]:
    """Each word's weight: the inverse document frequency of its most common variant in the store,
    a word the store has never seen counted as seen once."""
    total, docs = index.document_frequencies([t for word in groups for t in word])
    return [idf(max(total, 1), max(1, max(docs[t] for t in word))) for word in groups]


def _search_terms(index: Index, groups: list[tuple[str, ...]]) -> list[str]:
    """The terms to search with: all of them, or for a long prompt the rarest ones the store holds."""
    terms = list(dict.fromkeys(t for word in groups for t in word))
    return terms if len(terms) <= MAX_SEARCH_TERMS else rarest_terms(index, terms, MAX_SEARCH_TERMS)


def relevant(
    index: Index,
    query: str,
    where: Where,
    *,
    limit: int,
    retired_limit: int = 0,
    similar: list[tuple[str, float]] | None = None,
    runners_up: int = 1,
    previous: str = "",
) -> tuple[list[Hit], list[Hit], list[tuple[Hit, Evidence]]]:
    """(current memories about ``query``, retired ones, the ``runners_up`` best candidates that stayed
    out with their evidence), best first. Each kept hit carries its ``Evidence`` as ``hit.evidence``.

    ``similar``: the current memories nearest ``query`` in meaning, as (id, cosine) from
    ``cclg.retrieval.semantic.similar``; None (no answer) leaves the decision lexical. ``previous``:
    the session's previous prompt, used when ``query`` is a follow-up (see the module's docstring)."""
    own = words(query)
    added, new = _follow_up(own, previous)
    groups = own + added
    terms = _search_terms(index, groups) if groups else []
    text = f"{query} {previous}" if added else query
    current = bm25(index, text, where, limit=limit, terms=terms, postings=MATCH_POSTINGS) if terms else []
    retired = (
        bm25(index, text, where, limit=retired_limit, status="retired", terms=terms, postings=MATCH_POSTINGS)
        if terms and retired_limit
        else []
    )
    leaders = {_leader(current), _leader(retired)}
    similarity = dict(similar or [])
    current += _semantic_hits(index, where, similarity, {h.id for h in current})
    if not current and not retired:
        return [], [], []
    weights = _weights(index, groups) if groups else []
    weights = weights[: len(own)] + [w * PREVIOUS_WEIGHT for w in weights[len(own) :]]
    candidates = sorted([*current, *retired], key=lambda h: (-float(f"{h.score:.9g}"), h.id))
    evidence = _evidence(index, groups, weights, candidates, leaders, similarity)
    if added:  # a follow-up's memory needs evidence from the prompt's new words too; the others set no bar
        candidates = [h for h in candidates if _own_evidence(evidence[h.id], new)]
    best = max((evidence[h.id].strength for h in candidates), default=0.0)
    passed = {h.id for h in candidates if _passes(evidence[h.id], best)}
    # The old version of a current memory that passed is held to the absolute bar only, not to the
    # best: a prompt about the current fact that also matches what it replaced is told it no longer holds.
    kept = passed & {h.id for h in current}
    passed |= {
        h.id
        for h in retired
        if evidence[h.id].strength >= 1.0 and kept.intersection(h.node.relations.get("superseded_by", ()))
    }
    for hit in candidates:
        hit.evidence = evidence[hit.id]
    out = [(h, evidence[h.id]) for h in candidates if h.id not in passed][:runners_up]
    return [h for h in current if h.id in passed], [h for h in retired if h.id in passed], out


def _follow_up(own: list[tuple[str, ...]], previous: str) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """For a prompt (its words ``own``) that is a follow-up of at most ``FOLLOW_UP_WORDS`` words: (the
    previous prompt's words it adds, its own words that a memory's evidence must come from: those the
    previous prompt does not hold in any form, or all of them when it holds every one). Nothing is
    added for a longer prompt or the first prompt of a session."""
    if not previous or len(own) > FOLLOW_UP_WORDS:
        return [], own
    before = words(previous)
    known = {word[0] for word in own}
    said, said_as = {form for word in before for form in word}, {word[0] for word in before}
    new = [word for word in own if word[0] not in said and not said_as.intersection(word[1:])]
    return [word for word in before if word[0] not in known], new or own


def _own_evidence(evidence: Evidence, own: list[tuple[str, ...]]) -> bool:
    """Whether a follow-up's candidate matches one of the prompt's own words, or means what it says."""
    if evidence.similarity is not None and evidence.similarity >= SEMANTIC:
        return True
    return bool(set(evidence.matched).intersection(word[0] for word in own))


def _semantic_hits(index: Index, where: Where, similarity: dict[str, float], known: set[str]) -> list[Hit]:
    """The memories similar enough to be candidates that BM25 did not find, most similar first (their
    score is the similarity): only those current in this process's view of the index."""
    view = View(index, where)
    found = []
    for node_id, score in sorted(similarity.items(), key=lambda item: (-item[1], item[0])):
        if score < SEMANTIC or node_id in known:
            continue
        hit = view.hit(node_id, score, "semantic")
        if hit is not None:
            found.append(hit)
    return found


def _passes(evidence: Evidence, best: float) -> bool:
    return evidence.strength >= 1.0 and evidence.strength >= RELATIVE * best


def _leader(hits: list[Hit]) -> str | None:
    """The id of the first of ``hits`` (best first) if it scores ``LEAD`` times the second."""
    if not hits or hits[0].score <= 0:
        return None
    return hits[0].id if len(hits) == 1 or hits[0].score >= LEAD * hits[1].score else None


def _credit(word: tuple[str, ...], terms: set[str]) -> float:
    """How much of ``word`` (with its variants) ``terms`` hold: all of it when they hold the word itself
    or a variant of a one-part word; of a compound ("atlas-admin"), the share of its parts they hold,
    so that "atlas-admin" half-matches "mirveltan-admin" rather than matching it."""
    if word[0] in terms:
        return 1.0
    if not terms.intersection(word[1:]).difference(STOPWORDS):  # "ipv4" is not matched by its scrap "i"
        return 0.0
    if is_hangul(word[0][0]):  # matched by its first bigram, its noun (matching_terms)
        return 1.0 if terms.intersection(matching_terms(word)[1:]) else 0.0
    parts = compound_parts(word[0])
    if len(parts) < 2:
        return 1.0
    return sum(1 for part in parts if part in terms or stem(part) in terms) / len(parts)


def _memory_texts(hit: Hit) -> list[str]:
    """What a memory says (its content and key), then each question it answers: the memory share is
    that of the one the prompt holds most of, so a prompt worded like a question the memory answers
    counts as if it were worded like the memory."""
    return [hit.node.content + " " + (hit.node.key or "").replace(".", " "), *hit.questions()]


def _memory_share(index: Index, owns: list[list[tuple[str, ...]]], prompt_terms: set[str]) -> tuple[float, int]:
    """(the share of a memory's own weighted words the prompt holds, how many of them it holds), for
    the text of ``owns`` (the words of each ``_memory_texts``) with the highest share. A question
    counts only when the prompt holds two of its words: one word is a large share of a short
    question ("write" of "which crate can write ledger tables?") and says little of the prompt."""
    best = (0.0, 0)
    for number, own in enumerate(owns):
        own_weights = _weights(index, own) if own else []
        own_credit = [_credit(word, prompt_terms) for word in own]
        held = sum(w * c for w, c in zip(own_weights, own_credit, strict=True))
        share = held / sum(own_weights) if own_weights and sum(own_weights) else 0.0
        inside = sum(1 for c in own_credit if c)
        if number == 0 or inside >= 2:
            best = max(best, (share, inside))
    return best


def _asked(index: Index, question: list[tuple[str, ...]], prompt_terms: set[str]) -> bool:
    """Whether the prompt asks ``question`` (its words): it holds the question's rarest word in the store,
    what the question is about. "how should I handle mypy errors?" is not asked by a prompt about
    handling errors in Go, which holds its two common words and not "mypy"."""
    if not question:
        return False
    weights = _weights(index, question)
    top = max(weights)
    return any(_credit(word, prompt_terms) for word, weight in zip(question, weights, strict=True) if weight >= top)


def _evidence(
    index: Index,
    groups: list[tuple[str, ...]],
    weights: list[float],
    candidates: list[Hit],
    leaders: set[str | None],
    similarity: dict[str, float],
) -> dict[str, Evidence]:
    total_weight = sum(weights)
    prompt_terms = {t for word in groups for t in matching_terms(word)}  # what a memory's words match
    owns = [[words(text) for text in _memory_texts(hit)] for hit in candidates[:MEMORY_SHARE_RANKS]]
    index.document_frequencies([t for texts in owns for own in texts for word in own for t in word])  # one query
    found: dict[str, Evidence] = {}
    for rank, hit in enumerate(candidates):
        matched = set(hit.matched)
        credit = [_credit(word, matched) for word in groups]
        texts = owns[rank] if rank < MEMORY_SHARE_RANKS else []
        if hit.questions():  # only the questions the prompt asks count (_asked)
            in_content = matched.intersection(tokens(_memory_texts(hit)[0]))
            content_credit = [_credit(word, in_content) for word in groups]
            if sum(1 for c in content_credit if c) < QUESTION_CONTENT_WORDS:
                texts = texts[:1] + [own for own in texts[1:] if _asked(index, own, prompt_terms)]
                asked = {t for own in texts[1:] for word in own for t in word}
                credit = [_credit(word, matched & (in_content | asked)) for word in groups]
        hits = [i for i, share in enumerate(credit) if share]
        query_share = sum(w * c for w, c in zip(weights, credit, strict=True)) / total_weight if total_weight else 0.0
        memory_share, inside = _memory_share(index, texts, prompt_terms)
        lead = hit.id in leaders and len(hits) >= LEAD_WORDS
        cosine = similarity.get(hit.id)
        evidence = Evidence(query_share, memory_share, lead, [groups[i][0] for i in hits], cosine)
        single_ok = memory_share >= QUERY_SHARE_MEMORY or query_share >= QUERY_SHARE_SINGLE
        by_query = query_share / QUERY_SHARE if len(hits) >= 2 or single_ok else 0.0
        by_memory = memory_share / MEMORY_SHARE if inside >= 2 else 0.0
        strength = max(by_query, by_memory, 1.0 if lead else 0.0)
        if cosine is not None and cosine > SEMANTIC_FLOOR:  # lifts words over the bar, not over other candidates
            strength = max(strength, min(1.0, strength + SEMANTIC_WEIGHT * (cosine - SEMANTIC_FLOOR)))
        evidence.strength = strength
        found[hit.id] = evidence
    return found
