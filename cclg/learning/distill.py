"""Distilling a session: the prompts where the user corrected the agent or decided something for the
future, proposed as memories.

``detect(prompt)`` reads one prompt, in English, Korean or Japanese, and says whether it carries
a **correction** (what was said or done is wrong, and what is right instead) or a **decision** (a
rule or choice for what comes next), with the sentence that carries it. It reads only the user's
own words: code blocks, inline code, quoted text and pasted log lines are set aside first, since
"never", "instead" or "wrong" inside an error message are not the user's. A question is neither, and
neither is a one-off ("don't commit yet", "let's try Redis and see"). The patterns were written on
the tune half of ``benchmarks/distill_cases.json``; its precision and recall on both halves are in
``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import json
import re

from cclg.core.hook_events import USER_PROMPT, logged
from cclg.core.records import MAX_QUESTIONS, QUESTION_CHARS, node_questions
from cclg.core.store import Store
from cclg.errors import UsageError
from cclg.ledger.sessions import event_payload

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cclg.core.records import MemoryNode
    from cclg.core.repository import ProjectKeys

# ---------------------------------------------------------------- the user's own words

_FENCE = re.compile(r"```.*?(?:```|$)", re.S)
_QUOTED = re.compile(r"\"[^\"\n]{3,}\"|“[^”\n]{3,}”|「[^」\n]{3,}」")
_LOG_LINE = re.compile(
    r"^\s*(?:\d{4}-\d\d-\d\d|\[?\d\d:\d\d|(?:ERROR|WARN(?:ING)?|INFO|DEBUG|FATAL|Traceback|hint|error|fatal)\b[:\s]"
    r"|[A-Z]\w*(?:Error|Exception)\b|at \S+\(|File \")",
)
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+|\n+|(?<=[。！？])")


def own_words(prompt: str) -> str:
    """``prompt`` without code blocks, quoted text and pasted log lines; inline code kept as a word."""
    text = _FENCE.sub(" ", prompt)
    text = _QUOTED.sub(" ", text)
    text = "\n".join(line for line in text.splitlines() if not _LOG_LINE.match(line))
    return re.sub(r"`([^`\n]*)`", lambda m: m.group(1) or "code", text)


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s and s.strip()]


# ---------------------------------------------------------------- what makes a sentence count

_QUESTION = re.compile(
    r"\?\s*\W*$|？\s*$|^(?:is|are|was|were|can|could|would|should|do|does|did|what|why|how|when|where|which|who"
    r"|wait|hmm|so)\b|(?:까|나요|니|냐|어\?|야\?|인가|ですか|ますか|でしょうか|かな|か？|の？)\s*$",
    re.I,
)
_ONE_OFF = re.compile(
    r"\b(?:let'?s try|try (?:it|this)|see if|for now|this time|yet|just this once|temporar(?:y|ily)|hypothetical"
    r"|if it doesn'?t|never ?mind|no (?:errors?|thanks|problem|worries)|thanks?|insists?|claims?)\b"
    r"|아직|일단|잠깐|괜찮아요|고마워"
    r"|とりあえず|まだ|大丈夫です|ありがとう|今回だけ|少し待",
    re.I,
)
# A correction says something is wrong and what is right: a cue and, in the same or the next
# sentence, a replacement ("not X", "instead", "it's Y", "use Y")...
CORRECTION = re.compile(
    r"^(?:no|nope|nah)(?:\s+no)*\s*[,.!—-]|^(?:nope|nah|incorrect|wrong)\b"
    r"|\b(?:that'?s|thats|this is|it'?s|you'?re|you'?ve got|you got)\b.{0,30}"
    r"\b(?:wrong|incorrect|not right|not how|backwards|the old|mixing \w+ up|deprecated)\b"
    r"|^actually\b|\byou keep\b|\byou (?:did|used|wrote|added|put)\b.{0,50}\bagain\b|\bstale\b"
    r"|\b(?:is|are|was)n'?t\b.{0,40}\bit'?s\b|\bnot\b.{0,40}[—–,-]\s*it'?s\b|^stop (?:using|importing|adding|writing)\b"
    r"|^아니[,. ]|^아니(?:야|요|에요)|틀렸|틀려|잘못|말고|아니라|아니고|안 써|안 씁니다"
    r"|^いや[、,]|^違います|^違う[よ、。]|間違い(?:です|だ)|ではなく|じゃなくて|ではありません|使ってないです",
    re.I,
)
_REPLACEMENT = re.compile(
    r"\bnot\b|n'?t\b|\binstead\b|\bshould be\b|\bit'?s\b|\bis\b|\bare\b|\buse\b|\bnow\b|\binto\b"
    r"|\bin\b|\bto\b|\bbelongs\b|말고|아니라|아니고|이야|예요|이에요|써|으로|로 해|ではなく|じゃなくて|です|を使|今は",
    re.I,
)
# ... or a cue that says both at once: the thing moved, was renamed, is gone, is something else now.
CHANGED = re.compile(
    r"\bno longer\b|\bwas removed\b|\b(?:got |was |were )?(?:split|renamed|moved|migrated|ripped|replaced)\b.{0,40}"
    r"\b(?:into|to|by|out|with|since|ago)\b|\bgot renamed\b|\bthese days\b|\banymore\b|\bhasn'?t been\b|\bhas been\b"
    r".{0,30}\bsince\b|\bthe real \w+ is\b|\b(?:is|are) (?:gone|dead code|a leftover|a no-op)\b|\bleftover\b"
    r"|\b(?:is|are|owns|runs|lives) .{1,40} now$"
    r"|없어졌|옮겼|바뀌었|더 이상|이제\b.{0,20}(?:야|예요|이에요|써요|해요)"
    r"|移行済み|廃止|変わって|変わりました|になりました|もう\S*ない|非推奨",
    re.I,
)
DECISION = re.compile(
    r"\bfrom now on\b|\bfrom here on\b|\bgoing forward\b|\bfor all future\b|\bnew rule\b|\brule for this\b"
    r"|^(?:please |and |so |ok,? )?(?:always|never)\b|\b(?:you|we|to) (?:should |must )?(?:always|never)\b"
    r"|\bdon'?t ever\b|\bdo not ever\b|\b(?:i|we)(?:'?ve| have)? decided\b|\b(?:team|we) agreed\b|\bdecided to\b"
    r"|\blet'?s (?:go with|use|put|keep|standardi[sz]e|stick)\b|\bstandardi[sz]e on\b|\bstick (?:to|with)\b"
    r"|\bwe'?ll use\b|\bwe'?re (?:going with|moving to)\b|\bdefault to\b|\bno more\b"
    r"|\bwe'?re an? \w+ (?:shop|team)\b|\b\w+ it is\b|\bis the floor\b|\bout of scope\b|\bget(?:s)? pinned\b"
    r"|^no \w+s\b|\bi'?d rather you didn'?t\b|\bleave \S+ alone\b|\bship (?:that|this) one\b|\boption [a-z]\b"
    r"|\bthat'?s (?:the|our) (?:stack|rule|convention|standard|policy|way)\b|\bthat'?s how (?:i|we)\b"
    r"|\bis protected\b|\beverything goes through\b|\w \w+ only\.?$"
    r"|앞으로(?:는)?|항상|무조건|기로 했|하기로|정했|로 가자|으로 가자|로 통일|통일하|않는 걸로|금지|우리 팀은|원칙"
    r"|今後|これからは|必ず|ことにしました|に決め|禁止|方向で|で統一|に統一|派です|のみ|原則|ルール",
    re.I,
)


def detect(prompt: str) -> dict[str, Any] | None:
    """``{"kind": "correction"|"decision", "sentence": ...}`` for the first sentence of ``prompt``'s
    own words that carries one (a correction wins over a decision in the same sentence: "no, use
    pnpm" is both, and what it corrects is what to remember), or None."""
    found = None
    parts = sentences(own_words(prompt))
    for number, sentence in enumerate(parts):
        if _QUESTION.search(sentence) or _ONE_OFF.search(sentence):
            continue
        following = parts[number + 1] if number + 1 < len(parts) else ""
        corrects = CORRECTION.search(sentence) and (_REPLACEMENT.search(sentence) or _REPLACEMENT.search(following))
        if corrects or CHANGED.search(sentence):
            return {"kind": "correction", "sentence": sentence}
        if found is None and DECISION.search(sentence):
            found = {"kind": "decision", "sentence": sentence}
    return found


# ---------------------------------------------------------------- proposals from a session


def propose(store: Store, session_id: str) -> list[dict[str, Any]]:
    """``cclg distill SESSION``: a candidate memory for each prompt of the session that carries a
    correction or a decision, and for each statement the user made in two prompts or more (a
    repeated fact), numbered from 1, each with its evidence (the raw span of the sentence in the
    prompt's raw evidence), its scope (the session's project) and what accepting it would do: a
    correction supersedes the current memory it contradicts when there is one (so it does not add a
    duplicate beside it); the rest are added. Each shows every label accepting sets (``labels``), and
    a supersede also what is lower than its target's (``lowered``). Nothing is written."""
    proposals: list[dict[str, Any]] = review(store, session_id)["proposals"]
    return proposals


def review(store: Store, session_id: str) -> dict[str, Any]:
    """``{"proposals": propose's list, "dangling": how many of the session's prompts name raw
    evidence that is gone (skipped, never an error)}``: what ``cclg distill`` and MCP show."""
    session = store.read_session(session_id)
    prompts, folders, dangling = [], [], 0
    for event in store.session_events(session_id):
        if event.get("event") != logged(USER_PROMPT) or not isinstance(event.get("raw"), str):
            continue
        payload = event_payload(store, event)
        dangling += not payload
        folders.append(payload.get("cwd"))
        if isinstance(prompt := payload.get("prompt"), str) and prompt:
            prompts.append((event["raw"], prompt))
    keys = _session_project(session.project, folders)
    return {"proposals": _proposals(store, session.project, keys, prompts), "dangling": dangling}


def _proposals(
    store: Store, project: str | None, keys: ProjectKeys, prompts: list[tuple[str, str]]
) -> list[dict[str, Any]]:
    found = [(raw, prompt, hit) for raw, prompt in prompts if (hit := detect(prompt)) is not None]
    found += _repeated(prompts, {hit["sentence"] for _, _, hit in found})
    proposals: list[dict[str, Any]] = []
    for raw, prompt, hit in found:
        kind, sentence = hit["kind"], hit["sentence"]
        proposal: dict[str, Any] = {
            "number": len(proposals) + 1,
            "kind": kind,
            "content": sentence,
            "questions": [as_question(sentence)],
            "type": {"correction": "correction", "decision": "project_decision"}.get(kind, "project_fact"),
            "scope": {"project": project},
            "evidence": {"prompt": prompt[:2000], "raw_span": _span(store, raw, sentence)},
            "action": "add",
        }
        target = _contradicted(store, sentence, keys) if kind == "correction" else None
        if target is not None:
            proposal.update(action="supersede", target=target.id, target_content=target.content)
        proposals.append({**proposal, **proposed_labels(target)})
    return proposals


# A proposal is a detector's reading of a session's prompts, not the user vouching for a memory: what
# accepting writes is at most untrusted and never pinned, whatever it supersedes (``cclg label`` raises it).
MAX_TRUST = "untrusted"


def proposed_labels(target: MemoryNode | None) -> dict[str, Any]:
    """The labels accepting a proposal sets (``labels``), as the ledger will set them: a new memory's
    defaults, or what a supersede of ``target`` inherits within the ceiling; and, for a supersede,
    what is lower than the target's (``lowered``) and the window, confidence and priority the new
    memory keeps of it (``keeps``, ``ledger.kept_fields``: a correction of a memory valid until 2027
    is valid until 2027)."""
    from cclg.core.labels import (
        DEFAULT_RETENTION,
        DEFAULT_SENSITIVITY,
        DEFAULT_TRUST,
        capped_labels,
        labels_of,
        lowered_labels,
    )
    from cclg.ledger.writer import inherited_labels, kept_fields

    if target is None:
        defaults = {"trust": DEFAULT_TRUST, "sensitivity": DEFAULT_SENSITIVITY}
        return {"labels": capped_labels({**defaults, "retention": DEFAULT_RETENTION}, MAX_TRUST)}
    labels = inherited_labels(target, None, MAX_TRUST)
    current = dict(zip(("trust", "sensitivity", "retention"), labels_of(target.metadata), strict=True))
    kept = kept_fields([target])
    keeps = {"valid_until": kept["effective_until"], "confidence": kept["confidence"], "priority": kept["priority"]}
    return {"labels": labels, "lowered": lowered_labels(current, labels), "keeps": keeps}


REPEATED_WORDS = 4  # a statement shorter than this ("ok", "thanks") is not a fact, however often said


def _repeated(prompts: list[tuple[str, str]], known: set[str]) -> list[tuple[str, str, dict[str, Any]]]:
    """Statements (not questions) the user wrote in two prompts or more, the first occurrence of each."""
    seen: dict[str, tuple[str, str, str]] = {}
    counts: dict[str, int] = {}
    for raw, prompt in prompts:
        for sentence in dict.fromkeys(s for s in sentences(own_words(prompt)) if not _QUESTION.search(s)):
            normal = " ".join(sentence.lower().rstrip(".!。").split())
            if (len(normal.split()) < REPEATED_WORDS and len(normal) < 12) or sentence in known:
                continue
            counts[normal] = counts.get(normal, 0) + 1
            seen.setdefault(normal, (raw, prompt, sentence))
    return [
        (raw, prompt, {"kind": "repeated", "sentence": sentence})
        for normal, (raw, prompt, sentence) in seen.items()
        if counts[normal] >= 2
    ]


def _span(store: Store, raw: str, sentence: str) -> dict[str, Any] | None:
    """Where ``sentence`` stands in the raw evidence file (as ``cclg cite`` reads spans)."""
    name = raw.split("/", 1)[-1]
    path = store.raw_file(name)
    if path is None:
        return None
    text = path.read_bytes().decode("utf-8", errors="replace")
    for form in (sentence, json.dumps(sentence, ensure_ascii=False)[1:-1]):
        start = text.find(form)
        if start >= 0:
            return {"source_id": name, "char_start": start, "char_end": start + len(form)}
    return None


def _session_project(recorded: str | None, folders: list[Any]) -> ProjectKeys:
    """What the session's project answers to (``cclg.core.repository``): every value of the repository its
    last prompt came from, while that is still the project the session recorded (so a memory scoped
    by the folder's name is found too); else the recorded value alone."""
    from cclg.core.repository import project_of

    folder = next((f for f in reversed(folders) if isinstance(f, str) and f), None)
    found = project_of(folder) if folder is not None and recorded is not None else None
    return found if found is not None and recorded in found.keys else recorded


def _contradicted(store: Store, sentence: str, project: ProjectKeys) -> MemoryNode | None:
    """The current memory of the project a correction is most likely about: the best search hit that
    shares at least two of its distinctive words."""
    from cclg.core.text import query_terms
    from cclg.retrieval.query import Where
    from cclg.retrieval.search import search

    hits = search(store, sentence, mode="bm25", where=Where(project=project), limit=3)
    wanted = set(query_terms(sentence))
    for hit in hits:
        if len(wanted & set(hit.matched)) >= 2:
            return hit.node
    return None


def as_question(sentence: str) -> str:
    """The user's own ``sentence`` as a question the memory answers: on one line, cut at a word to
    ``QUESTION_CHARS``. It keeps the memory found by the user's words when its content is reworded."""
    text = " ".join(sentence.split())
    if len(text) <= QUESTION_CHARS:
        return text
    cut = text[: QUESTION_CHARS + 1].rsplit(" ", 1)[0]
    return cut if cut and len(cut) <= QUESTION_CHARS else text[:QUESTION_CHARS]


def accept(store: Store, session_id: str, numbers: list[int] | None) -> list[dict[str, Any]]:
    """Write the proposals ``numbers`` name (all of them when None), each through the ledger with its
    evidence as the source (the session, the quote, the raw span). Returns what each did."""
    from cclg.core.records import Source
    from cclg.intake.new_memories import add_memory, parse_scope
    from cclg.ledger.writer import apply_patch

    proposals = propose(store, session_id)
    chosen = proposals if numbers is None else [p for p in proposals if p["number"] in numbers]
    unknown = sorted(set(numbers or []) - {p["number"] for p in proposals})
    if unknown:
        raise UsageError(f"no proposal numbered {', '.join(map(str, unknown))}; there are {len(proposals)}")
    done = []
    for p in chosen:
        span = p["evidence"]["raw_span"]
        source = Source(label=f"session:{session_id}", session_ids=[session_id], raw_spans=[span] if span else [])
        source.quote = p["content"]
        if p["action"] == "supersede":
            reason = f"the user corrected it in session {session_id}"
            # the questions the corrected memory answered are still asked of the correction
            kept = [*node_questions(store.read_node(p["target"])), *p["questions"]]
            result = apply_patch(
                store, "supersede", [p["target"]], reason=reason, contents=[p["content"]], source=source,
                max_trust=MAX_TRUST, questions=list(dict.fromkeys(kept))[-MAX_QUESTIONS:],
            )  # fmt: skip
            done.append({"number": p["number"], "patch": result.patch.id, "new_memory_ids": result.patch.new_node_ids})
        else:
            added = add_memory(
                store, p["content"], source=f"session:{session_id}", quote=p["content"], type=p["type"],
                scope=parse_scope(p["scope"]), reason=f"distilled from session {session_id}", max_trust=MAX_TRUST,
                questions=p["questions"],
            )  # fmt: skip
            done.append({"number": p["number"], "memory": added.node.id, "duplicate_of": added.duplicate_of})
    return done
