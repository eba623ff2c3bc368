r"""``moverkit bench shuffled``: does each metric prefer the true reference to another pair's?

A sanity check of the reference's role. For :math:`N` pairs :math:`(p_i, r_i)` drawn at random
from a judgments TSV (pairs with distinct reference texts, so a shuffled reference is always a
different text), each metric with its default arguments scores every prediction twice: against its
true reference :math:`r_i` and against :math:`r_{\sigma(i)}`, :math:`\sigma` a derangement (a
permutation with no fixed point) drawn with a fixed seed. The report gives, per metric, the share

.. math::

    \frac{1}{N} \left| \{ i : s(p_i, r_i) \succ s(p_i, r_{\sigma(i)}) \} \right|,

where :math:`\succ` is "strictly greater" for a similarity and "strictly less" for a distance (a
tie counts against the metric). A metric blind to the reference scores about 0.5; 1.0 means the
true reference always wins. The output scored and its direction are the metric's headline
correlation row: its spec's ``main`` and ``higher_is_better`` (:mod:`moverkit.facts.specs`).

Both calls of a metric score the same multiset of texts (the shuffled references are a permutation
of the true ones), so a ``batch`` centering statistic is the same in both. The cache of token
clouds and sentence vectors is on meanwhile, so each text is encoded once per encoder: the
shuffled call, and the metrics that read the same layer, take the first call's vectors (a score
moves in its last digits only: :mod:`moverkit._core.encoding.cache`).
"""

from __future__ import annotations

import random

from benchmarks._shared import command_parser, judgments
from moverkit.facts.specs import SPECS
from moverkit.formats.options import emit, positive_int
from moverkit.judgments import Judgments

HELP = "share of pairs where each metric scores the true reference above another pair's"

PAIRS = 400
"""Pairs drawn by default."""


def derangement(n: int, seed: int = 0) -> list[int]:
    """A uniformly random permutation of ``range(n)`` with no fixed point (rejection sampling:
    about :math:`e` shuffles on average), reproducible from ``seed``."""
    if n < 2:
        raise ValueError(f"a derangement needs at least 2 items, got {n}")
    rng = random.Random(seed)
    order = list(range(n))
    while True:
        rng.shuffle(order)
        if all(i != j for i, j in enumerate(order)):
            return order


def sample_pairs(data: Judgments, n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """``n`` (prediction, reference) pairs drawn at random from ``data``, no two with the same
    reference text (the first row of each reference is the candidate)."""
    first: dict[str, int] = {}
    for i, reference in enumerate(data.references):
        first.setdefault(reference, i)
    if not 2 <= n <= len(first):
        raise ValueError(f"--pairs {n}: give 2 to {len(first)} (the data's distinct references)")
    rows = sorted(random.Random(seed).sample(list(first.values()), n))
    return [data.predictions[i] for i in rows], [data.references[i] for i in rows]


def run(data: Judgments, pairs: int = PAIRS, seed: int = 0, metrics=tuple(SPECS)) -> list[dict]:
    """One row per metric: ``{"metric", "output", "higher_is_better", "wins", "pairs", "share"}``,
    ``wins`` the pairs where the true reference scores strictly better (see the module doc)."""
    from moverkit._core.encoding import cache_enabled
    from moverkit.integrations.registry import REGISTRY

    predictions, references = sample_pairs(data, pairs, seed)
    shuffled = [references[j] for j in derangement(pairs, seed)]
    rows = []
    with cache_enabled():
        for metric in metrics:
            output, score, higher = SPECS[metric].main, REGISTRY[metric].function, SPECS[metric].higher_is_better
            true = score(predictions, references)[output]
            other = score(predictions, shuffled)[output]
            sign = 1.0 if higher else -1.0
            wins = sum(sign * (t - o) > 0 for t, o in zip(true, other))
            rows.append(
                {
                    "metric": metric,
                    "output": output,
                    "higher_is_better": higher,
                    "wins": wins,
                    "pairs": pairs,
                    "share": wins / pairs,
                }
            )
    return rows


def format_table(rows: list[dict]) -> str:
    """Markdown, one line per metric: the share in percent and as wins / pairs."""
    lines = ["| metric | output | better | true reference wins |", "|---|---|---|---:|"]
    for row in rows:
        better = "higher" if row["higher_is_better"] else "lower (a distance)"
        share = f"{100 * row['share']:.1f}% ({row['wins']}/{row['pairs']})"
        lines.append(f"| {row['metric']} | {row['output']} | {better} | {share} |")
    return "\n".join(lines)


def register(which) -> None:
    parser = command_parser(which, "shuffled", HELP, command)
    parser.add_argument("--pairs", type=positive_int, default=400, help="pairs drawn at random (default: 400)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the draw and of the shuffle (default: 0)")


def command(args) -> int:
    rows = run(judgments(args), pairs=args.pairs, seed=args.seed)
    header = (
        f"True reference against another pair's (a derangement, seed {args.seed}) on {args.pairs} pairs of "
        f"{args.data.name}, each metric with its default arguments"
    )
    return emit(f"{header}\n\n{format_table(rows)}", args.out)
