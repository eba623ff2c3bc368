"""``moverkit bench overhead``: each metric's time over its encoder's, with an encoder that is
nearly free (a CPU proxy of the GPU regime).

On a GPU the forward pass of a small encoder takes tens of milliseconds for thousands of texts, so
what a metric costs there is its own pipeline: tokenizing, batching, copying, matching. A CPU shows
the same overhead when the encoder is made nearly free: a 2-layer, 32-wide BERT of random weights
(:func:`tiny_encoder`; the vocabulary and tokenizer of the embedded model, seeded, saved to a
folder so that every metric loads it as a local model).

The floor (:func:`~benchmarks._shared.floor`) is what no metric can beat: one fast-tokenizer
call over the call's distinct texts, then forward passes in batches sorted by length of about
:data:`FLOOR_TOKEN_BUDGET` padded tokens; plain transformers and torch, no moverkit code. Each
metric scores the pairs of a judgments TSV (2,800 WMT17 to-English pairs), its model loaded and
warmed before; floor and metrics are timed in one process in interleaved rounds
(:func:`~benchmarks._shared.interleaved`; the garbage collector off, as in ``timeit``), and the
report gives each median and its ratio to the floor's.
"""

from __future__ import annotations

import gc
import statistics
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks._shared import RUNS, capped_parser, distinct, floor, interleaved, judgments, machine_isa
from moverkit.facts.specs import SPECS
from moverkit.formats.options import emit, progress

HELP = "each metric's time over a tokenize+forward floor, with a tiny random encoder (CPU proxy)"

TARGETED = tuple(name for name, s in SPECS.items() if s.level == "token" and not s.exact_transport)
"""The metrics held to :data:`TARGET`: the token-level ones whose work runs on the device (their
spec's ``level`` and ``exact_transport``). A sentence-level metric (sentence-transformers' own
pipeline) and one with an exact transport per pair, solved on the CPU, are reported for information."""

TARGET = 1.25
"""The ratio to the floor a targeted metric must stay within (issue 34)."""

FLOOR_TOKEN_BUDGET = 16_384
"""Padded tokens per forward pass of the floor: large batches, as a GPU runs them."""

TINY_SHAPE = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 128}


def tiny_encoder(folder: str | Path, seed: int = 0) -> str:
    """Save a random BERT of :data:`TINY_SHAPE` (``seed``), with the embedded model's WordPiece
    tokenizer, to ``folder``; returns the folder, a local ``model_type``."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from moverkit._core.encoding import embedded_model_path

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_path())
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=tokenizer.vocab_size, max_position_embeddings=512, **TINY_SHAPE)
    BertModel(config).eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def metric_run(name: str, model_path: str, predictions: list[str], references: list[str]) -> Callable[[], object]:
    """``moverkit.functional.<name>`` on the pairs with the arguments of
    :data:`~benchmarks._shared.RUNS` and the tiny
    encoder; one warm-up call on 16 pairs here (loads the model)."""
    from moverkit.integrations.registry import REGISTRY

    score = REGISTRY[name].function
    kwargs = {"model_type": model_path, **RUNS[name]}
    score(predictions[:16], references[:16], **kwargs)
    return lambda: score(predictions, references, **kwargs)


def measure(
    predictions: list[str], references: list[str], metrics: Sequence[str], rounds: int, folder: str | Path
) -> dict:
    """Median seconds of the floor and of each of ``metrics`` over ``rounds`` interleaved rounds,
    with the tiny encoder saved in ``folder``."""
    model_path = tiny_encoder(folder)
    texts = distinct(predictions, references)
    runs = {"floor": floor(model_path, texts, FLOOR_TOKEN_BUDGET)}
    runs.update({name: metric_run(name, model_path, predictions, references) for name in metrics})
    # Python's cyclic garbage collector off while timing, as timeit does: a full collection
    # triggered by one contender's garbage would land in another's time.
    gc.collect()
    gc.disable()
    try:
        times = interleaved(runs, rounds)
    finally:
        gc.enable()
    return {
        "n_pairs": len(predictions),
        "n_texts": len(texts),
        "rounds": rounds,
        "seconds": {label: statistics.median(t) for label, t in times.items()},
    }


def format_report(report: dict, isa: str) -> str:
    """A Markdown table of each metric's median time and its ratio to the floor, the targeted
    ones marked against :data:`TARGET`, with the ISA line (:func:`~benchmarks._shared.machine_isa`)."""
    seconds = report["seconds"]
    base = seconds["floor"]
    lines = [
        f"Overhead over the encoder: a {TINY_SHAPE['num_hidden_layers']}-layer, {TINY_SHAPE['hidden_size']}-wide "
        f"random BERT, {report['n_pairs']:,} pairs ({report['n_texts']:,} distinct texts), median of "
        f"{report['rounds']} interleaved rounds",
        "",
        "| run | seconds | / floor | target |",
        "|---|---:|---:|---|",
        f"| floor (one tokenizer call, forward in {FLOOR_TOKEN_BUDGET:,}-token batches) | {base:.3f} | 1.00 | |",
    ]
    for name, value in seconds.items():
        if name == "floor":
            continue
        ratio = value / base
        target = f"<= {TARGET} ({'met' if ratio <= TARGET else 'NOT met'})" if name in TARGETED else "information"
        args = ", ".join(f"{k}={v!r}" for k, v in RUNS[name].items())
        lines.append(f"| {name}{f' ({args})' if args else ''} | {value:.3f} | {ratio:.2f} | {target} |")
    return "\n".join([*lines, "", isa])


def register(which) -> None:
    capped_parser(which, "overhead", HELP, command, measured="time", rounds_default=5)


def command(args) -> int:
    data = judgments(args)
    metrics = args.metrics or list(RUNS)
    with tempfile.TemporaryDirectory(prefix="moverkit-tiny-bert-") as folder:
        report = measure(data.predictions, data.references, metrics, args.rounds, folder)
    progress("done: overhead")
    return emit(format_report(report, machine_isa()), args.out)
