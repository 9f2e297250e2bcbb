"""Choosing the memories of an ActiveMemoryPack and spending its budget: the pack as data.

``compile_pack`` picks, for one ``PackRequest`` (a query, where it is asked, a ``Budget``), the
current memories that matter:

1. pinned memories (``metadata.pinned`` or ``metadata.retention = "required"``)
   first, whatever the query;
2. then BM25 hits over the effective view that the relevance decision keeps
   (``cclg.retrieval.relevance``, with the semantic helper's nearest memories: each carries the
   evidence it passed on), and the current memories that replaced a retired one the
   query matches. A prompt about something the store knows nothing of gets an empty
   pack, not the newest N memories;
3. retired memories that match the query are listed apart (id, status, a
   prefix, the current memories that replaced them) so the agent knows the old
   fact is dead; they are never emitted as memory. One replaced only by memories
   outside the view moved to another scope (``View.moved_away``): not listed.

4. the next candidates with real evidence that the decision did not keep (part of the prompt's
   words; then, at most ``RELATED_BY_MEANING`` of them, a semantic similarity over a bar that rises
   with the memories in the view (``_similarity_bar``: 0.2 in a repository's 50, ``RELATED_SIMILARITY``
   in 10,000) or the nearest memory standing ``RELATED_MARGIN`` above the next) are
   offered as **possibly related**: at most ``RELATED_MAX`` one-line entries (id, type, key, a
   preview, why), within ``Budget.related_chars``, for the agent to open itself (``cclg show ID``,
   MCP ``memory_cite``; the lines show the id's short form, ``cclg.core.ids.short_id``).
   They are never memory: a retired, quarantined, restricted or withheld memory is never one, and
   the relevance decision alone says what is packed in full (``choose_related``).

A session's pack can leave out what the agent's context holds already (``skip``)
and offer again what it held before a compaction (``offer``). Usage (``cclg.learning.usage``)
orders what relevance and the budget let in.

The budget (nodes, characters, estimated tokens) is respected exactly: a memory
that does not fit is cut with a visible marker if enough room is left, else
counted as omitted. The same store and query give the same bytes; only
``generated_at`` changes, and it can be pinned.

Choosing (``select``: one read of the index) and spending the budget (``fill``)
are apart, so ``cclg.retrieval.rendering.fit_markdown``, which the hook uses, counts each
memory as the Markdown line that shows it and fits a host's cap in one pass.

A new pack option is a field of ``PackRequest`` (or ``Budget``) and the code that reads it:
``compile_pack``, ``explain_pack`` and ``fit_markdown`` pass the request on whole.
"""

from __future__ import annotations

import math

from cclg import format as fmt
from cclg.core import fencing, media
from cclg.core.ids import now_iso, short_id
from cclg.core.labels import labels_of
from cclg.core.records import MemoryNode, Record
from cclg.core.store import Store
from cclg.core.text import estimate_tokens, matched_words, matching_terms, spelled, stem, word_groups
from cclg.ledger.index import Index, read_fresh
from cclg.retrieval import semantic, usage_prior
from cclg.retrieval.query import Hit, View, Where
from cclg.retrieval.relevance import SEMANTIC, Evidence, relevant

TYPE_CHECKING = False  # typing costs the hook ~4 ms of start-up; annotations are strings anyway
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Sequence
    from typing import Any

DEFAULT_MAX_NODES = 12
DEFAULT_MAX_CHARS = int(fmt.contract()["prompt"]["active_memory_pack_toml"]["max_content_chars_default"])
SUPPRESSED_PREFIX_CHARS = 120
MAX_SUPPRESSED = 5
MIN_CUT_CHARS = 80
CUT_MARKER = " […cut: {rest} more characters; `cclg show {id}` has all]"
RELATED_MAX = 3  # possibly related entries a pack offers at most
RELATED_CHARS = 300  # what their lines may spend of a pack's characters
RELATED_PREVIEW_CHARS = 64  # of a possibly related memory's content shown
RELATED_STRENGTH = 0.3  # lexical evidence (1 passes the relevance decision) that makes an offer; tune half
RELATED_SIMILARITY = 0.35  # similarity that makes an offer in a large view; tune half (0.3 filled off-topic packs)
RELATED_BY_MEANING = 1  # offers for their meaning alone, at most, after those for words; tune half
RELATED_MARGIN = 0.05  # the nearest memory this far above the next one in similarity is offered; tune half
RELATED_MARGIN_FLOOR = 0.2  # ... when its similarity is at least this; tune half
RELATED_ONE_WORD_DOCS = 50  # memories holding the one word a possibly related line shares, at most; tune half
RELATED_SIMILARITY_SMALL = 0.2  # similarity that makes an offer in a view of RELATED_SMALL_VIEW memories; tune half
RELATED_SMALL_VIEW = 50  # memories: about a repository's view
RELATED_SIMILARITY_PER_TENFOLD = 0.065  # the bar's rise for every tenfold more memories in the view; tune half
RELATED_CANDIDATES = 30  # runners-up of the relevance decision weighed for an offer


class _Fixed(Record):
    """A record whose fields are set once, by its constructor (by hand, not ``dataclasses``: see
    ``cclg.core.records.Record``); ``replace`` makes a copy with some fields changed."""

    def __setattr__(self, name: str, value: object) -> None:
        if name in vars(self):
            raise AttributeError(f"{type(self).__name__}.{name} is fixed once made; use replace()")
        object.__setattr__(self, name, value)

    def replace(self, **changes: Any) -> Any:
        return type(self)(**{**vars(self), **changes})


class Budget(_Fixed):
    """What a pack may hold: memories, characters and (when given) estimated tokens, of which the
    possibly related lines spend at most ``related_chars``."""

    def __init__(
        self,
        max_nodes: int = DEFAULT_MAX_NODES,
        max_chars: int = DEFAULT_MAX_CHARS,
        max_tokens: int | None = None,
        related_chars: int = RELATED_CHARS,
    ) -> None:
        self.max_nodes = max_nodes
        self.max_chars = max_chars
        self.max_tokens = max_tokens
        self.related_chars = related_chars  # the possibly related lines' share of max_chars (0: none)


class PackRequest(_Fixed):
    """One pack to compile: the task (``query``), where it is asked (``where``: session, project,
    workspace), its ``budget``, whether confidential memories may be packed (None: the store's
    ``"pack": {"include_confidential": ...}``), the memories to offer again and to leave out (a
    session's, see ``select``), the ``generated_at`` to stamp (None: now) and the session's
    ``previous`` prompt, which a short follow-up is judged with (``cclg.retrieval.relevance``)."""

    def __init__(
        self,
        query: str = "",
        *,
        where: Where | None = None,
        budget: Budget | None = None,
        include_confidential: bool | None = None,
        offer: Sequence[str] = (),
        skip: Collection[str] = (),
        generated_at: str | None = None,
        previous: str = "",
    ) -> None:
        self.query = query
        self.where = Where() if where is None else where
        self.budget = Budget() if budget is None else budget
        self.include_confidential = include_confidential
        self.offer = offer
        self.skip = skip
        self.generated_at = generated_at
        self.previous = previous


class Spending:
    """A ``Budget`` as a fill spends it: what is used, cut, omitted and withheld."""

    def __init__(self, budget: Budget) -> None:
        self.max_nodes = budget.max_nodes
        self.max_chars = budget.max_chars
        self.max_tokens = budget.max_tokens
        self.related_chars = budget.related_chars
        self.used_nodes = 0
        self.used_chars = 0
        self.used_tokens = 0
        self.truncated = 0
        self.omitted = 0
        self.withheld = 0  # matched, but quarantined, restricted, or confidential where not allowed

    def room(self) -> tuple[int, int | None]:
        chars = self.max_chars - self.used_chars
        tokens = None if self.max_tokens is None else self.max_tokens - self.used_tokens
        return chars, tokens

    def fit(self, node_id: str, text: str, shown: Callable[[str], str] | None = None) -> str | None:
        """``text`` as it fits (maybe cut with a marker), or None when there is no room.

        ``shown`` renders the text as it will appear (a Markdown line, say); the budget
        then counts that rendering instead of the bare text.
        """
        show = shown or _bare
        chars, tokens = self.room()

        def fits(candidate: str) -> bool:
            rendered = show(candidate)
            return len(rendered) <= chars and (tokens is None or estimate_tokens(rendered) <= tokens)

        if not fits(text):
            limit = (chars if tokens is None else min(chars, tokens)) - len(show(""))  # a token is >= 1 character
            marker = CUT_MARKER.format(rest=0, id=node_id)
            if limit - len(marker) - 8 < MIN_CUT_CHARS:
                return None
            keep = limit - len(marker) - 8
            while keep > 0:
                cut = text[:keep] + CUT_MARKER.format(rest=len(text) - keep, id=node_id)
                if fits(cut):
                    break
                keep -= max(1, keep // 10)
            if keep <= MIN_CUT_CHARS:
                return None
            text = cut
            self.truncated += 1
        rendered = show(text)
        self.used_chars += len(rendered)
        self.used_tokens += estimate_tokens(rendered)
        return text

    def to_dict(self) -> dict[str, Any]:
        values = {
            "max_nodes": self.max_nodes,
            "max_chars": self.max_chars,
            "max_tokens": self.max_tokens,
            "used_nodes": self.used_nodes,
            "used_chars": self.used_chars,
            "used_tokens": self.used_tokens,
            "truncated_nodes": self.truncated,
            "omitted_nodes": self.omitted,
            "withheld_nodes": self.withheld,
        }
        return {k: v for k, v in values.items() if v is not None}


def _bare(text: str) -> str:
    return text


def why(hit: Hit) -> str:
    """Why a memory is in the pack, in a few words."""
    if hit.via == "pinned":
        return "pinned (or retention required): in every pack"
    if hit.via == "offered again":
        return "given to this session before its context was compacted"
    reason = hit.evidence.reason() if hit.evidence is not None else "matched the query"
    return f"{hit.via}, whose match {reason}" if hit.via.startswith("replaces ") else reason


def _entry(node: MemoryNode, content: str, score: float | None, pinned: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": node.id,
        "type": node.type,
        "status": node.status,
        "key": node.key,
        "scope": node.scope.level,
        "source": fencing.reveal(node.source.label or ""),
        "trust": labels_of(node.metadata)[0],
        "content": content,
    }
    # Flagged when written; checked again here for memories written elsewhere (imports, old stores).
    stored = [f for f in node.metadata.get("flags", []) if isinstance(f, str)]
    flags = sorted({*stored, *fencing.instruction_flags(node.content)})
    if flags:
        entry["flags"] = flags
    attached = media.attachments_of(node.metadata)  # binary evidence: named, never inlined
    if attached:
        entry["attachments"] = attached
    if pinned:
        entry["pinned"] = True
    if score is not None:
        entry["score"] = round(score, 4)
    return entry


# What ``select`` reads from the index: chosen (pinned, offered), found, retired, replaced_by, runner_up,
# and the current memories among the possibly related candidates (``choose_related``).
_Read = tuple[
    list[Hit], list[Hit], list[Hit], dict[str, list[str]], list[tuple[Hit, Evidence]], list[tuple[Hit, float, str]]
]


class Selection:
    """What a query selects before any budget: pinned and relevant memories, best first, and the
    retired memories that match it with the current memories that replace them now."""

    def __init__(
        self,
        query: str,
        chosen: list[Hit],
        retired: list[Hit],
        include_confidential: bool,
        replaced_by: dict[str, list[str]] | None = None,
        runner_up: list[tuple[Hit, Evidence]] | None = None,
        prior: dict[str, float] | None = None,
        related: list[tuple[Hit, str]] | None = None,
        semantic: str = "off",
    ) -> None:
        self.query = query
        self.chosen = chosen
        self.retired = retired
        self.include_confidential = include_confidential
        self.replaced_by = {} if replaced_by is None else replaced_by  # retired id -> current ids
        self.runner_up = [] if runner_up is None else runner_up  # the best candidates that stayed out
        self.related = [] if related is None else related  # possibly related (hit, why), best first
        self.prior = {} if prior is None else prior  # memory id -> its usage prior (``usage_order``)
        self.semantic = semantic  # the semantic signal: answered, cold or off (``semantic.consult``)


def select(store: Store, request: PackRequest) -> Selection:
    """Read the index once: pinned memories, then the memories ``request.offer`` names (a retired one
    through what replaced it), then those the relevance decision keeps, then retired matches. Memories
    in ``request.skip`` (those the agent's context holds already) are left out. Whatever is selected is
    checked against its file first (``cclg.ledger.index.read_fresh``)."""
    query, where, offer, skip = request.query, request.where, request.offer, request.skip
    max_nodes = request.budget.max_nodes
    include_confidential = request.include_confidential
    if include_confidential is None:
        include_confidential = store.settings.get("pack", "include_confidential")
    # The memories nearest the query in meaning, from the semantic helper (None, at once, when it does
    # not answer: the decision is then lexical alone), and whether it answered (the pack says it).
    nearest, semantic_state = semantic.consult(store, query, limit=max_nodes, where=where)

    def read(index: Index) -> _Read:
        view = View(index, where)
        pinned = [view.node(r["id"]) for r in index.pinned_rows() if view.contains(r)]
        chosen = [Hit(node=n, score=0.0, via="pinned") for n in pinned if n is not None]
        chosen += [Hit(node=n, score=0.0, via="offered again") for n in _offered(index, view, offer)]
        found, retired, runner_up = relevant(
            index,
            query,
            where,
            limit=max(max_nodes * 3, 30),
            retired_limit=MAX_SUPPRESSED * 4,
            similar=nearest,
            runners_up=RELATED_CANDIDATES,
            previous=request.previous,
        )
        retired = [hit for hit in retired if hit.id not in skip and not view.moved_away(hit.node)]
        replaced_by = {}
        for hit in retired:
            successors = view.live_ends(hit.node)
            replaced_by[hit.id] = [n.id for n in successors]
            # A query that matches a retired fact is about what replaced it.
            for successor in successors:
                found.append(Hit(node=successor, score=hit.score, via=f"replaces {hit.id}"))
                found[-1].evidence = hit.evidence
        taken = {*skip, *(hit.id for hit in (*chosen, *found))}  # packed, or in the agent's context
        return chosen, found, retired, replaced_by, runner_up, choose_related(view, runner_up, nearest, taken)

    def served(result: _Read) -> list[str]:
        chosen, found, retired, _, runner_up, related = result
        # Each parsed here (``Hit.node``), where a record that does not parse can still be healed.
        others = [hit for hit, _ in runner_up[:1]] + [hit for hit, _, _ in related]  # only those served
        return [hit.node.id for hit in (*chosen, *found, *retired, *others)]

    chosen, found, retired, replaced_by, runner_up, candidates = read_fresh(store, read, served)
    seen = set(skip)
    kept = []
    found.sort(key=lambda h: -_rounded(h.score))  # relevance alone decides who fills the budget; ties keep order
    for hit in [*chosen, *found]:
        if hit.id not in seen:
            kept.append(hit)
            seen.add(hit.id)
    # How often each was used when delivered, within +-10% (cclg.retrieval.usage_prior).
    prior = usage_prior.priors(store)
    related = [(hit, reason) for hit, _, reason in candidates if hit.id not in seen]
    return Selection(
        query, kept, retired, include_confidential, replaced_by, runner_up[:1], prior, related, semantic_state
    )


def choose_related(
    view: View,
    runner_up: list[tuple[Hit, Evidence]],
    nearest: list[tuple[str, float]] | None,
    taken: set[str],
) -> list[tuple[Hit, float, str]]:
    """The possibly related candidates, (hit, weight, why) best first: the runners-up of the relevance
    decision with part of the evidence it asks (a strength of at least ``RELATED_STRENGTH``, from
    words of the prompt that point at it: ``_telling``), best first; then at most ``RELATED_BY_MEANING``
    of the memories nearest in meaning at a similarity of at least the view's bar (``_similarity_bar``),
    or the nearest one when it stands out: ``RELATED_MARGIN`` above the next nearest and at least
    ``RELATED_MARGIN_FLOOR`` (when the semantic helper answered). Below the relevance decision's own bar a
    similarity is weak evidence (a paraphrase and an off-topic prompt's nearest memory score alike; how far
    the nearest stands above the rest tells them apart better), so it comes after the words and takes one
    line.
    Only memories current in ``view``, and not ``taken`` (packed in full, or in the agent's context
    already): a retired fact is never offered. The weight is the evidence as a share of what tier 1 asks."""
    by_words: dict[str, tuple[Hit, float, str]] = {}
    for hit, evidence in runner_up:
        if evidence.strength < RELATED_STRENGTH or not evidence.matched:
            continue
        spoken = matched_words(evidence.matched)
        if _telling(view, spoken) and view.holds(hit.id):
            shared = ", ".join(spelled(word) for word in spoken[:3])
            by_words[hit.id] = (hit, evidence.strength, f"shares the words {shared}")
    by_meaning: list[tuple[Hit, float, str]] = []
    ranked = sorted(nearest or [], key=lambda item: -item[1])
    second = ranked[1][1] if len(ranked) > 1 else 0.0  # only the nearest can stand above it
    bar: float | None = None  # the view's bar, counted only where it decides (under RELATED_SIMILARITY)
    for node_id, cosine in ranked:
        if node_id in by_words or node_id in taken:
            continue
        stands_out = cosine >= RELATED_MARGIN_FLOOR and cosine - second >= RELATED_MARGIN
        if not stands_out and cosine < RELATED_SIMILARITY:
            bar = _similarity_bar(view) if bar is None else bar
            if cosine < bar:
                continue
        near = view.hit(node_id, cosine, "semantic")
        if near is not None:
            by_meaning.append((near, cosine / SEMANTIC, f"near in meaning (similarity {cosine:.2f})"))

    def order(item: tuple[Hit, float, str]) -> tuple[float, str]:
        return -_rounded(item[1]), item[0].id

    return sorted(by_words.values(), key=order) + sorted(by_meaning, key=order)[:RELATED_BY_MEANING]


def _similarity_bar(view: View) -> float:
    """The similarity a memory near in meaning alone needs for an offer, by how many memories its view
    holds: the nearest of many is near by chance more often than the nearest of a few (an off-topic
    prompt's best cosine grows with the number of memories it is compared with), so the bar rises by
    ``RELATED_SIMILARITY_PER_TENFOLD`` for every tenfold from ``RELATED_SIMILARITY_SMALL`` at
    ``RELATED_SMALL_VIEW`` memories, up to ``RELATED_SIMILARITY``, and falls as much below it (0.15 in
    a view of 10: held at 0.2 there, the tune half's paraphrases at 10 memories lose R1+2 .75 -> .55)."""
    where = view.where
    count = max(1, view.index.view_count(where.session_id, list(where.projects), where.workspace))
    rise = RELATED_SIMILARITY_PER_TENFOLD * math.log10(count / RELATED_SMALL_VIEW)
    return min(RELATED_SIMILARITY, RELATED_SIMILARITY_SMALL + rise)


def _telling(view: View, spoken: list[list[str]]) -> bool:
    """Whether the prompt's words a runner-up shares (``matched_words`` of its evidence) point at it: two
    or more, or one that at most ``RELATED_ONE_WORD_DOCS`` memories hold: one word of the prompt that
    hundreds of memories hold ("list", "time", "firmware") offers one of hundreds, which says nothing.
    A Chinese or Japanese run is weighed as its bigrams, so the overlapping bigrams matched in a row
    ("コマ", "マン", "ンド") are one word of the prompt ("コマンド"), not three."""
    return len(spoken) > 1 or _holding(view.index, spoken[0]) <= RELATED_ONE_WORD_DOCS


def _holding(index: Index, word: list[str]) -> int:
    """About how many memories hold ``word`` (its terms, from ``matched_words``): those holding the word
    itself or its stem; for a word the index holds only in parts (a CJK chain, "p-1458", a Korean word
    with its particle), those holding its rarest part, at most (a Korean word by its first bigram, its noun)."""
    if len(word) == 1:
        forms = list(dict.fromkeys([word[0], stem(word[0])]))
        _, docs = index.document_frequencies(forms)
        if max(docs.values()):
            return max(docs.values())
        word = [t for group in word_groups(word[0])[:1] for t in matching_terms(tuple(group))[1:]]
        if not word:
            return 0
    _, docs = index.document_frequencies(word)
    held = [n for n in docs.values() if n]
    return min(held) if held else 0


def _rounded(score: float) -> float:
    """``score`` to 9 significant digits, so float noise never breaks a tie."""
    return float(f"{score:.9g}")


def usage_order(packed: list[tuple[Hit, dict[str, Any]]], prior: dict[str, float]) -> list[dict[str, Any]]:
    """The entries ``fill`` packed, in relevance order, with the ranked ones (after pinned and offered
    memories) reordered by their score times their usage prior. Usage orders what relevance and the
    budget let in; it never decides which memory enters or leaves (``cclg.learning.usage``)."""
    fixed = ("pinned", "offered again")
    order = sorted(
        range(len(packed)),
        key=lambda i: (packed[i][0].via not in fixed, -_rounded(packed[i][0].score * prior.get(packed[i][0].id, 1.0))),
    )
    return [packed[i][1] for i in order]


def _offered(index: Index, view: View, ids: Sequence[str]) -> list[MemoryNode]:
    """The memories ``ids`` name as this view has them now: a current one as it is, a retired one
    through the current memories that replaced it, a forgotten or unknown one not at all."""
    found: dict[str, MemoryNode] = {}
    for node_id in ids:
        node = view.node(node_id)
        if node is not None:
            found.setdefault(node.id, node)
            continue
        retired = index.node(node_id)
        if retired is not None:
            for successor in view.live_ends(retired):
                found.setdefault(successor.id, successor)
    return list(found.values())


def fill(
    selection: Selection,
    budget: Spending,
    *,
    generated_at: str | None = None,
    shown: Callable[[dict[str, Any]], str] | None = None,
    shown_retired: Callable[[dict[str, Any]], str] | None = None,
    shown_related: Callable[[dict[str, Any]], str] | None = None,
    related_heading: str = "",
) -> dict[str, Any]:
    """The pack: the selection's memories as far as ``budget`` allows, then its possibly related
    lines. ``shown``, ``shown_retired`` and ``shown_related``, where given, render one entry as it will
    appear, and the budget counts that rendering (and ``related_heading`` once, before the first
    possibly related line)."""
    packed: list[tuple[Hit, dict[str, Any]]] = []
    for hit in selection.chosen:
        if not _may_pack(hit.node, selection.include_confidential):
            budget.withheld += 1
            continue
        if budget.used_nodes >= budget.max_nodes:
            budget.omitted += 1
            continue
        pinned = hit.via == "pinned"
        entry = _entry(hit.node, "", None if pinned else hit.score, pinned)
        entry["why"] = why(hit)
        if hit.evidence is not None:
            entry["evidence"] = hit.evidence.to_dict()
        content = budget.fit(hit.id, fencing.reveal(hit.node.content), _with_content(entry, shown))
        if content is None:
            budget.omitted += 1
            continue
        budget.used_nodes += 1
        packed.append((hit, {**entry, "content": content}))
    entries = usage_order(packed, selection.prior)
    retired = _retired_entries(selection, budget, shown_retired)
    related = related_entries(selection, budget, shown_related, related_heading)
    return _pack_dict(selection, entries, retired, related, budget, generated_at)


def related_entries(
    selection: Selection, budget: Spending, shown: Callable[[dict[str, Any]], str] | None, heading: str = ""
) -> list[dict[str, Any]]:
    """The pack's ``possibly_related``: up to ``RELATED_MAX`` of the selection's candidates that may be
    packed, as one line each (id, type, key, a preview of the content, why), the lines (``shown``,
    else ``related_text``) within ``budget.related_chars`` and what is left of the pack's budget.
    ``heading`` is counted once with the first line, against the pack's budget only."""
    show = shown or related_text
    found: list[dict[str, Any]] = []
    spent = 0
    for hit, reason in selection.related:
        if len(found) >= RELATED_MAX:
            break
        if not _may_pack(hit.node, selection.include_confidential):
            continue
        entry = {"id": hit.id, "type": hit.node.type, "key": hit.node.key, "preview": _preview(hit.node.content)}
        entry["why"] = reason
        line = show(entry)
        cost = line if found else heading + line
        chars, tokens = budget.room()
        if spent + len(line) > budget.related_chars or len(cost) > chars:
            continue
        if tokens is not None and estimate_tokens(cost) > tokens:
            continue
        spent += len(line)
        budget.used_chars += len(cost)
        budget.used_tokens += estimate_tokens(cost)
        found.append(entry)
    return found


def related_text(entry: dict[str, Any]) -> str:
    """A possibly related entry as one plain line (short id, key or type, preview): what the budget
    counts for it when no rendering is given, about what the Markdown line costs."""
    return f"{short_id(entry['id'])} ({entry['key'] or entry['type']}): {entry['preview']}\n"


def _preview(content: str) -> str:
    """The first ``RELATED_PREVIEW_CHARS`` of ``content`` on one line (invisible characters shown)."""
    text = " ".join(fencing.reveal(content).split())
    return text if len(text) <= RELATED_PREVIEW_CHARS else text[: RELATED_PREVIEW_CHARS - 1] + "…"


def _retired_entries(
    selection: Selection, budget: Spending, shown: Callable[[dict[str, Any]], str] | None
) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for hit in selection.retired:
        node = hit.node
        if len(found) >= MAX_SUPPRESSED:
            break
        if not _may_pack(node, selection.include_confidential):
            continue
        entry = {
            "id": node.id,
            "status": node.status,
            "content": "",
            "supersedes": node.relations["supersedes"],
            "superseded_by": node.relations["superseded_by"],
            "replaced_by": selection.replaced_by.get(node.id, []),
        }
        show = _with_content(entry, shown)
        prefix = fencing.reveal(node.content[:SUPPRESSED_PREFIX_CHARS])
        fitted = budget.fit(node.id, prefix, show) if len(show(prefix)) <= budget.room()[0] else None
        if fitted is None:
            break
        found.append({**entry, "content": fitted})
    return found


def _with_content(entry: dict[str, Any], shown: Callable[[dict[str, Any]], str] | None) -> Callable[[str], str]:
    """``shown`` as a function of the content alone (the rest of the entry fixed); the bare
    content when there is no ``shown``."""
    if shown is None:
        return _bare
    return lambda content: shown({**entry, "content": content})


def _pack_dict(
    selection: Selection,
    packed: list[dict[str, Any]],
    suppressed: list[dict[str, Any]],
    related: list[dict[str, Any]],
    budget: Spending,
    generated_at: str | None,
) -> dict[str, Any]:
    values = {
        "schema_version": fmt.PACK_SCHEMA,
        "query": selection.query,
        "generated_at": generated_at or now_iso(),
        "memory_nodes": packed,
        "suppressed_nodes": suppressed,
        "budget": budget.to_dict(),
        "possibly_related": related,
        "semantic": selection.semantic,  # a cclg addition: whether the semantic signal answered
    }
    return {name: values[name] for name in fmt.canonical_order("active_memory_pack")}


def compile_pack(store: Store, request: PackRequest) -> dict[str, Any]:
    """An ActiveMemoryPack (``cclg.active_memory_pack.v0.1``) as a dict in canonical order.

    Quarantined and restricted memories are never packed, nor confidential ones
    unless ``request.include_confidential`` (default: the store's ``"pack":
    {"include_confidential": true}``); they count as withheld. Every entry says its
    trust and flags, and invisible characters in stored text are shown as ``[U+XXXX]``.
    """
    pack: dict[str, Any] = explain_pack(store, request)["pack"]
    return pack


def explain_pack(store: Store, request: PackRequest) -> dict[str, Any]:
    """``{"pack": the pack compile_pack gives, "left_out": the best candidate the relevance decision
    kept out, with its evidence}``: each entry of the pack says why it is in (``why``, ``evidence``)."""
    selection = select(store, request)
    pack = fill(selection, Spending(request.budget), generated_at=request.generated_at)
    left_out = [
        {
            "id": hit.id,
            "status": hit.node.status,
            "content": fencing.reveal(hit.node.content[:SUPPRESSED_PREFIX_CHARS]),
            "why_not": evidence.reason(),
            "evidence": evidence.to_dict(),
        }
        for hit, evidence in selection.runner_up
        if _may_pack(hit.node, selection.include_confidential)
    ]
    return {"pack": pack, "left_out": left_out}


def _may_pack(node: MemoryNode, include_confidential: bool) -> bool:
    trust, sensitivity, _ = labels_of(node.metadata)
    if trust == "quarantined" or sensitivity == "restricted":
        return False
    return sensitivity != "confidential" or include_confidential
