"""Scoring a corpus on a Ray cluster: ``ray.data.Dataset.map_batches`` with one encoder per actor.

Needs the optional extra: ``pip install "moverkit[ray]"``. Each actor of the pool is one
:class:`RayScorer`: it loads the encoder once (in its constructor) and scores every batch Ray
sends it, by the same code as ``moverkit.map_scores`` (:class:`~moverkit.integrations.dataset_map.MapScores`),
a slice door (:mod:`moverkit.integrations.adapter`): a pair's score must not depend on which
batch it landed in, so the batch-independent defaults apply (moverscore's IDF off unless a table
is given) and a batch-dependent setting (``centering="batch"``, the mean of each batch;
``idf=True``) is refused, with the message every slice door gives, before any model loads. Use
``corpus`` (the default of centered_bertscore and twmd, with the statistic shipped for the
embedded model, or one fitted once with ``moverkit.fit_centering`` for another model or domain)
or a per-text mode (``none``, ``dim``, ``sentence``)::

    import ray, moverkit
    from moverkit.ray import score_dataset

    ds = ray.data.read_parquet("s3://bucket/outputs/")
    scored = score_dataset(ds, "centered_bertscore", "hyp", "ref", concurrency=8)  # the shipped corpus mean
    # another model: centering_stats=moverkit.fit_centering(reference_texts, model_type=...)
    scored.write_parquet("s3://bucket/scored/")
"""

from __future__ import annotations

from moverkit.integrations.dataset_map import MapScores, map_scores


class RayScorer:
    """A callable class for ``map_batches``: adds the metric's per-example results as columns.

    ``metric`` is a moverkit metric name (or a loaded module); ``compute_kwargs`` are its
    ``compute`` arguments, checked as :func:`moverkit.map_scores` checks them (the module doc)."""

    def __init__(self, metric, predictions: str = "prediction", references: str = "reference", **compute_kwargs):
        self.score: MapScores = map_scores(metric, predictions, references, **compute_kwargs)
        self.hashcode = self.score.hashcode  # loads this actor's encoder once, before the first batch

    def __call__(self, batch):
        """``batch`` (a dict of numpy arrays, as :func:`score_dataset` asks for, or a pandas
        ``DataFrame`` or a pyarrow ``Table``) with the result columns added, in the same format.
        The two columns are checked as ``compute`` checks its inputs, the error naming the column
        and the row: a null (``None``, NaN, ``NA``) or a number is refused, never made text."""
        return with_columns(batch, self.score(batch))


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
    ``num_gpus`` GPUs), ``batch_size`` rows per call; returns the lazy scored dataset.
    ``concurrency`` is a number of actors, or ``(min, max)`` (or ``(min, max, initial)``) for an
    autoscaling pool."""
    return dataset.map_batches(
        RayScorer,
        fn_constructor_args=(metric, predictions, references),
        fn_constructor_kwargs=compute_kwargs,
        batch_size=batch_size,
        batch_format="numpy",
        num_gpus=num_gpus,
        **actor_pool(concurrency),
    )


def actor_pool(concurrency) -> dict:
    """The ``map_batches`` argument for a pool of ``concurrency`` actors: ``compute=ActorPoolStrategy``
    from Ray 2.51, which deprecated ``concurrency=`` (and logs so on every call); ``concurrency=``
    before, where ``compute=`` was the deprecated one. A size that is not a positive int (or a
    tuple of 2 or 3 of them) is an error naming ``concurrency``."""
    import ray

    sizes = concurrency if isinstance(concurrency, tuple) else (concurrency,)
    if not 1 <= len(sizes) <= 3 or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in sizes):
        raise ValueError(f"concurrency must be a number of actors >= 1, or (min, max[, initial]); got {concurrency!r}")

    if ray_version(ray.__version__) < (2, 51):
        return {"concurrency": concurrency}
    from ray.data import ActorPoolStrategy

    if isinstance(concurrency, tuple):
        return {"compute": ActorPoolStrategy(**dict(zip(("min_size", "max_size", "initial_size"), concurrency)))}
    return {"compute": ActorPoolStrategy(size=concurrency)}


def ray_version(version: str) -> tuple[int, int]:
    """``(major, minor)`` of a Ray version string (``"2.51.1"``, ``"3.0.0.dev0"``)."""
    major, minor = (version.split(".") + ["0"])[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


def with_columns(batch, columns: dict):
    """``batch`` with ``columns`` (one list of values each) added, in the batch's own format:
    a dict of numpy arrays, a pandas ``DataFrame`` or a pyarrow ``Table``."""
    import numpy as np

    def array(key, values):
        if key != "alignment":
            return np.asarray(values)
        column = np.empty(len(values), dtype=object)  # one (ragged) alignment per row
        column[:] = values
        return column

    if hasattr(batch, "append_column"):  # pyarrow
        import pyarrow as pa

        for key, values in columns.items():
            index = batch.schema.get_field_index(key)
            column = pa.array(values if key == "alignment" else np.asarray(values))  # an empty score column: float64
            batch = batch.set_column(index, key, column) if index >= 0 else batch.append_column(key, column)
        return batch
    if hasattr(batch, "assign"):  # pandas
        return batch.assign(**{key: array(key, values) for key, values in columns.items()})
    out = dict(batch)
    for key, values in columns.items():
        out[key] = array(key, values)
    return out


__all__ = ["RayScorer", "score_dataset"]
