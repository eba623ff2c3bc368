"""sbertscore's sentence splitter (pysbd, with a test that passes a text that is one sentence by
pysbd's own reading without running it): as documented, in other languages, in agreement with
pysbd, and its fast paths equal to their first forms."""

from __future__ import annotations

import random

import pysbd
import pytest

from moverkit._core.encoding.splitting import (
    CLOSING_QUOTES,
    LETTER_OR_DIGIT,
    PLAIN_MARKS,
    PYSBD_MARKERS,
    _marks,
    join_fragments,
    one_sentence,
    pysbd_segments,
    segment_with_pysbd,
    split_sentences,
    splitter_languages,
)


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        # Abbreviations and decimals do not end a sentence.
        ("Dr. Smith paid $3.50 for the book. Then he left.", ["Dr. Smith paid $3.50 for the book.", "Then he left."]),
        (
            "The U.S. economy grew 2.5 percent in 2019. Analysts, e.g. Mr. Jones, were surprised!",
            ["The U.S. economy grew 2.5 percent in 2019.", "Analysts, e.g. Mr. Jones, were surprised!"],
        ),
        ("It is 10 a.m. now. Visit example.com today.", ["It is 10 a.m. now.", "Visit example.com today."]),
        # A closing quote stays with the sentence it closes.
        ('He said "Stop." Then he ran.', ['He said "Stop."', "Then he ran."]),
        ("He said, 'Stop.' Then he ran.", ["He said, 'Stop.'", "Then he ran."]),
        # ?, ! and ... end sentences; lowercased, tokenized text (WMT style) splits at " .".
        ("Is it? Yes! No...", ["Is it?", "Yes!", "No..."]),
        ("it costs 3.5 million . the u.s. army left .", ["it costs 3.5 million .", "the u.s. army left ."]),
        # A piece without a letter or digit (a lone quote, as WMT spells it, a run of "!") is no
        # sentence: it joins its neighbour (old: '&quot;' and '"' were sentences of their own).
        ("he counted to eight . &quot;", ["he counted to eight . &quot;"]),
        ("Hi. ... !!! Then.", ["Hi. ... !!!", "Then."]),
        ('" Hello there. Bye.', ['" Hello there.', "Bye."]),
        ("!!! ...", ["!!! ..."]),
        # No final punctuation: one sentence. Empty or white space: none.
        ("one sentence without a period", ["one sentence without a period"]),
        ("", []),
        ("  \n\t ", []),
    ],
)
def test_splitting_behaves_as_documented(text, sentences):
    assert split_sentences(text) == sentences


def test_splitting_other_languages_and_bad_language():
    assert split_sentences("Das kostet z. B. 3,50 Euro. Dann ging er.", "de") == [
        "Das kostet z. B. 3,50 Euro.",
        "Dann ging er.",
    ]
    with pytest.raises(ValueError, match="lang must be one of"):
        split_sentences("Hello. World.", "xx")


def _pysbd_sentences(text, lang):
    """What split_sentences gives by pysbd alone (its path before the one-sentence test)."""
    return [s.strip() for s in join_fragments(pysbd_segments(text, lang)) if s.strip()]


ONE_SENTENCE_CASES = [
    ("en", "the cat sat on the mat ."),
    ("en", "He said &quot;stop&quot; ; then nothing"),
    ("en", 'She left."'),
    ("en", "Is it so?!"),
    ("en", "A text with a semicolon; still one"),
    ("en", "I don't know."),
    ("en", "you need 1) eggs 2) milk 3) flour"),  # a list: pysbd splits it (review finding)
    ("en", "options are a) red b) blue"),
    ("en", 'He said "no" Then left.'),
    ("en", "IZ;-' The"),
    ("en", "well-' Then"),
    ("en", '1-"\x0cZ'),
    ("en", "two lines\nof text"),
    ("en", "U.S. troops"),
    ("en", "Wait\u2026 what"),
    ("en", "a    b c."),
    ("el", "Τι κάνεις;"),
    ("el", "Καλημέρα; τι κάνεις"),
    ("zh", "我们走吧。"),
    ("hi", "यह एक वाक्य है।"),
    ("ar", "كيف حالك؟"),
    ("ar", "مرحبا: كيف"),
    ("hy", "Բարեւ։"),
    # pysbd's own marker letters (second review): split on, rewritten or dropped by it
    ("en", "The \u0238 digraph."),
    ("en", "Say &\u14f7& now"),
    ("en", "See a\u01aa\u01aa\u01aab here."),
    ("de", "a\u0238b."),
]


@pytest.mark.parametrize(("lang", "text"), ONE_SENTENCE_CASES)
def test_the_one_sentence_test_passes_only_texts_pysbd_keeps_whole(lang, text):
    if one_sentence(text, lang):
        assert _pysbd_sentences(text, lang) == [text.strip()]
    assert split_sentences(text, lang) == _pysbd_sentences(text, lang)


def test_texts_pysbd_fails_on_are_split_with_the_separators_as_spaces():
    """pysbd's list rules take the information separators U+001C-U+001F for white space, then fail
    on int('\\x1c1'): such a text is split with them read as spaces, not an error."""
    assert split_sentences("Item\x1c1. Go now. Fine.") == split_sentences("Item 1. Go now. Fine.")


def test_a_long_text_with_leading_white_space_is_split():
    """pysbd_segments read its first window's first segment, which starts after leading white
    space, as a boundary, and ran past its list (IndexError) on a text with no other in the window."""
    text = " " + "a " * 2000
    assert split_sentences(text) == [text.strip()]
    several = "  " + "the cat sat on the mat . " * 300
    assert split_sentences(several) == ["the cat sat on the mat ."] * 300


@pytest.mark.slow
def test_the_one_sentence_test_agrees_with_pysbd_on_random_texts():
    """Random texts of words, quotes, brackets, list markers, sentence marks of several scripts, pysbd's
    marker characters and odd white space: wherever the test passes a text, pysbd keeps it whole."""
    rng = random.Random(0)
    pieces = [*"abcXYZ019 .,!?;:'\"()-&/αβΓابت؟،։Աբ।|कख。！？我们"] + ["\x0c", "\n", "\t", "\u201c", "\u201d",
              "\u2026", "\u2019", "  ", "1)", "a)", "i.", " I", " The", "&quot;", "\u222f", "\u2609", "?!", "\u0238",
              "&\u14f7&", "\u01aa"]  # fmt: skip
    passed = 0
    for _ in range(8000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 25)))
        for lang in ("en", "el", "ar", "hy", "hi", "zh"):
            if one_sentence(text, lang):
                passed += 1
                assert _pysbd_sentences(text, lang) == [text.strip()], (lang, text)
    assert passed > 1000  # the test does pass texts: the agreement is not vacuous


def test_the_one_sentence_test_agrees_with_pysbd_on_wmt17(wmt_pairs):
    """Every WMT17 text of the sample that skips pysbd is one sentence by pysbd too, and most skip it."""
    texts = list(dict.fromkeys([*wmt_pairs[0], *wmt_pairs[1]]))
    whole = [text for text in texts if one_sentence(text, "en")]
    assert len(whole) > len(texts) / 2
    for text in texts:
        assert split_sentences(text) == _pysbd_sentences(text, "en")


def _one_sentence_by_characters(text, lang):
    """one_sentence as first written, testing the body a character at a time in Python: the oracle."""
    marks = _marks(lang)
    text = text.strip()
    body = text.rstrip(marks + CLOSING_QUOTES)
    end = text[len(body) :]
    closing = end[1:] if end[:1] and end[0] in marks else end
    if not body or len(closing) > 1 or (closing and closing not in CLOSING_QUOTES) or "  " in body:
        return False
    apostrophe = body.find("'")
    if apostrophe >= 0 and (body.count("'") > 1 or not body[apostrophe - 1 : apostrophe].isalnum()):
        return False
    return all(
        (c.isalnum() or c == " " or c in PLAIN_MARKS or c == "'") and c not in marks and c not in PYSBD_MARKERS
        for c in body
    )


SPLITTER_PIECES = [*"abcXYZ019 .,;:!?'\"()[]{}«»-–—&/_\\|αβΓابت؟،։Աբ।कख。．！？我们", "\u201c", "\u201d", "\u2018",
                   "\u2019", "\u2026", "?!", "...", "  ", "\n", "\r", "\t", "\x0c", "\x0b", "\x00", "\x1c", "\x1d", "\x1e",
                   "\x1f", "\x85", "\xa0", "\u2028", "\u3000", "\u0301", "\u20dd", "\U0001f600", "\U0001f44d\U0001f3fd",
                   "1)", "2)", "a)", "b)", "(iv)", "i.", "ii.", "1.", "2.", " I", " The", " Mr.", " e.g.", " U.S.",
                   "a.m.", "3.50", "--", "Yahoo!", "&quot;", "&apos;", " the", " Wir", " слово", " كتاب", " ΚΑΛΗ"]  # fmt: skip


def _random_splitter_text(rng):
    """A seeded random text of SPLITTER_PIECES, every language's sentence marks, pysbd's marker letters
    and code points of any plane (unassigned, surrogates and private use included)."""
    extra = sorted(PYSBD_MARKERS) + sorted({c for lang in splitter_languages() for c in _marks(lang)})
    pieces = []
    for _ in range(rng.randint(0, 24)):
        draw = rng.random()
        if draw < 0.1:
            pieces.append(chr(rng.randrange(0x110000)))
        elif draw < 0.25:
            pieces.append(rng.choice(extra))
        else:
            pieces.append(rng.choice(SPLITTER_PIECES))
    return "".join(pieces)


@pytest.mark.slow
def test_the_one_sentence_test_equals_its_first_form_on_wmt17_and_random_texts(wmt17_full):
    texts = list(dict.fromkeys(wmt17_full.predictions + wmt17_full.references))
    assert len(texts) == 4982
    assert [one_sentence(t, "en") for t in texts] == [_one_sentence_by_characters(t, "en") for t in texts]
    rng = random.Random(45)
    passed = 0
    for _ in range(4000):
        text = _random_splitter_text(rng)
        for lang in splitter_languages():
            expected = _one_sentence_by_characters(text, lang)
            assert one_sentence(text, lang) == expected, (lang, text)
            passed += expected
    assert passed > 2000  # random texts that pass, not only ones that fail


@pytest.mark.slow
def test_the_one_sentence_test_equals_its_first_form_on_every_code_point():
    texts = [f"a{chr(code)}b" for code in range(0x110000)]
    assert [one_sentence(t, "el") for t in texts] == [_one_sentence_by_characters(t, "el") for t in texts]


@pytest.mark.slow
def test_letter_or_digit_is_str_isalnum_on_every_code_point():
    characters = "".join(map(chr, range(0x110000)))
    assert set(LETTER_OR_DIGIT.findall(characters)) == {c for c in characters if c.isalnum()}


def _pysbd_segment_or_error(segment, text, lang):
    try:
        return segment(text, lang)
    except ValueError as err:  # pysbd's int("\x1c1") on list markers after an information separator
        return repr(err)


@pytest.mark.slow
def test_segment_with_pysbd_equals_pysbds_segment(wmt17_full):
    """The same pieces as pysbd's own Segmenter.segment (which compiles a pattern per sentence), on
    the WMT17 texts pysbd splits, and on random texts (repeated sentences among them) in every language."""

    def pysbds(text, lang):
        return pysbd.Segmenter(language=lang, clean=False).segment(text)

    texts = [t for t in dict.fromkeys(wmt17_full.predictions + wmt17_full.references) if not one_sentence(t, "en")]
    assert len(texts) == 830
    for text in texts:
        assert segment_with_pysbd(text, "en") == pysbds(text, "en")
    rng = random.Random(46)
    repeated = ["Yes.", "Yes. ", "Yes!", "No.", "a.", "Hi", '"Yes."', "(Yes.)", "Yes...", "1.", "?", "Dr. No.", "\n"]
    for i in range(1500):
        lang = rng.choice(splitter_languages())
        if i % 2:
            text = _random_splitter_text(rng)
        else:
            text = "".join(rng.choice(repeated) for _ in range(rng.randint(1, 12)))
        ours = _pysbd_segment_or_error(segment_with_pysbd, text, lang)
        assert ours == _pysbd_segment_or_error(pysbds, text, lang), (lang, text)
