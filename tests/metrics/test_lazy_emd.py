"""lazy_emd on real pairs, pinned to POT's unbalanced and balanced Sinkhorn on independently
computed token vectors, to centered_bertscore's precision and recall at the extreme penalties,
and to its own contract (presets, errors, warnings, alignments). The solver itself is pinned in
tests/ot/test_unbalanced.py."""

from __future__ import annotations

import importlib
import math
import warnings

import numpy as np
import ot
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from benchmarks.host import DispatchCounter
from moverkit import MoverkitWarning
from moverkit._core import IdfTable, embedded_model_path, prepare_pairs
from moverkit._core.centering.maths import Centering
from moverkit._core.encoding.request import EncoderRequest
from moverkit.functional.lazy_emd import SOLVER_BATCH_ELEMENTS, lazy_emd, resolve_params

PRESET_EN = (0.23, 0.31)


@pytest.fixture(scope="module")
def pairs(wmt_pairs):
    predictions, references = wmt_pairs
    return predictions[:12], references[:12]


# --- independent token vectors: transformers directly, no moverkit ---------------------------


@pytest.fixture(scope="module")
def raw_vectors():
    """``raw_vectors(text)``: unit token vectors of layer 6 of the embedded model, special tokens
    dropped, float64 (each text encoded alone)."""
    path = embedded_model_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path).eval()
    cache = {}

    def vectors(text):
        if text not in cache:
            enc = tokenizer(text.strip(), return_tensors="pt", return_special_tokens_mask=True)
            special = enc.pop("special_tokens_mask")[0].bool()
            with torch.no_grad():
                hidden = model(**enc, output_hidden_states=True).hidden_states[6][0]
            x = hidden[~special].double().numpy()
            cache[text] = x / np.linalg.norm(x, axis=1, keepdims=True)
        return cache[text]

    return vectors


def _cost(raw_vectors, prediction, reference):
    """C = 1 - cos, rows = prediction tokens, and the uniform masses of both sides."""
    x, y = raw_vectors(prediction), raw_vectors(reference)
    return 1.0 - x @ y.T, np.full(len(x), 1 / len(x)), np.full(len(y), 1 / len(y))


def _pot_lazy_emd(cost, a, b, epsilon, reg_c, reg_r):
    """<C, P*> by POT's unbalanced Sinkhorn (reg_type="entropy", the release's), run to convergence."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # POT warns that reg_type="entropy" overwrites c
        plan = ot.unbalanced.sinkhorn_unbalanced(
            a, b, cost, epsilon, (reg_c, reg_r), method="sinkhorn", reg_type="entropy", numItermax=10**6, stopThr=1e-14
        )
    return float((plan * cost).sum())


# --- the metric against POT on real pairs -----------------------------------------------------


@pytest.mark.slow
def test_function_equals_module(load_metric, pairs):
    # Five pairs and a second reference: eleven distinct texts, enough for batch centering.
    predictions, references = pairs[0][:5], [[r, "an unrelated second reference"] for r in pairs[1][:5]]
    kwargs = {"lang": "zh", "epsilon": 0.05, "idf": True, "centering": "batch", "return_alignment": True}
    with pytest.warns(MoverkitWarning, match="lang='zh' is scored with the English embedded model"):
        module = load_metric("lazy_emd").compute(predictions=predictions, references=references, **kwargs)
    with pytest.warns(MoverkitWarning, match="lang='zh' is scored with the English embedded model"):
        function = lazy_emd(predictions, references, **kwargs)
    assert function == module


@pytest.mark.slow  # POT's entropic solver on real pairs (9 s); the hard-marginal parity below stays quick
def test_a_text_against_itself_scores_pots_entropic_plan(raw_vectors, wmt_pairs):
    # The definition (Eq. 11, the release's POT call) on a text against itself: the entropic plan
    # blurs mass onto similar tokens, so the score is a little above 0, not the identity coupling's 0.
    texts = sorted(set(wmt_pairs[1]))[:40] + ["the " * 20, "go to the store and buy some milk. " * 4]
    ours = lazy_emd(texts, texts)["lazy_emd"]
    pot = [_pot_lazy_emd(*_cost(raw_vectors, text, text), 0.009, *PRESET_EN) for text in texts]
    assert np.max(np.abs(np.array(ours) - pot)) <= 1e-5
    assert min(pot) > 0 and np.mean(pot[:40]) > 1e-5  # the identity coupling would give 0


@pytest.mark.slow
def test_compute_equals_pot_per_pair_on_real_pairs(raw_vectors, pairs):
    predictions, references = pairs
    ours = lazy_emd(predictions, references)["lazy_emd"]  # lang="en"
    for value, prediction, reference in zip(ours, predictions, references):
        cost, a, b = _cost(raw_vectors, prediction, reference)
        assert abs(value - _pot_lazy_emd(cost, a, b, 0.009, *PRESET_EN)) <= 1e-5


@pytest.mark.slow
def test_idf_masses_are_normalized_idf_weights(raw_vectors, pairs):
    predictions, references = pairs
    tokenizer = AutoTokenizer.from_pretrained(embedded_model_path())
    ids = [tokenizer(r.strip(), add_special_tokens=False)["input_ids"] for r in references]
    table = IdfTable(ids)  # BERTScore's IDF over the references, for both sides
    ours = lazy_emd(predictions, references, idf=True)["lazy_emd"]
    for value, prediction, reference in zip(ours, predictions, references):
        cost, _, _ = _cost(raw_vectors, prediction, reference)
        a = np.array([table[i] for i in tokenizer(prediction.strip(), add_special_tokens=False)["input_ids"]])
        b = np.array([table[i] for i in tokenizer(reference.strip(), add_special_tokens=False)["input_ids"]])
        assert abs(value - _pot_lazy_emd(cost, a / a.sum(), b / b.sum(), 0.009, *PRESET_EN)) <= 1e-5


@pytest.mark.slow
def test_batch_centering_changes_the_costs_as_centered_vectors_do(pairs):
    predictions, references = pairs[0][:6], pairs[1][:6]
    result = lazy_emd(predictions, references, centering="batch")
    assert "center=batch" in result["hashcode"]
    data = prepare_pairs(predictions, references, EncoderRequest(), Centering("batch"))
    for k, value in enumerate(result["lazy_emd"]):
        pred, ref = data.pad_pairs(torch.tensor([k]))
        x = pred.vectors[0, pred.mask[0]].double().numpy()
        y = ref.vectors[0, ref.mask[0]].double().numpy()
        cost = 1 - x @ y.T
        a, b = np.full(len(x), 1 / len(x)), np.full(len(y), 1 / len(y))
        assert abs(value - _pot_lazy_emd(cost, a, b, 0.009, *PRESET_EN)) <= 1e-5


@pytest.mark.slow
def test_hard_marginals_on_real_pairs_give_pots_balanced_entropic_plan(raw_vectors, pairs):
    """reg_c = reg_r = inf makes P a coupling of a and b, and on couplings eps KL(P | 1) is POT's
    balanced entropic term eps sum P (log P - 1) plus a constant: the plan of ot.sinkhorn. At
    eps = 0.1: much smaller eps leaves a few pairs whose nearly-decoupled token groups make
    Sinkhorn crawl (see the card's limitations)."""
    predictions, references = pairs[0][:6], pairs[1][:6]
    eps = 0.1
    result = lazy_emd(
        predictions, references, reg_c=math.inf, reg_r=math.inf, epsilon=eps, max_iter=20000, return_alignment=True
    )
    for value, al, prediction, reference in zip(result["lazy_emd"], result["alignment"], predictions, references):
        cost, a, b = _cost(raw_vectors, prediction, reference)
        plan = np.array(al["plan"])
        pot = ot.sinkhorn(a, b, cost, eps, method="sinkhorn_log", numItermax=10**5, stopThr=1e-12)
        np.testing.assert_allclose(plan, pot, atol=1e-6)
        assert abs(value - float((pot * cost).sum())) <= 1e-5


@pytest.fixture(scope="module")
def bertscore_with_alignment(load_metric, wmt_pairs):
    predictions, references = wmt_pairs[0][:16], wmt_pairs[1][:16]
    result = load_metric("centered_bertscore").compute(
        predictions=predictions, references=references, centering="none", return_alignment=True
    )
    return predictions, references, result


@pytest.mark.slow
@pytest.mark.parametrize("side", ["precision", "recall"])
def test_extreme_penalties_give_centered_bertscore_precision_and_recall(bertscore_with_alignment, side):
    """P = 1 - lazy_emd(inf, 0) and R = 1 - lazy_emd(0, inf), up to eps log L (tests/ot/test_unbalanced.py).

    centered_bertscore keeps [CLS]/[SEP] as candidates for the max, as bert-score does; Lazy-EMD
    transports between word tokens only. So its value is >= our max over word tokens, equal where
    a word token wins every max. Its alignment (word tokens only) gives that word-only max."""
    predictions, references, bert = bertscore_with_alignment
    eps = 1e-4
    reg_c, reg_r = (math.inf, 0.0) if side == "precision" else (0.0, math.inf)
    result = lazy_emd(predictions, references, reg_c=reg_c, reg_r=reg_r, epsilon=eps)
    lazy = 1 - np.array(result["lazy_emd"])
    axis = 1 if side == "precision" else 0
    similarities = [np.array(al["similarity"]) for al in bert["alignment"]]
    words_only = np.array([s.max(axis=axis).mean() for s in similarities])
    other_side = np.array([s.shape[axis] for s in similarities])
    # 0 <= words_only - lazy <= eps log L, up to float32 cosines (1e-6)
    assert np.all(words_only - lazy >= -1e-6)
    assert np.all(words_only - lazy <= eps * np.log(other_side) + 1e-6)
    with_specials = np.array(bert[side])
    assert np.all(with_specials >= words_only - 1e-6)
    same = np.abs(with_specials - words_only) <= 1e-6
    assert same.sum() >= len(same) // 2  # the comparison below is not vacuous
    assert np.all(np.abs(with_specials[same] - lazy[same]) <= eps * np.log(other_side[same]) + 2e-6)


@pytest.mark.slow
def test_a_pairs_score_does_not_depend_on_the_solver_batch(wmt_pairs, tiny_model_path):
    # Without a batch centering each pair is its own problem: solved with 23 others (in buckets of
    # similar lengths) or in smaller calls, it must score the same.
    predictions, references = wmt_pairs[0][:24], wmt_pairs[1][:24]
    tiny = {"model_type": tiny_model_path}
    data = prepare_pairs(predictions, references, EncoderRequest(**tiny), Centering())
    assert len(list(data.batches(max_elements=SOLVER_BATCH_ELEMENTS))) > 1  # several solver batches
    together = lazy_emd(predictions, references, **tiny)["lazy_emd"]
    pieces = []
    for start, end in ((0, 1), (1, 7), (7, 24)):
        pieces += lazy_emd(predictions[start:end], references[start:end], batch_size=3, **tiny)["lazy_emd"]
    np.testing.assert_allclose(pieces, together, atol=1e-6)


@pytest.mark.parametrize("plan", [pytest.param("cpu", marks=pytest.mark.slow), "cuda"])
def test_host_reads_do_not_grow_with_the_solver_batches_or_iterations(wmt_pairs, tiny_model_path, monkeypatch, plan):
    # Issue 45: a call reads the device a few times, under the CPU's plan and the CUDA plan (what
    # a GPU will do, counted on the CPU), whatever its solver batches and Sinkhorn iterations.
    monkeypatch.setenv("MOVERKIT_PLAN", plan)
    predictions, references = wmt_pairs[0][:30], wmt_pairs[1][:30]

    def reads(**kwargs):
        counter = DispatchCounter()
        with counter:
            lazy_emd(predictions, references, model_type=tiny_model_path, **kwargs)
        return counter.reads

    reads()  # the model loaded
    default = reads()
    assert reads(reg_c=1.0, reg_r=1.0) == default  # 850 iterations instead of 50
    monkeypatch.setattr(importlib.import_module("moverkit.functional.lazy_emd"), "SOLVER_BATCH_ELEMENTS", 1 << 12)
    assert reads() == default <= 32  # many batches instead of one or two


# --- parameters ---------------------------------------------------------------------------------


def test_lang_presets_and_overrides(tiny_model_path):
    def penalties(**kwargs):
        params = resolve_params(kwargs.pop("lang", "en"), kwargs.get("reg_c"), kwargs.get("reg_r"), 0.009, 10)
        return params["reg_c"], params["reg_r"]

    assert penalties() == (0.23, 0.31)  # Section 5.2: English
    assert penalties(lang="zh") == (0.018, 0.97)  # Chinese
    assert penalties(lang="de") == penalties(lang="other") == (0.009, 0.95)  # other target languages
    assert penalties(lang="zh", reg_c=0.23) == (0.23, 0.97)  # an explicit value wins
    assert penalties(reg_c=float("inf"), reg_r=0) == (math.inf, 0.0)
    texts = dict(predictions=["a cat sat on the mat", "hello"], references=["the cat sat", "hi there"])
    preset = lazy_emd(**texts, lang="zh", model_type=tiny_model_path)
    explicit = lazy_emd(**texts, reg_c=0.018, reg_r=0.97, model_type=tiny_model_path)
    assert preset["lazy_emd"] == explicit["lazy_emd"]
    assert preset["hashcode"] == explicit["hashcode"]
    assert (
        "_reg_c=0.018_reg_r=0.97_epsilon=0.009_max_iter=10000_version=" in preset["hashcode"]
        and "_center=none_max_length=128_" in preset["hashcode"]
    )


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"reg_c": -0.1}, ValueError, "reg_c must be a number >= 0"),
        ({"reg_r": float("nan")}, ValueError, "reg_r must be a number >= 0"),
        ({"reg_c": "0.2"}, TypeError, "reg_c must be a number >= 0"),
        ({"reg_r": True}, TypeError, "reg_r must be a number >= 0"),
        ({"epsilon": 0.0}, ValueError, "epsilon must be a finite number > 0 and <= 1"),
        ({"epsilon": -0.01}, ValueError, "epsilon must be a finite number > 0 and <= 1"),
        ({"epsilon": float("nan")}, ValueError, "epsilon must be a finite number > 0 and <= 1"),
        ({"epsilon": float("inf")}, ValueError, "epsilon must be a finite number > 0 and <= 1"),
        ({"epsilon": "0.01"}, TypeError, "epsilon must be a finite number > 0 and <= 1"),
        ({"max_iter": 0}, ValueError, "max_iter must be an int >= 1"),
        ({"max_iter": 10.0}, TypeError, "max_iter must be an int >= 1"),
        ({"lang": None}, TypeError, "lang must be a non-empty string"),
        ({"lang": " "}, ValueError, "lang must be a non-empty string"),
        ({"max_length": 2.5}, TypeError, "max_length must be an int >= 1"),
    ],
)
def test_invalid_parameters_are_clear_errors(load_metric, kwargs, error, message):
    with pytest.raises(error, match=message):
        lazy_emd(["a cat"], ["a dog"], **kwargs)
    with pytest.raises(error, match=message):
        load_metric("lazy_emd").compute(predictions=["a cat"], references=["a dog"], **kwargs)


def test_non_convergence_warns_with_what_to_change():
    with pytest.warns(RuntimeWarning, match="Raise max_iter, or raise epsilon"):
        result = lazy_emd(
            ["a b c d e f"], ["g h i j k"], reg_c=math.inf, reg_r=math.inf, max_iter=5
        )  # stopped early, yet within the bound
    assert math.isfinite(result["lazy_emd"][0])


def test_texts_whose_idf_weights_are_all_zero_warn_and_score_like_empty_ones(tiny_model_path):
    # One reference: every token of it has df = N = 1, so IDF log((N+1)/(df+1)) = 0 for all of them.
    with pytest.warns(UserWarning, match="0 prediction\\(s\\) and 1 reference\\(s\\) have IDF 0 on every token"):
        result = lazy_emd(["a cat"], ["a dog"], idf=True, model_type=tiny_model_path)
    assert result["lazy_emd"] == [1.0]


# --- special cases and alignments ------------------------------------------------------------------


def test_empty_one_token_and_identical_texts():
    result = lazy_emd(["", "dog", "   ", "dog", "the cat sat"], ["a cat", "", "x", "dog", "the cat sat"])
    scores = result["lazy_emd"]
    assert scores[:3] == [1.0, 1.0, 1.0]  # no scored token on a side: the documented 1.0
    assert 0 <= scores[3] <= 1e-6  # one token each, cost 1 - cos(x, x) = 0 up to float32 rounding
    assert 0 <= scores[4] <= 1e-3  # identical texts: the entropic plan leaks a little mass off the diagonal
    one = lazy_emd(["dog"], ["cat"], reg_c=1e12, reg_r=1e-12, epsilon=1e-6)["lazy_emd"]
    assert all(math.isfinite(v) and v >= 0 for v in one)


def test_alignment_gives_tokens_cost_and_the_plan_behind_the_score(raw_vectors):
    prediction, reference = "the cat sat on the mat", "a cat was sitting on the mat"
    result = lazy_emd([prediction], [reference], return_alignment=True)
    al = result["alignment"][0]
    assert al["prediction_tokens"] == ["the", "cat", "sat", "on", "the", "mat"]
    assert al["reference_tokens"] == ["a", "cat", "was", "sitting", "on", "the", "mat"]
    cost, plan = np.array(al["cost"]), np.array(al["plan"])
    np.testing.assert_allclose(cost, _cost(raw_vectors, prediction, reference)[0], atol=1e-5)
    assert plan.shape == cost.shape and (plan >= 0).all()
    assert abs(float((plan * cost).sum()) - result["lazy_emd"][0]) <= 1e-6
    assert plan[1, 1] == plan[1].max() and plan[5, 6] == plan[5].max()  # cat -> cat, mat -> mat
