"""Every metric card's code runs as written, without a warning: its ``>>>`` examples are doctests
(output compared), every other python block runs alone in a fresh interpreter. Card examples
round their numbers, so they hold on any CPU."""

from __future__ import annotations

import doctest
import re
import sys

import pytest
from warm_python import offline_environment

import moverkit

CARDS = {name: moverkit.module_path(name) / "README.md" for name in moverkit.METRICS}
WARNINGS_ARE_ERRORS = 'import warnings, moverkit; warnings.simplefilter("error", moverkit.MoverkitWarning)\n'


def _python_blocks(name: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", CARDS[name].read_text(encoding="utf-8"), flags=re.S | re.M)


@pytest.mark.parametrize("name", moverkit.METRICS)
def test_card_examples_give_the_output_they_show(name, tmp_path, monkeypatch):
    """The ``>>>`` lines of the card, with ``metric`` (and the metric's own name) loaded, run in
    an empty folder (examples save files)."""
    monkeypatch.chdir(tmp_path)
    metric = moverkit.load(name)
    text = "\n".join(block for block in _python_blocks(name) if ">>>" in block)
    test = doctest.DocTestParser().get_doctest(
        text, {"moverkit": moverkit, "metric": metric, name: metric}, name, None, 0
    )
    assert test.examples, f"the {name} card shows no example with its output"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.failures == 0, f"{runner.failures} of {len(test.examples)} examples of the {name} card differ"


@pytest.mark.integration
@pytest.mark.parametrize(
    "name, code",
    [
        pytest.param(name, code, id=f"{name}-{i}")
        for name in moverkit.METRICS
        for i, code in enumerate(_python_blocks(name))
        if ">>>" not in code
    ],
)
def test_card_block_runs_alone_without_a_warning(name, code, tmp_path, warm_python):
    """In a fresh ``python -c`` (forked from a warm interpreter: tests/warm_python.py)."""
    code = WARNINGS_ARE_ERRORS + code
    done = warm_python.run([sys.executable, "-c", code], tmp_path, offline_environment(), timeout=600)
    assert done.returncode == 0, f"{name} card block:\n{code}\n--- stderr\n{done.stderr[-3000:]}"
