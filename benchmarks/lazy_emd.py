"""Bench rows of lazy_emd: Lazy-EMD with the paper's English penalties, raw and batch-centered, and
three races: its whole ``compute`` against the authors' release itself (``Lazy-EMD/score.py``, from a
snapshot the user points to), its batched solver against a one-POT-call-per-pair way of solving, and
its ``compute`` against centered_bertscore's (the encoder being the floor of both)."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import types
import warnings

import numpy as np
import ot
import torch

from benchmarks import CorrelationRow, SpeedSuite
from benchmarks._shared import PeerUnavailable, metric_run, over_the_encoder
from moverkit._core import DEFAULT_MODEL, MODEL_LAYERS, embedded_model_path, prepare_pairs
from moverkit._core.centering import Centering
from moverkit._core.encoding import EncoderRequest
from moverkit.functional.lazy_emd import pair_scores, pairs_with_mass

CORRELATION_ROWS = [
    CorrelationRow("Lazy-EMD (en preset)", "lazy_emd", "lazy_emd", {"lang": "en"}),
    CorrelationRow(
        "Lazy-EMD-b (en preset, batch centering)", "lazy_emd", "lazy_emd", {"lang": "en", "centering": "batch"}
    ),
]

# The release's settings (Lazy-EMD/score.py, Scorer._lazy_emd): epsilon 0.009, the "en" penalties,
# POT-style generalized Sinkhorn ('sinkhorn' method) with numItermax=200000 and stopThr 1e-6.
RELEASE = {"epsilon": 0.009, "reg_c": 0.23, "reg_r": 0.31, "max_iter": 200_000}
AGREEMENT = 1e-4  # the two solvers' scores must agree this closely on every pair

# --- the release itself: the authors' Lazy-EMD/score.py, loaded at run time -------------------
#
# A peer is the peer's own code run here. The release is not a package: the user points
# LAZY_EMD_PATH at the Lazy-EMD folder (score.py and unbalanced.py) of a snapshot of
# github.com/Beastlyprime/lazy_emd (nothing of it is copied into moverkit). Its unbalanced.py is
# loaded as it is. Its score.py gets one text shim, checked to apply exactly once: its
# ``if __name__ == '__main__':`` demo, which does not parse (a "." before a comment), is cut off.
# Its ``import unbalanced`` finds that module, placed in ``sys.modules`` only while score.py loads,
# and bert_score's layer table learns the embedded model's folder (``model2layers[path] = 6``, a
# run-time setting) so that ``Scorer(path)`` loads the embedded model. It then runs as its demo
# does: per pair, ``get_sim(reference, [prediction])`` (bert_score's ``sent_encode`` with the
# model's slow tokenizer, one unbatched forward pass per text), then
# ``score('lazyemd', sims, reg_c=0.23, reg_r=0.31)`` (its own ``sinkhorn_unbalanced``: epsilon
# 0.009, up to 200,000 iterations, the error printed every 10 iterations, sent to os.devnull).

RELEASE_ENV = "LAZY_EMD_PATH"
"""Environment variable: the ``Lazy-EMD`` folder (``score.py``, ``unbalanced.py``) of a snapshot of
the authors' repository."""

_RELEASE_DEMO = "\nif __name__ == '__main__':\n"


def _module_from(name: str, path: str, source: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = path
    exec(compile(source, path, "exec"), module.__dict__)
    return module


def load_release(path: str | None = None):
    """The release's ``Scorer`` on the embedded model, from the folder ``path`` (default:
    ``$LAZY_EMD_PATH``), loaded as described above; :class:`~benchmarks._shared.PeerUnavailable`
    when absent or not the expected code. It needs ``bert_score`` (``pip install bert-score``)."""
    path = path or os.environ.get(RELEASE_ENV)
    files = {name: os.path.join(path, f"{name}.py") for name in ("score", "unbalanced")} if path else {}
    if not files or not all(os.path.isfile(file) for file in files.values()):
        raise PeerUnavailable(
            f"the release's Lazy-EMD/score.py and unbalanced.py are needed: set {RELEASE_ENV} to the Lazy-EMD "
            "folder of a snapshot of github.com/Beastlyprime/lazy_emd (and pip install bert-score)"
        )
    sources = {}
    for name, file in files.items():
        with open(file, encoding="utf-8") as f:
            sources[name] = f.read()
    if sources["score"].count(_RELEASE_DEMO) != 1 or "class Scorer" not in sources["score"]:
        raise PeerUnavailable(
            f"{files['score']} is not the expected score.py: the shim for {_RELEASE_DEMO!r} does not apply"
        )
    import bert_score.utils  # the release imports it; fail here with its name if absent

    unbalanced = _module_from("unbalanced", files["unbalanced"], sources["unbalanced"])
    previous = sys.modules.get("unbalanced")
    sys.modules["unbalanced"] = unbalanced
    try:
        score = _module_from("lazy_emd_score", files["score"], sources["score"].split(_RELEASE_DEMO)[0])
    finally:
        if previous is None:
            del sys.modules["unbalanced"]
        else:
            sys.modules["unbalanced"] = previous
    model = embedded_model_path()
    bert_score.utils.model2layers[model] = MODEL_LAYERS[DEFAULT_MODEL]
    return score.Scorer(model)


def release_scores(scorer, predictions: list[str], references: list[str]) -> list[float]:
    """Lazy-EMD ("en" penalties) by the release's own code, pair by pair as its demo runs it."""
    scores = []
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        for prediction, reference in zip(predictions, references):
            _, _, sims = scorer.get_sim(reference, [prediction])
            scores += scorer.score("lazyemd", sims, reg_c=RELEASE["reg_c"], reg_r=RELEASE["reg_r"])[0]
    return scores


def release_itself(predictions, references):
    """The authors' Lazy-EMD/score.py (see :func:`load_release`), warm after one small call."""
    scorer = load_release()
    release_scores(scorer, predictions[:2], references[:2])
    return lambda: release_scores(scorer, predictions, references)


@functools.lru_cache(maxsize=1)
def _embedded(predictions: tuple, references: tuple):
    """The pairs encoded once (no centering, uniform weights), shared by the solver contenders."""
    return prepare_pairs(list(predictions), list(references), EncoderRequest(), Centering("none"))


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
        "lazy_emd-solver",
        "lazy_emd transport solves on precomputed embeddings vs per-pair POT calls "
        "(a re-creation of the release's way, not its code)",
        {
            ours: batched_solver(agreement, ours),
            ours_one: batched_solver(agreement, ours_one, threads=1),
            pot: pot_per_pair(agreement, pot),
        },
        [(pot, ours, ">= 20"), (pot, ours_one, ">= 20")],
    )


RELEASE_PAIRS = 200
"""Pairs of the race against the release: it encodes text by text and solves pair by pair in NumPy
(34 ms a pair here with one torch thread, 0.5 s with two threads on a busy machine), so the
benchmark's first 200 pairs, not all."""


def release_inputs(predictions, references):
    """The first :data:`RELEASE_PAIRS` pairs."""
    return predictions[:RELEASE_PAIRS], references[:RELEASE_PAIRS]


SPEED_SUITES = [
    SpeedSuite(
        "lazy_emd-release",
        f"lazy_emd compute vs the release itself (Lazy-EMD/score.py), first {RELEASE_PAIRS} pairs",
        {
            "lazy_emd (en preset, none)": metric_run("lazy_emd", lang="en"),
            "release Lazy-EMD score.py (its own code)": release_itself,
        },
        [("release Lazy-EMD score.py (its own code)", "lazy_emd (en preset, none)", None)],
        inputs=release_inputs,
    ),
    solver_suite(Agreement()),
    over_the_encoder(
        "lazy_emd",
        "lazy_emd compute vs centered_bertscore compute",
        {
            "centered_bertscore (none)": metric_run("centered_bertscore", centering="none"),
            "lazy_emd (en preset, none)": metric_run("lazy_emd", lang="en"),
        },
        [("lazy_emd (en preset, none)", "centered_bertscore (none)", "<= 1.15")],
        "lazy_emd (en preset, none)",
    ),
]
