"""Scoring a corpus on a Ray cluster: ``ray.data.Dataset.map_batches`` with one encoder per actor.

Needs the optional extra: ``pip install "moverkit[ray]"``. Each actor of the pool is one
:class:`RayScorer`: it loads the encoder once (in its constructor) and scores every batch Ray
sends it, by the same code as ``moverkit.map_scores`` (:class:`~moverkit._core.mapping.MapScores`).
A pair's score must not depend on which batch it landed in, so ``batch`` centering (the mean of
each batch) is refused: use ``corpus`` (a statistic fitted once with ``moverkit.fit_centering``)
or a per-text mode (``none``, ``dim``, ``sentence``)::

    import ray, moverkit
    from moverkit.ray import score_dataset

    stats = moverkit.fit_centering(reference_texts)
    ds = ray.data.read_parquet("s3://bucket/outputs/")
    scored = score_dataset(ds, "centered_bertscore", "hyp", "ref", concurrency=8,
                           centering="corpus", centering_stats=stats)
    scored.write_parquet("s3://bucket/scored/")
"""

from __future__ import annotations

import inspect

from ._core.mapping import MapScores


class RayScorer:
    """A callable class for ``map_batches``: adds the metric's per-example results as columns.

    ``metric`` is a moverkit metric name (or a loaded module); ``compute_kwargs`` are its
    ``compute`` arguments, with a batch-independent ``centering``."""

    def __init__(self, metric, predictions: str = "prediction", references: str = "reference", **compute_kwargs):
        from . import map_scores

        self.score: MapScores = map_scores(metric, predictions, references, **compute_kwargs)
        centering = compute_kwargs.get("centering", _default_centering(self.score))
        if centering == "batch":
            raise ValueError(
                "a Ray batch is an arbitrary slice of the corpus, so centering='batch' would make each score depend on "
                "its batch; pass centering='corpus' with centering_stats=moverkit.fit_centering(texts), or a per-text "
                "mode ('none', 'dim', 'sentence')"
            )
        self.hashcode = self.score.hashcode  # loads this actor's encoder once, before the first batch

    def __call__(self, batch: dict) -> dict:
        import numpy as np

        predictions = [str(p) for p in batch[self.score.predictions]]
        references = [r if isinstance(r, str) else [str(x) for x in r] for r in batch[self.score.references]]
        columns = self.score({self.score.predictions: predictions, self.score.references: references})
        out = dict(batch)
        for key, values in columns.items():
            column = np.empty(len(values), dtype=object)
            column[:] = values
            out[key] = column if key == "alignment" else np.asarray(values)
        return out


def score_dataset(
    dataset,
    metric,
    predictions: str = "prediction",
    references: str = "reference",
    *,
    concurrency: int = 1,
    batch_size: int = 256,
    num_gpus: float = 0,
    **compute_kwargs,
):
    """``dataset.map_batches`` with a pool of ``concurrency`` :class:`RayScorer` actors (each with
    ``num_gpus`` GPUs), ``batch_size`` rows per call; returns the lazy scored dataset."""
    return dataset.map_batches(
        RayScorer,
        fn_constructor_args=(metric, predictions, references),
        fn_constructor_kwargs=compute_kwargs,
        concurrency=concurrency,
        batch_size=batch_size,
        batch_format="numpy",
        num_gpus=num_gpus,
    )


def _default_centering(score: MapScores) -> str:
    return inspect.signature(score.function()).parameters["centering"].default
