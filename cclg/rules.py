"""Rules: what a session learned from a failure it got out of, kept while it keeps working.

When pain's streak ends (the failing command passes), the hook writes a **rule**: a
memory like any other, through the ledger, scoped to the project, untrusted until
the user labels it (``cclg label``), keyed ``rule.<hash>`` of its command and error.
Its lesson is stated from the evidence: what failed, how often, and what came
between the last failure and the success (the files edited, the commands run).
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
its evidence reaches ``STRONG``, at every session start of its project.
"""

from __future__ import annotations

import json

from cclg.errors import ConcurrencyError
from cclg.files import read_jsonl
from cclg.ids import now_iso, sha256_hex
from cclg.repository import ProjectKeys, project_keys
from cclg.store import Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cclg.records import MemoryNode

EVIDENCE = "audit/rule_evidence.jsonl"
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
    return store.root / EVIDENCE


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
    thrown out by the user) and return its key."""
    streak, between = _streak_before(steps, step)
    if not streak:
        return None
    command, signature = step["command"], streak[0]["failure"]
    key = rule_key(command, signature)
    if _has_key(store, key):
        return None  # learned before (counted as a detection when pain spoke), or forgotten by the user
    edited = sorted({f for s in between for f in s.get("files", ())})
    ran = sorted({s["command"] for s in between if s.get("command") and s.get("command") != command})
    fixes = [f"edits to {', '.join(edited[:5])}"] if edited else []
    fixes += [f"running {', '.join(f'`{c}`' for c in ran[:3])}"] if ran else []
    lesson = (
        f"`{command}` failed {len(streak)} times in a row with: {signature}. "
        f"It passed after {' and '.join(fixes) or 'a retry with no edit in between'}."
    )
    from cclg.intake import add_memory, parse_scope

    scope = parse_scope({"project": project} if project else None)
    try:
        add_memory(
            store, lesson, source=SOURCE, type="warning", key=key, scope=scope, created_by="sensor",
            lock_wait=LOCK_WAIT_SECONDS,
        )  # fmt: skip
    except ConcurrencyError:
        return None  # the store is busy (an import): the next time the streak ends, it learns
    trigger = {"command": command, "signature": signature, "files": edited[:20]}
    note(store, "learned", [key], session_id, trigger=trigger, project=project)
    return key


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
    from cclg.index import open_index

    index = open_index(store)
    try:
        return index.db.execute("SELECT 1 FROM nodes WHERE key = ? LIMIT 1", (key,)).fetchone() is not None
    finally:
        index.close()


# ---------------------------------------------------------------- delivering


def current_rules(store: Store, keys: list[str]) -> dict[str, MemoryNode]:
    """The current memory of each key that has one (a forgotten or expired rule has none)."""
    if not keys:
        return {}
    from cclg.index import open_index

    index = open_index(store)
    try:
        return {key: nodes[0] for key in keys if (nodes := index.current_with_key(key))}
    finally:
        index.close()


def line(node: MemoryNode, rule: Rule) -> str:
    labelled = node.metadata.get("trust") not in (None, "untrusted")
    trust = "labelled by the user" if labelled else "untrusted until the user labels it"
    seen = f"{rule.counts['detection'] + 1} failure(s) seen, {rule.counts['suppression']} session(s) without it"
    return f"rule {node.id} ({trust}; {seen}): {json.dumps(node.content, ensure_ascii=False)}"


def near(store: Store, step: dict[str, Any], project: ProjectKeys, given: set[str]) -> list[tuple[Rule, MemoryNode]]:
    """The rules of ``project`` whose trigger ``step`` comes near and that this session was not given."""
    rules = [r for r in read_rules(store).values() if r.key not in given and r.near(step)]
    return _current_in(store, rules, project)


def strong(store: Store, project: ProjectKeys) -> list[tuple[Rule, MemoryNode]]:
    """The rules of ``project`` with evidence enough to open every session, the best evidenced first."""
    rules = sorted((r for r in read_rules(store).values() if r.evidence >= STRONG), key=lambda r: (-r.evidence, r.key))
    return _current_in(store, rules, project)


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


def close_session(store: Store, session_id: str, events: list[dict[str, Any]]) -> list[str]:
    """Record a suppression for each rule the session was given whose failure did not come after:
    the rule was there, and the failure was not. Returns their keys."""
    rules = read_rules(store)
    given: dict[str, int] = {}
    for position, event in enumerate(events):
        summary = event.get("summary")
        for key in summary.get("rules_given", ()) if isinstance(summary, dict) else ():
            given.setdefault(key, position)
    kept = []
    for key, position in given.items():
        signature = rules[key].trigger.get("signature") if key in rules else None
        failures = [
            e for e in events[position:] if ((e.get("summary") or {}).get("step") or {}).get("failure") == signature
        ]
        if signature and not failures:
            kept.append(key)
    if kept:
        note(store, "suppression", kept, session_id)
    return kept


# ---------------------------------------------------------------- listing


def listing(store: Store) -> list[dict[str, Any]]:
    """``cclg rules``: every rule with its evidence and the memory that states it now (the current
    one, else the last one, with its status: a forgotten rule shows as forgotten), best evidenced first."""
    from cclg.index import open_index
    from cclg.records import MemoryNode

    found = sorted(read_rules(store).values(), key=lambda r: (-r.evidence, r.key))
    index = open_index(store)
    try:
        listed = []
        for rule in found:
            row = index.db.execute(
                "SELECT record FROM nodes WHERE key = ? ORDER BY current DESC, updated DESC, id LIMIT 1", (rule.key,)
            ).fetchone()
            node = MemoryNode.from_dict(json.loads(row[0]), where="index") if row else None
            listed.append(
                {
                    **rule.to_dict(),
                    "project": node.scope.project if node else rule.project,  # where it applies now
                    "evidence": rule.evidence,
                    "id": node.id if node else None,
                    "status": node.status if node else "missing",
                    "trust": node.metadata.get("trust") if node else None,
                    "content": node.content if node else "",
                }
            )
        return listed
    finally:
        index.close()
