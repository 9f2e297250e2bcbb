"""Records of cclg.format.v0.1: round trips, canonical order, strict parsing, ids, times, hashes."""

from __future__ import annotations

import copy
import hashlib
import json
import re
import time
import types
import unicodedata
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cclg import format as fmt
from cclg.core import ids, records
from cclg.core.ids import FixedClock, content_hash, fixed_clock, is_valid_id, new_id, now_iso
from cclg.core.records import MemoryEdge, MemoryNode, MemoryPatch, Scope, Session, Source, new_node
from cclg.errors import ValidationError

DATA = Path(__file__).parent / "data"
DEMO_STORE = DATA / "reference-demo-store"
CONFORMANCE = Path(__file__).parent / "conformance"

KINDS: dict[str, tuple[str, Any]] = {
    "nodes": ("memory_node", MemoryNode),
    "patches": ("memory_patch", MemoryPatch),
    "edges": ("memory_edge", MemoryEdge),
    "sessions": ("session", Session),
}
REFERENCE_FILES = sorted(
    p.relative_to(DEMO_STORE).as_posix() for folder in KINDS for p in (DEMO_STORE / folder).glob("*.json")
)


def load(relative: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DEMO_STORE / relative).read_text(encoding="utf-8"))
    return data


def reference_node() -> dict[str, Any]:
    return load("nodes/mem_d6caa4a716ff.json")


def reference_patch() -> dict[str, Any]:
    return load("patches/patch_ad5c337890c3.json")


def reference_edge() -> dict[str, Any]:
    return load("edges/edge_abb6b33de5df.json")


def reference_session() -> dict[str, Any]:
    return load("sessions/demo-session.json")


def with_prior_states(patch: dict[str, Any]) -> dict[str, Any]:
    """``patch`` with an empty ``prior_states`` placed after ``resolution_policy``, as cclg writes it."""
    result: dict[str, Any] = {}
    for name, value in patch.items():
        result[name] = value
        if name == "resolution_policy":
            result["prior_states"] = {}
    return result


# ---------------------------------------------------------------- round trips of reference files


def test_reference_files_found() -> None:
    folders = {name.split("/")[0] for name in REFERENCE_FILES}
    assert folders == set(KINDS)
    assert len(REFERENCE_FILES) >= 7


@pytest.mark.parametrize("relative", REFERENCE_FILES)
def test_reference_file_round_trip(relative: str) -> None:
    raw = (DEMO_STORE / relative).read_bytes()
    data = json.loads(raw)
    kind, cls = KINDS[relative.split("/")[0]]
    record = cls.from_dict(data, where=relative)
    out = record.to_dict()
    expected = data
    if kind == "memory_patch" and "prior_states" not in data:
        # The demo store was written by an older reference release, before patches
        # carried prior_states; the reference 0.2.3 writer (and cclg) always write it,
        # right after resolution_policy. Everything else must be reproduced exactly.
        expected = with_prior_states(data)
    assert list(out) == list(expected)
    assert out == expected
    assert records.dumps(out) == records.dumps(expected)
    if expected is data:
        assert records.dumps(out) == raw
    # Parsing what we write gives the same record again.
    assert cls.from_dict(json.loads(records.dumps(out)), where=relative) == record


@pytest.mark.parametrize("relative", REFERENCE_FILES)
def test_dumps_matches_reference_formatting(relative: str) -> None:
    raw = (DEMO_STORE / relative).read_bytes()
    assert records.dumps(json.loads(raw)) == raw


def conformance_records() -> list[tuple[str, str, dict[str, Any]]]:
    """(where, folder, record) for every record line of the valid reference conformance fixtures."""
    found = []
    for path in sorted(CONFORMANCE.glob("0[1-6]_*.cclg")):
        section = None
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if line.startswith("@"):
                section = line[1:]
            elif section is not None and line.strip():
                found.append((f"{path.name}:{number}", section, json.loads(line)))
    return found


CONFORMANCE_RECORDS = conformance_records()


def test_conformance_records_found() -> None:
    assert len(CONFORMANCE_RECORDS) >= 20
    assert {section for _, section, _ in CONFORMANCE_RECORDS} >= {"nodes", "patches", "edges"}
    assert any("prior_states" in data for _, _, data in CONFORMANCE_RECORDS)


@pytest.mark.parametrize(("where", "section", "data"), CONFORMANCE_RECORDS, ids=[w for w, _, _ in CONFORMANCE_RECORDS])
def test_conformance_record_round_trip(where: str, section: str, data: dict[str, Any]) -> None:
    """Records written by the reference 0.2.3 writer (patches with prior_states) round-trip exactly."""
    _, cls = KINDS[section]
    out = cls.from_dict(data, where=where).to_dict()
    assert list(out) == list(data)
    assert out == data


def test_dumps_form() -> None:
    out = records.dumps({"b": "é", "a": [1]})
    assert out == '{\n  "b": "é",\n  "a": [\n    1\n  ]\n}\n'.encode()


# ---------------------------------------------------------------- canonical key order


def test_node_key_order() -> None:
    node = MemoryNode.from_dict(reference_node(), where="nodes/x.json")
    out = node.to_dict()
    assert tuple(out) == fmt.canonical_order("memory_node")
    assert tuple(out["scope"]) == fmt.SCOPE_KEYS
    assert tuple(out["relations"]) == fmt.RELATION_KINDS
    assert tuple(out["retrieval"]) == fmt.canonical_order("retrieval")
    # This node's source carries a quote; quote is the last source field.
    assert tuple(out["source"]) == fmt.canonical_order("source")


def test_new_node_key_order() -> None:
    out = new_node("fresh node", scope=Scope(project="p")).to_dict()
    assert tuple(out) == fmt.canonical_order("memory_node")
    assert tuple(out["source"]) == tuple(k for k in fmt.canonical_order("source") if k != "quote")


def test_source_quote_only_when_set() -> None:
    order = fmt.canonical_order("source")
    assert "quote" not in Source(label="manual").to_dict()
    assert tuple(Source(label="manual").to_dict()) == tuple(k for k in order if k != "quote")
    quoted = Source(label="manual", quote="said so").to_dict()
    assert tuple(quoted) == order
    assert quoted["quote"] == "said so"


def test_patch_key_order_without_rollback_of() -> None:
    patch = MemoryPatch.from_dict(reference_patch(), where="patches/x.json")
    assert patch.rollback_of is None
    out = patch.to_dict()
    assert tuple(out) == tuple(k for k in fmt.canonical_order("memory_patch") if k != "rollback_of")
    assert out["prior_states"] == {}


def test_patch_key_order_of_rollback() -> None:
    data = reference_patch()
    data.update(
        operation="rollback",
        target_ids=["mem_d6caa4a716ff"],
        new_node_ids=[],
        new_content=None,
        prior_states={"mem_0524abcafba4": "superseded"},
        rollback_of="patch_ad5c337890c3",
    )
    patch = MemoryPatch.from_dict(data, where="patches/x.json")
    assert patch.rollback_of == "patch_ad5c337890c3"
    out = patch.to_dict()
    assert tuple(out) == fmt.canonical_order("memory_patch")
    assert out["rollback_of"] == "patch_ad5c337890c3"
    assert out["prior_states"] == {"mem_0524abcafba4": "superseded"}
    assert MemoryPatch.from_dict(out) == patch


def test_edge_key_order() -> None:
    edge = MemoryEdge.from_dict(reference_edge(), where="edges/x.json")
    assert tuple(edge.to_dict()) == fmt.canonical_order("memory_edge")
    assert (edge.from_id, edge.to_id) == ("mem_d6caa4a716ff", "mem_0524abcafba4")


def test_session_key_order() -> None:
    session = Session.from_dict(reference_session(), where="sessions/x.json")
    assert tuple(session.to_dict()) == fmt.canonical_order("session")


def test_needs_content_matches_contract() -> None:
    spec = fmt.record_spec("memory_patch")["fields"]["new_content"]
    listed = re.search(r"required_non_null_for=([a-z_,]+)", spec)
    assert listed is not None
    assert frozenset(listed.group(1).split(",")) == records.NEEDS_CONTENT
    assert set(fmt.PATCH_OPERATIONS) >= records.NEEDS_CONTENT


# ---------------------------------------------------------------- strict parsing

Mutation = Callable[[dict[str, Any]], None]


def setter(name: str, value: Any) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        data[name] = copy.deepcopy(value)

    return mutate


def deleter(name: str) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        del data[name]

    return mutate


def nested(outer: str, name: str, value: Any) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        data[outer][name] = value

    return mutate


def forget_patch(target_ids: list[str]) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        data.update(operation="forget", new_content=None, new_node_ids=[], target_ids=target_ids)

    return mutate


BASES: dict[str, tuple[Callable[[], dict[str, Any]], Any]] = {
    "node": (reference_node, MemoryNode),
    "patch": (reference_patch, MemoryPatch),
    "edge": (reference_edge, MemoryEdge),
    "session": (reference_session, Session),
}

# (label, base record, mutation, the field the problem must name)
BAD_RECORDS: list[tuple[str, str, Mutation, str]] = [
    ("node-unknown-schema", "node", setter("schema_version", "cclg.memory_node.v0.2"), "schema_version"),
    ("patch-unknown-schema", "patch", setter("schema_version", "cclg.memory_patch.v9"), "schema_version"),
    ("edge-node-schema", "edge", setter("schema_version", "cclg.memory_node.v0.1"), "schema_version"),
    ("session-unknown-schema", "session", setter("schema_version", "cclg.session.v1"), "schema_version"),
    ("node-missing-content", "node", deleter("content"), "content"),
    ("node-missing-effective-until", "node", deleter("effective_until"), "effective_until"),
    ("node-missing-scope", "node", deleter("scope"), "scope"),
    ("patch-missing-applied-at", "patch", deleter("applied_at"), "applied_at"),
    ("edge-missing-source-patch", "edge", deleter("source_patch_id"), "source_patch_id"),
    ("session-missing-agent", "session", deleter("agent"), "agent"),
    ("node-missing-source-key", "node", lambda d: d["source"].pop("turn_ids"), "source.turn_ids"),
    ("confidence-string", "node", setter("confidence", "0.9"), "confidence"),
    ("confidence-bool", "node", setter("confidence", True), "confidence"),
    ("confidence-null", "node", setter("confidence", None), "confidence"),
    ("confidence-above-1", "node", setter("confidence", 1.5), "confidence"),
    ("confidence-below-0", "node", setter("confidence", -0.01), "confidence"),
    ("patch-confidence-above-1", "patch", setter("confidence", 2), "confidence"),
    ("content-number", "node", setter("content", 42), "content"),
    ("content-blank", "node", setter("content", "   "), "content"),
    ("scope-list", "node", setter("scope", ["user_local"]), "scope"),
    ("scope-value-number", "node", nested("scope", "project", 7), "scope.project"),
    ("tags-not-strings", "node", setter("tags", ["ok", 3]), "tags"),
    ("metadata-list", "node", setter("metadata", []), "metadata"),
    ("session-ids-not-list", "session", setter("loaded_memory_ids", "mem_abedb4edaeb1"), "loaded_memory_ids"),
    ("unknown-node-field", "node", setter("importance", 3), "importance"),
    ("unknown-edge-field", "edge", setter("weight", 1.0), "weight"),
    ("unknown-source-field", "node", nested("source", "url", "https://example.invalid"), "source.url"),
    ("node-id-patch-prefix", "node", setter("id", "patch_x"), "id"),
    ("node-id-parent-dir", "node", setter("id", "mem_../x"), "id"),
    ("node-id-slash", "node", setter("id", "mem_a/b"), "id"),
    ("node-id-bare-prefix", "node", setter("id", "mem_"), "id"),
    ("edge-from-edge-id", "edge", setter("from", "edge_x"), "from"),
    ("edge-to-slash", "edge", setter("to", "mem_a/b"), "to"),
    ("patch-id-node-prefix", "patch", setter("id", "mem_x"), "id"),
    ("patch-target-bad-id", "patch", setter("target_ids", ["mem_../etc"]), "target_ids"),
    ("relation-bad-id", "node", nested("relations", "supersedes", ["patch_x"]), "relations.supersedes"),
    ("session-id-path", "session", setter("id", "../demo"), "id"),
    ("time-no-timezone", "node", setter("created_at", "2026-06-30T09:58:47"), "created_at"),
    ("time-garbage", "node", setter("updated_at", "yesterday-ish"), "updated_at"),
    ("time-number", "node", setter("effective_from", 1751277527), "effective_from"),
    ("time-bad-month", "edge", setter("created_at", "2026-13-01T00:00:00+00:00"), "created_at"),
    ("time-null-required", "patch", setter("created_at", None), "created_at"),
    ("session-started-no-tz", "session", setter("started_at", "2026-06-30 09:58:47"), "started_at"),
    ("operation-archive", "patch", setter("operation", "archive"), "operation"),
    ("refine-null-content", "patch", setter("new_content", None), "new_content"),
    ("refine-missing-content", "patch", deleter("new_content"), "new_content"),
    ("refine-empty-content", "patch", setter("new_content", ""), "new_content"),
    ("forget-empty-targets", "patch", forget_patch([]), "target_ids"),
    (
        "prior-state-bad-status",
        "patch",
        setter("prior_states", {"mem_0524abcafba4": "gone"}),
        "prior_states.mem_0524abcafba4",
    ),
    ("prior-state-bad-key", "patch", setter("prior_states", {"../x": "active"}), "prior_states"),
    ("rollback-of-node-id", "patch", setter("rollback_of", "mem_0524abcafba4"), "rollback_of"),
    ("relation-unknown-kind", "node", nested("relations", "likes", []), "relations.likes"),
    ("scope-unknown-key", "node", nested("scope", "team", "core"), "scope.team"),
    ("node-type-unknown", "node", setter("type", "opinion"), "type"),
    ("node-status-unknown", "node", setter("status", "archived"), "status"),
    ("edge-type-unknown", "edge", setter("type", "likes"), "type"),
]


@pytest.mark.parametrize(
    ("base", "mutate", "field_name"), [b[1:] for b in BAD_RECORDS], ids=[b[0] for b in BAD_RECORDS]
)
def test_strict_parsing_rejects(base: str, mutate: Mutation, field_name: str) -> None:
    make, cls = BASES[base]
    data = make()
    cls.from_dict(copy.deepcopy(data), where="nodes/x.json")  # the unmutated record is valid
    mutate(data)
    with pytest.raises(ValidationError) as caught:
        cls.from_dict(data, where="nodes/x.json")
    error = caught.value
    assert "nodes/x.json" in str(error)
    assert error.problems
    assert all(p.startswith("nodes/x.json: ") for p in error.problems), error.problems
    assert any(f"field '{field_name}'" in p for p in error.problems), error.problems
    assert error.exit_code == 4


def test_single_problem_is_the_message() -> None:
    data = reference_node()
    data["confidence"] = "high"
    with pytest.raises(ValidationError) as caught:
        MemoryNode.from_dict(data, where="nodes/x.json")
    assert caught.value.problems == [str(caught.value)]
    assert "'confidence'" in str(caught.value)


def test_all_problems_are_listed() -> None:
    data = reference_node()
    data.update(
        id="patch_x",
        content=42,
        confidence=7,
        created_at="garbage",
        colour="blue",
    )
    data["scope"]["team"] = "core"
    with pytest.raises(ValidationError) as caught:
        MemoryNode.from_dict(data, where="nodes/x.json")
    problems = caught.value.problems
    for name in ("id", "content", "confidence", "created_at", "colour", "scope.team"):
        assert any(f"nodes/x.json: field '{name}'" in p for p in problems), (name, problems)
    assert str(caught.value) == f"{len(problems)} problems in nodes/x.json"


def test_all_patch_problems_are_listed() -> None:
    data = reference_patch()
    data.update(operation="archive", target_ids=["node_1"], applied_at="2026-06-30T09:58:47")
    with pytest.raises(ValidationError) as caught:
        MemoryPatch.from_dict(data, where="patches/x.json")
    problems = caught.value.problems
    for name in ("operation", "target_ids", "applied_at"):
        assert any(f"patches/x.json: field '{name}'" in p for p in problems), (name, problems)


def test_non_object_record() -> None:
    with pytest.raises(ValidationError) as caught:
        MemoryEdge.from_dict(["edge_x"], where="edges/x.json")
    assert "edges/x.json" in caught.value.problems[0]
    assert "JSON object" in caught.value.problems[0]


def test_valid_variants_are_accepted() -> None:
    """The checks above are targeted: these legitimate variants parse."""
    patch = reference_patch()
    patch.update(operation="create", target_ids=[], new_content="new fact")
    assert MemoryPatch.from_dict(patch).target_ids == []
    forget = reference_patch()
    forget.update(operation="forget", new_content=None, new_node_ids=[])
    assert MemoryPatch.from_dict(forget).new_content is None
    node = reference_node()
    node.update(confidence=0, effective_until="2027-01-01T00:00:00Z", created_at="2026-06-30T09:58:47.123456+09:00")
    del node["tags"]  # optional
    parsed = MemoryNode.from_dict(node)
    assert parsed.confidence == 0.0
    assert parsed.tags == []
    edge = reference_edge()
    edge["source_patch_id"] = None
    assert MemoryEdge.from_dict(edge).source_patch_id is None


# ---------------------------------------------------------------- ids

_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"


def decode_millis(identifier: str) -> int:
    value = 0
    for char in identifier.split("_", 1)[1][:10]:
        value = value * 32 + _CROCKFORD.index(char)
    return value


def test_new_id_shape() -> None:
    for prefix in ("mem", "patch", "edge"):
        identifier = new_id(prefix)
        assert re.fullmatch(f"{prefix}_[{_CROCKFORD}]{{26}}", identifier), identifier
        assert is_valid_id(identifier, prefix)
        other = "edge" if prefix != "edge" else "mem"
        assert not is_valid_id(identifier, other)


def test_new_id_carries_creation_time() -> None:
    before = time.time_ns() // 1_000_000
    identifier = new_id("mem")
    after = time.time_ns() // 1_000_000
    # An id made earlier in this process may have pushed the clock part forward by
    # at most the ids made in the same millisecond; allow a small margin.
    assert before <= decode_millis(identifier) <= after + 1000


def test_new_id_sorts_in_creation_order_and_is_unique() -> None:
    generated = [new_id("mem") for _ in range(1000)]
    assert sorted(generated) == generated
    assert len(set(generated)) == len(generated)
    assert all(is_valid_id(identifier, "mem") for identifier in generated)


def test_new_id_sorts_within_one_millisecond_and_when_the_clock_steps_back(monkeypatch: pytest.MonkeyPatch) -> None:
    ticks = iter([5_000_000_000_000] * 300 + [4_000_000_000_000] * 50 + [6_000_000_000_000] * 10)
    monkeypatch.setattr(ids, "time", types.SimpleNamespace(time_ns=lambda: next(ticks)))
    monkeypatch.setattr(ids, "_last_id_parts", (0, 0))
    generated = [new_id("mem") for _ in range(360)]
    assert sorted(generated) == generated
    assert len(set(generated)) == 360
    assert decode_millis(generated[0]) == 5_000_000
    assert decode_millis(generated[349]) == 5_000_000  # the clock stepped back: keep the last time
    assert decode_millis(generated[-1]) == 6_000_000


def test_is_valid_id() -> None:
    assert is_valid_id("mem_01jq0000000000000000000000", "mem")
    assert is_valid_id("mem_chain_a", "mem")
    assert is_valid_id("mem_demo0001", "mem")
    for bad in ("mem_", "mem_../x", "mem_a/b", "mem_a b", "mem_-x", "mem_x\n", "patch_x", "memx", "", None, 5):
        assert not is_valid_id(bad, "mem"), bad
    assert not is_valid_id("mem_" + "a" * 129, "mem")


def test_now_is_the_same_text_datetime_would_write() -> None:
    """now_iso builds its text without importing datetime (hook start-up); it must read as
    datetime.now(UTC).isoformat(timespec="microseconds") does, and mean the same moment."""
    from datetime import UTC, datetime

    before = datetime.now(UTC)
    stamp = now_iso()
    after = datetime.now(UTC)
    assert before <= datetime.fromisoformat(stamp) <= after
    assert len(stamp) == len(before.isoformat(timespec="microseconds")) and stamp.endswith("+00:00")


# ---------------------------------------------------------------- fixed clock

START = "2026-01-02T03:04:05+00:00"


def test_fixed_clock_is_deterministic() -> None:
    def run() -> tuple[list[str], list[str], dict[str, Any]]:
        with fixed_clock(FixedClock(START, tag="t")):
            ids = [new_id("mem"), new_id("patch"), new_id("edge")]
            times = [now_iso(), now_iso()]
            node = new_node("a deterministic node").to_dict()
        return ids, times, node

    first = run()
    assert first == run()
    ids, times, node = first
    assert ids == ["mem_t0001", "patch_t0002", "edge_t0003"]
    assert times == [START, "2026-01-02T03:04:06+00:00"]
    assert node["id"] == "mem_t0004"
    assert node["created_at"] == node["updated_at"] == node["effective_from"] == "2026-01-02T03:04:07+00:00"


def test_fixed_clock_restores_system_clock() -> None:
    with fixed_clock(FixedClock(START)) as clock:
        assert isinstance(clock, FixedClock)
        assert new_id("mem") == "mem_demo0001"
    identifier = new_id("mem")
    assert re.fullmatch(f"mem_[{_CROCKFORD}]{{26}}", identifier), identifier
    stamp = datetime.fromisoformat(now_iso())
    assert stamp.tzinfo is not None
    assert abs((datetime.now(UTC) - stamp).total_seconds()) < 60


def test_fixed_clock_restores_after_error_and_nests() -> None:
    outer = FixedClock(START, tag="outer")
    with pytest.raises(RuntimeError), fixed_clock(outer):
        with fixed_clock(FixedClock(START, tag="inner")):
            assert new_id("mem") == "mem_inner0001"
        assert new_id("mem") == "mem_outer0001"
        raise RuntimeError("boom")
    assert not new_id("mem").startswith("mem_outer")


def test_fixed_clock_needs_a_timezone() -> None:
    with pytest.raises(ValueError):
        FixedClock("2026-01-02T03:04:05")


# ---------------------------------------------------------------- content hash

HASH_RE = re.compile(r"sha256:[0-9a-f]{64}")


def test_content_hash_format() -> None:
    assert HASH_RE.fullmatch(content_hash("hello"))
    assert content_hash("hello") == "sha256:" + hashlib.sha256(b"hello").hexdigest()
    assert HASH_RE.fullmatch(content_hash({"a": 1}))


def test_content_hash_unicode_normalisation() -> None:
    text = "café Ångström 한국어"
    nfc, nfd = unicodedata.normalize("NFC", text), unicodedata.normalize("NFD", text)
    assert nfc != nfd
    assert content_hash(nfc) == content_hash(nfd)


def test_content_hash_line_endings() -> None:
    assert content_hash("line one\r\nline two\r\n") == content_hash("line one\nline two\n")
    assert content_hash("old\rmac") == content_hash("old\nmac")


def test_content_hash_distinguishes_texts() -> None:
    assert content_hash("use pytest") != content_hash("use unittest")
    assert content_hash("a\nb") != content_hash("ab")
    assert content_hash("x") != content_hash({"x": None})


def test_content_hash_structured_payloads() -> None:
    one = {"b": [1, {"y": "é", "x": 2}], "a": "line\r\n"}
    other = {"a": "line\n", "b": [1, {"x": 2, "y": unicodedata.normalize("NFD", "é")}]}
    assert list(one) != list(other)
    assert content_hash(one) == content_hash(other)
    assert content_hash(one) != content_hash({**one, "a": "other"})
    assert content_hash({"a": 1}) == "sha256:" + hashlib.sha256(b'{"a":1}').hexdigest()


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(codec="utf-8", exclude_characters="\r")))
def test_content_hash_normalisation_property(text: str) -> None:
    expected = content_hash(text)
    assert content_hash(unicodedata.normalize("NFD", text)) == expected
    assert content_hash(unicodedata.normalize("NFC", text)) == expected
    assert content_hash(text.replace("\n", "\r\n")) == expected
    assert content_hash({"k": text, "j": [text]}) == content_hash({"j": [text], "k": text.replace("\n", "\r\n")})


# ---------------------------------------------------------------- new_node


def test_new_node_stores_content_hash_and_defaults() -> None:
    node = new_node("Prefer pytest over unittest.", key="testing.framework", tags=["b", "a", "b"])
    assert node.metadata["content_hash"] == content_hash("Prefer pytest over unittest.")
    assert node.stored_hash == node.metadata["content_hash"]
    assert node.status == "active"
    assert node.tags == ["a", "b"]
    assert is_valid_id(node.id, "mem")
    assert node.created_at == node.updated_at == node.effective_from
    assert node.retrieval.dense_text == node.content
    assert "pytest" in node.retrieval.sparse_keys


def test_new_node_session_scope_is_active_session() -> None:
    node = new_node("Only for this session.", scope=Scope(project="p", session="s-1"))
    assert node.status == "active_session"
    assert new_node("Project wide.", scope=Scope(project="p")).status == "active"
    assert new_node("Explicit.", scope=Scope(session="s-1"), status="pending").status == "pending"


def test_new_node_hash_ignores_caller_metadata() -> None:
    node = new_node("text", metadata={"content_hash": "sha256:" + "0" * 64, "created_by": "agent"})
    assert node.metadata["content_hash"] == content_hash("text")
    assert node.metadata["created_by"] == "agent"


def test_new_node_is_validated() -> None:
    with pytest.raises(ValidationError):
        new_node("   ")
    with pytest.raises(ValidationError):
        new_node("text", confidence=1.5)
    with pytest.raises(ValidationError):
        new_node("text", type="opinion")


@pytest.mark.parametrize(
    ("kwargs", "field_name"),
    [
        ({"confidence": True}, "confidence"),
        ({"created_at": "2026-01-01T00:00:00"}, "created_at"),
        ({"effective_until": "soon"}, "effective_until"),
        ({"scope": Scope(session="../evil")}, "scope.session"),
    ],
)
def test_new_node_rejects_what_the_parser_would_reject(kwargs: dict, field_name: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(f"'{field_name}'")):
        new_node("text", **kwargs)


def test_new_node_stores_confidence_as_a_float() -> None:
    node = new_node("text", confidence=1)
    assert isinstance(node.confidence, float)
    assert MemoryNode.from_dict(node.to_dict()) == node


# ---------------------------------------------------------------- round-trip property

optional_name = st.none() | st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True)
timestamps = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)).map(
    lambda moment: moment.isoformat()
)
nodes = st.builds(
    new_node,
    content=st.text(st.characters(codec="utf-8"), min_size=1, max_size=200).filter(lambda s: s.strip() != ""),
    type=st.sampled_from(fmt.NODE_TYPES),
    scope=st.builds(
        Scope,
        user=optional_name,
        org=optional_name,
        workspace=optional_name,
        project=optional_name,
        agent=optional_name,
        session=optional_name,
    ),
    key=st.none() | st.text(max_size=30),
    status=st.none() | st.sampled_from(fmt.NODE_STATUSES),
    source=st.builds(
        Source,
        label=st.none() | st.text(max_size=20),
        session_ids=st.lists(optional_name.filter(bool), max_size=3),
        quote=st.none() | st.text(max_size=40),
    ),
    confidence=st.floats(min_value=0.0, max_value=1.0),
    priority=st.sampled_from(["low", "normal", "high"]),
    tags=st.lists(st.text(max_size=10), max_size=4),
    metadata=st.dictionaries(st.text(max_size=8), st.integers() | st.text(max_size=8) | st.booleans(), max_size=3),
    effective_until=st.none() | timestamps,
    created_at=st.none() | timestamps,
)


@settings(max_examples=60, deadline=None)
@given(nodes)
def test_node_round_trip_property(node: MemoryNode) -> None:
    out = node.to_dict()
    assert tuple(out) == fmt.canonical_order("memory_node")
    assert MemoryNode.from_dict(out) == node
    assert MemoryNode.from_dict(json.loads(records.dumps(out))) == node
    assert node.metadata["content_hash"] == content_hash(node.content)


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=25,
)


@given(_JSON_VALUES)
@settings(max_examples=300, deadline=None)
def test_indented_json_is_the_standard_librarys_indented_text(value: object) -> None:
    """Records are written with fields.indented_json for speed; the bytes on disk stay what
    json.dumps(indent=2) wrote, so stores read the same by every tool (and the demo store is unchanged)."""
    from cclg.core.fields import indented_json

    assert indented_json(value) == json.dumps(value, ensure_ascii=False, indent=2)
