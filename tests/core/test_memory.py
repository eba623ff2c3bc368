"""``moverkit.release()`` empties every process-wide store, each registered where it is defined:
the model registry, the cache of token clouds and sentence vectors, the fitted corpus means."""

from __future__ import annotations

from types import SimpleNamespace

import moverkit
from moverkit._core.base import environment
from moverkit._core.base.user_warnings import collected_warnings
from moverkit._core.centering import fit
from moverkit._core.encoding import cache, memory, models


def test_every_store_registers_the_function_release_calls():
    assert moverkit.release is memory.release
    assert {models.forget_models, cache._forget_cached, fit._forget_fitted} <= set(memory._EMPTIED)


def test_release_forgets_the_corpus_means_fitted_in_the_process(monkeypatch):
    """Issue 68: a corpus mean fitted for a model no statistic ships for outlived ``release()``;
    now the next call after it fits it again (or reads it from the folder it was kept in)."""
    monkeypatch.setenv(environment.CENTERING_CACHE_VARIABLE, "off")  # kept in memory only
    monkeypatch.setattr(fit, "_FITTED", {})
    fitted = []

    def fit_default(encoder, dtype):
        fitted.append(encoder.name)
        return SimpleNamespace(n_texts=1, digest=f"fit {len(fitted)}")

    monkeypatch.setattr(fit, "_fit_default", fit_default)
    encoder = SimpleNamespace(name="unshipped", layer=1, max_length=8, device="cpu")
    with collected_warnings():  # the notice that the mean was fitted
        first = fit.default_corpus_stats(encoder, "float32")
        assert fit.default_corpus_stats(encoder, "float32") is first and fitted == ["unshipped"]
        moverkit.release()
        assert not fit._FITTED
        again = fit.default_corpus_stats(encoder, "float32")
    assert again is not first and fitted == ["unshipped", "unshipped"]
