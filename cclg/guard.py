"""Guards on what enters the store and what leaves it in a pack.

- Secrets (below): found on every write, refused or redacted.
- Platform auth fields (``FORBIDDEN_KEYS``): never inside records or containers.
- Trust, sensitivity, retention (``labels``): the vocabulary, the defaults, and
  the cautious reading of a value outside it.
- Stored text is data: ``instruction_flags`` marks text that talks to the model,
  ``reveal`` shows invisible characters before a pack hands text over, and
  ``json_literal`` fences a string so Markdown cannot read it as markup;
  ``estimate_tokens`` is the one token estimate every budget uses.

A memory store sees everything an agent sees, credentials pasted into prompts
and tool output included. ``scan`` finds secrets with curated format rules: each
rule has literal keywords that must occur before its pattern runs (so text with
none of them costs one substring search per keyword), and known look-alikes
(hashes, git SHAs, UUIDs, placeholders) are let through.

Two policies, one scanner:

- explicit writes (CLI, MCP, imports) are refused: ``refuse_secrets`` raises a
  ``SecretError`` naming the rule and the field and showing at most the first four
  characters of the match;
- hook events, which must never fail, are cleaned: ``redact`` replaces each
  secret with ``[REDACTED:rule]`` before anything reaches disk.

Light on purpose: the hook imports this module (``re`` and ``math`` only).
"""

from __future__ import annotations

import json
import math
import re

from cclg.errors import UsageError, ValidationError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Platform credentials belong to whatever envelope carries records, never inside them.
FORBIDDEN_KEYS = frozenset({"org_id", "user_id", "bucket", "collection", "api_key", "apikey", "token", "access_token"})

PREVIEW_CHARS = 4


class SecretError(ValidationError):
    """A write refused because it holds a secret (exit code 4)."""


class _Lazy:
    """A regular expression compiled on first use (compiling them all costs the hook ~10 ms)."""

    def __init__(self, source: str, flags: int = 0) -> None:
        self._source, self._flags = source, flags
        self._pattern: re.Pattern[str] | None = None

    def __call__(self) -> re.Pattern[str]:
        if self._pattern is None:
            self._pattern = re.compile(self._source, self._flags)
        return self._pattern


class Rule:
    """One kind of secret: a pattern (group ``secret`` is the part to hide, else the whole match),
    the literal keywords of which one must occur for the pattern to be tried, and how far
    before and after a keyword a match can start and end."""

    def __init__(
        self,
        name: str,
        description: str,
        pattern: str,
        keywords: tuple[str, ...],
        flags: int = 0,
        *,
        before: int = 80,
        after: int = 400,
        min_entropy: float = 0.0,
    ) -> None:
        self.name = name
        self.description = description
        self._regex = _Lazy(pattern, flags)
        self.keywords = keywords
        self.ignore_case = bool(flags & re.IGNORECASE)
        self.before = before
        self.after = after
        self.min_entropy = min_entropy  # for the looser rules: a value below it is no secret

    @property
    def pattern(self) -> re.Pattern[str]:
        """Compiled on first use: the hook pays only for the rules whose keywords its text holds."""
        return self._regex()


# Assignments: `db_password = "..."`, `dbPassword: '...'`, `DB_PASSWORD=...`, `"password": "..."`,
# and the same with escaped quotes (JSON inside a shell command). The name must end with
# the word (``tokenizer`` or ``password_hash`` is no secret).
_SECRET_NAME = (
    r"[A-Za-z0-9_.-]*?(?:password|passwd|passphrase|pwd|secret|token|credentials?"
    r"|(?:api|access|private|secret|auth|signing|encryption|master)[_-]?key)(?![A-Za-z0-9])"
)
_QUOTE = r"(?:\\?[\"'])?"

RULES: tuple[Rule, ...] = (
    Rule(
        "private_key",
        "a private key block",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:.|\n){0,8000}?"
        r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|$)",
        ("PRIVATE KEY",),
        before=40,
        after=8200,
    ),
    Rule(
        "aws_access_key_id",
        "an AWS access key id",
        r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b",
        ("AKIA", "ASIA", "ABIA", "ACCA"),
        before=0,
        after=20,
    ),
    Rule(
        "aws_secret_access_key",
        "an AWS secret access key",
        r"(?i:aws)[A-Za-z0-9_.-]{0,20}(?i:secret)[A-Za-z0-9_.-]{0,20}"
        + _QUOTE
        + r"\s*[:=]\s*"
        + _QUOTE
        + r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
        ("aws", "AWS", "Aws"),
        before=0,
        after=120,
    ),
    Rule(
        "github_token",
        "a GitHub token",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{60,255})\b",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        before=0,
        after=270,
    ),
    Rule(
        "gitlab_token",
        "a GitLab token",
        r"\bgl(?:pat|dt|ptt|rt|cbt|oas)-[A-Za-z0-9_-]{20,}",
        ("glpat-", "gldt-", "glptt-", "glrt-", "glcbt-", "gloas-"),
        before=0,
    ),
    Rule("slack_token", "a Slack token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}", ("xox",), before=0),
    Rule(
        "slack_webhook",
        "a Slack webhook URL",
        r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9+/_-]{20,}",
        ("hooks.slack.com",),
        before=10,
    ),
    Rule(
        "stripe_key",
        "a Stripe key",
        r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{20,}\b",
        ("sk_live_", "sk_test_", "rk_live_", "rk_test_", "pk_live_", "pk_test_"),
        before=0,
    ),
    Rule(
        "anthropic_key",
        "an Anthropic API key",
        r"\bsk-ant-[a-z]{3,10}\d{2}-[A-Za-z0-9_-]{80,}",
        ("sk-ant-",),
        before=0,
    ),
    Rule(
        "openai_key",
        "an OpenAI API key",
        r"\bsk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}T3BlbkFJ[A-Za-z0-9_-]{20,}|\bsk-[A-Za-z0-9]{48}\b",
        ("sk-",),
        before=0,
    ),
    Rule(
        "google_api_key",
        "a Google API key",
        r"\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])",
        ("AIza",),
        before=0,
        after=45,
    ),
    Rule(
        "jwt",
        "a JSON Web Token",
        r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        ("eyJ",),
        before=0,
        after=4000,
    ),
    Rule(
        "bearer_token",
        "a bearer token",
        r"\b[Bb]earer\s+(?P<secret>[A-Za-z0-9._~+/-]{20,}=*)",
        ("earer",),
        before=2,
        after=2100,
        min_entropy=3.0,
    ),
    Rule(
        "database_url",
        "a database URL with a password",
        r"\b(?:postgres(?:ql)?|mysql|mariadb|mongodb(?:\+srv)?|rediss?|amqps?|mssql|sqlserver|clickhouse)"
        r"://[^\s:/@]+:(?P<secret>[^\s@/]{3,})@",
        ("://",),
        before=20,
        after=300,
    ),
    Rule(
        "url_password",
        "a URL with a password",
        r"\b(?:https?|ftps?|sftp|ssh|git|smtps?|ldaps?)://[^\s:/@]+:(?P<secret>[^\s@/]{8,})@",
        ("://",),
        before=10,
        after=300,
        min_entropy=3.0,
    ),
    Rule(
        "generic_secret",
        "a password, secret or token assignment",
        r"(?<![A-Za-z0-9_.-])"
        + _QUOTE
        + _SECRET_NAME
        + _QUOTE
        + r"\s*(?::=|=>|[:=])\s*"
        + _QUOTE
        + r"(?P<secret>[^\s\"',;`\\]{8,200})",
        ("pass", "pwd", "secret", "token", "key", "credential"),
        re.IGNORECASE,
        before=100,
        after=300,
        min_entropy=3.0,
    ),
)

_GIT_SHA = _Lazy(r"[0-9a-f]{40}")  # a commit id, whatever it is called
_UUID = _Lazy(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_PLACEHOLDER = _Lazy(
    r"(?i)(?:\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|%\(?[A-Za-z_]*\)?s|\{\{.*\}\}|<[^>]*>|\[REDACTED[^\]]*\]"
    r"|(?:x+|\*+|\.+|-+|_+|#+)"
    r"|(?:your|my|example|sample|dummy|fake|test|changeme|placeholder|redacted)(?:[_-]?[a-z]+)*"
    r"|(?:none|null|true|false|undefined|password|secret|token|string|str|bytes|int))"
)
# Code that names a value rather than holding one: calls, subscripts, attributes, annotations,
# bare identifiers (letters and underscores only).
_CODE = _Lazy(r"\(*[A-Za-z_][A-Za-z0-9_]*(?:(?:\.[A-Za-z_][A-Za-z0-9_]*)+(?:[(\[].*)?|[(\[].*)[)\]]*|[A-Za-z_]+[)\]]*")


class Match:
    """A secret found in a text: the rule, where the secret part is, and a safe preview."""

    def __init__(self, rule: Rule, start: int, end: int, text: str) -> None:
        self.rule = rule.name
        self.description = rule.description
        self.start = start
        self.end = end
        self.preview = text[start : start + PREVIEW_CHARS] + "…"

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "start": self.start, "end": self.end, "preview": self.preview}


def entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    counts: dict[str, int] = {}
    for char in value:
        counts[char] = counts.get(char, 0) + 1
    total = len(value)
    return -sum(n / total * math.log2(n / total) for n in counts.values())


def _looks_harmless(rule: Rule, value: str) -> bool:
    """Known false positives: placeholders, code, commit ids, UUIDs, documentation examples."""
    if "EXAMPLE" in value:  # AWS's documented example keys (AKIAIOSFODNN7EXAMPLE, ...)
        return True
    if rule.name in ("generic_secret", "database_url", "url_password") and _PLACEHOLDER().fullmatch(value):
        return True
    if rule.name == "generic_secret" and (
        _CODE().fullmatch(value) or _GIT_SHA().fullmatch(value) or _UUID().fullmatch(value)
    ):
        return True
    return rule.min_entropy > 0 and entropy(value) < rule.min_entropy


def _windows(haystack: str, rule: Rule, length: int) -> list[tuple[int, int]]:
    """Stretches of the text around the rule's keywords (merged where they touch)."""
    positions: list[int] = []
    for keyword in rule.keywords:
        at = haystack.find(keyword)
        while at != -1:
            positions.append(at)
            at = haystack.find(keyword, at + 1)
    windows: list[tuple[int, int]] = []
    for at in sorted(positions):
        low, high = max(0, at - rule.before), min(length, at + rule.after)
        if windows and low <= windows[-1][1]:
            windows[-1] = (windows[-1][0], max(windows[-1][1], high))
        else:
            windows.append((low, high))
    return windows


def scan(text: str) -> list[Match]:
    """Every secret in ``text``, in order of position, none overlapping.

    Each rule's pattern runs only around its keywords, so text without them costs
    one substring search per keyword.
    """
    found: dict[tuple[int, int], Match] = {}
    lowered: str | None = None
    for rule in RULES:
        if rule.ignore_case:
            lowered = text.lower() if lowered is None else lowered
            haystack = lowered
        else:
            haystack = text
        for low, high in _windows(haystack, rule, len(text)):
            for hit in rule.pattern.finditer(text, low, high):
                group = "secret" if "secret" in rule.pattern.groupindex and hit.group("secret") else 0
                start, end = hit.span(group)
                if (start, end) not in found and not _looks_harmless(rule, text[start:end]):
                    found[(start, end)] = Match(rule, start, end, text)
    kept: list[Match] = []
    for match in sorted(found.values(), key=lambda m: (m.start, -m.end)):  # the first, longest match wins
        if not kept or match.start >= kept[-1].end:
            kept.append(match)
    return kept


# JSON escapes glue words together (``left it:\\nmongodb+srv://...`` has no word boundary
# before ``mongodb``): files are scanned with each escape blanked out, offsets unchanged.
# (Escaped quotes stay: the rules read ``\\"`` as a quote.)
_JSON_ESCAPE = _Lazy(r"\\[nrtbf/]")


def _escapes_blanked(text: str) -> str:
    return _JSON_ESCAPE().sub("  ", text)


def redact(text: str, *, escaped: bool = False) -> tuple[str, list[Match]]:
    """``text`` with each secret replaced by ``[REDACTED:rule]``, and what was replaced.
    ``escaped``: the text is a file that may hold JSON escapes (see ``scan_bytes``)."""
    matches = scan(_escapes_blanked(text) if escaped else text)
    if not matches:
        return text, []
    parts, position = [], 0
    for match in matches:
        parts += [text[position : match.start], f"[REDACTED:{match.rule}]"]
        position = match.end
    parts.append(text[position:])
    return "".join(parts), matches


def redact_value(value: Any) -> tuple[Any, int]:
    """A JSON-like value with every string (keys too) redacted; and how many secrets went."""
    if isinstance(value, str):
        clean, matches = redact(value)
        return clean, len(matches)
    if isinstance(value, list):
        items = [redact_value(item) for item in value]
        return [item for item, _ in items], sum(n for _, n in items)
    if isinstance(value, dict):
        out, total = {}, 0
        for key, item in value.items():
            clean_key, n_key = redact_value(key) if isinstance(key, str) else (key, 0)
            clean_item, n_item = redact_value(item)
            out[clean_key] = clean_item
            total += n_key + n_item
        return out, total
    return value, 0


def secrets_in(fields: dict[str, Any]) -> list[str]:
    """One line per secret in ``fields`` (name -> a string or a JSON-like value), naming the rule
    and the field and showing no more than ``PREVIEW_CHARS`` characters of it."""
    problems = []
    for name, value in fields.items():
        for where, text in _strings(name, value):
            for match in scan(text):
                problems.append(
                    f"field '{where}' holds {match.description} (rule {match.rule}) starting {match.preview!r}"
                )
    return problems


def refuse_secrets(fields: dict[str, Any], what: str = "this write") -> None:
    """Raise ``SecretError`` when any of ``fields`` holds a secret; nothing has been written then."""
    problems = secrets_in(fields)
    if problems:
        raise SecretError(
            f"refused {what}: {problems[0]}"
            + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
            + "; nothing was written. Remove the secret, or store where it lives instead of its value.",
            problems,
        )


def _strings(where: str, value: Any) -> list[tuple[str, str]]:
    if isinstance(value, str):
        return [(where, value)]
    if isinstance(value, list):
        return [pair for i, item in enumerate(value) for pair in _strings(f"{where}[{i}]", item)]
    if isinstance(value, dict):
        pairs = []
        for key, item in value.items():
            shown = redact(key)[0] if isinstance(key, str) else key  # a secret used as a key is not echoed
            pairs += _strings(f"{where}.{shown}", key) if isinstance(key, str) else []
            pairs += _strings(f"{where}.{shown}", item)
        return pairs
    return []


def auth_keys(value: Any) -> set[str]:
    """The forbidden auth field names used as keys anywhere in a JSON-like value."""
    if isinstance(value, dict):
        keys = {key for key in value if key in FORBIDDEN_KEYS}
        for item in value.values():
            keys |= auth_keys(item)
        return keys
    if isinstance(value, list):
        found: set[str] = set()
        for item in value:
            found |= auth_keys(item)
        return found
    return set()


def scan_bytes(data: bytes) -> list[tuple[int, Match]]:
    """(line number, match) for each secret in a file's bytes (binary files too: latin-1 maps
    every byte to one character, so nothing fails to decode and offsets stay byte offsets)."""
    text = data.decode("latin-1")
    return [(text.count("\n", 0, match.start) + 1, match) for match in scan(_escapes_blanked(text))]


# ---------------------------------------------------------------- trust, sensitivity, retention

# Kept in a node's metadata (where the format allows extra data), from most to least trusted /
# least to most sensitive / most to least kept.
TRUST = ("trusted", "untrusted", "quarantined")
SENSITIVITY = ("public", "internal", "confidential", "restricted")
RETENTION = ("required", "preferred", "optional")
# A memory nobody vouched for is untrusted: only the user (the CLI) says "trusted".
DEFAULT_TRUST = "untrusted"
DEFAULT_SENSITIVITY = "internal"
DEFAULT_RETENTION = "optional"


def labels(metadata: dict[str, Any]) -> tuple[str, str, str]:
    """(trust, sensitivity, retention) of a node's metadata, defaults filled in. A value outside
    the vocabulary (a hand edit) is read the cautious way: quarantined, restricted."""
    trust = metadata.get("trust", DEFAULT_TRUST)
    sensitivity = metadata.get("sensitivity", DEFAULT_SENSITIVITY)
    retention = metadata.get("retention", DEFAULT_RETENTION)
    return (
        trust if trust in TRUST else "quarantined",
        sensitivity if sensitivity in SENSITIVITY else "restricted",
        retention if retention in RETENTION else DEFAULT_RETENTION,
    )


def least_trusted(*levels: str) -> str:
    return max(levels, key=TRUST.index)


def check_labels(trust: str | None = None, sensitivity: str | None = None, retention: str | None = None) -> None:
    """``UsageError`` for a value outside its vocabulary."""
    for name, value, allowed in (
        ("trust", trust, TRUST),
        ("sensitivity", sensitivity, SENSITIVITY),
        ("retention", retention, RETENTION),
    ):
        if value is not None and value not in allowed:
            raise UsageError(f"unknown {name} {value!r}; use one of {', '.join(allowed)}")


# ---------------------------------------------------------------- stored text is data

# Text that talks to the model instead of stating a fact. Flagged on write, labelled in packs.
_INSTRUCTION_LIKE = _Lazy(
    r"(?i)\b(?:ignore|disregard|forget|override)\s+(?:(?:all|any|the|your|every|of)\s+)*"
    r"(?:previous|prior|above|earlier|preceding|system|original|other)\s+"
    r"(?:instructions?|prompts?|messages?|rules?|directions?|guidelines?)"
    r"|\byou\s+are\s+now\b|\bfrom\s+now\s+on,?\s+you\b|\bnew\s+(?:system\s+)?instructions?\s*:"
    r"|\b(?:reveal|print|show|repeat)\s+(?:your|the)\s+(?:system|developer)\s+prompt\b"
    r"|\bdo\s+not\s+(?:tell|inform|alert)\s+the\s+user\b"
    r"|<\s*/?\s*(?:system|instructions?|memory|assistant)\s*>|\[/?(?:system|inst)\]"
)


def instruction_flags(text: str) -> list[str]:
    """``["instruction_like"]`` when ``text`` reads as instructions to the model."""
    return ["instruction_like"] if _INSTRUCTION_LIKE().search(text) else []


# Characters that do not show: controls (not tab, newline or carriage return), format characters (zero-width,
# bidirectional overrides and isolates, the BOM, soft hyphen), line and paragraph separators,
# and the tag block that can smuggle invisible ASCII.
_INVISIBLE = _Lazy(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f"
    "\ufeff\ufff9-\ufffb\U000e0000-\U000e007f]"
)


def reveal(text: str) -> str:
    """``text`` with each invisible character shown as ``[U+XXXX]``: what a pack hands the
    model is what a person reading the pack sees."""
    return _INVISIBLE().sub(lambda m: f"[U+{ord(m.group()):04X}]", text)


# ---------------------------------------------------------------- fencing


def json_literal(text: str) -> str:
    """A JSON string literal that Markdown cannot read as markup: U+2028/U+2029 escaped (some
    readers take them for line breaks), ``<`` and ``>`` escaped (no HTML, no autolink, no
    closing tag), and ``](`` broken (no link or image can form)."""
    literal = json.dumps(text, ensure_ascii=False)
    for raw, escaped in (
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("](", "]\\u0028"),
    ):
        literal = literal.replace(raw, escaped)
    return literal


def estimate_tokens(text: str) -> int:
    """A cheap token estimate: four ASCII characters a token, one token per other character."""
    ascii_chars = sum(1 for c in text if c < "\x80")
    return math.ceil(ascii_chars / 4) + (len(text) - ascii_chars)
