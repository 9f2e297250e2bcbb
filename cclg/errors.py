"""One error hierarchy for the whole library.

Every error the library raises on purpose is a ``CclgError``. Each carries the
process exit code the command-line surfaces use, so translation to an exit code
happens in one place (``cclg.cli``) and the library never imports click.
"""

from __future__ import annotations


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
