"""Bench rows of lazy_emd: Lazy-EMD with the paper's English penalties, raw and batch-centered, and
two races: its batched solver against the release's one-POT-call-per-pair way of solving, and its
whole ``compute`` against centered_bertscore's (the encoder being the floor of both)."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import ot
import torch

from moverkit._core import prepare_pairs
from moverkit.functional.lazy_emd import pair_scores, pairs_with_mass

from . import CorrelationRow, SpeedSuite
from ._peers import encoder_floor, metric_run

CORRELATION_ROWS = [
    CorrelationRow("Lazy-EMD (en preset)", "lazy_emd", "lazy_emd", {"lang": "en"}, higher_is_better=False),
    CorrelationRow(
        "Lazy-EMD-b (en preset, batch centering)",
        "lazy_emd",
        "lazy_emd",
        {"lang": "en", "centering": "batch"},
        higher_is_better=False,
    ),
]

# The release's settings (Lazy-EMD/score.py, Scorer._lazy_emd): epsilon 0.009, the "en" penalties,
# POT-style generalized Sinkhorn ('sinkhorn' method) with numItermax=200000 and stopThr 1e-6.
RELEASE = {"epsilon": 0.009, "reg_c": 0.23, "reg_r": 0.31, "max_iter": 200_000}
AGREEMENT = 1e-4  # the two solvers' scores must agree this closely on every pair


@functools.lru_cache(maxsize=1)
def _embedded(predictions: tuple, references: tuple):
    """The pairs encoded once (no centering, uniform weights), shared by the solver contenders."""
    return prepare_pairs(list(predictions), list(references), centering="none")


class Agreement:
    """Scores each solver contender produced; each must agree with the first one recorded to
    AGREEMENT (``gaps``: the largest difference per contender)."""

    def __init__(self):
        self.scores, self.gaps = {}, {}

    def record(self, label: str, scores: np.ndarray) -> None:
        self.scores[label] = scores
        first_label, first = next(iter(self.scores.items()))
        self.gaps[label] = max(self.gaps.get(label, 0.0), float(np.max(np.abs(scores - first))))
        if self.gaps[label] > AGREEMENT:
            raise AssertionError(f"{label} differs from {first_label} by {self.gaps[label]:.2e} > {AGREEMENT:g}")


def batched_solver(agreement: Agreement, label: str, threads: int | None = None):
    """lazy_emd's solver alone on precomputed embeddings: costs, batched Sinkhorn, <C, P*> of every
    pair (``threads``: torch's intra-op threads while timed; None keeps the default)."""

    def factory(predictions, references):
        data = _embedded(tuple(predictions), tuple(references))
        live = pairs_with_mass(data)

        def run():
            default = torch.get_num_threads()
            torch.set_num_threads(threads or default)
            try:
                scores = pair_scores(data, live, RELEASE)
            finally:
                torch.set_num_threads(default)
            agreement.record(label, scores.cpu().numpy())

        return run

    return factory


def pot_per_pair(agreement: Agreement, label: str):
    """The release's way of solving (Lazy-EMD/score.py, re-created here): per pair, the cosine
    cost matrix of all tokens, [CLS]/[SEP] included with mass 0, masses uniform over the other
    tokens, one POT ``sinkhorn_unbalanced`` call (reg_type="entropy", the release's iteration),
    <C, P> summed in NumPy."""

    def factory(predictions, references):
        data = _embedded(tuple(predictions), tuple(references))
        problems = []
        for k in range(len(data.pred_index)):
            pred, ref = data.pad_pairs(torch.tensor([k]), with_special=True)
            x = pred.vectors[0, pred.mask[0]].cpu()
            y = ref.vectors[0, ref.mask[0]].cpu()
            a = pred.weights[0, pred.mask[0]].double().cpu().numpy()
            b = ref.weights[0, ref.mask[0]].double().cpu().numpy()
            problems.append((x, y, a / max(a.sum(), 1e-300), b / max(b.sum(), 1e-300)))

        def solve(x, y, a, b):
            if not a.any() or not b.any():
                return 1.0  # the module's documented score for a side with no token
            cost = (1.0 - x @ y.T).double().numpy()
            plan = ot.unbalanced.sinkhorn_unbalanced(
                a,
                b,
                cost,
                RELEASE["epsilon"],
                (RELEASE["reg_c"], RELEASE["reg_r"]),
                method="sinkhorn",
                reg_type="entropy",
                numItermax=RELEASE["max_iter"],
                stopThr=1e-6,
            )
            return float(np.sum(plan * cost))

        def run():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # POT warns on every call that "entropy" overwrites c
                scores = np.array([solve(*problem) for problem in problems])
            agreement.record(label, scores)

        return run

    return factory


def solver_suite(agreement: Agreement) -> SpeedSuite:
    """Our solver (default threads, and one thread like NumPy's POT) against POT per pair."""
    ours, ours_one, pot = (
        "lazy_emd batched solver",
        "lazy_emd batched solver (1 thread)",
        "POT sinkhorn_unbalanced per pair",
    )
    return SpeedSuite(
        "lazy_emd transport solves on precomputed embeddings vs per-pair POT calls "
        "(a re-creation of the release's way, not its code)",
        {
            ours: batched_solver(agreement, ours),
            ours_one: batched_solver(agreement, ours_one, threads=1),
            pot: pot_per_pair(agreement, pot),
        },
        [(pot, ours, ">= 20"), (pot, ours_one, ">= 20")],
    )


SPEED_SUITES = [
    solver_suite(Agreement()),
    SpeedSuite(
        "lazy_emd compute vs centered_bertscore compute",
        {
            "encoder alone": encoder_floor,
            "centered_bertscore (none)": metric_run("centered_bertscore", centering="none"),
            "lazy_emd (en preset, none)": metric_run("lazy_emd", lang="en"),
        },
        [
            ("lazy_emd (en preset, none)", "centered_bertscore (none)", "<= 1.15"),
            ("lazy_emd (en preset, none)", "encoder alone", None),
        ],
    ),
]
