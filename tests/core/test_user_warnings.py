"""Warnings name the user's line, whichever path reached them (module, functional, streamed)."""

import warnings

import pytest

import moverkit
from moverkit.functional import centered_bertscore, lazy_emd, sbertscore


def _caught(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    assert caught, "the call was expected to warn"
    return caught


@pytest.mark.parametrize(
    "call",
    [
        # batch centering over 2 texts: warned deep in the core, under the streaming wrapper
        lambda: centered_bertscore(["a cat"], ["a dog"], centering="batch"),
        lambda: moverkit.load("centered_bertscore").compute(
            predictions=["a cat"], references=["a dog"], centering="batch"
        ),
        # non-English with the English model: warned in the encoder's argument check
        lambda: lazy_emd(["ein Hund"], ["eine Katze"], lang="de", centering="none"),
        # no sentence in the prediction: warned by sbertscore itself
        lambda: sbertscore([" "], ["A cat sat."]),
    ],
    ids=["functional", "module", "lang", "sbertscore"],
)
def test_warnings_point_at_the_callers_file(call):
    for warning in _caught(call):
        assert warning.filename == __file__, (warning.filename, str(warning.message)[:80])
        assert issubclass(warning.category, moverkit.MoverkitWarning), warning.category
