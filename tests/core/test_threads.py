"""A call's settings belong to the call (issue 60): threads that score at once, each with its own
settings (IDF, batch centering, long texts in windows, a small memory budget, the cache of a
comparison or a combination), each get the serial call's scores to the last bit and their own
warnings, no other thread's, and none waits forever.

Bit for bit is the claim because it is one machine and one process: a thread that saw another's
budget would run in other chunks, one that read another's cached clouds would get vectors
encoded in other batches, and both move the last digits (moverkit._core.encoding.cache)."""

from __future__ import annotations

import threading

import pytest

import moverkit
from moverkit import combination as combo
from moverkit._core.base import environment
from moverkit._core.base.environment import temporary_memory_budget
from moverkit._core.base.user_warnings import collected_warnings
from moverkit._core.call import streaming
from moverkit.functional import centered_bertscore, lazy_emd, moverscore, sbertscore, twmd

PREDICTIONS = [
    "the cat sat on the mat",
    "stocks fell sharply on monday after the report",
    "he went home early because he was tired",
    "a new law was passed by the parliament",
]
REFERENCES = [
    "a cat was sitting on the mat",
    "shares dropped on monday following the report",
    "he left for home early, being tired",
    "parliament passed a new law",
]
OTHER = ["a dog sat on a rug", "stocks rose on tuesday", "she stayed at work", "a bill was voted"]
LONG = " ".join(f"Sentence {i} of a long report about the weather." for i in range(8))  # 82 tokens: long for 32
SMALL_BUDGET = 128 * 2**10  # bytes: 28 tokens of the embedded model a chunk, so the call runs in chunks
COMBINATION = combo.Combination(("twmd", "chrF"), segment=combo.SegmentLevel((0.6, 40.0), (0.2, 15.0), (0.4, 0.1)))


def _in_small_budget():
    with temporary_memory_budget(SMALL_BUDGET):
        assert streaming.memory_budget() == SMALL_BUDGET
        scores = twmd(PREDICTIONS, REFERENCES, centering="batch")["twmd"]
        assert streaming.memory_budget() == SMALL_BUDGET  # whatever the other threads did meanwhile
    return scores


def _budget_seen():
    """Outside any block: never the other thread's small budget."""
    assert streaming.memory_budget() != SMALL_BUDGET
    scores = centered_bertscore(PREDICTIONS, REFERENCES, centering="batch")["f1"]
    assert streaming.memory_budget() != SMALL_BUDGET
    return scores


def _compare():
    result = moverkit.compare(
        REFERENCES, {"A": PREDICTIONS, "B": OTHER}, ["twmd", "centered_bertscore"], resamples=20, seed=0
    )
    return result.segments, result.systems


JOBS = {
    "centered_bertscore": lambda: centered_bertscore(PREDICTIONS, REFERENCES)["f1"],
    "centered_bertscore idf": lambda: centered_bertscore(PREDICTIONS, REFERENCES, idf=True)["f1"],
    "centered_bertscore batch": _budget_seen,
    "centered_bertscore truncated": lambda: centered_bertscore(PREDICTIONS, REFERENCES, max_length=8)["f1"],
    "twmd": lambda: twmd(PREDICTIONS, REFERENCES)["twmd"],
    "twmd small budget": _in_small_budget,
    "twmd window": lambda: twmd([LONG, *PREDICTIONS], [OTHER[0], *REFERENCES], max_length=32, long_texts="window")[
        "twmd"
    ],
    "twmd truncated": lambda: twmd([LONG, *PREDICTIONS], [OTHER[0], *REFERENCES], max_length=32)["twmd"],
    "moverscore": lambda: moverscore(PREDICTIONS, REFERENCES)["moverscore"],
    "moverscore idf off": lambda: moverscore(PREDICTIONS, REFERENCES, idf=False)["moverscore"],
    "lazy_emd": lambda: lazy_emd(PREDICTIONS, REFERENCES)["lazy_emd"],
    "lazy_emd idf": lambda: lazy_emd(PREDICTIONS, OTHER, idf=True)["lazy_emd"],
    "sbertscore": lambda: sbertscore(PREDICTIONS, REFERENCES)["f1"],
    "sbertscore batch": lambda: sbertscore(PREDICTIONS, OTHER, centering="batch")["f1"],
    "compare": _compare,
    "combination": lambda: combo.combined(PREDICTIONS, REFERENCES, COMBINATION)["combined"],
}


def _run(job):
    """The job's result and the warnings it gave, as (category, message) pairs in order."""
    with collected_warnings() as caught:
        result = job()
    return result, [(type(w), str(w)) for w in caught]


def test_threads_score_as_the_serial_calls_each_with_its_own_warnings():
    serial = {name: _run(job) for name, job in JOBS.items()}
    truncating = {name for name, (_, warned) in serial.items() if any("truncated" in m for _, m in warned)}
    assert truncating == {"centered_bertscore truncated", "twmd truncated"}
    assert serial["centered_bertscore truncated"][1] != serial["twmd truncated"][1]  # tell the two apart

    start = threading.Barrier(len(JOBS))
    got, errors = {}, {}

    def worker(name):
        try:
            start.wait(timeout=60)
            got[name] = _run(JOBS[name])
        except BaseException as error:  # reported below, with the job's name
            errors[name] = error

    threads = [threading.Thread(target=worker, args=(name,), name=name, daemon=True) for name in JOBS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not [t.name for t in threads if t.is_alive()], "threads still running: a deadlock"
    assert not errors, errors
    for name, (result, warned) in serial.items():
        assert got[name][0] == result, name  # floats compared with ==: bit for bit
        assert got[name][1] == warned, name  # its own warnings, and no other thread's


def test_collected_warnings_are_each_threads_own():
    """Two threads whose blocks overlap each gather their own warnings; outside a block a warning
    is warned as ever."""
    from moverkit._core.base.user_warnings import warn_user

    inside, warned, got = threading.Barrier(2), threading.Barrier(2), {}

    def worker(name):
        with collected_warnings() as caught:
            inside.wait(timeout=30)  # both blocks open
            warn_user(f"from {name}")
            warned.wait(timeout=30)  # both warned before either block closes
        got[name] = [str(w) for w in caught]

    threads = [threading.Thread(target=worker, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert got == {"a": ["from a"], "b": ["from b"]}
    with pytest.warns(moverkit.MoverkitWarning, match="outside"):
        warn_user("outside")


def test_fitting_one_encoders_statistic_blocks_only_the_threads_that_want_it(monkeypatch):
    """default_corpus_stats fits once per encoder: a thread wanting the one being fitted waits and
    takes it; a thread wanting another encoder's fits it meanwhile; no lock outlives the fits."""
    from types import SimpleNamespace

    from moverkit._core.centering import fit

    monkeypatch.setenv(environment.CENTERING_CACHE_VARIABLE, "off")
    monkeypatch.setattr(fit, "_FITTED", {})
    entered, release, fitted = threading.Event(), threading.Event(), []

    def slow_fit(encoder, dtype):
        fitted.append(encoder.name)
        if encoder.name == "slow":
            entered.set()
            assert release.wait(timeout=30)
        return SimpleNamespace(n_texts=1, digest=encoder.name)

    monkeypatch.setattr(fit, "_fit_default", slow_fit)
    encoders = {name: SimpleNamespace(name=name, layer=1, max_length=8, device="cpu") for name in ("slow", "other")}
    got = {}

    def want(name, key):
        with collected_warnings():
            got[key] = fit.default_corpus_stats(encoders[name], "float32")

    first = threading.Thread(target=want, args=("slow", "first"))
    first.start()
    assert entered.wait(timeout=30)
    same = threading.Thread(target=want, args=("slow", "same"))
    other = threading.Thread(target=want, args=("other", "other"))
    same.start()
    other.start()
    other.join(timeout=30)
    assert got["other"].digest == "other" and "same" not in got  # fitted while "slow" still is
    release.set()
    for thread in (first, same):
        thread.join(timeout=30)
    assert got["same"] is got["first"] and fitted == ["slow", "other"]
    assert not fit._FITTING
