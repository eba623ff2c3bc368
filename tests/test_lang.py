"""``lang`` (issue 21): a language code or an error naming it, in any case as bert-score takes it;
lazy_emd's fallback to the "other" penalties for real but untuned codes only; and the shipped
(English) rescaling baselines never applied to another language."""

from __future__ import annotations

import warnings

import pytest

from moverkit import MoverkitWarning, functional
from moverkit._core.call.baseline import baseline_csv
from moverkit._core.encoding.request import check_lang
from moverkit.functional.lazy_emd import resolve_params

METRICS = ["centered_bertscore", "lazy_emd", "moverscore", "sbertscore", "twmd"]
PAIRS = (["the cat sat on the mat", "stocks fell"], ["a cat sat on the mat", "shares fell"])


@pytest.mark.parametrize("name", METRICS)
@pytest.mark.parametrize("lang", ["klingon", "english", "e", "en_US", "en-", "12", "zh hans", "en\n"])
def test_a_name_that_is_no_language_code_is_refused_naming_lang(name, lang, load_metric):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # refused before any warning, and before any text is encoded
        with pytest.raises(ValueError, match=r"lang must be (a non-empty string: a language code|one of)"):
            getattr(functional, name)(*PAIRS, lang=lang)
        with pytest.raises(ValueError, match=r"lang must be (a non-empty string: a language code|one of)"):
            load_metric(name).compute(predictions=PAIRS[0], references=PAIRS[1], lang=lang)


@pytest.mark.parametrize("lang", ["en", "EN", "En", "de", "zh", "yue", "tlh", "en-sci", "pt-BR", "zh-Hans", "other"])
def test_codes_in_any_case_with_subtags_are_accepted_lower_cased(lang):
    assert check_lang(lang) == lang.lower()


@pytest.mark.parametrize("name", METRICS)
def test_english_in_capitals_is_english(name):
    # As bert-score (which lower-cases lang): "EN" is "en", with the same scores and no
    # "English embedded model" warning (unasserted moverkit warnings fail the test).
    function = getattr(functional, name)
    assert function(*PAIRS, lang="EN") == function(*PAIRS, lang="en")


@pytest.mark.parametrize(
    ("lang", "penalties"),
    [
        ("en", (0.23, 0.31)),
        ("EN", (0.23, 0.31)),
        ("en-sci", (0.23, 0.31)),
        ("zh", (0.018, 0.97)),
        ("ZH", (0.018, 0.97)),
        ("zh-hans", (0.018, 0.97)),
        ("other", (0.009, 0.95)),
        # real codes without a tuned preset keep the documented fallback to "other"
        ("de", (0.009, 0.95)),
        ("fi", (0.009, 0.95)),
        ("tlh", (0.009, 0.95)),
    ],
)
def test_lazy_emd_presets_follow_the_language_and_fall_back_for_untuned_codes(lang, penalties):
    params = resolve_params(lang, None, None, 0.009, 10)
    assert (params["reg_c"], params["reg_r"]) == penalties


def test_lazy_emd_refuses_a_non_code_instead_of_falling_back():
    for lang in ("klingon", "chinese", ""):
        with pytest.raises(ValueError, match="lang must be a non-empty string: a language code"):
            resolve_params(lang, None, None, 0.009, 10)


@pytest.mark.parametrize("name", METRICS)
@pytest.mark.parametrize("lang", ["de", "zh", "other", "fr-ca"])
def test_rescaling_another_language_needs_its_own_baseline(name, lang, tiny_model_path, tmp_path):
    function = getattr(functional, name)
    if name == "sbertscore" and lang in ("other", "fr-ca"):
        pytest.skip("pysbd has no splitter for it")
    # The English embedded model warns for another language; a multilingual model would not.
    refused = r"lang=.*baseline_path=.*moverkit fit-baseline --metric " + name
    with (
        pytest.warns(MoverkitWarning, match="English embedded model"),
        pytest.raises(ValueError, match=refused) as caught,
    ):
        function(*PAIRS, lang=lang, rescale_with_baseline=True)
    assert "English" in str(caught.value)
    # With a baseline fitted for the language (here: by hand), it rescales.
    columns = {"twmd": ("TWMD",), "moverscore": ("MOVERSCORE",), "lazy_emd": ("LAZY_EMD",)}.get(name, ("P", "R", "F"))
    layer = -1 if name == "sbertscore" else 2
    path = tmp_path / "baseline.csv"
    path.write_text(baseline_csv([(layer, *[0.5] * len(columns))], columns))
    call = {"model_type": tiny_model_path, "centering": "none", "lang": lang}
    if name != "sbertscore":
        call["num_layers"] = 2
    raw = function(*PAIRS, **call)
    rescaled = function(*PAIRS, rescale_with_baseline=True, baseline_path=str(path), **call)
    key = [k for k in raw if k != "hashcode"][-1]
    expected = [2 * s for s in raw[key]] if name == "lazy_emd" else [2 * s - 1 for s in raw[key]]
    assert rescaled[key] == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("name", METRICS)
def test_english_with_subtags_rescales_with_the_shipped_baseline(name):
    function = getattr(functional, name)
    lang = "en" if name == "sbertscore" else "en-sci"  # pysbd splits "en" only
    assert function(*PAIRS, lang=lang.upper(), rescale_with_baseline=True) == function(
        *PAIRS, rescale_with_baseline=True
    )


def test_the_sentence_splitter_takes_lang_as_every_metric_does():
    # One language check (issue 33): the splitter's codes are checked by check_lang too, so
    # split_sentences and sentence-level fit_centering take "DE" as sbertscore does, and refuse a
    # code pysbd has no splitter for by listing the ones it has.
    from moverkit._core.encoding.splitting import split_sentences, splitter_tag

    text = "Das kostet z. B. 3,50 Euro. Dann ging er."
    assert (
        split_sentences(text, "DE") == split_sentences(text, "de") == ["Das kostet z. B. 3,50 Euro.", "Dann ging er."]
    )
    assert splitter_tag("EN") == splitter_tag("en")
    assert check_lang("De", ["de", "en"]) == "de"
    with pytest.raises(ValueError, match="lang must be one of 'de', 'en'; got 'tlh'"):
        check_lang("tlh", ["de", "en"])
    with pytest.raises(ValueError, match="lang must be a non-empty string: a language code"):
        split_sentences(text, "german")
