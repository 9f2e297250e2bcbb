"""Ids, timestamps and content hashes: what names a record and orders it.

Ids are ``<prefix>_`` followed by 26 characters of lower-case Crockford base32:
48 bits of milliseconds since the epoch, then 80 random bits (os.urandom), so ids
sort by creation time and cannot be guessed. An id's short form (``short_id``) is
``<prefix>~`` and its last eight characters. Times are ISO 8601 in UTC with
microseconds. ``FixedClock`` makes both deterministic (the demo store).

A content hash is the SHA-256 of the NFC-normalised text with ``\n`` newlines,
so the same words hash the same whatever wrote them.
"""

from __future__ import annotations

import _thread
import contextlib
import json
import os
import re
import time
import unicodedata
from collections.abc import Iterator

from cclg.core.runtime import sha256_hex as sha256_hex  # SHA-256 without OpenSSL's start-up cost (re-exported)
from cclg.errors import UsageError, ValidationError

TYPE_CHECKING = False  # typing costs the hook ~4 ms of start-up; annotations are strings anyway
if TYPE_CHECKING:
    from datetime import datetime
    from typing import Any


_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"
_ID_SUFFIX = r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}"
SESSION_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_id_lock = _thread.allocate_lock()  # threading itself costs start-up time
_last_id_parts: tuple[int, int] = (0, 0)


def _base32(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def _system_id(prefix: str) -> str:
    global _last_id_parts
    with _id_lock:
        millis = time.time_ns() // 1_000_000
        last_millis, last_random = _last_id_parts
        if millis <= last_millis:
            millis, rand = last_millis, last_random + 1
        else:
            rand = int.from_bytes(os.urandom(10), "big")
        _last_id_parts = (millis, rand)
    return f"{prefix}_{_base32(millis, 10)}{_base32(rand % (1 << 80), 16)}"


def _system_now() -> str:
    """``datetime.now(UTC).isoformat(timespec="microseconds")``, without importing datetime (1.7 ms of
    every hook's start-up)."""
    seconds, nanos = divmod(time.time_ns(), 1_000_000_000)
    return f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(seconds))}.{nanos // 1000:06d}+00:00"


class FixedClock:
    """Deterministic ids and times, for generated fixtures such as the demo store.

    Ids are ``<prefix>_<tag><n>`` and each call to ``now`` advances one second
    from ``start``.
    """

    def __init__(self, start: str, tag: str = "demo") -> None:
        self._moment = parse_time(start)
        self._tag = tag
        self._count = 0

    def new_id(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}_{self._tag}{self._count:04d}"

    def now(self) -> str:
        from datetime import timedelta

        value = self._moment.isoformat()
        self._moment += timedelta(seconds=1)
        return value


_clock: FixedClock | None = None


def _forget_last_id() -> None:
    # A forked child must not continue the parent's sequence: two processes would
    # otherwise make the same id within one millisecond.
    global _last_id_parts
    _last_id_parts = (0, 0)


os.register_at_fork(after_in_child=_forget_last_id)


@contextlib.contextmanager
def fixed_clock(clock: FixedClock) -> Iterator[FixedClock]:
    """Within this block, ``new_id`` and ``now_iso`` come from ``clock``."""
    global _clock
    previous, _clock = _clock, clock
    try:
        yield clock
    finally:
        _clock = previous


def new_id(prefix: str) -> str:
    """A fresh id such as ``mem_01jq...``: time-sortable, 80 unguessable bits.

    Within one process, ids made in the same millisecond still sort in creation
    order (the random part is incremented instead of redrawn).
    """
    return _clock.new_id(prefix) if _clock is not None else _system_id(prefix)


SHORT_ID_CHARS = 8  # of an id's end in its short form: 40 random bits, and ids made in one batch differ there


def short_id(record_id: str) -> str:
    """The short form of an id, ``<prefix>~`` and its last ``SHORT_ID_CHARS`` characters
    (``mem_01jq...md3k8x2q`` -> ``mem~md3k8x2q``), which the pack's possibly related lines show and
    every command that takes an id accepts (``cclg.api.resolve_memory_id``). The end, not the start:
    an id starts with its creation time, so memories made in the same second share a long prefix,
    while the end is random (and counts up within one millisecond)."""
    prefix, _, rest = record_id.partition("_")
    return f"{prefix}~{rest[-SHORT_ID_CHARS:]}"


def is_valid_id(value: object, prefix: str) -> bool:
    return isinstance(value, str) and re.fullmatch(f"{prefix}_{_ID_SUFFIX}", value) is not None


def is_valid_session_id(value: object) -> bool:
    return isinstance(value, str) and SESSION_ID_RE.fullmatch(value) is not None


def now_iso() -> str:
    """The current UTC time as ISO 8601 with microseconds and ``+00:00``."""
    return _clock.now() if _clock is not None else _system_now()


def parse_moment(value: str | None, name: str) -> datetime | None:
    """A time a user gives (``--since``, ``--valid-until``, ...): ISO 8601, a date or a date-time,
    UTC when it names no offset; a ``UsageError`` naming ``name`` when it does not parse."""
    from datetime import UTC, datetime

    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise UsageError(f"{name} must be an ISO 8601 date or time, got {value!r}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def parse_time(value: str) -> datetime:
    """Parse an ISO 8601 timestamp that carries a timezone; ``ValueError`` otherwise."""
    from datetime import datetime

    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp {value!r} has no timezone")
    return parsed


# ---------------------------------------------------------------- content hash


def normalize_text(text: str) -> str:
    """NFC, with ``\\r\\n`` and lone ``\\r`` turned into ``\\n``."""
    return unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))


def _normalize_value(value: Any) -> Any:
    if isinstance(value, str):
        return normalize_text(value)
    if isinstance(value, dict):
        return {normalize_text(str(k)): _normalize_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalize_value(v) for v in value]
    return value


def content_hash(value: Any) -> str:
    """``sha256:<hex>`` of a text (normalised) or of a structured payload.

    Structured payloads are hashed as sorted-key JSON of their normalised
    strings, so the hash does not depend on key order or line endings.
    """
    if isinstance(value, str):
        text = normalize_text(value)
    else:
        text = json.dumps(_normalize_value(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate, from a JSON escape such as \ud800: no text
        raise ValidationError(f"the text is not valid Unicode (a lone surrogate): {exc}") from None
    return "sha256:" + sha256_hex(data)
