"""Tokenising for search: English, code identifiers, paths, versions, Korean, Japanese, Chinese.

The index stores ``tokens(text)`` and a query asks for the variants of
``query_words(text)``, so a query finds a text exactly when one of its variants is
among the text's tokens. The expectations below are written from that contract.
"""

from __future__ import annotations

import pytest

from cclg.core.text import (
    STOPWORDS,
    code_names,
    code_words,
    is_cjk,
    matched_words,
    query_terms,
    query_words,
    spelled,
    split_identifiers,
    stem,
    subject_components,
    tokens,
    without_component_prefix,
    word_groups,
)


def finds(query: str, text: str) -> bool:
    """Whether every word of ``query`` has a variant among the tokens of ``text``."""
    bag = set(tokens(text))
    words = query_words(query)
    return bool(words) and all(any(v in bag for v in variants) for variants in words)


# ---------------------------------------------------------------- English


def test_english_words_are_lower_cased_and_kept_in_order_with_repeats() -> None:
    assert tokens("Run the Tests, run!") == ["run", "the", "tests", "test", "run"]


def test_punctuation_and_whitespace_are_not_terms() -> None:
    assert tokens("  ... , ; !? -- ") == []
    assert word_groups("") == []


def test_text_is_nfc_normalised_so_both_spellings_agree() -> None:
    composed = "caf\u00e9"
    decomposed = "cafe\u0301"
    assert tokens(decomposed) == tokens(composed) == ["caf\u00e9"]


@pytest.mark.parametrize("word", ["naïve", "Größe", "résumé", "MÜLLER", "café"])
def test_accented_words_are_not_cut_into_fragments(word: str) -> None:
    assert tokens(word) == [word.lower()]


def test_an_accented_query_does_not_match_a_fragment_of_itself() -> None:
    assert not finds("naïve", "set the value to NA")
    assert not finds("résumé", "r is a language")
    assert finds("são", "we ship from São_Paulo")


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("tests", "test"),
        ("running", "run"),
        ("deployed", "deploy"),
        ("deploys", "deploy"),
        ("deploying", "deploy"),
        ("stopped", "stop"),
        ("studies", "study"),
        ("classes", "class"),
        ("pulled", "pull"),
    ],
)
def test_stem_strips_light_english_endings(word: str, expected: str) -> None:
    assert stem(word) == expected


@pytest.mark.parametrize("word", ["run", "test", "class", "pass", "deploy", "ok", "v2", "naïve", "3.11", "설정은"])
def test_stem_leaves_stems_short_words_and_non_ascii_alone(word: str) -> None:
    assert stem(word) == word


@pytest.mark.parametrize(("a", "b"), [("configured", "configure"), ("deployed", "deploys"), ("running", "run")])
def test_variants_of_one_word_share_a_stem(a: str, b: str) -> None:
    assert stem(a) == stem(b)


def test_inflected_words_carry_their_stem_so_either_form_finds_the_other() -> None:
    assert tokens("deployed") == ["deployed", "deploy"]
    assert finds("deploy", "We deployed it yesterday")
    assert finds("deployed", "deploy on fridays")
    assert finds("tests", "the test suite")
    assert finds("running", "run it")
    assert not finds("deploy", "release it on fridays")


# ---------------------------------------------------------------- code identifiers, paths, versions


def test_snake_case_is_kept_whole_and_split() -> None:
    group = word_groups("snake_case")[0]
    assert group[0] == "snake_case"
    assert {"snake", "case"} <= set(group)
    assert finds("case", "call snake_case here")
    assert finds("snake_case", "call snake_case here")


def test_leading_and_trailing_underscores_do_not_make_a_different_word() -> None:
    assert word_groups("__init__")[0][0] == "init"
    assert word_groups("_private")[0][0] == "private"


@pytest.mark.parametrize(
    ("identifier", "parts"),
    [
        ("parseHTTPHeader", ["parse", "http", "header"]),
        ("HTTPServer", ["http", "server"]),
        ("camelCase", ["camel", "case"]),
        ("XMLHttpRequest", ["xml", "http", "request"]),
        ("getX", ["get", "x"]),
    ],
)
def test_camel_case_and_acronyms_split_into_lower_case_parts(identifier: str, parts: list[str]) -> None:
    group = word_groups(identifier)[0]
    assert group[0] == identifier.lower()
    assert group[1 : 1 + len(parts)] == parts


def test_a_camel_case_part_finds_the_identifier() -> None:
    assert finds("header", "see parseHTTPHeader in the parser")
    assert finds("http", "see parseHTTPHeader in the parser")
    assert finds("parseHTTPHeader", "see parseHTTPHeader in the parser")
    assert not finds("cookie", "see parseHTTPHeader in the parser")


def test_a_path_is_one_whole_term_plus_its_segments() -> None:
    group = word_groups("edit src/cclg/cli.py now")[1]
    assert group[0] == "src/cclg/cli.py"
    assert group[1:] == ["src", "cclg", "cli", "py"]
    assert finds("cli.py", "edit src/cclg/cli.py now")
    assert finds("src/cclg/cli.py", "edit src/cclg/cli.py now")
    assert finds("cli", "edit src/cclg/cli.py now")


def test_dashed_and_dotted_names_are_kept_whole() -> None:
    assert word_groups("pre-commit")[0][:3] == ["pre-commit", "pre", "commit"]
    assert word_groups("test.command")[0][:3] == ["test.command", "test", "command"]


@pytest.mark.parametrize("version", ["3.11", "v2.3.1", "1.0.0", "10.4"])
def test_versions_stay_whole_and_are_not_split(version: str) -> None:
    assert word_groups(f"python {version} now") == [["python"], [version.lower()], ["now"]]


def test_a_version_query_does_not_match_a_neighbouring_version() -> None:
    assert finds("3.11", "needs Python 3.11 or later")
    assert not finds("3.11", "needs Python 3.12 or later")
    assert not finds("3", "needs Python 3.11 or later")


def test_a_sentence_end_does_not_glue_words() -> None:
    assert tokens("done. Next") == ["done", "next"]


# ---------------------------------------------------------------- Korean, Japanese, Chinese


def test_is_cjk_covers_hangul_kana_and_ideographs_only() -> None:
    for char in "설ㄱ東京はカｶ中":
        assert is_cjk(char), char
    for char in "aZ9_éя":
        assert not is_cjk(char), char


def test_korean_words_yield_bigrams_so_a_noun_finds_it_with_its_particle() -> None:
    assert word_groups("설정은") == [["설정은", "설정", "정은"]]
    assert finds("설정", "배포 설정은 README에 있다")
    assert finds("기억", "기억을 지우지 마")
    assert not finds("설명", "배포 설정은 README에 있다")


def test_two_syllable_korean_words_are_one_term() -> None:
    assert word_groups("설정") == [["설정"]]


def test_japanese_and_chinese_runs_yield_character_bigrams() -> None:
    assert word_groups("東京都") == [["東京都", "東京", "京都"]]
    assert word_groups("テストを実行") == [["テストを実行", "テス", "スト", "トを", "を実", "実行"]]
    assert finds("京都", "東京都に住む")
    assert finds("実行", "テストを実行する")
    assert finds("测试", "运行测试用例")
    assert not finds("大阪", "東京都に住む")


def test_mixed_script_words_split_where_the_script_changes() -> None:
    assert word_groups("CCLG는") == [["cclg"], ["는"]]
    assert finds("cclg", "CCLG는 기억 저장소다")
    assert finds("CCLG", "cclg는 기억 저장소다")
    groups = word_groups("pytest로실행")
    assert groups[0] == ["pytest"]
    assert groups[1][0] == "로실행"


def test_cjk_text_is_not_lower_cased_or_stemmed_away() -> None:
    assert tokens("設定ファイル") == ["設定ファイル", "設定", "定フ", "ファ", "ァイ", "イル"]


# ---------------------------------------------------------------- queries


def test_query_words_drop_stop_words() -> None:
    assert query_words("how do I run the tests") == [("run",), ("tests", "test")]
    assert query_words("the and of it") == []
    words = query_words("what is the deploy target for this project")
    assert [word[0] for word in words] == ["deploy", "target", "project"]
    assert all(word[0] not in STOPWORDS for word in words)


def test_a_korean_particle_left_alone_by_a_latin_word_or_a_number_is_no_query_word() -> None:
    """Words like "PR을", "API로", "0.3에서" split where the script changes; the particle alone says nothing of the
    topic, and a memory sharing only "에서" and "로" with a prompt is no more about it than one sharing
    "from" and "to". The index still holds it (``word_groups``): only what a query weighs changes."""
    assert [word[0] for word in query_words("PR을 만들어줘")] == ["pr", "만들어줘"]
    assert [word[0] for word in query_words("가중치를 0.3에서 0.5로 올려")] == ["가중치를", "0.3", "0.5", "올려"]
    assert [word[0] for word in query_words("API로 보내고 Redis에 저장")] == ["api", "보내고", "redis", "저장"]
    assert word_groups("CCLG는") == [["cclg"], ["는"]]


def test_query_words_group_the_variants_of_each_word() -> None:
    words = query_words("deployed parseHTTPHeader")
    assert words == [("deployed", "deploy"), ("parsehttpheader", "parse", "http", "header", "pars")]


def test_query_words_are_distinct_in_order_of_appearance() -> None:
    assert query_words("Tests tests TESTS run") == [("tests", "test"), ("run",)]


def test_query_words_keep_cjk_bigrams() -> None:
    assert query_words("설정은") == [("설정은", "설정", "정은")]


def test_query_terms_are_the_distinct_non_stop_terms() -> None:
    assert query_terms("the tests are running tests") == ["tests", "test", "running", "run"]
    assert query_terms("the a of") == []


def test_tokens_agree_for_query_and_text_sides() -> None:
    """Whatever a query asks for is spelled the same way the index stores it."""
    text = "Deploy src/app/main.py with parseHTTPHeader on Python 3.11; 설정은 東京都"
    bag = set(tokens(text))
    for variants in query_words(text):
        assert set(variants) <= bag


# ---------------------------------------------------------------- code search words


def test_split_identifiers_separates_camel_case_and_keeps_the_rest() -> None:
    assert split_identifiers("parseHTTPHeader") == "parse HTTP Header"
    assert split_identifiers("snake_case and x2Go") == "snake_case and x2 Go"
    assert split_identifiers("src/cclg/cli.py") == "src/cclg/cli.py"


def test_code_words_are_plain_distinct_lower_cased_words() -> None:
    assert code_words("Fix parseHTTPHeader in the HTTP parser") == ["fix", "parse", "http", "header", "parser"]
    assert code_words("a b x1 load_user") == ["x1", "load", "user"], "one-letter words go, snake_case splits"
    assert code_words("why is it so") == []
    assert code_words("deploys deployed") == ["deploys", "deployed"], "no stemming: FTS5's Porter stemmer does it"


def test_code_words_differ_from_query_words_in_shape() -> None:
    assert code_words("Run tests") == ["run", "tests"]
    assert query_words("Run tests") == [("run",), ("tests", "test")]


def test_only_names_spelled_like_code_count_as_written_names() -> None:
    assert code_names("ignore/types: add Rocq .v files") == set(), "plain words are not names"
    assert code_names("InvoiceCalculator rounds totals wrong") == {"InvoiceCalculator"}
    assert code_names("handle parse_args() and `load` in HTTPServer") == {"parse_args", "load", "HTTPServer"}


def test_commit_subject_components_name_parts_of_the_code() -> None:
    assert subject_components("ignore/types: add Rocq .v files") == [["ignore", "types"]]
    assert subject_components("ignore,globset: increase pool capacity") == [["ignore"], ["globset"]]
    assert subject_components("fix(parser): handle errors") == [["parser"]]
    assert subject_components("Fix the bug: stuff") == [], "a sentence before a colon is not a component"
    assert subject_components("no colon here") == []


def test_without_component_prefix_drops_what_comes_before_the_colon() -> None:
    assert without_component_prefix("fix(parser): handle errors") == "handle errors"
    assert without_component_prefix("ignore/types: add Rocq .v files") == "add Rocq .v files"
    assert without_component_prefix("no colon here") == "no colon here"


def test_a_chain_of_matched_bigrams_is_one_word_spelled_whole() -> None:
    """The words that matched, as the prompt wrote them: overlapping Japanese bigrams in a row are one
    word ("コミ", "ミッ", "ット" is コミット); bigrams that do not overlap, and other words, stay apart;
    a word the prompt holds twice is one word."""
    words = matched_words(["コミ", "ミッ", "ット", "変更", "deploy", "設定", "画面", "変更"])
    assert [spelled(word) for word in words] == ["コミット", "変更", "deploy", "設定", "画面"]  # each once
    assert words[0] == ["コミ", "ミッ", "ット"]
