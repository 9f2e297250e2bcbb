"""The pages of the web view: each reads the store through ``cclg.api`` and returns its title and body.

A page is a function of the open store and the request's plain values (``Form``: the query string,
and the CSRF token every form carries). Nothing here writes: the corrections are ``cclg.ui.app``'s
POST routes, each one library call. Every stored string reaches the page through ``cclg.ui.html``,
which escapes it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cclg import api
from cclg import format as fmt
from cclg.api import learning
from cclg.api import surfaces as labels_vocab
from cclg.core.ids import is_valid_id
from cclg.ui.html import (
    Markup,
    definitions,
    h,
    hidden,
    href,
    join,
    lineage_svg,
    memory_link,
    options,
    session_link,
    table,
)

if TYPE_CHECKING:
    from cclg.core.records import MemoryNode

PAGE_SIZE = 50


@dataclass
class Form:
    """What a page reads from its request: the query values and the CSRF token its forms carry."""

    query: Mapping[str, str]
    csrf: str
    notice: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def get(self, name: str) -> str:
        return str(self.query.get(name, "")).strip()


def status_badge(status: object) -> Markup:
    return h('<span class="status status-$s">$s</span>', s=status)


def short(text: object, most: int = 160) -> str:
    value = str(text or "")
    return value if len(value) <= most else value[: most - 1] + "…"


# ---------------------------------------------------------------- the overview


class DoctorCache:
    """``cclg doctor``'s last report for the overview, checked in a thread so no page waits for a
    whole-store check (a large store takes seconds); ``/doctor`` starts another."""

    def __init__(self) -> None:
        self.report: Any = None
        self.at: float | None = None
        self.running = False
        self.lock = threading.Lock()

    def refresh(self, store: api.Store) -> None:
        with self.lock:
            if self.running:
                return
            self.running = True
        threading.Thread(target=self._run, args=(store,), daemon=True).start()

    def _run(self, store: api.Store) -> None:
        try:
            self.report, self.at = api.diagnose(store), time.time()
        finally:
            self.running = False


def overview(store: api.Store, form: Form, doctor: DoctorCache) -> tuple[str, Markup]:
    counts = api.memory_counts(store)
    columns = []
    for name, title in (("status", "Memories by status (every version)"), ("type", "Current memories by type"),
                        ("project", "Current memories by project")):  # fmt: skip
        rows = [(_count_link(name, value), count) for value, count in counts[name].items()]
        columns.append(h("<div><h2>$t</h2>$table</div>", t=title, table=table((name, "memories"), rows)))
    parts = [h("<p>Store <code>$root</code></p>", root=store.root), h('<div class="counts">$c</div>', c=join(columns))]
    conflicts = api.list_memories(store, {"status": "conflict_pending"}, limit=20)["memories"]
    parts.append(h("<h2>Open conflicts</h2>"))
    parts.append(_memory_rows(conflicts) if conflicts else h("<p>No memory waits for a decision.</p>"))
    parts.append(_doctor_section(doctor))
    sessions = learning.list_sessions(store, limit=10)
    parts.append(h("<h2>Last sessions</h2>"))
    parts.append(_session_rows(sessions) if sessions else h("<p>No session has been recorded yet.</p>"))
    return "Overview", join(parts)


def _count_link(name: str, value: str) -> Markup:
    if name == "project" and not value:
        return h("<em>no project</em>")
    return h('<a href="$u">$v</a>', u=href("memories", **{name: value}), v=value)


def _doctor_section(doctor: DoctorCache) -> Markup:
    title = h('<h2>Doctor <a href="$u">(check again)</a></h2>', u=href("doctor"))
    if doctor.report is None:
        return title + h("<p>Checking the store… reload in a moment.</p>")
    at = time.strftime("%H:%M:%S", time.localtime(doctor.at or 0))
    return title + h("<p>Checked at $at.</p>", at=at) + findings(doctor.report)


def findings(report: Any) -> Markup:
    rows = [("finding", f.check, f.path, f.message) for f in report.findings]
    rows += [("notice", f.check, f.path, f.message) for f in report.notices]
    if not rows:
        return h("<p>No findings: the store is sound.</p>")
    return table(("kind", "check", "where", "what"), rows)


def doctor_page(store: api.Store, form: Form, doctor: DoctorCache) -> tuple[str, Markup]:
    """Starts a new check in the background (a whole-store check takes seconds on a large store: no
    request waits for it) and shows the last report, saying when the new one is still running."""
    doctor.refresh(store)
    running = h("<p>A new check is running: reload to see it.</p>") if doctor.running else h("")
    if doctor.report is None:
        return "Doctor", running
    at = time.strftime("%H:%M:%S", time.localtime(doctor.at or 0))
    return "Doctor", running + h("<p>Last checked at $at.</p>", at=at) + findings(doctor.report)


def _session_rows(sessions: list[dict[str, Any]]) -> Markup:
    rows = [
        (session_link(s["id"]), s.get("agent"), s.get("project"), s.get("started_at"), s.get("ended_at") or "running")
        for s in sessions
    ]
    return table(("session", "agent", "project", "started", "ended"), rows)


# ---------------------------------------------------------------- memories


def _memory_rows(nodes: list[MemoryNode], why: Mapping[str, str] | None = None) -> Markup:
    rows = []
    for n in nodes:
        row: list[object] = [memory_link(n.id), status_badge(n.status), n.type, short(n.content)]
        row += [n.scope.project or "", n.metadata.get("trust", ""), " ".join(n.tags)]
        if why is not None:
            row.append(h('<span class="why">$w</span>', w=why.get(n.id, "")))
        rows.append(row)
    headers = ["id", "status", "type", "content", "project", "trust", "tags"] + (["why"] if why is not None else [])
    return table(headers, rows)


def memories(store: api.Store, form: Form) -> tuple[str, Markup]:
    filters = {name: form.get(name) for name in api.LIST_FILTERS}
    before = form.get("before")
    page = api.list_memories(store, filters, before=int(before) if before.isdigit() else None, limit=PAGE_SIZE)
    parts = [_search_form(form), _filter_form(filters)]
    if form.get("q"):
        parts.append(_search_results(store, form.get("q")))
    parts.append(h("<h2>Memories</h2>"))
    parts.append(_memory_rows(page["memories"]) if page["memories"] else h("<p>No memory matches.</p>"))
    if page["next"] is not None:
        parts.append(h('<p><a href="$u" id="next-page">next page</a></p>', u=href("memories", **filters,
                                                                                    before=page["next"])))  # fmt: skip
    return "Memories", join(parts)


def _search_form(form: Form) -> Markup:
    return h(
        '<form method="get" action="/memories" class="filters"><label for="q">Search with the pack</label> '
        '<input type="text" name="q" id="q" value="$q"> <button type="submit" id="search">Search</button></form>',
        q=form.get("q"),
    )


def _filter_form(filters: Mapping[str, str]) -> Markup:
    selects = [
        options("status", fmt.NODE_STATUSES, filters.get("status"), blank="current"),
        options("type", fmt.NODE_TYPES, filters.get("type")),
        options("scope", api.LIST_SCOPES, filters.get("scope")),
        options("trust", labels_vocab.TRUST, filters.get("trust")),
    ]
    texts = join(
        h('<label>$n <input type="text" name="$n" value="$v" size="12"></label> ', n=name, v=filters.get(name, ""))
        for name in ("project", "tag")
    )
    return h(
        '<form method="get" action="/memories" class="filters">$s $t<button type="submit">Filter</button></form>',
        s=join(selects),
        t=texts,
    )


def _search_results(store: api.Store, query: str) -> Markup:
    """The pack the agent would be given for ``query``, with why each memory is in and why the runners-up
    stayed out (``explain_pack``), as ``cclg pack --explain`` says it."""
    explained = api.explain_pack(store, api.PackRequest(query))
    given = explained["pack"]["memory_nodes"]
    rows = [(memory_link(e["id"]), status_badge(e.get("status")), short(e.get("content")), e.get("why")) for e in given]
    out = [(memory_link(e["id"]), status_badge(e.get("status")), short(e.get("content")), e.get("why_not"))
           for e in explained["left_out"]]  # fmt: skip
    parts = [h("<h2>The pack for “$q”</h2>", q=query)]
    parts.append(table(("id", "status", "content", "why it is in"), rows) if rows else h("<p>Nothing is given.</p>"))
    retired = explained["pack"].get("suppressed_nodes", [])
    if retired:
        parts.append(h("<p>Listed as no longer true: $ids</p>", ids=join((memory_link(r["id"]) for r in retired), " ")))
    if out:
        parts.append(h("<h2>Left out</h2>") + table(("id", "status", "content", "why not"), out))
    return h('<section id="pack">$p</section>', p=join(parts))


def memory(store: api.Store, form: Form, memory_id: str) -> tuple[str, Markup]:
    node = api.show(store, memory_id)
    cited = api.cite(store, node.id)
    labels = {k: node.metadata.get(k, "") for k in ("trust", "sensitivity", "retention")}
    facts: dict[str, object] = {"status": status_badge(node.status), "type": node.type, "key": node.key or ""}
    facts |= {"scope": ", ".join(f"{k} {v}" for k, v in node.scope.to_dict().items() if v)}
    facts |= {**labels, "tags": " ".join(node.tags), "confidence": node.confidence, "created": node.created_at}
    parts = [h('<div class="content" id="content">$c</div>', c=node.content), _lineage(store, node.id)]
    parts += [h("<h2>Labels</h2>"), definitions(facts), _provenance(cited)]
    usage = learning.usage_of(store, node.id)
    parts.append(h("<h2>Usage</h2><p>Delivered to $d finished sessions: used in $u, ignored in $i.</p>",
                   d=usage["delivered"], u=usage["used"], i=usage["ignored"]))  # fmt: skip
    parts.append(_correction_forms(node, form.csrf))
    return node.id, join(parts)


def _provenance(cited: Mapping[str, Any]) -> Markup:
    source = cited.get("source", {})
    items = {"source": source.get("label", ""), "quote": source.get("quote") or ""}
    sessions = source.get("session_ids") or []
    if sessions:
        items["sessions"] = join((session_link(s) for s in sessions), " ")
    parts = [h("<h2>Provenance</h2>"), definitions(items)]
    for span in cited.get("raw_spans", []):
        where = f"{span.get('source_id')} characters {span.get('char_start')}–{span.get('char_end')}"
        text, binary = span.get("text"), span.get("binary")
        if binary is not None:  # named, never shown: a screenshot's bytes are no text
            what = f"{binary['mime']}, {binary['bytes']:,} bytes, sha256 {binary['sha256']}"
            parts.append(h("<p>Binary raw evidence raw/$n ($w), not shown.</p>", n=binary["raw"], w=what))
        elif text is not None:
            parts.append(h('<p>Raw evidence, $w:</p><pre class="content raw-span">$t</pre>', w=where, t=text))
        else:
            parts.append(h("<p>Raw evidence $w is no longer in the store.</p>", w=where))
    return join(parts)


def _lineage(store: api.Store, memory_id: str) -> Markup:
    lineage = api.memory_lineage(store, memory_id)
    members = {m["id"] for m in lineage.get("members", [])}
    rows = [
        (s["patch"], s["operation"] + (" (undone)" if s.get("undone") else ""), s.get("created_at"),
         _linked(s.get("targets", []), members), _linked(s.get("new", []), members), s.get("reason"))
        for s in lineage.get("steps", [])
    ]  # fmt: skip
    return h(
        '<section id="lineage"><h2>Lineage</h2>$svg$t</section>',
        svg=lineage_svg(lineage, memory_id),
        t=table(("patch", "operation", "when", "from", "made", "reason"), rows),
    )


def _linked(ids: list[str], members: set[str]) -> Markup:
    """Links to the ids of the chain's members; the others (the rest of an import's create) as a count."""
    shown = [i for i in ids if i in members]
    rest = len(ids) - len(shown)
    more = h(" and $n more", n=rest) if rest else Markup("")
    return join((memory_link(i) for i in shown), " ") + more


def _correction_forms(node: MemoryNode, csrf: str) -> Markup:
    def action(verb: str) -> Markup:
        return href(f"memory:{node.id}", verb)

    token = hidden("csrf", csrf)
    ops = options("operation", ("supersede", "refine", "expand", "narrow"), "supersede", blank="choose")
    label_selects = join(
        options(name, choices, None, blank="keep")
        for name, choices in (("trust", labels_vocab.TRUST), ("sensitivity", labels_vocab.SENSITIVITY),
                              ("retention", labels_vocab.RETENTION))
    )  # fmt: skip
    forms = [
        h('<fieldset><legend>Change what it says</legend><form method="post" action="$a" id="form-patch">$t$o'
          '<textarea name="content" id="new-content" required>$c</textarea><label>Reason <input type="text" '
          'name="reason" id="patch-reason" required></label> <button type="submit">Write the patch</button>'
          "</form></fieldset>", a=action("patch"), t=token, o=ops, c=node.content),
        h('<fieldset><legend>Labels</legend><form method="post" action="$a" id="form-label">$t$s<label>Reason '
          '<input type="text" name="reason" required></label> <button type="submit">Label</button></form>'
          "</fieldset>", a=action("label"), t=token, s=label_selects),
        h('<fieldset><legend>Forget</legend><form method="post" action="$a" id="form-forget">$t<label>Reason '
          '<input type="text" name="reason" id="forget-reason" required></label> <button type="submit" '
          'id="forget">Forget</button></form></fieldset>', a=action("forget"), t=token),
    ]  # fmt: skip
    if node.status == "active_session":
        forms.append(h('<fieldset><legend>Promote</legend><form method="post" action="$a">$t<label>Reason <input '
                       'type="text" name="reason" required></label> <button type="submit">Promote</button></form>'
                       "</fieldset>", a=action("promote"), t=token))  # fmt: skip
    if node.status == "conflict_pending":
        forms.append(_resolve_form(node, action("resolve"), token))
    forms.append(
        h(
            '<fieldset><legend>Purge: erase its content for good</legend><form method="post" action="$a" '
            'id="form-purge">$t<label>Type the id <code>$id</code> to confirm <input type="text" name="confirm" '
            'required></label> <label>Reason <input type="text" name="reason" required></label> '
            '<button type="submit">Purge</button></form></fieldset>',
            a=action("purge"),
            t=token,
            id=node.id,
        )
    )
    return h("<h2>Correct it</h2>") + join(forms)


def _resolve_form(node: MemoryNode, action: Markup, token: Markup) -> Markup:
    others = " ".join(node.relations.get("contradicts", []))
    return h(
        '<fieldset><legend>Resolve the conflict</legend><form method="post" action="$a">$t<label>The other '
        'memories in conflict (ids) <input type="text" name="others" value="$o"></label><textarea name="content" '
        'required></textarea><label>Reason <input type="text" name="reason" required></label> <button '
        'type="submit">Resolve</button></form></fieldset>',
        a=action,
        t=token,
        o=others,
    )


# ---------------------------------------------------------------- sessions, rules, code


def sessions(store: api.Store, form: Form) -> tuple[str, Markup]:
    found = learning.list_sessions(store, limit=200)
    return "Sessions", _session_rows(found) if found else h("<p>No session has been recorded yet.</p>")


def session(store: api.Store, form: Form, session_id: str) -> tuple[str, Markup]:
    timeline = learning.session_timeline(store, session_id)
    record = timeline["session"]
    facts = {k: record.get(k) or "" for k in ("agent", "project", "workspace", "branch_name", "started_at", "ended_at")}
    facts["overlay memories"] = join((memory_link(i) for i in record.get("session_overlay_ids", [])), " ")
    parts = [definitions(facts), h("<h2>Timeline</h2>")]
    parts += [_event(e) for e in timeline["events"]] or [h("<p>No event recorded.</p>")]
    return f"Session {session_id}", join(parts)


_EVENT_LISTS = (  # what an event's summary names, and how the page titles it
    ("loaded_memory_ids", "the pack gave"),
    ("listed_retired_ids", "listed as no longer true"),
    ("offered_related_ids", "offered as possibly related"),
)


def _event(event: Mapping[str, Any]) -> Markup:
    given = event.get("summary", event.get("payload"))  # what the hook kept of it, else the payload itself
    payload: dict[str, Any] = given if isinstance(given, dict) else {}
    kind = str(event.get("event", ""))
    items: dict[str, object] = {}
    for name in ("prompt", "source", "trigger", "tool_name", "tool_input", "reason", "compact_summary"):
        if payload.get(name):
            items[name] = short(payload[name], 600)
    for name, title in _EVENT_LISTS:
        if name == "loaded_memory_ids" and "compact" in kind:
            title = "given before the compaction"
        ids = payload.get(name)
        if isinstance(ids, list) and ids:
            items[title] = join((memory_link(i) for i in ids), " ")
    reasons = payload.get("why")
    if isinstance(reasons, dict) and reasons:  # as the pack said it when it was given
        items["why, then"] = join(h("<div>$l $w</div>", l=memory_link(i), w=short(w, 200)) for i, w in reasons.items())
    if payload.get("prompt"):
        now = href("memories", q=payload["prompt"])
        items["why, now"] = h('<a href="$u">explain this prompt\'s pack now</a>', u=now)
    step = payload.get("step")
    if isinstance(step, dict) and step.get("signals"):
        items["sensors"] = short(json.dumps(step["signals"], ensure_ascii=False), 600)
    if payload.get("rules_given"):
        items["rules given"] = " ".join(str(r) for r in payload["rules_given"])
    if payload.get("recent_prompts"):
        items["recent prompts"] = " · ".join(short(p, 200) for p in payload["recent_prompts"])
    if payload.get("previous_turn_given"):
        items["previous turn"] = "given"
    if isinstance(payload.get("turn"), dict):
        items["turn record"] = short(json.dumps(payload["turn"], ensure_ascii=False), 600)
    if payload.get("tokens"):
        items["tokens added"] = payload["tokens"]
    return h('<div class="event"><b>$k</b> <span class="why">$at</span>$d</div>', k=kind,
             at=event.get("created_at", ""), d=definitions(items))  # fmt: skip


def rules(store: api.Store, form: Form) -> tuple[str, Markup]:
    found = learning.list_rules(store)
    rows = [
        (memory_link(r["id"]) if r.get("id") else "", status_badge(r.get("status")), r.get("project") or "",
         short(r.get("content"), 400), _evidence(r), "yes" if r["session_start"] else "no")
        for r in found
    ]  # fmt: skip
    head = h(
        "<p>Rules are learned from failures a session got out of; each is a memory, corrected like any other. "
        "The sensors (burn, clock, pain, reach, loop) speak in the sessions' timelines, with the rules they gave.</p>"
    )
    body = (
        table(("memory", "status", "project", "rule", "evidence", "opens sessions"), rows)
        if rows
        else h("<p>No rule has been learned yet.</p>")
    )
    return "Rules and sensors", head + body


def _evidence(rule: Mapping[str, Any]) -> Markup:
    counts = {k: rule.get(k, 0) for k in ("learned", "detection", "suppression", "delivered")}
    trigger = rule.get("trigger") or {}
    items: dict[str, object] = {"evidence": rule.get("evidence"), **counts}
    items |= {f"trigger {k}": short(v if isinstance(v, str) else json.dumps(v), 200) for k, v in trigger.items()}
    return definitions(items)


def code(store: api.Store, form: Form) -> tuple[str, Markup]:
    repo, query = form.get("repo"), form.get("q")
    parts = [
        h(
            '<form method="get" action="/code" class="filters"><label>Repository <input type="text" name="repo" '
            'value="$r"></label> <label>Task <input type="text" name="q" value="$q"></label> <button '
            'type="submit">Rank files</button></form>',
            r=repo,
            q=query,
        )
    ]
    if repo and query:
        found = api.code_search(store, query, repo)
        rows = [(f.get("path"), f.get("score"), _signals(f)) for f in found["files"]]
        parts.append(h("<p>In <code>$root</code>:</p>", root=found["root"]))
        parts.append(table(("file", "score", "what each signal added"), rows) if rows else h("<p>No file.</p>"))
        if found.get("note"):
            parts.append(h("<p>$n</p>", n=found["note"]))
    return "Code", join(parts)


def _signals(ranked: Mapping[str, Any]) -> Markup:
    shown = {k: v for k, v in ranked.items() if k not in ("path", "score")}
    return h("<code>$s</code>", s=short(json.dumps(shown, ensure_ascii=False, default=str), 500))


def valid_memory_id(text: str) -> bool:
    return is_valid_id(text, "mem")
