"""The portable .cclg container: conformance with the reference fixtures, writing, loading, importing."""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cclg import api
from cclg.api import add_memory
from cclg.cli import cli
from cclg.core.ids import content_hash
from cclg.core.records import MemoryEdge, MemoryNode, MemoryPatch, Scope, Session, Source, new_node
from cclg.core.store import Store
from cclg.errors import IllegalPatchError, UnknownPatchOperationError, UsageError, ValidationError
from cclg.intake.container import (
    SECTIONS,
    Container,
    ContainerError,
    export_store,
    load_container,
    read_text,
    write_container,
)
from cclg.intake.container_import import import_container
from cclg.ledger.sessions import end_session, start_session
from cclg.ledger.undo import rollback
from cclg.ledger.view import effective_view
from cclg.ledger.writer import apply_patch
from cclg.maintenance.doctor import diagnose
from tests.conftest import DATA

CONFORMANCE = Path(__file__).parent / "conformance"
POSITIVE = sorted(p.stem for p in CONFORMANCE.glob("0[1-6]_*.cclg"))


def fixture(name: str) -> tuple[str, dict]:
    return (CONFORMANCE / f"{name}.cclg").read_text("utf-8"), json.loads(
        (CONFORMANCE / f"{name}.expected.json").read_text("utf-8")
    )


def test_all_eight_fixtures_are_here() -> None:
    assert len(POSITIVE) == 6
    assert len(list(CONFORMANCE.glob("0[1-8]_*.cclg"))) == 8


@pytest.mark.parametrize("name", POSITIVE)
def test_conformance_effective_view(name: str) -> None:
    text, expected = fixture(name)
    container = load_container(text)
    view = container.effective_view(expected["session_id"])
    assert [n.id for n in view] == sorted(expected["effective_view_node_ids"])


@pytest.mark.parametrize("name", POSITIVE)
def test_conformance_fixtures_are_written_back_byte_for_byte(name: str) -> None:
    """Our writer frames the reference's records exactly as the reference did."""
    text, _ = fixture(name)
    container = load_container(text)
    rewritten = write_container(
        container.nodes,
        container.patches,
        container.edges,
        container.sessions,
        generated_at=container.header["generated_at"],
    )
    assert rewritten == text


def test_conformance_07_unknown_operation() -> None:
    text, expected = fixture("07_unknown_patch_operation")
    assert expected["expect_error"] == "load_default_and_effective_view"
    with pytest.raises(ContainerError, match="archive"):
        load_container(text)
    unvalidated = load_container(text, validate=False)
    with pytest.raises(UnknownPatchOperationError, match="archive"):
        unvalidated.effective_view()


def test_conformance_08_forbidden_auth_field() -> None:
    text, expected = fixture("08_forbidden_auth_field")
    assert expected["expect_error"] == "load_always"
    for validate in (True, False):
        with pytest.raises(ContainerError, match="org_id"):
            load_container(text, validate=validate)


# ================================================================ helpers

GENERATED_AT = "2026-07-10T04:26:05+00:00"
REFERENCE_SESSION = DATA / "reference-demo-store" / "sessions" / "demo-session.json"
FORBIDDEN = ["org_id", "user_id", "bucket", "collection", "api_key", "apikey", "token", "access_token"]


def sha(text: str) -> str:
    """The checksum as the spec defines it, computed independently of the library."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def body_of(text: str) -> list[str]:
    """The lines after the header (the trailing newline's empty piece removed)."""
    lines = text.split("\n")
    assert lines[-1] == ""
    return lines[2:-1]


def frame(
    body: list[str],
    *,
    counts: dict[str, Any] | None = None,
    sections: list[dict[str, Any]] | None = None,
    checksum: str | None = None,
    drop: tuple[str, ...] = (),
    **extra: Any,
) -> str:
    """A container around ``body``, with counts, sections and checksum that agree with it unless overridden."""
    found: dict[str, int] = {}
    current = None
    for line in body:
        if line.startswith("@"):
            current = line[1:]
            found[current] = 0
        elif current is not None and line.strip():
            found[current] += 1
    header: dict[str, Any] = {
        "container": "cclg.container.v0.1",
        "format_id": "cclg.format.v0.1",
        "versions": {
            "memory_node": "cclg.memory_node.v0.1",
            "memory_patch": "cclg.memory_patch.v0.1",
            "edge": "cclg.edge.v0.1",
            "session": "cclg.session.v0.1",
        },
        "sections": [{"name": n, "count": c} for n, c in found.items()] if sections is None else sections,
        "counts": dict(found) if counts is None else counts,
        "generated_at": GENERATED_AT,
        "content_sha256": sha("\n".join(body)) if checksum is None else checksum,
    }
    header.update(extra)
    for key in drop:
        del header[key]
    return "CCLG\t0.1\n" + json.dumps(header, ensure_ascii=False) + "\n" + "\n".join(body) + "\n"


def make_body(
    nodes: Sequence[dict], patches: Sequence[dict] = (), edges: Sequence[dict] = (), sessions: Sequence[dict] = ()
) -> list[str]:
    """The body lines of a container holding these records (as dicts), in the four sections."""
    body = []
    for name, records in (("nodes", nodes), ("patches", patches), ("edges", edges), ("sessions", sessions)):
        body.append(f"@{name}")
        body += [json.dumps(r, ensure_ascii=False) for r in records]
    return body


def sample_records() -> dict[str, list[dict]]:
    """Fixture 01's records plus the reference demo store's session: every section holds something."""
    loaded = load_container(fixture("01_supersede_chain")[0])
    session = json.loads(REFERENCE_SESSION.read_text("utf-8"))
    return {
        "nodes": [n.to_dict() for n in loaded.nodes],
        "patches": [p.to_dict() for p in loaded.patches],
        "edges": [e.to_dict() for e in loaded.edges],
        "sessions": [Session.from_dict(session).to_dict()],
    }


def sample_body(**changes: list[dict]) -> list[str]:
    records = {**sample_records(), **changes}
    return make_body(records["nodes"], records["patches"], records["edges"], records["sessions"])


SAMPLE_BODY = sample_body()
SAMPLE = frame(SAMPLE_BODY)


def raises(text: str, match: str, *, validate: bool = True) -> ContainerError:
    with pytest.raises(ContainerError, match=match) as info:
        load_container(text, validate=validate)
    return info.value


def files(root: Path) -> dict[str, bytes]:
    """Every file under a store, by relative path (the lock file and the search index aside)."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".lock" and not p.name.startswith("index.sqlite")
    }


def every_file(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def store_records(store: Store) -> dict[str, list[dict]]:
    """The store's records as a container holds them: nodes, edges, sessions by id; patches in ledger order."""
    return {
        "nodes": [n.to_dict() for n in sorted(store.load_nodes().values(), key=lambda n: n.id)],
        "patches": [p.to_dict() for p in store.load_patches()],
        "edges": [e.to_dict() for e in sorted(store.load_edges(), key=lambda e: e.id)],
        "sessions": [s.to_dict() for s in sorted(store.load_sessions(), key=lambda s: s.id)],
    }


def container_records(container: Container) -> dict[str, list[dict]]:
    return {name: [r.to_dict() for r in getattr(container, name)] for name in SECTIONS}


def store_view(store: Store, session_id: str | None = None) -> list[dict]:
    return [n.to_dict() for n in effective_view(store.load_nodes().values(), store.load_patches(), session_id)]


def container_view(container: Container, session_id: str | None = None) -> list[dict]:
    return [n.to_dict() for n in container.effective_view(session_id)]


def add(store: Store, content: str, **fields: Any) -> str:
    return add_memory(store, content, source="test", **fields).new_nodes[0].id


def test_frame_helper_reproduces_the_writer() -> None:
    """The helper every rejection test uses frames a body exactly as ``write_container`` does."""
    records = sample_records()
    written = write_container(
        [MemoryNode.from_dict(d) for d in records["nodes"]],
        [MemoryPatch.from_dict(d) for d in records["patches"]],
        [MemoryEdge.from_dict(d) for d in records["edges"]],
        [Session.from_dict(d) for d in records["sessions"]],
        generated_at=GENERATED_AT,
    )
    assert written == SAMPLE
    assert load_container(SAMPLE).counts() == {"nodes": 3, "patches": 2, "edges": 2, "sessions": 1}


def test_checksum_is_sha256_of_the_body_joined_with_newlines() -> None:
    text, _ = fixture("01_supersede_chain")
    header = json.loads(text.split("\n")[1])
    after_header = text.split("\n", 2)[2]
    assert after_header.endswith("\n")
    assert header["content_sha256"] == sha(after_header[:-1])


# ================================================================ rejections: framing and header


@pytest.mark.parametrize("first", ["CCLX\t0.1", "cclg\t0.1", "CCLG 0.1", "CCLG0.1", "\ufeffCCLG\t0.1", ""])
def test_wrong_magic(first: str) -> None:
    text = first + "\n" + SAMPLE.split("\n", 1)[1]
    raises(text, "not a .cclg container: line 1 is")


@pytest.mark.parametrize("version", ["0.2", "1.0", "0.1.0", ""])
def test_unsupported_version(version: str) -> None:
    text = f"CCLG\t{version}\n" + SAMPLE.split("\n", 1)[1]
    raises(text, rf"container version '{re.escape(version)}' is not supported: this reader reads 0\.1 only")


@pytest.mark.parametrize("header", ["{not json", "", '{"container": "cclg.container.v0.1"'])
def test_header_not_json(header: str) -> None:
    lines = SAMPLE.split("\n")
    lines[1] = header
    raises("\n".join(lines), "line 2: the header is not JSON")


@pytest.mark.parametrize("header", ["[]", '"header"', "42", "null"])
def test_header_not_an_object(header: str) -> None:
    lines = SAMPLE.split("\n")
    lines[1] = header
    raises("\n".join(lines), "line 2: the header must be a JSON object")


@pytest.mark.parametrize(
    "key", ["container", "format_id", "versions", "sections", "counts", "generated_at", "content_sha256"]
)
def test_header_missing_a_required_key(key: str) -> None:
    error = raises(frame(SAMPLE_BODY, drop=(key,)), f"^the header lacks {key}$")
    assert error.problems == [f"the header lacks {key}"]


def test_header_missing_several_keys_names_them_all() -> None:
    raises(frame(SAMPLE_BODY, drop=("versions", "generated_at")), "^the header lacks versions, generated_at$")


@pytest.mark.parametrize("container_id", ["cclg.container.v0.2", "other", None])
def test_wrong_container_id(container_id: Any) -> None:
    raises(
        frame(SAMPLE_BODY, container=container_id),
        rf"the header names container {re.escape(repr(container_id))}, not 'cclg.container.v0.1'",
    )


@pytest.mark.parametrize("format_id", ["cclg.format.v0.2", "cclg.format.v1"])
def test_wrong_format_id(format_id: str) -> None:
    raises(
        frame(SAMPLE_BODY, format_id=format_id),
        rf"the records are of format '{re.escape(format_id)}'; this reader knows cclg\.format\.v0\.1 only",
    )


def test_header_counts_and_sections_of_the_wrong_type() -> None:
    raises(frame(SAMPLE_BODY, counts=[3, 2, 2, 1]), "the header's counts must be an object and its sections a list")
    raises(frame(SAMPLE_BODY, sections={"nodes": 3}), "the header's counts must be an object and its sections a list")
    raises(frame(SAMPLE_BODY, sections=[{"name": "nodes"}]), "sections must be objects with a name and a count")
    raises(frame(SAMPLE_BODY, checksum=123), "the header's content_sha256 must be a string")


@pytest.mark.parametrize("section", SECTIONS)
def test_counts_disagreeing_with_the_body(section: str) -> None:
    real = load_container(SAMPLE).counts()
    counts = {**real, section: real[section] + 1}
    raises(
        frame(SAMPLE_BODY, counts=counts),
        rf"^@{section} holds {real[section]} record\(s\) but the header's counts says {real[section] + 1}$",
    )


@pytest.mark.parametrize("section", SECTIONS)
def test_sections_disagreeing_with_the_body(section: str) -> None:
    real = load_container(SAMPLE).counts()
    listed = [{"name": n, "count": c + (n == section) * 2} for n, c in real.items()]
    raises(
        frame(SAMPLE_BODY, sections=listed),
        rf"^@{section} holds {real[section]} record\(s\) but the header's sections says {real[section] + 2}$",
    )


@pytest.mark.parametrize("section", SECTIONS)
def test_a_section_listed_twice_in_the_header_is_refused(section: str) -> None:
    """Issue 15, rule 2: a header that says two things about one section cannot be trusted, even when
    its last word agrees with the body."""
    real = load_container(SAMPLE).counts()
    listed = [{"name": section, "count": real[section] + 5}, *({"name": n, "count": c} for n, c in real.items())]
    raises(frame(SAMPLE_BODY, sections=listed), rf"^the header's sections list @{section} twice$")


@pytest.mark.parametrize("section", SECTIONS)
def test_a_body_section_missing_from_counts(section: str) -> None:
    counts = {n: c for n, c in load_container(SAMPLE).counts().items() if n != section}
    raises(frame(SAMPLE_BODY, counts=counts), rf"^@{section} is in the body but not in the header's counts$")


@pytest.mark.parametrize("section", SECTIONS)
def test_a_body_section_missing_from_sections(section: str) -> None:
    listed = [{"name": n, "count": c} for n, c in load_container(SAMPLE).counts().items() if n != section]
    raises(frame(SAMPLE_BODY, sections=listed), rf"^@{section} is in the body but not in the header's sections$")


def test_a_header_section_missing_from_the_body() -> None:
    """The header promises two @extra records the body does not hold: the header disagrees with the body."""
    counts = {**load_container(SAMPLE).counts(), "extra": 2}
    listed = [{"name": n, "count": c} for n, c in counts.items()]
    raises(frame(SAMPLE_BODY, counts=counts, sections=listed), "extra")


# ================================================================ rejections: the body


def test_checksum_mismatch_from_one_flipped_character() -> None:
    assert SAMPLE.count("A: original fact.") == 2  # the node's content and its retrieval.dense_text
    damaged = SAMPLE.replace("A: original fact.", "A: original fakt.", 1)
    assert len(damaged) == len(SAMPLE) and damaged != SAMPLE
    for line in body_of(damaged):
        if not line.startswith("@"):
            json.loads(line)  # still valid JSON: only the checksum can tell
    for validate in (True, False):
        raises(damaged, "^checksum mismatch: the body does not match the header's content_sha256", validate=validate)


def test_every_truncation_is_refused(tmp_path: Path) -> None:
    """Cut a container (with multi-byte characters) at every byte: no prefix ever loads."""
    records = sample_records()
    records["nodes"][0]["content"] = "A: naïve café — ünïcode ✓ 🎉"
    data = frame(make_body(records["nodes"], records["patches"], records["edges"], records["sessions"])).encode()
    assert load_container(data.decode("utf-8")).nodes[0].content == "A: naïve café — ünïcode ✓ 🎉"
    path = tmp_path / "cut.cclg"
    loaded, mid_character = [], 0
    for offset in range(len(data)):
        try:
            text = data[:offset].decode("utf-8")
        except UnicodeDecodeError:
            # A cut inside a character: read the file the way `cclg open` does.
            mid_character += 1
            path.write_bytes(data[:offset])
            with pytest.raises(ContainerError, match="not UTF-8"):
                read_text(str(path))
            continue
        try:
            load_container(text, validate=False)  # the lenient reader: what it refuses, validation refuses too
        except ContainerError:
            continue
        loaded.append(offset)
    assert loaded == []
    assert mid_character >= 8  # the cuts went through multi-byte characters


def test_missing_final_newline_and_an_extra_one() -> None:
    raises(SAMPLE[:-1], "^the container does not end with a newline: it is truncated$")
    raises(SAMPLE + "\n", "^checksum mismatch")  # the extra empty line is part of the body
    raises(frame([*SAMPLE_BODY, ""]), f"^line {len(SAMPLE_BODY) + 3}: a blank line inside @sessions$")


def test_swapped_sections() -> None:
    """@edges before @patches: under the original header the checksum fires; with a recomputed one, the order check."""
    body = SAMPLE_BODY
    start_p, start_e, start_s = body.index("@patches"), body.index("@edges"), body.index("@sessions")
    swapped = body[:start_p] + body[start_e:start_s] + body[start_p:start_e] + body[start_s:]
    assert sorted(swapped) == sorted(body) and swapped != body
    original_header = "\n".join(SAMPLE.split("\n")[:2])
    raises(original_header + "\n" + "\n".join(swapped) + "\n", "^checksum mismatch")
    raises(
        frame(swapped),
        "^the sections are @nodes, @edges, @patches, @sessions; "
        "a container has @nodes, @patches, @edges, @sessions, in that order$",
    )


@pytest.mark.parametrize("missing", SECTIONS)
def test_a_known_section_missing(missing: str) -> None:
    body = SAMPLE_BODY
    start = body.index(f"@{missing}")
    end = next((i for i in range(start + 1, len(body)) if body[i].startswith("@")), len(body))
    raises(frame(body[:start] + body[end:]), "^the sections are .*in that order$")


@pytest.mark.parametrize("blank", ["", "   ", "\t"])
def test_blank_line_inside_a_section(blank: str) -> None:
    body = [*SAMPLE_BODY]
    body.insert(2, blank)  # after the first node (line 4): the blank is line 5
    raises(frame(body), "^line 5: a blank line inside @nodes$")


def test_record_before_the_first_marker() -> None:
    raises(frame(['{"id": "mem_x"}', *SAMPLE_BODY]), "^line 3: a record before the first @section marker$")


@pytest.mark.parametrize("section", SECTIONS)
def test_a_section_appearing_twice(section: str) -> None:
    body = [*SAMPLE_BODY, f"@{section}"]
    raises(frame(body), rf"^line {len(body) + 2}: section @{section} appears twice$")


def test_a_record_that_is_not_json_is_always_refused() -> None:
    body = [*SAMPLE_BODY]
    body.insert(2, '{"id": "mem_broken",')
    for validate in (True, False):
        raises(frame(body), r"^line 5 \(@nodes\): not JSON", validate=validate)


def test_all_record_problems_are_reported_at_once() -> None:
    records = sample_records()
    records["edges"][1]["created_at"] = "yesterday"
    records["sessions"][0]["started_at"] = 20260630
    body = make_body(records["nodes"], records["patches"], records["edges"], records["sessions"])
    assert body[7] == "@edges" and body[10] == "@sessions"  # the bad edge is line 12, the bad session line 14
    for validate in (True, False):
        error = raises(frame(body), r"^2 problems in the records: line 12 \(@edges\)", validate=validate)
        assert len(error.problems) == 2
        assert error.problems[0].startswith("line 12 (@edges)") and "created_at" in error.problems[0]
        assert error.problems[1].startswith("line 14 (@sessions)") and "started_at" in error.problems[1]


def _mutate(section: str, index: int, field: str, value: Any) -> Any:
    def change(records: dict[str, list[dict]]) -> None:
        record = records[section][index]
        if "." in field:
            outer, inner = field.split(".")
            record[outer] = {**record[outer], inner: value}
        else:
            record[field] = value

    return change


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            _mutate("patches", 0, "target_ids", ["mem_missing"]),
            "patch patch_chain_1: target_ids names mem_missing, which is not in the container",
        ),
        (
            _mutate("patches", 1, "new_node_ids", ["mem_missing"]),
            "patch patch_chain_2: new_node_ids names mem_missing, which is not in the container",
        ),
        (
            _mutate("patches", 1, "rollback_of", "patch_missing"),
            "patch patch_chain_2: rollback_of names patch_missing, which is not in the container",
        ),
        (
            _mutate("edges", 0, "from", "mem_missing"),
            "edge edge_chain_1: 'from' names mem_missing, which is not in the container",
        ),
        (
            _mutate("edges", 1, "to", "mem_missing"),
            "edge edge_chain_2: 'to' names mem_missing, which is not in the container",
        ),
        (
            _mutate("edges", 1, "source_patch_id", "patch_missing"),
            "edge edge_chain_2: source_patch_id names patch_missing, not in the container",
        ),
        (
            _mutate("nodes", 2, "relations.depends_on", ["mem_missing"]),
            "node mem_chain_c: relations.depends_on names mem_missing, which is not in the container",
        ),
    ],
)
def test_references_to_ids_not_in_the_container(change: Any, message: str) -> None:
    records = sample_records()
    change(records)
    text = frame(make_body(records["nodes"], records["patches"], records["edges"], records["sessions"]))
    error = raises(text, f"^{re.escape(message)}$")
    assert error.problems == [message]
    assert load_container(text, validate=False).counts() == load_container(SAMPLE).counts()


@pytest.mark.parametrize("section", SECTIONS)
def test_duplicate_ids(section: str) -> None:
    records = sample_records()
    records[section].append(dict(records[section][0]))
    text = frame(make_body(records["nodes"], records["patches"], records["edges"], records["sessions"]))
    record_id = records[section][0]["id"]
    error = raises(text, f"^@{section}: id {record_id} appears twice$")
    assert error.problems == [f"@{section}: id {record_id} appears twice"]


def test_two_reference_problems_are_reported_together() -> None:
    records = sample_records()
    records["edges"][0]["from"] = "mem_gone_a"
    records["patches"][0]["target_ids"] = ["mem_gone_b"]
    text = frame(make_body(records["nodes"], records["patches"], records["edges"], records["sessions"]))
    error = raises(text, "^2 problems in the records")
    assert any("mem_gone_a" in p for p in error.problems) and any("mem_gone_b" in p for p in error.problems)


# ---------------------------------------------------------------- the auth-field guard when reading


@pytest.mark.parametrize("key", FORBIDDEN)
def test_auth_key_deep_in_a_record_is_refused_even_unvalidated(key: str) -> None:
    records = sample_records()
    records["nodes"][0]["metadata"] = {**records["nodes"][0]["metadata"], "sync": [{"remote": {key: "secret"}}]}
    text = frame(make_body(records["nodes"], records["patches"], records["edges"], records["sessions"]))
    for validate in (True, False):
        raises(
            text,
            rf"^line 4 \(@nodes\) carries the auth field\(s\) {key}, which a container never holds$",
            validate=validate,
        )


def test_auth_key_in_the_header_is_refused() -> None:
    for validate in (True, False):
        raises(
            frame(SAMPLE_BODY, origin={"bucket": "b"}),
            r"^the header carries the auth field\(s\) bucket",
            validate=validate,
        )


def test_auth_key_in_an_unknown_section_is_refused() -> None:
    body = [*SAMPLE_BODY, "@extra", '{"credentials": {"api_key": "k"}}']
    for validate in (True, False):
        raises(frame(body), r"\(@extra\) carries the auth field\(s\) api_key", validate=validate)


# ================================================================ things that must load

LINE_BREAKERS = "\u2028\u2029\x85\x0b\x0c\x1c\x1d\x1e"


def test_unicode_line_separators_in_content_round_trip(tmp_path: Path, store: Store) -> None:
    content = "one\u2028two\u2029three\x85four\x0bfive\x0csix\x1cseven\x1dand\x1eend"
    node = new_node(content, source=Source(label="test"))
    text = write_container([node], generated_at=GENERATED_AT)
    # JSON leaves U+2028, U+2029 and U+0085 unescaped: splitlines would cut the record apart.
    assert all(ch in text for ch in "\u2028\u2029\x85")
    assert len(text.splitlines()) > len(text.split("\n")) - 1
    path = tmp_path / "separators.cclg"
    path.write_bytes(text.encode("utf-8"))
    loaded = load_container(read_text(str(path)))
    assert loaded.nodes[0].content == content
    assert loaded.nodes == [node]
    import_container(store, loaded)
    assert store.read_node(node.id).content == content
    assert load_container(export_store(store)).nodes[0].content == content


def test_unknown_header_keys_are_ignored() -> None:
    text = frame(SAMPLE_BODY, comment="hand-written", future={"compression": None, "parts": [1, 2]})
    container = load_container(text)
    assert container_records(container) == container_records(load_container(SAMPLE))
    assert container.warnings == [] and container.unknown_sections == {}


def test_unknown_section_is_kept_apart_with_a_warning() -> None:
    extra = ['{"kind": "annotation", "text": "kept"}', '{"kind": "annotation", "text": "\u2028"}']
    container = load_container(frame([*SAMPLE_BODY, "@extra", *extra]))
    assert container.unknown_sections == {"extra": extra}
    assert len(container.warnings) == 1 and "@extra" in container.warnings[0] and "2 record" in container.warnings[0]
    assert container_records(container) == container_records(load_container(SAMPLE))
    described = container.describe()
    assert described["unknown_sections"] == {"extra": 2}
    assert described["counts"] == {"nodes": 3, "patches": 2, "edges": 2, "sessions": 1}


@pytest.mark.parametrize("where", ["counts", "sections"])
def test_unknown_section_absent_from_the_header_is_refused(where: str) -> None:
    body = [*SAMPLE_BODY, "@extra", '{"kind": "annotation"}']
    counts = load_container(SAMPLE).counts()
    full = {**counts, "extra": 1}
    text = frame(
        body,
        counts=counts if where == "counts" else full,
        sections=[{"name": n, "count": c} for n, c in (counts if where == "sections" else full).items()],
    )
    raises(text, f"^@extra is in the body but not in the header's {where}$")


def test_empty_sections_load() -> None:
    text = write_container([], generated_at=GENERATED_AT)
    assert body_of(text) == ["@nodes", "@patches", "@edges", "@sessions"]
    container = load_container(text)
    assert container.counts() == {"nodes": 0, "patches": 0, "edges": 0, "sessions": 0}
    assert container.effective_view() == []


# ================================================================ writing


def _node_with_metadata(metadata: dict[str, Any]) -> MemoryNode:
    return new_node("A fact.", source=Source(label="test"), metadata=metadata)


@pytest.mark.parametrize("key", FORBIDDEN)
def test_writer_refuses_auth_key_nested_in_metadata(key: str) -> None:
    node = _node_with_metadata({"sync": {"remote": {key: "secret"}}})
    with pytest.raises(ContainerError, match=rf"^@nodes {node.id} carries the auth field\(s\) {key}"):
        write_container([node])


@pytest.mark.parametrize("key", FORBIDDEN)
def test_writer_refuses_auth_key_in_a_list_in_metadata(key: str) -> None:
    node = _node_with_metadata({"remotes": ["origin", {"name": "cloud", key: "secret"}]})
    with pytest.raises(ContainerError, match=rf"^@nodes {node.id} carries the auth field\(s\) {key}"):
        write_container([node])


def test_writer_refuses_auth_keys_in_patches_and_sessions() -> None:
    records = sample_records()
    patch = MemoryPatch.from_dict(records["patches"][0])
    patch.resolution_policy = {**patch.resolution_policy, "approver": {"user_id": "u1"}}
    with pytest.raises(ContainerError, match=r"^@patches patch_chain_1 carries the auth field\(s\) user_id"):
        write_container([], [patch])
    session = Session.from_dict(records["sessions"][0])
    session.policy = {**session.policy, "sync_targets": [{"bucket": "b", "token": "t"}]}
    with pytest.raises(ContainerError, match=r"^@sessions demo-session carries the auth field\(s\) bucket, token"):
        write_container([], sessions=[session])


def test_writer_accepts_lookalike_keys() -> None:
    """Only the exact auth keys are refused: 'tokens' or 'user' are ordinary fields."""
    node = _node_with_metadata({"tokens": 12, "user": "me", "token_count": 3})
    assert load_container(write_container([node])).nodes == [node]


@pytest.mark.parametrize("empty", [True, False])
def test_output_ends_with_exactly_one_newline(empty: bool) -> None:
    nodes = [] if empty else [new_node("A fact ending in a newline\n", source=Source(label="test"))]
    text = write_container(nodes)
    assert text.endswith("\n") and not text.endswith("\n\n")
    assert text.count("\n") == 2 + 4 + len(nodes)  # magic, header, four markers, one line per record


def test_records_are_written_in_canonical_field_order_not_sorted() -> None:
    records = sample_records()
    node = MemoryNode.from_dict(records["nodes"][0])
    patch = MemoryPatch.from_dict(records["patches"][0])
    edge = MemoryEdge.from_dict(records["edges"][0])
    session = Session.from_dict(records["sessions"][0])
    body = body_of(write_container([node], [patch], [edge], [session]))
    for line, record in zip([body[1], body[3], body[5], body[7]], [node, patch, edge, session], strict=True):
        keys = list(json.loads(line))
        assert keys == list(record.to_dict())
        assert keys != sorted(keys)  # the test can tell canonical order from sorted order
        assert line == json.dumps(record.to_dict(), ensure_ascii=False)


def test_writer_keeps_the_order_it_is_given() -> None:
    first = new_node("Second by id", source=Source(label="test"), node_id="mem_zzz")
    second = new_node("First by id", source=Source(label="test"), node_id="mem_aaa")
    assert [n.id for n in load_container(write_container([first, second])).nodes] == ["mem_zzz", "mem_aaa"]


# ================================================================ round trip through real stores


def build_store(root: Path) -> tuple[Store, dict[str, str]]:
    """A store touched by every kind of change: create, supersede, refine, forget, expire, a rollback,
    a session overlay and one key at two scopes."""
    store, _ = Store.init(root)
    start_session(store, "sess-1", agent="test", project="cclg")
    start_session(store, "sess-2", agent="test")
    ids = {"port": add(store, "The API listens on port 8080")}
    ids["port2"] = (
        apply_patch(store, "supersede", [ids["port"]], reason="moved", contents=["The API listens on port 9090"])
        .new_nodes[0]
        .id
    )
    ids["tests"] = add(store, "Run the tests with pytest")
    ids["tests2"] = (
        apply_patch(store, "refine", [ids["tests"]], reason="precise", contents=["Run the tests with pytest -q"])
        .new_nodes[0]
        .id
    )
    ids["secret"] = add(store, "The staging password is in the vault")
    apply_patch(store, "forget", [ids["secret"]], reason="asked to forget")
    ids["freeze"] = add(store, "The release freeze lasts until Friday")
    apply_patch(store, "expire", [ids["freeze"]], reason="it is over")
    ids["style"] = add(store, "Indent with tabs")
    undone = apply_patch(store, "supersede", [ids["style"]], reason="mistake", contents=["Indent with spaces"])
    ids["style_undone"] = undone.new_nodes[0].id
    rollback(store, undone.patch.id, reason="wrong file")
    ids["overlay"] = add(store, "This session works on the exporter", scope=Scope(session="sess-1"))
    ids["region_global"] = add(store, "Deploy to the EU region", key="deploy.region")
    ids["region_project"] = add(store, "Deploy cclg to the US region", key="deploy.region", scope=Scope(project="cclg"))
    return store, ids


def test_built_store_covers_the_scenario(tmp_path: Path) -> None:
    """The scenario the round trips run on is what it claims to be."""
    store, ids = build_store(tmp_path / "a")
    statuses = {node_id: node.status for node_id, node in store.load_nodes().items()}
    assert statuses[ids["port"]] == statuses[ids["tests"]] == "superseded"
    assert statuses[ids["secret"]] == "forgotten" and statuses[ids["freeze"]] == "expired"
    assert statuses[ids["style"]] == "active" and statuses[ids["style_undone"]] == "discarded"
    assert statuses[ids["overlay"]] == "active_session"
    assert store.read_session("sess-1").session_overlay_ids == [ids["overlay"]]
    assert {p.operation for p in store.load_patches()} == {
        "create",
        "supersede",
        "refine",
        "forget",
        "expire",
        "rollback",
    }
    view = {n["id"] for n in store_view(store)}
    assert view == {ids["port2"], ids["tests2"], ids["style"], ids["region_project"]}
    assert {n["id"] for n in store_view(store, "sess-1")} == view | {ids["overlay"]}
    assert diagnose(store).findings == []


def test_export_then_load_gives_the_store_back(tmp_path: Path) -> None:
    store, ids = build_store(tmp_path / "a")
    container = load_container(export_store(store))
    assert container.warnings == []
    assert container_records(container) == store_records(store)
    for session_id in (None, "sess-1", "sess-2"):
        assert container_view(container, session_id) == store_view(store, session_id)
    assert ids["overlay"] in [n["id"] for n in container_view(container, "sess-1")]


def test_export_narrowed_to_one_session(tmp_path: Path) -> None:
    store, _ = build_store(tmp_path / "a")
    container = load_container(export_store(store, ["sess-2"]))
    assert [s.id for s in container.sessions] == ["sess-2"]
    full = store_records(store)
    assert container_records(container) == {**full, "sessions": [s for s in full["sessions"] if s["id"] == "sess-2"]}
    with pytest.raises(UsageError, match="no session sess-9"):
        export_store(store, ["sess-1", "sess-9"])


def test_import_into_an_empty_store_reproduces_it(tmp_path: Path) -> None:
    source, _ = build_store(tmp_path / "a")
    container = load_container(export_store(source))
    target, _ = Store.init(tmp_path / "b")
    report = import_container(target, container)
    assert report.added == {name: [r.id for r in getattr(container, name)] for name in SECTIONS}
    assert report.skipped == {name: [] for name in SECTIONS}
    assert report.conflicts == [] and report.statuses == [] and report.notes == []
    assert store_records(target) == store_records(source)
    for folder in SECTIONS:
        assert {p.name: p.read_bytes() for p in target.record_files(folder)} == {
            p.name: p.read_bytes() for p in source.record_files(folder)
        }
    for session_id in (None, "sess-1"):
        assert store_view(target, session_id) == store_view(source, session_id)
    assert diagnose(target).findings == []


def test_importing_the_same_container_again_changes_nothing(tmp_path: Path) -> None:
    source, _ = build_store(tmp_path / "a")
    container = load_container(export_store(source))
    target, _ = Store.init(tmp_path / "b")
    import_container(target, container)
    before = files(target.root)
    report = import_container(target, load_container(export_store(source)))
    assert report.added == {name: [] for name in SECTIONS}
    assert report.skipped == {name: [r.id for r in getattr(container, name)] for name in SECTIONS}
    assert report.conflicts == [] and report.statuses == [] and report.notes == []
    assert files(target.root) == before
    assert diagnose(target).findings == []


def test_dry_run_writes_nothing_and_predicts_the_import(tmp_path: Path) -> None:
    source, _ = build_store(tmp_path / "a")
    container = load_container(export_store(source))
    target, _ = Store.init(tmp_path / "b")
    add(target, "A memory of the target store")
    before = every_file(target.root)
    dry = import_container(target, container, dry_run=True)
    assert every_file(target.root) == before
    assert dry.dry_run is True and dry.to_dict()["dry_run"] is True
    assert dry.added == {name: [r.id for r in getattr(container, name)] for name in SECTIONS}
    real = import_container(target, load_container(export_store(source)))
    assert real.dry_run is False
    assert {k: v for k, v in real.to_dict().items() if k != "dry_run"} == {
        k: v for k, v in dry.to_dict().items() if k != "dry_run"
    }


# ================================================================ property tests

OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(["add", "add_keyed", "add_overlay", "supersede", "refine", "forget", "expire", "rollback"]),
        st.integers(min_value=0, max_value=10_000),
    ),
    min_size=1,
    max_size=10,
)
PROPERTY = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def random_ledger(root: Path, operations: list[tuple[str, int]]) -> Store:
    """A store built by a random sequence of API calls; illegal choices are refused by the ledger and skipped."""
    store, _ = Store.init(root)
    start_session(store, "sess-p", agent="test")
    for step, (operation, pick) in enumerate(operations):
        node_ids = sorted(store.load_nodes())
        patches = store.load_patches()
        try:
            if operation == "add":
                add(store, f"fact number {step}")
            elif operation == "add_keyed":
                scope = Scope(project="p") if pick % 2 else None
                add(store, f"keyed fact {step}", key=f"k{pick % 2}", scope=scope)
            elif operation == "add_overlay":
                add(store, f"overlay fact {step}", scope=Scope(session="sess-p"))
            elif operation in ("supersede", "refine") and node_ids:
                target = node_ids[pick % len(node_ids)]
                apply_patch(store, operation, [target], reason="property", contents=[f"new fact {step}"])
            elif operation in ("forget", "expire") and node_ids:
                apply_patch(store, operation, [node_ids[pick % len(node_ids)]], reason="property")
            elif operation == "rollback" and patches:
                rollback(store, patches[pick % len(patches)].id)
        except IllegalPatchError:
            pass
    return store


def without_generated_at(text: str) -> str:
    lines = text.split("\n")
    header = json.loads(lines[1])
    assert isinstance(header.pop("generated_at"), str)
    return "\n".join([lines[0], json.dumps(header), *lines[2:]])


@PROPERTY
@given(operations=OPERATIONS)
def test_property_export_load_keeps_the_effective_view(operations: list[tuple[str, int]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        store = random_ledger(Path(folder) / "s", operations)
        container = load_container(export_store(store))
        assert container_records(container) == store_records(store)
        for session_id in (None, "sess-p"):
            assert container_view(container, session_id) == store_view(store, session_id)


@PROPERTY
@given(operations=OPERATIONS)
def test_property_export_import_export_is_stable(operations: list[tuple[str, int]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        store = random_ledger(Path(folder) / "s", operations)
        first = export_store(store)
        target, _ = Store.init(Path(folder) / "t")
        import_container(target, load_container(first))
        second = export_store(target)
        assert without_generated_at(second) == without_generated_at(first)
        for session_id in (None, "sess-p"):
            assert store_view(target, session_id) == store_view(store, session_id)
        assert diagnose(target).findings == []


@settings(max_examples=60, deadline=None)
@given(content=st.text(min_size=1).filter(lambda s: s.strip()), tag=st.text(max_size=5))
def test_property_any_content_survives_write_and_load(content: str, tag: str) -> None:
    node = new_node(content, source=Source(label="test", quote=content), tags=[tag], metadata={"note": content})
    text = write_container([node])
    loaded = load_container(text)
    assert loaded.nodes[0].content == content
    assert loaded.nodes == [node]


# ================================================================ import semantics


def conflict_scenario(tmp_path: Path) -> tuple[Store, str, str]:
    """Store B holds A's ledger; the returned container text holds a different version of one of A's memories."""
    source, _ = Store.init(tmp_path / "a")
    local_id = add(source, "The build uses make")
    add(source, "Releases are tagged vX.Y.Z")
    text = export_store(source)
    target, _ = Store.init(tmp_path / "b")
    import_container(target, load_container(text))
    changed = load_container(text)
    (node,) = [n for n in changed.nodes if n.id == local_id]
    node.content = "The build uses ninja"
    node.metadata["content_hash"] = content_hash(node.content)  # a well-formed record of another store
    return target, local_id, write_container(changed.nodes, changed.patches, changed.edges, changed.sessions)


def test_import_conflict_keeps_the_incoming_version_pending_beside_the_local_one(tmp_path: Path) -> None:
    """A differing copy never changes the local memory: it waits beside it, and the user decides."""
    store, local_id, changed = conflict_scenario(tmp_path)
    local_before = store.read_node(local_id)
    nodes_before = set(store.load_nodes())
    report = import_container(store, load_container(changed))
    (new_id_,) = set(store.load_nodes()) - nodes_before
    assert report.conflicts == [{"local": local_id, "incoming": local_id, "kept_as": new_id_}]
    local, new = store.read_node(local_id), store.read_node(new_id_)
    assert local == local_before and local.status == "active"
    assert new.content == "The build uses ninja" and new.status == "conflict_pending"
    assert new.metadata["imported_id"] == local_id
    assert local_id in new.relations["contradicts"]
    assert report.patch_id is not None and store.read_patch(report.patch_id).new_node_ids == [new_id_]
    assert [(e.from_id, e.to_id, e.type) for e in store.load_edges()] == [(new_id_, local_id, "contradicts")]
    listed = {entry["node"]["id"]: entry["contradicted_by"] for entry in api.conflicts(store)}
    assert listed == {new_id_: [local_id]}
    assert local_id in [n["id"] for n in store_view(store)]
    assert diagnose(store).findings == []

    resolved = api.resolve(store, [local_id, new_id_], content="The build uses ninja since May", reason="checked")
    final = resolved.new_nodes[0]
    assert store.read_node(local_id).status == "superseded" and store.read_node(new_id_).status == "superseded"
    assert store.read_node(final.id).status == "active"
    assert final.id in [n["id"] for n in store_view(store)]
    assert api.conflicts(store) == []
    assert diagnose(store).findings == []


def _conflict_patch(store: Store, new_node_id: str) -> str:
    (patch,) = [p for p in store.load_patches() if p.new_node_ids == [new_node_id]]
    assert patch.operation == "create"
    return patch.id


def test_rolling_back_an_import_conflict_restores_the_local_memory(tmp_path: Path) -> None:
    store, local_id, changed = conflict_scenario(tmp_path)
    new_id_ = import_container(store, load_container(changed)).conflicts[0]["kept_as"]
    assert isinstance(new_id_, str)
    rollback(store, _conflict_patch(store, new_id_), reason="keep ours")
    assert store.read_node(local_id).status == "active"
    assert store.read_node(local_id).content == "The build uses make"
    assert store.read_node(new_id_).status == "discarded"
    assert local_id in [n["id"] for n in store_view(store)]
    assert api.conflicts(store) == []
    assert diagnose(store).findings == []


def test_reimporting_a_conflicting_container_adds_no_second_copy(tmp_path: Path) -> None:
    store, _, changed = conflict_scenario(tmp_path)
    import_container(store, load_container(changed))
    before = files(store.root)
    import_container(store, load_container(changed))
    assert len(api.conflicts(store)) == 1
    assert files(store.root) == before


def test_dry_run_reports_a_conflict_and_writes_nothing(tmp_path: Path) -> None:
    store, local_id, changed = conflict_scenario(tmp_path)
    before = every_file(store.root)
    report = import_container(store, load_container(changed), dry_run=True)
    assert report.conflicts == [{"local": local_id, "incoming": local_id, "kept_as": None}]
    assert every_file(store.root) == before


def test_unbaked_container_statuses_are_replayed(store: Store) -> None:
    container = load_container(fixture("01_supersede_chain")[0])
    assert {n.id: n.status for n in container.nodes}["mem_chain_a"] == "active"  # unbaked in the file
    report = import_container(store, container)
    assert report.statuses == [{"node": "mem_chain_a", "from": "active", "to": "superseded"}]
    assert store.read_node("mem_chain_a").status == "superseded"
    assert [n["id"] for n in store_view(store)] == [n.id for n in container.effective_view()] == ["mem_chain_c"]
    assert diagnose(store).findings == []


@pytest.mark.parametrize("name", POSITIVE)
def test_every_conformance_fixture_imports_cleanly(store: Store, name: str) -> None:
    text, expected = fixture(name)
    import_container(store, load_container(text))
    view = effective_view(store.load_nodes().values(), store.load_patches(), expected["session_id"])
    assert [n.id for n in view] == sorted(expected["effective_view_node_ids"])
    assert diagnose(store).findings == []


def test_known_patch_with_different_content_keeps_the_local_one(tmp_path: Path) -> None:
    source, _ = build_store(tmp_path / "a")
    text = export_store(source)
    target, _ = Store.init(tmp_path / "b")
    import_container(target, load_container(text))
    changed = load_container(text)
    patch = changed.patches[1]
    patch.reason = "a different reason"
    before = files(target.root)
    report = import_container(
        target, load_container(write_container(changed.nodes, changed.patches, changed.edges, changed.sessions))
    )
    assert report.notes == [f"patch {patch.id} differs from the local one; the local one is kept"]
    assert patch.id in report.skipped["patches"] and report.added["patches"] == []
    assert report.conflicts == []
    assert files(target.root) == before
    assert target.read_patch(patch.id).reason != "a different reason"


def test_known_session_with_different_content_keeps_the_local_one(tmp_path: Path) -> None:
    source, _ = build_store(tmp_path / "a")
    target, _ = Store.init(tmp_path / "b")
    import_container(target, load_container(export_store(source)))
    local = target.read_session("sess-2")
    end_session(source, "sess-2")
    report = import_container(target, load_container(export_store(source)))
    assert report.notes == ["session sess-2 differs from the local one; the local one is kept"]
    assert target.read_session("sess-2") == local


# ================================================================ the reference implementation's demo store


def test_reference_demo_store_round_trip(reference_store: Store, tmp_path: Path) -> None:
    original = files(DATA / "reference-demo-store")
    container = load_container(export_store(reference_store))
    assert container_records(container) == store_records(reference_store)
    for session_id in (None, "demo-session"):
        assert container_view(container, session_id) == store_view(reference_store, session_id)
    assert container_view(container, "demo-session") != container_view(container)  # the overlay shows
    target, _ = Store.init(tmp_path / "imported")
    report = import_container(target, container)
    assert report.conflicts == [] and report.notes == [] and report.refused == []
    # The reference writes no create patch: the import names the memories no patch names in one of its own.
    assert report.patch_id is not None
    accounting = target.read_patch(report.patch_id)
    assert (accounting.operation, accounting.new_node_ids) == ("create", ["mem_abedb4edaeb1", "mem_efe299fc91f9"])
    records = store_records(target)
    records["patches"] = [p for p in records["patches"] if p["id"] != report.patch_id]
    assert records == store_records(reference_store)
    for session_id in (None, "demo-session"):
        assert store_view(target, session_id) == store_view(reference_store, session_id)
    assert diagnose(target).findings == []
    assert files(DATA / "reference-demo-store") == original


# ================================================================ command line


def run(root: Path, *args: str, input: str | bytes | None = None) -> Result:
    return CliRunner().invoke(cli, ["--root", str(root), *args], input=input, catch_exceptions=False)


def test_cli_export_writes_refuses_to_overwrite_and_forces(tmp_path: Path) -> None:
    store, _ = build_store(tmp_path / "a")
    out = tmp_path / "backup.cclg"
    first = run(store.root, "export", str(out))
    assert first.exit_code == 0, first.output
    assert first.stdout.startswith(f"wrote {out}:")
    written = out.read_bytes()
    assert container_records(load_container(written.decode("utf-8"))) == store_records(store)
    add(store, "One more memory")
    again = run(store.root, "export", str(out))
    assert again.exit_code == 2
    assert "exists" in again.stderr and "--force" in again.stderr
    assert out.read_bytes() == written
    forced = run(store.root, "export", str(out), "--force")
    assert forced.exit_code == 0, forced.output
    assert container_records(load_container(out.read_text("utf-8"))) == store_records(store)
    assert out.read_bytes() != written


def test_cli_export_to_stdout(tmp_path: Path) -> None:
    store, _ = build_store(tmp_path / "a")
    result = run(store.root, "export", "-")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("CCLG\t0.1\n")
    assert container_records(load_container(result.stdout)) == store_records(store)


def test_cli_export_unknown_session(tmp_path: Path) -> None:
    store, _ = build_store(tmp_path / "a")
    result = run(store.root, "export", str(tmp_path / "x.cclg"), "--session", "sess-9")
    assert result.exit_code == 2
    assert "no session sess-9" in result.stderr
    assert not (tmp_path / "x.cclg").exists()
    narrowed = run(store.root, "export", "-", "--session", "sess-1")
    assert [s.id for s in load_container(narrowed.stdout).sessions] == ["sess-1"]


def test_cli_open_describes_a_container(tmp_path: Path) -> None:
    store, ids = build_store(tmp_path / "a")
    path = tmp_path / "backup.cclg"
    path.write_text(export_store(store), "utf-8")
    result = run(store.root, "open", str(path), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    counts = {name: len(records) for name, records in store_records(store).items()}
    assert data["header"]["counts"] == data["counts"] == counts
    assert data["header"]["container"] == "cclg.container.v0.1"
    assert data["effective_view_node_ids"] == [n["id"] for n in store_view(store)]
    with_session = json.loads(run(store.root, "open", str(path), "--json", "--session", "sess-1").stdout)
    assert with_session["effective_view_node_ids"] == [n["id"] for n in store_view(store, "sess-1")]
    assert ids["overlay"] in with_session["effective_view_node_ids"]
    assert ids["overlay"] not in data["effective_view_node_ids"]


def test_cli_open_reads_stdin(tmp_path: Path) -> None:
    text, expected = fixture("03_scope_precedence")
    result = run(tmp_path, "open", "-", "--json", "--session", expected["session_id"], input=text.encode("utf-8"))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["effective_view_node_ids"] == expected["effective_view_node_ids"]


def test_cli_open_warns_about_an_unknown_section(tmp_path: Path) -> None:
    path = tmp_path / "extra.cclg"
    path.write_text(frame([*SAMPLE_BODY, "@extra", '{"kind": "note"}']), "utf-8")
    result = run(tmp_path, "open", str(path), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["unknown_sections"] == {"extra": 1}
    assert "warning: unknown section @extra" in result.stderr


def test_cli_open_refuses_a_damaged_file(tmp_path: Path) -> None:
    path = tmp_path / "damaged.cclg"
    path.write_text(SAMPLE.replace("B: refined fact.", "B: refined fast.", 1), "utf-8")
    result = run(tmp_path, "open", str(path), "--json")
    assert result.exit_code == 4
    assert "checksum mismatch" in result.stderr
    assert result.stdout == ""


def test_cli_open_unknown_operation(tmp_path: Path) -> None:
    path = CONFORMANCE / "07_unknown_patch_operation.cclg"
    refused = run(tmp_path, "open", str(path))
    assert refused.exit_code == 4 and "archive" in refused.stderr
    unvalidated = run(tmp_path, "open", str(path), "--no-validate")
    assert unvalidated.exit_code == 6 and "unknown patch operation 'archive'" in unvalidated.stderr


def test_cli_import_dry_run_writes_nothing(tmp_path: Path, store: Store) -> None:
    source, _ = build_store(tmp_path / "a")
    path = tmp_path / "backup.cclg"
    path.write_text(export_store(source), "utf-8")
    before = files(store.root)  # taking the store lock may create the (empty) lock file: not content
    result = run(store.root, "import-container", str(path), "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["dry_run"] is True
    assert report["added"] == {name: len(records) for name, records in store_records(source).items()}
    assert files(store.root) == before
    done = run(store.root, "import-container", str(path), "--json")
    assert done.exit_code == 0, done.output
    assert store_records(store) == store_records(source)


def test_cli_import_then_conflicts(tmp_path: Path) -> None:
    store, local_id, changed = conflict_scenario(tmp_path)
    path = tmp_path / "changed.cclg"
    path.write_text(changed, "utf-8")
    result = run(store.root, "import-container", str(path), "--json")
    assert result.exit_code == 0, result.output
    (conflict,) = json.loads(result.stdout)["conflicts"]
    assert conflict["local"] == local_id
    listed = json.loads(run(store.root, "conflicts", "--json").stdout)
    assert [(entry["node"]["id"], entry["contradicted_by"]) for entry in listed] == [(conflict["kept_as"], [local_id])]
    assert listed[0]["node"]["content"] == "The build uses ninja"
    assert store.read_node(local_id).status == "active"


def test_cli_import_refuses_a_damaged_file_and_writes_nothing(tmp_path: Path, store: Store) -> None:
    path = tmp_path / "cut.cclg"
    path.write_text(SAMPLE[: len(SAMPLE) // 2], "utf-8")
    before = every_file(store.root)
    result = run(store.root, "import-container", str(path))
    assert result.exit_code == 4 and "truncated" in result.stderr
    assert every_file(store.root) == before


def test_a_record_nested_too_deep_is_refused_when_loading(tmp_path: Path) -> None:
    node = new_node("deep", source=Source(label="seed"))
    deep: dict = {}
    inner = deep
    for _ in range(100):
        inner["a"] = {}
        inner = inner["a"]
    node.metadata["deep"] = deep
    text = write_container([node], [], [], [])
    with pytest.raises(ContainerError, match="nested more than 64 levels deep"):
        load_container(text)


def test_an_imported_memory_over_the_size_limit_is_refused_and_nothing_written(store: Store) -> None:
    node = new_node("word " * 25_000, source=Source(label="seed"))
    before = sorted(p.name for p in store.root.rglob("*.json"))
    with pytest.raises(ValidationError, match="over the limit of 100,000"):
        import_container(store, load_container(write_container([node], [], [], [])))
    assert sorted(p.name for p in store.root.rglob("*.json")) == before
