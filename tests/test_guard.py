"""The secret guard (``cclg.core.secrets``) and every write path it stands on.

No real key is in this file: a corpus of fake secrets in the real formats is generated from a
seeded ``random.Random`` (``corpus``), each one embedded in ordinary prose, and so are the
look-alikes that must pass (``lookalikes``). ``benchmarks/bench_guard.py`` imports both.

The write-path tests try every kind of secret through each surface (CLI, MCP over stdio, the
hook as a subprocess) and then read every byte of the store folder (records, audit/, sessions/,
raw/, index.sqlite and its -wal/-shm) looking for the secret, its first and last twelve
characters and their lower-case forms (the full-text index keeps terms lower-cased).

Beyond that corpus, a few shapes agents meet every day (``MORE_SECRETS``: a bearer header, JSON
escaped in a shell command, ...) must be found too, and code or notes that only name a secret
(``MORE_LOOKALIKES``: ``password = getpass.getpass()``, ...) must pass.

Issue 15 added kinds and look-alikes to both corpora, and the tests at the end: one detector
for every path (a write refuses what ``scan`` finds in the file it would write; keys read
with their values; the hook, ``scan --store --redact`` and ``code-index`` leave no byte of a
secret), no pattern that can backtrack without bound, and user regexes under a time limit.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import random
import re
import string
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cclg import api
from cclg.cli import cli
from cclg.core import secrets
from cclg.core.files import read_jsonl
from cclg.core.ids import content_hash
from cclg.core.records import Source, new_node
from cclg.core.secrets import SecretError, redact, redact_value, refuse_secrets, scan
from cclg.core.store import Store
from cclg.errors import UsageError
from cclg.intake.container import write_container
from cclg.retrieval import search

SEED = 20_251_130

UPPER_DIGITS = string.ascii_uppercase + string.digits
ALNUM = string.ascii_letters + string.digits
B64URL = ALNUM + "-_"
HEX = "0123456789abcdef"
# Characters of hand-made and generated passwords that the formats allow (no quote, space, ',', ';', '@', '/').
PASSWORD_CHARS = ALNUM + "!#%^&*-_+=?~"

# ---------------------------------------------------------------- the secret corpus


@dataclass(frozen=True)
class Planted:
    """A fake secret: the rule that must find it, the bytes that must never be stored (``secret``),
    the secret in its smallest context (``line``: an assignment, a URL) and in prose (``text``)."""

    kind: str
    rule: str
    secret: str
    line: str
    text: str


def pick(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def pem(label: str, body: bytes, width: int) -> str:
    encoded = base64.b64encode(body).decode()
    lines = [encoded[i : i + width] for i in range(0, len(encoded), width)]
    return "\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"])


def password(rng: random.Random, n: int) -> str:
    return pick(rng, PASSWORD_CHARS, n)


def aws_access_key_id(rng: random.Random) -> tuple[str, str, str]:
    key = "AKIA" + pick(rng, UPPER_DIGITS, 16)
    return "aws_access_key_id", key, f"the CI user signs requests as {key} in eu-west-1"


def aws_secret_access_key(rng: random.Random) -> tuple[str, str, str]:
    value = pick(rng, ALNUM + "/+", 40)
    return "aws_secret_access_key", value, f"aws_secret_access_key = {value}"


def github_classic(rng: random.Random) -> tuple[str, str, str]:
    token = "ghp_" + pick(rng, ALNUM, 36)
    return "github_token", token, f"git push https with {token} as the password"


def github_fine_grained(rng: random.Random) -> tuple[str, str, str]:
    token = "github_pat_" + pick(rng, ALNUM, 22) + "_" + pick(rng, ALNUM, 59)
    return "github_token", token, f"GH_PAT={token}"


def gitlab(rng: random.Random) -> tuple[str, str, str]:
    token = "glpat-" + pick(rng, B64URL, 20)
    return "gitlab_token", token, f"the runner registers with {token}"


def slack_bot(rng: random.Random) -> tuple[str, str, str]:
    token = f"xoxb-{pick(rng, string.digits, 11)}-{pick(rng, string.digits, 13)}-{pick(rng, ALNUM, 24)}"
    return "slack_token", token, f"the release bot posts with {token}"


def slack_webhook(rng: random.Random) -> tuple[str, str, str]:
    url = f"https://hooks.slack.com/services/T{pick(rng, UPPER_DIGITS, 8)}/B{pick(rng, UPPER_DIGITS, 8)}/"
    url += pick(rng, ALNUM, 24)
    return "slack_webhook", url, f"alerts go to {url} (channel #ops)"


def stripe_live(rng: random.Random) -> tuple[str, str, str]:
    key = "sk_live_" + pick(rng, ALNUM, 24)
    return "stripe_key", key, f"billing runs with {key} in production"


def anthropic(rng: random.Random) -> tuple[str, str, str]:
    key = "sk-ant-api03-" + pick(rng, B64URL, 93) + "AA"
    return "anthropic_key", key, f"the eval harness calls the API with {key}"


def openai_project(rng: random.Random) -> tuple[str, str, str]:
    key = "sk-proj-" + pick(rng, B64URL, 40) + "T3BlbkFJ" + pick(rng, B64URL, 40)
    return "openai_key", key, f"the summariser uses {key}"


def openai_legacy(rng: random.Random) -> tuple[str, str, str]:
    key = "sk-" + pick(rng, ALNUM, 20) + "T3BlbkFJ" + pick(rng, ALNUM, 20)  # 48 characters after sk-
    return "openai_key", key, f"the old notebook still has {key}"


def google_api_key(rng: random.Random) -> tuple[str, str, str]:
    key = "AIza" + pick(rng, B64URL, 35)
    return "google_api_key", key, f"maps load with key {key} on staging"


def private_key_rsa(rng: random.Random) -> tuple[str, str, str]:
    block = pem("RSA PRIVATE KEY", rng.randbytes(1000), 64)
    return "private_key", block, block


def private_key_ec(rng: random.Random) -> tuple[str, str, str]:
    block = pem("EC PRIVATE KEY", rng.randbytes(121), 64)
    return "private_key", block, block


def private_key_openssh(rng: random.Random) -> tuple[str, str, str]:
    block = pem("OPENSSH PRIVATE KEY", b"openssh-key-v1\0" + rng.randbytes(380), 70)
    return "private_key", block, block


def jwt(rng: random.Random) -> tuple[str, str, str]:
    header = b64url(json.dumps({"alg": rng.choice(["HS256", "RS256"]), "typ": "JWT"}).encode())
    claims = {"sub": str(rng.randrange(10**8)), "iat": rng.randrange(1_600_000_000, 1_800_000_000)}
    token = f"{header}.{b64url(json.dumps(claims).encode())}.{b64url(rng.randbytes(32))}"
    return "jwt", token, f"Authorization: Bearer {token}"


def postgres_url(rng: random.Random) -> tuple[str, str, str]:
    secret = password(rng, rng.randrange(16, 25))
    return "database_url", secret, f"postgres://app_rw:{secret}@db-{rng.randrange(1, 9)}.internal:5432/orders"


def mysql_url(rng: random.Random) -> tuple[str, str, str]:
    secret = password(rng, rng.randrange(16, 25))
    return "database_url", secret, f"mysql://reporting:{secret}@mysql.internal:3306/reports"


def mongodb_srv_url(rng: random.Random) -> tuple[str, str, str]:
    secret = password(rng, rng.randrange(16, 25))
    host = f"cluster0.{pick(rng, string.ascii_lowercase + string.digits, 5)}.mongodb.net"
    return "database_url", secret, f"mongodb+srv://svc:{secret}@{host}/events?retryWrites=true"


def generic_snake(rng: random.Random) -> tuple[str, str, str]:
    value = password(rng, 24)
    return "generic_secret", value, f'{rng.choice(["db_password", "smtp_password", "admin_pwd"])} = "{value}"'


def generic_camel(rng: random.Random) -> tuple[str, str, str]:
    value = password(rng, 24)
    return "generic_secret", value, f"{rng.choice(['dbPassword', 'clientSecret', 'authToken'])}: '{value}'"


def generic_env(rng: random.Random) -> tuple[str, str, str]:
    value = password(rng, 24)
    return (
        "generic_secret",
        value,
        f"{rng.choice(['', 'export '])}{rng.choice(['API_TOKEN', 'SESSION_SECRET'])}={value}",
    )


def generic_json(rng: random.Random) -> tuple[str, str, str]:
    value = password(rng, 24)
    name = rng.choice(["client_secret", "refresh_token", "password"])
    return "generic_secret", value, f'{{"client_id": "web", "{name}": "{value}"}}'


# Shapes added for issue 15 (rule 7): more providers, and assignments the first rules missed.


def npm(rng: random.Random) -> tuple[str, str, str]:
    token = "npm_" + pick(rng, ALNUM, 36)
    return "npm_token", token, f"//registry.npmjs.org/:_authToken={token}"


def pypi(rng: random.Random) -> tuple[str, str, str]:
    token = "pypi-AgEIcHlwaS5vcmc" + pick(rng, B64URL, rng.randrange(60, 120))
    return "pypi_token", token, f"TWINE_PASSWORD={token}"


def huggingface(rng: random.Random) -> tuple[str, str, str]:
    token = "hf_" + pick(rng, string.ascii_uppercase, 2) + pick(rng, string.ascii_letters, 32)
    return "huggingface_token", token, f"export HF_TOKEN={token}"


def twilio(rng: random.Random) -> tuple[str, str, str]:
    key = "SK" + pick(rng, HEX, 32)
    return "twilio_key", key, f"the SMS worker authenticates with API key {key}"


def sendgrid(rng: random.Random) -> tuple[str, str, str]:
    key = f"SG.{pick(rng, B64URL, 22)}.{pick(rng, B64URL, 43)}"
    return "sendgrid_key", key, f"SENDGRID_API_KEY={key}"


def discord(rng: random.Random) -> tuple[str, str, str]:
    user_id = str(rng.randrange(10**17, 10**18)).encode()  # a snowflake: the token starts with it in base64
    token = f"{base64.b64encode(user_id).decode()}.{pick(rng, B64URL, 6)}.{pick(rng, B64URL, 38)}"
    return "discord_token", token, f'bot.run("{token}")'


def azure(rng: random.Random) -> tuple[str, str, str]:
    key = base64.b64encode(rng.randbytes(64)).decode()
    line = f"DefaultEndpointsProtocol=https;AccountName=stlogs{rng.randrange(100)};AccountKey={key};"
    return "azure_key", key, line + "EndpointSuffix=core.windows.net"


def basic_auth(rng: random.Random) -> tuple[str, str, str]:
    credentials = base64.b64encode(f"deploy:{pick(rng, ALNUM, 20)}".encode()).decode()
    return "basic_auth", credentials, f'curl -H "Authorization: Basic {credentials}" https://nexus.internal/repo'


def curl_user(rng: random.Random) -> tuple[str, str, str]:
    secret = password(rng, 18)
    return "curl_password", secret, f"curl -sf -u ci-bot:{secret} https://artifacts.internal/upload"


def mysql_p(rng: random.Random) -> tuple[str, str, str]:
    secret = password(rng, 16).replace("&", "x")
    return "mysql_password", secret, f"mysql -h db.internal -u reporting -p{secret} reports"


WORDS = ("Correct", "Horse", "Battery", "Staple", "Orange", "Walrus", "Pepper", "Glacier", "Violet", "Anchor", "Maple")


def letters_only(rng: random.Random) -> tuple[str, str, str]:
    value = "".join(rng.sample(WORDS, 4))
    return "generic_secret", value, f"DB_PASSWORD={value}"


def dotted_value(rng: random.Random) -> tuple[str, str, str]:
    def part() -> str:
        return pick(rng, string.ascii_lowercase, 3) + pick(rng, string.ascii_uppercase, 3) + pick(rng, string.digits, 3)

    value = f"{part()}.{part()}"
    return "generic_secret", value, f"client_secret={value}"


def placeholder_prefix(rng: random.Random) -> tuple[str, str, str]:
    value = rng.choice(["my", "test", "your"]) + pick(rng, string.ascii_lowercase, 14)
    return "generic_secret", value, f'{rng.choice(["db_password", "api_token"])} = "{value}"'


def openai_unmarked(rng: random.Random) -> tuple[str, str, str]:
    key = "sk-proj-" + pick(rng, B64URL, 120).replace("T3BlbkFJ", "x")
    return "openai_key", key, f"OPENAI_API_KEY={key}"


def long_name(rng: random.Random) -> tuple[str, str, str]:
    name = "APP"
    while len(name) <= 110:  # the first scanner looked 100 characters back for the start of a name
        name += "_" + rng.choice(["BILLING", "SERVICE", "LEGACY", "REPLICA", "EU", "WEST", "READER"])
    value = password(rng, 24)
    return "generic_secret", value, f"{name}_PASSWORD={value}"


SECRET_KINDS: dict[str, Callable[[random.Random], tuple[str, str, str]]] = {
    "aws_access_key_id": aws_access_key_id,
    "aws_secret_access_key": aws_secret_access_key,
    "github_classic": github_classic,
    "github_fine_grained": github_fine_grained,
    "gitlab": gitlab,
    "slack_bot": slack_bot,
    "slack_webhook": slack_webhook,
    "stripe_live": stripe_live,
    "anthropic": anthropic,
    "openai_project": openai_project,
    "openai_legacy": openai_legacy,
    "google_api_key": google_api_key,
    "private_key_rsa": private_key_rsa,
    "private_key_ec": private_key_ec,
    "private_key_openssh": private_key_openssh,
    "jwt": jwt,
    "postgres_url": postgres_url,
    "mysql_url": mysql_url,
    "mongodb_srv_url": mongodb_srv_url,
    "generic_snake": generic_snake,
    "generic_camel": generic_camel,
    "generic_env": generic_env,
    "generic_json": generic_json,
    "npm": npm,
    "pypi": pypi,
    "huggingface": huggingface,
    "twilio": twilio,
    "sendgrid": sendgrid,
    "discord": discord,
    "azure": azure,
    "basic_auth": basic_auth,
    "curl_user": curl_user,
    "mysql_p": mysql_p,
    "letters_only": letters_only,
    "dotted_value": dotted_value,
    "placeholder_prefix": placeholder_prefix,
    "openai_unmarked": openai_unmarked,
    "long_name": long_name,
}

PROSE = (
    ("Notes from the deploy review on Tuesday.", "Rotate it after the release and tell the team."),
    ("While debugging the nightly job I found this in the shell history:", "The job reads it from the vault now."),
    ("Pasted from the old README, kept for the migration:", "Nobody should copy this line again."),
    ("The staging setup, as the contractor left it:", "Ask Dana before changing anything here."),
)


def plant(kind: str, rng: random.Random) -> Planted:
    rule, secret, line = SECRET_KINDS[kind](rng)
    before, after = rng.choice(PROSE)
    joiner = "\n" if "\n" in line else rng.choice([" ", "\n"])
    return Planted(kind, rule, secret, line, f"{before}{joiner}{line}{joiner}{after}")


def corpus(seed: int = SEED, per_kind: int = 1) -> list[Planted]:
    """``per_kind`` fake secrets of every kind, the same ones for the same seed."""
    rng = random.Random(seed)
    return [plant(kind, rng) for _ in range(per_kind) for kind in SECRET_KINDS]


CORPUS = corpus()
KINDS = list(SECRET_KINDS)
BY_KIND = {p.kind: p for p in CORPUS}
RULES = {rule.name: rule for rule in secrets.SECRET_PATTERNS}

# ---------------------------------------------------------------- look-alikes


def png_base64(rng: random.Random) -> str:
    """A small image as base64: the PNG signature, an IHDR chunk and mostly zero bytes (low entropy)."""
    width, height = rng.randrange(1, 64), rng.randrange(1, 64)
    ihdr = b"IHDR" + width.to_bytes(4, "big") + height.to_bytes(4, "big") + b"\x08\x02\x00\x00\x00"
    return base64.b64encode(b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0d" + ihdr + bytes(48)).decode()


def uuid4(rng: random.Random) -> str:
    h = pick(rng, HEX, 32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"


LOOKALIKE_KINDS: dict[str, Callable[[random.Random], str]] = {
    "git_sha": lambda r: f"Fixed in commit {pick(r, HEX, 40)}; cherry-picked onto release/2.4.",
    "sha256": lambda r: f'"integrity": "sha256:{pick(r, HEX, 64)}" pins the wheel.',
    "md5": lambda r: f"md5sum says {pick(r, HEX, 32)}  dist/app.tar.gz",
    "uuid": lambda r: f'"request_id": "{uuid4(r)}" shows up in every failing trace.',
    "env_reference": lambda r: f'db_password = "${{{r.choice(["DB_PASSWORD", "PGPASSWORD", "SECRET"])}}}"',
    "os_environ": lambda r: f'api_token = os.environ["{r.choice(["API_TOKEN", "GH_TOKEN"])}"]',
    "process_env": lambda r: f"const apiKey = process.env.{r.choice(['API_KEY', 'STRIPE_SECRET'])};",
    "placeholder_angle": lambda r: f"API_KEY={r.choice(['<your-key>', '<api key here>', '<token>'])}",
    "placeholder_changeme": lambda r: f"{r.choice(['password', 'secret'])} = changeme",
    "placeholder_x": lambda r: f"client_secret: {'x' * r.randrange(8, 33)}",
    "placeholder_stars": lambda r: f"password: {'*' * r.randrange(4, 17)}",
    "akia_example": lambda r: "AWS examples use AKIAEXAMPLE as a stand-in for the key id.",
    "prose_words": lambda r: r.choice(
        [
            "The password reset flow sends a link that expires after one hour.",
            "Never commit the secret; the token is read from the environment at start-up.",
            "Token refresh happens in the middleware, and the secret manager rotates keys monthly.",
        ]
    ),
    "tokenizer": lambda r: f"tokenizer = '{r.choice(['unicode61', 'porter unicode61', 'trigram'])}'",
    "password_hash": lambda r: f'password_hash = "{pick(r, HEX, r.choice([32, 40, 64]))}"',
    "image_base64": lambda r: f'avatar_token = "{png_base64(r)}"',
    "sk_test_word": lambda r: "the fixtures use sk-test as the key, never a real one",
    "database_url_env": lambda r: f"postgres://app:${{PGPASSWORD}}@db.internal:{r.randrange(5432, 5440)}/app",
    # issue 15: refused before, harmless
    "pwd_path": lambda r: f"pwd=/home/{r.choice(['alice', 'bob'])}/src/{r.choice(['webapp', 'billing-api'])}",
    "pwd_env": lambda r: f"PWD=/workspace/{r.choice(['monorepo', 'payments-service'])}/{r.choice(['src', 'deploy'])}",
    "secret_arn": lambda r: (
        f"secret_arn=arn:aws:secretsmanager:eu-west-{r.randrange(1, 4)}:{pick(r, string.digits, 12)}"
        f":secret:prod/{r.choice(['db', 'stripe'])}-{pick(r, ALNUM, 6)}"
    ),
    "vault_path": lambda r: f"secret=kv/data/{r.choice(['prod', 'staging'])}/{r.choice(['payments', 'orders'])}",
    "placeholder_words": lambda r: f'api_key = "{r.choice(["your_api_key_here", "my-secret-token", "test_password"])}"',
    "curl_env_user": lambda r: f'curl -u "$DEPLOY_USER:${r.choice(["DEPLOY_TOKEN", "API_KEY"])}" https://x.internal',
    "mysql_prompt": lambda r: f"mysql -h db.internal -u {r.choice(['root', 'app'])} -p reports",
    "docker_user": lambda r: f"docker run --rm -u {r.randrange(1000, 1010)}:1000 -v $PWD:/src builder",
    "basic_realm": lambda r: f'WWW-Authenticate: Basic realm="{r.choice(["staging", "Nexus Repository"])}"',
    "hf_identifier": lambda r: "from huggingface_hub import hf_hub_download, snapshot_download",
    "sk_proj_slug": lambda r: "the repo is sk-proj-" + "-".join(r.choice(WORDS).lower() for _ in range(9)),
    "js_object": lambda r: f"login({{ user: userName, password: {r.choice(['newPassword', 'formPassword'])} }})",
    "django_secret_call": lambda r: "SECRET_KEY = get_random_secret_key()",
    "azure_placeholder": lambda r: "DefaultEndpointsProtocol=https;AccountName=x;AccountKey=<storage-account-key>",
}


def lookalikes(seed: int = SEED, per_kind: int = 1) -> list[tuple[str, str]]:
    """(kind, text) pairs that hold no secret."""
    rng = random.Random(seed + 1)
    return [(kind, make(rng)) for _ in range(per_kind) for kind, make in LOOKALIKE_KINDS.items()]


# ---------------------------------------------------------------- helpers


def five_grams(text: str) -> set[str]:
    return {text[i : i + 5] for i in range(len(text) - 4)}


# The same kinds with other random parts: what all secrets of a kind share ("://hooks.slack.com/") is format.
SIBLINGS = {p.kind: p for p in corpus(SEED + 999)}


def five_grams_shown(p: Planted, message: str) -> list[str]:
    """Five-character pieces of ``p.secret`` that ``message`` shows, leaving out the format its kind's
    secrets share and the words of its rule's own name and description."""
    own = f"{p.rule} {RULES[p.rule].description}"
    shared = five_grams(SIBLINGS[p.kind].secret) if p.kind in SIBLINGS else set()
    return sorted(g for g in five_grams(p.secret) - shared if g in message and g not in own)


def needles(secret: str) -> set[bytes]:
    """The forms of ``secret`` a byte scan looks for."""
    forms = {secret, secret[:12], secret[-12:], json.dumps(secret)[1:-1]}
    forms |= {line for line in secret.splitlines() if len(line) >= 12}
    forms |= {form.lower() for form in forms}
    return {form.encode() for form in forms}


def store_files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (hidden ones, the index and its -wal/-shm too), by relative path."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Size and modification time of every file under ``root`` but the search index (a cache of the
    files that a read may bring up to date; the byte scans read it): any write changes one of them."""
    return {
        p.relative_to(root).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if not p.name.startswith("index.sqlite")
    }


def leaks(root: Path, planted: list[Planted], shared: frozenset[bytes] = frozenset()) -> list[str]:
    """Where a secret's bytes are in the store (each finding shows 4 characters of the secret).
    ``shared`` needles are left out: the parts all secrets of a kind have in common."""
    found = []
    for path, data in store_files(root).items():
        for p in planted:
            hits = sorted(n for n in needles(p.secret) - shared if n in data)
            if hits:
                found.append(f"{path} holds {p.kind} ({hits[0][:4].decode()}…)")
    return found


# A path that has written this many secrets is shown broken: the rest of the corpus is not tried (writes are slow).
WRITE_THROUGHS = 3


def written_enough(problems: list[str], written: int, rest: list[Planted]) -> bool:
    if written < WRITE_THROUGHS:
        return False
    problems.append(f"stopped after {written} secrets were written; not tried: {', '.join(p.kind for p in rest)}")
    return True


def summary(problems: list[str]) -> str:
    return f"{len(problems)} problem(s):\n" + "\n".join(problems[:6]) + ("\n…" if len(problems) > 6 else "")


def cclg(root: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--root", str(root), *args])


def refusal_problems(
    result: Result, p: Planted, before: dict[str, tuple[int, int]], root: Path, *, exact_rule: bool = True
) -> list[str]:
    """What is wrong with a CLI refusal of ``p``: exit code, message, anything written. With
    ``exact_rule`` false, any rule may be named (between random bytes a longer match can win)."""
    problems = []
    if result.exit_code != 4:
        problems.append(f"{p.kind}: exit code {result.exit_code}, not 4 ({result.output[:200]!r})")
    named = f"rule {p.rule}" in result.stderr if exact_rule else any(f"rule {r})" in result.stderr for r in RULES)
    if not named:
        problems.append(f"{p.kind}: stderr does not name rule {p.rule}: {result.stderr[:300]!r}")
    shown = five_grams_shown(p, result.stdout + result.stderr)
    if shown:
        problems.append(f"{p.kind}: the output shows pieces of the secret: {shown[:3]}")
    if snapshot(root) != before:
        problems.append(f"{p.kind}: the store changed")
    return problems


def build_index(root: Path) -> None:
    """Make sure the search index (index.sqlite, in WAL mode) exists, so that byte scans cover it."""
    result = cclg(root, "search", "memory", "--json")
    assert result.exit_code == 0, result.output
    assert (root / "index.sqlite").is_file()


@pytest.fixture
def seeded(store: Store) -> Store:
    api.add_memory(store, "The deploy memory: releases go out from CI", source="user")
    build_index(store.root)
    return store


# ---------------------------------------------------------------- 1. every kind is found and redacted


def test_the_corpus_is_generated_not_pasted() -> None:
    again = corpus()
    assert again == CORPUS, "the same seed gives the same corpus"
    assert {p.secret for p in corpus(SEED + 1)}.isdisjoint(p.secret for p in CORPUS)
    assert len({p.secret for p in corpus(per_kind=5)}) == 5 * len(KINDS)
    for p in CORPUS:
        assert p.secret in p.line and p.line in p.text and p.text.count(p.secret) == 1
        assert p.rule in RULES


@pytest.mark.parametrize("kind", KINDS)
def test_scan_finds_each_kind_in_prose(kind: str) -> None:
    p = BY_KIND[kind]
    matches = scan(p.text)
    assert [(m.rule, p.text[m.start : m.end]) for m in matches] == [(p.rule, p.secret)]


@pytest.mark.parametrize("kind", KINDS)
def test_redact_replaces_the_secret_and_keeps_every_other_byte(kind: str) -> None:
    p = BY_KIND[kind]
    start = p.text.index(p.secret)
    want = p.text[:start] + f"[REDACTED:{p.rule}]" + p.text[start + len(p.secret) :]
    clean, matches = redact(p.text)
    assert clean == want
    assert [m.rule for m in matches] == [p.rule]
    assert scan(clean) == [], "a redacted text holds no secret"


def test_redact_a_text_holding_the_whole_corpus() -> None:
    planted = corpus(SEED + 7, per_kind=3)
    text = "\n\n".join(p.text for p in planted)
    want = text
    for p in planted:
        want = want.replace(p.secret, f"[REDACTED:{p.rule}]", 1)
    clean, matches = redact(text)
    assert clean == want
    assert [m.rule for m in matches] == [p.rule for p in planted]


def test_redact_value_cleans_nested_strings_and_keys() -> None:
    a, b, c = BY_KIND["github_classic"], BY_KIND["generic_json"], BY_KIND["stripe_live"]
    value = {
        "tool_response": {"stdout": a.text, "items": [1, None, b.line, {a.secret: True}]},
        "n": 3,
        c.secret: c.text,
    }
    clean, count = redact_value(value)
    assert count == 5
    dumped = json.dumps(clean)
    assert not any(n in dumped.encode() for p in (a, b, c) for n in needles(p.secret))
    assert clean["n"] == 3 and clean["tool_response"]["items"][:2] == [1, None]
    assert clean["tool_response"]["stdout"] == redact(a.text)[0]
    assert {"[REDACTED:stripe_key]", "n", "tool_response"} == set(clean)


# ---------------------------------------------------------------- 2. look-alikes are let through


@pytest.mark.parametrize(("kind", "text"), lookalikes(), ids=list(LOOKALIKE_KINDS))
def test_lookalikes_are_not_secrets(kind: str, text: str) -> None:
    assert [(m.rule, text[m.start : m.end]) for m in scan(text)] == []
    assert redact(text) == (text, [])
    refuse_secrets({"content": text})


# The same promise on code and notes as a memory store sees them: reading a secret from somewhere
# is not holding one, and neither is a documented example key.
MORE_LOOKALIKES = {
    "getpass_call": "password = getpass.getpass()",
    "urandom_call": "secret_key = os.urandom(32)",
    "request_form": 'password = request.form["password"]',
    "subscript": "token = tokens[index]",
    "annotation": "token: Optional[str] = None",
    "prose_with_colon": "Reminder about the password: customers reset it from the account page.",
    "aws_doc_example": "The AWS docs use AKIAIOSFODNN7EXAMPLE as the sample access key id.",
}


@pytest.mark.parametrize("text", MORE_LOOKALIKES.values(), ids=list(MORE_LOOKALIKES))
def test_code_and_notes_that_only_name_a_secret_are_not_secrets(text: str) -> None:
    assert [(m.rule, text[m.start : m.end]) for m in scan(text)] == []


# ---------------------------------------------------------------- more real shapes that must be found


def more_secrets(rng: random.Random) -> dict[str, tuple[str, str]]:
    """(secret, text) in shapes agents meet every day, beyond the format rules' own examples."""
    value = pick(rng, ALNUM, 28)
    prefixed = rng.choice(["my", "My", "test"]) + pick(rng, ALNUM, 22)
    hex_key = pick(rng, HEX, 64)  # secrets.token_hex(32), what Flask and Django docs suggest
    escaped_json = json.dumps({"client_id": "web", "client_secret": value}).replace('"', '\\"')
    return {
        "random_value_starting_like_a_placeholder": (prefixed, f'db_password = "{prefixed}"'),
        "token_hex_secret_key": (hex_key, f'SECRET_KEY = "{hex_key}"'),
        "escaped_json_in_a_shell_command": (value, f'curl -s -d "{escaped_json}" https://auth.internal/token'),
        "bearer_header": (value, f'curl -H "Authorization: Bearer {value}" https://api.internal/v1/me'),
        "https_url_with_password": (value, f"git clone https://deploy:{value}@git.internal/app.git"),
    }


MORE_SECRETS = more_secrets(random.Random(SEED + 3))


@pytest.mark.parametrize("case", list(MORE_SECRETS))
def test_more_real_shapes_are_found(case: str) -> None:
    secret, text = MORE_SECRETS[case]
    assert any(text[m.start : m.end] == secret for m in scan(text)), redact(text)[0]


# ---------------------------------------------------------------- 3. refusals name the rule, not the secret


@pytest.mark.parametrize("kind", KINDS)
def test_refusal_names_the_rule_and_the_field_and_shows_at_most_four_characters(kind: str) -> None:
    p = BY_KIND[kind]
    fields = {"reason": "moved to the vault", "source": {"label": "user", "quote": p.text}}
    with pytest.raises(SecretError) as caught:
        refuse_secrets(fields, "the test write")
    message = str(caught.value)
    assert f"rule {p.rule}" in message and "field 'source.quote'" in message
    assert "nothing was written" in message
    assert f"'{p.secret[:4]}…'" in message, "the preview is the first four characters"
    assert caught.value.exit_code == 4
    assert len(caught.value.problems) == 1
    for text in (message, *caught.value.problems):
        assert five_grams_shown(p, text) == []


def test_refusal_lists_every_secret_of_every_field() -> None:
    a, b = BY_KIND["gitlab"], BY_KIND["postgres_url"]
    with pytest.raises(SecretError) as caught:
        refuse_secrets({"content": f"{a.text}\n{b.text}", "tags": ["ok", b.line]})
    problems = caught.value.problems
    assert "(and 2 more)" in str(caught.value)
    want = [("content", "gitlab_token"), ("content", "database_url"), ("tags[1]", "database_url")]
    assert len(problems) == len(want)
    for problem, (field, rule) in zip(problems, want, strict=True):
        assert f"field '{field}'" in problem and f"rule {rule}" in problem, problem


@pytest.mark.parametrize("kind", ["github_classic", "anthropic", "private_key_ec", "slack_webhook"])
def test_a_secret_used_as_a_key_is_not_shown_in_the_field_name(kind: str) -> None:
    """A JSON object key is scanned too; the message must then not print the key as the field's name."""
    p = BY_KIND[kind]
    with pytest.raises(SecretError) as caught:
        refuse_secrets({"metadata": {p.secret: "imported"}})
    for text in (str(caught.value), *caught.value.problems):
        assert five_grams_shown(p, text) == [], text


# ---------------------------------------------------------------- 4a. CLI write paths


NUMBERS = itertools.count(1)


def fresh(text: str) -> str:
    """``text`` made unique (the store does not write the same content twice)."""
    return f"{text} (note {next(NUMBERS)})"


def plain() -> list[str]:
    return ["--content", fresh("The deploy key lives in the vault"), "--source", "user"]


ADD_FIELDS: dict[str, Callable[[Planted], list[str]]] = {
    "content": lambda p: ["--content", p.text, "--source", "user"],
    "quote": lambda p: [*plain(), "--quote", p.text],
    "tag": lambda p: [*plain(), "--tag", p.line],
    "key": lambda p: [*plain(), "--key", p.line],
    "source": lambda p: ["--content", fresh("The deploy key lives in the vault"), "--source", p.line],
    "scope": lambda p: [*plain(), "--scope", f"project={p.line}"],
    "priority": lambda p: [*plain(), "--priority", p.line],
}


@pytest.mark.parametrize("field", list(ADD_FIELDS))
def test_cli_add_refuses_a_secret_in_any_field(seeded: Store, field: str) -> None:
    root = seeded.root
    harmless = Planted("harmless", "", "wintergreen-marker", "wintergreen-marker", "wintergreen-marker")
    assert cclg(root, "add", *ADD_FIELDS[field](harmless)).exit_code == 0, "the field is stored when harmless"
    assert b"wintergreen-marker" in b"".join(store_files(root).values())
    problems: list[str] = []
    written = 0
    for i, p in enumerate(CORPUS):
        if written_enough(problems, written, CORPUS[i:]):
            break
        before = snapshot(root)
        result = cclg(root, "add", *ADD_FIELDS[field](p))
        problems += refusal_problems(result, p, before, root)
        written += result.exit_code == 0
    build_index(root)
    assert not problems, summary(problems)
    assert leaks(root, CORPUS) == []


def _target(root: Path) -> tuple[str, str]:
    """A fresh memory to patch: its id and the id of the patch that created it."""
    result = api.add_memory(Store.open(root), fresh("Releases are tagged by the release bot"), source="user")
    return result.new_nodes[0].id, result.patch.id


SUPERSEDE = ["patch", "supersede", "--target"]
ROLLBACK = ["patch", "rollback", "--target"]
PATCHES: dict[str, Callable[[Planted, str, str], list[str]]] = {
    "supersede_content": lambda p, node, _: [*SUPERSEDE, node, "--content", p.text, "--reason", "r"],
    "supersede_reason": lambda p, node, _: [*SUPERSEDE, node, "--content", fresh("ok"), "--reason", p.text],
    "supersede_source": lambda p, node, _: [
        *SUPERSEDE,
        node,
        "--content",
        fresh("ok"),
        "--reason",
        "r",
        "--source",
        p.line,
    ],
    "forget_reason": lambda p, node, _: ["forget", node, "--reason", p.text],
    "rollback_reason": lambda p, _, patch: [*ROLLBACK, patch, "--reason", p.text],
    "rollback_command_reason": lambda p, _, patch: ["rollback", patch, "--reason", p.text],
    "rollback_source": lambda p, _, patch: [*ROLLBACK, patch, "--reason", "r", "--source", p.line],
}


@pytest.mark.parametrize("case", list(PATCHES))
def test_cli_patch_refuses_a_secret_in_content_reason_or_source(seeded: Store, case: str) -> None:
    root = seeded.root
    problems: list[str] = []
    node, patch = _target(root)
    written = 0
    for i, p in enumerate(CORPUS):
        if written_enough(problems, written, CORPUS[i:]):
            break
        before = snapshot(root)
        result = cclg(root, *PATCHES[case](p, node, patch))
        problems += refusal_problems(result, p, before, root)
        if result.exit_code == 0:  # the write went through: the next kind gets a fresh target
            written += 1
            node, patch = _target(root)
    node, patch = _target(root)
    harmless = Planted("harmless", "", "", "ok", "wintergreen reason")
    assert cclg(root, *PATCHES[case](harmless, node, patch)).exit_code == 0, "the same command works when harmless"
    build_index(root)
    assert not problems, summary(problems)
    assert leaks(root, CORPUS) == []


RAW_FORMS: dict[str, Callable[[Planted, Path, random.Random], list[str]]] = {
    "text_file": lambda p, tmp, _: [str(write(tmp / "notes.md", p.text.encode() + b"\n"))],
    "binary_file": lambda p, tmp, rng: [
        str(write(tmp / "core.bin", rng.randbytes(3000) + b"\0" + p.line.encode() + b"\0" + rng.randbytes(3000)))
    ],
    "file_name": lambda p, tmp, _: [str(write(tmp / "ok.txt", b"harmless\n")), "--name", p.line],
}


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("form", list(RAW_FORMS))
def test_cli_raw_refuses_a_secret(seeded: Store, tmp_path: Path, form: str) -> None:
    root, rng = seeded.root, random.Random(SEED + 11)
    problems = []
    for p in CORPUS:
        args = RAW_FORMS[form](p, tmp_path, rng)
        before = snapshot(root)
        result = cclg(root, "raw", *args)
        problems += refusal_problems(result, p, before, root, exact_rule=form != "binary_file")
    assert not problems, summary(problems)
    assert cclg(root, "raw", str(write(tmp_path / "fine.txt", b"wintergreen\n"))).exit_code == 0, (
        "a harmless file is kept"
    )
    assert any(path.startswith("raw/fine-") for path in store_files(root))
    assert leaks(root, CORPUS) == []


def test_cli_import_jsonl_with_one_secret_line_writes_nothing(seeded: Store, tmp_path: Path) -> None:
    root = seeded.root
    problems = []
    for p in CORPUS:
        good = {"content": "Wintergreen is the code name of the billing rewrite", "source": "user"}
        path = tmp_path / "seed.jsonl"
        path.write_text(json.dumps(good) + "\n" + json.dumps({"content": p.text, "source": "user"}) + "\n")
        before = snapshot(root)
        problems += refusal_problems(cclg(root, "import-jsonl", str(path)), p, before, root)
    assert not problems, summary(problems)
    assert b"Wintergreen" not in b"".join(store_files(root).values()), "the good line is not imported either"
    assert leaks(root, CORPUS) == []
    path.write_text(json.dumps(good) + "\n")
    assert cclg(root, "import-jsonl", str(path)).exit_code == 0, "the good line alone is imported"
    assert b"Wintergreen" in b"".join(store_files(root).values())


def test_cli_import_jsonl_full_record_with_a_secret_metadata_key(seeded: Store, tmp_path: Path) -> None:
    p = BY_KIND["github_fine_grained"]
    node = new_node("Wintergreen is the billing rewrite", source=Source(label="user"), metadata={p.secret: "x"})
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(node.to_dict()) + "\n")
    before = snapshot(seeded.root)
    assert refusal_problems(cclg(seeded.root, "import-jsonl", str(path)), p, before, seeded.root) == []


def test_every_node_field_is_either_scanned_for_secrets_or_checked_to_hold_none() -> None:
    """The secret check reads only the fields that carry text from outside; a field the format adds
    later must be put on one side or the other, or this fails."""
    from cclg import format as fmt
    from cclg.ledger.writer import CHECKED_FIELDS, TEXT_FIELDS

    assert not set(TEXT_FIELDS) & set(CHECKED_FIELDS)
    assert set(TEXT_FIELDS) | set(CHECKED_FIELDS) == set(fmt.canonical_order("memory_node"))


@pytest.mark.parametrize(
    "where",
    ["scope.project", "key", "priority", "source.label", "source.quote", "source.raw_spans", "metadata", "tags"],
)
def test_cli_import_jsonl_full_record_with_a_secret_in_any_text_field(
    seeded: Store, tmp_path: Path, where: str
) -> None:
    p = BY_KIND["github_fine_grained"]
    record = new_node("Wintergreen is the billing rewrite", source=Source(label="user")).to_dict()
    if where == "source.raw_spans":
        record["source"]["raw_spans"] = [{"source_id": p.secret, "turn_id": None, "char_start": 0, "char_end": 1}]
    elif where == "metadata":
        record["metadata"]["note"] = p.secret
    elif where == "tags":
        record["tags"] = ["billing", p.secret]
    elif "." in where:
        outer, inner = where.split(".")
        record[outer][inner] = p.secret
    else:
        record[where] = p.secret
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(record) + "\n")
    before = snapshot(seeded.root)
    assert refusal_problems(cclg(seeded.root, "import-jsonl", str(path)), p, before, seeded.root) == []


@pytest.mark.parametrize("kind", sorted(BY_KIND)[:6])
def test_the_quick_flat_text_is_the_flat_text(kind: str) -> None:
    """secrets_in scans a text built without bookkeeping and builds the full _Flat only on a match:
    the two texts must be the same, or a secret spanning a key and its value would scan differently."""
    value = {"a": [1, 2.5, "x", {"b": None, "c": True}], "d": {}, "e": [], BY_KIND[kind].secret: {"f": "g"}}
    parts: list[str] = []
    secrets._flat_text(value, parts)
    assert "".join(parts) == secrets._Flat(value).text


def test_cli_import_of_a_container_holding_a_secret_writes_nothing(seeded: Store, tmp_path: Path) -> None:
    root = seeded.root
    problems = []
    for p in CORPUS:
        good = new_node("Wintergreen is the code name of the billing rewrite", source=Source(label="user"))
        node = new_node("placeholder", source=Source(label="user"))
        node.content = p.text
        node.metadata["content_hash"] = content_hash(p.text)  # the edit a hand would make, hash and all
        path = tmp_path / "memories.cclg"
        path.write_text(write_container([good, node]), encoding="utf-8")
        assert cclg(root, "open", str(path), "--json").exit_code == 0, "the container itself is well formed"
        before = snapshot(root)
        problems += refusal_problems(cclg(root, "import-container", str(path)), p, before, root)
    assert not problems, summary(problems)
    assert b"Wintergreen" not in b"".join(store_files(root).values()), "the good memory is not imported either"
    assert leaks(root, CORPUS) == []
    path.write_text(write_container([good]), encoding="utf-8")
    assert cclg(root, "import-container", str(path)).exit_code == 0, "the good memory alone is imported"
    assert b"Wintergreen" in b"".join(store_files(root).values())


# ---------------------------------------------------------------- 4b. MCP (one real stdio server)


@dataclass
class McpSession:
    store: Store
    call: Callable[[str, dict[str, Any]], Any]


@pytest.fixture(scope="module")
def mcp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpSession]:
    import anyio.from_thread
    from mcp import Client
    from mcp.client.stdio import stdio_client

    from tests.test_mcp_server import TIMEOUT, sandboxed_server

    base = tmp_path_factory.mktemp("guard-mcp")
    store, _ = Store.init(base / "store")
    api.add_memory(store, "The deploy memory: releases go out from CI", source="user")
    params = sandboxed_server(base, store.root)
    with ExitStack() as stack:
        errlog = stack.enter_context((base / "server-stderr.log").open("w", encoding="utf-8"))
        portal = stack.enter_context(anyio.from_thread.start_blocking_portal())
        client = stack.enter_context(
            portal.wrap_async_context_manager(Client(stdio_client(params, errlog=errlog), read_timeout_seconds=TIMEOUT))
        )
        yield McpSession(store, lambda name, arguments: portal.call(client.call_tool, name, arguments))
    assert "Traceback" not in (base / "server-stderr.log").read_text(encoding="utf-8")


def _mcp_target(session: McpSession) -> tuple[str, str]:
    """A fresh memory to patch (written beside the server, which reads the files on each call)."""
    return _target(session.store.root)


MCP_CALLS: dict[str, Callable[[Planted, str, str], tuple[str, dict[str, Any]]]] = {
    "add_content": lambda p, _, __: ("cclg_add", {"content": p.text, "source": "user"}),
    "add_scope": lambda p, _, __: (
        "cclg_add",
        {"content": fresh("The deploy key is in the vault"), "scope": {"project": p.line}},
    ),
    "patch_content": lambda p, node, _: (
        "cclg_patch",
        {"operation": "supersede", "targets": [node], "contents": [p.text], "reason": "moved"},
    ),
    "patch_reason": lambda p, node, _: (
        "cclg_patch",
        {"operation": "supersede", "targets": [node], "contents": [fresh("ok")], "reason": p.text},
    ),
    "patch_rollback_reason": lambda p, _, patch: (
        "cclg_patch",
        {"operation": "rollback", "targets": [patch], "reason": p.text},
    ),
    "raw_content": lambda p, _, __: ("cclg_raw", {"content": p.text + "\n", "name": "notes.md"}),
}


@pytest.mark.parametrize("case", list(MCP_CALLS))
def test_mcp_tools_refuse_a_secret_and_store_none_of_it(mcp: McpSession, case: str) -> None:
    from tests.test_mcp_server import text_of

    # The cases share the server's store: each plants its own secrets so that its byte scan is its own.
    planted = corpus(SEED + 100 + list(MCP_CALLS).index(case))
    problems: list[str] = []
    node, patch = _mcp_target(mcp)
    written = 0
    for i, p in enumerate(planted):
        if written_enough(problems, written, planted[i:]):
            break
        before = snapshot(mcp.store.root)
        name, arguments = MCP_CALLS[case](p, node, patch)
        result = mcp.call(name, arguments)
        message = text_of(result)
        if not result.is_error:
            problems.append(f"{p.kind}: {name} succeeded")
            written += 1
            node, patch = _mcp_target(mcp)  # the write went through: the next kind gets a fresh target
        elif f"rule {p.rule}" not in message:
            problems.append(f"{p.kind}: the tool error does not name rule {p.rule}: {message[:200]!r}")
        if five_grams_shown(p, message):
            problems.append(f"{p.kind}: the tool error shows pieces of the secret")
        if snapshot(mcp.store.root) != before:
            problems.append(f"{p.kind}: the store changed")
    assert not problems, summary(problems)
    # Other cases wrote to this store: leave out what this corpus shares with any other ("https://hook").
    shared = frozenset(n for q in corpus(SEED + 999) for n in needles(q.secret))
    assert leaks(mcp.store.root, planted, shared) == []


# ---------------------------------------------------------------- 4c. the hook (real subprocess, real payloads)

HOOK = [sys.executable, "-c", "from cclg.hook import main; main()"]
SESSION = "5f0c3a9e-2b7d-4e11-9a63-0c2f1d8e7b44"


def run_hook(root: Path, event: str, payload: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    result = subprocess.run(
        [*HOOK, "--root", str(root), "--agent", "claude", event],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=60,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    output: dict[str, Any] = json.loads(result.stdout)
    return output


@dataclass
class HookRun:
    root: Path
    outputs: dict[str, dict[str, Any]]
    planted: list[Planted]


@pytest.fixture(scope="module")
def hook_run(tmp_path_factory: pytest.TempPathFactory) -> HookRun:
    """One Claude Code session through the real hook, every event carrying the corpus."""
    base = tmp_path_factory.mktemp("guard-hook")
    store, _ = Store.init(base / "store")
    api.add_memory(store, "Deploys go out from CI with the release workflow", source="user")
    env = {"PATH": os.environ["PATH"], "HOME": str(base), "CCLG_HOME": str(base / "unused"), "CCLG_SEMANTIC": "off"}
    planted = corpus(SEED + 5)
    common = {
        "session_id": SESSION,
        "transcript_path": f"/home/u/.claude/projects/repo/{SESSION}.jsonl",
        "cwd": "/home/u/repo",
        "permission_mode": "default",
    }
    prompt = "periwinkle: how do deploys go out? I pasted what I found.\n\n"
    prompt += "\n\n".join(p.text for p in planted) + "\n\nthanks, marzipan"
    dotenv = "\n".join(p.line for p in planted if "\n" not in p.line)
    # A config file as an agent reads it: each service's credential (or connection URL) as a JSON string.
    credentials = {p.kind: p.line if p.line.startswith(("postgres", "mysql", "mongodb")) else p.secret for p in planted}
    settings = {"services": {kind: {"url": "https://svc.internal", "credential": c} for kind, c in credentials.items()}}
    short = planted[KINDS.index("github_classic")]
    calls = [
        ("user-prompt", {"hook_event_name": "UserPromptSubmit", "prompt": prompt}),
        # Another session: in the first one the memory is in the context already, and is not given twice.
        (
            "user-prompt",
            {
                "hook_event_name": "UserPromptSubmit",
                "prompt": f"how do deploys go out? {short.secret}",
                "session_id": f"{SESSION}-2",
            },
        ),
        (
            "post-tool",
            {
                "hook_event_name": "PostToolUse",
                "tool_name": "Bash",
                "tool_input": {"command": "cat .env", "description": "Show the environment file (lavender)"},
                "tool_response": {"stdout": dotenv, "stderr": "", "interrupted": False, "isImage": False},
                "tool_use_id": "toolu_01GuardBash",
            },
        ),
        (
            "post-tool",
            {
                "hook_event_name": "PostToolUse",
                "tool_name": "Read",
                "tool_input": {"file_path": "/home/u/repo/config/settings.json"},
                "tool_response": {
                    "type": "text",
                    "file": {
                        "filePath": "/home/u/repo/config/settings.json",
                        "content": json.dumps(settings, indent=2),
                        "numLines": len(planted) * 4 + 3,
                        "startLine": 1,
                        "totalLines": len(planted) * 4 + 3,
                    },
                },
                "tool_use_id": "toolu_01GuardRead",
            },
        ),
        (
            "pre-compact",
            {
                "hook_event_name": "PreCompact",
                "trigger": "manual",
                "custom_instructions": "keep the tangerine notes; " + " ".join(p.line for p in planted[:8]),
            },
        ),
        ("session-end", {"hook_event_name": "SessionEnd", "reason": "exit"}),
    ]
    outputs = {}
    for number, (event, extra) in enumerate(calls):
        outputs[f"{number}-{event}"] = run_hook(store.root, event, {**common, **extra}, env)
    return HookRun(store.root, outputs, planted)


def test_hook_answers_with_valid_json_and_logs_no_failure(hook_run: HookRun) -> None:
    names = ["0-user-prompt", "1-user-prompt", "2-post-tool", "3-post-tool", "4-pre-compact", "5-session-end"]
    assert list(hook_run.outputs) == names
    context = hook_run.outputs["1-user-prompt"]["hookSpecificOutput"]["additionalContext"]
    assert "Deploys go out from CI" in context, "the prompt still finds its memories once redacted"
    short = hook_run.planted[KINDS.index("github_classic")]
    assert "[REDACTED:github_token]" in context and short.secret[:12] not in context, "the echoed query is clean"
    assert all(output == {} for name, output in hook_run.outputs.items() if not name.endswith("user-prompt"))
    assert not (hook_run.root / "audit" / "hook_failures.jsonl").exists()
    store = Store.open(hook_run.root)
    events = [e["event"] for e in read_jsonl(store.session_events_path(SESSION)).records]
    assert events == ["user_prompt", "post_tool", "post_tool", "pre_compact", "session_end"]
    assert [e["event"] for e in read_jsonl(store.session_events_path(f"{SESSION}-2")).records] == ["user_prompt"]
    assert store.read_session(SESSION).ended_at is not None


def test_hook_keeps_the_words_around_the_secrets(hook_run: HookRun) -> None:
    log = Store.open(hook_run.root).session_events_path(SESSION).read_text(encoding="utf-8")
    assert "periwinkle: how do deploys go out?" in log and "lavender" in log
    raw = b"".join(p.read_bytes() for p in (hook_run.root / "raw").iterdir()).decode()
    for word in ("periwinkle", "marzipan", "tangerine", "Rotate it after the release", "https://svc.internal"):
        assert word in raw


def test_hook_redacts_every_secret_kind_in_raw(hook_run: HookRun) -> None:
    raw = b"".join(p.read_bytes() for p in (hook_run.root / "raw").iterdir()).decode()
    assert "[REDACTED:" in raw
    missing = sorted({p.rule for p in hook_run.planted} - {r for r in RULES if f"[REDACTED:{r}]" in raw})
    assert missing == []


def test_hook_leaves_no_secret_byte_in_the_store(hook_run: HookRun) -> None:
    files = store_files(hook_run.root)
    assert any(path.startswith("raw/") for path in files) and any(path.startswith("sessions/") for path in files)
    assert "index.sqlite" in files
    found = leaks(hook_run.root, hook_run.planted)
    assert found == [], "\n".join(found)


def test_hook_redacts_a_secret_in_escaped_json_of_a_shell_command(store: Store) -> None:
    """Agents post JSON with curl: the command holds the JSON with its quotes escaped for the shell."""
    secret, command = MORE_SECRETS["escaped_json_in_a_shell_command"]
    payload = {
        "session_id": SESSION,
        "transcript_path": "/t.jsonl",
        "cwd": "/home/u/repo",
        "permission_mode": "default",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_response": {"stdout": '{"ok": true}', "stderr": "", "interrupted": False, "isImage": False},
        "tool_use_id": "toolu_01GuardCurl",
    }
    env = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ["HOME"],
        "CCLG_HOME": os.environ["CCLG_HOME"],
        "CCLG_SEMANTIC": "off",
    }
    assert run_hook(store.root, "post-tool", payload, env) == {}
    assert "auth.internal" in Store.open(store.root).session_events_path(SESSION).read_text()
    planted = Planted("escaped_json", "generic_secret", secret, command, command)
    assert leaks(store.root, [planted]) == []


# ---------------------------------------------------------------- cclg scan: secrets already on disk


def _plant_the_old_way(root: Path, planted: list[Planted], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Memories and raw evidence written as a store without the guard would have: the secrets
    reach the files (the guard is switched off for the writes)."""
    store = Store.open(root)
    with monkeypatch.context() as off:
        off.setattr(secrets, "refuse_secrets", lambda *_, **__: None)
        ids = [api.add_memory(store, p.text, source="before the guard").node.id for p in planted]
        api.keep_raw(store, "\n".join(p.line for p in planted).encode(), "old-notes.txt")
    return ids


def test_scan_reports_secrets_in_the_store_and_redact_removes_every_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "store"
    Store.init(root)
    planted = corpus(seed=SEED + 7)
    ids = _plant_the_old_way(root, planted, monkeypatch)
    assert leaks(root, planted), "the old-way writes must have put the secrets on disk"

    found = CliRunner().invoke(cli, ["--root", str(root), "scan", "--store", "--json"])
    assert found.exit_code == 1, found.output
    report = json.loads(found.stdout)["secrets"]
    assert {p.rule for p in planted} <= {r["rule"] for r in report}
    assert all(len(r["preview"]) <= secrets.PREVIEW_CHARS + 1 for r in report)
    assert not any(p.secret[:12] in found.stdout for p in planted)

    fixed = CliRunner().invoke(cli, ["--root", str(root), "scan", "--store", "--redact", "--json"])
    assert fixed.exit_code == 0, fixed.output
    redacted = {r["file"] for r in json.loads(fixed.stdout)["redacted"]}
    assert {f"nodes/{i}.json" for i in ids} <= redacted
    assert leaks(root, planted) == []
    clean = CliRunner().invoke(cli, ["--root", str(root), "scan", "--store"])
    assert clean.exit_code == 0, clean.output

    store = Store.open(root)
    from cclg.maintenance.doctor import diagnose

    assert diagnose(store).findings == []
    audit = [r for r in read_jsonl(store.audit_path).records if r.get("action") == "redact_secrets"]
    assert {r["file"] for r in audit} == redacted
    for node_id in ids:  # the memory keeps its id; its hash follows the redacted content
        node = store.read_node(node_id)
        assert "[REDACTED:" in node.content and node.metadata["content_hash"] == content_hash(node.content)


def test_scan_of_paths_and_its_usage_errors(tmp_path: Path) -> None:
    planted = corpus(seed=SEED + 8)[:3]
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("nothing here\n" + planted[0].text + "\n")
    (folder / "sub").mkdir()
    (folder / "sub" / "b.env").write_text(planted[1].line + "\n")
    (folder / "clean.txt").write_text("no secrets at all\n")
    result = CliRunner().invoke(cli, ["scan", str(folder), "--json"])
    assert result.exit_code == 1
    hits = json.loads(result.stdout)["secrets"]
    assert sorted((Path(h["path"]).name, h["line"]) for h in hits) == [("a.md", 2), ("b.env", 1)]
    assert CliRunner().invoke(cli, ["scan", str(folder / "clean.txt")]).exit_code == 0
    for args, error in [
        ([], "give PATHS to scan, or --store"),
        ([str(folder), "--redact"], "--redact works on the store only"),
        ([str(tmp_path / "missing")], f"no such file or folder: {tmp_path / 'missing'}"),
    ]:
        refused = CliRunner().invoke(cli, ["scan", *args])
        assert refused.exit_code == 2 and error in refused.stderr, refused.stderr


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ('SECRET_KEY="k3Jd8s9Lq2Wm4Zx7"', True),  # letters and digits only: still a secret
        ("API_TOKEN=Zk39dkLq0zPwT6yR", True),
        ("pwd=Zk39dkLq0zPwT6yR)", True),
        ('password = "hunter22"', True),  # short: 8 characters cannot reach 3 bits each (issue 15)
        ('smtp_password: "kqzvbwkx"', True),
        ("conn = Client(address, authkey=self._authkey)", False),  # code naming a value
        ("Client(token.address, authkey=authkey)", False),
        ("pwd = (self.host, 1)", False),
        ("PseudoToken = Whitespace + group(x)", False),
    ],
)
def test_generic_rule_tells_values_from_code(text: str, found: bool) -> None:
    assert bool(scan(text)) is found


# ---------------------------------------------------------------- issue 15: one detector, everywhere


def glued(secret: str) -> str:
    """A URL glued to a JSON escape (``\\n`` as two characters, as in a log line copied from JSON output)."""
    return "the job logged {'dsn': 'conn:\\npostgres://billing:" + secret + "@db.internal/prod'}"


def encoded_forms(text: str) -> list[str]:
    """``text`` as agents paste it: as is, in a JSON string, that JSON in a shell command, encoded twice."""
    as_json = json.dumps({"note": text})
    return [text, as_json, f"curl -d '{as_json}' https://api.internal", json.dumps(as_json)]


def test_a_write_refuses_exactly_what_scan_finds_in_the_file_it_would_write() -> None:
    """`add` refused nothing that `scan` then reported in the node file (a JSON-escaped URL): the
    write check, `scan` of a text and `scan` of the file written are one detector."""
    texts = [p.text for p in corpus(SEED + 31)] + [text for _, text in lookalikes(SEED + 31)]
    texts += [*MORE_LOOKALIKES.values(), glued(password(random.Random(SEED), 20))]
    disagree = []
    for text in (form for t in texts for form in encoded_forms(t)):
        refused = bool(secrets.secrets_in({"memory": {"content": text}}))
        in_file = bool(secrets.scan_bytes(json.dumps({"content": text}, indent=2).encode()))
        if not refused == in_file == bool(scan(text)):
            disagree.append(f"refused {refused}, in the file {in_file}, in the text {bool(scan(text))}: {text[:90]!r}")
    assert disagree == []


def test_cli_add_refuses_a_url_glued_to_a_json_escape(seeded: Store) -> None:
    secret = password(random.Random(SEED + 32), 20)
    p = Planted("glued", "database_url", secret, glued(secret), glued(secret))
    before = snapshot(seeded.root)
    result = cclg(seeded.root, "add", "--content", p.text, "--source", "user")
    assert refusal_problems(result, p, before, seeded.root) == []


@pytest.mark.parametrize("kind", ["generic_snake", "letters_only", "curl_user"])
def test_a_secret_split_between_a_key_and_its_value_is_refused(kind: str) -> None:
    """Keys and values were scanned apart: ``{"password": "..."}`` in metadata passed."""
    p = BY_KIND[kind]
    with pytest.raises(SecretError) as caught:
        refuse_secrets({"memory": {"metadata": {"db": {"password": p.secret}}, "tags": ["x"]}})
    assert "field 'memory.metadata.db.password'" in str(caught.value)
    assert five_grams_shown(p, str(caught.value)) == []


def test_cli_import_jsonl_refuses_a_password_in_metadata(seeded: Store, tmp_path: Path) -> None:
    p = BY_KIND["generic_env"]
    node = new_node("Wintergreen is the billing rewrite", source=Source(label="user"), metadata={"password": p.secret})
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(node.to_dict()) + "\n")
    before = snapshot(seeded.root)
    assert refusal_problems(cclg(seeded.root, "import-jsonl", str(path)), p, before, seeded.root) == []


def test_redact_value_reads_a_key_with_its_value() -> None:
    secret = BY_KIND["letters_only"].secret
    payload = {"tool_input": {"user": "alice", "password": secret, "port": 5432}, "ok": True}
    clean, count = redact_value(payload)
    assert count == 1
    assert clean == {"tool_input": {"user": "alice", "password": "[REDACTED:generic_secret]", "port": 5432}, "ok": True}
    assert redact_value({"password": "changeme", "token_count": 12}) == ({"password": "changeme", "token_count": 12}, 0)


def test_a_secret_inside_escapes_is_redacted_with_its_escapes() -> None:
    """Offsets map back through the decoding: the redaction covers the escaped text exactly."""
    key = BY_KIND["private_key_ec"].secret
    escaped = json.dumps({"key": key})  # its line breaks as \n
    clean, matches = redact(escaped)
    assert [m.rule for m in matches] == ["private_key"]
    assert clean == '{"key": "[REDACTED:private_key]"}'
    twice = json.dumps(escaped)  # and once more: \\n, \"
    assert redact(twice)[0] == json.dumps(clean)


def test_hook_redacts_a_password_in_tool_input_and_a_url_in_escaped_output(store: Store) -> None:
    secret, url_secret = password(random.Random(SEED + 33), 20), password(random.Random(SEED + 34), 20)
    output = json.dumps({"status": "ok", "log": f"connected\npostgres://app:{url_secret}@db.internal/prod"})
    payload = {
        "session_id": SESSION,
        "transcript_path": "/t.jsonl",
        "cwd": "/home/u/repo",
        "hook_event_name": "PostToolUse",
        "tool_name": "mcp__db__connect",
        "tool_input": {"host": "db.internal", "user": "app", "password": secret},
        "tool_response": {"stdout": output, "stderr": "", "interrupted": False, "isImage": False},
        "tool_use_id": "toolu_01GuardNested",
    }
    env = {"PATH": os.environ["PATH"], "HOME": os.environ["HOME"], "CCLG_HOME": os.environ["CCLG_HOME"]}
    assert run_hook(store.root, "post-tool", payload, {**env, "CCLG_SEMANTIC": "off"}) == {}
    assert "db.internal" in Store.open(store.root).session_events_path(SESSION).read_text()
    planted = [Planted("in", "generic_secret", secret, "", ""), Planted("out", "database_url", url_secret, "", "")]
    assert leaks(store.root, planted) == []


def test_scan_store_redact_removes_what_scan_reports_from_records_index_and_code_graphs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`scan --store --redact` said "redacted" and left the secret in nodes/, patches/, index.sqlite
    (a JSON-escaped URL, a password in metadata) and in active/codegraphs/, which it skipped."""
    from tests.test_codegraph import GitRepo

    root = tmp_path / "store"
    Store.init(root)
    store = Store.open(root)
    url_secret = password(random.Random(SEED + 35), 20)
    meta = BY_KIND["letters_only"]
    repo = GitRepo(tmp_path / "repo")
    repo.commit({"settings.py": f'DATABASE = "{BY_KIND["postgres_url"].line}"\n'})
    with monkeypatch.context() as off:  # a store written before this detector: the secrets reach disk
        off.setattr(secrets, "refuse_secrets", lambda *_, **__: None)
        off.setattr(secrets, "redact_bytes", lambda data, **_: (data, 0))
        node = api.add_memory(store, glued(url_secret), source="user").node
        node_with_meta = new_node("Billing reads its password from metadata", source=Source(label="user"))
        node_with_meta.metadata["credentials"] = {"password": meta.secret}
        api.import_jsonl(store, (json.dumps(node_with_meta.to_dict()) + "\n").encode(), name="old.jsonl")
        assert cclg(root, "code-index", str(repo.root)).exit_code == 0
    build_index(root)
    planted = [Planted("glued", "database_url", url_secret, "", ""), meta, BY_KIND["postgres_url"]]
    before = {finding.split(" holds ")[1].split(" ")[0] for finding in leaks(root, planted)}
    assert before == {"glued", "letters_only", "postgres_url"}, "the old-way writes put each secret on disk"

    fixed = cclg(root, "scan", "--store", "--redact", "--json")
    assert fixed.exit_code == 0, fixed.output
    report = json.loads(fixed.stdout)
    assert report["remaining"] == []
    actions = {r["file"].split("/")[0]: r["action"] for r in report["redacted"]}
    assert actions["nodes"] == actions["patches"] == "redacted" and actions["active"] == "removed"
    assert leaks(root, planted) == []
    assert not any((root / "active" / "codegraphs").iterdir()), "the code graph holding a secret is gone"
    assert "[REDACTED:database_url]" in Store.open(root).read_node(node.id).content
    assert cclg(root, "scan", "--store").exit_code == 0


def test_code_index_stores_no_secret_of_the_repository(store: Store, tmp_path: Path) -> None:
    """`code-index` copied a repository's secrets into active/codegraphs/ (graph, cache, search index)."""
    from cclg.codegraph.build import load_graph
    from tests.test_codegraph import GitRepo

    planted = [BY_KIND[k] for k in ("github_classic", "private_key_rsa", "generic_snake", "postgres_url")]
    source = "\n".join(
        [
            f'DSN = "{planted[3].line}"',
            f'KEY = """{planted[1].secret}"""',
            f'def connect(token="{planted[0].secret}", {planted[2].line}):',
            "    return token",
            "",
            "def after_the_key():",
            "    return 1",
        ]
    )
    repo = GitRepo(tmp_path / "repo")
    repo.commit({"app/config.py": source + "\n", "app/notes.md": planted[0].text + "\n"})
    result = cclg(store.root, "code-index", str(repo.root), "--json")
    assert result.exit_code == 0, result.output
    assert leaks(store.root, planted) == []
    graph = load_graph(store, repo.root)
    lines = {s["name"]: s["line"] for s in graph["symbols"]}
    assert lines["after_the_key"] == source.splitlines().index("def after_the_key():") + 1, "line numbers hold"
    assert "[REDACTED:github_token]" in next(s["signature"] for s in graph["symbols"] if s["name"] == "connect")


# ---------------------------------------------------------------- issue 15: no input stalls the scan


def backtracking_problems(pattern: re.Pattern[str]) -> list[str]:
    """Why ``pattern`` could backtrack without bound: a repeat that can backtrack (greedy or lazy, not
    possessive) with no upper bound or a large one, or holding another repeat of variable length."""
    from re import _constants as c
    from re import _parser

    problems: list[str] = []

    def walk(items: Any, inside: bool) -> None:
        for op, av in items:
            if op in (c.MAX_REPEAT, c.MIN_REPEAT):
                _, high, body = av
                low_width, high_width = body.getwidth()
                if high == c.MAXREPEAT or high > 65536 or (op is c.MIN_REPEAT and high > 512):
                    problems.append(f"{op} up to {high} that can backtrack")
                if inside and low_width != high_width:
                    problems.append(f"{op} of variable width inside a repeat that can backtrack")
                walk(body, inside or high > 1)
            elif op in (c.POSSESSIVE_REPEAT, c.ATOMIC_GROUP):
                walk(av[2] if op is c.POSSESSIVE_REPEAT else av, False)
            elif op is c.SUBPATTERN:
                walk(av[3], inside)
            elif op is c.BRANCH:
                for branch in av[1]:
                    walk(branch, inside)
            elif op in (c.ASSERT, c.ASSERT_NOT):
                walk(av[1], inside)

    walk(_parser.parse(pattern.pattern, pattern.flags), False)
    return problems


def test_no_pattern_of_the_detector_can_backtrack_without_bound() -> None:
    """Every rule runs in linear time: 1 MB of `-----BEGIN PRIVATE KEY-----` without END cost the hook
    10 s (a lazy repeat of 8,000), a value starting with `your` took exponential time (a nested repeat)."""
    assert {p.pattern: backtracking_problems(p) for p in secrets.patterns() if backtracking_problems(p)} == {}
    first_version = {  # the two patterns of the first scanner that stalled it: the check sees both
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:.|\n){0,8000}?(?:-----END|$)",
        r"(?i)(?:your|my|example)(?:[_-]?[a-z]+)*",
    }
    assert all(backtracking_problems(re.compile(source)) for source in first_version)


def test_a_private_key_without_its_end_is_redacted_to_its_last_base64_line() -> None:
    rng = random.Random(SEED)
    body = "\n".join(base64.b64encode(rng.randbytes(48)).decode() for _ in range(16_000))  # 1 MB, no END line
    text = f"tool output:\n-----BEGIN PRIVATE KEY-----\n{body}\n(truncated by the terminal)"
    matches = scan(text)
    assert [(m.rule, text[m.end :]) for m in matches] == [("private_key", "\n(truncated by the terminal)")]
    many = "-----BEGIN RSA PRIVATE KEY-----\n" * 30_000  # headers alone, each one its own match
    assert {m.rule for m in scan(many)} == {"private_key"} and len(scan(many)) == 30_000


# ---------------------------------------------------------------- issue 15: user patterns cannot freeze grep


def test_user_pattern_stops_a_regex_that_would_run_for_ever() -> None:
    pattern = search.UserPattern("(a|aa)+$", regex=True, seconds=0.2)
    with pytest.raises(UsageError, match=r"took more than 0.2 s; simplify it"):
        pattern.search("a" * 200 + "!")
    with pytest.raises(UsageError):  # the time limit is spent: later lines fail at once
        pattern.search("b")


def test_user_pattern_searches_text_or_a_regex_and_refuses_a_bad_one() -> None:
    assert search.UserPattern("a.c (x)").search("see a.c (x) here") is True
    assert search.UserPattern("a.c").search("abc") is False, "plain text is not a regex"
    assert search.UserPattern("a.c", regex=True).search("abc") is True
    assert search.UserPattern("PYTEST", ignore_case=True).search("run pytest -q") is True
    with pytest.raises(UsageError, match="bad regular expression '\\(unclosed'"):
        search.UserPattern("(unclosed", regex=True)


def test_cclg_raw_refuses_exactly_what_scan_finds_in_the_same_bytes(seeded: Store) -> None:
    """`raw` read bytes as latin-1 and `scan` as UTF-8 (other bytes one character each): a placeholder
    followed by a non-breaking space read as "changemeÂ" and was refused, though scan let it through.
    One detector means one reading of the bytes too."""
    cases = [
        "secret = changeme\u00a0".encode(),
        "secret=kv/data/staging/orders\u00a0".encode(),
        "Übersicht — 設定\npassword = 'Xk3!pQ9zLm2#vB7w'\n".encode() + b"\xff\xfe",
    ]
    for number, data in enumerate(cases):
        try:
            api.keep_raw(seeded, data, f"evidence-{number}.txt")
            refused = False
        except SecretError:
            refused = True
        assert refused == bool(secrets.scan_bytes(data)), data
    assert [bool(secrets.scan_bytes(data)) for data in cases] == [False, False, True]


def test_every_rules_literals_name_a_rule_and_read_its_text() -> None:
    """The literals that let a rule skip a text are kept beside the rules, by name: a renamed rule
    would lose its gate without a word, and a lowered rule reads lower-cased text only."""
    by_name = {rule.name: rule for rule in secrets.SECRET_PATTERNS}
    assert set(secrets._LITERALS) <= set(by_name)
    for name, words in secrets._LITERALS.items():
        assert words and all(words), name
        if by_name[name].lowered:
            assert all(word == word.lower() for word in words), name
