"""What kind of bytes a raw file holds: its MIME type, and whether it is text a reader may show.

``sniff`` reads the type from the bytes' magic numbers first, then the file name's extension (a
text type only for bytes without NUL), then the bytes themselves (UTF-8 without NUL is
``text/plain``, anything else ``application/octet-stream``). Its tables are cclg's own, so the
answer is the same on every machine (the standard ``mimetypes`` reads the system's files). A
binary file is never shown as text: surfaces name it (``attachment``: its raw name, MIME type, size and SHA-256).

A memory names the binary evidence it cites in ``metadata.attachments``; ``attachments_of`` reads
them back, keeping only well-formed entries, since a record from elsewhere may say anything there.
"""

from __future__ import annotations

import re

from cclg.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

ATTACHMENTS = "attachments"  # the metadata key
OCTET = "application/octet-stream"
PLAIN = "text/plain"
MIME = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,63}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}")
_NAME = re.compile(r"[A-Za-z0-9._-]{1,255}")
_HEX = re.compile(r"[0-9a-f]{64}")

# (offset, magic bytes, type): the formats a coding session meets as evidence.
_MAGIC = (
    (0, b"\x89PNG\r\n\x1a\n", "image/png"),
    (0, b"\xff\xd8\xff", "image/jpeg"),
    (0, b"GIF87a", "image/gif"),
    (0, b"GIF89a", "image/gif"),
    (0, b"%PDF-", "application/pdf"),
    (0, b"PK\x03\x04", "application/zip"),
    (0, b"\x1f\x8b", "application/gzip"),
    (0, b"SQLite format 3\x00", "application/vnd.sqlite3"),
    (0, b"\x00asm", "application/wasm"),
    (0, b"\x7fELF", "application/x-executable"),
    (0, b"ARROW1", "application/vnd.apache.arrow.file"),
    (0, b"PAR1", "application/vnd.apache.parquet"),
    (4, b"ftyp", "video/mp4"),
)
_EXTENSIONS = {
    "har": "application/har+json",
    "json": "application/json",
    "jsonl": "application/jsonl",
    "md": "text/markdown",
    "txt": PLAIN,
    "log": PLAIN,
    "csv": "text/csv",
    "html": "text/html",
    "xml": "application/xml",
    "svg": "image/svg+xml",
    "webp": "image/webp",
    "png": "image/png",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "pdf": "application/pdf",
    "zip": "application/zip",
    "gz": "application/gzip",
    "mp4": "video/mp4",
    "webm": "video/webm",
    "arrow": "application/vnd.apache.arrow.file",
    "parquet": "application/vnd.apache.parquet",
    "sqlite": "application/vnd.sqlite3",
    "db": "application/vnd.sqlite3",
}
# Types a reader may show as text (besides text/*), when the bytes are UTF-8.
_TEXT_TYPES = ("application/json", "application/har+json", "application/jsonl", "application/xml", "image/svg+xml")


def sniff(data: bytes, name: str = "") -> str:
    """The MIME type of ``data`` kept under ``name`` (see the module docstring)."""
    for offset, magic, mime in _MAGIC:
        if data[offset : offset + len(magic)] == magic:
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    _, dot, ext = name.rpartition(".")
    found = _EXTENSIONS.get(ext.lower()) if dot else None
    if found is not None and (not is_text(found) or b"\x00" not in data):
        return found
    return PLAIN if looks_like_text(data) else OCTET


def looks_like_text(data: bytes) -> bool:
    """Whether ``data`` is UTF-8 text (no NUL byte)."""
    if b"\x00" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def is_text(mime: str) -> bool:
    """Whether a file of type ``mime`` may be shown as text (when its bytes are UTF-8 as well)."""
    base = mime.split(";", 1)[0].strip()
    return base.startswith("text/") or base in _TEXT_TYPES


def checked_mime(value: str) -> str:
    """A MIME type a user gives (``--mime``), lower-cased, or a ``UsageError``."""
    mime = value.strip().lower()
    if not MIME.fullmatch(mime):
        raise UsageError(f"{value!r} is not a MIME type (type/subtype, such as image/png)")
    return mime


def attachment(raw_name: str, size: int, sha256: str, mime: str) -> dict[str, Any]:
    """How a binary raw file is named wherever it is not shown: its raw name, MIME type, size, SHA-256."""
    return {"raw": raw_name, "mime": mime, "bytes": size, "sha256": sha256}


def attachments_of(metadata: dict[str, Any]) -> list[dict[str, Any]]:
    """The well-formed entries of ``metadata.attachments`` (others are left out, never shown)."""
    value = metadata.get(ATTACHMENTS)
    if not isinstance(value, list):
        return []
    found = []
    for item in value:
        if not isinstance(item, dict):
            continue
        raw, mime, size, digest = (item.get(k) for k in ("raw", "mime", "bytes", "sha256"))
        well_formed = (
            isinstance(raw, str)
            and _NAME.fullmatch(raw)
            and isinstance(mime, str)
            and MIME.fullmatch(mime)
            and isinstance(size, int)
            and not isinstance(size, bool)
            and size >= 0
            and isinstance(digest, str)
            and _HEX.fullmatch(digest)
        )
        if well_formed:
            found.append(attachment(str(raw), int(str(size)), str(digest), str(mime)))
    return found


def mime_of(data: bytes, name: str, kept: Any = None) -> str:
    """The MIME type of a raw file: ``kept`` (its raw record's) when it is one, else ``sniff``'s."""
    return kept if isinstance(kept, str) and MIME.fullmatch(kept) else sniff(data, name)


def readable_text(data: bytes, name: str, kept: Any = None) -> str | None:
    """A raw file's text when a reader may show it (a text type, no NUL byte; a byte that is not UTF-8
    reads as U+FFFD); None for binary."""
    if b"\x00" in data or not is_text(mime_of(data, name, kept)):
        return None
    return data.decode("utf-8", errors="replace")
