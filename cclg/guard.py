"""Guards on what enters the store: secrets, and platform auth fields.

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

import math
import re

from cclg.errors import ValidationError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Platform credentials belong to whatever envelope carries records, never inside them.
FORBIDDEN_KEYS = frozenset({"org_id", "user_id", "bucket", "collection", "api_key", "apikey", "token", "access_token"})

PREVIEW_CHARS = 4
GENERIC_MIN_ENTROPY = 3.0  # bits per character a generic ``password=`` value needs to count as a secret
GENERIC_MIN_LENGTH = 8


class SecretError(ValidationError):
    """A write refused because it holds a secret (exit code 4)."""


class Rule:
    """One kind of secret: a pattern (group ``secret`` is the part to hide, else the whole match)
    and the literal keywords of which one must occur for the pattern to be tried."""

    def __init__(self, name: str, description: str, pattern: str, keywords: tuple[str, ...], flags: int = 0) -> None:
        self.name = name
        self.description = description
        self.pattern = re.compile(pattern, flags)
        self.keywords = keywords
        self.ignore_case = bool(flags & re.IGNORECASE)


# Assignments: `db_password = "..."`, `dbPassword: '...'`, `DB_PASSWORD=...`, `"password": "..."`.
# The name must end with the word (``tokenizer`` or ``password_hash`` is no secret).
_SECRET_NAME = (
    r"[A-Za-z0-9_.-]*?(?:password|passwd|passphrase|pwd|secret|token|credentials?"
    r"|(?:api|access|private|secret|auth|signing|encryption|master)[_-]?key)(?![A-Za-z0-9])"
)

RULES: tuple[Rule, ...] = (
    Rule(
        "private_key",
        "a private key block",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:.|\n){0,8000}?"
        r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|$)",
        ("PRIVATE KEY",),
    ),
    Rule(
        "aws_access_key_id",
        "an AWS access key id",
        r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b",
        ("AKIA", "ASIA", "ABIA", "ACCA"),
    ),
    Rule(
        "aws_secret_access_key",
        "an AWS secret access key",
        r"(?i:aws)[A-Za-z0-9_.-]{0,20}(?i:secret)[A-Za-z0-9_.-]{0,20}[\"']?\s*[:=]\s*[\"']?(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
        ("aws", "AWS", "Aws"),
    ),
    Rule(
        "github_token",
        "a GitHub token",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{60,255})\b",
        ("gh", "github_pat_"),
    ),
    Rule("gitlab_token", "a GitLab token", r"\bgl(?:pat|dt|ptt|rt|cbt|oas)-[A-Za-z0-9_-]{20,}", ("gl",)),
    Rule("slack_token", "a Slack token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}", ("xox",)),
    Rule(
        "slack_webhook",
        "a Slack webhook URL",
        r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9+/_-]{20,}",
        ("hooks.slack.com",),
    ),
    Rule("stripe_key", "a Stripe key", r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{20,}\b", ("_live_", "_test_")),
    Rule("anthropic_key", "an Anthropic API key", r"\bsk-ant-[a-z]{3,10}\d{2}-[A-Za-z0-9_-]{80,}", ("sk-ant-",)),
    Rule(
        "openai_key",
        "an OpenAI API key",
        r"\bsk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}T3BlbkFJ[A-Za-z0-9_-]{20,}|\bsk-[A-Za-z0-9]{48}\b",
        ("sk-",),
    ),
    Rule("google_api_key", "a Google API key", r"\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])", ("AIza",)),
    Rule(
        "jwt",
        "a JSON Web Token",
        r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        ("eyJ",),
    ),
    Rule(
        "database_url",
        "a database URL with a password",
        r"\b(?:postgres(?:ql)?|mysql|mariadb|mongodb(?:\+srv)?|rediss?|amqps?|mssql|sqlserver|clickhouse)://[^\s:/@]+:(?P<secret>[^\s@/]{3,})@",
        ("://",),
    ),
    Rule(
        "generic_secret",
        "a password, secret or token assignment",
        r"(?<![A-Za-z0-9_.-])[\"']?" + _SECRET_NAME + r"[\"']?\s*(?::=|=>|[:=])\s*[\"']?(?P<secret>[^\s\"',;`]{8,200})",
        ("pass", "pwd", "secret", "token", "key", "credential"),
        re.IGNORECASE,
    ),
)

_HEX_DIGEST = re.compile(r"[0-9a-fA-F]{7,64}")  # git SHAs and hashes (md5, sha1, sha256)
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_PLACEHOLDER = re.compile(
    r"(?i)(?:\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|%\(?[A-Za-z_]*\)?s|\{\{.*\}\}|<[^>]*>|\[REDACTED[^\]]*\]"
    r"|(?:x+|\*+|\.+|-+|_+|#+)|(?:your|my|example|sample|dummy|fake|test|changeme|placeholder|redacted)[A-Za-z0-9_-]*"
    r"|(?:none|null|true|false|undefined|password|secret|token|string|str|bytes|int)|os\.environ.*|process\.env.*"
    r"|env\(.*|getenv\(.*|[A-Za-z_][A-Za-z0-9_]*\(.*|self\.[A-Za-z0-9_.]+|[A-Za-z_]+\.[A-Za-z_][A-Za-z0-9_.]*)"
)


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
    """Known false positives of the looser rules."""
    if rule.name == "generic_secret":
        if _PLACEHOLDER.fullmatch(value) or _HEX_DIGEST.fullmatch(value) or _UUID.fullmatch(value):
            return True
        return len(value) < GENERIC_MIN_LENGTH or entropy(value) < GENERIC_MIN_ENTROPY
    if rule.name == "database_url":
        return bool(_PLACEHOLDER.fullmatch(value))
    return False


def scan(text: str) -> list[Match]:
    """Every secret in ``text``, in order of position, none overlapping."""
    found: list[Match] = []
    lowered: str | None = None
    for rule in RULES:
        if rule.ignore_case:
            lowered = text.lower() if lowered is None else lowered
            haystack = lowered
        else:
            haystack = text
        if not any(keyword in haystack for keyword in rule.keywords):
            continue
        for hit in rule.pattern.finditer(text):
            group = "secret" if "secret" in rule.pattern.groupindex and hit.group("secret") else 0
            start, end = hit.span(group)
            if not _looks_harmless(rule, text[start:end]):
                found.append(Match(rule, start, end, text))
    found.sort(key=lambda m: (m.start, -m.end))
    kept: list[Match] = []
    for match in found:  # the first (and longest) of overlapping matches wins
        if not kept or match.start >= kept[-1].end:
            kept.append(match)
    return kept


def redact(text: str) -> tuple[str, list[Match]]:
    """``text`` with each secret replaced by ``[REDACTED:rule]``, and what was replaced."""
    matches = scan(text)
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
            pairs += _strings(f"{where}.{key}", key) if isinstance(key, str) else []
            pairs += _strings(f"{where}.{key}", item)
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
    return [(text.count("\n", 0, match.start) + 1, match) for match in scan(text)]
