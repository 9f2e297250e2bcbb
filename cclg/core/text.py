"""Tokenising text for search: English, code identifiers, and Korean, Japanese, Chinese.

``tokens(text)`` turns text into the terms the index stores and a query asks
for, so that both sides always agree:

- words are lower-cased and NFC-normalised;
- a code identifier or path is kept whole *and* split into its parts:
  ``snake_case`` -> ``snake_case snake case``, ``parseHTTPHeader`` ->
  ``parsehttpheader parse http header``, ``src/cclg/cli.py`` -> the whole path,
  ``src``, ``cclg``, ``cli``, ``py``; a version such as ``3.11`` stays whole;
- Chinese, Japanese and Korean have no spaces between words (Korean attaches
  particles to nouns), so every run of such characters also yields its character
  bigrams: ``기억을`` -> ``기억을 기억 억을``, ``東京都`` -> ``東京都 東京 京都``;
- English words also yield a light stem (``deploys``, ``deployed`` -> ``deploy``).
  A query in any of these languages therefore finds text written in it without a
  dictionary.

``query_words`` and ``query_terms`` read a query with the same rules.

The code graph's search (``cclg.codegraph``) has its own, simpler family, below
the memory tokenizer: ``split_identifiers`` (camelCase apart, for SQLite's FTS5
to stem), ``code_words`` (a task's plain lower-cased words), ``code_names`` (the
names a task spells like code) and ``subject_components`` /
``without_component_prefix`` (a commit-style ``area: ...`` prefix).

``estimate_tokens`` is the one token estimate every budget uses, ``json_literal``
fences a string so that Markdown cannot read it as markup, and ``lazy_regex`` compiles a
regular expression on its first use (for the secret detector and the fencing, which the hook
imports).
"""

from __future__ import annotations

import functools
import json
import math
import re
import unicodedata

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


def lazy_regex(source: str) -> Callable[[], re.Pattern[str]]:
    """A regular expression compiled on first use (compiling them all costs the hook ~10 ms)."""
    return functools.cache(lambda: re.compile(source))


# Runs of word characters joined by the connectors that hold identifiers, paths
# and versions together.
_RAW_RE = re.compile(r"\w+(?:[./\-:+#@]\w+)*")
_CJK_RANGES = (
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3130, 0x318F),  # Hangul compatibility Jamo
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xAC00, 0xD7A3),  # Hangul syllables
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF66, 0xFF9F),  # half-width Katakana
)
_SPLIT_RE = re.compile(r"[./\-:+#@_]+")
_CAMEL_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+|[^\W\d_]+")
_VERSION_RE = re.compile(r"v?\d+(?:\.\d+)+")

STOPWORDS = frozenset(
    """
    a an and are as at be but by can could did do does doing for from had has have how i if in into is it its
    me my of on or our should so that the their them then there these they this to was we were what when where
    which who why will with would you your about after again all also am any because been before being both
    each few further here just more most no nor not now only other over own same some such than too under until
    up very via off out please let lets get got make made want need tell show give see us use used using one two
    way thing things yes ok okay
    s t d ll m re ve don doesn didn isn aren wasn weren hasn haven hadn wouldn couldn shouldn
    어떻게 왜 뭐 뭔가 무엇 무슨 어디 언제 어떤 해 해줘 해주세요 해야 해서 하는 하고 하면 하려면 했는데 있어 있나요 있는
    없어 그리고 그런데 근데 이거 그거 저거 좀 나는데 되나요 돼 될까 안 수 것 거 제 내 우리 이 그 저 너무 다시 지금
    을 를 가 은 는 의 에 에서 로 으로 와 과 도 에게 한테 까지 부터 랑 이랑 처럼
    """.split()
)
# The Korean line holds question words, the forms of 하다 (do) and 있다/없다 (be), and
# connectives: a Korean prompt spells its topic in nouns, and these carry none of it; and the
# particles, which stand alone where they follow a Latin word or a number ("PR을", "0.3에서").
# The line before holds what an apostrophe leaves of English contractions and
# possessives ("that's", "don't", "we'll"): a query of small talk would otherwise
# match every memory that mentions "Marlin's" or "Quarry's".


def is_cjk(char: str) -> bool:
    code = ord(char)
    return any(low <= code <= high for low, high in _CJK_RANGES)


def is_hangul(char: str) -> bool:
    """Whether ``char`` is Korean: Korean words are spaced, with their particles attached."""
    code = ord(char)
    return 0x1100 <= code <= 0x11FF or 0x3130 <= code <= 0x318F or 0xAC00 <= code <= 0xD7A3


def matching_terms(word: tuple[str, ...]) -> tuple[str, ...]:
    """What stands for ``word`` (a word and its variants, as ``query_words`` gives them) when words are
    matched: the word and all its variants, but a Korean word only itself and its first bigram. A Korean
    word is its noun and then its particles ("테이블에"), so it starts with its noun; a bigram inside it
    (the "테이" of "컨테이너", container) begins another noun as often as not ("테이블", table)."""
    return word[:2] if len(word) > 1 and is_hangul(word[0][0]) else word


def matched_words(terms: list[str]) -> list[list[str]]:
    """``terms`` (a prompt's words that matched, in its order) as the prompt's words, each with the
    terms it was matched by, each word once: a run of Chinese or Japanese is matched as its bigrams,
    so a chain of overlapping bigrams ("コマ", "マン", "ンド") is one word, not three, and a bigram the
    prompt holds twice is one word, not two."""
    words: list[list[str]] = []
    for term in terms:
        last = words[-1][-1] if words else ""
        if len(term) == 2 and len(last) == 2 and is_cjk(term[0]) and last[1] == term[0]:
            words[-1].append(term)
        else:
            words.append([term])
    return list({spelled(word): word for word in words}.values())


def spelled(word: list[str]) -> str:
    """A word of ``matched_words`` as the prompt spells it: the chain コマ, マン, ンド is コマンド."""
    return word[0] + "".join(term[1:] for term in word[1:])


_FIRST_CJK = chr(min(low for low, _ in _CJK_RANGES))


def _script_runs(word: str) -> list[tuple[bool, str]]:
    """Split a word where it changes between CJK and other characters."""
    if max(word) < _FIRST_CJK:  # the common case, without a look at every character
        return [(False, word)]
    # (A regular expression over the CJK ranges would cost ~13 ms to compile in
    # every process, which the hook pays on each prompt; this loop is rarely run.)
    runs: list[tuple[bool, str]] = []
    for char in word:
        cjk = is_cjk(char)
        if runs and runs[-1][0] == cjk:
            runs[-1] = (cjk, runs[-1][1] + char)
        else:
            runs.append((cjk, char))
    return runs


@functools.lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """A light English stem (plural and -ing/-ed endings, final e), so tests ~ test, configured ~ configure."""
    if len(word) < 4 or not word.isascii() or not word.isalpha():
        return word
    for suffix, replacement in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""), ("es", "e"), ("s", "")):
        if word.endswith(suffix) and not word.endswith("ss") and len(word) - len(suffix) >= 3:
            word = word[: len(word) - len(suffix)] + replacement
            if suffix in ("ing", "ed") and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]  # running -> run, stopped -> stop
            break
    return word[:-1] if word.endswith("e") and len(word) > 4 else word


def _identifier_parts(word: str) -> list[str]:
    parts = []
    for piece in _SPLIT_RE.split(word):
        # _CAMEL_RE knows only ASCII case: applied to "naïve" it would cut out "na".
        parts.extend((_CAMEL_RE.findall(piece) if piece.isascii() else None) or [piece])
    return [p.lower() for p in parts if p]


def compound_parts(word: str) -> list[str]:
    """The parts of a word joined by punctuation: "atlas-admin" -> atlas, admin; "app.py" -> app, py."""
    return [part for part in _SPLIT_RE.split(word) if part]


def word_groups(text: str) -> list[list[str]]:
    """The terms of ``text`` grouped by the word they come from (the word first, then its
    parts, stems or bigrams), in order of appearance."""
    return [list(group) for raw in _RAW_RE.findall(unicodedata.normalize("NFC", text)) for group in _raw_groups(raw)]


@functools.lru_cache(maxsize=1 << 14)
def _raw_groups(raw: str) -> tuple[tuple[str, ...], ...]:
    """The groups of one raw word (memoised: a store repeats its words a lot; 16,384 words keep the
    common ones, and an import of 30,000 memories peaked 18 MB lower than with 65,536 for the same CPU)."""
    groups: list[tuple[str, ...]] = []
    for cjk, run in _script_runs(raw):
        if cjk:
            group = [run]
            if len(run) > 2:
                group.extend(run[i : i + 2] for i in range(len(run) - 1))
            groups.append(tuple(group))
            continue
        run = run.strip("_")
        if not run:
            continue
        whole = run.lower()
        group = [whole]
        if not _VERSION_RE.fullmatch(whole):
            parts = _identifier_parts(run)
            if len(parts) > 1:
                group.extend(parts)
            group.extend(stemmed for p in parts if (stemmed := stem(p)) != p)
        groups.append(tuple(group))
    return tuple(groups)


def tokens(text: str) -> list[str]:
    """The search terms of ``text``, in order of appearance (repeats kept, for term frequency)."""
    return [term for group in word_groups(text) for term in group]


def query_words(text: str) -> list[tuple[str, ...]]:
    """The distinct words of a query, each with all its variants; stop words left out."""
    words: dict[str, tuple[str, ...]] = {}
    for group in word_groups(text):
        if group[0] not in STOPWORDS and group[0] not in words:
            words[group[0]] = tuple(dict.fromkeys(group))
    return list(words.values())


def query_terms(text: str) -> list[str]:
    """Distinct terms of a query, without English stop words, in order of appearance."""
    seen: dict[str, None] = {}
    for term in tokens(text):
        if term not in STOPWORDS and term not in seen:
            seen[term] = None
    return list(seen)


# ---------------------------------------------------------------- code search words
#
# The code graph's search index and ranking (``cclg.codegraph``) tokenise with
# these instead: SQLite's FTS5 (Porter stemming) does the stemming and the
# case-folding, so a code word is just a lower-cased identifier part, and a task's
# words are plain strings rather than groups of variants. The patterns are
# compiled on first use: the hook imports this module on every prompt and needs
# them only when it adds the code graph.

_CAMEL_BOUNDARY = r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])"
_CODE_WORD = r"[A-Za-z][A-Za-z0-9]*"
_CODE_NAME = (
    r"`([^`]+)`"  # written in backticks
    r"|\b([A-Za-z_][A-Za-z0-9_]*)\("  # called: name(
    r"|\b([A-Za-z0-9]*[a-z0-9][A-Z][A-Za-z0-9]*|[A-Za-z0-9]*_[A-Za-z0-9_]*[A-Za-z0-9]|[A-Z]{2,}[a-z][A-Za-z0-9]*)\b"
)
_COMPONENT_PREFIX = r"^\s*([\w./,\- ]+?)(?:\(([\w./,\- ]+)\))?!?:\s"


@functools.cache
def _pattern(source: str) -> re.Pattern[str]:
    return re.compile(source)


def split_identifiers(text: str) -> str:
    """``parseHTTPHeader`` -> ``parse HTTP Header``; snake_case is split by the tokenizer itself."""
    return _pattern(_CAMEL_BOUNDARY).sub(" ", text)


def code_words(text: str) -> list[str]:
    """The distinct words of ``text`` for code search, in order: lower-cased, identifiers split,
    stopwords and one-letter words left out (``parseHTTPHeader now`` -> ``["parse", "http", "header"]``)."""
    words = []
    for raw in _pattern(_CODE_WORD).findall(split_identifiers(text)):
        word = raw.lower()
        if len(word) > 1 and word not in STOPWORDS and word not in words:
            words.append(word)
    return words


def code_names(query: str) -> set[str]:
    """Names the task spells the way code does: ``snake_case``, ``camelCase``, ``HTTPServer``,
    in backticks or called with ``(``. Plain words ("add", "types") are not among them."""
    names = set()
    for match in _pattern(_CODE_NAME).finditer(query):
        for group in match.groups():
            if group:
                names.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", group))
    return names


def subject_components(query: str) -> list[list[str]]:
    """The parts of the code a commit-style subject names before its colon: ``ignore/types: ...``
    gives [["ignore", "types"]], ``ignore,globset: ...`` [["ignore"], ["globset"]], ``fix(parser): ...``
    [["parser"]]. Each component is a list of path words that must all appear in a file's path."""
    match = _pattern(_COMPONENT_PREFIX).match(query)
    if not match:
        return []
    text = match.group(2) or match.group(1)
    if match.group(2) is None and " " in text.strip():
        return []  # "Fix the bug: ..." is a sentence, not a component
    components = []
    for part in re.split(r"[, ]+", text):
        words = [w.lower() for w in re.split(r"[/.\-]+", part) if w]
        if words:
            components.append(words)
    return components


def without_component_prefix(query: str) -> str:
    """The task without what a commit-style subject says before its colon: ``fix(parser): handle errors``
    -> ``handle errors`` (the prefix names a part of the code, it calls nothing)."""
    return _pattern(_COMPONENT_PREFIX).sub("", query, count=1)


# ---------------------------------------------------------------- budgets and fencing


_MARKUP = {"\u2028": "\\u2028", "\u2029": "\\u2029", "<": "\\u003c", ">": "\\u003e", "](": "]\\u0028"}


def json_literal(text: str) -> str:
    """A JSON string literal that Markdown cannot read as markup: U+2028/U+2029 escaped (some
    readers take them for line breaks), ``<`` and ``>`` escaped (no HTML, no autolink, no
    closing tag), and ``](`` broken (no link or image can form)."""
    literal = json.dumps(text, ensure_ascii=False)
    for raw, escaped in _MARKUP.items():
        literal = literal.replace(raw, escaped)
    return literal


def estimate_tokens(text: str) -> int:
    """A cheap token estimate: four ASCII characters a token, one token per other character."""
    if text.isascii():
        return math.ceil(len(text) / 4)
    ascii_chars = sum(1 for c in text if c < "\x80")
    return math.ceil(ascii_chars / 4) + (len(text) - ascii_chars)
