"""Issue 61: what a metric call reads from its surroundings is read once, when it opens
(``environment.read_environment``), and the call runs with that snapshot: a variable set (or a
process-wide budget changed) while it runs changes nothing in it."""

from __future__ import annotations

import ast
import re
import warnings
from pathlib import Path

import pytest

from moverkit._core.base import environment
from moverkit._core.call import streaming
from moverkit._core.centering import fit
from moverkit._core.encoding.request import local_files_only
from moverkit.functional import twmd

PREDICTIONS = ["The cat sat on the mat.", "A dog barked twice at night.", "It rained all day long."]
REFERENCES = ["A cat was sitting on the mat.", "The dog barked two times.", "Rain fell the whole day."]
HUB_ID = "some-org/a-model-on-the-hub"  # not a folder: offline or not is the variable's to say


def _scored(tiny_model_path: str) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fitted mean's notice: no statistic ships for the tiny model
        return twmd(PREDICTIONS, REFERENCES, model_type=tiny_model_path, centering="corpus")


def test_every_setting_a_call_reads_is_read_when_it_opens(tiny_model_path, tmp_path, monkeypatch):
    opened_cache = tmp_path / "cache-at-opening"
    monkeypatch.setenv(environment.CENTERING_CACHE_VARIABLE, str(opened_cache))
    monkeypatch.setenv(environment.HUB_OFFLINE_VARIABLE, "1")
    for name in (environment.MEMORY_BUDGET_VARIABLE, environment.TOKENIZE_AHEAD_VARIABLE, environment.PLAN_VARIABLE):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(fit, "_FITTED", {})  # the tiny model's corpus mean is fitted in the call, and kept on disk
    corpus = fit.default_corpus()[:40]
    monkeypatch.setattr(fit, "default_corpus", lambda: corpus)  # a few of its texts: the fit is not what is tested
    undisturbed = _scored(tiny_model_path)
    assert len(list(opened_cache.glob("*.npz"))) == 1
    for kept in opened_cache.glob("*.npz"):
        kept.unlink()
    monkeypatch.setattr(fit, "_FITTED", {})

    moved, xdg = tmp_path / "cache-set-mid-call", tmp_path / "xdg-set-mid-call"
    mid_call = {
        environment.MEMORY_BUDGET_VARIABLE: "1",  # every prediction a chunk of its own, were it read
        environment.TOKENIZE_AHEAD_VARIABLE: "maybe",  # a ValueError, were it read
        environment.PLAN_VARIABLE: "gpu",  # a ValueError, were it read
        environment.CENTERING_CACHE_VARIABLE: str(moved),
        "XDG_CACHE_HOME": str(xdg),
        environment.HUB_OFFLINE_VARIABLE: "0",
    }
    seen = {}
    call_texts, memory_budget = streaming.call_texts, streaming.memory_budget

    def disturbed_call_texts(*args, **kwargs):  # the call has opened: its texts are checked next
        for name, value in mid_call.items():
            monkeypatch.setenv(name, value)
        environment.set_memory_budget(2)  # as another thread may, process-wide
        seen["offline"] = local_files_only(HUB_ID)
        return call_texts(*args, **kwargs)

    def recorded_budget(device=None):
        seen["budget"] = memory_budget(device)
        return seen["budget"]

    monkeypatch.setattr(streaming, "call_texts", disturbed_call_texts)
    monkeypatch.setattr(streaming, "memory_budget", recorded_budget)
    try:
        disturbed = _scored(tiny_model_path)
        assert seen["budget"] not in (1, 2)  # neither the variable nor the process budget set mid-call
    finally:
        environment.set_memory_budget(None)

    assert disturbed == undisturbed  # the same chunks, the same fitted mean: the same bits
    assert seen["offline"] is True  # HF_HUB_OFFLINE as the call opened with it
    assert len(list(opened_cache.glob("*.npz"))) == 1  # the mean kept where the opening said
    assert not moved.exists() and not xdg.exists()
    # Outside a call the settings are read as they are now: each changed value would have been seen.
    with pytest.raises(ValueError, match=environment.TOKENIZE_AHEAD_VARIABLE):
        environment.read_environment()
    monkeypatch.setenv(environment.TOKENIZE_AHEAD_VARIABLE, "1")
    with pytest.raises(ValueError, match=environment.PLAN_VARIABLE):
        environment.read_environment()
    monkeypatch.setenv(environment.PLAN_VARIABLE, "cpu")
    assert local_files_only(HUB_ID) is False
    assert environment.read_environment().centering_cache == str(moved)
    assert environment.read_environment().memory_budget == 1


def test_the_budget_a_call_opens_with_is_the_blocks_then_the_processs_then_the_variables(monkeypatch):
    monkeypatch.setenv(environment.MEMORY_BUDGET_VARIABLE, "3MB")
    assert environment.read_environment().memory_budget == 3 * 2**20
    try:
        environment.set_memory_budget("2MB")
        assert environment.read_environment().memory_budget == 2 * 2**20
        with environment.temporary_memory_budget("1MB"):
            assert environment.read_environment().memory_budget == 2**20
    finally:
        environment.set_memory_budget(None)
    assert environment.read_environment().memory_budget == 3 * 2**20


@pytest.mark.parametrize("value", ["abc", "0", "-5", "1e9"])
def test_bad_budget_in_the_environment_names_the_variable(monkeypatch, value):
    monkeypatch.setenv("MOVERKIT_MEMORY_BUDGET", value)
    with pytest.raises(ValueError, match="MOVERKIT_MEMORY_BUDGET"):
        twmd(["a cat"], ["a dog"], centering="none")


@pytest.mark.parametrize(
    ("variables", "folder"),
    [
        ({"MOVERKIT_CENTERING_CACHE": "off"}, None),
        ({"MOVERKIT_CENTERING_CACHE": "/data/means"}, "/data/means"),
        ({"XDG_CACHE_HOME": "/xdg"}, "/xdg/moverkit/centering"),
    ],
)
def test_the_centering_cache_folder(variables, folder, monkeypatch):
    for name in ("MOVERKIT_CENTERING_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert environment.read_environment().centering_cache == folder


# --- the two lists of docs/architecture.md ---------------------------------------------------------

PACKAGE = Path(__file__).resolve().parents[2] / "metrics"
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"
NAME = re.compile(r"^[A-Z][A-Z0-9]*(_[A-Z0-9]*)+_?$")
READS = re.compile(r"environ|size_from_env")  # os.environ, and sizes.size_from_env(variable, ...)


def _strings(node: ast.AST, constants: dict) -> set[str]:
    """The string constants in ``node``, and those of the module constants it names."""
    found = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            found.add(sub.value)
        elif isinstance(sub, ast.Name) and sub.id in constants:
            found |= constants[sub.id]
    return found


def variables_read_by_the_package() -> dict[str, set[str]]:
    """Each variable name the package's code reads or sets through ``os.environ`` (or
    ``size_from_env``), with its files: the string constants of every simple statement (and of a
    loop's iterable, a condition) that touches it, the module constants it names resolved."""
    names: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        constants = {}
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                constants[node.targets[0].id] = _strings(node.value, {})
        for node in ast.walk(tree):
            if isinstance(node, (ast.For, ast.AsyncFor)) and READS.search(ast.unparse(node)):
                parts = [node.iter]
            elif isinstance(node, (ast.If, ast.While)) and READS.search(ast.unparse(node.test)):
                parts = [node.test]
            elif isinstance(node, ast.stmt) and not hasattr(node, "body") and READS.search(ast.unparse(node)):
                parts = [node]
            else:
                continue
            for part in parts:
                for name in filter(NAME.match, _strings(part, constants)):
                    names.setdefault(name, set()).add(str(path.relative_to(PACKAGE)))
    return names


def _section(title: str) -> str:
    text = ARCHITECTURE.read_text()
    start = text.index(f"## {title}\n")
    return text[start : text.index("\n## ", start + 1)]


def test_every_variable_the_package_reads_is_in_one_of_the_two_lists():
    section = _section("The environment")
    call, process = section.split("**Process settings**")
    listed_call = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", call))
    listed_process = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", process))
    read = variables_read_by_the_package()
    assert {"HF_HUB_OFFLINE", "MOVERKIT_CACHE_BYTES", "ONEDNN_MAX_CPU_ISA", "GITHUB_SHA"} <= set(read)  # the scan sees
    unlisted = {name: sorted(files) for name, files in read.items() if name not in listed_call | listed_process}
    assert not unlisted, f"read by the package but in neither list of docs/architecture.md: {unlisted}"
    assert not listed_call & listed_process
    # The call's list is what read_environment reads, and only it reads those.
    assert listed_call == {
        environment.MEMORY_BUDGET_VARIABLE,
        environment.TOKENIZE_AHEAD_VARIABLE,
        environment.PLAN_VARIABLE,
        environment.CENTERING_CACHE_VARIABLE,
        environment.HUB_OFFLINE_VARIABLE,
        "XDG_CACHE_HOME",
    }
    for name in listed_call:
        assert read[name] == {"_core/base/environment.py"}, (name, read[name])


def test_the_tokenizing_thread_runs_in_the_calls_context():
    """The thread that tokenizes a call's next part ahead reads the call's settings (its
    environment, its warnings' collector), not the process defaults a fresh thread sees."""
    from moverkit._core.base.environment import Environment, call_environment, current_environment

    seen = []

    class Tokenizer:
        def tokenize(self, texts):
            seen.append(current_environment())
            return texts

    ours = Environment(memory_budget=123, centering_cache=None)
    with call_environment(ours), streaming.TokenizingThread(Tokenizer(), enabled=True) as ahead:
        parts = [part for part, tokens in ahead.parts([["a"], ["b"]], lambda part: part) if tokens.get()]
    assert parts == [["a"], ["b"]] and seen == [ours, ours]


def test_temporary_memory_budget_is_public_beside_set_memory_budget():
    import moverkit

    with moverkit.temporary_memory_budget("1MB"):
        assert environment.read_environment().memory_budget == 2**20
