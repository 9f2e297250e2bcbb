"""The instruction-file sync under random edit sequences of a CLAUDE.md (insert, change, delete, move
lines): after every sync the current memories are the file's current items, and every earlier
version of a line is reachable through the lineage of the memory that holds it now (or last held it).

The lines are distinct instructions: a new or changed line is never alike (``DISTINCT``) another line the
file has or had. Two near-identical lines have no identity a reader could tell apart (insert B beside A,
then change A into something close to both: either pairing is a true history), so the property does not
ask which one a sync chose there; the current memories are the file's items whatever it chose.
"""

from __future__ import annotations

import difflib
import shutil
import string
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cclg import api
from cclg.api import sources
from cclg.core.store import Store

WORD = st.text(alphabet=string.ascii_lowercase, min_size=5, max_size=8)
LINE = st.lists(WORD, min_size=6, max_size=7, unique=True)
EDIT = st.one_of(
    st.tuples(st.just("insert"), st.integers(0, 50), LINE),
    st.tuples(st.just("change"), st.integers(0, 50), st.tuples(st.integers(0, 6), WORD)),
    st.tuples(st.just("delete"), st.integers(0, 50), st.none()),
    st.tuples(st.just("move"), st.integers(0, 50), st.integers(0, 50)),
)


DISTINCT = 0.5  # a line is at most this alike (difflib ratio) any other line's text, now or before


def distinct(text: str, others: list[Line], mine: Line | None = None) -> bool:
    return all(
        difflib.SequenceMatcher(None, text, version).ratio() < DISTINCT
        for line in others
        if line is not mine
        for version in line.versions
    )


@dataclass
class Line:
    """A line of the file as the edits see it: every text it had, the last one current."""

    versions: list[str] = field(default_factory=list)


def apply(lines: list[Line], edit: tuple[str, int, object], every: list[Line]) -> None:
    op, at, arg = edit
    if op == "insert":
        text = " ".join(arg)  # type: ignore[arg-type]
        if distinct(text, every):
            line = Line([text])
            lines.insert(at % (len(lines) + 1), line)
            every.append(line)
    elif lines and op == "change":
        line = lines[at % len(lines)]
        words = line.versions[-1].split()
        position, word = arg  # type: ignore[misc]
        words[position % len(words)] = word
        text = " ".join(words)
        if text not in line.versions and distinct(text, every, line):
            line.versions.append(text)
    elif lines and op == "delete":
        lines.pop(at % len(lines))
    elif lines and op == "move":
        line = lines.pop(at % len(lines))
        lines.insert(arg % (len(lines) + 1), line)  # type: ignore[operator]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(start=st.lists(LINE, min_size=1, max_size=6), steps=st.lists(st.lists(EDIT, min_size=1, max_size=3), max_size=5))
def test_sync_follows_every_edit_and_keeps_history(
    tmp_path_factory: object, start: list[list[str]], steps: list[list[tuple[str, int, object]]]
) -> None:
    root = Path(tmp_path_factory.mktemp("prop"))  # type: ignore[attr-defined]
    try:
        store, _ = Store.init(root / "store")
        claude = root / "repo" / "CLAUDE.md"
        claude.parent.mkdir()
        lines: list[Line] = []
        every: list[Line] = []
        for words in start:
            apply(lines, ("insert", len(lines), words), every)
        for number, step in enumerate([[], *steps]):
            for edit in step:
                apply(lines, edit, every)
            claude.write_text("# Rules\n\n" + "".join(f"- {line.versions[-1]}\n" for line in lines))
            if number == 0:
                sources.add_source(store, "claude-md", str(claude.parent))
            else:
                sources.sync_sources(store)
            live = {n.content for n in store.load_nodes().values() if n.status == "active"}
            assert live == {line.versions[-1] for line in lines}, "the current memories are the file's items"
        check_lineage(store, every)
    finally:
        shutil.rmtree(root)


def check_lineage(store: Store, every: list[Line]) -> None:
    """Each line's memory (current, or expired once the line went) reaches every text the line had."""
    nodes = store.load_nodes().values()
    for line in every:
        holders = sorted(
            (n for n in nodes if n.content == line.versions[-1]), key=lambda n: (n.status == "active", n.created_at)
        )
        if not holders:  # a line inserted and changed within one sync: only its last text was ever read
            continue
        chain = api.memory_lineage(store, holders[-1].id)
        contents = {m["content"] for m in chain["members"]}
        synced = [v for v in line.versions if any(n.content == v for n in nodes)]
        assert set(synced) <= contents, f"earlier versions of {line.versions[-1]!r} are in its lineage"
