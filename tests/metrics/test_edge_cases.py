"""Edge cases shared by the metrics (issue 12): identical texts in every centering mode, the
warnings of calls too small for their batch mean or their IDF, and the admissible epsilon."""

from __future__ import annotations

import warnings

import pytest

from moverkit import functional
from moverkit._core.centering.maths import MIN_BATCH_TEXTS, SENTENCE_CENTERING_MODES

TOKEN_METRICS = ("centered_bertscore", "twmd", "moverscore", "lazy_emd")
OUTPUTS = {
    "centered_bertscore": ("precision", "recall", "f1"),
    "twmd": ("twmd",),
    "moverscore": ("moverscore",),
    "lazy_emd": ("lazy_emd",),
    "sbertscore": ("precision", "recall", "f1"),
}
BEST = {"lazy_emd": 0.0}  # a distance; the others score 1 for a text against itself
# One-token texts (centering turns "a" into the zero vector in sentence and batch mode), a one-sentence
# text (the zero vector of sbertscore's batch mode) and a longer one.
TEXTS = ["a", "Dogs bark.", "The cat sat on the mat and looked at the birds outside."]


def _modes(name):
    return SENTENCE_CENTERING_MODES if name == "sbertscore" else ("none", "dim", "sentence", "batch", "corpus")


@pytest.mark.slow
@pytest.mark.parametrize("name", [*TOKEN_METRICS, "sbertscore"])
def test_identical_texts_score_the_best_value_in_every_centering_mode(name, tiny_model_path, tiny_centering_stats):
    # Old: ["a"] vs ["a"] scored F1 0.0 in centered_bertscore (batch, sentence), twmd 0.0, lazy_emd
    # 0.16, sbertscore 0.0 for a lone sentence in batch mode: centering left a zero vector.
    function = getattr(functional, name)
    for centering in _modes(name):
        kwargs = {"model_type": tiny_model_path, "centering": centering}
        if centering == "corpus":
            kwargs["centering_stats"] = tiny_centering_stats(name)
        for texts in ([TEXTS[0]], TEXTS):  # alone, and in a call of several texts
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # small batches warn (tested below)
                result = function(texts, texts, **kwargs)
            for key in OUTPUTS[name]:
                best = BEST.get(name, 1.0)
                # lazy_emd's entropic plan leaks a little mass off the diagonal of a longer text.
                assert result[key] == pytest.approx([best] * len(texts), abs=2e-3), (centering, texts, key)
                if len(texts) == 1:
                    assert result[key] == pytest.approx([best], abs=1e-6), (centering, key)


def _batch_warnings(function, predictions, references, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        function(predictions, references, **kwargs)
    return [str(w.message) for w in caught if "centering='batch'" in str(w.message)]


@pytest.mark.parametrize("name", TOKEN_METRICS)
def test_batch_centering_of_too_few_texts_warns_once(name, tiny_model_path):
    function = getattr(functional, name)
    kwargs = {"model_type": tiny_model_path, "centering": "batch"}
    if name == "moverscore":
        kwargs["version"] = "v1"  # power means: one warning, not one per layer
    messages = _batch_warnings(function, ["the cat sat"], ["a dog ran"], **kwargs)
    assert len(messages) == 1
    assert messages[0].startswith("centering='batch' over only 2 distinct texts (fewer than 10)")
    assert "Score more pairs per call" in messages[0] and "centering='corpus'" in messages[0]
    # Distinct texts with a token count: repeats and blank texts add nothing.
    words = [f"word{i}" for i in range(MIN_BATCH_TEXTS)]
    assert len(_batch_warnings(function, words[:-1] + ["word0", " "], ["word1"] * 11, **kwargs)) == 1
    assert _batch_warnings(function, words, words[::-1], **kwargs) == []
    assert _batch_warnings(function, ["the cat sat"], ["a dog ran"], model_type=tiny_model_path, centering="dim") == []


def test_batch_centering_of_a_single_sentence_pair_warns(tiny_model_path):
    # Old: every single one-sentence pair scored -1.0 (or 0) with no warning.
    messages = _batch_warnings(
        functional.sbertscore, ["The cat sat."], ["A dog ran."], model_type=tiny_model_path, centering="batch"
    )
    assert len(messages) == 1 and messages[0].startswith("centering='batch' over only 2 distinct sentences")
    animals = ["cat", "dog", "bird", "fish", "horse", "cow", "goat", "duck", "frog", "bee"]
    sentences = [f"The {animal} sleeps." for animal in animals[:MIN_BATCH_TEXTS]]
    many = _batch_warnings(
        functional.sbertscore,
        [" ".join(sentences[:5])],
        [" ".join(sentences[5:])],
        model_type=tiny_model_path,
        centering="batch",
    )
    assert many == []


@pytest.mark.parametrize("name", ["centered_bertscore", "moverscore", "lazy_emd"])
def test_idf_fitted_on_a_single_pair_warns(name, tiny_model_path):
    # One reference: each of its tokens has IDF log(2/2) = 0 ("cat" of the prediction has IDF log 2,
    # except in moverscore, which fits the predictions' IDF on the one prediction). Old:
    # centered_bertscore returned 0.0 silently; the three now give one warning of the same wording.
    function = getattr(functional, name)
    n_pred = 1 if name == "moverscore" else 0
    match = rf"{n_pred} prediction\(s\) and 1 reference\(s\) have IDF 0 on every token"
    with pytest.warns(UserWarning, match=match) as caught:
        result = function(["a cat"], ["a dog"], idf=True, model_type=tiny_model_path, centering="none")
    assert sum("have IDF 0" in str(w.message) for w in caught) == 1
    if name == "centered_bertscore":
        assert result["f1"] == [0.0]


@pytest.mark.parametrize("epsilon", [1e6, 1.5])
def test_epsilon_beyond_the_cost_scale_is_refused(epsilon):
    # Old: epsilon=1e6 gave 14.45 for a near-identical pair (a plan of mass ~ L_p L_r).
    with pytest.raises(ValueError, match="epsilon must be a finite number > 0 and <= 1"):
        functional.lazy_emd(["The cat sat on the mat."], ["The cat sat on a mat."], epsilon=epsilon)
