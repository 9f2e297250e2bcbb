"""Real erasure: ``cclg purge ID`` takes one memory's content out of every file of the store.

A ``forget`` retires a memory and keeps its text: in its node file, in the patch that wrote
it (``new_content``), in the session logs and raw evidence of the prompt that said it, in the
audit log, the search index (rows, FTS tables, free pages, WAL) and the vectors. A purge
erases it from all of them, under the store lock, in this order:

1. **The purge patch** (the commit point). A ``forget`` patch marked
   ``resolution_policy.rule = "purge"`` (``cclg.ledger.writer.is_purge``) is written durably and the
   memory set to ``forgotten``, as any forget does. From here on the content is refused by
   ``cclg add`` and ``import-jsonl`` (it is forgotten), and ``cclg rollback`` refuses to undo the
   purge or any patch that touched the memory (``cclg.ledger.undo``): nothing could be restored.
2. **Every other file** that holds the text verbatim is rewritten without it, one atomic write
   each (``cclg.ledger.redaction.rewrite_store``, the machinery ``scan --store --redact`` runs on), in
   its content only (``cclg.ledger.redaction.CONTENT_FIELDS``): patches, sessions and logs get
   ``[purged]`` in its place inside those string values, and their ids, statuses, operations,
   schema ids and keys keep their bytes, whatever the text is (``active``, another memory's id,
   ``", "``); raw evidence gets a marker of the same length (``[purged----]``), so raw spans
   still point at the right characters; a code graph holding it is deleted (a cache that
   ``cclg code-index`` builds again). A rule's trigger in the rule evidence is blanked too.
3. **The tombstone.** The memory's own node file is written last: its content becomes
   ``[purged]`` (``ledger.PURGED_CONTENT``), its source quote goes, its retrieval keys and
   ``metadata.content_hash`` follow the marker, and ``metadata.purged`` keeps the one thing left
   of the content, its ``sha256:`` hash, with the purge patch and time. ``cclg.intake.new_memories`` finds
   tombstones by the marker's hash and refuses the content they stand for, also after
   ``cclg reindex`` (the tombstone is a file; the index is rebuilt from the files).
4. **The projections.** The search index and the vectors are deleted, the index is rebuilt
   from the files and compacted (``VACUUM``), and a ``node_purged`` audit record (the memory,
   the patch, the content hash, how many files of each folder were rewritten) says the purge
   is complete.

Why a tombstone and not a deleted file: patches, edges and other memories name the memory,
and a store must still load in a reader that knows nothing of purges (the reference
implementation, a ``.cclg`` container). Every record stays plain ``cclg.format.v0.1``: a
``forget`` patch, a ``forgotten`` memory whose content is ``[purged]`` and whose metadata (a
free map) holds the hash. Such a reader sees a forgotten memory, which is what it is.

Interrupted (killed, a full disk), a purge leaves a consistent store: the memory is forgotten
(step 1) and its text stays in its own node file until step 3, so running ``cclg purge ID``
again finds the purge patch and finishes (step 2 only rewrites what still holds the text),
and so does ``cclg doctor --repair``; ``cclg doctor`` reports a purge without its
``node_purged`` record or its tombstone (``findings``). Purging a purged memory again does
nothing.

Only this memory's content is erased. Other memories are never changed, not even the versions
before or after it in its lineage, nor a memory holding the same text: their node files and
the ``new_content`` of the patches that wrote them keep it, and they are listed as
``held_elsewhere``, to be purged one by one. The text is matched as written, NFC with ``\\n``
newlines, with ``\\r\\n``, trimmed, and JSON-escaped, as a whole (never inside a longer ASCII
word); its key, tags, scope and source pointers stay (they say what it was about, not what it
said). A writer that does not take the store lock (a hook recording a prompt that repeats the
text while the purge runs) can still write it again.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable
from typing import Any

from cclg.core import secrets
from cclg.core.fields import parse_json
from cclg.core.ids import content_hash, new_id, normalize_text, now_iso
from cclg.core.records import (
    QUESTIONS,
    MemoryNode,
    MemoryPatch,
    Record,
    Source,
    default_resolution_policy,
    dumps,
    retrieval_for,
)
from cclg.core.store import RULE_EVIDENCE, Store, audit_record
from cclg.errors import CclgError, IllegalPatchError, UsageError
from cclg.ledger import staging
from cclg.ledger.index import IndexChanges, healing
from cclg.ledger.redaction import content_only, raw_rewritten, rebuild_projections, rewrite_store
from cclg.ledger.writer import (
    PURGE_RULE,
    PURGED,
    PURGED_CONTENT,
    foreign_patch,
    is_purge,
    patch_audit,
    purge_patches,
    purged_hash,
    readable_nodes,
    set_status,
)

DEFAULT_REASON = "purged at the user's request"
PURGED_EVENT = "node_purged"  # the audit record of a finished purge


class PurgeResult(Record):
    """What ``purge_memory`` did: ``status`` is ``purged``, ``finished`` (an interrupted purge run again) or
    ``already purged``; ``files`` lists each file rewritten ({file, action}); ``held_elsewhere`` names the
    other memories whose own records hold the same text (left as they are)."""

    def __init__(
        self,
        memory_id: str,
        patch_id: str,
        digest: str,
        status: str,
        files: list[dict[str, Any]] | None = None,
        held_elsewhere: list[str] | None = None,
    ) -> None:
        self.memory_id = memory_id
        self.patch_id = patch_id
        self.content_hash = digest
        self.status = status
        self.files = [] if files is None else files
        self.held_elsewhere = [] if held_elsewhere is None else held_elsewhere

    def counts(self) -> dict[str, int]:
        """How many files of each folder were rewritten (code graphs removed count as ``codegraphs``)."""
        counts: dict[str, int] = {}
        for entry in self.files:
            folder = "codegraphs" if entry["action"] == "removed" else entry["file"].split("/")[0]
            if entry["action"] != "rebuilt":  # the projections: all rebuilt, whatever they held
                counts[folder] = counts.get(folder, 0) + 1
        return dict(sorted(counts.items()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "memory_id": self.memory_id,
            "patch_id": self.patch_id,
            "status": self.status,
            "content_hash": self.content_hash,
            "erased": self.counts(),
            "files": self.files,
            "rebuilt": [] if self.status == "already purged" else ["index.sqlite"],  # and semantic.sqlite dropped
            "held_elsewhere": self.held_elsewhere,
        }


def purge_memory(store: Store, memory_id: str, *, reason: str = DEFAULT_REASON, source: str = "manual") -> PurgeResult:
    """``cclg purge``: erase the content of the memory ``memory_id`` from every file of the store and its
    indexes, leaving a tombstone that keeps only the content's hash (see the module docstring).

    Run again on a memory whose purge was interrupted, it finishes it; on a purged memory, it does
    nothing (``status = "already purged"``). ``NotFoundError`` for an unknown id, before anything
    is written; ``reason`` goes into the purge patch (secrets are refused, as in every patch)."""
    if not reason.strip():
        raise UsageError("a purge needs a reason")
    secrets.refuse_secrets({"reason": reason, "source": source}, "the purge")
    with store.lock():
        staging.finish(store)  # an import a crash interrupted: its records are the store's too
        node = store.read_node(memory_id)
        patch = _standing_purge(store, node)
        kept = purged_hash(node)
        if patch is not None and kept is not None and patch.id in _completed(store):
            return PurgeResult(node.id, patch.id, kept, "already purged")
        if patch is None and kept is not None:
            raise IllegalPatchError(
                f"{node.id} is a purge tombstone whose purge patch is missing; run `cclg doctor` and restore it"
            )
        status = "purged" if patch is None else "finished"
        patch = patch or _write_purge_patch(store, node, reason, source)
        digest = kept or content_hash(node.content)
        files, elsewhere = ([], []) if kept is not None else _erase(store, node, patch)
        rebuild_projections(store)
        result = PurgeResult(node.id, patch.id, digest, status, files, elsewhere)
        counts = result.counts()
        done = audit_record(PURGED_EVENT, node_id=node.id, patch_id=patch.id, content_hash=digest, files=counts)
        store.audit_many([done, *raw_rewritten(store, files)])
    return result


def _standing_purge(store: Store, node: MemoryNode) -> MemoryPatch | None:
    """The purge patch of ``node`` already on disk (an interrupted or finished purge), or None."""
    mark = node.metadata.get(PURGED)
    ids = [mark["patch_id"]] if isinstance(mark, dict) and isinstance(mark.get("patch_id"), str) else []
    ids += healing(store, lambda index: index.patches_targeting(node.id))
    for patch_id in ids:
        with contextlib.suppress(CclgError):
            patch = store.read_patch(patch_id)
            if is_purge(patch) and node.id in patch.target_ids:
                return patch
    return None


def _write_purge_patch(store: Store, node: MemoryNode, reason: str, source: str) -> MemoryPatch:
    """Step 1: the purge's ``forget`` patch, then the memory's status, as the ledger writes a forget."""
    stamp = now_iso()
    patch = MemoryPatch(
        id=new_id("patch"),
        operation="forget",
        target_ids=[node.id],
        new_node_ids=[],
        reason=reason,
        new_content=None,
        source=Source(label=source),
        confidence=1.0,
        resolution_policy={**default_resolution_policy(), "rule": PURGE_RULE},
        prior_states={node.id: node.status},
        created_at=stamp,
        applied_at=stamp,
    )
    store.write_patch(patch)  # durable: the commit point of the purge
    set_status(node, "forgotten", stamp)
    store.write_node(node)
    status = audit_record("node_status_changed", node_id=node.id, status=node.status, patch_id=patch.id)
    store.audit_many([patch_audit(patch, rule=PURGE_RULE), status])  # the rule: doctor knows raw files may change
    IndexChanges(store).changed([node.id], [patch.id])
    return patch


def _erase(store: Store, node: MemoryNode, patch: MemoryPatch) -> tuple[list[dict[str, Any]], list[str]]:
    """Steps 2 and 3: every other file without the text, then the tombstone. Returns the files rewritten
    and the other memories that hold the text."""
    erasure = _Erasure(node.content, node.id, _rule_stated_alone(store, node))
    own = store.relative(store.node_path(node.id))
    files = rewrite_store(store, erasure, skip={own})
    store.write_node(_tombstone(node, patch.id, erasure))
    files.append({"file": own, "action": erasure.verb})
    return files, sorted(erasure.elsewhere)


def _rule_stated_alone(store: Store, node: MemoryNode) -> str | None:
    """``node``'s key when no other memory holds it: the trigger its rule evidence keeps under that key
    (``cclg.learning.rules``: what the rule was learned from) is the memory's substance, and goes with it."""
    if node.key is None:
        return None
    key = node.key
    return None if healing(store, lambda index: index.holds_key(key, besides=node.id)) else key


def _tombstone(node: MemoryNode, patch_id: str, erasure: _Erasure) -> MemoryNode:
    """``node`` with its content erased: the marker, its hash, and the erased content's hash in
    ``metadata.purged``. Its key, scope and source pointers stay (what it was about, not what it said)."""
    stamp = now_iso()
    digest = content_hash(node.content)
    set_status(node, "forgotten", stamp)
    node.content = PURGED_CONTENT
    node.tags = erasure.strings(node.tags)
    node.source.quote = None  # the words the memory rested on
    node.retrieval = retrieval_for(PURGED_CONTENT)
    node.metadata = content_only(node.metadata, erasure.strings(node.metadata))
    node.metadata.pop(QUESTIONS, None)  # what it answered is what it said
    node.metadata["content_hash"] = content_hash(PURGED_CONTENT)
    node.metadata[PURGED] = {"content_hash": digest, "patch_id": patch_id, "purged_at": stamp}
    return node


def preview(node: MemoryNode, chars: int = 60) -> str:
    """The start of a memory's content on one line, for a confirmation prompt."""
    text = " ".join(node.content.split())
    return text if len(text) <= chars else text[: chars - 1] + "…"


# ---------------------------------------------------------------- what the text looks like in a file

_WORD = "A-Za-z0-9_"  # an ASCII word character: a match never starts or ends inside an ASCII word


class _Erasure:
    """The ``cclg.ledger.redaction.Rewrite`` of a purge: every form of one memory's text, replaced by the marker
    in content (``cclg.ledger.redaction.CONTENT_FIELDS``); and, for a rule, its trigger in the rule evidence."""

    verb = "erased"

    def __init__(self, text: str, node_id: str, rule_key: str | None = None) -> None:
        self.node_id = node_id
        self.rule_key = rule_key  # a rule's key whose trigger goes too (no other memory states the rule)
        forms = _forms(text)
        self.needles = [form.encode("utf-8") for form in forms]
        if rule_key is not None:
            self.needles.append(json.dumps(rule_key).encode("utf-8"))
        self.pattern = re.compile("|".join(_bounded(form) for form in forms))
        self.elsewhere: set[str] = set()  # other memories whose records hold the text

    def found(self, data: bytes) -> dict[str, Any] | None:
        return {} if any(needle in data for needle in self.needles) else None

    def text(self, data: bytes) -> bytes:
        text = data.decode("utf-8", "surrogateescape")  # bytes that are no UTF-8 are kept as they are
        return self.pattern.sub(lambda m: _filler(len(m.group())), text).encode("utf-8", "surrogateescape")

    def strings(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.pattern.sub(PURGED_CONTENT, value)
        if isinstance(value, list):
            return [self.strings(item) for item in value]
        if isinstance(value, dict):
            return {key: self.strings(item) for key, item in value.items()}
        return value

    def record(self, relative: str, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        if relative.startswith("nodes/") and value.get("id") != self.node_id:
            if self.pattern.search(json.dumps(value.get("content"), ensure_ascii=False)):
                self.elsewhere.add(str(value.get("id")))
            return value  # another memory: its own text, never changed here
        new = content_only(value, self.strings(value))
        if relative.startswith("patches/") and "new_content" in value:
            wrote = value.get("new_node_ids")
            if not (isinstance(wrote, list) and self.node_id in wrote):  # it wrote other memories: their content
                new["new_content"] = value["new_content"]
        if relative == RULE_EVIDENCE and self.rule_key is not None and value.get("rule") == self.rule_key:
            new = {**new, "trigger": _blanked(new.get("trigger"))} if "trigger" in new else new
        return new


def _blanked(value: Any) -> Any:
    """Every string of ``value`` replaced by the marker (a purged rule's trigger: what it was learned from)."""
    if isinstance(value, dict):
        return {key: _blanked(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_blanked(item) for item in value]
    return PURGED_CONTENT if isinstance(value, str) else value


def _forms(text: str) -> list[str]:
    """The forms ``text`` may be held in: as written, NFC with ``\\n`` newlines, with ``\\r\\n``, trimmed,
    and each JSON-escaped (non-ASCII kept or escaped), longest first."""
    forms = {text, text.strip(), normalize_text(text), normalize_text(text).strip()}
    forms |= {normalize_text(form).replace("\n", "\r\n") for form in forms if "\n" in form}
    forms |= {json.dumps(form, ensure_ascii=ascii)[1:-1] for form in list(forms) for ascii in (False, True)}
    return sorted((form for form in forms if form.strip()), key=lambda form: (-len(form), form))


def _bounded(form: str) -> str:
    """A pattern for ``form`` as a whole: not inside a longer ASCII word, nor right after a backslash (in
    JSON text that would cut an escape in two); after an escaped newline or tab it may start."""
    start = rf"(?:(?<![{_WORD}\\])|(?<=\\[nrt]))" if re.match(f"[{_WORD}]", form) else r"(?<!\\)"
    end = f"(?![{_WORD}])" if re.match(f"[{_WORD}]", form[-1]) else ""
    return start + re.escape(form) + end


def _filler(length: int) -> str:
    """The marker as long as the text it replaces (``[purged---]``), so positions in the file stay."""
    return "[purged" + "-" * (length - 8) + "]" if length >= 8 else "-" * length


# ---------------------------------------------------------------- interrupted purges (cclg doctor)


Audit = tuple[set[str], set[str]]  # what the audit log says of purges (``_purge_audit``)


def interrupted(store: Store, patches: Iterable[MemoryPatch], audit: Audit | None = None) -> list[tuple[str, str]]:
    """(memory id, purge patch id) of each purge in ``patches`` that did not finish: no ``node_purged``
    audit record, or its memory's file is no tombstone of it (killed mid-way, or restored from a backup).
    A purge an import wrote (``imported_purges``) is none of this store's, so never one to finish.
    Reads the audit log (unless given its ``audit``) only when there is a purge."""
    purges = [patch for patch in patches if is_purge(patch)]
    done, imported = audit or (_purge_audit(store, purges) if purges else (set(), set()))
    found = []
    for patch in purges:
        for node_id in patch.target_ids if patch.id not in imported else ():
            try:
                node = store.read_node(node_id)
            except CclgError:  # gone or unreadable: doctor reports it as such
                continue
            mark = node.metadata.get(PURGED)
            if patch.id not in done or not (isinstance(mark, dict) and mark.get("patch_id") == patch.id):
                found.append((node_id, patch.id))
    return found


def findings(store: Store, patches: Iterable[MemoryPatch]) -> list[tuple[str, str]]:
    """``cclg doctor``'s findings about purges: (file, message) for each purge that did not finish,
    and for each purge another store made that an import wrote as a purge of this one."""
    patches = list(patches)
    purges = [patch for patch in patches if is_purge(patch)]
    audit = _purge_audit(store, purges) if purges else None
    found = [
        (
            f"nodes/{node_id}.json",
            f"the purge {patch_id} did not finish: the content may still be in the store's files or indexes; "
            f"`cclg purge {node_id} --yes` or `cclg doctor --repair` finishes it",
        )
        for node_id, patch_id in interrupted(store, patches, audit)
    ]
    return found + [
        (
            f"nodes/{node_id}.json",
            f"{node_id} was purged in another store, and its purge {patch_id} was imported as a purge of this one "
            "(before imports took a foreign purge as a plain forget), so the content it stood for there is refused "
            "here; `cclg doctor --repair` makes it a plain forget, as an import writes it now: the memory stays "
            "forgotten and every record stays, without the purge mark",
        )
        for node_id, patch_id in imported_purges(store, patches, audit)
    ]


def finish_interrupted(store: Store) -> list[str]:
    """``cclg doctor --repair``: finish every purge that did not; returns what was done (audited)."""
    done = []
    with store.lock():
        for node_id, patch_id in interrupted(store, purge_patches(store)):
            result = purge_memory(store, node_id)
            done.append(f"finished the interrupted purge {patch_id} of {node_id} ({len(result.files)} file(s) erased)")
        if done:
            store.audit("repair_applied", actions=done)
    return done


def _completed(store: Store) -> set[str]:
    """The purge patches a ``node_purged`` audit record says finished (the log read line by line)."""
    return _purge_audit(store)[0]


def _purge_audit(store: Store, purges: Iterable[MemoryPatch] = ()) -> Audit:
    """What the audit log says of purges, read line by line: (the patches a ``node_purged`` record says
    finished, those of ``purges`` whose ``patch_written`` record says an import wrote them). Only the lines
    naming the event or one of ``purges`` are parsed (an import of many patches audits each)."""
    done: set[str] = set()
    imported: set[str] = set()
    finished = f'"{PURGED_EVENT}"'.encode()
    ids = b"|".join(re.escape(f'"{patch.id}"'.encode()) for patch in purges)
    names = re.compile(ids).search if ids else None
    with contextlib.suppress(FileNotFoundError), open(store.audit_path, "rb") as log:
        for line in log:
            if finished not in line and (names is None or names(line) is None):
                continue
            with contextlib.suppress(ValueError):
                record = parse_json(line)
                if not isinstance(record, dict):
                    continue
                if record.get("event") == PURGED_EVENT:
                    done.add(str(record.get("patch_id")))
                elif record.get("event") == "patch_written" and record.get("via") == "import":
                    imported.add(str(record.get("patch_id")))
    return done, imported


# ---------------------------------------------------------------- purges an old import wrote (cclg doctor)

# Before imports took a foreign purge as a plain forget (``cclg.ledger.writer.foreign_patch``), one wrote a
# container's purge patch as it came, and its tombstone with its mark: this store then refused the content
# the tombstone stood for in the other store (any text, for a forged one).


def imported_purges(store: Store, patches: Iterable[MemoryPatch], audit: Audit | None = None) -> list[tuple[str, str]]:
    """(memory id, purge patch id) of each target of a purge in ``patches`` that an import wrote (its
    ``patch_written`` audit record says ``via: import``). Reads the audit log (unless given its ``audit``)
    only when there is a purge."""
    purges = [patch for patch in patches if is_purge(patch)]
    imported = (audit or (_purge_audit(store, purges) if purges else (set(), set())))[1]
    return [(node_id, patch.id) for patch in purges if patch.id in imported for node_id in patch.target_ids]


def settle_imported(store: Store) -> list[str]:
    """``cclg doctor --repair``: write each purge an import wrote (``imported_purges``) as an import writes
    one now, a plain forget: its targets' tombstones lose the mark that names it (each node file first,
    so a repair killed half-way is found again), then the patch its rule ``imported_purge``. Every record
    stays, and the memory stays forgotten; the marks and rules taken away are audited. Returns what was done."""
    done = []
    with store.lock():
        patches = purge_patches(store)
        imported: dict[str, list[str]] = {}
        for node_id, patch_id in imported_purges(store, patches):
            imported.setdefault(patch_id, []).append(node_id)
        for patch in patches:
            targets = imported.get(patch.id, [])
            marks = {}
            for node in readable_nodes(store, targets):
                mark = node.metadata.get(PURGED)
                if isinstance(mark, dict) and mark.get("patch_id") == patch.id:
                    marks[node.id] = node.metadata.pop(PURGED)
                    store.write_node(node)
            if not targets:
                continue
            store.write_file(store.patch_path(patch.id), dumps(foreign_patch(patch).to_dict()))
            IndexChanges(store).changed(targets, [patch.id])
            action = f"made the imported purge {patch.id} a plain forget of {', '.join(targets)} (no purge mark)"
            store.audit("repair_applied", actions=[action], patch_id=patch.id, rule=PURGE_RULE, marks=marks)
            done.append(action)
    return done
