"""Rules: what a session learned from a failure it got out of, kept while it keeps working.

When pain's streak ends (the failing command passes), the hook writes a **rule**: a
memory like any other, through the ledger, scoped to the project, untrusted until
the user labels it (``cclg label``), keyed ``rule.<hash>`` of its command and error.
Its lesson is stated from the evidence, in cclg's words: what failed, how often, and
what came between the last failure and the success (the files edited, the commands
run); what the tools printed or named is quoted by the one renderer
(``cclg.core.fencing.quote_outside``: capped, revealed, marked when it reads as instructions).
The format's node types are closed, so a rule is a ``warning`` with that key.

Evidence goes to an append-only log, ``audit/rule_evidence.jsonl``, one line each:

- ``learned``: the rule was written (with its trigger: command, error, files);
- ``detection``: its failure happened again (pain spoke about its error);
- ``delivered``: a session was given the rule;
- ``suppression``: a session given the rule ended without its failure.

Detections and suppressions both count for a rule, and nothing counts against it
with time: a rule that prevents its failure keeps being delivered, where a
time-decayed confidence would drop exactly the rules that work. A rule is
delivered when its trigger is near (the same command, error or files) and, once
its evidence reaches ``STRONG``, at every session start of its project, if
``session_start`` lets it: text derived from tool output never opens a session by
itself while it reads as instructions, only once the user accepts the rule
(``accept``, ``cclg rules --accept``).
"""

from __future__ import annotations

from cclg.core.fencing import instruction_flags, quote_outside
from cclg.core.files import read_jsonl
from cclg.core.ids import now_iso, sha256_hex
from cclg.core.labels import labels_of
from cclg.core.repository import ProjectKeys, project_keys
from cclg.core.store import Store
from cclg.errors import ConcurrencyError, NotFoundError
from cclg.ledger.sessions import Digest, digest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cclg.core.records import MemoryNode

STRONG = 3  # evidence (learned + detections + suppressions) for a rule to open every session
LOCK_WAIT_SECONDS = 0.5  # the hook learns only if the store is free: it never waits behind an import
SOURCE = "sensor:pain"


class Rule:
    """A rule as its evidence describes it."""

    def __init__(self, key: str, trigger: dict[str, Any], project: str | None) -> None:
        self.key = key
        self.trigger = trigger
        self.project = project
        self.counts = {"learned": 0, "detection": 0, "suppression": 0, "delivered": 0}

    @property
    def evidence(self) -> int:
        return self.counts["learned"] + self.counts["detection"] + self.counts["suppression"]

    def near(self, step: dict[str, Any]) -> bool:
        """Whether ``step`` comes near the rule's trigger: the same command, error or files."""
        trigger = self.trigger
        return bool(
            (step.get("command") and step.get("command") == trigger.get("command"))
            or (step.get("failure") and step.get("failure") == trigger.get("signature"))
            or set(step.get("files", ())) & set(trigger.get("files", ()))
        )

    def of(self, project: ProjectKeys) -> bool:
        """Whether the rule was learned in ``project`` (any value it answers to; None: no project)."""
        keys = project_keys(project)
        return self.project in keys if keys else self.project is None

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "project": self.project, "trigger": self.trigger, **self.counts}


def evidence_path(store: Store) -> Any:
    return store.rule_evidence_path


def rule_key(command: str, signature: str) -> str:
    return "rule." + sha256_hex(f"{command}\n{signature}".encode())[:16]


def read_rules(store: Store) -> dict[str, Rule]:
    """Every rule the evidence log knows, by key, with its counts."""
    rules: dict[str, Rule] = {}
    for record in read_jsonl(evidence_path(store)).records:  # a torn last line is set aside by the next append
        key, kind = record.get("rule"), record.get("kind")
        if not isinstance(key, str) or kind not in ("learned", "detection", "suppression", "delivered"):
            continue
        if kind == "learned" and key not in rules:
            rules[key] = Rule(key, record.get("trigger") or {}, record.get("project"))
        if key in rules:
            rules[key].counts[kind] += 1
    return rules


def note(store: Store, kind: str, keys: list[str], session_id: str, **extra: Any) -> None:
    """Append one evidence line per rule key."""
    stamp = now_iso()
    store.append(
        evidence_path(store),
        [{"rule": key, "kind": kind, "session_id": session_id, **extra, "created_at": stamp} for key in keys],
    )


# ---------------------------------------------------------------- learning


def learn(
    store: Store, steps: list[dict[str, Any]], step: dict[str, Any], project: str | None, session_id: str
) -> str | None:
    """If ``step`` (a success) ends a streak of the same failure of its command, at least
    pain spoke about, write the rule it teaches (unless the project has one with that key, current or
    thrown out by the user) and return its key.

    The check for the key, the rule's memory and its ``learned`` line are one step under the store
    lock: sessions ending the same streak at once learn the rule once, not once each."""
    streak, between = _streak_before(steps, step)
    if not streak:
        return None
    command, signature = step["command"], streak[0]["failure"]
    key = rule_key(command, signature)
    edited = sorted({f for s in between for f in s.get("files", ())})
    ran = sorted({s["command"] for s in between if s.get("command") and s.get("command") != command})
    lesson = _lesson(command, signature, len(streak), edited, ran)
    flags = sorted({flag for text in (command, signature, *edited, *ran) for flag in instruction_flags(text)})
    from cclg.intake.new_memories import add_memory, parse_scope

    scope = parse_scope({"project": project} if project else None)
    try:
        with store.lock(timeout=LOCK_WAIT_SECONDS):
            if _has_key(store, key):
                return None  # learned before (counted as a detection when pain spoke), or forgotten by the user
            add_memory(store, lesson, source=SOURCE, type="warning", key=key, scope=scope, created_by="sensor",
                       flags=flags)  # fmt: skip
            trigger = {"command": command, "signature": signature, "files": edited[:20]}
            note(store, "learned", [key], session_id, trigger=trigger, project=project)
    except ConcurrencyError:
        return None  # the store is busy (an import): the next time the streak ends, it learns
    return key


EXCERPT_CHARS = 120  # of the failing command's error line quoted in a rule's text
NAME_CHARS = 80  # of a command or a file named in it


def _lesson(command: str, signature: str, failures: int, edited: list[str], ran: list[str]) -> str:
    """What a rule says, in cclg's words: each thing the tools printed or named (the command, its error
    line, the files edited, the commands run) is a quoted excerpt, capped and revealed by the one
    renderer (``cclg.core.fencing.quote_outside``), marked when it reads as instructions. Text derived from
    tool output stays data in the rule too."""

    def names(found: list[str], most: int) -> str:
        return ", ".join(quote_outside(name, limit=NAME_CHARS) for name in found[:most])

    fixes = [f"edits to {names(edited, 5)}"] if edited else []
    fixes += [f"running {names(ran, 3)}"] if ran else []
    return (
        f"The command {quote_outside(command, limit=NAME_CHARS)} failed {failures} times in a row with the same "
        f"error, quoted: {quote_outside(signature, limit=EXCERPT_CHARS)}. "
        f"It passed after {' and '.join(fixes) or 'a retry with no edit in between'}."
    )


def _streak_before(
    steps: list[dict[str, Any]], step: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the streak of one failure of ``step``'s command that ``step`` ends, newest first, if pain spoke
    about it; the steps between its last failure and ``step``)."""
    command = step.get("command")
    if not command or step.get("failure"):
        return [], []
    streak: list[dict[str, Any]] = []
    between: list[dict[str, Any]] = []
    for past in reversed(steps):
        if past.get("command") != command:
            if not streak:
                between.append(past)
            continue
        if not past.get("failure") or (streak and past["failure"] != streak[0]["failure"]):
            break
        streak.append(past)
    spoke = any(s.get("sensor") == "pain" for past in streak for s in past.get("signals", ()))
    return (streak, between) if spoke else ([], [])


def _has_key(store: Store, key: str) -> bool:
    """Whether any memory (current or not) holds ``key``: a rule the user forgot stays forgotten."""
    from cclg.ledger.index import read_fresh

    return read_fresh(store, lambda index: index.holds_key(key))


# ---------------------------------------------------------------- delivering


def current_rules(store: Store, keys: list[str]) -> dict[str, MemoryNode]:
    """The current memory of each key that has one (a forgotten or expired rule has none)."""
    if not keys:
        return {}
    from cclg.ledger.index import read_fresh

    return read_fresh(store, lambda index: {key: nodes[0] for key in keys if (nodes := index.current_with_key(key))})


def session_start(node: MemoryNode) -> str | None:
    """Whether a rule's memory may open sessions (once its evidence is strong), and why: ``"accepted"``
    (the user labelled it trusted: ``cclg rules --accept``, ``cclg label``) or ``"clean"`` (untrusted, and
    nothing in its text or in the tool output it quotes reads as instructions); None when it is held
    back (instruction-like, or quarantined). Text derived from tool output never opens a session by itself."""
    trust = labels_of(node.metadata)[0]
    if trust == "trusted":
        return "accepted"
    if trust == "quarantined" or "instruction_like" in node.metadata.get("flags", ()):
        return None
    return None if instruction_flags(node.content) else "clean"


def accept(store: Store, node: MemoryNode) -> Any:
    """``cclg rules --accept``: the user's label on a rule (trusted, through an ``update`` patch of the same
    text and key), after which it may open sessions whatever its text; ``NotFoundError`` for a memory that
    is not a rule. Returns the patch's result."""
    from cclg.ledger.writer import apply_patch

    if node.key is None or node.key not in read_rules(store):
        raise NotFoundError(f"{node.id} is not a rule (cclg rules lists them)")
    reason = "accepted with cclg rules --accept"
    return apply_patch(store, "update", [node.id], reason=reason, contents=[node.content], labels={"trust": "trusted"})


def line(node: MemoryNode, rule: Rule) -> str:
    accepted = labels_of(node.metadata)[0] == "trusted"
    trust = "accepted by the user" if accepted else "untrusted until the user accepts it"
    seen = f"{rule.counts['detection'] + 1} failure(s) seen, {rule.counts['suppression']} session(s) without it"
    flagged = "instruction_like" in node.metadata.get("flags", ()) or None  # what its excerpt was, before the cap
    return f"rule {node.id} ({trust}; {seen}): {quote_outside(node.content, flagged=flagged)}"


def near(store: Store, step: dict[str, Any], project: ProjectKeys, given: set[str]) -> list[tuple[Rule, MemoryNode]]:
    """The rules of ``project`` whose trigger ``step`` comes near and that this session was not given."""
    rules = [r for r in read_rules(store).values() if r.key not in given and r.near(step)]
    return [(r, node) for r, node in _current_in(store, rules, project) if labels_of(node.metadata)[0] != "quarantined"]


def strong(store: Store, project: ProjectKeys) -> list[tuple[Rule, MemoryNode]]:
    """The rules of ``project`` with evidence enough to open every session, the best evidenced first."""
    rules = sorted((r for r in read_rules(store).values() if r.evidence >= STRONG), key=lambda r: (-r.evidence, r.key))
    return [(r, node) for r, node in _current_in(store, rules, project) if session_start(node)]


def _current_in(store: Store, rules: list[Rule], project: ProjectKeys) -> list[tuple[Rule, MemoryNode]]:
    """Each of ``rules`` with its current memory, where that memory is of ``project`` (any value it
    answers to; None: of no project). The memory's scope decides, not where the rule was learned: a
    rule learned under a folder's name and given to one repository (``cclg project adopt``) follows."""
    keys = project_keys(project)
    found = current_rules(store, [r.key for r in rules])
    return [
        (r, node)
        for r in rules
        if (node := found.get(r.key)) is not None
        and (node.scope.project in keys if keys else node.scope.project is None)
    ]


# ---------------------------------------------------------------- the end of a session


def close_session(store: Store, session_id: str, found: Digest | None = None) -> list[str]:
    """Record a suppression for each rule the session was given whose failure did not come after:
    the rule was there, and the failure was not (from the session's digest, ``cclg.ledger.sessions.digest``).
    Returns their keys."""
    found = found or digest(store, session_id)
    rules = read_rules(store)
    kept = []
    for key, given_at in found.rules_given.items():
        signature = rules[key].trigger.get("signature") if key in rules else None
        if signature and isinstance(signature, str) and found.failures.get(signature, -1) < given_at:
            kept.append(key)
    if kept:
        note(store, "suppression", kept, session_id)
    return kept


# ---------------------------------------------------------------- listing


def listing(store: Store) -> list[dict[str, Any]]:
    """``cclg rules``: every rule with its evidence and the memory that states it now (the current
    one, else the last one, with its status: a forgotten rule shows as forgotten), best evidenced first."""
    from cclg.ledger.index import Index, read_fresh

    found = sorted(read_rules(store).values(), key=lambda r: (-r.evidence, r.key))

    def read(index: Index) -> list[dict[str, Any]]:
        listed = []
        for rule in found:
            node = index.latest_with_key(rule.key)
            listed.append(
                {
                    **rule.to_dict(),
                    "project": node.scope.project if node else rule.project,  # where it applies now
                    "evidence": rule.evidence,
                    "id": node.id if node else None,
                    "status": node.status if node else "missing",
                    "trust": node.metadata.get("trust") if node else None,
                    "session_start": session_start(node) if node else None,
                    "content": node.content if node else "",
                }
            )
        return listed

    return read_fresh(store, read)
