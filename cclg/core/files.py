"""File primitives: whole-file atomic writes and JSON-lines logs, knowing nothing of stores.

``atomic_write`` is the project's one way to write a whole file (the store's
records, the hosts' configuration files); ``write_temp`` and ``publish`` are its two
halves, for a writer that must make other files durable in between (``cclg.core.store``'s
staged records). ``read_jsonl`` reads a log without ever
parsing a torn last line. ``cclg.core.store`` builds the store's guarantees on these.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import stat
import time
from pathlib import Path

from cclg.core.fields import parse_json
from cclg.core.records import Record

TYPE_CHECKING = False  # typing costs the hook ~4 ms of start-up; annotations are strings anyway
if TYPE_CHECKING:
    from typing import Any


class JsonlContents(Record):
    """What a JSON-lines log holds: parsed records, unreadable lines, a torn tail."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.bad_lines: list[tuple[int, str]] = []
        self.torn_tail = b""


def read_jsonl(path: Path) -> JsonlContents:
    """Parse a log. A final line without ``\\n`` is reported as ``torn_tail``, never parsed."""
    result = JsonlContents()
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return result
    body, sep, tail = data.rpartition(b"\n")
    if not sep:
        body, tail = b"", data
    result.torn_tail = tail
    if not body:
        return result
    for number, line in enumerate(body.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            value = parse_json(line)
        except ValueError as exc:  # not JSON, not UTF-8 or nested too deep
            result.bad_lines.append((number, f"not JSON: {exc}"))
            continue
        if not isinstance(value, dict):
            result.bad_lines.append((number, "not a JSON object"))
            continue
        result.records.append(value)
    return result


def set_aside_torn_tail(fd: int, path: Path) -> int:
    """With the log ``path`` open as ``fd`` and locked: move a final line lacking its newline (left by a
    killed writer) to ``<log>.torn``; returns its length in bytes (0 when the log ends whole)."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return 0
    chunk = 1 << 16
    end = size
    while True:
        start = max(0, end - chunk)
        block = os.pread(fd, end - start, start)
        cut = block.rfind(b"\n")
        if cut >= 0:
            keep = start + cut + 1
            break
        if start == 0:
            keep = 0
            break
        end = start
    fragment = os.pread(fd, size - keep, keep)
    torn_path = path.with_name(path.name + ".torn")
    tfd = os.open(torn_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(tfd, fragment + b"\n")
        os.fsync(tfd)
    finally:
        os.close(tfd)
    os.ftruncate(fd, keep)
    return len(fragment)


def read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object in a small file cclg keeps for itself (a cache, a marker), read with the bounded
    reader; empty when the file is missing, unreadable, not JSON or not an object (it is made anew)."""
    try:
        value = parse_json(path.read_bytes())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def jsonl_line(record: dict[str, Any]) -> bytes:
    return (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")


def safe_name(name: str, limit: int = 80) -> str:
    """A file name made of letters, digits, ``.``, ``_`` and ``-`` only, not starting with a dot."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip(".-") or "raw"
    return cleaned[:limit]


def atomic_write(
    path: Path,
    data: bytes,
    *,
    replace: bool = True,
    durable: bool = True,
    exclusive: bool = False,
    mode: int = 0o600,
    temp_dir: Path | None = None,
) -> None:
    """The project's one way to write a whole file: a temp file, then a rename, so a reader sees
    the old file or the new one, never half.

    - ``replace=False``: an existing file is a ``FileExistsError`` (published with a hard
      link, which fails instead of overwriting; or, with ``exclusive`` when the caller
      holds a lock that every writer of the folder takes, a check then a rename).
    - ``durable``: fsync the file and its folder (off inside a store batch).
    - The new file keeps the mode of the file it replaces, else gets ``mode``.
    - ``temp_dir``: where the temp file is written, on the file's own file system (the store
      keeps its temp files in one folder, so that those of a killed writer are found without
      listing every folder); by default the file's own folder.
    """
    if replace:
        with contextlib.suppress(FileNotFoundError):
            mode = stat.S_IMODE(os.stat(path).st_mode)
    tmp = write_temp(temp_dir or path.parent, path.name, data, durable=durable, mode=mode)
    publish(tmp, path, replace=replace, exclusive=exclusive, durable=durable)


def write_temp(folder: Path, name: str, data: bytes, *, durable: bool = True, mode: int = 0o600) -> Path:
    """Write ``data`` to a new temp file in ``folder`` for the file ``name``; returns its path.

    The name (``.<name>.<pid>.<random>.tmp``, see ``TEMP_RE``) says which process wrote it, so
    the temp files of a killed writer can be told from those of a live one.
    """
    tmp = folder / f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        if mode & 0o077:
            os.fchmod(fd, mode)  # the umask may have narrowed the group and other bits given to open
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if durable:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    return tmp


def publish(tmp: Path, path: Path, *, replace: bool = True, exclusive: bool = False, durable: bool = True) -> None:
    """Give the temp file ``tmp`` its final name ``path`` (``atomic_write`` says how ``replace`` and
    ``exclusive`` choose between a rename and a hard link). The temp file is gone afterwards,
    whether this succeeded or not."""
    try:
        if replace:
            os.replace(tmp, path)
        elif exclusive:
            if path.exists():
                raise FileExistsError(errno.EEXIST, "refusing to overwrite", str(path))
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)
            finally:
                tmp.unlink(missing_ok=True)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


TEMP_RE = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.[0-9a-f]+\.tmp$")


def private_folders(path: str | os.PathLike[str]) -> None:
    """Make the folder ``path`` and every missing folder above it owner-only (0700), as ``mkdir -p``
    would, but for each level: ``os.makedirs(mode=...)`` gives the mode to the last one only, and the
    ones between got the umask's default (0755 under the usual 022)."""
    missing = []
    folder = Path(path)
    while not folder.is_dir():
        missing.append(folder)
        folder = folder.parent
    for each in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile by another process
            os.mkdir(each, 0o700)


def create_private(path: Path) -> None:
    """Make sure the file at ``path`` exists and is readable by its owner only (0600): a file that
    another library (SQLite) opens, and would otherwise create with the umask's default mode."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if stat.S_IMODE(os.fstat(fd).st_mode) & 0o077:
            with contextlib.suppress(PermissionError):  # not ours to change
                os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def flock_before(fd: int, deadline: float, *, poll: float) -> bool:
    """Take an exclusive ``flock`` on ``fd``, trying every ``poll`` seconds until ``deadline`` (of
    ``time.monotonic``); whether it was taken. Errors other than "held by another" are raised."""
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            if time.monotonic() > deadline:
                return False
            time.sleep(poll)


def open_regular(path: str | os.PathLike[str], *, follow: bool = True) -> tuple[int, os.stat_result]:
    """Open ``path`` for reading only when it is a regular file; returns the descriptor and its ``fstat``.

    The one way to open a file that someone else named (a user's argument, a repository's file, a
    host's payload): it never waits on a FIFO (``O_NONBLOCK``), never takes a device (``/dev/zero``)
    or a folder, and with ``follow=False`` never goes through a symbolic link (``O_NOFOLLOW``). The
    check is made on the opened descriptor, so the file cannot be swapped between check and read. A
    refusal is an ``OSError`` whose ``strerror`` says why."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise OSError(errno.ELOOP, "a symbolic link, not followed", str(path)) from None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return fd, info


def read_open(fd: int, size: int) -> bytes:
    """At most ``size`` bytes of the open file ``fd`` from where it is (less at its end)."""
    chunks = []
    while size > 0:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def read_regular(path: str | os.PathLike[str], limit: int | None = None, *, follow: bool = True) -> bytes:
    """The bytes of the regular file ``path`` (``open_regular`` says what is refused), read no further than
    its size when opened; a file over ``limit`` bytes is refused before any of it is read."""
    fd, info = open_regular(path, follow=follow)
    try:
        if limit is not None and info.st_size > limit:
            raise OSError(errno.EFBIG, f"larger than {limit:,} bytes", str(path))
        return read_open(fd, info.st_size)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
