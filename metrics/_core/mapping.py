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
"""

from __future__ import annotations

import os

_PARENT_PID = os.getpid()
"""The process that imported moverkit; a call anywhere else runs in a (forked) worker."""


class MapScores:
    """``fn(batch)`` or ``fn(batch, rank)`` for ``Dataset.map``: adds the metric's per-example
    results (``batched=True``: lists; ``batched=False``: one value each) as columns.

    ``hashcode`` is the result's hashcode (it does not depend on the texts): the one of the last
    call in this process, or, when the calls ran in ``num_proc`` workers, one computed here on
    first access (a one-pair call). With ``with_rank=True``, worker ``k`` runs on GPU
    ``k mod n_gpus`` (on the CPU when there is none), unless ``device`` was given.
    """

    def __init__(self, metric: str, predictions: str, references: str, kwargs: dict):
        self.metric = metric
        self.predictions = predictions
        self.references = references
        self.kwargs = dict(kwargs)
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
        kwargs = dict(self.kwargs)
        if rank is not None and "device" not in kwargs:
            kwargs["device"] = rank_device(rank)
        predictions, references = batch[self.predictions], batch[self.references]
        single = isinstance(predictions, str)  # batched=False: one row
        if single:
            predictions, references = [predictions], [references]
        result = self.function()(predictions, references, **kwargs)
        self._hashcode = result["hashcode"]
        columns = {key: value for key, value in result.items() if isinstance(value, list)}
        return {key: value[0] for key, value in columns.items()} if single else columns

    def function(self):
        from .. import functional

        return getattr(functional, self.metric)

    @property
    def hashcode(self) -> str:
        if self._hashcode is None:
            self._hashcode = self.function()(["hashcode"], ["hashcode"], **self.kwargs)["hashcode"]
        return self._hashcode

    def __repr__(self) -> str:
        return f"map_scores({self.metric!r}, {self.predictions!r}, {self.references!r}, **{self.kwargs!r})"


def rank_device(rank: int) -> str:
    """The device of ``datasets.map`` worker ``rank``: GPU ``rank mod n_gpus``, else the CPU."""
    import torch

    return f"cuda:{rank % torch.cuda.device_count()}" if torch.cuda.is_available() else "cpu"
