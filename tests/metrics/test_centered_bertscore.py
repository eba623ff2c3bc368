"""centered_bertscore pinned to the bert-score package, to direct computations, and to its contract."""

from __future__ import annotations

import contextlib
import functools
import math
import random
import warnings

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from moverkit import MoverkitWarning, fit_centering
from moverkit._core import DEFAULT_MODEL, MODEL_LAYERS, CenteringStats, embedded_model_path
from moverkit._core.centering.stats_file import shipped_stats_path
from moverkit.functional.centered_bertscore import centered_bertscore

TOL = 1e-5


@pytest.fixture(scope="module")
def metric(load_metric):
    return load_metric("centered_bertscore")


@pytest.fixture(scope="module")
def bert_score_scorer():
    """The bert-score package's scorer on the embedded model and its last layer, loaded once."""
    bert_score = pytest.importorskip("bert_score")
    layer = MODEL_LAYERS[DEFAULT_MODEL]
    scorers = {
        idf: bert_score.BERTScorer(model_type=embedded_model_path(), num_layers=layer, idf=idf) for idf in (False, True)
    }

    def score(predictions, references, idf):
        scorer = scorers[idf]
        if idf:  # bert-score fits IDF on the (flattened) references, as its score() function does
            flat = [r for ref in references for r in ([ref] if isinstance(ref, str) else ref)]
            scorer.compute_idf(flat)
        return scorer.score(predictions, references)

    return score


def _max_diff(ours, theirs):
    return max(
        float(np.max(np.abs(np.asarray(ours[k]) - t.numpy()))) for k, t in zip(("precision", "recall", "f1"), theirs)
    )


@pytest.mark.slow
@pytest.mark.parametrize("idf", [False, True])
def test_equals_bert_score_package_on_200_real_pairs(metric, bert_score_scorer, wmt_pairs, idf):
    predictions, references = wmt_pairs
    ours = metric.compute(predictions=predictions, references=references, centering="none", idf=idf)
    theirs = bert_score_scorer(predictions, references, idf=idf)
    assert _max_diff(ours, theirs) <= TOL


@pytest.mark.slow
def test_equals_bert_score_package_with_multiple_references(metric, bert_score_scorer, wmt_pairs):
    predictions, references = wmt_pairs[0][:100], wmt_pairs[1][:100]
    # Two references each: the true one and another segment's reference (a worse match).
    multi = [[ref, references[(i + 7) % len(references)]] for i, ref in enumerate(references)]
    ours = metric.compute(predictions=predictions, references=multi, centering="none", idf=True)
    theirs = bert_score_scorer(predictions, multi, idf=True)
    assert _max_diff(ours, theirs) <= TOL


# --- centering modes against a direct computation --------------------------------------------


def _raw_layer_vectors(texts, layer=6):
    """Token vectors straight from transformers (all hidden states of the full model), no moverkit."""
    path = embedded_model_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path).eval()
    out = []
    for text in texts:
        enc = tokenizer(text, return_tensors="pt", return_special_tokens_mask=True)
        special = enc.pop("special_tokens_mask")[0].bool().numpy()
        with torch.no_grad():
            hidden = model(**enc, output_hidden_states=True).hidden_states[layer][0].double().numpy()
        out.append((hidden, special))
    return out


def _f1(precision, recall):
    """BERTScore's harmonic mean where both are positive, else the smaller (the card's rule)."""
    return 2 * precision * recall / (precision + recall) if precision > 0 and recall > 0 else min(precision, recall)


def _direct_scores(texts_pred, texts_ref, mode, corpus_mean=None):
    """BERTScore by hand: center (numpy, float64), normalise, greedy max with special tokens as
    candidates and weight 0 (bert-score's convention), uniform weights otherwise."""
    raw = _raw_layer_vectors(list(dict.fromkeys(texts_pred + texts_ref)))
    by_text = dict(zip(dict.fromkeys(texts_pred + texts_ref), raw))
    all_words = np.concatenate([h[~s] for t, (h, s) in by_text.items()])
    counts = {t: (texts_pred + texts_ref).count(t) for t in by_text}
    batch_mean = sum(counts[t] * h[~s].sum(0) for t, (h, s) in by_text.items()) / sum(
        counts[t] * (~s).sum() for t, (h, s) in by_text.items()
    )
    assert all_words.shape[1] == 384

    def centered(text):
        h, s = by_text[text]
        if mode == "none":
            v = h
        elif mode == "dim":
            v = h - h.mean(axis=1, keepdims=True)
        elif mode == "sentence":
            v = h - h[~s].mean(axis=0)
        elif mode == "batch":
            v = h - batch_mean
        else:
            v = h - corpus_mean
        return v / np.linalg.norm(v, axis=1, keepdims=True), s

    scores = []
    for p, r in zip(texts_pred, texts_ref):
        x, sx = centered(p)
        y, sy = centered(r)
        sim = x @ y.T
        precision = sim.max(axis=1)[~sx].mean()
        recall = sim.max(axis=0)[~sy].mean()
        scores.append((precision, recall, _f1(precision, recall)))
    return np.array(scores)


# Five pairs, ten distinct texts: as few as batch centering takes without a warning (MIN_BATCH_TEXTS).
SMALL_PRED = [
    "the cat sat on the mat .",
    "a quick brown fox",
    "economic growth slowed in march",
    "she reads a book every night",
    "the train left the station late",
]
SMALL_REF = [
    "a cat was sitting on the mat",
    "the fast brown fox jumps",
    "growth of the economy slowed",
    "every evening she reads books",
    "the train departed behind schedule",
]

# Ten distinct texts: as few as fit_centering takes without a warning (MIN_FIT_TEXTS).
FIT_CORPUS = [
    "the weather is nice today",
    "stocks fell sharply on monday",
    "he plays the violin",
    "the council approved the new budget",
    "rain is expected later this week",
    "the museum opens at nine",
    "scientists found water on the planet",
    "the team won the final match",
    "prices of fresh food keep rising",
    "a new bridge links the two towns",
]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["none", "dim", "sentence", "batch"])
def test_centering_modes_match_direct_computation(metric, mode):
    ours = metric.compute(predictions=SMALL_PRED, references=SMALL_REF, centering=mode)
    expected = _direct_scores(SMALL_PRED, SMALL_REF, mode)
    got = np.array([ours["precision"], ours["recall"], ours["f1"]]).T
    np.testing.assert_allclose(got, expected, atol=1e-5)


@pytest.mark.slow
def test_corpus_centering_matches_direct_computation(metric, tmp_path):
    stats = fit_centering(FIT_CORPUS)
    raw = _raw_layer_vectors(FIT_CORPUS)
    mean = np.concatenate([h[~s] for h, s in raw]).mean(axis=0)
    np.testing.assert_allclose(stats.mean, mean, atol=1e-5)
    path = tmp_path / "stats.npz"
    stats.save(path)
    ours = metric.compute(predictions=SMALL_PRED, references=SMALL_REF, centering="corpus", centering_stats=str(path))
    expected = _direct_scores(SMALL_PRED, SMALL_REF, "corpus", corpus_mean=stats.mean)
    np.testing.assert_allclose(np.array([ours["precision"], ours["recall"], ours["f1"]]).T, expected, atol=1e-5)


def test_corpus_statistic_fitted_on_the_call_equals_batch_centering(metric):
    stats = fit_centering(SMALL_PRED + SMALL_REF)
    batch = metric.compute(predictions=SMALL_PRED, references=SMALL_REF, centering="batch")
    corpus = metric.compute(predictions=SMALL_PRED, references=SMALL_REF, centering="corpus", centering_stats=stats)
    np.testing.assert_allclose(batch["f1"], corpus["f1"], atol=1e-6)


@pytest.mark.slow
def test_corpus_centering_scores_a_pair_the_same_alone_or_in_any_batch(metric, wmt_pairs):
    predictions, references = wmt_pairs
    stats = fit_centering(references[:50])
    together = metric.compute(
        predictions=predictions[:12], references=references[:12], centering="corpus", centering_stats=stats
    )
    for i in (0, 5, 11):
        alone = metric.compute(
            predictions=[predictions[i]], references=[references[i]], centering="corpus", centering_stats=stats
        )
        assert alone["f1"][0] == pytest.approx(together["f1"][i], abs=1e-6)
    # With batch centering the mean depends on the other texts, so the score does too.
    with pytest.warns(MoverkitWarning, match="centering='batch' over only 2 distinct texts"):
        batch_alone = metric.compute(predictions=[predictions[0]], references=[references[0]], centering="batch")
    batch_together = metric.compute(predictions=predictions[:12], references=references[:12], centering="batch")
    assert abs(batch_alone["f1"][0] - batch_together["f1"][0]) > 1e-3


def test_corpus_statistic_for_another_layer_is_refused(metric):
    stats = fit_centering(FIT_CORPUS, num_layers=3)
    with pytest.raises(ValueError, match="layer 3"):
        metric.compute(predictions=["a"], references=["b"], centering="corpus", centering_stats=stats)


@pytest.mark.slow
def test_the_default_corpus_centering_works_with_any_encoder(metric, tiny_model_path, monkeypatch, tmp_path):
    """Issue 51, defect 6: the default, ``centering="corpus"``, raised for every encoder but the
    embedded one. Now a model without a shipped statistic subtracts its mean over the corpus the
    shipped ones were fitted on (the 2,191 WMT17 references, shipped too): fitted once, said once,
    kept on disk for the next process, its digest in the hashcode; what fit_centering gives on that
    corpus, so the scores equal those of passing it."""
    from moverkit._core.centering import fit

    monkeypatch.setattr(fit, "_FITTED", {})
    monkeypatch.setenv("MOVERKIT_CENTERING_CACHE", str(tmp_path))
    kwargs = {"predictions": ["the cat sat", "a dog"], "references": ["a cat sat down", "dogs"]}
    with pytest.warns(MoverkitWarning, match=r"no statistic ships for .*2,191 WMT17 news references.*fitted in"):
        default = metric.compute(model_type=tiny_model_path, **kwargs)
    expected = fit_centering(fit.default_corpus(), tiny_model_path)
    assert f"_center=corpus:{expected.digest}_" in default["hashcode"]
    assert metric.compute(model_type=tiny_model_path, centering="corpus", centering_stats=expected, **kwargs) == default
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once a process
        assert metric.compute(model_type=tiny_model_path, **kwargs) == default
    monkeypatch.setattr(fit, "_FITTED", {})  # a new process reads what the first one kept
    with pytest.warns(MoverkitWarning, match="read from"):
        assert metric.compute(model_type=tiny_model_path, **kwargs) == default
    monkeypatch.setenv("MOVERKIT_CENTERING_CACHE", "off")  # nothing on disk: fitted again, the same mean
    monkeypatch.setattr(fit, "_FITTED", {})
    with pytest.warns(MoverkitWarning, match=r"fitted in [0-9.]+ s; digest"):
        assert metric.compute(model_type=tiny_model_path, **kwargs) == default


@pytest.mark.slow
def test_default_is_corpus_centering_with_the_shipped_statistic(metric, wmt_pairs):
    predictions, references = wmt_pairs
    shipped = CenteringStats.load(shipped_stats_path(DEFAULT_MODEL, MODEL_LAYERS[DEFAULT_MODEL]))
    assert shipped.model == DEFAULT_MODEL and shipped.layer == MODEL_LAYERS[DEFAULT_MODEL]
    together = metric.compute(predictions=predictions[:12], references=references[:12])
    assert f"_center=corpus:{shipped.digest}_" in together["hashcode"]
    explicit = metric.compute(
        predictions=predictions[:12], references=references[:12], centering="corpus", centering_stats=shipped
    )
    assert explicit == together
    for i in (0, 5, 11):
        alone = metric.compute(predictions=[predictions[i]], references=[references[i]])
        for key in ("precision", "recall", "f1"):
            assert alone[key][0] == pytest.approx(together[key][i], abs=1e-6)
    # Another layer takes that layer's shipped statistic.
    layer4 = metric.compute(predictions=predictions[:2], references=references[:2], num_layers=4)
    assert f"_center=corpus:{CenteringStats.load(shipped_stats_path(DEFAULT_MODEL, 4)).digest}_" in layer4["hashcode"]


def test_statistic_survives_save_and_load(tmp_path):
    stats = fit_centering(FIT_CORPUS)
    stats.save(tmp_path / "s.npz")
    loaded = CenteringStats.load(tmp_path / "s.npz")
    np.testing.assert_array_equal(loaded.mean, stats.mean)
    assert (loaded.model, loaded.layer, loaded.n_texts, loaded.n_tokens) == (
        stats.model,
        stats.layer,
        stats.n_texts,
        stats.n_tokens,
    )
    assert loaded.digest == stats.digest


@pytest.mark.parametrize("mode", ["none", "dim", "sentence", "batch"])
def test_one_token_texts_give_no_nan(metric, mode):
    # Sentence centering turns a one-token text into the zero vector: similarity 0, not NaN; batch
    # centering over these three texts (one-token texts included) warns that they are few.
    few = pytest.warns(MoverkitWarning, match="only 3 distinct texts") if mode == "batch" else contextlib.nullcontext()
    with few:
        result = metric.compute(
            predictions=["hello", "word"], references=["hello", "another word here"], centering=mode
        )
    for key in ("precision", "recall", "f1"):
        assert all(math.isfinite(v) for v in result[key])


def test_empty_and_whitespace_texts_score_zero(metric):
    result = metric.compute(predictions=["", "   ", "fine text"], references=["a reference", "another", " \t "])
    for key in ("precision", "recall", "f1"):
        assert result[key] == [0.0, 0.0, 0.0]


def test_identical_texts_score_one_in_every_mode(metric):
    texts = ["the cat sat on the mat", "stocks fell"] + FIT_CORPUS[:8]  # ten distinct (batch centering)
    for mode in ("none", "dim", "sentence", "batch", "corpus"):
        result = metric.compute(predictions=texts, references=texts, centering=mode)
        np.testing.assert_allclose(result["f1"], np.ones(len(texts)), atol=1e-5)


def test_best_reference_is_kept(metric):
    result = metric.compute(
        predictions=["the cat sat on the mat"],
        references=[["stock markets fell sharply", "the cat sat on the mat"]],
        return_alignment=True,
    )
    assert result["f1"][0] == pytest.approx(1.0, abs=1e-5)
    assert result["alignment"][0]["reference_tokens"] == ["the", "cat", "sat", "on", "the", "mat"]


def test_alignment_matrix_is_the_cosine_matrix_of_the_scored_tokens(metric):
    result = metric.compute(
        predictions=["a cat sat"], references=["the cat sat down"], centering="none", return_alignment=True
    )
    sim = np.array(result["alignment"][0]["similarity"])
    assert sim.shape == (3, 4)
    assert result["alignment"][0]["prediction_tokens"] == ["a", "cat", "sat"]
    assert np.all(sim <= 1 + 1e-6) and np.all(sim >= -1 - 1e-6)


@pytest.mark.slow
def test_same_numbers_on_any_batch_size(metric, wmt_pairs):
    predictions, references = wmt_pairs
    a = metric.compute(predictions=predictions[:40], references=references[:40], centering="none", batch_size=64)
    b = metric.compute(predictions=predictions[:40], references=references[:40], centering="none", batch_size=3)
    np.testing.assert_allclose(a["f1"], b["f1"], atol=1e-6)


@pytest.mark.slow
def test_over_long_inputs_are_truncated_with_one_warning(metric):
    long_text = " ".join(["word"] * 2000)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = metric.compute(predictions=[long_text, long_text + " more"], references=["word", "word"])
    truncation = [w for w in caught if "truncated" in str(w.message)]
    assert len(truncation) == 1
    assert truncation[0].category is MoverkitWarning
    assert "2 of" in str(truncation[0].message)
    assert all(math.isfinite(v) for v in result["f1"])


def test_max_length_truncates(metric):
    with pytest.warns(MoverkitWarning, match="1 of 2 texts are longer than 5 tokens and were truncated"):
        short = metric.compute(
            predictions=["a b c d e f g h"], references=["a b c"], centering="none", max_length=5
        )  # [CLS] a b c [SEP]
    assert short["precision"][0] == pytest.approx(1.0, abs=1e-5)


def test_hashcode_names_every_setting(metric, tmp_path):
    stats = fit_centering(FIT_CORPUS)
    # Two pairs: IDF fitted on a single reference is 0 on its every token (and warns).
    result = metric.compute(
        predictions=["a", "c"], references=["b", "d"], idf=True, centering="corpus", centering_stats=stats
    )
    code = result["hashcode"]
    assert code.startswith("centered_bertscore:sentence-transformers/all-MiniLM-L6-v2_L6_idf_center=corpus:")
    assert stats.digest in code and "version=" in code and "hug_trans=" in code
    custom = metric.compute(predictions=["a"], references=["b"], idf={"a": 2.0, "b": 1.0}, num_layers=-2)
    assert "_L5_idf-dict:" in custom["hashcode"]


def test_idf_dict_by_token_string_weights_tokens(metric):
    # Weight only "cat": precision is then the best similarity of "cat" alone.
    with_dict = metric.compute(
        predictions=["the cat"], references=["a cat"], idf={"cat": 1.0}, centering="none", return_alignment=True
    )
    sim = np.array(with_dict["alignment"][0]["similarity"])
    assert with_dict["precision"][0] == pytest.approx(max(sim[1].max(), with_dict["precision"][0]), abs=1e-6)
    assert with_dict["precision"][0] >= sim[1].max() - 1e-6


def test_bad_settings_are_clear_errors(metric):
    with pytest.raises(ValueError, match="centering must be one of"):
        metric.compute(predictions=["a"], references=["b"], centering="mean")
    with pytest.raises(ValueError, match="num_layers"):
        metric.compute(predictions=["a"], references=["b"], num_layers=7)
    with pytest.raises(TypeError, match="idf"):
        metric.compute(predictions=["a"], references=["b"], idf="yes")


# --- the F rule -------------------------------------------------------------------------------


def test_unrelated_words_get_the_smaller_score_not_a_harmonic_mean_above_one(metric):
    # The example: with batch centering "a" against "b" has P < 0 < R, and 2PR/(P+R) = 1.34.
    with pytest.warns(MoverkitWarning, match="only 2 distinct texts"):
        result = metric.compute(predictions=["a"], references=["b"], centering="batch")
    precision, recall, f1 = result["precision"][0], result["recall"][0], result["f1"][0]
    assert precision * recall < 0
    assert 2 * precision * recall / (precision + recall) > 1
    assert f1 == min(precision, recall)


@functools.cache
def _words():
    """The whole words of the embedded model's WordPiece vocabulary (no ## pieces, no symbols)."""
    vocab = AutoTokenizer.from_pretrained(embedded_model_path()).vocab
    return sorted(w for w in vocab if w.isalpha() and w.isascii())


def _random_short_texts(n, seed):
    """``n`` (prediction, reference) pairs of one to three random words."""
    vocab = _words()
    rng = random.Random(seed)

    def text():
        return " ".join(rng.choice(vocab) for _ in range(rng.randint(1, 3)))

    return [text() for _ in range(n)], [text() for _ in range(n)]


def _assert_f1_between_precision_and_recall(result):
    p, r, f = (np.array(result[k]) for k in ("precision", "recall", "f1"))
    assert np.all(f >= np.minimum(p, r) - 1e-12) and np.all(f <= np.maximum(p, r) + 1e-12)
    assert np.all(np.abs(f) <= 1.0)
    return p, r


@pytest.mark.slow  # 1,000 random pairs per mode
@pytest.mark.parametrize("mode", ["none", "dim", "sentence", "batch", "corpus"])
def test_f1_lies_between_precision_and_recall_on_1000_random_pairs(tiny_model_path, mode):
    predictions, references = _random_short_texts(1000, seed=11)
    stats = fit_centering(_random_short_texts(200, seed=12)[0], tiny_model_path) if mode == "corpus" else None
    result = centered_bertscore(
        predictions, references, model_type=tiny_model_path, centering=mode, centering_stats=stats
    )
    p, r = _assert_f1_between_precision_and_recall(result)
    if mode in ("batch", "corpus"):
        assert np.any(p * r < 0)  # the case the rule is for occurs


@pytest.mark.parametrize("mode", ["none", "dim", "sentence", "batch", "corpus"])
def test_f1_lies_between_precision_and_recall_with_the_embedded_model(metric, mode):
    predictions, references = _random_short_texts(40, seed=13)
    stats = fit_centering(_random_short_texts(40, seed=14)[0]) if mode == "corpus" else None
    result = metric.compute(predictions=predictions, references=references, centering=mode, centering_stats=stats)
    _assert_f1_between_precision_and_recall(result)


# --- the function and the module --------------------------------------------------------------


def test_function_equals_module(metric):
    kwargs = {"centering": "sentence", "idf": True, "num_layers": 4, "return_alignment": True}
    references = [[r, p] for p, r in zip(SMALL_PRED, SMALL_REF)]
    assert centered_bertscore(SMALL_PRED, references, **kwargs) == metric.compute(
        predictions=SMALL_PRED, references=references, **kwargs
    )


def test_module_name_is_the_folder_name(metric):
    from moverkit import functional

    assert metric.name == "centered_bertscore"
    assert functional.centered_bertscore is centered_bertscore
