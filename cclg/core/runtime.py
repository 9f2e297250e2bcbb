"""Where a store's helper listens, and how its code is named: the standard library only (os, hashlib).

The hook looks for its store's helper before it imports anything else of cclg, so what it needs
to find the helper lives here, and every other part uses the same functions:

- ``store_root(root)``: the store folder a command or a hook event belongs to (``root``, else
  ``$CCLG_HOME``, else ``~/.cclg``); ``cclg.core.store.resolve_root`` is this as a ``Path``;
- ``runtime_folder(uid)``: the helpers' runtime folder (``$CCLG_SEMANTIC_DIR``; else
  ``$XDG_RUNTIME_DIR/cclg`` where that folder is what the XDG spec promises; else ``/tmp/cclg-<uid>``);
- ``socket_for(root, uid)``: the helper's socket of the store at ``root`` (``<hash>.sock``);
- ``private`` / ``check_private``: a folder or socket is this user's with no access for others
  (``Untrusted`` otherwise); ``peer_uid`` / ``peer_pid``: who serves or calls a Unix socket, from the kernel;
- ``sha256_hex(data)``: SHA-256 without OpenSSL's start-up cost (``cclg.core.ids`` serves it too);
- ``code_fingerprint(package)``: the size and modification time of every module of the package, which
  a helper compares with the code it started with before it handles a hook event.
"""

from __future__ import annotations

import os
import stat
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SOCKET_PATH_MAX = 107  # bytes of a Unix socket's path


class Untrusted(PermissionError):
    """The runtime folder, the socket or the process behind it is not this user's alone."""


def store_root(root: str | os.PathLike[str] | None = None) -> str:
    """The store folder: ``root`` if given, else ``$CCLG_HOME``, else ``~/.cclg`` (``~`` expanded)."""
    if root is not None and os.fspath(root) != "":
        return os.path.expanduser(os.fspath(root))
    return os.path.expanduser(os.environ.get("CCLG_HOME") or "~/.cclg")


def private(info: os.stat_result, uid: int) -> bool:
    """Whether ``info`` (an ``lstat``) is ``uid``'s with no access for group or others."""
    return info.st_uid == uid and not info.st_mode & 0o077


def check_private(path: object, info: os.stat_result, what: str, uid: int) -> None:
    """Refuse ``path`` (whose ``lstat`` is ``info``) unless it is ``uid``'s with no access for others."""
    if info.st_uid != uid:
        raise Untrusted(f"the {what} {path} belongs to uid {info.st_uid}, not {uid}")
    if info.st_mode & 0o077:
        raise Untrusted(f"the {what} {path} is open to others (mode {stat.S_IMODE(info.st_mode):o})")


def runtime_folder(uid: int) -> str:
    """Where the helpers' sockets and markers live (the caller checks the folder before use)."""
    chosen = os.environ.get("CCLG_SEMANTIC_DIR")
    if chosen:
        return chosen
    xdg = os.environ.get("XDG_RUNTIME_DIR") or ""
    if os.path.isabs(xdg) and len(os.fsencode(xdg)) <= SOCKET_PATH_MAX - len("/cclg/.sock") - 20:
        try:
            info = os.stat(xdg)
        except OSError:
            info = None
        if info is not None and stat.S_ISDIR(info.st_mode) and private(info, uid):
            return os.path.join(xdg, "cclg")
    return f"/tmp/cclg-{os.getuid()}"


def socket_for(root: str | os.PathLike[str], uid: int) -> str:
    """The helper's socket for the store at ``root``: named by a hash of the store's real path (short:
    a socket's path has at most 107 bytes, and a store's own path may be longer)."""
    digest = sha256_hex(os.path.realpath(os.fspath(root)).encode("utf-8", "surrogateescape"))
    return os.path.join(runtime_folder(uid), f"{digest[:20]}.sock")


def sha256_hex(data: bytes) -> str:
    """Hex SHA-256 of ``data``. CPython's own SHA-256 module loads in well under a millisecond; ``hashlib``
    loads OpenSSL first, which costs the hook about 10 ms of start-up. Both give the same digest;
    ``hashlib`` is the fallback where the built-in module is absent. The constructor is found once per
    process (a failed import is not cached by Python: retried on every call it cost 34 µs against 0.5 µs
    for the digest)."""
    if not _sha256:
        _sha256.append(_find_sha256())
    digest: str = _sha256[0](data).hexdigest()
    return digest


_sha256: list[Any] = []


def _find_sha256() -> Any:
    try:
        from _sha2 import sha256  # type: ignore[import-not-found]  # Python 3.12+
    except ImportError:
        try:
            from _sha256 import sha256  # type: ignore[import-not-found]  # Python 3.11
        except ImportError:
            from hashlib import sha256
    return sha256


def peer_uid(conn: object) -> int | None:
    """The uid of the process at the other end of the Unix socket ``conn``, from the kernel; None where
    the system has no way to tell (then the folder's and the socket's checks stand alone)."""
    import _socket  # not ``socket``, whose import costs the hook milliseconds

    if hasattr(_socket, "SO_PEERCRED"):  # Linux: struct ucred {pid_t pid; uid_t uid; gid_t gid}
        data = conn.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)  # type: ignore[attr-defined]
        return int.from_bytes(data[4:8], sys.byteorder)
    if hasattr(_socket, "LOCAL_PEERCRED"):  # macOS, FreeBSD: struct xucred {u_int version; uid_t uid; ...}
        data = conn.getsockopt(0, _socket.LOCAL_PEERCRED, 76)  # type: ignore[attr-defined]  # level SOL_LOCAL
        return int.from_bytes(data[4:8], sys.byteorder)
    return None


def peer_pid(conn: object) -> int | None:
    """The pid of the process at the other end of ``conn``, from the kernel where it says (Linux), else None."""
    import _socket

    if hasattr(_socket, "SO_PEERCRED"):
        data = conn.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)  # type: ignore[attr-defined]
        return int.from_bytes(data[0:4], sys.byteorder, signed=True)
    return None


def code_fingerprint(package: str) -> tuple[tuple[str, int, int], ...]:
    """(module path, size, modification time) of every module under ``package``: an upgrade, a
    reinstall or an edited checkout changes it."""
    found = []
    for folder, folders, files in os.walk(package):
        folders[:] = sorted(f for f in folders if f != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                info = os.stat(path)
                found.append((path, info.st_size, info.st_mtime_ns))
    return tuple(found)
