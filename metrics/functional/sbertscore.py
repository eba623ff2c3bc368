r"""sBERTScore (Sharma et al., 2023, Section 3 and Figure 1): BERTScore's greedy matching over
sentence embeddings instead of token embeddings.

Prediction and reference are split into sentences (pysbd), each distinct sentence is embedded
once by a sentence-transformers model, optionally centered (Chen et al., 2020, Section 5) and
scaled to unit length, and matched greedily in both directions:

.. math::

    S_{ij} = \cos(c_i, r_j), \qquad P = \frac{1}{q} \sum_i \max_j S_{ij}, \qquad
    R = \frac{1}{p} \sum_j \max_i S_{ij}, \qquad
    F_1 = \begin{cases} \frac{2PR}{P+R} & P, R > 0 \\ \min(P, R) & \text{otherwise} \end{cases}

with :math:`c_1..c_q` the prediction's sentence vectors and :math:`r_1..r_p` the reference's.
A text with no sentence (empty or white space) makes its pair score 0.
"""

from __future__ import annotations

import dataclasses
from contextlib import closing

from moverkit._core.base import warn_user
from moverkit._core.call import MetricCall, PreparedChunk, chunks
from moverkit._core.encoding import splitter_languages
from moverkit.functional.centered_bertscore import alignment, pair_scores
from moverkit.functional.signature import metric_function

OUTPUTS = ("precision", "recall", "f1")


@metric_function(languages=splitter_languages)
def sbertscore(call: MetricCall, *, prompt_name: str | None = None, prompt: str | None = None) -> dict:
    """Precision, recall and F1 of every prediction against its best reference (each maximised
    over the references on its own, as bert-score), and the ``hashcode``; with
    ``return_alignment``, the sentences and the cosine matrix of each prediction and its best
    reference (by F1). The arguments are those of ``moverkit.load("sbertscore").compute``; with
    ``rescale_with_baseline`` the three scores are rescaled by :func:`~moverkit._core.call.baseline.rescale`.

    Every sentence is embedded as ``SentenceTransformer.encode(prompt_name=..., prompt=...)``
    embeds it: ``prompt_name`` names one of the model's prompts, ``prompt`` is a text put before
    each sentence; neither: the model's default prompt, if it has one
    (:meth:`~moverkit._core.encoding.sentences.SentenceEncoder.with_prompt`). Either, given, is in
    the hashcode.

    It stands on the path of the token metrics with sentences for tokens
    (:func:`~moverkit._core.call.pairs.sentence_pair_data`) and scores them with centered_bertscore's
    greedy matching, every sentence a candidate of weight 1."""
    with closing(chunks(call)) as parts:
        return call.close([_scores(chunk, prompt_name, prompt) for chunk in parts])


def _scores(chunk: PreparedChunk, prompt_name: str | None, prompt: str | None) -> dict:
    """The result of a call (a sentence-level call is one chunk: :func:`~moverkit._core.call.streaming.chunks`),
    its sentences embedded with the prompt asked for."""
    chunk = dataclasses.replace(chunk, encoder=chunk.encoder.with_prompt(prompt_name, prompt))
    data = chunk.pairs()
    units = dict(zip(data.clouds.texts, data.clouds.units))
    warn_empty(chunk.texts.predictions, chunk.texts.pair_references, units, rescaled=chunk.rescaled)
    results, best = chunk.results(pair_scores(data), OUTPUTS, data, hash_params=prompt_params(prompt_name, prompt))
    if chunk.return_alignment:
        results["alignment"] = [sentence_alignment(data, int(k)) for k in best]
    return results


def prompt_params(prompt_name: str | None, prompt: str | None) -> dict:
    """The hashcode's parts of the prompt arguments given (none for neither: the model's default
    prompt is the model's): ``prompt_name=query``, ``prompt='query: '`` (quoted: its spaces show)."""
    params = {} if prompt_name is None else {"prompt_name": prompt_name}
    return params if prompt is None else {**params, "prompt": repr(prompt)}


def sentence_alignment(data, pair: int) -> dict:
    """The sentences of a pair and their cosine matrix (centered_bertscore's alignment of units)."""
    tokens = alignment(data, pair)
    return {
        "prediction_sentences": tokens["prediction_tokens"],
        "reference_sentences": tokens["reference_tokens"],
        "similarity": tokens["similarity"],
    }


def warn_empty(
    predictions: list[str], pair_references: list[str], split: dict[str, list[str]], *, rescaled: bool = False
) -> None:
    """One warning counting the predictions and (per pair) references that hold no sentence (whose
    pairs score 0, rescaled as any score when the call is)."""
    n_pred = sum(not split[p] for p in predictions)
    n_ref = sum(not split[r] for r in pair_references)
    if n_pred or n_ref:
        warn_user(
            f"{n_pred} prediction(s) and {n_ref} reference(s) hold no sentence (empty or white space); "
            "their pairs score 0.0" + (" before rescaling (the baseline's value of 0 after)" if rescaled else "")
        )
