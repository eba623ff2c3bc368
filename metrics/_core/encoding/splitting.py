"""Splitting texts into sentences, for the sentence-level metric (sBERTScore) and its centering
statistic: pysbd (a rule-based splitter installed from PyPI: no data downloaded at run time),
with the guards pysbd needs (a text of one sentence taken whole, long texts split in windows,
fragments without a letter or digit joined to their neighbour). Its own room: nothing here loads
or runs a model (:mod:`~moverkit._core.encoding.sentences` does).
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Sequence

from moverkit._core.encoding.request import check_lang


def splitter_languages() -> list[str]:
    """The language codes pysbd splits (``codes`` of :func:`~moverkit._core.encoding.request.check_lang`)."""
    from pysbd.languages import LANGUAGE_CODES

    return sorted(LANGUAGE_CODES)


def splitter_tag(lang: str) -> str:
    """The splitter and its version, for hashcodes: ``pysbd-0.3.4:en``; checks ``lang``."""
    import pysbd

    return f"pysbd-{pysbd.__version__}:{check_lang(lang, splitter_languages())}"


def split_sentences(text: str, lang: str = "en") -> list[str]:
    """The sentences of ``text``, stripped of surrounding white space; ``[]`` for an empty or
    white-space-only text.

    pysbd (Sadvilkar and Neumann, 2020) follows the "Golden Rules" of sentence boundaries:
    abbreviations (``Dr.``, ``U.S.``, ``e.g.``) and decimals (``3.50``) do not end a sentence,
    a closing quote stays with the sentence it closes (``He said "Stop." | Then he ran.``), and
    ``?``, ``!`` and ``...`` end one as ``.`` does. A text without final punctuation is one sentence.

    A fragment pysbd cuts off without a letter or digit (a lone closing quote, ``&quot;`` as WMT
    texts spell it, a run of ``!``) is no sentence: it joins its neighbour (:func:`join_fragments`).
    """
    return _split(text, check_lang(lang, splitter_languages()))


def split_texts(texts: Sequence[str], lang: str = "en") -> dict[str, list[str]]:
    """:func:`split_sentences` of each of ``texts`` (expected distinct), ``lang`` checked once."""
    code = check_lang(lang, splitter_languages())
    return {text: _split(text, code) for text in texts}


def _split(text: str, lang: str) -> list[str]:
    """:func:`split_sentences` for a checked ``lang``."""
    if not text.strip():
        return []
    if one_sentence(text, lang):
        return [text.strip()]
    try:
        segments = pysbd_segments(text, lang)
    except ValueError:
        # pysbd's list rules read "\x1c1." as a numbered item (its \s takes the information
        # separators U+001C-U+001F) and then fail on int("\x1c1"): split the text with them as spaces.
        segments = pysbd_segments(text.translate(SEPARATORS_AS_SPACES), lang)
    return [s.strip() for s in join_fragments(segments) if s.strip()]


SEPARATORS_AS_SPACES = str.maketrans(dict.fromkeys("\x1c\x1d\x1e\x1f", " "))

PYSBD_MARKERS = frozenset("\u01aa\u01c3\u0238\u0239\u02bc\u14f0\u14f1\u14f3\u14f4\u14f7\u14f8")
"""Letters pysbd writes into a text as markers while it splits (``ȸ``, ``ȹ``, ``ƪ``, ``ᓷ`` in
``&ᓷ&``, ...) and rewrites after: in a user's text they are split on, rewritten or dropped."""


PLAIN_MARKS = frozenset(",;:&#%/+=-_@*")
"""Marks a one-sentence text may hold between its words (unless the language ends sentences with
one: Greek's ``;``, Arabic's ``:``): none of pysbd's rules reads them."""

CLOSING_QUOTES = "\"'\u201d\u2019"


def one_sentence(text: str, lang: str) -> bool:
    """True where pysbd gives ``text`` whole, as one sentence, by a test cheap enough to run first
    (about 3 microseconds a WMT17 text, in string methods without a Python step per character;
    pysbd costs about 0.3 ms): :func:`split_sentences` then skips pysbd.

    The text, stripped, must be words (letters and digits, any script) with single spaces between
    them, the :data:`PLAIN_MARKS`, and at most one apostrophe right after a letter or digit, then at
    most one of the language's sentence marks (pysbd's ``Punctuations``) and one closing quote. What
    this leaves out is what pysbd's rules read: a sentence mark inside the text, quotes, brackets
    and parentheses (pysbd splits ``1) eggs 2) milk`` as a list, ``"no" Then`` at the quote), line
    breaks, tabs and runs of spaces, an ellipsis or ``?!`` at the end, and the letters pysbd uses as
    its own markers (:data:`PYSBD_MARKERS`). Held to pysbd by tests: every WMT17 text that passes
    (4,152 of 4,982), and seeded random texts of quotes, brackets, list markers, marks, marker letters
    and white space in 6 languages; and to its first form, which tested the body a character at a
    time in Python (a copy in the tests), on the WMT17 texts, on every character between two
    letters, and on seeded random texts of every script in every language pysbd splits."""
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
    return body.translate(_letters_for_allowed(lang)).isalnum()


@functools.cache
def _letters_for_allowed(lang: str) -> dict[int, str]:
    """The ``str.translate`` table that lets ``str.isalnum`` test a body character by character at
    C speed (:func:`one_sentence`): a space, the apostrophe and :data:`PLAIN_MARKS` become ``a``,
    the language's marks and :data:`PYSBD_MARKERS` a space (a mark among the plain ones is a mark)."""
    allowed = dict.fromkeys(" '" + "".join(PLAIN_MARKS), "a")
    return str.maketrans(allowed | dict.fromkeys(_marks(lang) + "".join(PYSBD_MARKERS), " "))


@functools.cache
def _marks(lang: str) -> str:
    """pysbd's sentence marks of ``lang`` (its ``Punctuations``) and the ellipsis."""
    from pysbd.languages import Language

    return "".join(Language.get_language_code(lang).Punctuations) + "\u2026"


SPLIT_WINDOW = 3_000
"""Characters pysbd reads at a time (:func:`pysbd_segments`). pysbd's time grows with the square of
the text's length past a few thousand characters (here: 0.09 s for 5,000 characters, 2.1 s for
40,000, 7.9 s for 100,000); up to 3,000 it is close to linear (15 microseconds a character)."""

SPLIT_MARGIN = 1_000
"""Characters at the end of a window whose segments are read again in the next window: pysbd keeps
a quotation or a bracket whole (no boundary inside), so a boundary is only final once the text
that could close such a span has been seen. Quotations in WMT17 news run to a few hundred."""


def pysbd_segments(text: str, lang: str) -> list[str]:
    r"""pysbd's segments of ``text`` (white space kept), in time linear in its length.

    A text of at most :data:`SPLIT_WINDOW` characters is segmented whole, as pysbd does. A longer
    one is read a window of :data:`SPLIT_WINDOW` characters at a time: the window's segments that
    end before its last :data:`SPLIT_MARGIN` characters are kept, and the next window starts at the
    first segment not kept, a boundary pysbd drew with the margin's context after it. pysbd's rules
    look a few characters around a candidate boundary (an abbreviation before it, a capital after
    it), and across a quotation or bracket, which the margin covers: this gives the segments of the
    whole text wherever no quotation or bracket is open over more than the margin (tests: WMT17
    documents and a text of quotes, abbreviations and decimals). A window with no segment to keep (a
    sentence longer than the window less the margin) is widened, doubling. The time is
    :math:`O(n \cdot W)` for ``n`` characters and window ``W``; pysbd's own is :math:`O(n^2)`.
    """
    segments: list[str] = []
    start, width = 0, SPLIT_WINDOW
    while True:
        piece = text[start : start + width]
        found = segment_with_pysbd(piece, lang)
        if start + width >= len(text):
            return segments + found
        starts = _starts(piece, found)
        # Segments after the first that start before the margin: the ones before each are complete
        # (the first may start past 0, after white space pysbd drops).
        kept = 0 if starts is None else sum(starts[0] < at <= width - SPLIT_MARGIN for at in starts)
        if not kept:
            width *= 2
            continue
        segments += found[:kept]
        start += starts[kept]
        width = SPLIT_WINDOW


FOLLOWING_SPACE = re.compile(r"\s*")


def segment_with_pysbd(text: str, lang: str) -> list[str]:
    r"""pysbd's ``Segmenter(language=lang, clean=False).segment(text)``: its sentences as pieces of
    ``text``, each with the white space after it, without a regular expression per sentence.

    ``segment`` finds each sentence back in the text by the pattern ``re.escape(sentence) + r"\s*"``
    (``sentences_with_char_spans``): a pattern compiled for that one sentence, which also pushes
    pysbd's own rules out of Python's ``re`` cache (512 patterns on Python 3.11, the oldest dropped
    first), to be compiled again: 2,852 compilations (0.68 s under cProfile) for the 830 WMT17 texts
    that reach pysbd, where English's rules, under 500 patterns, are compiled once. Here the
    sentence is found as that pattern finds it, by ``str.find``: its first match, in the order
    ``re.finditer`` reads them (without overlap), whose end, white space included, lies past the end
    of the sentence before; a sentence not found in the text is left out, as ``segment`` leaves it
    out. Held to ``segment`` by tests (WMT17 texts, and seeded random texts in every language pysbd
    splits).
    """
    import pysbd

    if not text:
        return []
    # A new Segmenter per text (under a microsecond): its processor reads the language's rules.
    sentences = pysbd.Segmenter(language=lang, clean=False).processor(text).process()
    segments, prior_end = [], 0
    for sentence in sentences:
        at = text.find(sentence)
        while at >= 0:
            end = FOLLOWING_SPACE.match(text, at + len(sentence)).end()
            if end > prior_end:
                segments.append(text[at:end])
                prior_end = end
                break
            # The next match starts where this one ends (one further for an empty one), as in re.finditer.
            at = text.find(sentence, max(end, at + 1))
    return segments


def _starts(piece: str, segments: list[str]) -> list[int] | None:
    """Where each of ``segments`` (pysbd's pieces of ``piece``, in order; pysbd drops the white
    space before a segment) begins in ``piece``; ``None`` if one is not found verbatim."""
    starts, cursor = [], 0
    for segment in segments:
        at = piece.find(segment, cursor)
        if at < 0:
            return None
        starts.append(at)
        cursor = at + len(segment)
    return starts


LETTER_OR_DIGIT = re.compile(r"[^\W_]")
r"""A letter or digit of any script: a character ``str.isalnum`` accepts (``\w`` less ``_``; held
equal to ``str.isalnum`` on every code point by a test)."""


def join_fragments(segments: list[str]) -> list[str]:
    """``segments`` (pieces of a text, in order, white space kept) with every piece that has no
    letter or digit (after reading HTML character references such as ``&quot;`` as the characters
    they stand for) appended to the piece before it, or, at the start, prepended to the piece after
    it; a text with no letter or digit at all stays one piece. An embedding of a lone ``"`` is no
    sentence, and as one it would drop recall sharply (one of very few sentences matched to nothing)."""
    joined: list[str] = []
    pending = ""  # leading pieces without a letter or digit, waiting for the first real one
    for piece in segments:
        if not LETTER_OR_DIGIT.search(html.unescape(piece)):
            if joined:
                joined[-1] += piece
            else:
                pending += piece
            continue
        joined.append(pending + piece)
        pending = ""
    return joined or ([pending] if pending else [])
