"""One warm call, followed from ``compute`` to the result with a profiler (issue 41): it goes down
the layers and never back up, checks each argument once, and touches few files."""

from __future__ import annotations

import collections
import contextlib
import sys
from pathlib import Path

import pytest

import moverkit
from moverkit._core.encoding import cache_enabled

PACKAGE = str(Path(moverkit.__file__).resolve().parent) + "/"
MAX_FILES = 26  # issue 45: tokenizing left encoder.py for its own room, tokens.py; issue 52: the Rust copy of
# the tokenizer (rust_tokens.py) left tokens.py, and the call's close and hashcode left opening.py (closing.py),
# while the environment's snapshot joined hardware.py and the pair options pairs.py; issue 60: the square
# mask a model takes (what the model is, read from it) left encoder.py for architecture.py; issue 61: a
# prediction's best reference reads the tie width from facts/ties.py, the one formula of it; issue 68, one
# job per room: the call's environment left hardware.py (environment.py), MoverScore's pair options left
# pairs.py (pair_options.py), the model registry (models.py) and the token clouds (clouds.py) left encoder.py
"""moverkit files one warm centered_bertscore call runs code of (23 before issue 41); each left is
a step of its own (docs/architecture.md, "The path of one call")."""
CHECKS = ("call_texts", "check_idf", "check_max_length", "encoder_for", "open_call", "check_centering")
"""Functions that check or resolve what the call was given: each runs once per call. (The evaluate
module also checks the texts, with ``check_inputs``, in ``add_batch``: before evaluate stores them
in Arrow, which fails with no word of the bad item, and to store one layout of references.)"""


def follow(call):
    """``call()`` under a profiler: the moverkit functions it ran (file, name) with their counts,
    and the calls from a file of ``_core`` into a file of a room above it."""
    ran, upward = collections.Counter(), []

    def profile(frame, event, arg):
        if event != "call" or not frame.f_code.co_filename.startswith(PACKAGE):
            return
        where = frame.f_code.co_filename[len(PACKAGE) :]
        ran[where, frame.f_code.co_name] += 1
        caller = frame.f_back
        if caller is not None and caller.f_code.co_filename.startswith(PACKAGE):
            source = caller.f_code.co_filename[len(PACKAGE) :]
            # facts/ and formats/ are the light rooms below _core (docs/architecture.md): not up
            if source.startswith("_core/") and not where.startswith(("_core/", "facts/", "formats/")):
                upward.append(f"{source}:{caller.f_code.co_name} -> {where}:{frame.f_code.co_name}")

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return ran, upward


@pytest.mark.parametrize("centering", ["corpus", "batch"])
def test_a_warm_call_goes_down_once(load_metric, centering):
    metric = load_metric("centered_bertscore")
    text = "a cat sat on the mat while the dog barked at two birds in the old tree"
    words = text.split(" ")
    predictions = [" ".join(words[i : i + 5]) for i in range(12)]  # distinct texts enough for batch centering
    references = [[" ".join(words[i + 1 : i + 6]), " ".join(words[i : i + 3])] for i in range(12)]
    call = lambda: metric.compute(predictions=predictions, references=references, centering=centering)  # noqa: E731
    call()  # warm: the model loaded, the shipped statistic read
    ran, upward = follow(call)
    assert not upward, f"calls from _core up into the layers above it: {upward}"
    counts = collections.Counter()
    for (_, name), n in ran.items():
        counts[name] += n
    assert {name: counts[name] for name in CHECKS} == dict.fromkeys(CHECKS, 1)
    assert counts["check_inputs"] == 2  # add_batch's, and the call's own (through call_texts)
    files = sorted({where for where, _ in ran})
    assert len(files) <= MAX_FILES, files


@pytest.mark.parametrize("name", ["twmd", "moverscore", "lazy_emd", "sbertscore", "centered_bertscore"])
@pytest.mark.parametrize("centering", ["batch", "corpus"])
def test_core_never_calls_a_metric(load_metric, name, centering):
    """Issue 52: whatever a metric gives the call (moverscore's token filter, power means and
    hashcode parts, every metric's hashcode) goes down as data: no function of ``_core`` calls
    one outside it, in a warm call of any metric (moverscore v1: its power means)."""
    metric = load_metric(name)
    text = "a cat sat on the mat while the dog barked at two birds in the old tree"
    words = text.split(" ")
    predictions = [" ".join(words[i : i + 5]) for i in range(12)]
    references = [[" ".join(words[i + 1 : i + 6]), " ".join(words[i : i + 3])] for i in range(12)]
    extra = {"version": "v1", "centering": "batch"} if name == "moverscore" and centering == "batch" else {}
    kwargs = {"centering": centering, **extra}
    call = lambda: metric.compute(predictions=predictions, references=references, **kwargs)  # noqa: E731
    call()
    _, upward = follow(call)
    assert not upward, f"calls from _core up into the layers above it: {upward}"


AT_MOST_ONCE = (
    "resolve_device",
    "check_layers",
    "check_aggregated_centering",
    "check_max_length",
    "call_texts",
    "encoder_for",
    "open_call",
    "check_centering",
)
"""What issue 46 asks to run at most once in one warm call of centered_bertscore and of moverscore,
whatever the centering: the device resolved, the layers and the centering of an aggregation over
layers checked, the token limit, the texts. ``check_idf`` runs once per IDF argument the metric
takes (moverscore's ``idf`` and ``prediction_idf``: two arguments, each checked once)."""
IDF_ARGUMENTS = {"centered_bertscore": 1, "moverscore": 2}


@pytest.mark.parametrize(
    "name, arguments",
    [
        ("centered_bertscore", {"centering": "corpus"}),
        ("centered_bertscore", {"centering": "batch"}),
        ("moverscore", {"centering": "corpus"}),
        ("moverscore", {"centering": "batch"}),
        ("moverscore", {"version": "v1", "centering": "batch"}),
        ("centered_bertscore", {"centering": "corpus", "dtype": "auto"}),  # issue 52: the device resolved once
        ("moverscore", {"version": "v1", "centering": "batch", "cache": True}),  # and the layers checked once
    ],
)
def test_each_check_runs_at_most_once_in_a_call(name, arguments):
    from moverkit import functional

    score = getattr(functional, name)
    text = "a cat sat on the mat while the dog barked at two birds in the old tree"
    words = text.split(" ")
    predictions = [" ".join(words[i : i + 5]) for i in range(12)]
    references = [[" ".join(words[i + 1 : i + 6]), " ".join(words[i : i + 3])] for i in range(12)]
    arguments = dict(arguments)
    cached = cache_enabled() if arguments.pop("cache", False) else contextlib.nullcontext()
    with cached:
        score(predictions, references, **arguments)  # warm: the texts in the cache, when it is on
        ran, _ = follow(lambda: score(predictions, references, **arguments))
    counts = collections.Counter()
    for (_, function), n in ran.items():
        counts[function] += n
    assert {f: counts[f] for f in AT_MOST_ONCE if counts[f] > 1} == {}
    assert counts["check_idf"] == IDF_ARGUMENTS[name]
