"""moverscore pinned to a per-pair re-derivation from the paper and the release's description
(transformers + ot.emd2, no moverkit code), to known optimal flows, and to its contract."""

from __future__ import annotations

import importlib
import math
import re
import string
import warnings
from types import SimpleNamespace

import numpy as np
import ot
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from benchmarks.host import DispatchCounter
from moverkit._core import TokenClouds, embedded_model_path
from moverkit._core.call import power_means
from moverkit.functional.moverscore import moverscore, pairwise_cost, text_units
from moverkit.ot import exact_transport

TOL = 1e-5


@pytest.fixture(scope="module")
def metric(load_metric):
    return load_metric("moverscore")


# --- an independent MoverScore, one pair at a time ------------------------------------------


class Reference:
    """MoverScore written out from Zhao et al. (2019), Section 3, and the release's description:
    each text encoded alone by transformers; IDF log((N+1)/(df+1)) over the references (each pair
    one document) for references and over the predictions for predictions, on token ids, special
    tokens included (so they get 0); subword ("##") and punctuation tokens dropped; n-grams as
    windows of n kept tokens, stride 1, embedding = sum of idf * vector (Eq. 1), weight = sum of
    idf (Eq. 2); unit vectors L2-normalised; exact EMD by ot.emd2 in float64."""

    def __init__(self, path):
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModel.from_pretrained(path).eval()

    def token_vectors(self, text, power_means):
        enc = self.tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            hidden = self.model(**enc, output_hidden_states=True).hidden_states
        tokens = self.tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
        if not power_means:
            return tokens, enc["input_ids"][0].tolist(), hidden[-1][0].double().numpy()
        # Eq. (5): the last five block outputs (hidden_states[0] is the embedding layer), each
        # L2-normalised, then elementwise min, mean and max, concatenated.
        layers = np.stack([h[0].double().numpy() for h in hidden[1:][-5:]])
        layers /= np.linalg.norm(layers, axis=-1, keepdims=True)
        return tokens, enc["input_ids"][0].tolist(), np.concatenate([layers.min(0), layers.mean(0), layers.max(0)], -1)

    def idf(self, corpus):
        docs = [set(self.tokenizer(text)["input_ids"]) for text in corpus]
        df = {}
        for doc in docs:
            for token_id in doc:
                df[token_id] = df.get(token_id, 0) + 1
        return lambda token_id: math.log((len(docs) + 1) / (df.get(token_id, 0) + 1))

    def units(self, text, idf, n, power_means):
        tokens, ids, vectors = self.token_vectors(text, power_means)
        kept = [k for k, t in enumerate(tokens) if "##" not in t and t not in set(string.punctuation)]
        windows = [kept] if n is None or len(kept) < n else [kept[i : i + n] for i in range(len(kept) - n + 1)]
        embeddings, weights = [], []
        for window in windows:
            w = np.array([idf(ids[k]) for k in window])
            e = (w[:, None] * vectors[window]).sum(0)
            norm = np.linalg.norm(e)
            embeddings.append(e / norm if norm > 0 else e)
            weights.append(w.sum())
        weights = np.array(weights)
        return np.array(embeddings)[weights > 0], weights[weights > 0]

    def scores(self, predictions, references, n=1, power_means=False, squared=False, form="1/(1+wmd)"):
        pred_idf, ref_idf = self.idf(predictions), self.idf(references)
        out = []
        for p, r in zip(predictions, references):
            x, a = self.units(p, pred_idf, n, power_means)
            y, b = self.units(r, ref_idf, n, power_means)
            cost = np.linalg.norm(x[:, None, :] - y[None, :, :], axis=-1)
            wmd = ot.emd2(a / a.sum(), b / b.sum(), cost**2 if squared else cost)
            out.append(1 / (1 + wmd) if form == "1/(1+wmd)" else 1 - wmd)
        return np.array(out)


@pytest.fixture(scope="module")
def embedded_reference():
    return Reference(embedded_model_path())


@pytest.fixture(scope="module")
def tiny_reference(tiny_model_path):
    return Reference(tiny_model_path)


@pytest.mark.slow
def test_v2_equals_the_per_pair_rederivation_on_real_pairs(metric, embedded_reference, wmt_pairs):
    predictions, references = (texts[:24] for texts in wmt_pairs)
    ours = np.array(metric.compute(predictions=predictions, references=references, version="v2")["moverscore"])
    expected = embedded_reference.scores(predictions, references)
    # A translation identical to its reference is scored as any pair (the release's definition):
    # the separate IDF tables weigh its two sides differently and move some mass (0.973 for pair 20).
    same = np.array([p == r for p, r in zip(predictions, references)])
    assert same.sum() == 1 and expected[same][0] < 0.99
    assert np.max(np.abs(ours - expected)) <= TOL


def test_a_text_against_itself_scores_1_with_one_idf_table_and_the_emd_with_two(tiny_model_path):
    # One IDF table for both sides (the same texts as predictions and references, or idf=False):
    # the same distribution on both sides, the identity coupling of cost 0, exactly 1.
    texts = ["slow growth ahead .", "the cat sat on the mat", "a dog barked"]
    for kwargs in ({}, {"idf": False}):
        assert moverscore(texts, texts, model_type=tiny_model_path, **kwargs)["moverscore"] == [1.0] * 3
    # Two tables: "slow growth ahead ." weighs its tokens by IDF over the predictions on one side
    # and over the references on the other, so its EMD is above 0 and it scores below 1, equal to
    # the exact transport of those two weightings; one changed character moves it continuously.
    predictions, references = ["slow growth ahead .", "slow dog barked"], ["slow growth ahead .", "the cat sat"]
    result = moverscore(predictions, references, model_type=tiny_model_path, return_alignment=True)
    alignment = result["alignment"][0]
    plan, cost = np.array(alignment["plan"]), np.array(alignment["cost"])
    assert 0 < result["moverscore"][0] < 1
    assert result["moverscore"][0] == pytest.approx(1 / (1 + float((plan * cost).sum())), abs=1e-12)
    changed = moverscore(["slow growth ahead !", "slow dog barked"], references, model_type=tiny_model_path)
    assert abs(changed["moverscore"][0] - result["moverscore"][0]) < 0.2


def test_v1_with_bigrams_equals_the_rederivation_on_the_tiny_model(metric, tiny_reference, tiny_model_path, wmt_pairs):
    # Power means over all three layers of the tiny model (fewer than five), bigrams, squared cost, 1 - WMD.
    predictions, references = (texts[:16] for texts in wmt_pairs)
    ours = metric.compute(
        predictions=predictions, references=references, version="v1", n_gram=2, model_type=tiny_model_path
    )
    expected = tiny_reference.scores(predictions, references, n=2, power_means=True, squared=True, form="1-wmd")
    assert np.max(np.abs(np.array(ours["moverscore"]) - expected)) <= TOL
    assert "aggregation=power_means_layers=1-2-3" in ours["hashcode"]


def test_sentence_mover_equals_the_distance_of_idf_weighted_sums(metric, tiny_reference, tiny_model_path, wmt_pairs):
    # SMD: one unit per text, E(x) = sum_k idf_k E(x_k) (Eq. 1 with n = the whole text).
    predictions, references = (texts[:16] for texts in wmt_pairs)
    ours = metric.compute(predictions=predictions, references=references, variant="smd", model_type=tiny_model_path)
    expected = tiny_reference.scores(predictions, references, n=None)
    assert np.max(np.abs(np.array(ours["moverscore"]) - expected)) <= TOL


# --- building blocks against direct tensor arithmetic ----------------------------------------


def test_power_means_are_min_mean_max_the_limits_of_eq_4():
    torch.manual_seed(0)
    z = torch.rand(5, 7, 4, dtype=torch.float64) + 0.1  # 5 layers, 7 tokens, 4 dims; positive
    e = power_means(z)
    assert e.shape == (7, 12)

    def p_mean(p):  # Eq. (4), elementwise over the layers, in the log domain (z**-400 overflows)
        return torch.exp((torch.logsumexp(p * z.log(), dim=0) - math.log(len(z))) / p)

    assert torch.allclose(e[:, 4:8], p_mean(1.0))
    # p -> +inf gives the max and p -> -inf the min (within (1/L)^(1/p) of them).
    assert torch.allclose(e[:, 8:], p_mean(400.0), rtol=5e-3)
    assert torch.allclose(e[:, :4], p_mean(-400.0), rtol=5e-3)


def test_units_are_idf_weighted_window_sums_over_kept_tokens():
    # Text 0: five tokens, the third filtered out; weights (1, 2, 9, 0, 3). Text 1: two tokens,
    # the second filtered out; weights (4, 5).
    v = torch.tensor([[1.0, 0], [0, 1], [7, 7], [5, 5], [1, 1], [2, 1], [8, 8]])
    w = torch.tensor([1.0, 2, 9, 0, 3, 4, 5])
    keep = torch.tensor([True, True, False, True, True, True, False])
    no_special = torch.zeros(7, dtype=torch.bool)
    clouds = TokenClouds(["t0", "t1"], v, torch.tensor([0, 5, 7]), [[0] * 5, [0] * 2], no_special, None)
    data = SimpleNamespace(clouds=clouds, kept=keep)
    bigrams = text_units(data, w, torch.tensor([0, 1]), 2)
    # Kept tokens of text 0: rows 0, 1, 3, 4 (weights 1, 2, 0, 3). Windows (0,1), (1,3), (3,4):
    # 1*(1,0) + 2*(0,1) = (1,2), weight 3; 2*(0,1) + 0*(5,5) = (0,2), weight 2; 0 + 3*(1,1) = (3,3), weight 3.
    # Text 1 keeps one token, fewer than n = 2: one unit, 4*(2,1), weight 4.
    expected = torch.tensor([[1.0, 2], [0, 2], [3, 3], [8, 4]])
    assert bigrams.weights.tolist() == [3.0, 2.0, 3.0, 4.0] and bigrams.offsets.tolist() == [0, 3, 4]
    assert torch.allclose(bigrams.vectors, expected / expected.norm(dim=1, keepdim=True))
    assert bigrams.first.tolist() == [0, 1, 2, 4] and bigrams.last.tolist() == [2, 3, 4, 5]
    # Sentence mover: one unit per text, the weighted sum of all its kept tokens.
    sentence = text_units(data, w, torch.tensor([0, 1]), None)
    expected = torch.tensor([[1.0 + 3, 2 + 3], [8, 4]])
    assert sentence.weights.tolist() == [6.0, 4.0]
    assert torch.allclose(sentence.vectors, expected / expected.norm(dim=1, keepdim=True))
    # A window of weight 0 carries no mass and is left out.
    zero = text_units(data, torch.tensor([0.0, 0, 0, 0, 1, 0, 0]), torch.tensor([0, 1]), 1)
    assert zero.weights.tolist() == [1.0] and zero.offsets.tolist() == [0, 1, 1]


def test_known_permutation_is_the_optimal_flow():
    # y is x with its rows permuted: transport along the permutation costs 0, anything else more,
    # so the optimal plan is the permutation matrix / n and the WMD is 0.
    torch.manual_seed(1)
    x = torch.nn.functional.normalize(torch.randn(1, 5, 8), dim=-1)
    perm = torch.tensor([3, 0, 4, 1, 2])
    y = x[:, perm]
    cost = pairwise_cost(x, y, "euclidean")[0].numpy()
    wmd, plan = exact_transport(np.ones(5), np.ones(5), cost, with_plan=True)
    expected = np.zeros((5, 5))
    expected[perm.numpy(), np.arange(5)] = 0.2  # y_j = x_perm[j]
    assert np.allclose(plan, expected) and abs(wmd) < 1e-7
    # On a line, x = (0, 1, 2) and y = (2.1, 0.1, 1.1): the monotone matching 0->0.1, 1->1.1,
    # 2->2.1 is optimal, each moving 1/3 of the mass by 0.1, so the WMD is 0.1.
    xs = torch.tensor([[[0.0], [1.0], [2.0]]], dtype=torch.float64)
    ys = torch.tensor([[[2.1], [0.1], [1.1]]], dtype=torch.float64)
    cost = pairwise_cost(xs, ys, "euclidean")[0].numpy()
    wmd, plan = exact_transport(np.ones(3), np.ones(3), cost, with_plan=True)
    assert np.allclose(plan, np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]]) / 3) and abs(wmd - 0.1) < 1e-12
    assert abs(exact_transport(np.ones(3), np.ones(3), cost**2)[0] - 0.01) < 1e-12


def test_identical_texts_without_idf_flow_along_the_diagonal(metric, tiny_model_path):
    result = metric.compute(
        predictions=["the cat sat on the mat"],
        references=["the cat sat on the mat"],
        idf=False,
        model_type=tiny_model_path,
        return_alignment=True,
    )
    plan = np.array(result["alignment"][0]["plan"])
    assert result["alignment"][0]["prediction_tokens"] == ["the", "cat", "sat", "on", "the", "mat"]
    assert np.allclose(plan, np.eye(6) / 6) and abs(result["moverscore"][0] - 1.0) < 1e-7


# --- IDF and filters ------------------------------------------------------------------------


def test_idf_is_fitted_separately_on_predictions_and_references(metric, tiny_model_path):
    predictions = ["a cat sat", "a dog sat", "the bird"]
    references = ["the cat", "the dog ran", "a bird"]
    result = metric.compute(
        predictions=predictions, references=references, model_type=tiny_model_path, return_alignment=True
    )
    # Predictions, N = 3: df(a) = 2, df(cat) = 1, df(sat) = 2, so idf = log(4/3), log(4/2), log(4/3).
    # References, N = 3: df(the) = 2, df(cat) = 1: idf = log(4/3), log(4/2).
    # The plan's row sums are the prediction weights, its column sums the reference weights.
    plan = np.array(result["alignment"][0]["plan"])
    pred_idf = np.log([4 / 3, 4 / 2, 4 / 3])
    ref_idf = np.log([4 / 3, 4 / 2])
    assert result["alignment"][0]["prediction_tokens"] == ["a", "cat", "sat"]
    assert np.allclose(plan.sum(1), pred_idf / pred_idf.sum())
    assert np.allclose(plan.sum(0), ref_idf / ref_idf.sum())


def test_idf_dict_and_uniform_weights(metric, tiny_model_path):
    kwargs = {"predictions": ["a cat sat"], "references": ["the cat"], "model_type": tiny_model_path}
    uniform = metric.compute(idf=False, return_alignment=True, **kwargs)["alignment"][0]["plan"]
    assert np.allclose(np.array(uniform).sum(1), [1 / 3] * 3)
    given = {"a": 1.0, "cat": 2.0, "sat": 1.0, "the": 3.0}
    plan = np.array(metric.compute(idf=given, return_alignment=True, **kwargs)["alignment"][0]["plan"])
    assert np.allclose(plan.sum(1), [0.25, 0.5, 0.25]) and np.allclose(plan.sum(0), [0.6, 0.4])


def test_filters_drop_subwords_punctuation_and_stop_words(metric, tiny_model_path):
    def units(**kwargs):
        result = metric.compute(
            predictions=["the kenobi cat , sat ."],
            references=["a cat"],
            idf=False,
            model_type=tiny_model_path,
            return_alignment=True,
            **kwargs,
        )
        return result["alignment"][0]["prediction_tokens"]

    everything = units(remove_subwords=False, remove_punctuation=False)
    assert any(t.startswith("##") for t in everything) and "," in everything and "." in everything
    assert not any(t.startswith("##") or t in {",", "."} for t in units())
    assert "the" not in units(stop_words=["the"]) and "cat" in units(stop_words=["the"])
    assert any(t.startswith("##") for t in units(remove_subwords=False))


def test_all_filtered_or_empty_sides_score_zero(metric, tiny_model_path):
    predictions = ["?!", "", "   ", "a cat", ""]
    references = ["a cat", "a cat", "a cat", "...", ""]
    for version in ("v1", "v2"):
        scores = metric.compute(
            predictions=predictions, references=references, version=version, model_type=tiny_model_path
        )["moverscore"]
        assert scores == [0.0] * 5
    smd = metric.compute(predictions=predictions, references=references, variant="smd", model_type=tiny_model_path)
    assert smd["moverscore"] == [0.0] * 5


def test_single_pair_falls_back_to_uniform_weights_with_a_warning(metric, tiny_model_path):
    # With one pair every token occurs in every (one) text: all IDFs are log(2/2) = 0.
    kwargs = {"predictions": ["a cat sat"], "references": ["the cat"], "model_type": tiny_model_path}
    with pytest.warns(UserWarning, match="1 prediction\\(s\\) and 1 reference\\(s\\) have IDF 0"):
        with_idf = metric.compute(**kwargs)["moverscore"]
    assert with_idf == pytest.approx(metric.compute(idf=False, **kwargs)["moverscore"], abs=1e-12)


# --- presets, forms, contract ---------------------------------------------------------------


def test_v1_with_v2_settings_gives_v2(metric, tiny_model_path, wmt_pairs):
    predictions, references = (texts[:20] for texts in wmt_pairs)
    common = {"predictions": predictions, "references": references, "model_type": tiny_model_path}
    v2 = metric.compute(version="v2", **common)
    overridden = metric.compute(version="v1", aggregation="layer", cost="euclidean", score_form="1/(1+wmd)", **common)
    assert np.allclose(v2["moverscore"], overridden["moverscore"], atol=1e-12)
    assert "preset=v1" in overridden["hashcode"] and "preset=v2" in v2["hashcode"]


def test_score_forms_are_one_minus_and_inverse_of_the_same_distance(metric, tiny_model_path, wmt_pairs):
    predictions, references = (texts[:20] for texts in wmt_pairs)
    common = {"predictions": predictions, "references": references, "model_type": tiny_model_path}
    inverse = np.array(metric.compute(score_form="1/(1+wmd)", **common)["moverscore"])
    one_minus = np.array(metric.compute(score_form="1-wmd", **common)["moverscore"])
    # d = 1 - s1 and s2 = 1 / (1 + d) = 1 / (2 - s1)
    assert np.allclose(inverse, 1 / (2 - one_minus), atol=1e-12)
    assert np.all((inverse > 0) & (inverse <= 1))


@pytest.mark.slow
def test_same_numbers_on_any_batch_size_and_pair_order(metric, tiny_model_path, wmt_pairs):
    predictions, references = (texts[:16] for texts in wmt_pairs)
    common = {"model_type": tiny_model_path, "version": "v1", "n_gram": 2}
    a = metric.compute(predictions=predictions, references=references, batch_size=64, **common)["moverscore"]
    b = metric.compute(predictions=predictions, references=references, batch_size=3, **common)["moverscore"]
    order = list(reversed(range(16)))
    c = metric.compute(
        predictions=[predictions[i] for i in order], references=[references[i] for i in order], **common
    )["moverscore"]
    assert np.allclose(a, b, atol=1e-6) and np.allclose(a, [c[order.index(i)] for i in range(16)], atol=1e-6)


def test_best_reference_is_kept(metric, tiny_model_path):
    preds = ["the cat sat on the mat", "a dog barked"]
    refs = ["a cat was on the mat", "the dog barked loudly"]
    other = ["stock markets fell sharply", "rain is expected"]
    common = {"idf": False, "model_type": tiny_model_path}
    alone = [metric.compute(predictions=preds, references=r, **common)["moverscore"] for r in (refs, other)]
    both = metric.compute(predictions=preds, references=[[o, r] for r, o in zip(refs, other)], **common)
    assert np.allclose(both["moverscore"], np.maximum(*alone), atol=1e-12)


def test_batch_centering_is_moverscore_b(metric, tiny_model_path, wmt_pairs):
    predictions, references = (texts[:20] for texts in wmt_pairs)
    common = {"predictions": predictions, "references": references, "model_type": tiny_model_path}
    plain = metric.compute(**common)
    centered = metric.compute(centering="batch", **common)
    assert "center=batch" in centered["hashcode"] and "center=none" in plain["hashcode"]
    assert not np.allclose(plain["moverscore"], centered["moverscore"])
    assert all(math.isfinite(s) for s in metric.compute(centering="batch", version="v1", **common)["moverscore"])


def test_hashcode_names_every_setting(metric, tiny_model_path):
    result = metric.compute(
        predictions=["a cat"], references=["the cat"], idf=False, stop_words=["the"], model_type=tiny_model_path
    )
    code = result["hashcode"]
    for part in ("moverscore:local@", "_L3_", "no-idf", "variant=wmd", "n_gram=1", "aggregation=layer",
                 "remove_subwords=True", "cost=euclidean", "score_form=1/(1+wmd)", "version="):  # fmt: skip
        assert part in code
    assert "stop_words=none" not in code


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"version": "v3"}, ValueError, "version must be one of 'v2', 'v1'; got 'v3'"),
        ({"version": 2}, TypeError, "version must be one of"),
        ({"variant": "rwmd"}, ValueError, "variant must be one of 'wmd', 'smd'; got 'rwmd'"),
        ({"aggregation": "mean"}, ValueError, "aggregation must be one of"),
        ({"n_gram": 0}, ValueError, "n_gram must be an int >= 1, got 0"),
        ({"n_gram": 2.0}, TypeError, "n_gram must be an int >= 1, got 2.0"),
        ({"n_gram": True}, TypeError, "n_gram must be an int >= 1"),
        ({"variant": "smd", "n_gram": 2}, ValueError, "n_gram has no effect"),
        ({"cost": "cosine"}, ValueError, "cost must be one of"),
        ({"cost": 2}, TypeError, "cost must be one of"),
        ({"score_form": "exp"}, ValueError, "score_form must be one of"),
        ({"stop_words": "the"}, TypeError, "stop_words must be a list"),
        ({"remove_subwords": "yes"}, TypeError, "remove_subwords must be True or False"),
        ({"remove_punctuation": 1}, TypeError, "remove_punctuation must be True or False"),
        ({"return_alignment": 1}, TypeError, "return_alignment must be True or False"),
        ({"batch_size": 0}, ValueError, "batch_size must be an int >= 1"),
        ({"idf": "yes"}, TypeError, "idf must be"),
        ({"centering": "mean"}, ValueError, "centering must be one of"),
        ({"version": "v1", "centering": "corpus"}, ValueError, "not to an aggregation over layers"),
    ],
)
def test_bad_settings_are_clear_errors(tiny_model_path, kwargs, error, message):
    call = {"predictions": ["a cat"], "references": ["the cat"], "model_type": tiny_model_path, **kwargs}
    with pytest.raises(error, match=re.escape(message)):
        moverscore(**call)


def test_function_equals_the_evaluate_module(metric, tiny_model_path, wmt_pairs):
    predictions, references = (texts[:12] for texts in wmt_pairs)
    references = [[r, references[(i + 1) % 12]] if i % 3 == 0 else r for i, r in enumerate(references)]
    for kwargs in ({}, {"version": "v1", "n_gram": 2, "centering": "batch"}, {"variant": "smd"}):
        call = {"predictions": predictions, "references": references, "model_type": tiny_model_path, **kwargs}
        ours = moverscore(**call, return_alignment=True)
        theirs = metric.compute(**call, return_alignment=True)
        assert ours == theirs


def test_no_nan_on_degenerate_inputs(metric, tiny_model_path):
    predictions = ["a", "a", "word " * 300, ".", "##"]
    references = ["a", "b", "word", "a", "a"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for version in ("v1", "v2"):
            scores = metric.compute(
                predictions=predictions, references=references, version=version, model_type=tiny_model_path
            )["moverscore"]
            assert all(math.isfinite(s) for s in scores)


def test_v1_refuses_corpus_centering_before_loading_anything(monkeypatch):
    """Power means aggregate five layers; a corpus statistic is of one: refused as an argument is,
    before the encoder (whose token limit would refuse max_length=1) or a first pass runs."""
    from moverkit._core.call import streaming

    monkeypatch.setattr(streaming, "encoder_for", lambda request: pytest.fail("loaded the encoder"))
    with pytest.raises(ValueError, match="centering='corpus' applies to one layer"):
        moverscore(["a cat"], ["a cat"], version="v1", centering="corpus", max_length=1)


@pytest.mark.slow
@pytest.mark.parametrize("plan", ["cpu", "cuda"])
def test_host_reads_do_not_grow_with_the_pairs_or_their_batches(wmt_pairs, tiny_model_path, monkeypatch, plan):
    # Issue 45: the unit counts and each wave of cost matrices go to the host in one copy, then
    # every exact EMD runs on the host: no read of the device per pair or per batch.
    monkeypatch.setenv("MOVERKIT_PLAN", plan)
    predictions, references = wmt_pairs

    def reads(pairs=200):
        counter = DispatchCounter()
        with counter:
            moverscore(predictions[:pairs], references[:pairs], model_type=tiny_model_path)
        return counter.reads

    reads()  # the model loaded
    default = reads()
    module = importlib.import_module("moverkit.functional.moverscore")
    monkeypatch.setattr(module, "COST_ELEMENTS", 1 << 10)  # a batch of a few pairs
    monkeypatch.setattr(module, "COST_WAVE_ELEMENTS", 1 << 12)  # a copy every few batches
    assert reads() == default <= 32
    assert reads(pairs=50) <= default
