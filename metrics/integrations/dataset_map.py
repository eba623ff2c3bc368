"""Scores as ``datasets.Dataset.map`` columns: :class:`MapScores`, what ``moverkit.map_scores`` returns.

``map`` pickles its function into ``num_proc`` worker processes and hashes it into the result's
fingerprint (the cache key), so the function holds only plain values: the metric's name, the two
column names and the compute arguments. It calls ``moverkit.functional.<name>`` (the math of the
evaluate module's ``compute``, without its cache files, which cannot be pickled), loading the
encoder lazily in whichever process runs it.

Fork safety: ``datasets`` forks its workers. A parent that already ran torch on the CPU (any
``compute`` or ``fit_centering``) leaves an OpenMP thread pool that does not exist in the child,
whose first parallel region then waits for it forever. As in torch's own DataLoader workers, a
call in a process other than the one that made the function first sets torch to one thread
(each worker is one of ``num_proc`` processes anyway).

Rows: each value of the two columns is checked as ``compute`` checks it, the error naming the
column and the row (``None``, NaN or a number is refused, never scored as the text ``str()``
makes of it), in every form a batch comes: ``datasets``' rows and batches, and the numpy,
pandas and pyarrow batches of Ray Data (:mod:`moverkit.ray`).
"""

from __future__ import annotations

import os

from moverkit._core.base import check_text
from moverkit.integrations import adapter
from moverkit.integrations.rows import MissingColumn, reference_row, result_columns

_PARENT_PID = os.getpid()
"""The process that imported moverkit; a call anywhere else runs in a (forked) worker."""

ROW_EXTRAS = ("return_alignment", "return_reference_index")
"""What ``map_scores`` takes beside the scores: per-row columns (each pair's alignment, the index
of its best reference)."""


class MapScores:
    """``fn(batch)`` or ``fn(batch, rank)`` for ``Dataset.map``: adds the metric's per-example
    results (``batched=True``: lists; ``batched=False``: one value each) as columns.

    ``hashcode`` is the result's hashcode (it does not depend on the texts): the one of the last
    call in this process, or, when the calls ran in ``num_proc`` workers, one computed here on
    first access (a one-pair call). ``kwargs`` are the compute arguments, checked here as a slice
    door's (:func:`map_scores`), the batch-independent defaults applied. Each call runs where
    :func:`moverkit.integrations.adapter.call_arguments` puts a slice door's call unless ``device``
    was given: with ``with_rank=True``, worker ``k`` on GPU ``k mod n_gpus``; else the current
    CUDA device; else the CPU (in batches of 16 texts unless ``batch_size`` was given).
    """

    def __init__(self, metric: str, predictions: str, references: str, kwargs: dict):
        self.metric = metric
        self.predictions = predictions
        self.references = references
        self.kwargs = adapter.slice_arguments(metric, kwargs, "map_scores", also=ROW_EXTRAS)
        self._hashcode = None

    def __getstate__(self) -> dict:
        # The fingerprint (datasets hashes this state) and the pickled copy in each worker hold
        # the arguments only: a hashcode read in between must not change the cache key.
        return {key: value for key, value in self.__dict__.items() if key != "_hashcode"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._hashcode = None

    def __call__(self, batch: dict, rank: int | None = None) -> dict:
        if os.getpid() != _PARENT_PID:
            import torch

            torch.set_num_threads(1)
        predictions, references, single = self.texts(batch)
        result = adapter.score(self.metric, predictions, references, adapter.call_arguments(self.kwargs, rank))
        self._hashcode = result["hashcode"]
        columns = result_columns(result)
        return {key: value[0] for key, value in columns.items()} if single else columns

    def texts(self, batch) -> tuple[list[str], list, bool]:
        """The predictions and the references of ``batch`` as checked lists, and whether it was
        one row (``batched=False``), or an error naming the column and the row."""
        names = column_names(batch)
        for column, role in ((self.predictions, "predictions"), (self.references, "references")):
            if column not in names:
                raise MissingColumn(
                    f"the dataset has no column {column!r} for the {role}; its columns are "
                    f"{', '.join(map(repr, names)) or 'none'} (pass the column names as predictions= and references=)"
                )
        predictions, references = batch[self.predictions], batch[self.references]
        single = is_row(batch, predictions)
        if single:
            predictions, references = [predictions], [references]
        else:
            predictions, references = as_list(predictions), as_list(references)

        def where(column: str, i: int) -> str:
            return f"column {column!r} of this row" if single else f"column {column!r} at row {i} of this batch"

        predictions = [check_text(value, where(self.predictions, i)) for i, value in enumerate(predictions)]
        references = [reference_row(value, where(self.references, i)) for i, value in enumerate(references)]
        return predictions, references, single

    def map(self, dataset, **map_kwargs):
        """``dataset.map(self, **map_kwargs)``, and the same (empty) score columns when
        ``dataset`` has no rows: ``Dataset.map`` returns an empty dataset as it is, without
        calling its function, so the columns would depend on the row count. Their types are
        those of a one-pair call (which loads the encoder, as :attr:`hashcode` does)."""
        if len(dataset) > 0:
            return dataset.map(self, **map_kwargs)
        import datasets

        self.texts({name: [] for name in dataset.column_names})  # a missing column: the same error
        features = map_kwargs.get("features")
        if features is None:  # map's own inference, from the values of a one-pair call
            remove = map_kwargs.get("remove_columns") or []
            features = dataset.remove_columns([remove] if isinstance(remove, str) else list(remove)).features
            probe = self({self.predictions: ["hashcode"], self.references: ["hashcode"]})
            features.update(datasets.Dataset.from_dict(probe).features)  # a column already there is replaced in place
        # Built anew: cast and add_column go through map, which returns an empty dataset as it is.
        empty = datasets.Dataset.from_dict({name: [] for name in features}, features=features, split=dataset.split)
        return empty.with_format(dataset.format["type"], **dataset.format["format_kwargs"])

    @property
    def hashcode(self) -> str:
        if self._hashcode is None:  # no call in this process yet: a one-pair call keeps its hashcode
            self({self.predictions: ["hashcode"], self.references: ["hashcode"]})
        return self._hashcode

    def __repr__(self) -> str:
        return f"map_scores({self.metric!r}, {self.predictions!r}, {self.references!r}, **{self.kwargs!r})"


def column_names(batch) -> list[str]:
    """The columns of a batch: a mapping (``datasets``' rows and batches, Ray's numpy batches),
    a pandas ``DataFrame`` or a pyarrow ``Table``."""
    names = getattr(batch, "column_names", None)  # pyarrow
    return list(batch.keys() if names is None else names)


def is_row(batch, predictions) -> bool:
    """Whether ``batch`` is one row (``Dataset.map(batched=False)``) rather than a batch: a
    ``datasets`` row says so by its type; otherwise a batch's column is a list or an array,
    whereas a row's value is a string, or a bad value (None, a number) to refuse as that row's."""
    kind = type(batch).__name__
    if kind in ("LazyRow", "LazyBatch"):
        return kind == "LazyRow"
    if isinstance(predictions, (str, bytes)):
        return True
    if hasattr(predictions, "to_pylist") or isinstance(predictions, (list, tuple)):  # pyarrow, Python
        return False
    return not (hasattr(predictions, "tolist") and getattr(predictions, "ndim", 0) >= 1)  # numpy, pandas


def as_list(values) -> list:
    """A column of a batch as a list of its values, each as it is (no conversion to text)."""
    if hasattr(values, "to_pylist"):  # pyarrow: a null is None
        return values.to_pylist()
    if hasattr(values, "tolist"):  # numpy, pandas: a null is None, NaN or NA
        return values.tolist()
    return list(values)


def map_scores(metric, predictions: str = "prediction", references: str = "reference", **compute_kwargs):
    """A function for ``datasets.Dataset.map`` that adds the metric's per-example scores as
    columns (``hashcode``, one string per call, is the function's ``.hashcode`` instead: ``map``
    needs one value per row)::

        score = moverkit.map_scores(metric, "hyp", "ref", centering="corpus", centering_stats=stats)
        ds = ds.map(score, batched=True, batch_size=256, num_proc=2)
        score.hashcode

    ``metric`` is a loaded moverkit metric or its name; ``compute_kwargs`` are its ``compute``
    arguments (checked here by name, ``return_alignment`` and ``return_reference_index`` among them). The function is picklable and fork-safe (``num_proc`` works after any ``compute``
    or ``fit_centering`` in the parent), has a stable fingerprint (an identical second ``map``
    loads from the datasets cache), works with ``batched=False``, and with ``with_rank=True``
    puts worker ``k`` on GPU ``k`` (see :class:`moverkit.integrations.dataset_map.MapScores`).

    Each map batch is one call on a slice of the dataset, so ``map_scores`` is a slice door
    (:mod:`moverkit.integrations.adapter`): a row scores the same whatever ``batch_size`` and
    ``num_proc``. It takes the batch-independent defaults (moverscore's IDF off unless a table is
    given; the hashcode says ``no-idf``) and refuses, here and before any model loads, a setting
    that would make a score depend on its map batch (``centering="batch"``, ``idf=True``, the same
    from a settings file): use ``centering="corpus"`` (a statistic fitted once), or score the
    whole corpus in one call (the function, ``moverkit.load``).

    An empty dataset gets no columns from ``ds.map`` (datasets returns it unchanged without calling
    the function); ``score.map(ds, **map_kwargs)`` is ``ds.map(score, **map_kwargs)`` that also
    gives an empty dataset the score columns, so the schema does not depend on the row count.
    Bad rows (``None``, NaN, numbers) are refused with the column and row named.
    """
    from moverkit.facts.specs import SPECS  # the registry's names, without loading torch here

    name = metric if isinstance(metric, str) else getattr(metric, "name", None)
    if name not in SPECS:
        raise ValueError(f"map_scores takes a moverkit metric or one of {', '.join(SPECS)}, got {metric!r}")
    return MapScores(name, predictions, references, compute_kwargs)
