"""Shared fixtures: real text pairs, the embedded encoder, and a tiny random model made on the spot."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_EVALUATE_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # `pytest -n 2` (the quick loop): one torch thread per worker process. Two workers of two
    # threads each on two cores spin against each other in OpenMP and run slower than one: the
    # quick loop took 3 min 42 s so, 1 min 48 s with one thread a worker (the golden scores hold).
    # A plugin may import torch before this file, too late for the variable: set it on torch too.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

ROOT = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(items):
    """The modules that hold a slow or integration test first, in collection order otherwise.

    ``pytest -n 2`` hands each worker a whole file at a time (``--dist loadfile
    --no-loadscope-reorder``, in pyproject.toml), so a module's fixtures are made once; with the
    long files first, the run ends on short ones and neither worker waits long for the other.
    Replayed on the durations of a full run (2,731 worker-seconds), xdist's default (chunks of a
    quarter of the tests) left one worker 271 s after the other; whole files, these first, 7 s."""
    heavy = {item.module for item in items if item.get_closest_marker("slow") or item.get_closest_marker("integration")}
    items.sort(key=lambda item: item.module not in heavy)  # stable: collection order within each half


@pytest.fixture(scope="session", autouse=True)
def centering_cache(tmp_path_factory):
    """The folder where a call keeps the corpus statistics it fits for an encoder none ships for
    (``moverkit._core.centering.fit.default_corpus_stats``): a temporary one, not the user's cache.
    Set in the environment, so that the CLI's subprocesses use it too."""
    folder = tmp_path_factory.mktemp("centering-cache")
    os.environ["MOVERKIT_CENTERING_CACHE"] = str(folder)
    return folder


@pytest.fixture(scope="module", autouse=True)
def signal_handlers_restored():
    """Each test module leaves the process's SIGTERM and SIGINT handlers as it found them.
    ``ray.init`` installs its own SIGTERM handler (``sys.exit``) in the process that starts Ray, and
    keeps it after ``ray.shutdown``; a process forked later in the same pytest worker (bert-score's
    IDF pool) inherits it, and ``Pool.terminate`` then waited forever on a worker that SIGTERM no
    longer ends (a CI run hung there once the tests were regrouped)."""
    import signal

    saved = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    yield
    for number, handler in saved.items():
        if signal.getsignal(number) is not handler:
            signal.signal(number, handler)


@pytest.fixture(scope="session")
def warm_python(tmp_path_factory):
    """``warm_python.run([sys.executable, "-c", code, *args], cwd, env, timeout)``: a fresh
    ``python -c`` forked from an interpreter that has imported torch, transformers and evaluate
    once (tests/warm_python.py), for the README, docs and card blocks."""
    from warm_python import WarmPython

    python = WarmPython(tmp_path_factory.mktemp("warm-python"))
    yield python
    python.close()


SAMPLE = ROOT / "tests" / "data" / "wmt17_sample.tsv"
SHARED_WMT17 = ROOT / "data" / "wmt17_seg_da_to_en.tsv"  # shipped with its provenance (data/README.md)


@pytest.fixture(scope="session")
def wmt_pairs():
    """200 real (hypothesis, reference) pairs from WMT17, all five language pairs."""
    from moverkit.judgments import read_judgments

    data = read_judgments(SAMPLE)
    return data.predictions, data.references


@pytest.fixture(scope="session")
def wmt17_full():
    """The full 2,800-segment WMT17 file shipped in data/."""
    from moverkit.judgments import read_judgments

    return read_judgments(SHARED_WMT17)


@pytest.fixture(scope="session")
def load_metric():
    """``load_metric(name)``: the bundled evaluate module, loaded once per session."""
    import moverkit

    cache = {}

    def load(name):
        if name not in cache:
            cache[name] = moverkit.load(name)
        return cache[name]

    return load


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory):
    """A 3-layer, 32-dimensional random BERT with the embedded model's WordPiece tokenizer, saved
    to a folder (so it loads like any local model path)."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from moverkit._core import embedded_model_path

    folder = tmp_path_factory.mktemp("tiny-bert")
    tokenizer = AutoTokenizer.from_pretrained(embedded_model_path())
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    BertModel(config).eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="session")
def tiny_centering_stats(tiny_model_path):
    """``stats_for(name)``: a corpus statistic of the tiny model for ``centering="corpus"``, the
    sentence-level one for sbertscore and the token-level one for the others."""
    from moverkit import fit_centering

    # Ten distinct texts of one sentence each: as few as fit_centering takes without a warning.
    corpus = [
        "The cat sat on the mat.",
        "Dogs bark at night!",
        "Markets fell on Monday.",
        "über 猫",
        "The council approved the budget.",
        "Rain is expected this week.",
        "He plays the violin.",
        "The team won the final.",
        "Prices keep rising.",
        "A new bridge links the towns.",
    ]
    token = fit_centering(corpus, tiny_model_path)
    sentence = fit_centering(corpus, tiny_model_path, level="sentence")
    return lambda name: sentence if name == "sbertscore" else token


@pytest.fixture
def one_thread():
    """Torch on one thread for the test: tiny tensors and thousands of steps (Sinkhorn), where
    OpenMP hand-offs cost more than they save (slow on a loaded machine)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def masks():
    """``masks((n, width), ...)``: boolean masks (B, width) whose row ``b`` has its first ``n``
    entries True (the token masks of a batch of padded clouds)."""
    import torch

    def make(*lengths_and_widths):
        return torch.tensor([[j < n for j in range(width)] for n, width in lengths_and_widths])

    return make


@pytest.fixture
def tiny_causal_lm():
    """``tiny_causal_lm(n_positions)``: a 2-layer, 32-dimensional random GPT-2 (seed 0) with the
    embedded model's WordPiece vocabulary, ``[CLS]`` and ``[SEP]`` its start and end tokens, and
    that tokenizer: the policy of a reward test, the model of an evaluation harness's test."""

    def make(n_positions: int):
        import torch
        from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

        from moverkit._core import embedded_model_path

        tokenizer = AutoTokenizer.from_pretrained(embedded_model_path())
        tokenizer.bos_token, tokenizer.eos_token = "[CLS]", "[SEP]"
        torch.manual_seed(0)
        config = GPT2Config(
            vocab_size=len(tokenizer),
            n_embd=32,
            n_layer=2,
            n_head=2,
            n_positions=n_positions,
            bos_token_id=tokenizer.cls_token_id,
            eos_token_id=tokenizer.sep_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
        return GPT2LMHeadModel(config), tokenizer

    return make
