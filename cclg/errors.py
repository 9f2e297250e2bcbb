"""One error hierarchy for the whole library.

Every error the library raises on purpose is a ``CclgError``. Each carries the
process exit code the command-line surfaces use, so translation to an exit code
happens in one place (``cclg.cli``) and the library never imports click. Every
class is importable from ``cclg`` (``from cclg import NotFoundError``)::

    CclgError                        1
    ├── UsageError                   2  a bad argument or option value
    │   └── SearchIndexDamage        2  a code graph's search index that cannot be read (cclg.codegraph.rank)
    ├── StoreNotFoundError           3  the folder is not a store
    ├── ValidationError              4  a record or input failed strict parsing
    │   ├── SecretError              4  a write that holds a secret (cclg.core.secrets)
    │   └── ContainerError           4  a .cclg file that must not be trusted (cclg.intake.container)
    ├── NotFoundError                5  no such memory, patch or session
    ├── IllegalPatchError            6  the ledger refused the patch
    ├── UnknownPatchOperationError   6  a patch operation the contract does not name
    ├── ConcurrencyError             7  the store stayed locked
    ├── DiskError                    8  the disk refused the write
    └── SyncError                    9  git or the remote refused a sync (cclg.sync); the store took nothing half
"""

from __future__ import annotations

import errno


class CclgError(Exception):
    """Base class: a problem the user can act on. ``exit_code`` is what the CLI returns."""

    exit_code = 1


class UsageError(CclgError):
    """A bad argument or option value."""

    exit_code = 2


class StoreNotFoundError(CclgError):
    """The folder given as the store is not a cclg store."""

    exit_code = 3


class ValidationError(CclgError):
    """A record failed strict parsing. ``problems`` lists every problem found."""

    exit_code = 4

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems if problems is not None else [message]


class NotFoundError(CclgError):
    """An id (node, patch, session) that the store does not hold."""

    exit_code = 5


class IllegalPatchError(CclgError):
    """A patch the ledger refuses: wrong target state, missing content, unknown target."""

    exit_code = 6


class UnknownPatchOperationError(CclgError):
    """A patch operation outside the closed set of the format. Never treated as harmless."""

    exit_code = 6


class ConcurrencyError(CclgError):
    """A lock could not be taken in time."""

    exit_code = 7


class DiskError(CclgError):
    """The disk refused a write (full, over quota, read-only, permission denied, a folder where a file
    should be). Every write is a temp file renamed into place, so the refused one was never published."""

    exit_code = 8


class SyncError(CclgError):
    """A sync that git or the remote refused (unreachable, rejected the push again and again, a merge
    git could not make). What it brought in before is whole; what it did not push waits for the next."""

    exit_code = 9


# What the disk says when it refuses: full, over quota, a file too large for the limits, read-only,
# permission denied, a folder where a file should be (a `.lock` made a folder) or the reverse.
DISK_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM, errno.EISDIR, errno.ENOTDIR}
)
# SQLite's primary result codes for the same: SQLITE_PERM, SQLITE_READONLY, SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN.
SQLITE_DISK_CODES = frozenset({3, 8, 10, 13, 14})


def disk_refusal(exc: BaseException) -> DiskError | None:
    """``exc`` as a ``DiskError`` when it is the disk refusing (an ``OSError`` or a SQLite error of
    the kinds above), with a message naming the file; None for anything else."""
    if isinstance(exc, DiskError):
        return exc
    if isinstance(exc, OSError) and exc.errno in DISK_ERRNOS:
        where = f": {exc.filename}" if exc.filename else ""
        return DiskError(f"the disk refused the write ({exc.strerror or exc}{where}); nothing was half-written")
    code = getattr(exc, "sqlite_errorcode", None)
    if type(exc).__module__ == "sqlite3" and isinstance(code, int) and code & 0xFF in SQLITE_DISK_CODES:
        return DiskError(f"the disk refused the write ({exc}); nothing was half-written")
    return None
