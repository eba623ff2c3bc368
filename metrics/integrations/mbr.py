r"""Minimum Bayes risk (MBR) selection with any of the five metrics: :func:`mbr_select`.

For each source, its candidates :math:`h_1..h_N` (samples of a model) are scored against its
pseudo-references :math:`y_1..y_M` (by default the candidates themselves), and the candidate with
the best expected utility is chosen (Kumar and Byrne, 2004; Eikema and Aziz, 2020):

.. math::

    U_{ij} = u(h_i, y_j), \qquad \bar U_i = \frac{1}{M} \sum_{j=1}^{M} U_{ij}, \qquad
    \hat h = h_{\arg\max_i \bar U_i}

with :math:`u` the metric's output (F1 for the BERTScore pair); for lazy_emd, a distance, the
expected distance is minimised instead. The mean runs over every pseudo-reference, the candidate
itself among them when the pseudo-references are the candidates, as mbrs computes it
(``expectation`` over the whole hypotheses-by-references matrix): a self-pair scores the best
value for four metrics and lazy_emd's entropic cost of a text against itself (0 within one call),
the same for every candidate. A text drawn twice is two samples, so a duplicated pseudo-reference
weighs twice; duplicated candidates get the same expected utility, and the first of tied
candidates is chosen: expected utilities within :data:`~moverkit.facts.ties.TIE_TOLERANCE` of
each other are a tie (two candidates of a symmetric utility are equal in exact arithmetic, and the
last bits of their float32 scores fall one way or the other by the CPU), so every CPU chooses the
same candidate.

Exact MBR embeds each distinct text once (N encoder rows for N candidates, not N^2) and scores
each distinct pair of texts once. twmd, moverscore and lazy_emd (and the two others under
rescaling or a settings file) score every pair of every source in one call of
``moverkit.functional.<metric>``. centered_bertscore and sbertscore take their one greedy matcher
over one block of cosines per source, every candidate's units against every pseudo-reference's
(:func:`matched_block`), which spares the metric's per-pair padding of vectors: the same scores
(a test holds both to the plain loop of the function), in less time.

Reference aggregation (``aggregate=True``; Vamvas and Sennrich, 2024, "Linear-time Minimum Bayes
Risk Decoding with Reference Aggregation", Section 3, as their COMET aggregation averages sentence
embeddings) for centered_bertscore and sbertscore: each text becomes one embedding :math:`e`, the
mean of its unit vectors (its centered tokens, special tokens left out; sbertscore's sentences)
scaled to unit length, the pseudo-references become the mean of theirs, and

.. math::

    \bar U_i^{\mathrm{agg}} = e_i \cdot \frac{1}{M} \sum_j e_j = \frac{1}{M} \sum_j \cos(e_i, e_j)

is the expected cosine of the embeddings, exact for that utility and linear in :math:`N + M`.
For texts of one sentence each, sbertscore's F1 is that cosine, so the aggregate is exact MBR;
for token clouds it replaces BERTScore's greedy matching by the cosine of mean-pooled
embeddings, an approximation whose agreement with exact MBR ``moverkit bench rewards`` measures
(docs/generation.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch

from moverkit._core import PairOptions, check_idf, checks, f_measure, greedy_match, pair_hash, self_cosine_one
from moverkit._core.base import check_texts, from_numpy, kept_random_state
from moverkit._core.call import chunks
from moverkit.facts.specs import SPECS
from moverkit.facts.ties import first_best
from moverkit.functional.signature import SHARED
from moverkit.integrations import adapter
from moverkit.integrations.registry import Metric, get


def mbr_select(
    candidates: Sequence[Sequence[str]],
    *,
    metric: str = "centered_bertscore",
    pseudo_references: Sequence[Sequence[str]] | None = None,
    output: str | None = None,
    aggregate: bool = False,
    return_matrix: bool = False,
    **metric_arguments,
) -> dict:
    """MBR selection over ``candidates``, one list of candidate texts per source (lists may differ
    in length)::

        chosen = moverkit.mbr_select([["a cat sat", "the cat sat", "a dog ran"]], metric="twmd")
        chosen["text"][0], chosen["expected_score"][0]

    Returns a dict of per-source lists: ``index`` (the chosen candidate's position), ``text``,
    ``expected_score`` (its expected utility :math:`\\bar U_i`, the mean of the metric's
    ``output`` over the pseudo-references; an expected distance for lazy_emd, whose lowest is
    chosen), ``expected_scores`` (every candidate's, for reranking), with ``return_matrix`` the
    ``matrix`` :math:`U` (candidates x pseudo-references, as lists; not with ``aggregate``), and
    the ``hashcode`` of the scores. See the module doc for the equations and conventions.

    ``pseudo_references``: one list per source (default: the candidates). ``output``: the
    metric's output to use (default: its main one, F1 for the BERTScore pair). ``aggregate``:
    reference aggregation, linear time, for centered_bertscore and sbertscore (taking the encoder
    and centering arguments and ``idf`` only). ``metric_arguments``: those of ``moverkit.functional.<metric>``.
    A selection scores a slice of the candidates a model makes, so it is a slice door
    (:mod:`moverkit.integrations.adapter`): moverscore's IDF is off unless a table is given, and
    settings under which a pair's score depends on the other pairs of the call
    (``centering="batch"``, IDF fitted over the call) are refused, with the message every slice
    door gives.

    A source with no candidate (or no pseudo-reference) is an error naming it, and so is a
    candidate that is not a string; an empty candidate is scored as any text (the metric's empty
    score against each pseudo-reference); one candidate is chosen, with its expected utility.
    """

    arguments = adapter.slice_arguments(metric, metric_arguments, "mbr_select")
    registered = get(metric)
    output = adapter.checked_output(metric, output)
    sources = checked_lists(candidates, "candidates")
    references = sources if pseudo_references is None else checked_lists(pseudo_references, "pseudo_references")
    if len(references) != len(sources):
        raise ValueError(
            f"{len(sources)} sources of candidates but {len(references)} of pseudo_references; give one list per source"
        )
    if checks.boolean("aggregate", aggregate):
        if checks.boolean("return_matrix", return_matrix):
            raise ValueError("aggregate=True scores no candidate-by-reference matrix; leave return_matrix out")
        if output not in (None, registered.spec.main):
            raise ValueError(
                f"aggregate=True scores the mean cosine, not one of the outputs; leave output={output!r} out"
            )
        expected, hashcode = aggregated_utilities(registered, sources, references, arguments)
        matrices = None
    elif registered.spec.matcher == "greedy" and not unmatched_arguments(arguments):
        matrices, hashcode = matched_matrices(registered, sources, references, output, arguments)
        expected = [matrix.mean(axis=1) for matrix in matrices]
    else:
        matrices, hashcode = utility_matrices(metric, sources, references, output, arguments)
        expected = [matrix.mean(axis=1) for matrix in matrices]
    chosen = [first_best(scores, registered.spec.higher_is_better) for scores in expected]
    result = {
        "index": chosen,
        "text": [texts[i] for texts, i in zip(sources, chosen)],
        "expected_score": [float(scores[i]) for scores, i in zip(expected, chosen)],
        "expected_scores": [scores.tolist() for scores in expected],
    }
    if return_matrix:
        result["matrix"] = [matrix.tolist() for matrix in matrices]
    result["hashcode"] = hashcode
    return result


def checked_lists(lists, name: str) -> list[list[str]]:
    """One non-empty list of strings per source, or an error naming the source and the item."""

    lists = from_numpy(lists)
    if isinstance(lists, str) or not isinstance(lists, Sequence):
        raise TypeError(f"{name} must be a list with one list of texts per source, got {type(lists).__name__}")
    checked = []
    for s, texts in enumerate(lists):
        if isinstance(from_numpy(texts), str):
            raise TypeError(f"{name}[{s}] is a string; give one list of texts per source ([[...], ...])")
        checked.append(check_texts(texts, f"{name}[{s}]"))
        if not checked[-1]:
            raise ValueError(f"{name}[{s}] is an empty list; each source needs at least one text")
    return checked


def utility_matrices(
    metric: str, sources, references, output: str | None, arguments: dict
) -> tuple[list[np.ndarray], str]:
    """Every source's candidates-by-pseudo-references matrix :math:`U` of ``output``, from one call
    of ``moverkit.functional.<metric>`` on each source's distinct pairs of texts, and the call's
    hashcode."""

    predictions, pair_references = [], []
    for texts, refs in zip(sources, references):
        rows, columns = list(dict.fromkeys(texts)), list(dict.fromkeys(refs))
        predictions += [row for row in rows for _ in columns]
        pair_references += [column for _ in rows for column in columns]
    result = adapter.score(metric, predictions, pair_references, arguments)
    values = np.asarray(adapter.output_scores(result, output), dtype=np.float64)
    matrices, at = [], 0
    for texts, refs in zip(sources, references):
        n, m = len(set(texts)), len(set(refs))
        matrices.append(expanded(values[at : at + n * m].reshape(n, m), texts, refs))
        at += n * m
    return matrices, result["hashcode"]


def expanded(block: np.ndarray, texts: list[str], refs: list[str]) -> np.ndarray:
    """The (len(texts), len(refs)) matrix of ``block``, the matrix of their distinct texts in the
    order of first occurrence: a duplicated text takes its row (or column)."""
    row = {t: i for i, t in enumerate(dict.fromkeys(texts))}
    column = {t: j for j, t in enumerate(dict.fromkeys(refs))}
    return block[np.ix_([row[t] for t in texts], [column[r] for r in refs])]


GROUP_TEXTS = 2048
"""The most distinct texts (of whole sources) prepared in one call of the matching and aggregated
paths: their clouds are held at once."""
PAIR_ELEMENTS = 1 << 24
"""Entries of one (candidates x pseudo-references x units x units) cosine block (64 MiB in float32)."""


def unmatched_arguments(arguments: dict) -> list[str]:
    """The arguments of ``arguments`` that the matching and aggregated paths do not take: they
    take the encoder's and the centering's, and ``idf`` (a table, or False)."""

    taken = {p.name for p in SHARED} - {"rescale_with_baseline", "baseline_path"}
    return sorted(set(arguments) - taken - {"idf"})


def source_groups(sources, references) -> Iterator[tuple[list[int], list[str]]]:
    """Consecutive sources with their distinct texts, at most :data:`GROUP_TEXTS` texts a group
    (a source with more stays whole)."""
    group, texts = [], {}
    for s, (candidates, refs) in enumerate(zip(sources, references)):
        new = dict.fromkeys([*candidates, *refs])
        if group and len(texts.keys() | new.keys()) > GROUP_TEXTS:
            yield group, list(texts)
            group, texts = [], {}
        group.append(s)
        texts.update(new)
    if group or not sources:  # no source: one empty group, for the hashcode
        yield group, list(texts)


def prepared_clouds(metric: Metric, texts: list[str], arguments: dict):
    """The prepared unit clouds of ``texts`` (a :class:`~moverkit._core.PairData`: the metric's
    encoder, centering and weights, each text embedded once) and the hashcode of its scores. The
    call is opened by the metric's own front door (``function.open_call``: every check the metric
    makes of its shared arguments, its default centering and level), and scored here in blocks."""

    shared = dict(arguments)
    idf = check_idf(shared.pop("idf", False))
    call = metric.function.open_call(texts, texts, **shared)
    with call.running(), kept_random_state():
        (chunk,) = chunks(call, idf=idf, one_chunk=True)
        data = chunk.pairs(PairOptions(idf=idf))
    call.truncations.close()  # the call's one truncation warning, as a metric's close gives it
    return data, pair_hash(metric.name, data)


def matched_matrices(metric: Metric, sources, references, output: str, arguments: dict) -> tuple[list[np.ndarray], str]:
    """Every source's matrix :math:`U` of ``output`` for centered_bertscore and sbertscore: the
    greedy match of their one matcher (:func:`~moverkit._core.greedy_match`) on the cosines of
    every candidate's units with every pseudo-reference's, computed as one block per source
    instead of pair by pair (what makes exact MBR cheaper than the metric's paired batches)."""
    matrices = [None] * len(sources)
    for group, texts in source_groups(sources, references):
        data, hashcode = prepared_clouds(metric, texts, arguments)
        position = {t: i for i, t in enumerate(data.clouds.texts)}
        for s in group:
            rows = [position[t] for t in dict.fromkeys(sources[s])]
            columns = [position[t] for t in dict.fromkeys(references[s])]
            matrices[s] = expanded(matched_block(data, rows, columns, output), sources[s], references[s])
    return matrices, hashcode


def matched_block(data, rows: list[int], columns: list[int], output: str) -> np.ndarray:
    r"""(len(rows), len(columns)) ``output`` (precision, recall or F1) of text ``rows[i]`` against
    text ``columns[j]`` of ``data``: the metric's pair scores
    (:func:`moverkit.functional.centered_bertscore.pair_scores`) of all those pairs at once, the
    cosines of a block of candidates with every pseudo-reference in one product.

    When the pseudo-references are the candidates and a text weighs its units the same on both
    sides (no IDF table, or one table for both), the block of :math:`(h_j, h_i)` is the transpose
    of the block of :math:`(h_i, h_j)`, so :math:`P(h_j, h_i) = R(h_i, h_j)` and
    :math:`R(h_j, h_i) = P(h_i, h_j)`: each chunk of rows is matched against the columns from its
    own first row on, and the pairs below are read from the transposes (56% of the cosines at 64
    candidates; equal to matching them, up to the summation order of the product's last bits)."""

    n_rows, n_columns = len(rows), len(columns)
    pred = data.pad(torch.tensor(rows), data.pred_weights, with_special=True)
    ref = data.pad(torch.tensor(columns), data.ref_weights, with_special=True)
    step = max(1, PAIR_ELEMENTS // (n_columns * pred.mask.shape[1] * ref.mask.shape[1]))
    symmetric = rows == columns and torch.equal(data.pred_weights, data.ref_weights)
    if symmetric:
        step = min(step, -(-n_rows // SYMMETRIC_CHUNKS))
    # on the clouds' device: one read to the host per block, not two per chunk
    precision = torch.zeros(n_rows, n_columns, dtype=torch.float64, device=pred.vectors.device)
    recall = torch.zeros_like(precision)
    for at in range(0, n_rows, step):
        part, stop = slice(at, at + step), min(at + step, n_rows)
        first = at if symmetric else 0  # the first column matched
        p, r = matched_pairs(pred, ref, rows[part], columns[first:], part, first)
        precision[part, first:], recall[part, first:] = p, r
        if symmetric:  # the pairs (h_j, h_i) below this chunk, j past it
            precision[stop:, part] = r[:, stop - at :].T
            recall[stop:, part] = p[:, stop - at :].T
    chosen = {"precision": precision, "recall": recall}.get(output)
    return (f_measure(precision, recall) if chosen is None else chosen).cpu().numpy()


SYMMETRIC_CHUNKS = 8
"""Chunks of rows of a symmetric block (:func:`matched_block`): with ``k`` chunks, each matched
from its own first column on, :math:`(k + 1) / 2k` of the pairs are matched (56% at 8)."""


def matched_pairs(pred, ref, rows: list[int], columns: list[int], row_part: slice, first: int):
    """Precision and recall (float64, on the clouds' device), each (len(rows), len(columns)), of the padded
    candidates ``pred[row_part]`` against the padded pseudo-references ``ref[first:]`` (``rows``
    and ``columns`` their texts: a text against itself has the cosine 1 with each of its units).
    The cosines are one (rows x columns x units x units) product, laid out pair by pair for the
    matcher and clamped in place; the self-cosines and the greedy match each take a copy."""

    k, m = len(rows), len(columns)
    # i = candidates, j = pseudo-references, p and r = their units, d = embedding dimension
    sim = torch.einsum("ipd,jrd->ijpr", pred.vectors[row_part], ref.vectors[first:]).reshape(
        k * m, *pred.mask.shape[1:], ref.mask.shape[1]
    )
    sim.clamp_(-1.0, 1.0)
    pred_mask, ref_mask = grid(pred.mask[row_part], ref.mask[first:])
    pred_weights, ref_weights = grid(pred.weights[row_part], ref.weights[first:])
    same = (torch.tensor(rows)[:, None] == torch.tensor(columns)[None, :]).flatten().to(sim.device)
    sim = self_cosine_one(sim, same, pred_mask)
    precision, recall = greedy_match(sim, pred_mask, ref_mask, pred_weights, ref_weights)
    return precision.double().view(k, m), recall.double().view(k, m)


def grid(left, right):
    """``left`` (k, ...) and ``right`` (m, ...) repeated to the k * m pairs of every row of one
    with every row of the other: two tensors (k * m, ...), row-major."""
    k, m = len(left), len(right)
    return (
        left[:, None].expand(k, m, *left.shape[1:]).flatten(0, 1),
        right[None].expand(k, m, *right.shape[1:]).flatten(0, 1),
    )


def aggregated_utilities(metric: Metric, sources, references, arguments: dict) -> tuple[list[np.ndarray], str]:
    r"""Every source's :math:`\bar U^{\mathrm{agg}}` (the module doc) and the hashcode of the
    vectors: each distinct text embedded once through the metric's own path (its encoder,
    centering and weights: the candidates' as predictions, the pseudo-references' as references)."""
    if metric.spec.matcher != "greedy":
        greedy = " or ".join(name for name, spec in SPECS.items() if spec.matcher == "greedy")
        raise ValueError(f"aggregate=True takes {greedy} (cosines of unit vectors), not {metric.name}")
    if unmatched_arguments(arguments):
        raise ValueError(
            "aggregate=True takes the encoder and centering arguments and idf only, not "
            + ", ".join(unmatched_arguments(arguments))
        )
    expected = [None] * len(sources)
    for group, texts in source_groups(sources, references):
        data, hashcode = prepared_clouds(metric, texts, arguments)
        as_candidates = dict(zip(data.clouds.texts, mean_vectors(data.clouds, data.pred_weights)))
        as_references = dict(zip(data.clouds.texts, mean_vectors(data.clouds, data.ref_weights)))
        for s in group:
            reference = np.mean([as_references[r] for r in references[s]], axis=0)
            expected[s] = np.stack([as_candidates[t] for t in sources[s]]) @ reference
    return expected, f"{hashcode}|mbr=aggregate"


def mean_vectors(clouds, weights) -> np.ndarray:
    r"""(n_texts, D) float64: each text's embedding :math:`e`, the mean of its unit vectors
    weighted by ``weights`` (0 for special tokens), scaled to unit length; 0 for a text with no
    weighted unit (empty)."""

    index, vectors = clouds.text_index(), clouds.vectors.double()
    sums = torch.zeros(len(clouds.texts), vectors.shape[1], dtype=torch.float64, device=vectors.device)
    sums.index_add_(0, index, vectors * weights.double()[:, None])
    return torch.nn.functional.normalize(sums, dim=1).cpu().numpy()


__all__ = ["mbr_select"]
