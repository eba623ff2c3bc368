"""``moverkit bench host``: what a metric call asks of the host, counted op by op (issue 45).

On a GPU a call is fast when the host stays out of the device's way: few torch ops to launch, no
read of a device value in a loop (each a wait for the device), each weight cast once. A CPU can
count all of it. Per metric, one warm call over the pairs of a judgments TSV, under a torch
dispatch counter (:class:`DispatchCounter`, a ``TorchDispatchMode``):

- the torch ops dispatched (on a GPU, each a kernel launch or more);
- the host reads, each a wait for the device on a GPU: the ops whose result the host reads
  (:data:`HOST_READS`; ``.item()``, ``float()`` and ``bool()`` of a tensor dispatch
  ``_local_scalar_dense``) and the copies from a device to the CPU (:func:`copies_to_host`:
  ``.cpu()``, ``.to("cpu")``, ``.tolist()`` of a device tensor, ``copy_`` into a CPU tensor);
  split into those of the encoders' own forward passes (transformers' mask check, one per padded
  batch, which the floor pays too) and all the others, moverkit's;
- the casts (``_to_copy`` or ``to`` to another dtype) and among them the casts of the encoders'
  weights, which must not grow with the number of batches;
- the seconds of the call outside the encoders' forward passes.

The encoders are every transformers model the call runs, whichever layer it is cut at (moverscore
cuts its encoder at the last layer, the others at the model's default): hooks on every module's
forward time the outermost call of each ``PreTrainedModel`` and of sentence-transformers'
``Transformer`` module (which calls its model's ``forward`` itself, past the hooks), and take
its weights as the encoder's.

A copy whose source is on the CPU is not a read: it costs nothing a GPU would wait for, and
``.tolist()``, ``.numpy()`` and ``.cpu()`` of a CPU tensor dispatch no op at all. So copies to the
host are counted on a device only, and a CPU's reads are a GPU's less the GPU's copies to the host.

``MOVERKIT_PLAN=cuda`` (:func:`~moverkit._core.base.cuda_plan`) plans the CPU call as on a CUDA
device, so that it dispatches what the GPU will launch: the command runs each metric under the
CPU's plan and under the CUDA plan, in subprocesses, and the same command on a CUDA device
(``--device cuda``) counts there what it counts here, its copies to the host besides. It also
times the tokenization of the call's distinct texts against the Rust tokenizer's own
``encode_batch_fast`` on the same texts.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence

from benchmarks._shared import RUNS, child_environment, command_parser, distinct, judgments, machine_isa
from moverkit.formats.options import METRICS, emit, positive_int, progress

HELP = "per metric: torch ops, host reads and casts of one call, under the CPU's and the CUDA plan"

HOST_READS = frozenset({"_local_scalar_dense", "nonzero", "is_nonzero", "equal", "item"})
"""Aten ops whose result is read by the host: on a GPU each waits for the device's queue."""

CASTS = frozenset({"_to_copy", "to"})

PLANS = ("cpu", "cuda")
READ_BOUND = 32
"""Host reads one call over 1,000 pairs may make (issue 45), whatever its batches and iterations."""


def copies_to_host(name: str, args, kwargs) -> bool:
    """Whether aten op ``name`` on ``args``, ``kwargs`` copies a tensor that is not on the CPU to
    the CPU: ``_to_copy(source, device=cpu)`` (``.cpu()``, ``.to("cpu")``, and ``.tolist()``, which
    dispatches only that copy) or ``copy_(destination on the CPU, source)``. Non-blocking copies
    too: the host must wait for them before it reads their values."""
    import torch

    if name == "_to_copy" and args:
        source, target = args[0], kwargs.get("device")
    elif name == "copy_" and len(args) >= 2:
        source, target = args[1], args[0].device
    else:
        return False
    if not isinstance(source, torch.Tensor) or target is None:
        return False
    return source.device.type != "cpu" and torch.device(target).type == "cpu"


def _encoder_model(module) -> bool:
    """Whether ``module`` is a transformers model, or sentence-transformers' module around one
    (its ``auto_model``: sentence-transformers 6 calls the model's ``forward`` itself, past the
    hooks); no import: where transformers' models are not loaded, none can run."""
    modeling = sys.modules.get("transformers.modeling_utils")
    if modeling is None:
        return False
    return isinstance(module, modeling.PreTrainedModel) or isinstance(
        getattr(module, "auto_model", None), modeling.PreTrainedModel
    )


class DispatchCounter:
    """A torch dispatch counter: every aten op dispatched while it is entered, by name, the host
    reads (:data:`HOST_READS` and :func:`copies_to_host`) and the casts inside and outside the
    forward passes of every transformers model run meanwhile (timed by global module hooks), and
    the casts of ``weights`` (storages) and of those models' parameters (:attr:`weights`)."""

    def __init__(self, weights: set[int] | None = None):
        from torch.utils._python_dispatch import TorchDispatchMode

        counter = self
        self.ops: collections.Counter = collections.Counter()
        self.copies_to_host = 0
        self.forward_reads = 0
        self.weight_casts = 0
        self.forward_seconds = 0.0
        self.weights: set[int] = set(weights or ())
        self._models: set[int] = set()
        self._depth = 0
        self._started = 0.0
        self._hooks = []

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                counter.record(func.overloadpacket.__name__, args, kwargs or {})
                return func(*args, **(kwargs or {}))

        self._mode = Mode()

    def _before(self, module, _) -> None:
        if not _encoder_model(module):
            return
        if id(module) not in self._models:
            self._models.add(id(module))
            self.weights |= {p.data_ptr() for p in module.parameters()}
        self._depth += 1
        if self._depth == 1:
            self._started = time.perf_counter()

    def _after(self, module, *_) -> None:
        if not _encoder_model(module):
            return
        self._depth -= 1
        if self._depth == 0:
            self.forward_seconds += time.perf_counter() - self._started

    def record(self, name: str, args, kwargs) -> None:
        import torch

        self.ops[name] += 1
        to_host = copies_to_host(name, args, kwargs)
        self.copies_to_host += to_host
        if (to_host or name in HOST_READS) and self._depth:
            self.forward_reads += 1
        if name in CASTS and args and isinstance(args[0], torch.Tensor) and args[0].data_ptr() in self.weights:
            self.weight_casts += 1

    @property
    def reads(self) -> int:
        return sum(n for name, n in self.ops.items() if name in HOST_READS) + self.copies_to_host

    @property
    def casts(self) -> int:
        return sum(n for name, n in self.ops.items() if name in CASTS)

    def __enter__(self):
        from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

        self._hooks = [
            register_module_forward_pre_hook(self._before),
            register_module_forward_hook(self._after, always_call=True),
        ]
        self._mode.__enter__()
        return self

    def __exit__(self, *exc):
        try:
            return self._mode.__exit__(*exc)
        finally:
            for hook in self._hooks:
                hook.remove()


def count(name: str, predictions: list[str], references: list[str], device: str, dtype: str, **arguments) -> dict:
    """One warm call of ``name`` counted (see the module doc), with the run's arguments and
    ``arguments`` (a smaller ``batch_size``: as many batches from fewer pairs); ``weights``: how
    many weights the encoders it ran hold."""
    import torch

    from moverkit.integrations.registry import REGISTRY

    score = REGISTRY[name].function
    kwargs = {**RUNS[name], "device": device, "dtype": dtype, **arguments}
    score(predictions[:8], references[:8], **kwargs)  # loads the models: counted calls are warm
    counter = DispatchCounter()
    synchronize = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    synchronize()
    start = time.perf_counter()
    with counter:
        score(predictions, references, **kwargs)
    synchronize()
    seconds = time.perf_counter() - start
    return {
        "ops": sum(counter.ops.values()),
        "reads": counter.reads,
        "forward_reads": counter.forward_reads,
        "casts": counter.casts,
        "weight_casts": counter.weight_casts,
        "weights": len(counter.weights),
        "seconds": seconds,
        "host_seconds": seconds - counter.forward_seconds,
    }


def tokenization(texts: list[str], rounds: int = 5) -> dict:
    """Best-of-``rounds`` seconds of moverkit's tokenization of ``texts`` (the embedded model's
    tokenizer, its limit) and of the Rust tokenizer's ``encode_batch_fast`` on the same texts,
    interleaved."""
    from moverkit._core.encoding import CallTokenizer, get_encoder, tokenize

    encoder = get_encoder(None, None, "cpu")
    limit = encoder.max_length
    stripped = [t.strip() for t in texts]
    raw = encoder.tokenizer.backend_tokenizer
    ours, rust = [], []
    CallTokenizer.of(encoder, limit)  # makes the Rust copy, untimed
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
        f"counted with a torch dispatch counter; host reads: {', '.join(sorted(HOST_READS))} and copies from the "
        "device to the host",
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
    parser = command_parser(which, "host", HELP, command)
    parser.add_argument("--limit", type=positive_int, default=1000, help="use only the first N rows (default: 1000)")
    parser.add_argument("--metrics", nargs="*", choices=METRICS, help="metrics to count (default: all five)")
    parser.add_argument("--device", default="cpu", help="cpu (both plans, in subprocesses) or a CUDA device")
    parser.add_argument("--dtype", default="float32", help="the forward pass's precision (default: float32)")


CHILD_VARIABLE = "MOVERKIT_BENCH_HOST_CHILD"
"""Set in the subprocesses of :func:`command` (one plan each), which print their counts as JSON."""


def command(args) -> int:
    data = judgments(args)
    metrics = args.metrics or list(RUNS)
    if os.environ.get(CHILD_VARIABLE):
        print(json.dumps(measure(data.predictions, data.references, metrics, args.device, args.dtype)))
        return 0
    if args.device == "cpu":
        reports = [_in_subprocess(args, plan) for plan in PLANS]
    else:
        reports = [measure(data.predictions, data.references, metrics, args.device, args.dtype)]
    tokens = tokenization(distinct(data.predictions, data.references))
    return emit(format_report(reports, tokens, machine_isa()), args.out)


def _in_subprocess(args, plan: str) -> dict:
    """The counts under ``plan`` from a fresh process (each plan loads and warms its own models)."""
    from moverkit._core.base import PLAN_VARIABLE

    argv = [sys.executable, "-m", "moverkit.cli", "bench", "host", "--data", str(args.data), "--limit", str(args.limit)]
    argv += ["--dtype", args.dtype] + (["--metrics", *args.metrics] if args.metrics else [])
    env = child_environment({CHILD_VARIABLE: "1", PLAN_VARIABLE: "cuda" if plan == "cuda" else ""})
    done = subprocess.run(argv, env=env, check=True, stdout=subprocess.PIPE, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])
