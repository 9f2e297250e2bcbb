"""Outside text is data: ``instruction_flags`` marks text that talks to the model, ``reveal``
shows invisible characters, and ``quote_outside`` (the one renderer every block of a model's
context uses for text cclg did not word itself) does both and quotes it; ``terminal_text`` and
``escape_invisible`` do the same for a terminal. The hook imports this module: standard library only.
"""

from __future__ import annotations

from cclg.core.text import json_literal, lazy_regex

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re

# ---------------------------------------------------------------- stored text is data

# Text that talks to the model instead of stating a fact. Flagged on write, labelled in packs.
_INSTRUCTION_LIKE = lazy_regex(
    r"(?i)\b(?:ignore|disregard|forget|override)\s+(?:(?:all|any|the|your|every|of)\s+)*"
    r"(?:previous|prior|above|earlier|preceding|system|original|other)\s+"
    r"(?:instructions?|prompts?|messages?|rules?|directions?|guidelines?)"
    r"|\byou\s+are\s+now\b|\bfrom\s+now\s+on,?\s+you\b|\bnew\s+(?:system\s+)?instructions?\s*:"
    r"|\b(?:reveal|print|show|repeat)\s+(?:your|the)\s+(?:system|developer)\s+prompt\b"
    r"|\bdo\s+not\s+(?:tell|inform|alert)\s+the\s+user\b"
    r"|<\s*/?\s*(?:system|instructions?|memory|assistant)\s*>|\[/?(?:system|inst)\]"
)


def instruction_flags(text: str) -> list[str]:
    """``["instruction_like"]`` when ``text`` reads as instructions to the model, also once seen through
    what hides words from the pattern: tag characters read as the ASCII they smuggle, other invisible
    characters dropped (``ig\u200bnore``), compatibility forms folded (full-width letters)."""
    if _INSTRUCTION_LIKE().search(text):
        return ["instruction_like"]
    if text.isascii() and not _INVISIBLE().search(text):
        return []
    import unicodedata

    seen = _TAG_RUN().sub(_smuggled, unicodedata.normalize("NFKC", text))
    return ["instruction_like"] if _INSTRUCTION_LIKE().search(_INVISIBLE().sub("", seen)) else []


_TAG_RUN = lazy_regex("[\U000e0000-\U000e007f]+")


def _smuggled(run: re.Match[str]) -> str:
    """The ASCII a run of tag characters smuggles, as words of its own."""
    return " " + "".join(chr(ord(c) - 0xE0000) for c in run.group() if 0xE0020 <= ord(c) <= 0xE007E) + " "


# Characters that do not show: controls (not tab, newline or carriage return), format characters (zero-width,
# bidirectional overrides and isolates, the BOM, soft hyphen), line and paragraph separators,
# and the tag block that can smuggle invisible ASCII.
_INVISIBLE = lazy_regex(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f"
    "\ufeff\ufff9-\ufffb\U000e0000-\U000e007f]"
)


def reveal(text: str) -> str:
    """``text`` with each invisible character shown as ``[U+XXXX]``: what a pack hands the
    model is what a person reading the pack sees."""
    return _INVISIBLE().sub(lambda m: f"[U+{ord(m.group()):04X}]", text)


# ---------------------------------------------------------------- outside text, shown

INSTRUCTION_LIKE_MARK = "(instruction-like)"
_CUT_REVEALED = lazy_regex(r"\[U\+[0-9A-F]{0,5}$")  # a revealed character cut in two by a limit


def quote_outside(text: str, *, limit: int | None = None, flagged: bool | None = None) -> str:
    """The one renderer of outside text for a model's context: anything cclg did not word itself (a
    memory's content, a file, symbol or folder name, a commit subject, a tool's output, a turn, a
    rule's excerpt, the prompt echoed back). Every block the hook emits shows outside text only
    through this.

    The text's invisible characters are revealed (``reveal``); it is cut to ``limit`` characters
    (then ``…``); it becomes a JSON string literal in which Markdown sees no markup
    (``cclg.core.text.json_literal``: no line break, no tag to open or close a block, no link); and when
    it reads as instructions (``instruction_flags``, or ``flagged`` when the caller knows better, as
    the pack does from stored flags) `` (instruction-like)`` follows it.
    """
    shown = reveal(text)
    if limit is not None and len(shown) > limit:
        shown = _CUT_REVEALED().sub("", shown[:limit]) + "…"
    literal = json_literal(shown)
    if flagged is None:
        flagged = bool(instruction_flags(text))
    return f"{literal} {INSTRUCTION_LIKE_MARK}" if flagged else literal


def terminal_text(text: str, *, lines: bool = False) -> str:
    """Outside text for a terminal (the plain-text output of the command line): every control character
    (ESC included), invisible mark and tag character shown as ``[U+XXXX]``, and so are line breaks and
    tabs, so no field can move the cursor, restyle the screen or start a line of its own. ``lines``:
    a whole message of several lines, whose line breaks stay."""
    shown = reveal(text)
    if lines:
        return shown.replace("\r", "[U+000D]")
    return shown.replace("\r", "[U+000D]").replace("\n", "[U+000A]").replace("\t", "[U+0009]")


def escape_invisible(encoded: str, *, toml: bool = False) -> str:
    """JSON or TOML text with every invisible character its encoder left raw (C1 controls, DEL,
    bidirectional marks, tag characters) written as an escape: the same value for a parser, nothing
    hidden or active on a terminal. They occur only inside strings, where both formats read
    ``\\uXXXX`` (``\\UXXXXXXXX`` in TOML; a surrogate pair in JSON)."""

    def escaped(match: re.Match[str]) -> str:
        code = ord(match.group())
        if code <= 0xFFFF:
            return f"\\u{code:04x}"
        if toml:
            return f"\\U{code:08x}"
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"

    return _INVISIBLE().sub(escaped, encoded)
