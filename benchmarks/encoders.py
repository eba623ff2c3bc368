"""``moverkit bench encoders``: the encoder table (docs/encoders.md), every metric at its defaults
(no argument but the model) on the embedded all-MiniLM-L6-v2 and each ``--model``:

- **Correlation**: Pearson r (and Kendall tau) with the human scores of ``--data`` (WMT17 DA, the
  five shared to-English pairs), one call per language pair, then the mean; the same on
  ``--unseen`` (fi-en, lv-en: nothing in moverkit is fitted on them). lazy_emd, a distance, is
  negated. Metrics that read the same token vectors (:func:`score_groups`) share a process
  with the cache of token clouds on (a score moves in its last digits only).
- **What ran**, from the hashcodes: the model's name (a folder known by its weights takes its Hub
  id), the layer and the centering (with the statistic's digest), the model's layers from its
  config, and the warnings the calls gave.
- **Throughput and peak memory**: a fresh process per encoder and metric makes a warm-up call on
  :data:`WARM_UP_PAIRS` pairs, then times ``--rounds`` calls (median, garbage collector off) on
  ``--speed-pairs`` pairs: pairs per second and the peak resident set (``ru_maxrss``, beside an
  import-only process's); again capped at AVX2 right after, and on a CUDA device in float32 and
  float16 where there is one. Timed processes run one at a time, after the scoring ones.

Every measurement runs in a subprocess (a JSON job on stdin, a JSON answer as the last line of
stdout). A metric whose defaults raise gets a row that says so (``--fallback-centering none``
runs it again with that centering, marked).
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks._shared import AVX2_ENV, child_environment, command_parser, cpu_model, judgments, peak_rss_bytes
from moverkit.facts.specs import spec
from moverkit.formats.options import METRICS, emit, positive_int, progress, rounds

HELP = "per encoder and metric (defaults): WMT17 Pearson, unseen pairs, layer, pairs/s (native, AVX2, GPU), peak memory"

EMBEDDED = "embedded"
"""The label and ``--model`` of the embedded all-MiniLM-L6-v2 (``model_type=None``)."""

SPEED_PAIRS = 200
CACHE_BYTES = "4GB"
"""The cache of token clouds in a scoring process (:func:`score_job`): room for every distinct text
of the WMT17 files at one layer of a 768-wide encoder, so that no text is dropped and encoded
again before the process's last metric has read it."""
WARM_UP_PAIRS = 16
"""Pairs of the untimed warm-up call (16: no few-texts warning)."""
WARNING_CHARS = 400
"""Characters of each warning the report quotes (the JSON keeps them whole)."""
GPU_DTYPES = ("float32", "float16")
NO_DEVICE = "no device this session"

HASHCODE = re.compile(r"^(?P<metric>\w+):(?P<model>.*)_L(?P<layer>-?\d+)_(?P<idf>[^_]+)_center=(?P<center>[^_]+)_")
"""The head of a hashcode (:func:`moverkit._core.call.closing.get_hash`): metric, model, the layer
used, the IDF tag and the centering (``corpus:<digest>`` where a statistic was used)."""


def ran(hashcode: str) -> dict:
    """``{"model", "layer", "idf", "centering"}`` as a result's hashcode names them (``layer`` an
    int; -1 for sentence vectors)."""
    found = HASHCODE.match(hashcode)
    if found is None:
        raise ValueError(f"not a moverkit hashcode: {hashcode[:120]!r}")
    return {
        "model": found["model"],
        "layer": int(found["layer"]),
        "idf": found["idf"],
        "centering": found["center"],
    }


def per_pair(data, n: int | None) -> dict[str, dict[str, list]]:
    """``{group: {"predictions", "references", "human"}}``: the first ``n`` rows of each group
    (all with ``None``), groups in their order of first appearance."""
    out = {}
    for group, members in data.by_group().items():
        kept = members if n is None else members[:n]
        out[group] = {
            "predictions": [data.predictions[i] for i in kept],
            "references": [data.references[i] for i in kept],
            "human": [data.human[i] for i in kept],
        }
    return out


def speed_subset(groups: dict[str, dict[str, list]], n: int) -> tuple[list[str], list[str]]:
    """``n`` pairs: the first ``ceil(n / groups)`` of each group, in turn, cut to ``n``."""
    each = math.ceil(n / len(groups))
    predictions = [p for g in groups.values() for p in g["predictions"][:each]][:n]
    references = [r for g in groups.values() for r in g["references"][:each]][:n]
    return predictions, references


# ---------------------------------------------------------------------------------------------
# The jobs a subprocess runs


def _score_function(metric: str):
    from moverkit.integrations.registry import REGISTRY

    return REGISTRY[metric].function


def _model_type(model: str) -> str | None:
    return None if model == EMBEDDED else model


def _is_centering_error(err: Exception) -> bool:
    return isinstance(err, ValueError) and "centering" in str(err)


def _model_facts(model: str) -> dict:
    """Layers and width of ``model`` from its config (no weights loaded)."""
    from transformers import AutoConfig

    from moverkit._core import embedded_model_path

    config = AutoConfig.from_pretrained(embedded_model_path() if model == EMBEDDED else model)
    return {
        "layers": getattr(config, "num_hidden_layers", None),
        "hidden_size": getattr(config, "hidden_size", None),
        "model_kind": getattr(config, "model_type", None),
    }


def _score_metric(metric: str, output: str, model_type, sets: dict, fallback: str | None) -> dict:
    """One metric on every group of every set, one call a group, at the defaults (or with the
    centering ``fallback`` from the first call whose defaults raise a centering error on)."""
    import time

    score = _score_function(metric)
    kwargs: dict = {}
    answer: dict = {"scores": {}, "hashcodes": [], "fallback": None}
    start = time.perf_counter()
    for name, groups in sets.items():
        answer["scores"][name] = {}
        for group, texts in groups.items():
            pairs = texts["predictions"], texts["references"]
            try:
                result = score(*pairs, model_type=model_type, **kwargs)
            except Exception as err:
                if not (_is_centering_error(err) and fallback and not kwargs):
                    return {"error": f"{type(err).__name__}: {err}"}
                answer["fallback"] = f"{type(err).__name__}: {err}"
                kwargs = {"centering": fallback}
                result = score(*pairs, model_type=model_type, **kwargs)
            answer["scores"][name][group] = [float(v) for v in result[output]]
            if result["hashcode"] not in answer["hashcodes"]:
                answer["hashcodes"].append(result["hashcode"])
    return {**answer, "kwargs": kwargs, "seconds": time.perf_counter() - start}


def score_job(job: dict) -> dict:
    """The metrics ``job["metrics"]`` (``{metric: output}``) on one encoder, in turn, with the
    cache of token clouds on (:data:`CACHE_BYTES`), so that metrics that read the same layer
    encode each distinct text once: per metric, the scores of each group of each set (one call a
    group), what the hashcodes say ran, the seconds; the warnings the calls gave, once each."""
    import warnings

    import moverkit

    moverkit.set_cache(job.get("cache", CACHE_BYTES))
    model_type = _model_type(job["model"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        answers = {
            metric: _score_metric(metric, output, model_type, job["sets"], job.get("fallback"))
            for metric, output in job["metrics"].items()
        }
    for warning in caught:
        print(f"{warning.category.__name__}: {warning.message}", file=sys.stderr)
    return {
        "metrics": answers,
        "warnings": list(dict.fromkeys(f"{w.category.__name__}: {w.message}" for w in caught)),
        "facts": _model_facts(job["model"]),
    }


def time_job(job: dict) -> dict:
    """One metric on one encoder (``job["kwargs"]`` beside the model), in this fresh process: a
    warm-up call on :data:`WARM_UP_PAIRS` pairs, then ``job["rounds"]`` timed calls on the pairs
    (median seconds), on ``job["device"]`` in each of ``job["dtypes"]`` (each warmed and timed in
    turn); this process's peak resident memory, and its ISA line."""
    import gc
    import time

    from benchmarks._shared import machine_isa

    predictions, references, device = job["predictions"], job["references"], job["device"]
    sync = lambda: None  # noqa: E731
    if device != "cpu":
        import torch

        sync = torch.cuda.synchronize
    score = _score_function(job["metric"])
    seconds = {}
    for dtype in job["dtypes"]:
        kwargs = {"model_type": _model_type(job["model"]), "device": device, "dtype": dtype, **job["kwargs"]}
        score(predictions[:WARM_UP_PAIRS], references[:WARM_UP_PAIRS], **kwargs)
        sync()
        times = []
        gc.collect()
        gc.disable()  # as timeit does: a collection of the warm-up's garbage lands outside the timing
        try:
            for _ in range(job["rounds"]):
                start = time.perf_counter()
                score(predictions, references, **kwargs)
                sync()
                times.append(time.perf_counter() - start)
        finally:
            gc.enable()
        seconds[dtype] = statistics.median(times)
    return {"seconds": seconds, "pairs": len(predictions), "peak_rss": peak_rss_bytes(), "isa": machine_isa()}


def import_job(job: dict) -> dict:
    """The peak memory of a process that imports what a metric call needs, and whether a CUDA
    device is there (its name)."""
    import torch
    import transformers

    import moverkit.functional  # noqa: F401

    cuda = torch.cuda.is_available()
    return {
        "peak_rss": peak_rss_bytes(),
        "cuda": torch.cuda.get_device_name(0) if cuda else None,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }


JOBS = {"score": score_job, "time": time_job, "import": import_job}


def child(job: dict, env: dict[str, str] | None = None) -> dict:
    """``job`` run in a fresh Python process (:func:`_main`; its environment plus ``env``): its
    answer, the last line of its stdout (its stderr is this process's). A failed process is a
    ``RuntimeError``."""
    done = subprocess.run(
        [sys.executable, "-c", "from benchmarks.encoders import _main; _main()"],
        input=json.dumps(job),
        env=child_environment(env),
        stdout=subprocess.PIPE,
        text=True,
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(
            f"bench encoders: the {job['kind']} job failed (exit {done.returncode}; its stderr is above)"
        )
    return json.loads(lines[-1])


# ---------------------------------------------------------------------------------------------
# The whole run


def _correlations(metric: str, answer: dict, sets: dict) -> dict:
    """``{set: {group: {"pearson", "kendall"}, "avg": ...}}`` of one metric's scores (a
    distance's negated)."""
    from moverkit.facts.specs import spec
    from moverkit.judgments.correlation import correlate

    sign = 1.0 if spec(metric).higher_is_better else -1.0
    correlations = {}
    for name, groups in sets.items():
        per_group = {}
        for group, data in groups.items():
            r, tau = correlate(answer["scores"][name][group], data["human"])
            per_group[group] = {"pearson": sign * r, "kendall": sign * tau}
        per_group["avg"] = {k: statistics.fmean(v[k] for v in per_group.values()) for k in ("pearson", "kendall")}
        correlations[name] = per_group
    return correlations


def score_groups(metrics: list[str]) -> list[list[str]]:
    """``metrics`` in the processes that score them, in the order of ``metrics``: the token-level
    metrics that read the same layer (their spec's ``level`` and ``default_layer``) together, in one
    process with the cache of token clouds on, so that they read the same token vectors; every other
    metric alone (a sentence-level one encodes sentences with sentence-transformers; moverscore's
    layer, the last, is not the default of every model). A grouping only saves time: it changes no
    figure beyond the cache's last digits."""
    groups: dict[tuple, list[str]] = {}
    for name in metrics:
        s = spec(name)
        groups.setdefault(("layer", s.default_layer) if s.level == "token" else ("alone", name), []).append(name)
    return list(groups.values())


def measure(
    sets: dict[str, dict[str, dict[str, list]]],
    models: list[str],
    metrics: list[str],
    *,
    speed_pairs: int = SPEED_PAIRS,
    rounds: int = 1,
    avx2: bool = True,
    fallback: str | None = None,
    jobs: int = 1,
    log=lambda line: None,
) -> dict:
    """Everything the report shows (see the module doc). ``sets``: ``{"shared"|"unseen": groups}``
    as :func:`per_pair` gives them; the throughput subset is taken from ``sets["shared"]``. Up to
    ``jobs`` scoring processes run at once; the timed processes run one at a time, after them."""
    from concurrent.futures import ThreadPoolExecutor

    from benchmarks import MAIN_OUTPUTS

    texts = {
        name: {g: {k: v[k] for k in ("predictions", "references")} for g, v in s.items()} for name, s in sets.items()
    }
    plan = [(model, group) for model in models for group in score_groups(metrics)]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        base = pool.submit(child, {"kind": "import"})
        futures = [
            pool.submit(
                child,
                {
                    "kind": "score",
                    "model": model,
                    "metrics": {m: MAIN_OUTPUTS[m] for m in group},
                    "sets": texts,
                    "fallback": fallback,
                },
            )
            for model, group in plan
        ]
        base = base.result()
        log(f"import floor: {base['peak_rss'] / 2**20:.0f} MiB")
        answers, warned, facts = {}, {model: [] for model in models}, {}
        for (model, group), future in zip(plan, futures):
            answer = future.result()
            facts[model] = answer["facts"]
            warned[model] += [w for w in answer["warnings"] if w not in warned[model]]
            for metric in group:
                answers[metric, model] = answer["metrics"][metric]
                done = answers[metric, model]
                log(f"{metric} on {model}: " + (done["error"] if "error" in done else f"{done['seconds']:.0f} s"))
    cells = []
    for metric in metrics:
        for model in models:
            answer = answers[metric, model]
            cell = {"model": model, "metric": metric}
            if "error" in answer:
                cells.append({**cell, "error": answer["error"]})
                continue
            cell.update(
                correlations=_correlations(metric, answer, sets),
                ran=[ran(h) for h in answer["hashcodes"]],
                hashcodes=answer["hashcodes"],
                kwargs=answer["kwargs"],
                fallback=answer["fallback"],
                seconds=answer["seconds"],
                facts=facts[model],
            )
            cells.append(cell)
    predictions, references = speed_subset(sets["shared"], speed_pairs)
    timing = {"kind": "time", "predictions": predictions, "references": references, "rounds": rounds}
    columns = [("cpu", {}, "cpu", ["float32"])]
    if avx2:
        columns.append(("avx2", AVX2_ENV, "cpu", ["float32"]))
    if base["cuda"]:
        columns.append(("gpu", {}, "cuda", list(GPU_DTYPES)))
    isa = {}
    for cell in cells:
        cell["pairs_per_s"] = {}
        if "error" in cell:
            continue
        for column, env, device, dtypes in columns:
            job = {**timing, "model": cell["model"], "metric": cell["metric"], "kwargs": cell["kwargs"]}
            answer = child({**job, "device": device, "dtypes": dtypes}, env)
            isa.setdefault(column, answer["isa"])
            for dtype, seconds in answer["seconds"].items():
                cell["pairs_per_s"][f"{column}:{dtype}"] = answer["pairs"] / seconds
            if column == "cpu":
                cell["peak_rss"] = answer["peak_rss"]
        log(
            f"timed: {cell['metric']} on {cell['model']} ({', '.join(f'{k} {v:.1f}' for k, v in cell['pairs_per_s'].items())} pairs/s)"
        )
    return {
        "cells": cells,
        "models": models,
        "metrics": metrics,
        "groups": {name: list(groups) for name, groups in sets.items()},
        "sizes": {name: sum(len(g["human"]) for g in groups.values()) for name, groups in sets.items()},
        "speed_pairs": len(predictions),
        "rounds": rounds,
        "import_peak_rss": base["peak_rss"],
        "cuda": base["cuda"],
        "versions": {"torch": base["torch"], "transformers": base["transformers"]},
        "isa": isa,
        "cpu": cpu_line(),
        "fallback": fallback,
        "warnings": warned,
        "facts": facts,
    }


def cpu_line() -> str:
    """The CPU (:func:`~benchmarks._shared.cpu_model`), its AVX-512 and AMX flags, and its
    logical CPUs."""
    from moverkit._core.base import cpu_flags

    flags = cpu_flags()
    avx512 = ", ".join(sorted(f for f in flags if f.startswith("avx512"))) or "none"
    amx = ", ".join(sorted(f for f in flags if f.startswith("amx"))) or "none"
    return f"{cpu_model()}; AVX-512: {avx512}; AMX: {amx}; {os.cpu_count()} logical CPUs"


# ---------------------------------------------------------------------------------------------
# The report


def model_label(model: str) -> str:
    return "all-MiniLM-L6-v2 (embedded)" if model == EMBEDDED else Path(model).name or model


def layer_cell(cell: dict) -> str:
    layers = sorted({r["layer"] for r in cell["ran"]})
    if layers == [-1]:
        return "sentence vector"
    total = cell["facts"]["layers"]
    return ", ".join(f"{layer} of {total}" for layer in layers)


def centering_cell(cell: dict) -> str:
    found = ", ".join(sorted({r["centering"] for r in cell["ran"]}))
    return f"{found} (fallback)" if cell.get("fallback") else found


def _pearson(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{100 * value:.2f}"


def format_report(report: dict) -> str:
    """Markdown: the correlation table, the cost table, and the lines that say how it was run."""
    shared, unseen = report["groups"]["shared"], report["groups"].get("unseen", [])
    head = ["metric", "encoder", "layer", "centering", *shared, "avg"]
    if unseen:
        head += [*unseen, "avg unseen"]
    lines = [
        f"Pearson r x100 with the human scores (WMT17 segment-level DA), per language pair and its mean: "
        f"{report['sizes']['shared']:,} pairs of the shared file"
        + (f", and {report['sizes']['unseen']:,} of unseen pairs (nothing fitted or tuned on them)" if unseen else "")
        + "; every metric at its defaults; lazy_emd (a distance) negated",
        "",
        "| " + " | ".join(head) + " |",
        "|---|---|---|---|" + "---:|" * (len(head) - 4),
    ]
    for cell in report["cells"]:
        label = f"| {cell['metric']} | {model_label(cell['model'])} |"
        if "error" in cell:
            lines.append(f"{label} fails: {cell['error'].splitlines()[0][:160]} |" + " |" * (len(head) - 3))
            continue
        values = [cell["correlations"]["shared"][g]["pearson"] for g in [*shared, "avg"]]
        if unseen:
            values += [cell["correlations"]["unseen"][g]["pearson"] for g in [*unseen, "avg"]]
        lines.append(
            f"{label} {layer_cell(cell)} | {centering_cell(cell)} | " + " | ".join(map(_pearson, values)) + " |"
        )
    mib = 2**20
    gpu = report["cuda"]
    rounds = report["rounds"]
    lines += [
        "",
        f"Throughput: pairs/s of one call over {report['speed_pairs']} pairs (the first of each shared language "
        f"pair), {'the median of ' + str(rounds) + ' calls' if rounds > 1 else 'one call'} after a warm-up call, "
        "in a fresh process per encoder, metric and column; peak memory: that process's peak resident set "
        "(native CPU column)",
        "",
        "| metric | encoder | CPU pairs/s | AVX2 pairs/s | AVX2 / native | peak memory (MiB) | "
        "GPU float32 pairs/s | GPU float16 pairs/s |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for cell in report["cells"]:
        speeds = cell.get("pairs_per_s", {})
        native, capped = speeds.get("cpu:float32"), speeds.get("avx2:float32")
        ratio = f"{capped / native:.2f}" if native and capped else "–"
        gpu_cells = [
            (f"{speeds[f'gpu:{d}']:,.0f}" if f"gpu:{d}" in speeds else "–") if gpu else NO_DEVICE for d in GPU_DTYPES
        ]
        peak = f"{cell['peak_rss'] / mib:,.0f}" if "peak_rss" in cell else "–"
        lines.append(
            f"| {cell['metric']} | {model_label(cell['model'])} | "
            f"{f'{native:,.1f}' if native else '–'} | {f'{capped:,.1f}' if capped else '–'} | {ratio} | "
            f"{peak} | " + " | ".join(gpu_cells) + " |"
        )
    lines += ["", f"- CPU: {report['cpu']}"]
    lines += [f"- {column}: {line}" for column, line in report["isa"].items()]
    lines.append(f"- GPU: {gpu or NO_DEVICE}")
    lines.append(
        f"- a process that only imports torch {report['versions']['torch']}, transformers "
        f"{report['versions']['transformers']} and moverkit peaks at {report['import_peak_rss'] / mib:,.0f} MiB"
    )
    for model in report["models"]:
        facts = report["facts"].get(model)
        names = sorted({r["model"] for c in report["cells"] if c["model"] == model for r in c.get("ran", [])})
        if facts:
            lines.append(
                f"- {model_label(model)}: {facts['model_kind']}, {facts['layers']} layers, {facts['hidden_size']} "
                f"wide; named {', '.join(names) or '–'} in the hashcodes"
            )
        for warning in report["warnings"].get(model, []):
            lines.append(f"  - warned: {warning.splitlines()[0][:WARNING_CHARS]}")
    if report["fallback"]:
        lines.append(
            f"- rows marked (fallback): the defaults raised, and the row was run with centering={report['fallback']!r}"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# The command


def register(which) -> None:
    parser = command_parser(
        which, "encoders", HELP, command, data="TSV of the shared pairs: lp, hypothesis, reference, human (required)"
    )
    parser.add_argument(
        "--unseen", type=Path, help="TSV of pairs nothing was fitted on (data/wmt17_seg_da_unseen.tsv: fi-en, lv-en)"
    )
    parser.add_argument(
        "--model",
        action="repeat",
        help="a local model folder or Hugging Face id, beside the embedded model (repeatable)",
    )
    parser.add_argument("--no-embedded", action="store_true", help="leave the embedded all-MiniLM-L6-v2 out")
    parser.add_argument("--metrics", nargs="+", choices=METRICS, help="metrics (default: all five)")
    parser.add_argument("--per-pair", type=positive_int, help="use only the first N rows of each language pair")
    parser.add_argument(
        "--speed-pairs",
        type=positive_int,
        default=SPEED_PAIRS,
        help=f"pairs of the timed call (default: {SPEED_PAIRS})",
    )
    parser.add_argument("--rounds", type=rounds, default=1, help="timed calls per process (median reported; default 1)")
    parser.add_argument("--no-avx2", action="store_true", help="skip the throughput run capped at AVX2")
    parser.add_argument(
        "--fallback-centering",
        choices=("none", "batch"),
        help="where a metric's default centering raises on an encoder, run it with this one (the row says so)",
    )
    parser.add_argument(
        "--jobs",
        type=positive_int,
        default=1,
        help="scoring processes at once (default 1; the timed ones always run alone)",
    )
    parser.add_argument("--json", type=Path, help="also write every figure here (JSON)")


def command(args) -> int:
    from moverkit.formats.lines import check_out, write_atomic
    from moverkit.judgments import read_judgments

    data = judgments(args, "json", limit=False)
    sets = {"shared": per_pair(data, args.per_pair)}
    if args.unseen is not None:
        check_out(args.out, [args.unseen], "--out")
        check_out(args.json, [args.unseen], "--json")
        sets["unseen"] = per_pair(read_judgments(args.unseen), args.per_pair)
    models = ([] if args.no_embedded else [EMBEDDED]) + list(args.model)
    if not models:
        raise ValueError("bench encoders: no encoder (--no-embedded and no --model)")
    report = measure(
        sets,
        models,
        list(args.metrics or METRICS),
        speed_pairs=args.speed_pairs,
        rounds=args.rounds,
        avx2=not args.no_avx2,
        fallback=args.fallback_centering,
        jobs=args.jobs,
        log=progress,
    )
    if args.json:
        write_atomic(args.json, json.dumps(report, indent=1) + "\n")
    return emit(format_report(report), args.out)


def _main() -> None:
    job = json.loads(sys.stdin.read())
    print(json.dumps(JOBS[job["kind"]](job)), flush=True)


if __name__ == "__main__":
    _main()
