"""Who the semantic client talks to, and what its runtime folder keeps (issue 27, rule 6).

The client sends every prompt to the helper's socket, so it first checks the runtime folder (a
folder of this user's, not a link, no access for group or others), the socket (a socket of this
user's, 0600) and, once connected, the peer's credentials (``SO_PEERCRED``); anything else is
refused, logged in the store's ``audit/hook_failures.jsonl``, and the prompt is answered lexically
without a byte sent. There is no second user on a test machine, so the tests make the folder or
the socket wrong themselves, or change the uid the client expects; as root, one test also runs a
real listener under another uid. None of these tests needs the model (tests/test_semantic.py does).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cclg.core.store import Store
from cclg.intake.new_memories import add_memory
from cclg.retrieval import semantic
from tests.test_hook import HOOK

PROMPT = "the quarterly numbers for the acquisition are in the board deck"


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    monkeypatch.delenv("CCLG_SEMANTIC", raising=False)
    monkeypatch.setenv("CCLG_SEMANTIC_DIR", str(folder))
    return folder


class Listener:
    """A stand-in for whoever listens on a store's socket name: it records what it is sent and
    answers like a helper would."""

    def __init__(self, path: Path, mode: int = 0o600) -> None:
        self.received: list[bytes] = []
        self.connections = 0
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        os.chmod(path, mode)
        self.server.listen(4)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                conn.settimeout(2.0)
                data = b""
                try:
                    while not data.endswith(b"\n"):
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        data += chunk
                    self.received.append(data)
                    if data:
                        conn.sendall(b'{"hits": []}\n')
                except OSError:
                    self.received.append(data)

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def store(tmp_path: Path) -> Store:
    created, _ = Store.init(tmp_path / "store")
    add_memory(created, "The board deck lives in the finance share.", source="user")
    return created


@pytest.fixture
def listener(store: Store, runtime: Path) -> Iterator[Listener]:
    heard = Listener(semantic.socket_path(store.root))
    yield heard
    heard.close()


def _refusals(store: Store) -> list[str]:
    if not store.hook_failures_path.exists():
        return []
    records = [json.loads(line) for line in store.hook_failures_path.read_text().splitlines()]
    return [r["error"] for r in records if r["event"] == "semantic"]


def _ask(store: Store) -> list[tuple[str, float]] | None:
    return semantic.similar(store, PROMPT, limit=3, timeout=2.0)


def test_a_trusted_helper_is_asked(store: Store, listener: Listener) -> None:
    """The baseline the refusals below differ from by one thing each."""
    assert _ask(store) == []
    assert listener.received and PROMPT.encode() in listener.received[0]
    assert _refusals(store) == []


@pytest.mark.parametrize("mode", [0o777, 0o755, 0o750, 0o701], ids=oct)
def test_the_client_refuses_a_runtime_folder_others_can_enter(
    store: Store, runtime: Path, listener: Listener, mode: int
) -> None:
    """Rule 6: another user who made the runtime folder first (and so could listen on its sockets)
    leaves it open to others; the client sends nothing there."""
    os.chmod(runtime, mode)
    assert _ask(store) is None
    assert listener.connections == 0
    assert len(_refusals(store)) == 1 and "open to others" in _refusals(store)[0]


def test_the_client_refuses_a_runtime_folder_of_another_user(
    store: Store, listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(semantic, "expected_uid", lambda: os.geteuid() + 1)
    assert _ask(store) is None
    assert listener.connections == 0
    assert "belongs to uid" in _refusals(store)[0]


def test_the_client_refuses_a_runtime_folder_that_is_a_link(
    store: Store, tmp_path: Path, runtime: Path, listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A link in /tmp is its maker's to point elsewhere later, whatever it points to now."""
    link = tmp_path / "link"
    link.symlink_to(runtime)
    monkeypatch.setenv("CCLG_SEMANTIC_DIR", str(link))
    assert _ask(store) is None
    assert listener.connections == 0
    assert "not a folder" in _refusals(store)[0]


def test_the_client_refuses_a_socket_others_can_reach(store: Store, runtime: Path) -> None:
    heard = Listener(semantic.socket_path(store.root), mode=0o666)
    try:
        assert _ask(store) is None
        assert heard.connections == 0
        assert "open to others" in _refusals(store)[0]
    finally:
        heard.close()


def test_the_client_refuses_a_peer_that_is_not_us(
    store: Store, listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder and the socket are ours, the process behind the socket is not: connected, checked,
    and closed before the request is written."""
    monkeypatch.setattr(semantic, "_peer_uid", lambda conn: os.geteuid() + 1)
    assert _ask(store) is None
    assert listener.received in ([], [b""]), "not one byte of the prompt"
    assert "served by uid" in _refusals(store)[0]


@pytest.mark.skipif(not hasattr(socket, "SO_PEERCRED"), reason="no SO_PEERCRED on this system")
def test_the_peer_uid_is_read_from_the_kernel() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        assert semantic._peer_uid(ours) == os.geteuid()


@pytest.mark.skipif(os.geteuid() != 0 or not hasattr(socket, "SO_PEERCRED"), reason="needs root to be another user")
def test_a_listener_running_as_another_user_gets_nothing(store: Store, runtime: Path) -> None:
    """The attack itself: the folder and the socket file are ours (made by root), the listening process
    has become another user (nobody) before listening; only its credentials give it away."""
    path = semantic.socket_path(store.root)
    script = (
        "import os, socket, sys\n"
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
        f"s.bind({str(path)!r}); os.chmod({str(path)!r}, 0o600)\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "s.listen(1); print('listening', flush=True)\n"
        "c, _ = s.accept(); c.settimeout(5)\n"
        "print(repr(c.recv(65536)), flush=True)\n"
    )
    other = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == "listening"
        assert _ask(store) is None
        assert other.stdout.readline().strip() == "b''", "the connection closed with nothing sent"
        assert "served by uid 65534" in _refusals(store)[0]
    finally:
        other.kill()
        other.wait()


def test_the_hook_sends_no_prompt_into_an_open_runtime_folder(store: Store, runtime: Path, listener: Listener) -> None:
    """End to end: the hook as the host runs it still answers (lexically), and logs the refusal."""
    os.chmod(runtime, 0o777)
    payload = {"session_id": "s1", "hook_event_name": "UserPromptSubmit", "prompt": PROMPT}
    done = subprocess.run(
        [*HOOK, "--root", str(store.root), "user-prompt"],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=60,
        env={**os.environ, "CCLG_SEMANTIC": "on"},
    )
    assert done.returncode == 0 and "board deck" in json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert listener.connections == 0 and listener.received == []
    assert "open to others" in _refusals(store)[0]


def test_a_refusal_that_stays_is_logged_once_an_hour_not_on_every_prompt(
    store: Store, runtime: Path, listener: Listener
) -> None:
    """Rule 6: every prompt into a runtime folder that stays wrong wrote a line to the hook failure log,
    which so grew without bound. The first refusal of each folder and reason is logged, then at most one
    an hour while it stays (the marker says when each was last logged; the log is never read)."""
    os.chmod(runtime, 0o777)
    for session in ("s1", "s2", "s3"):  # a new session each: a session is given a memory once
        payload = {"session_id": session, "hook_event_name": "UserPromptSubmit", "prompt": PROMPT}
        done = subprocess.run(
            [*HOOK, "--root", str(store.root), "user-prompt"],
            input=json.dumps(payload).encode(),
            capture_output=True,
            timeout=60,
            env={**os.environ, "CCLG_SEMANTIC": "on"},
        )
        assert done.returncode == 0, done.stderr
        assert "board deck" in json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert len(_refusals(store)) == 1 and "open to others" in _refusals(store)[0]
    os.chmod(runtime, 0o755)  # another reason: logged at once
    assert _ask(store) is None and _ask(store) is None
    assert len(_refusals(store)) == 2 and "mode 755" in _refusals(store)[1]
    marker = store.semantic_refusals_path
    logged = json.loads(marker.read_text())
    marker.write_text(json.dumps({error: when - semantic.REFUSAL_EVERY - 1 for error, when in logged.items()}))
    assert _ask(store) is None and _ask(store) is None  # an hour on: once more
    assert len(_refusals(store)) == 3 and "mode 755" in _refusals(store)[2]
    assert listener.connections == 0


def test_the_helper_refuses_to_start_in_a_folder_too_open(store: Store, runtime: Path) -> None:
    os.chmod(runtime, 0o755)
    done = subprocess.run(
        [sys.executable, "-m", "cclg.retrieval.semantic", "--root", str(store.root), "--idle", "1"],
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 1 and b"Traceback" not in done.stderr
    assert sorted(os.listdir(runtime)) == [], "no lock, no socket, no marker"
    assert "open to others" in _refusals(store)[0]


# ---------------------------------------------------------------- where the runtime folder is


@pytest.fixture
def xdg() -> Iterator[Path]:
    """A folder like /run/user/<uid> (short, as a socket's path must be)."""
    folder = Path(tempfile.mkdtemp(prefix="xdg", dir="/tmp"))
    yield folder
    shutil.rmtree(folder)


def test_the_runtime_folder_prefers_xdg_runtime_dir(xdg: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CCLG_SEMANTIC_DIR", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(xdg))
    assert semantic.runtime_dir() == xdg / "cclg"
    fallback = Path(f"/tmp/cclg-{os.getuid()}")
    os.chmod(xdg, 0o755)  # not what the XDG spec promises: not used
    assert semantic.runtime_dir() == fallback
    os.chmod(xdg, 0o700)
    with monkeypatch.context() as other_user:
        other_user.setattr(semantic, "expected_uid", lambda: os.geteuid() + 1)
        assert semantic.runtime_dir() == fallback
    assert semantic.runtime_dir() == xdg / "cclg"
    monkeypatch.setenv("XDG_RUNTIME_DIR", "relative/run")
    assert semantic.runtime_dir() == fallback
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(xdg) + "/" + "x" * 80)  # a socket there would pass 107 bytes
    (xdg / ("x" * 80)).mkdir(mode=0o700)
    assert semantic.runtime_dir() == fallback
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert semantic.runtime_dir() == fallback


# ---------------------------------------------------------------- the runtime folder's litter


def _age(path: Path, seconds: float) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past), follow_symlinks=False)


def test_stale_runtime_files_are_swept_when_a_helper_starts(
    store: Store, runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Helpers killed or gone leave their lock, socket and markers; the next start removes what no live
    helper holds and what has expired, and leaves everything else."""
    started: list[object] = []
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: started.append(a))

    def files(stem: str, *suffixes: str) -> None:
        for suffix in suffixes:
            (runtime / f"{stem}{suffix}").write_text("1\n")

    gone, nolock, expired, recent, live = (f"{n:020x}" for n in range(5))  # as a store's socket is named
    files(gone, ".lock", ".sock", ".start")  # a helper killed with SIGKILL
    files(nolock, ".sock")  # a socket without its lock
    files(expired, ".off")
    _age(runtime / f"{expired}.off", semantic.OFF_SECONDS + 60)
    _age(runtime / f"{gone}.start", semantic.START_INTERVAL + 60)
    files(recent, ".off", ".start")  # still meaningful
    files(live, ".lock", ".sock")  # a helper that runs: it holds its lock
    (runtime / "notes.txt").write_text("not a helper's: left alone")
    _age(runtime / "notes.txt", semantic.OFF_SECONDS + 60)
    held = os.open(runtime / f"{live}.lock", os.O_RDWR)
    fcntl.flock(held, fcntl.LOCK_EX)
    try:
        assert semantic.similar(store, PROMPT, limit=3) is None  # no helper: one is started
    finally:
        os.close(held)
    mine = semantic.socket_path(store.root).stem
    remaining = sorted(os.listdir(runtime))
    expected = [f"{live}.lock", f"{live}.sock", "notes.txt", f"{recent}.off", f"{recent}.start", f"{mine}.start"]
    assert remaining == sorted(expected) and len(started) == 1


def test_a_helper_that_cannot_load_the_model_leaves_only_its_off_marker(store: Store, runtime: Path) -> None:
    """Its lock went with it (133 stale files piled up in one day of tests before)."""
    done = subprocess.run(
        [sys.executable, "-m", "cclg.retrieval.semantic", "--root", str(store.root), "--idle", "1"],
        capture_output=True,
        timeout=60,
        env={**os.environ, "CCLG_SEMANTIC_TEST_UNAVAILABLE": "package missing (test)"},
    )
    assert done.returncode == 0, done.stderr
    stem = semantic.socket_path(store.root).stem
    assert sorted(os.listdir(runtime)) == [f"{stem}.off"]
    assert (os.stat(runtime / f"{stem}.off").st_mode & 0o777) == 0o600


def test_a_bad_idle_setting_is_a_clear_error_not_a_traceback(
    store: Store, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``CCLG_SEMANTIC_IDLE`` is read from the environment: a value that is no number ends the helper
    with one line naming the variable (exit 2), before it serves anything."""
    monkeypatch.setenv("CCLG_SEMANTIC_IDLE", "ten minutes")
    with pytest.raises(SystemExit) as exited:
        semantic.main(["--root", str(store.root)])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "CCLG_SEMANTIC_IDLE must be a number of seconds, not 'ten minutes'" in err and "Traceback" not in err
