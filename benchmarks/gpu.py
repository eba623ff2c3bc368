"""``moverkit bench gpu``: the metrics on a CUDA device, as issue 34's table measures them.

Per metric (:data:`TIMED`: those centered by default with ``centering="batch"``, then the others
whose work runs on the device) and per precision of the forward pass (float32, float16, bfloat16):
the median seconds and pairs per second of one call over the pairs of a judgments TSV (2,800 WMT17
pairs), after a warm-up call of the same metric and precision; the bert-score package on the same
weights and layer beside, when it is installed; one call on :data:`SCALE_PAIRS` distinct pairs
(:func:`~benchmarks._shared.distinct_texts`), under a memory budget when one is given (a budget that
cuts it into chunks times a chunked call, each chunk's successor tokenized while it encodes); the
seconds of each metric centered by default at each of :data:`BATCH_SIZES` (the batch table); the
peak GPU memory of each (``torch.cuda.max_memory_allocated``); the device's name; the mean and
largest difference of the main score of each half precision from float32 on the GPU; and the largest
difference of a main score between the GPU and the CPU, both in float32, on the first pairs.

Each metric is set against the floor (issue 40), timed in the same run over the same distinct
texts: one Rust tokenizer call, then the model's forward with its weights in :data:`FLOOR_DTYPE`,
over length-sorted batches of :data:`FLOOR_TOKEN_BUDGET` padded tokens
(:func:`benchmarks._shared.floor`, the CPU proxy's floor on the device); the table gives each
cell's ratio to it (``x floor``), at the 2,800 pairs and at the scale run.

Every timed call ends with ``torch.cuda.synchronize()``, so the time is the device's work, not its
queue. The device's facts (availability, name, synchronization, peak memory) are read through
:func:`device_api`, the ``torch.cuda`` module, which the unit tests replace by a fake to run the
whole path on a CPU.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from benchmarks import MAIN_OUTPUTS
from benchmarks._shared import CENTERED_BY_DEFAULT, RUNS, command_parser, distinct, distinct_texts, floor, judgments
from moverkit.facts.specs import spec
from moverkit.formats.options import emit, natural_int, positive_int, progress, rounds

HELP = "pairs/s per metric and precision on a CUDA device, bert-score beside, a 100k-pair run"


def device_api():
    """The device's facts: the ``torch.cuda`` module (imported here, so that building the command
    line's parser loads no torch; the tests replace this function by a fake)."""
    import torch

    return torch.cuda


TIMED = tuple(name for name in RUNS if not spec(name).exact_transport)
"""The metrics timed (issue 34's table), with their arguments of :data:`~benchmarks._shared.RUNS`:
all but those whose exact transport runs on the host (their spec's ``exact_transport``)."""

DTYPES = ("float32", "float16", "bfloat16")
SCALE_PAIRS = 100_000
BATCH_SIZES = (16, 64, 256)
"""The ``batch_size`` values of the batch table: 16k, 65k and 262k padded tokens a forward pass at
the default :data:`~moverkit._core.base.batching.CUDA_TOKENS_PER_TEXT` (issue 45's what-if, which
set the per-precision defaults; the table confirms them on the device at hand)."""
BATCH_METRICS = CENTERED_BY_DEFAULT
"""The metrics of the batch table: those centered by default (:data:`~benchmarks._shared.CENTERED_BY_DEFAULT`)."""
FLOOR_TOKEN_BUDGET = 65_536
"""Padded tokens per forward pass of the floor: the metrics' default on a CUDA device."""
SCALE_METRICS = CENTERED_BY_DEFAULT
"""The metrics of the scale run: those centered by default, as in the batch table."""
CHECK_PAIRS = 200
"""Pairs scored on both the GPU and the CPU in float32 for the largest score difference."""
FLOOR_DTYPE = "float16"
"""The precision of the floor's weights (issue 40: a float16 copy of the weights is the fastest forward)."""


def require_cuda() -> None:
    """A ``ValueError`` (``moverkit: error: ...`` on the command line) unless a CUDA device is there."""
    if not device_api().is_available():
        raise ValueError(
            "bench gpu needs a CUDA device (torch.cuda.is_available() is False); "
            "'moverkit bench overhead' is its CPU proxy"
        )


def timed(run: Callable[[], object], rounds: int, device: str) -> tuple[float, int, object]:
    """Median seconds of ``rounds`` calls of ``run`` after one untimed warm-up call, each ended by
    a synchronization of ``device``, the peak memory (bytes) allocated on it meanwhile, and what
    the warm-up call returned."""
    cuda = device_api()
    result = run()
    cuda.synchronize(device)
    cuda.reset_peak_memory_stats(device)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times), int(cuda.max_memory_allocated(device)), result


def metric_call(name: str, predictions, references, **kwargs) -> Callable[[], dict]:
    from moverkit.integrations.registry import REGISTRY

    score = REGISTRY[name].function
    return lambda: score(predictions, references, **{**RUNS[name], **kwargs})


def bert_score_call(predictions, references, model_path: str, device: str) -> tuple[Callable[[], object], str] | None:
    """The bert-score package's scorer on the same weights and layer, and its version; ``None``
    when it is not installed."""
    try:
        import bert_score
    except ImportError:
        return None
    from transformers import AutoConfig

    from moverkit._core.encoding import default_layer, resolve_model

    name, path = resolve_model(model_path)
    layer = default_layer(name, AutoConfig.from_pretrained(path).num_hidden_layers)
    scorer = bert_score.BERTScorer(model_type=path, num_layers=layer, device=device)
    return (lambda: scorer.score(predictions, references, batch_size=64)), bert_score.__version__


@dataclass(frozen=True)
class GpuPlan:
    """What ``bench gpu`` measures: the model (``None``: the embedded one) on ``device``, the
    precisions timed, the timed calls a cell (median), the distinct pairs of the scale run (0:
    none), its precision and its memory budget (``None``: the device's default, half its free
    memory), and the pairs scored on the GPU and the CPU to compare."""

    model_type: str | None = None
    device: str = "cuda"
    dtypes: Sequence[str] = DTYPES
    rounds: int = 3
    scale_pairs: int = SCALE_PAIRS
    scale_dtype: str = "float16"
    scale_budget: str | None = None
    check_pairs: int = CHECK_PAIRS


def measure(
    predictions: list[str],
    references: list[str],
    segments: list[str],
    plan: GpuPlan = GpuPlan(),
    log: Callable[[str], None] = lambda line: None,
) -> dict:
    """Everything the report shows (see the module doc), as ``plan`` says; ``segments`` make the
    distinct texts of the scale run."""
    import torch

    device, dtypes, rounds = plan.device, plan.dtypes, plan.rounds
    scale_pairs, scale_dtype = plan.scale_pairs, plan.scale_dtype

    from moverkit._core.base import parse_size
    from moverkit._core.call import temporary_memory_budget
    from moverkit._core.encoding import resolve_model

    require_cuda()
    if plan.scale_budget is not None:
        parse_size(plan.scale_budget, "the scale run's memory budget")  # before the long runs
    path = resolve_model(plan.model_type)[1]
    common = {"model_type": path, "device": device}
    table, drift = {}, {}
    for name in TIMED:
        main = {}
        for dtype in dtypes:
            run = metric_call(name, predictions, references, dtype=dtype, **common)
            seconds, peak, result = timed(run, rounds, device)
            table[name, dtype] = {"seconds": seconds, "pairs_per_s": len(predictions) / seconds, "peak": peak}
            main[dtype] = result[MAIN_OUTPUTS[name]]
            log(f"done: {name} {dtype}")
        for dtype in dtypes:
            if dtype != "float32" and "float32" in main:
                gaps = [abs(a - b) for a, b in zip(main[dtype], main["float32"])]
                drift[name, dtype] = {"mean": statistics.fmean(gaps), "max": max(gaps)}
    peer = bert_score_call(predictions, references, path, device)
    if peer is not None:
        seconds, peak, _ = timed(peer[0], rounds, device)
        peer = {"version": peer[1], "seconds": seconds, "pairs_per_s": len(predictions) / seconds, "peak": peak}
    texts = distinct(predictions, references)
    batch_table = {}
    for dtype in dtypes:
        for name in BATCH_METRICS:
            for batch_size in BATCH_SIZES:
                run = metric_call(name, predictions, references, dtype=dtype, batch_size=batch_size, **common)
                batch_table[name, dtype, batch_size] = timed(run, rounds, device)[0]
    log("done: the batch table")
    seconds, _, _ = timed(floor(path, texts, FLOOR_TOKEN_BUDGET, device=device, dtype=FLOOR_DTYPE), rounds, device)
    floor_row = {"seconds": seconds, "pairs_per_s": len(predictions) / seconds, "texts": len(texts)}
    log("done: the floor")
    scale, scale_floor = {}, None
    if scale_pairs:
        texts = distinct_texts(segments, 2 * scale_pairs)
        scale_kwargs = {"dtype": scale_dtype, **common}
        with temporary_memory_budget(plan.scale_budget):
            for name in SCALE_METRICS:
                run = metric_call(name, texts[:scale_pairs], texts[scale_pairs:], **scale_kwargs)
                seconds, peak, _ = timed(run, 1, device)
                scale[name] = {"seconds": seconds, "pairs_per_s": scale_pairs / seconds, "peak": peak}
                log(f"done: {name} on {scale_pairs:,} pairs")
        seconds, _, _ = timed(floor(path, texts, FLOOR_TOKEN_BUDGET, device=device, dtype=FLOOR_DTYPE), 1, device)
        scale_floor = {"seconds": seconds, "pairs_per_s": scale_pairs / seconds, "texts": len(texts)}
    differences = {}
    few = predictions[: plan.check_pairs], references[: plan.check_pairs]
    for name in TIMED:
        on = {where: metric_call(name, *few, model_type=path, device=where)() for where in (device, "cpu")}
        main = MAIN_OUTPUTS[name]
        differences[name] = max(abs(a - b) for a, b in zip(on[device][main], on["cpu"][main]))
    return {
        "device": device_api().get_device_name(device),
        "torch": torch.__version__,
        "n_pairs": len(predictions),
        "rounds": rounds,
        "dtypes": list(dtypes),
        "table": table,
        "drift": drift,
        "batch_table": batch_table,
        "peer": peer,
        "scale": scale,
        "floor": floor_row,
        "scale_floor": scale_floor,
        "scale_pairs": scale_pairs,
        "scale_dtype": scale_dtype,
        "scale_budget": plan.scale_budget,
        "check_pairs": len(few[0]),
        "differences": differences,
    }


def format_report(report: dict) -> str:
    """Issue 34's table: seconds and pairs/s per metric and precision, then the peer, the scale
    run, the peak memory and the GPU-CPU differences."""
    dtypes = report["dtypes"]
    gib = 2**30
    floor_row = report["floor"]
    lines = [
        f"Metrics on {report['device']} (torch {report['torch']}), {report['n_pairs']:,} pairs, after a warm-up "
        f"call, median of {report['rounds']} calls; each cell's time as a multiple of the floor (x floor)",
        "",
        f"Floor: one Rust tokenizer call (encode_batch_fast) and the forward with {FLOOR_DTYPE} weights over the {floor_row['texts']:,} distinct "
        f"texts (batches of {FLOOR_TOKEN_BUDGET:,} padded tokens): {floor_row['seconds']:.3f} s "
        f"({floor_row['pairs_per_s']:,.0f} pairs/s)",
        "",
        "| metric | " + " | ".join(dtypes) + " | peak GPU memory |",
        "|---|" + "---:|" * len(dtypes) + "---:|",
    ]
    for name in TIMED:
        args = ", ".join(f"{k}={v!r}" for k, v in RUNS[name].items())
        cells = [report["table"][name, d] for d in dtypes]
        speeds = [
            f"{c['seconds']:.2f} s ({c['pairs_per_s']:,.0f} pairs/s, {c['seconds'] / floor_row['seconds']:.1f}x floor)"
            for c in cells
        ]
        peak = max(c["peak"] for c in cells) / gib
        lines.append(f"| {name}{f' ({args})' if args else ''} | " + " | ".join(speeds) + f" | {peak:.2f} GiB |")
    lines += ["", "Seconds per call by batch_size (padded tokens a forward pass: batch_size x 1,024):", ""]
    lines += ["| metric | dtype | " + " | ".join(f"batch_size={b}" for b in BATCH_SIZES) + " |"]
    lines += ["|---|---|" + "---:|" * len(BATCH_SIZES)]
    for name in BATCH_METRICS:
        for dtype in dtypes:
            cells = [f"{report['batch_table'][name, dtype, b]:.3f}" for b in BATCH_SIZES]
            lines.append(f"| {name} | {dtype} | " + " | ".join(cells) + " |")
    lines.append("")
    for (name, dtype), gap in report["drift"].items():
        lines.append(
            f"- {name} {dtype} against float32 on the GPU, main score: mean |diff| {gap['mean']:.1e}, "
            f"max {gap['max']:.1e}"
        )
    peer = report["peer"]
    if peer is None:
        lines.append("- bert-score: not installed, not timed")
    else:
        lines.append(
            f"- bert-score {peer['version']} (same weights and layer, batch_size=64, float32): {peer['seconds']:.2f} s "
            f"({peer['pairs_per_s']:,.0f} pairs/s), peak {peer['peak'] / gib:.2f} GiB"
        )
    scale_floor = report["scale_floor"]
    budget = "" if report.get("scale_budget") is None else f", memory budget {report['scale_budget']}"
    for name, row in report["scale"].items():
        lines.append(
            f"- {name} on {report['scale_pairs']:,} distinct pairs, {report['scale_dtype']}{budget}: {row['seconds']:.1f} s ({row['pairs_per_s']:,.0f} pairs/s, "
            f"{row['seconds'] / scale_floor['seconds']:.1f}x floor), peak {row['peak'] / gib:.2f} GiB"
        )
    if scale_floor is not None:
        lines.append(
            f"- the floor on those {scale_floor['texts']:,} texts: "
            f"{scale_floor['seconds']:.1f} s ({scale_floor['pairs_per_s']:,.0f} pairs/s)"
        )
    diffs = ", ".join(f"{name} {value:.1e}" for name, value in report["differences"].items())
    lines.append(f"- max |GPU float32 - CPU float32| of the main score on {report['check_pairs']} pairs: {diffs}")
    return "\n".join(lines)


def register(which) -> None:
    parser = command_parser(which, "gpu", HELP, command, limit=True)
    parser.add_argument("--model", help="Hugging Face id or local path (default: the embedded all-MiniLM-L6-v2)")
    parser.add_argument("--device", default="cuda", help="the CUDA device (default: cuda)")
    parser.add_argument("--dtypes", nargs="+", choices=DTYPES, help="precisions timed (default: all three)")
    parser.add_argument("--rounds", type=rounds, default=3, help="timed calls per cell (median reported)")
    parser.add_argument(
        "--scale-pairs", type=natural_int, default=SCALE_PAIRS, help="distinct pairs of the scale run (0: none)"
    )
    parser.add_argument("--scale-dtype", choices=DTYPES, default="float16", help="precision of the scale run")
    parser.add_argument(
        "--scale-budget",
        help="memory budget of the scale run, such as 8GB (default: half the device's free memory); "
        "one that cuts it times a chunked call",
    )
    parser.add_argument(
        "--check-pairs", type=positive_int, default=CHECK_PAIRS, help="pairs scored on GPU and CPU to compare"
    )


def command(args) -> int:
    from moverkit.judgments import read_judgments

    require_cuda()
    if args.scale_budget is not None:
        from moverkit._core.base import parse_size

        parse_size(args.scale_budget, "--scale-budget")  # before the long runs
    data = judgments(args)
    every = read_judgments(args.data)  # the scale run's texts come from every segment, whatever --limit
    segments = every.predictions + every.references
    report = measure(
        data.predictions,
        data.references,
        segments,
        GpuPlan(
            model_type=args.model,
            device=args.device,
            dtypes=args.dtypes or DTYPES,
            rounds=args.rounds,
            scale_pairs=args.scale_pairs,
            scale_dtype=args.scale_dtype,
            scale_budget=args.scale_budget,
            check_pairs=args.check_pairs,
        ),
        log=progress,
    )
    return emit(format_report(report), args.out)
