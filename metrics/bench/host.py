"""``moverkit bench host``: what a metric call asks of the host, counted op by op (issue 45).

On a GPU a call is fast when the host stays out of the device's way: few torch ops to launch, no
read of a device value in a loop (each a wait for the device), each weight cast once. A CPU can
count all of it. Per metric, one warm call over the pairs of a judgments TSV, under a torch
dispatch counter (:class:`DispatchCounter`, a ``TorchDispatchMode``):

- the torch ops dispatched (on a GPU, each a kernel launch or more);
- the host reads, ops whose result the host must wait for on a GPU (:data:`HOST_READS`), split into
  those of the encoder's own forward pass (transformers' mask check, one per padded batch, which
  the floor pays too) and all the others, moverkit's;
- the casts (``_to_copy`` or ``to`` to another dtype) and among them the casts of the models'
  weights, which must not grow with the number of batches;
- the seconds of the call outside the encoder's forward passes (timed by hooks on the model).

``MOVERKIT_PLAN=cuda`` (:func:`~moverkit._core.base.cuda_plan`) plans the CPU call as on a CUDA
device, so that it dispatches what the GPU will launch: the command runs each metric under the
CPU's plan and under the CUDA plan, in subprocesses, and the same command on a CUDA device
(``--device cuda``) counts there what it counts here. It also times the tokenization of the call's
distinct texts against the Rust tokenizer's own ``encode_batch_fast`` on the same texts.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence

from moverkit.options import METRICS, emit, positive_int, progress

from .command import data_options, judgments

HOST_READS = frozenset({"_local_scalar_dense", "nonzero", "is_nonzero", "equal", "item"})
"""Aten ops whose result is read by the host: on a GPU each waits for the device's queue."""

CASTS = frozenset({"_to_copy", "to"})

RUNS = {
    "centered_bertscore": {"centering": "batch"},
    "twmd": {"centering": "batch"},
    "lazy_emd": {},
    "sbertscore": {},
    "moverscore": {},
}
"""The metrics counted and their arguments (as ``bench gpu`` times them)."""

PLANS = ("cpu", "cuda")
READ_BOUND = 32
"""Host reads one call over 1,000 pairs may make (issue 45), whatever its batches and iterations."""


class DispatchCounter:
    """A torch dispatch counter: every aten op dispatched while it is entered, by name, and the
    host reads and casts (of ``weights``: the storages of the models' parameters) inside and
    outside the forward passes of ``models`` (timed by forward hooks)."""

    def __init__(self, models: Sequence = (), weights: set[int] | None = None):
        from torch.utils._python_dispatch import TorchDispatchMode

        counter = self
        self.ops: collections.Counter = collections.Counter()
        self.forward_reads = 0
        self.weight_casts = 0
        self.forward_seconds = 0.0
        self._depth = 0
        self._weights = weights or set()
        self._hooks = [h for model in models for h in self._timing_hooks(model)]

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                counter.record(func.overloadpacket.__name__, func, args, kwargs or {})
                return func(*args, **(kwargs or {}))

        self._mode = Mode()

    def _timing_hooks(self, model):
        started = []

        def before(*_):
            self._depth += 1
            started.append(time.perf_counter())

        def after(*_):
            self._depth -= 1
            self.forward_seconds += time.perf_counter() - started.pop()

        return [model.register_forward_pre_hook(before), model.register_forward_hook(after)]

    def record(self, name: str, func, args, kwargs) -> None:
        import torch

        self.ops[name] += 1
        if name in HOST_READS and self._depth:
            self.forward_reads += 1
        if name in CASTS and args and isinstance(args[0], torch.Tensor) and args[0].data_ptr() in self._weights:
            self.weight_casts += 1

    @property
    def reads(self) -> int:
        return sum(n for name, n in self.ops.items() if name in HOST_READS)

    @property
    def casts(self) -> int:
        return sum(n for name, n in self.ops.items() if name in CASTS)

    def close(self) -> None:
        for hook in self._hooks:
            hook.remove()

    def __enter__(self):
        self._mode.__enter__()
        return self

    def __exit__(self, *exc):
        return self._mode.__exit__(*exc)


def models_of(name: str, device: str):
    """The torch modules a call of ``name`` runs on ``device`` (the embedded model)."""
    from moverkit._core.encoding import get_encoder, get_sentence_encoder

    if name == "sbertscore":
        return [get_sentence_encoder(None, device).model]
    return [get_encoder(None, None, device).model]


def count(name: str, predictions: list[str], references: list[str], device: str, dtype: str) -> dict:
    """One warm call of ``name`` counted (see the module doc)."""
    import torch

    from moverkit.registry import REGISTRY

    score = REGISTRY[name].function
    kwargs = {**RUNS[name], "device": device, "dtype": dtype}
    score(predictions[:8], references[:8], **kwargs)  # loads the model: counted calls are warm
    models = models_of(name, device)
    weights = {p.data_ptr() for model in models for p in model.parameters()}
    counter = DispatchCounter(models, weights)
    synchronize = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    try:
        synchronize()
        start = time.perf_counter()
        with counter:
            score(predictions, references, **kwargs)
        synchronize()
        seconds = time.perf_counter() - start
    finally:
        counter.close()
    return {
        "ops": sum(counter.ops.values()),
        "reads": counter.reads,
        "forward_reads": counter.forward_reads,
        "casts": counter.casts,
        "weight_casts": counter.weight_casts,
        "seconds": seconds,
        "host_seconds": seconds - counter.forward_seconds,
    }


def tokenization(texts: list[str], rounds: int = 5) -> dict:
    """Best-of-``rounds`` seconds of moverkit's tokenization of ``texts`` (the embedded model's
    tokenizer, its limit) and of the Rust tokenizer's ``encode_batch_fast`` on the same texts,
    interleaved."""
    from moverkit._core.encoding import get_encoder, rust_encode, tokenize

    encoder = get_encoder(None, None, "cpu")
    limit = encoder.max_length
    stripped = [t.strip() for t in texts]
    raw = encoder.tokenizer.backend_tokenizer
    ours, rust = [], []
    rust_encode(encoder.tokenizer, stripped, limit)  # makes the Rust copy, untimed
    for _ in range(rounds):
        start = time.perf_counter()
        tokenize(encoder, texts)
        ours.append(time.perf_counter() - start)
        start = time.perf_counter()
        raw.encode_batch_fast(stripped, add_special_tokens=True)
        rust.append(time.perf_counter() - start)
    return {"texts": len(texts), "moverkit": min(ours), "encode_batch_fast": min(rust)}


def measure(predictions: list[str], references: list[str], metrics: Sequence[str], device: str, dtype: str) -> dict:
    """:func:`count` of each of ``metrics`` under this process's plan."""
    from moverkit._core.base import cuda_plan, resolve_device

    plan = "cuda" if cuda_plan(resolve_device(device)) else "cpu"
    rows = {}
    for name in metrics:
        rows[name] = count(name, predictions, references, device, dtype)
        progress(f"done: {name} ({plan} plan)")
    return {"plan": plan, "device": device, "dtype": dtype, "n_pairs": len(predictions), "rows": rows}


def format_report(reports: list[dict], tokens: dict, isa: str) -> str:
    first = reports[0]
    lines = [
        f"Host work of one warm call over {first['n_pairs']:,} pairs on {first['device']} ({first['dtype']}), "
        f"counted with a torch dispatch counter; host reads: {', '.join(sorted(HOST_READS))}",
        "",
        "| metric | plan | torch ops | host reads (moverkit + forward) | casts | weight casts | "
        "s outside the forward | s in all |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for report in reports:
        for name, row in report["rows"].items():
            own = row["reads"] - row["forward_reads"]
            lines.append(
                f"| {name} | {report['plan']} | {row['ops']:,} | {row['reads']} ({own} + {row['forward_reads']}) | "
                f"{row['casts']:,} | {row['weight_casts']:,} | {row['host_seconds']:.3f} | {row['seconds']:.3f} |"
            )
    ratio = tokens["moverkit"] / tokens["encode_batch_fast"]
    lines += [
        "",
        f"Tokenization of the {tokens['texts']:,} distinct texts (best of 5): moverkit {tokens['moverkit']:.3f} s, "
        f"the Rust tokenizer's encode_batch_fast {tokens['encode_batch_fast']:.3f} s ({ratio:.2f}x)",
        "",
        isa,
    ]
    return "\n".join(lines)


def register(which) -> None:
    parser = which.add_parser(
        "host", help="per metric: torch ops, host reads and casts of one call, under the CPU's and the CUDA plan"
    )
    data_options(parser)
    parser.add_argument("--limit", type=positive_int, default=1000, help="use only the first N rows (default: 1000)")
    parser.add_argument("--metrics", nargs="*", choices=METRICS, help="metrics to count (default: all five)")
    parser.add_argument("--device", default="cpu", help="cpu (both plans, in subprocesses) or a CUDA device")
    parser.add_argument("--dtype", default="float32", help="the forward pass's precision (default: float32)")
    parser.set_defaults(run=command)


CHILD_VARIABLE = "MOVERKIT_BENCH_HOST_CHILD"
"""Set in the subprocesses of :func:`command` (one plan each), which print their counts as JSON."""


def command(args) -> int:
    from .precision import machine_isa

    data = judgments(args)
    metrics = args.metrics or list(RUNS)
    if os.environ.get(CHILD_VARIABLE):
        print(json.dumps(measure(data.predictions, data.references, metrics, args.device, args.dtype)))
        return 0
    if args.device == "cpu":
        reports = [_in_subprocess(args, plan) for plan in PLANS]
    else:
        reports = [measure(data.predictions, data.references, metrics, args.device, args.dtype)]
    texts = list(dict.fromkeys([*data.predictions, *data.references]))
    return emit(format_report(reports, tokenization(texts), machine_isa()), args.out)


def _in_subprocess(args, plan: str) -> dict:
    """The counts under ``plan`` from a fresh process (each plan loads and warms its own models)."""
    from moverkit._core.base import PLAN_VARIABLE

    argv = [sys.executable, "-m", "moverkit.cli", "bench", "host", "--data", str(args.data), "--limit", str(args.limit)]
    argv += ["--dtype", args.dtype] + (["--metrics", *args.metrics] if args.metrics else [])
    env = {**os.environ, CHILD_VARIABLE: "1", PLAN_VARIABLE: "cuda" if plan == "cuda" else ""}
    done = subprocess.run(argv, env=env, check=True, stdout=subprocess.PIPE, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])
