"""lazy_emd pinned to POT's unbalanced Sinkhorn (reg_type="entropy"), to Theorem 2's closed form,
to its extreme penalties (ot.emd2, BERTScore's precision and recall), and to its contract."""

from __future__ import annotations

import math
import sys
import warnings

import numpy as np
import ot
import pytest
import torch
from scipy.optimize import brentq
from transformers import AutoModel, AutoTokenizer

from moverkit._core import embedded_model_path

PRESET_EN = (0.23, 0.31)


@pytest.fixture(scope="module")
def metric(load_metric):
    return load_metric("lazy_emd")


@pytest.fixture(scope="module")
def module(metric):
    """The loaded module file itself, for its solver."""
    return sys.modules[type(metric).__module__]


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


def _pot_lazy_emd(cost, a, b, epsilon, reg_c, reg_r, reg_type="entropy"):
    """<C, P*> by POT's unbalanced Sinkhorn, run to convergence."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # POT warns that reg_type="entropy" overwrites c
        plan = ot.unbalanced.sinkhorn_unbalanced(
            a, b, cost, epsilon, (reg_c, reg_r), method="sinkhorn", reg_type=reg_type, numItermax=10**6, stopThr=1e-14
        )
    return plan


# --- random padded problems ------------------------------------------------------------------


def _random_problems(seed, count=24, largest=8, zero_mass=True):
    """Costs in [0, 2] (cosine distances' range) and masses summing to 1, some with a zero mass."""
    rng = np.random.default_rng(seed)
    problems = []
    for _ in range(count):
        n, m = rng.integers(1, largest + 1, size=2)
        cost = rng.uniform(0.0, 2.0, (n, m))
        a, b = rng.uniform(0.1, 1.0, n), rng.uniform(0.1, 1.0, m)
        if zero_mass and n > 2:
            a[0] = 0.0  # a token of weight 0 (IDF 0): its row must stay empty
        problems.append((cost, a / a.sum(), b / b.sum()))
    return problems


def _padded(problems, dtype=torch.float64):
    """One batch: costs padded with 1 (what zero vectors give), masses with 0."""
    n = max(c.shape[0] for c, _, _ in problems)
    m = max(c.shape[1] for c, _, _ in problems)
    cost = torch.ones(len(problems), n, m, dtype=dtype)
    a = torch.zeros(len(problems), n, dtype=dtype)
    b = torch.zeros(len(problems), m, dtype=dtype)
    for k, (c, ak, bk) in enumerate(problems):
        cost[k, : c.shape[0], : c.shape[1]] = torch.from_numpy(c)
        a[k, : len(ak)] = torch.from_numpy(ak)
        b[k, : len(bk)] = torch.from_numpy(bk)
    return cost, a, b


def _solve(module, problems, epsilon, reg_c, reg_r, dtype=torch.float64, **kwargs):
    """Plans of our batched solver, cropped to each problem, float64 numpy."""
    cost, a, b = _padded(problems, dtype)
    solved = module.unbalanced_sinkhorn(cost, a, b, epsilon, reg_c, reg_r, **kwargs)
    plan = module.transport_plan(cost, a, b, solved, epsilon)
    return [plan[k, : c.shape[0], : c.shape[1]].double().numpy() for k, (c, _, _) in enumerate(problems)], solved


SETTINGS = [
    (0.009, *PRESET_EN),  # the paper's "en" preset
    (0.009, 0.018, 0.97),  # "zh"
    (0.05, 0.5, 2.0),
    (0.05, math.inf, 0.3),  # a hard prediction marginal
    (0.1, 1.0, math.inf),  # a hard reference marginal
    (0.1, math.inf, math.inf),  # balanced entropic OT
    (0.01, 1e-9, 1e9),  # tiny and huge penalties
]


@pytest.mark.parametrize("epsilon, reg_c, reg_r", SETTINGS)
def test_batched_solver_equals_pot_sinkhorn_unbalanced_entropy(module, epsilon, reg_c, reg_r):
    problems = _random_problems(seed=0)
    ours, solved = _solve(module, problems, epsilon, reg_c, reg_r, tol=1e-12, max_iter=10**5)
    assert bool(solved.converged.all())
    for plan, (cost, a, b) in zip(ours, problems):
        theirs = _pot_lazy_emd(cost, a, b, epsilon, reg_c, reg_r)
        np.testing.assert_allclose(plan, theirs, rtol=0, atol=1e-10)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = ot.unbalanced.sinkhorn_unbalanced2(
                a, b, cost, epsilon, (reg_c, reg_r), reg_type="entropy", numItermax=10**6, stopThr=1e-14
            )
        assert abs(float((plan * cost).sum()) - float(value)) <= 1e-10
        if a[0] == 0:
            assert np.all(plan[0] == 0)  # no mass leaves a token of weight 0


def test_entropic_term_is_pots_entropy_not_its_kl(module):
    """The release iterates u = (a / K v)^(lambda / (lambda + eps)) with K = exp(-C / eps): the
    entropic term KL(P | 1 1^T), POT's reg_type="entropy". POT's default since 0.9.5,
    reg_type="kl", regularizes towards a b^T instead: a different plan, which we must not match."""
    problems = _random_problems(seed=1, count=6, zero_mass=False)
    ours, _ = _solve(module, problems, 0.009, *PRESET_EN, tol=1e-12)
    for plan, (cost, a, b) in zip(ours, problems):
        entropy = _pot_lazy_emd(cost, a, b, 0.009, *PRESET_EN, reg_type="entropy")
        kl = _pot_lazy_emd(cost, a, b, 0.009, *PRESET_EN, reg_type="kl")
        assert np.abs(plan - entropy).max() <= 1e-10
        assert np.abs(plan - kl).max() >= 1e-3 * plan.max()


def test_overrelaxation_safeguard_recovers_from_a_diverging_factor(module, monkeypatch):
    """With omega = 1.99 the over-relaxed updates overshoot; the safeguard must bring every
    problem back to plain Sinkhorn and still reach POT's plan."""
    monkeypatch.setattr(module, "overrelaxation", lambda phi_c, phi_r: 1.99)
    problems = _random_problems(seed=2)
    ours, solved = _solve(module, problems, 0.009, *PRESET_EN, tol=1e-12, max_iter=10**5)
    assert bool(solved.converged.all())
    for plan, (cost, a, b) in zip(ours, problems):
        assert np.abs(plan - _pot_lazy_emd(cost, a, b, 0.009, *PRESET_EN)).max() <= 1e-10


def test_float32_and_extreme_parameters_give_finite_plans(module):
    """eps = 0.009 on costs up to 2 puts exp(-C / eps) at e^-222, below float32's range: the
    stabilized kernels must still give POT's float64 answer to float32 precision."""
    problems = _random_problems(seed=3)
    ours32, solved = _solve(module, problems, 0.009, *PRESET_EN, dtype=torch.float32)
    assert bool(solved.converged.all())
    for plan, (cost, a, b) in zip(ours32, problems):
        assert np.isfinite(plan).all()
        assert abs(float((plan * cost).sum()) - float((_pot_lazy_emd(cost, a, b, 0.009, *PRESET_EN) * cost).sum())) <= 1e-4
    for epsilon, reg_c, reg_r in [(1e-5, 1e-12, 1e12), (1e-5, 1e12, 1e-12), (0.009, 0.0, 0.0), (1e-4, 1e-3, 1e3)]:
        for dtype in (torch.float32, torch.float64):
            plans, _ = _solve(module, problems, epsilon, reg_c, reg_r, dtype=dtype, max_iter=2000)
            assert all(np.isfinite(p).all() and (p >= 0).all() for p in plans)


# --- Theorem 2: one reference token ----------------------------------------------------------
#
# One reference token of mass 1, candidate masses w_i, costs c_i, plan p (a column). With the
# entropic term, stationarity of
#     sum_i c_i p_i + eps sum_i (p_i log p_i - p_i + 1) + lc sum_i (p_i log(p_i / w_i) - p_i + w_i)
#       + lr (s log s - s + 1),   s = sum_i p_i,
# in p_i reads c_i + eps log p_i + lc log(p_i / w_i) + lr log s = 0, so
#     p_i = w_i^(lc / (lc + eps)) exp(-(c_i + lr A) / (lc + eps)),   A = log s.
# Summing: s = Q exp(-lr A / (lc + eps)) with Q = sum_i w_i^(lc/(lc+eps)) exp(-c_i / (lc + eps)),
# so A = (lc + eps) log Q / (lc + eps + lr). At eps = 0 this is Theorem 2, Eq. (12)-(13):
#     p_i = exp(-c_i / lc - (lr / lc) A) w_i,   A = log sum_i p_i.


def _theorem_2_entropic(c, w, lc, lr, eps):
    phi = lc / (lc + eps)
    log_q = phi * np.log(w) - c / (lc + eps)
    big_a = (lc + eps) * np.logaddexp.reduce(log_q) / (lc + eps + lr)
    return np.exp(log_q - lr * big_a / (lc + eps))


def _theorem_2_paper(c, w, lc, lr):
    """Eq. (12)-(13) as printed: A solves A = log sum_i w_i exp(-c_i / lc - (lr / lc) A)."""
    big_a = brentq(lambda x: x - np.log(np.sum(w * np.exp(-c / lc - lr / lc * x))), -100, 100)
    return w * np.exp(-c / lc - lr / lc * big_a)


@pytest.mark.parametrize("lc, lr", [PRESET_EN, (0.018, 0.97), (0.5, 0.05)])
@pytest.mark.parametrize("eps", [0.009, 0.05])
def test_theorem_2_closed_form_with_the_entropic_term(module, lc, lr, eps):
    rng = np.random.default_rng(4)
    c, w = rng.uniform(0.05, 1.5, 7), rng.uniform(0.1, 1.0, 7)
    w /= w.sum()
    (plan,), _ = _solve(module, [(c[:, None], w, np.ones(1))], eps, lc, lr, tol=1e-12, max_iter=10**5)
    np.testing.assert_allclose(plan[:, 0], _theorem_2_entropic(c, w, lc, lr, eps), rtol=1e-9, atol=0)


def test_theorem_2_as_printed_is_the_small_epsilon_limit(module):
    rng = np.random.default_rng(5)
    c, w = rng.uniform(0.05, 1.5, 6), rng.uniform(0.1, 1.0, 6)
    w /= w.sum()
    paper = _theorem_2_paper(c, w, *PRESET_EN)
    gaps = []
    for eps in (1e-3, 1e-4):
        (plan,), _ = _solve(module, [(c[:, None], w, np.ones(1))], eps, *PRESET_EN, tol=1e-10, max_iter=10**5)
        gaps.append(np.abs(np.log(plan[:, 0] / paper)).max())
    # log p_i moves by O(eps): (phi - 1) log w_i and the 1 / (lc + eps) factors, about 20 eps here.
    assert gaps[1] <= 0.01
    assert gaps[0] / gaps[1] == pytest.approx(10, rel=0.2)


# --- the extreme penalties: EMD, precision and recall (Section 4) ------------------------------


def test_free_reference_marginal_is_a_softmin_per_prediction_token(module):
    """reg_r = 0 frees the reference side: g = 0, and f_i = eps (log a_i - LSE_j(-C_ij / eps)),
    so P_ij = a_i softmax_j(-C_ij / eps) (reg_c = inf), the entropic form of precision's argmax."""
    problems = _random_problems(seed=6)
    ours, _ = _solve(module, problems, 0.05, math.inf, 0.0)
    for plan, (cost, a, _) in zip(ours, problems):
        softmax = np.exp(-cost / 0.05) / np.exp(-cost / 0.05).sum(1, keepdims=True)
        np.testing.assert_allclose(plan, a[:, None] * softmax, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("eps", [1e-2, 1e-4])
def test_extreme_penalties_bound_one_minus_precision_and_recall(module, eps):
    """For each row, min_j c_ij <= <c_i, softmax(-c_i / eps)> <= min_j c_ij + eps log m (Gibbs'
    variational principle), so 0 <= lazy(inf, 0) - (1 - P) <= eps log m with P = sum_i a_i max_j S_ij."""
    for cost, a, b in _random_problems(seed=7, zero_mass=False):
        (p_plan,), _ = _solve(module, [(cost, a, b)], eps, math.inf, 0.0)
        (r_plan,), _ = _solve(module, [(cost, a, b)], eps, 0.0, math.inf)
        one_minus_p = float(a @ cost.min(1))
        one_minus_r = float(b @ cost.min(0))
        # 1e-9: the plan's exponent (f_i - C_ij) / eps carries float64 rounding amplified by 1 / eps
        assert -1e-9 <= float((p_plan * cost).sum()) - one_minus_p <= eps * math.log(cost.shape[1]) + 1e-9
        assert -1e-9 <= float((r_plan * cost).sum()) - one_minus_r <= eps * math.log(cost.shape[0]) + 1e-9


def _entropy(p):
    return float(-(p[p > 0] * np.log(p[p > 0])).sum())


def _emd_gap_bounds(plan, cost, a, b, eps):
    """With both marginals hard the plan is a coupling, so <C, P_eps> >= EMD; and since P_eps
    minimizes <C, P> - eps H(P) over couplings, <C, P_eps> - EMD <= eps (H(P_eps) - H(P_emd))."""
    emd_plan = ot.emd(a, b, cost)
    gap = float((plan * cost).sum()) - float((emd_plan * cost).sum())
    return gap, eps * (_entropy(plan) - _entropy(emd_plan))


@pytest.mark.parametrize("eps", [1e-2, 1e-3])
def test_hard_marginals_approach_emd2_from_above(module, eps):
    problems = _random_problems(seed=8, largest=6, zero_mass=False)
    ours, solved = _solve(module, problems, eps, math.inf, math.inf, tol=1e-10, max_iter=10**5)
    assert bool(solved.converged.all())
    for plan, (cost, a, b) in zip(ours, problems):
        np.testing.assert_allclose(plan.sum(1), a, atol=1e-9)
        gap, bound = _emd_gap_bounds(plan, cost, a, b, eps)
        assert abs(ot.emd2(a, b, cost) - float((ot.emd(a, b, cost) * cost).sum())) <= 1e-12
        assert -1e-9 <= gap <= bound + 1e-9
        assert bound <= eps * min(_entropy(a), _entropy(b)) + 1e-9


def test_hard_marginals_on_real_pairs_approach_emd2(metric, raw_vectors, pairs):
    """The same bounds on real pairs, at eps = 0.1: much smaller eps leaves a few pairs whose
    nearly-decoupled token groups make Sinkhorn crawl (see the card's limitations)."""
    predictions, references = pairs[0][:6], pairs[1][:6]
    eps = 0.1
    result = metric.compute(
        predictions=predictions, references=references, reg_c=math.inf, reg_r=math.inf, epsilon=eps,
        max_iter=20000, return_alignment=True,
    )
    for value, al, prediction, reference in zip(result["lazy_emd"], result["alignment"], predictions, references):
        cost, a, b = _cost(raw_vectors, prediction, reference)
        plan = np.array(al["plan"])
        np.testing.assert_allclose(plan.sum(0), b, atol=1e-6)
        gap, bound = _emd_gap_bounds(plan, cost, a, b, eps)
        assert abs(value - float((plan * cost).sum())) <= 1e-5
        assert -1e-5 <= gap <= bound + 1e-5


@pytest.fixture(scope="module")
def bertscore_with_alignment(load_metric, wmt_pairs):
    predictions, references = wmt_pairs[0][:16], wmt_pairs[1][:16]
    result = load_metric("centered_bertscore").compute(
        predictions=predictions, references=references, centering="none", return_alignment=True
    )
    return predictions, references, result


@pytest.mark.parametrize("side", ["precision", "recall"])
def test_extreme_penalties_give_centered_bertscore_precision_and_recall(metric, bertscore_with_alignment, side):
    """P = 1 - lazy_emd(inf, 0) and R = 1 - lazy_emd(0, inf), up to eps log L (see above).

    centered_bertscore keeps [CLS]/[SEP] as candidates for the max, as bert-score does; Lazy-EMD
    transports between word tokens only. So its value is >= our max over word tokens, equal where
    a word token wins every max. Its alignment (word tokens only) gives that word-only max."""
    predictions, references, bert = bertscore_with_alignment
    eps = 1e-4
    reg_c, reg_r = (math.inf, 0.0) if side == "precision" else (0.0, math.inf)
    result = metric.compute(predictions=predictions, references=references, reg_c=reg_c, reg_r=reg_r, epsilon=eps)
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


# --- the metric against POT on real pairs -----------------------------------------------------


def test_compute_equals_pot_per_pair_on_real_pairs(metric, raw_vectors, pairs):
    predictions, references = pairs
    ours = metric.compute(predictions=predictions, references=references)["lazy_emd"]  # lang="en"
    for value, prediction, reference in zip(ours, predictions, references):
        cost, a, b = _cost(raw_vectors, prediction, reference)
        assert abs(value - float((_pot_lazy_emd(cost, a, b, 0.009, *PRESET_EN) * cost).sum())) <= 1e-5


def test_idf_masses_are_normalized_idf_weights(metric, raw_vectors, pairs, module):
    from moverkit._core import IdfTable

    predictions, references = pairs
    tokenizer = AutoTokenizer.from_pretrained(embedded_model_path())
    ids = [tokenizer(r.strip(), add_special_tokens=False)["input_ids"] for r in references]
    table = IdfTable(ids)  # BERTScore's IDF over the references, for both sides
    ours = metric.compute(predictions=predictions, references=references, idf=True)["lazy_emd"]
    for value, prediction, reference in zip(ours, predictions, references):
        cost, _, _ = _cost(raw_vectors, prediction, reference)
        a = np.array([table[i] for i in tokenizer(prediction.strip(), add_special_tokens=False)["input_ids"]])
        b = np.array([table[i] for i in tokenizer(reference.strip(), add_special_tokens=False)["input_ids"]])
        expected = float((_pot_lazy_emd(cost, a / a.sum(), b / b.sum(), 0.009, *PRESET_EN) * cost).sum())
        assert abs(value - expected) <= 1e-5


# --- parameters ---------------------------------------------------------------------------------


def test_lang_presets_and_overrides(module, metric, tiny_model_path):
    def penalties(**kwargs):
        params = module.resolve_params(kwargs.pop("lang", "en"), kwargs.get("reg_c"), kwargs.get("reg_r"), 0.009, 10)
        return params["reg_c"], params["reg_r"]

    assert penalties() == (0.23, 0.31)  # Section 5.2: English
    assert penalties(lang="zh") == (0.018, 0.97)  # Chinese
    assert penalties(lang="de") == penalties(lang="other") == (0.009, 0.95)  # other target languages
    assert penalties(lang="zh", reg_c=0.23) == (0.23, 0.97)  # an explicit value wins
    assert penalties(reg_c=float("inf"), reg_r=0) == (math.inf, 0.0)
    texts = dict(predictions=["a cat sat on the mat", "hello"], references=["the cat sat", "hi there"])
    preset = metric.compute(**texts, lang="zh", model_type=tiny_model_path)
    explicit = metric.compute(**texts, reg_c=0.018, reg_r=0.97, model_type=tiny_model_path)
    assert preset["lazy_emd"] == explicit["lazy_emd"]
    assert preset["hashcode"] == explicit["hashcode"]
    assert "_no-idf_center=none_reg_c=0.018_reg_r=0.97_epsilon=0.009_version=" in preset["hashcode"]


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"reg_c": -0.1}, ValueError, "reg_c must be >= 0"),
        ({"reg_r": float("nan")}, ValueError, "reg_r must be >= 0"),
        ({"reg_c": "0.2"}, TypeError, "reg_c must be a number"),
        ({"reg_r": True}, TypeError, "reg_r must be a number"),
        ({"epsilon": 0.0}, ValueError, "epsilon must be a finite number > 0"),
        ({"epsilon": -0.01}, ValueError, "epsilon must be a finite number > 0"),
        ({"epsilon": float("nan")}, ValueError, "epsilon must be a finite number > 0"),
        ({"epsilon": float("inf")}, ValueError, "epsilon must be a finite number > 0"),
        ({"max_iter": 0}, ValueError, "max_iter must be an int >= 1"),
        ({"lang": None}, ValueError, "lang must be a language code"),
    ],
)
def test_invalid_parameters_are_clear_errors(metric, kwargs, error, message):
    with pytest.raises(error, match=message):
        metric.compute(predictions=["a cat"], references=["a dog"], **kwargs)


def test_non_convergence_warns_with_what_to_change(metric):
    with pytest.warns(RuntimeWarning, match="Raise max_iter, or raise epsilon"):
        result = metric.compute(
            predictions=["a b c d e f"], references=["g h i j k"], reg_c=math.inf, reg_r=math.inf, max_iter=3
        )
    assert math.isfinite(result["lazy_emd"][0])


def test_texts_whose_idf_weights_are_all_zero_warn_and_score_like_empty_ones(metric, tiny_model_path):
    # One reference: every token of it has df = N = 1, so IDF log((N+1)/(df+1)) = 0 for all of them.
    with pytest.warns(RuntimeWarning, match="zero total weight"):
        result = metric.compute(predictions=["a cat"], references=["a dog"], idf=True, model_type=tiny_model_path)
    assert result["lazy_emd"] == [1.0]


# --- contract -----------------------------------------------------------------------------------


def test_empty_one_token_and_identical_texts(metric):
    result = metric.compute(predictions=["", "dog", "   ", "dog", "the cat sat"], references=["a cat", "", "x", "dog", "the cat sat"])
    scores = result["lazy_emd"]
    assert scores[:3] == [1.0, 1.0, 1.0]  # no scored token on a side: the documented 1.0
    assert 0 <= scores[3] <= 1e-6  # one token each, cost 1 - cos(x, x) = 0 up to float32 rounding
    assert 0 <= scores[4] <= 1e-3  # identical texts: the entropic plan leaks a little mass off the diagonal
    one = metric.compute(predictions=["dog"], references=["cat"], reg_c=1e12, reg_r=1e-12, epsilon=1e-6)["lazy_emd"]
    assert all(math.isfinite(v) and v >= 0 for v in one)


def test_best_reference_is_the_lowest_distance(metric, pairs, tiny_model_path):
    predictions, references = pairs[0][:6], pairs[1][:6]
    others = [references[(i + 1) % 6] for i in range(6)]
    tiny = {"model_type": tiny_model_path}
    multi = metric.compute(predictions=predictions, references=[[o, r] for o, r in zip(others, references)], **tiny)
    own = metric.compute(predictions=predictions, references=references, **tiny)["lazy_emd"]
    other = metric.compute(predictions=predictions, references=others, **tiny)["lazy_emd"]
    np.testing.assert_allclose(multi["lazy_emd"], np.minimum(own, other), atol=1e-9)


def test_alignment_gives_tokens_cost_and_the_plan_behind_the_score(metric, raw_vectors):
    prediction, reference = "the cat sat on the mat", "a cat was sitting on the mat"
    result = metric.compute(predictions=[prediction], references=[reference], return_alignment=True)
    al = result["alignment"][0]
    assert al["prediction_tokens"] == ["the", "cat", "sat", "on", "the", "mat"]
    assert al["reference_tokens"] == ["a", "cat", "was", "sitting", "on", "the", "mat"]
    cost, plan = np.array(al["cost"]), np.array(al["plan"])
    np.testing.assert_allclose(cost, _cost(raw_vectors, prediction, reference)[0], atol=1e-5)
    assert plan.shape == cost.shape and (plan >= 0).all()
    assert abs(float((plan * cost).sum()) - result["lazy_emd"][0]) <= 1e-6
    assert plan[1, 1] == plan[1].max() and plan[5, 6] == plan[5].max()  # cat -> cat, mat -> mat


def test_same_numbers_on_any_batch_size_and_pair_order(metric, wmt_pairs, tiny_model_path):
    predictions, references = wmt_pairs[0][:40], wmt_pairs[1][:40]
    tiny = {"model_type": tiny_model_path}
    base = metric.compute(predictions=predictions, references=references, **tiny)["lazy_emd"]
    small = metric.compute(predictions=predictions, references=references, batch_size=3, **tiny)["lazy_emd"]
    reversed_ = metric.compute(predictions=predictions[::-1], references=references[::-1], **tiny)["lazy_emd"][::-1]
    np.testing.assert_allclose(small, base, atol=1e-6)
    np.testing.assert_allclose(reversed_, base, atol=1e-6)


def test_batch_centering_changes_the_costs_as_centered_vectors_do(metric, pairs):
    from moverkit._core import prepare_pairs

    predictions, references = pairs[0][:6], pairs[1][:6]
    result = metric.compute(predictions=predictions, references=references, centering="batch")
    assert "center=batch" in result["hashcode"]
    data = prepare_pairs(predictions, references, centering="batch")
    for k, value in enumerate(result["lazy_emd"]):
        pred, ref = data.pad_pairs(torch.tensor([k]))
        x = pred.vectors[0, pred.mask[0]].double().numpy()
        y = ref.vectors[0, ref.mask[0]].double().numpy()
        cost = 1 - x @ y.T
        a, b = np.full(len(x), 1 / len(x)), np.full(len(y), 1 / len(y))
        assert abs(value - float((_pot_lazy_emd(cost, a, b, 0.009, *PRESET_EN) * cost).sum())) <= 1e-5
