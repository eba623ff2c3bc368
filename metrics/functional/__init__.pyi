"""Type stub of moverkit.functional: the metric functions' whole signatures, for type checkers and
IDEs. Written by tests/functional_stubs.py from the functions themselves; do not edit."""

import os
from collections.abc import Mapping
from typing import TypedDict

import torch
from typing_extensions import Unpack

class SharedArguments(TypedDict, total=False):
    """The arguments every metric takes (defaults: moverkit._core.call.opening.open_call's)."""

    model_type: str | os.PathLike | None
    batch_size: int
    device: str | int | torch.device | None
    verbose: bool
    centering: str
    centering_stats: object
    lang: str
    dtype: str
    rescale_with_baseline: bool
    baseline_path: str | os.PathLike | None
    return_alignment: bool
    return_reference_index: bool

class TokenArguments(SharedArguments, total=False):
    """The shared arguments of the token-level metrics (all but sbertscore)."""

    num_layers: int | None
    max_length: int | None
    long_texts: str

def centered_bertscore(
    predictions,
    references,
    *,
    idf: bool | Mapping = False,
    use_fast_tokenizer: bool = False,
    nthreads: int = 4,
    all_layers: bool = False,
    settings=None,
    **shared: Unpack[TokenArguments],
) -> dict: ...
def lazy_emd(
    predictions,
    references,
    *,
    reg_c: float | None = None,
    reg_r: float | None = None,
    epsilon: float = 0.009,
    max_iter: int = 10000,
    idf: bool | dict = False,
    settings=None,
    **shared: Unpack[TokenArguments],
) -> dict: ...
def moverscore(
    predictions,
    references,
    *,
    version: str = "v2",
    variant: str | None = None,
    n_gram: int | None = None,
    aggregation: str | None = None,
    idf: bool | Mapping | None = None,
    prediction_idf: bool | Mapping | None = None,
    stop_words: list[str] | None = None,
    remove_subwords: bool | None = None,
    remove_punctuation: bool | None = None,
    cost: str | None = None,
    score_form: str | None = None,
    settings=None,
    **shared: Unpack[TokenArguments],
) -> dict: ...
def sbertscore(
    predictions,
    references,
    *,
    prompt_name: str | None = None,
    prompt: str | None = None,
    settings=None,
    **shared: Unpack[SharedArguments],
) -> dict: ...
def twmd(
    predictions,
    references,
    *,
    variant: str = "twmd",
    temperature: float | None = None,
    sinkhorn_iterations: int = 1,
    normalize: bool = True,
    settings=None,
    **shared: Unpack[TokenArguments],
) -> dict: ...

__all__ = ["centered_bertscore", "lazy_emd", "moverscore", "sbertscore", "twmd"]
