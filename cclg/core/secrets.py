"""Secrets: found on every write, refused or redacted; and the platform auth fields
(``FORBIDDEN_KEYS``) that never sit inside records or containers.

One secret detector (``scan``) serves every path: explicit writes are refused
(``refuse_secrets``: a ``SecretError`` naming the rule and the field, showing four characters),
hook events are cleaned (``redact_value``: ``[REDACTED:rule]`` before anything reaches disk),
and ``cclg scan`` and ``--redact`` read files. It reads one normalised text: escapes decoded
however deeply nested (``\\n``, ``\\"``, ``\\u0041``, the ``\\\\n`` of a JSON file holding ``\\n``),
offsets mapped back; a JSON-like value read as its JSON file reads (``{"password": "..."}`` is
an assignment as a file, a string or a dict). Each pattern starts with a literal and cannot
backtrack without bound (open-ended repeats possessive, others bounded, none nested: a test
checks), so a scan is linear in the text. The hook imports this module: standard library only.
"""

from __future__ import annotations

import binascii
import json
import math
from bisect import bisect_right
from collections import Counter
from itertools import accumulate

from cclg.core.text import lazy_regex
from cclg.errors import ValidationError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from collections.abc import Callable, Iterator
    from typing import Any

# Platform credentials belong to whatever envelope carries records, never inside them.
FORBIDDEN_KEYS = frozenset({"org_id", "user_id", "bucket", "collection", "api_key", "apikey", "token", "access_token"})

PREVIEW_CHARS = 4
_WORD = r"(?<![A-Za-z0-9_])"  # a word starts here


class SecretError(ValidationError):
    """A write refused because it holds a secret (exit code 4)."""


class SecretPattern:
    """One kind of secret: a pattern (group ``secret`` is the part to hide, else the whole match), what
    the text before it must end with (``preceded_by``: by default a word boundary, or nothing for a
    ``lowered`` pattern, which reads the text lower-cased to find names in any case, inside longer ones
    too), and what lets look-alikes through: entropy, how many of lower case, upper case and digits
    a secret mixes, a ``harmless`` check."""

    def __init__(
        self,
        name: str,
        description: str,
        pattern: str,
        *,
        lowered: bool = False,
        preceded_by: str | None = "",
        min_entropy: float = 0.0,
        min_classes: int = 0,
        harmless: Callable[[str, re.Match[str], str], bool] | None = None,
    ) -> None:
        self.name, self.description = name, description
        self.regex = lazy_regex(pattern)
        preceded_by = (None if lowered else _WORD) if preceded_by == "" else preceded_by
        self.before = lazy_regex(f"(?:{preceded_by})\\Z") if preceded_by else None
        self.lowered, self.min_entropy, self.min_classes, self.harmless = lowered, min_entropy, min_classes, harmless

    def accepts(self, text: str, hit: re.Match[str], secret: str) -> bool:
        """Whether ``hit`` (in the normalised text ``text``) is a secret rather than a look-alike."""
        if "EXAMPLE" in secret:  # AWS's documented example keys (AKIAIOSFODNN7EXAMPLE, ...)
            return False
        if self.before is not None and not self.before().search(text, max(0, hit.start() - 64), hit.start()):
            return False
        if self.min_classes and _classes(secret) < self.min_classes:
            return False
        if self.min_entropy and entropy(secret) < self.min_entropy:
            return False
        return self.harmless is None or not self.harmless(text, hit, secret)


def entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    total = len(value)
    return -sum(n / total * math.log2(n / total) for n in Counter(value).values())


def _classes(value: str) -> int:
    """How many of lower-case letters, upper-case letters and digits ``value`` holds."""
    return any(c.islower() for c in value) + any(c.isupper() for c in value) + any(c.isdigit() for c in value)


# ---------------------------------------------------------------- look-alikes

_VOCABULARY = (  # what follows the first word of a placeholder (a word before any word it starts)
    "passwords?|passwd|passphrase|pass|pwd|secrets?|tokens?|apikey|api|keys?|access|auth|client|private|app"
    "|database|db|username|user|name|values?|here|string|goes|own|real|actual|new|account|service|bot|id"
)
_PLACEHOLDER = lazy_regex(
    r"(?i)\$\{[^{}]*+\}|\$[A-Za-z_][A-Za-z0-9_]*+|%\(?+[A-Za-z_]*+\)?+s|\{\{[^{}]*+\}\}|\{[^{}]*+\}"
    r"|<[^<>]*+>|\[REDACTED[^\]]*+\]|x++|\*++|\.++|-++|_++|\#++"
    r"|(?:your|my|example|sample|dummy|fake|test|changeme|replace(?:me)?|placeholder|redacted)"
    rf"(?>[_-]?+(?:{_VOCABULARY}))*+"
    r"|none|null|nil|true|false|undefined|password|secret|token|string|str|bytes|int"
)
_GIT_SHA = lazy_regex(r"[0-9a-f]{40}")  # a commit id, whatever it is called
_UUID = lazy_regex(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_LOWER_PATH = lazy_regex(r"[a-z0-9_.-]++(?:/[a-z0-9_.-]*+)++")  # kv/data/prod/payments: where a secret lives
_URL = lazy_regex(r"[a-z][a-z0-9+.-]*+://[^@\s]*+")  # a URL without credentials
# Code computing a value (a call or a subscript: ``getpass.getpass()``, ``request.form[``) or naming
# one (an identifier or a chain of them: ``self._authkey)``, ``settings.API_TOKEN``).
_CALL = lazy_regex(r"\(*+[A-Za-z_][A-Za-z0-9_.]*+[(\[]")
_CHAIN = lazy_regex(r"\(*+([A-Za-z_][A-Za-z0-9_]*+(?:\.[A-Za-z_][A-Za-z0-9_]*+)*+)[)\]]*+")
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


def _placeholder(text: str, hit: re.Match[str], value: str) -> bool:
    return _PLACEHOLDER().fullmatch(value) is not None


def _names_a_value(value: str, literal: bool) -> bool:
    """Whether an unquoted value is code naming a value rather than the value. A bare word of
    letters is a value where the context says values are literal (``DB_PASSWORD=Word``); a chain
    (``a.b``) is code unless one of its parts mixes lower case, upper case and digits."""
    if _CALL().match(value):
        return True
    chain = _CHAIN().fullmatch(value)
    parts = chain.group(1).split(".") if chain else []
    if len(parts) == 1:
        return not any(c.isdigit() for c in parts[0]) and (not literal or "_" in parts[0])
    return bool(parts) and all(_classes(part) < 3 for part in parts)


def _not_assigned(text: str, hit: re.Match[str], value: str) -> bool:
    """The look-alikes of ``name = value``: placeholders, hashes, ids, paths, ARNs, URLs, code."""
    begin = hit.start("name")
    while begin and text[begin - 1] in _NAME_CHARS and hit.start("name") - begin < 1024:
        begin -= 1
    if begin and text[begin - 1] in ":/":  # a word inside an ARN, a path or a URL (arn:...:secret:prod/db)
        return True
    if any(p().fullmatch(value) for p in (_PLACEHOLDER, _GIT_SHA, _UUID, _LOWER_PATH, _URL)) or value[:4] == "arn:":
        return True
    if value.startswith(("/", "~/", "./", "../")):  # a path, unless a part of it reads as random
        return all(_classes(part) < 3 for part in value.split("/"))
    # Values are literal in environment files, YAML and command-line flags (DB_PASSWORD=x,
    # POSTGRES_PASSWORD: x, --password=x), and code elsewhere (password = default_password).
    name = text[begin : hit.end("name")]
    literal = name[:1] == "-" or (not any(c.islower() for c in name) and not hit.group("sep")[:1].isspace())
    weak = entropy(value) < min(2.75, math.log2(len(value)) - 0.75)  # bits a character (8 characters cannot reach 3)
    return weak or (not hit.group("quote") and _names_a_value(value, literal))


def _not_openai(text: str, hit: re.Match[str], value: str) -> bool:
    """OpenAI keys carry a marker, or a project (service, admin) prefix, or are sk- and 48 letters and digits."""
    prefixed = value.startswith(("sk-proj-", "sk-svcacct-", "sk-admin-")) and len(value) >= 48 and _classes(value) > 1
    return not ("T3BlbkFJ" in value or prefixed or (len(value) == 51 and value[3:].isalnum()))


def _not_basic(text: str, hit: re.Match[str], value: str) -> bool:
    """``Authorization: Basic`` carries base64 of ``user:password``; anything else is no credential."""
    try:
        return b":" not in binascii.a2b_base64(value + "=" * (-len(value) % 4))
    except ValueError:
        return True


# ---------------------------------------------------------------- the patterns

_PEM_LABEL = r"[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
_PRIVATE_KEY = (  # to its END line (within 64K characters, before another BEGIN), else its base64 lines
    rf"-----BEGIN{_PEM_LABEL}(?:(?:(?!-----(?:END|BEGIN))[\s\S]){{0,65536}}+-----END{_PEM_LABEL}"
    r"|(?:\s*+(?:[A-Za-z0-9+/=]{8,}+|[A-Za-z-]++:[^\n]*+))*+)"
)
# `db_password = "..."`, `dbPassword: '...'`, `DB_PASSWORD=...`, `"password": "..."`, read lower-cased: the
# name ends with the word (not ``tokenizer``, ``password_hash``), any length (``_not_assigned``).
_KEY_NAMES = "|".join(  # api_key, apikey, access-key... (looked behind: a pattern starting with a word is fast)
    f"(?<={word}[_-]key)|(?<={word}key)"
    for word in "api access private secret auth signing encryption master account".split()
)
_ASSIGNMENT = (
    rf"(?P<name>pass(?:word|wd|phrase)|pwd|secret|token|credentials?|key(?:{_KEY_NAMES}))"
    r"(?![a-z0-9])[\"']?(?P<sep>[ \t]*+(?::=|=>|[:=])[ \t]*+)(?:\r?\n[ \t]*+)?(?P<quote>[\"']?)"
    r"(?P<secret>[^\s\"',;`\\]{8,}+)"
)
_AWS_SECRET = (
    r"aws[a-z0-9_.-]{0,20}secret[a-z0-9_.-]{0,20}[\"']?[ \t]*+[:=][ \t]*+[\"']?(?P<secret>[a-z0-9/+]{40})(?![a-z0-9/+])"
)
_BASIC = r"authorization[\"']?[ \t]*+[:=][ \t]*+[\"']?basic[ \t]++(?P<secret>[a-z0-9+/]{4,}+={0,2}+)"
_CURL = r"curl[^\n|;&]{0,400}?[ \t](?:-u|--user)(?:[ \t]++|=)?[\"']?[^\s:\"']{1,100}+:(?P<secret>[^\s\"']++)"
_MYSQL = r"(?:mysql|mariadb)[^\n|;&]{0,400}?[ \t]-p[\"']?(?P<secret>[^\s\"']++)"
_DISCORD = r"[MNO][A-Za-z0-9_-]{23,27}+\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}+(?![A-Za-z0-9_-])"
_USERINFO = r"://[^\s:/@]*+:(?P<secret>[^\s@/]++)@"  # user:password@ (from 8 characters in web URLs)
_USERINFO8 = r"://[^\s:/@]*+:(?P<secret>[^\s@/]{8,}+)@"
_AZURE = r"Key=(?P<secret>[A-Za-z0-9+/]{20,}+={0,2}+)"
_BEARER = r"bearer[ \t]++(?P<secret>[a-z0-9._~+/-]{20,}+=*+)"
_DB = r"(?<![A-Za-z0-9+.-])(?i:postgres(?:ql)?|mysql|mariadb|mongodb(?:\+srv)?|rediss?|amqps?|mssql|sqlserver"
_DB += r"|clickhouse)"
_WEB = r"(?<![A-Za-z0-9+.-])(?i:https?|ftps?|sftp|ssh|git|smtps?|ldaps?)"
_SLACK_WEBHOOK = r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9+/_-]{20,}+"
_GITHUB = r"(?:gh[pousr]_[A-Za-z0-9]{36,255}+|github_pat_[A-Za-z0-9_]{60,255}+)(?![A-Za-z0-9_])"

SECRET_PATTERNS: tuple[SecretPattern, ...] = (
    SecretPattern("private_key", "a private key block", _PRIVATE_KEY, preceded_by=None),
    SecretPattern("aws_access_key_id", "an AWS access key id", r"(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}+(?![0-9A-Za-z])"),
    SecretPattern("aws_secret_access_key", "an AWS secret access key", _AWS_SECRET, lowered=True),
    SecretPattern("github_token", "a GitHub token", _GITHUB),
    SecretPattern("gitlab_token", "a GitLab token", r"gl(?:pat|dt|ptt|rt|cbt|oas)-[A-Za-z0-9_-]{20,}+"),
    SecretPattern("slack_token", "a Slack token", r"xox[abposr]-[A-Za-z0-9-]{10,}+"),
    SecretPattern("slack_webhook", "a Slack webhook URL", _SLACK_WEBHOOK, preceded_by=None),
    SecretPattern("stripe_key", "a Stripe key", r"[srp]k_(?:live|test)_[A-Za-z0-9]{20,}+"),
    SecretPattern("anthropic_key", "an Anthropic API key", r"sk-ant-[a-z]{3,10}[0-9]{2}-[A-Za-z0-9_-]{80,}+"),
    SecretPattern("openai_key", "an OpenAI API key", r"sk-(?!ant-)[A-Za-z0-9_-]{20,}+", harmless=_not_openai),
    SecretPattern("google_api_key", "a Google API key", r"AIza[0-9A-Za-z_-]{35}+(?![0-9A-Za-z_-])"),
    SecretPattern("jwt", "a JSON Web Token", r"eyJ[A-Za-z0-9_-]{8,}+\.eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}+"),
    SecretPattern("npm_token", "an npm token", r"npm_[A-Za-z0-9]{36}+(?![A-Za-z0-9])"),
    SecretPattern("pypi_token", "a PyPI token", r"pypi-Ag[A-Za-z0-9_-]{50,}+"),
    SecretPattern("huggingface_token", "a Hugging Face token", r"hf_[A-Za-z]{34}+(?![A-Za-z0-9_])", min_classes=2),
    SecretPattern("twilio_key", "a Twilio API key", r"SK[0-9a-fA-F]{32}+(?![0-9A-Za-z])", min_classes=2),
    SecretPattern("sendgrid_key", "a SendGrid API key", r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}+(?![A-Za-z0-9_-])"),
    SecretPattern("discord_token", "a Discord bot token", _DISCORD, preceded_by=r"(?<![\w.+/=-])", min_classes=3),
    SecretPattern("azure_key", "an Azure account key", _AZURE, preceded_by="Account|SharedAccess", min_entropy=3.0),
    SecretPattern("basic_auth", "HTTP basic credentials", _BASIC, lowered=True, harmless=_not_basic),
    SecretPattern("bearer_token", "a bearer token", _BEARER, lowered=True, preceded_by=_WORD, min_entropy=3.0),
    SecretPattern("curl_password", "a password given to curl", _CURL, harmless=_placeholder),
    SecretPattern("mysql_password", "a password given to mysql", _MYSQL, harmless=_placeholder),
    SecretPattern("database_url", "a database URL with a password", _USERINFO, preceded_by=_DB, harmless=_placeholder),
    SecretPattern(
        "url_password", "a URL with a password", _USERINFO8, preceded_by=_WEB, min_entropy=3, harmless=_placeholder
    ),
    SecretPattern(
        "generic_secret", "a password, secret or token assignment", _ASSIGNMENT, lowered=True, harmless=_not_assigned
    ),
)

# What every match of a pattern holds (lower-case for a pattern that reads the lower-cased text); one absent
# here (discord_token) always runs.
_LITERALS: dict[str, tuple[str, ...]] = {
    "private_key": ("-----BEGIN",),
    "aws_access_key_id": ("AKIA", "ASIA", "ABIA", "ACCA"),
    "aws_secret_access_key": ("aws",),
    "github_token": ("gh", "github_pat_"),
    "gitlab_token": ("gl",),
    "slack_token": ("xox",),
    "slack_webhook": ("hooks.slack.com",),
    "stripe_key": ("k_live_", "k_test_"),
    "anthropic_key": ("sk-ant-",),
    "openai_key": ("sk-",),
    "google_api_key": ("AIza",),
    "jwt": ("eyJ",),
    "npm_token": ("npm_",),
    "pypi_token": ("pypi-",),
    "huggingface_token": ("hf_",),
    "twilio_key": ("SK",),
    "sendgrid_key": ("SG.",),
    "azure_key": ("Key=",),
    "basic_auth": ("authorization",),
    "bearer_token": ("bearer",),
    "curl_password": ("curl",),
    "mysql_password": ("mysql", "mariadb"),
    "database_url": ("://",),
    "url_password": ("://",),
    "generic_secret": ("pass", "pwd", "secret", "token", "credential", "key"),
}


def patterns() -> list[re.Pattern[str]]:
    """The detector's regular expressions, compiled (a test checks that none can backtrack without bound)."""
    lazies = [_PLACEHOLDER, _GIT_SHA, _UUID, _LOWER_PATH, _URL, _CALL, _CHAIN, _ESCAPE]
    lazies += [lazy for pattern in SECRET_PATTERNS for lazy in (pattern.regex, pattern.before) if lazy is not None]
    return [lazy() for lazy in lazies]


# ---------------------------------------------------------------- one normalised text

# A run of backslashes and what it escapes: \n, \", \u0041, \\n (a JSON file of a text holding \n)...
_ESCAPE = lazy_regex(r"(\\(?:\\*+(?:u[0-9a-fA-F]{4}|[nrtbf\"'/])|\\++))")
_DECODED = {"n": "\n", "r": "\r", "t": "\t", "b": " ", "f": " ", '"': '"', "'": "'", "/": "/", "": "\\"}
# Where each decoded escape is: its offset in the normalised text, its start and end in the text as given.
Marks = tuple[list[int], list[int], list[int]]


def _decoded(escape: str) -> str:
    body = escape.lstrip("\\")
    return chr(int(body[1:], 16)) if len(body) == 5 else _DECODED[body]


def _normalised(text: str) -> tuple[str, Marks]:
    """``text`` with each escape decoded to the one character it stands for (a run of backslashes
    alone becomes one; one before anything else, as in a regex or a path, stays), and its marks."""
    pieces = _ESCAPE().split(text) if "\\" in text else [text]  # literal, escape, literal, ..., literal
    norm = pieces[:]
    decoded: dict[str, str] = {}  # each escape met worked out once
    norm[1::2] = [decoded.get(e) or decoded.setdefault(e, _decoded(e)) for e in pieces[1::2]]
    given, here = list(accumulate(map(len, pieces), initial=0)), list(accumulate(map(len, norm), initial=0))
    return "".join(norm), (here[1::2], given[1::2], given[2::2])


def _origin(marks: Marks, at: int, after: bool) -> int:
    """Where the normalised character ``at`` starts (or, with ``after``, ends) in the text as given."""
    keys, starts, ends = marks
    i = bisect_right(keys, at) - 1
    if i >= 0 and keys[i] == at:
        return ends[i] if after else starts[i]
    return (at if i < 0 else ends[i] + at - keys[i] - 1) + after


# ---------------------------------------------------------------- scanning


class Match:
    """A secret found in a text: the rule, where the secret part is, and a safe preview."""

    def __init__(self, pattern: SecretPattern, start: int, end: int, text: str) -> None:
        self.rule, self.description = pattern.name, pattern.description
        self.start, self.end = start, end
        self.preview = text[start : start + PREVIEW_CHARS].encode("utf-8", "replace").decode() + "…"  # (bytes read)


def _find(text: str) -> list[tuple[SecretPattern, int, int]]:
    """(pattern, start, end) of each secret in a normalised text, in order, none overlapping."""
    lowered = text.replace("\u0130", "i").lower()  # offsets kept: İ is the one letter that lower-cases to two
    found: dict[tuple[int, int], SecretPattern] = {}
    for pattern in SECRET_PATTERNS:
        # A pattern none of whose literals is in the text cannot match: its regex is neither compiled (about
        # 0.3 ms each, in every hook process) nor run.
        needed = _LITERALS.get(pattern.name, ())
        if needed and not any(word in (lowered if pattern.lowered else text) for word in needed):
            continue
        grouped = "secret" in pattern.regex().groupindex
        for hit in pattern.regex().finditer(lowered if pattern.lowered else text):
            start, end = hit.span("secret") if grouped and hit.start("secret") >= 0 else hit.span()
            if (start, end) not in found and pattern.accepts(text, hit, text[start:end]):
                found[(start, end)] = pattern
    kept: list[tuple[SecretPattern, int, int]] = []
    for (start, end), pattern in sorted(found.items(), key=lambda item: (item[0][0], -item[0][1])):
        if not kept or start >= kept[-1][2]:  # the first, longest match wins
            kept.append((pattern, start, end))
    return kept


def scan(text: str) -> list[Match]:
    """Every secret in ``text``, in order of position, none overlapping (offsets in ``text``)."""
    norm, marks = _normalised(text)
    return [
        Match(pattern, _origin(marks, s, False), _origin(marks, e - 1, True), text) for pattern, s, e in _find(norm)
    ]


def _spliced(text: str, cuts: list[tuple[int, int, str]], keep_lines: bool = False) -> str:
    """``text`` with each (start, end, rule) replaced by ``[REDACTED:rule]`` (with ``keep_lines``,
    followed by the line breaks it covered, so that line numbers still hold)."""
    parts, position = [], 0
    for start, end, rule in cuts:
        parts += [text[position:start], f"[REDACTED:{rule}]" + "\n" * (text.count("\n", start, end) * keep_lines)]
        position = end
    return "".join([*parts, text[position:]])


def redact(text: str, *, keep_lines: bool = False) -> tuple[str, list[Match]]:
    """``text`` with each secret replaced by ``[REDACTED:rule]``, and what was replaced."""
    matches = scan(text)
    return _spliced(text, [(m.start, m.end, m.rule) for m in matches], keep_lines), matches


def redact_bytes(data: bytes, *, keep_lines: bool = False) -> tuple[bytes, int]:
    """A file's bytes with each secret redacted and every other byte kept (invalid UTF-8 too),
    and how many secrets went."""
    clean, matches = redact(data.decode("utf-8", "surrogateescape"), keep_lines=keep_lines)
    return (clean.encode("utf-8", "surrogateescape") if matches else data), len(matches)


def scan_bytes(data: bytes) -> list[tuple[int, Match]]:
    """(line number, match) for each secret in a file's bytes (bytes that are not UTF-8 are read one
    character each, so binary files scan too)."""
    text, found, line, counted = data.decode("utf-8", "surrogateescape"), [], 1, 0
    for match in scan(text):
        line, counted = line + text.count("\n", counted, match.start), match.start
        found.append((line, match))
    return found


# ---------------------------------------------------------------- JSON-like values


class _Flat:
    """A JSON-like value as one text, the way its JSON file reads: ``{"key": "value", "n": 1, "l":
    ["a"]}``. Its leaves are its strings (keys too) and numbers: where each sits, and its path."""

    def __init__(self, value: Any) -> None:
        self.parts: list[str] = []
        self.leaves: list[tuple[int, int, str]] = []  # start, end, path
        self.size = 0
        self.add(value, "")
        self.text, self.starts = "".join(self.parts), [leaf[0] for leaf in self.leaves]

    def put(self, text: str, path: str | None = None, before: str = "", after: str = "") -> None:
        if path is not None:
            self.leaves.append((self.size + len(before), self.size + len(before) + len(text), path))
        self.parts += [before, text, after]
        self.size += len(before) + len(text) + len(after)

    def add(self, value: Any, path: str) -> None:
        if isinstance(value, str):
            self.put(value, path, '"', '"')
        elif isinstance(value, dict):
            for n, (key, item) in enumerate(value.items()):
                self.put(str(key), f"{path}.{key}" if isinstance(key, str) else None, ', "' if n else '{"', '": ')
                self.add(item, f"{path}.{key}")
            self.put("}" if value else "{}")
        elif isinstance(value, (list, tuple)):
            for n, item in enumerate(value):
                self.put(", " if n else "[")
                self.add(item, f"{path}[{n}]")
            self.put("]" if value else "[]")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            self.put(json.dumps(value), path)

    def cleaned(self, matches: list[Match]) -> list[str | None]:
        """Each leaf with the parts of ``matches`` it holds redacted (None: left as it is)."""
        cuts: list[list[tuple[int, int, str]]] = [[] for _ in self.leaves]
        for match in matches:
            i = max(bisect_right(self.starts, match.start) - 1, 0)
            while i < len(self.leaves) and self.leaves[i][0] < match.end:
                start, end, _ = self.leaves[i]
                if min(end, match.end) > max(start, match.start):
                    cuts[i].append((max(start, match.start) - start, min(end, match.end) - start, match.rule))
                i += 1
        return [
            _spliced(self.text[a:b], cut) if cut else None for (a, b, _), cut in zip(self.leaves, cuts, strict=True)
        ]

    def where(self, offset: int) -> str:
        """The path of the leaf at ``offset`` (``source.quote``, ``tags[1]``), any secret in it redacted."""
        i = max(bisect_right(self.starts, offset) - 1, 0)
        return redact(self.leaves[i][2].lstrip("."))[0] if self.leaves else ""


def _rebuilt(value: Any, cleaned: Iterator[str | None]) -> Any:
    """``value`` with its leaves replaced, taken in the order ``_Flat`` walked them."""
    if isinstance(value, str) or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        new = next(cleaned)
        return value if new is None else new
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            new = next(cleaned) if isinstance(key, str) else None
            out[key if new is None else new] = _rebuilt(item, cleaned)
        return out
    if isinstance(value, (list, tuple)):
        return [_rebuilt(item, cleaned) for item in value]
    return value


def redact_value(value: Any) -> tuple[Any, int]:
    """A JSON-like value with every secret redacted (in strings, keys too, and numbers: a number that
    is a secret becomes the redaction string); and how many secrets went."""
    flat = _Flat(value)
    matches = scan(flat.text)
    return (_rebuilt(value, iter(flat.cleaned(matches))) if matches else value), len(matches)


def _flat_text(value: Any, parts: list[str]) -> None:
    """Append ``_Flat(value).text`` to ``parts``, 6x faster: only a value with a secret needs its paths."""
    if isinstance(value, str):
        parts += ('"', value, '"')
    elif isinstance(value, dict):
        if not value:
            parts.append("{}")
            return
        opener = '{"'
        for key, item in value.items():
            parts += (opener, str(key), '": ')
            _flat_text(item, parts)
            opener = ', "'
        parts.append("}")
    elif isinstance(value, (list, tuple)):
        if not value:
            parts.append("[]")
            return
        opener = "["
        for item in value:
            parts.append(opener)
            _flat_text(item, parts)
            opener = ", "
        parts.append("]")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        parts.append(json.dumps(value))


def secrets_in(fields: dict[str, Any]) -> list[str]:
    """One line per secret in ``fields`` (name -> a string or a JSON-like value), naming the rule
    and the field and showing no more than ``PREVIEW_CHARS`` characters of it."""
    parts: list[str] = []
    _flat_text(fields, parts)
    matches = scan("".join(parts))
    if not matches:
        return []
    flat = _Flat(fields)
    return [
        f"field '{flat.where(m.start)}' holds {m.description} (rule {m.rule}) starting {m.preview!r}" for m in matches
    ]


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


def auth_keys(value: Any) -> set[str]:
    """The forbidden auth field names used as keys anywhere in a JSON-like value."""
    if isinstance(value, dict):
        return {key for key in value if key in FORBIDDEN_KEYS}.union(*map(auth_keys, value.values()))
    return set().union(*map(auth_keys, value)) if isinstance(value, list) else set()
