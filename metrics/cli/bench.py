"""``moverkit bench ...``: the benchmarks behind the README's and the cards' figures
(:mod:`moverkit.bench`), one subcommand each."""

from __future__ import annotations

import os
from pathlib import Path

from . import bench_device
from .options import METRICS, emit, positive_int, progress, require_data


def register(commands) -> None:
    bench = commands.add_parser("bench", help="benchmarks: correlation with humans, speed, system level, ...")
    which = bench.add_subparsers(dest="bench", required=True)
    for add in (
        _correlation,
        _speed,
        _precision,
        _quantized,
        _cache,
        _scale,
        _shuffled,
        _system_level,
        _compare_cost,
        _combination,
        _tune,
        bench_device.overhead,
        bench_device.gpu,
    ):
        add(which)


def _data_options(parser, what: str = "TSV with columns lp, hypothesis, reference, human (required)") -> None:
    parser.add_argument("--data", type=Path, help=what)
    parser.add_argument("--out", type=Path, help="also write the report here (Markdown)")


def _correlation(which) -> None:
    corr = which.add_parser("correlation", help="Pearson and Kendall per group with human judgments")
    _data_options(corr)
    corr.add_argument("--limit", type=positive_int, help="use only the first N rows")
    corr.add_argument("--rows", nargs="*", help="row labels to run (default: all; see --list)")
    corr.add_argument("--list", action="store_true", help="list the row labels and exit")
    corr.set_defaults(run=run_correlation)


def run_correlation(args) -> int:
    from moverkit.bench import registry
    from moverkit.bench.correlation import correlation_table, format_table
    from moverkit.judgments import read_judgments
    from moverkit.lines import check_out

    rows, _ = registry()
    if args.list:
        print("\n".join(f"{r.label}\t{r.metric}.{r.output} {r.kwargs}" for r in rows))
        return 0
    require_data(args)
    check_out(args.out, [args.data])
    if args.rows:
        missing = sorted(set(args.rows) - {r.label for r in rows})
        if missing:
            raise ValueError(f"unknown row(s) {', '.join(missing)}; see 'moverkit bench correlation --list'")
        rows = [r for r in rows if r.label in args.rows]
    data = read_judgments(args.data, limit=args.limit)
    report = format_table(correlation_table(rows, data, log=progress), rows)
    header = f"Kendall tau / Pearson r (x100) with human judgments of {args.data.name} ({len(data.human)} segments)"
    return emit(f"{header}\n\n{report}", args.out)


def _speed(which) -> None:
    speed = which.add_parser("speed", help="time metrics side by side against the encoder and peers")
    _data_options(speed)
    speed.add_argument("--limit", type=positive_int, help="use only the first N rows")
    speed.add_argument("--suite", nargs="*", help="run only these suites, by key (--list shows the keys)")
    speed.add_argument("--repeats", type=positive_int, default=3, help="timed rounds (median reported)")
    speed.add_argument("--list", action="store_true", help="list the suites and their contenders and exit")
    speed.set_defaults(run=run_speed)


def run_speed(args) -> int:
    from moverkit.bench import registry
    from moverkit.bench.speed import format_report, run_suite
    from moverkit.judgments import read_judgments
    from moverkit.lines import check_out

    _, suites = registry()
    if args.suite:
        unknown = sorted(set(args.suite) - {s.key for s in suites})
        if unknown:
            raise ValueError(
                f"--suite: no suite {', '.join(unknown)}; the suites are {', '.join(s.key for s in suites)}"
            )
        suites = [s for s in suites if s.key in args.suite]
    if args.list:
        print("\n".join(f"{s.key}\t{s.name}\t{', '.join(s.contenders)}" for s in suites))
        return 0
    require_data(args)
    check_out(args.out, [args.data])
    data = read_judgments(args.data, limit=args.limit)
    reports = [format_report(run_suite(s, data.predictions, data.references, args.repeats)) for s in suites]
    return emit("\n\n".join(reports), args.out)


def _precision(which) -> None:
    precision = which.add_parser("precision", help="float32 vs bfloat16 encoder: speed, score change, correlation")
    _data_options(precision)
    precision.add_argument("--limit", type=positive_int, help="use only the first N rows")
    precision.add_argument("--metrics", nargs="*", choices=METRICS, help="metrics to measure (default: all five)")
    precision.add_argument("--rounds", type=positive_int, default=3, help="interleaved timed rounds (median reported)")
    _cap_options(precision)
    precision.set_defaults(run=run_precision)


def _cap_options(parser) -> None:
    cap = parser.add_mutually_exclusive_group()
    cap.add_argument(
        "--avx2",
        action="store_true",
        help="run limited to AVX2 (ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2), in a subprocess",
    )
    cap.add_argument("--strict-avx2", action="store_true", help="as --avx2, and MKL and FBGEMM limited to AVX2 too")


def _caps(args) -> dict[str, str] | None:
    """The environment caps of --avx2 / --strict-avx2, or None to run in this process."""
    from moverkit.bench.quantized import AVX2_ENV, STRICT_AVX2_ENV

    return AVX2_ENV if args.avx2 else STRICT_AVX2_ENV if args.strict_avx2 else None


def run_precision(args) -> int:
    from moverkit.bench import precision
    from moverkit.judgments import read_judgments
    from moverkit.lines import check_out

    require_data(args)
    caps = _caps(args)
    if caps:
        argv = ["bench", "precision", "--data", str(args.data), "--rounds", str(args.rounds)]
        argv += ["--limit", str(args.limit)] if args.limit else []
        argv += ["--metrics", *args.metrics] if args.metrics else []
        argv += ["--out", str(args.out)] if args.out else []
        return precision.run_capped(argv, caps)
    check_out(args.out, [args.data])
    data = read_judgments(args.data, limit=args.limit)
    rows = []
    for metric in args.metrics or METRICS:
        rows.append(precision.measure(metric, data, rounds=args.rounds))
        progress(f"done: {metric}")
    return emit(precision.format_table(rows), args.out)


def _quantized(which) -> None:
    quantized = which.add_parser(
        "quantized", help="int8 and ONNX Runtime paths of the encoder vs float32: speed, |delta F1|, Pearson"
    )
    _data_options(quantized)
    quantized.add_argument("--n-texts", type=positive_int, default=1200, help="texts timed per path (half references)")
    quantized.add_argument("--n-pairs", type=positive_int, default=1400, help="pairs scored per path")
    quantized.add_argument("--rounds", type=positive_int, default=2, help="interleaved timed rounds (best kept)")
    _cap_options(quantized)
    quantized.set_defaults(run=run_quantized)


def run_quantized(args) -> int:
    from moverkit.bench import quantized
    from moverkit.bench.precision import run_capped
    from moverkit.lines import check_out

    require_data(args)
    check_out(args.out, [args.data])
    sizes = ["--n-texts", str(args.n_texts), "--n-pairs", str(args.n_pairs), "--rounds", str(args.rounds)]
    caps = _caps(args)
    if caps:
        out = ["--out", str(args.out)] if args.out else []
        return run_capped(["bench", "quantized", "--data", str(args.data), *sizes, *out], caps)
    report = quantized.report(str(args.data), n_texts=args.n_texts, n_pairs=args.n_pairs, rounds=args.rounds)
    return emit(report, args.out)


def _cache(which) -> None:
    cache = which.add_parser("cache", help="an evaluation loop (fixed references, new predictions) with the cache on")
    _data_options(cache)
    cache.add_argument("--metric", choices=METRICS, default="centered_bertscore", help="(default: centered_bertscore)")
    cache.add_argument(
        "--references", type=positive_int, default=1000, help="references of every evaluation (default: 1000)"
    )
    cache.add_argument("--evaluations", type=positive_int, default=5, help="evaluations in the loop (default: 5)")
    cache.add_argument(
        "--rounds", type=positive_int, default=1, help="times the loop runs (median per evaluation reported)"
    )
    cache.set_defaults(run=run_cache)


def run_cache(args) -> int:
    from moverkit.bench import cache_loop
    from moverkit.judgments import read_judgments
    from moverkit.lines import check_out

    require_data(args)
    check_out(args.out, [args.data])
    report = cache_loop.run(read_judgments(args.data), args.metric, args.references, args.evaluations, args.rounds)
    return emit(cache_loop.format_report(report), args.out)


def _scale(which) -> None:
    scale = which.add_parser("scale", help="wall time and peak RSS of one call at growing numbers of distinct pairs")
    _data_options(scale, "TSV of judgments whose segments make the texts (required)")
    scale.add_argument("--sizes", type=positive_int, nargs="+", help="numbers of pairs (default: 1000 10000 100000)")
    scale.add_argument(
        "--runs",
        nargs="+",
        help="METRIC:CENTERING runs (default: centered_bertscore and twmd, each with batch and corpus centering)",
    )
    scale.add_argument("--memory-budget", help="moverkit.set_memory_budget for the runs (default: the default)")
    scale.set_defaults(run=run_scale)


def run_scale(args) -> int:
    from moverkit._core.sizes import parse_size
    from moverkit.bench import scale
    from moverkit.lines import check_out

    require_data(args)
    check_out(args.out, [args.data])
    if not args.data.is_file():
        raise ValueError(f"--data {args.data}: no such file")
    if args.memory_budget is not None:
        parse_size(args.memory_budget, "--memory-budget")  # before a child process is started
    runs = scale.RUNS if not args.runs else tuple(scale.parse_run(run) for run in args.runs)
    rows = scale.run(args.data, tuple(args.sizes or scale.SIZES), runs, memory_budget=args.memory_budget, log=progress)
    return emit(scale.format_table(rows), args.out)


def _shuffled(which) -> None:
    shuffled = which.add_parser(
        "shuffled", help="share of pairs where each metric scores the true reference above another pair's"
    )
    _data_options(shuffled)
    shuffled.add_argument("--pairs", type=positive_int, default=400, help="pairs drawn at random (default: 400)")
    shuffled.add_argument("--seed", type=int, default=0, help="seed of the draw and of the shuffle (default: 0)")
    shuffled.set_defaults(run=run_shuffled)


def run_shuffled(args) -> int:
    from moverkit.bench import shuffled
    from moverkit.judgments import read_judgments
    from moverkit.lines import check_out

    require_data(args)
    check_out(args.out, [args.data])
    rows = shuffled.run(read_judgments(args.data), pairs=args.pairs, seed=args.seed)
    header = (
        f"True reference against another pair's (a derangement, seed {args.seed}) on {args.pairs} pairs of "
        f"{args.data.name}, each metric with its default arguments"
    )
    return emit(f"{header}\n\n{shuffled.format_table(rows)}", args.out)


def _system_level(which) -> None:
    system = which.add_parser(
        "system-level", help="WMT17 to-English systems: Pearson, pairwise accuracy and significant decisions"
    )
    system.add_argument(
        "--wmt17",
        type=Path,
        help="read the full WMT17/ folder of AIPHES/ACL20-Reference-Free-MT-Evaluation (references/, "
        "system-outputs/, DA-syslevel.csv) instead of the shipped extract (its first 500 segments)",
    )
    system.add_argument(
        "--metrics",
        nargs="+",
        choices=METRICS,
        help="metrics to score (default: all five; with --per-system-batch: centered_bertscore and twmd)",
    )
    system.add_argument(
        "--segments",
        type=positive_int,
        help="score only the first N segments of each test set (default: all the data holds: 500 in the shipped extract)",
    )
    system.add_argument("--resamples", type=positive_int, default=1000, help="paired bootstrap resamples")
    system.add_argument("--seed", type=int, default=0, help="seed of moverkit's bootstrap (default: 0)")
    system.add_argument(
        "--per-system-batch",
        action="store_true",
        help='instead of the table: centering="batch" in one call per system against one call per language pair '
        "(system scores, Pearson, pairwise accuracy)",
    )
    system.add_argument("--out", type=Path, help="also write the table here (Markdown)")
    system.set_defaults(run=run_system_level)


def run_system_level(args) -> int:
    from moverkit.bench import system_level as bench
    from moverkit.lines import check_out

    check_out(args.out, [])
    if args.wmt17 is None:
        test_sets = bench.read_shipped(segments=args.segments)
        source = "the shipped extract"
    else:
        test_sets = bench.read_wmt17(args.wmt17, segments=args.segments)
        source = str(args.wmt17)
    n = {len(t.references) for t in test_sets}
    header = (
        f"WMT17 to-English ({source}), {sum(len(t.outputs) for t in test_sets)} systems, "
        f"{'all' if args.segments is None and args.wmt17 is not None else f'the first {max(n)}'} segments of each test set"
    )
    if args.per_system_batch:
        metrics = list(args.metrics or bench.PER_SYSTEM_METRICS)
        runs = bench.per_system_batch(test_sets, metrics, log=progress)
        report = bench.format_centering_effect(bench.centering_effect(runs, test_sets))
        return emit(f"{header}\n\n{report}", args.out)
    scores = bench.score_test_sets(test_sets, list(args.metrics or METRICS))
    table = bench.system_level(scores, test_sets, resamples=args.resamples, seed=args.seed)
    return emit(f"{header}\n\n{bench.format_table(table)}", args.out)


def _compare_cost(which) -> None:
    cost = which.add_parser(
        "compare-cost", help="moverkit.compare against encoding its distinct texts once, side by side"
    )
    cost.add_argument(
        "--metrics", nargs="+", choices=METRICS, help="metrics to time (default: centered_bertscore and twmd)"
    )
    cost.add_argument("--systems", type=positive_int, default=10, help="systems compared (default: 10)")
    cost.add_argument("--segments", type=positive_int, default=500, help="segments of each system (default: 500)")
    cost.add_argument("--resamples", type=positive_int, default=1000, help="compare's resamples (default: 1000)")
    cost.add_argument("--rounds", type=positive_int, default=3, help="interleaved timed rounds (median reported)")
    cost.add_argument(
        "--threads", type=positive_int, default=1, help="torch threads (default: 1, as the published figures)"
    )
    cost.add_argument("--out", type=Path, help="also write the table here (Markdown)")
    cost.set_defaults(run=run_compare_cost)


def run_compare_cost(args) -> int:
    import torch

    from moverkit.bench import compare_cost
    from moverkit.bench.system_level import read_shipped
    from moverkit.lines import check_out

    check_out(args.out, [])
    cores = os.cpu_count() or 1
    if args.threads > cores:  # torch.set_num_threads(999999) crashed the process
        raise ValueError(f"--threads {args.threads}: this machine has {cores} cores")
    torch.set_num_threads(args.threads)
    workload = compare_cost.pick_workload(read_shipped(), systems=args.systems, segments=args.segments)
    rows = []
    for metric in args.metrics or ("centered_bertscore", "twmd"):
        rows.append(compare_cost.measure(metric, workload, rounds=args.rounds, resamples=args.resamples))
        progress(f"done: {metric}")
    return emit(compare_cost.format_table(rows, workload, resamples=args.resamples), args.out)


def _combination(which) -> None:
    combo = which.add_parser(
        "combination",
        help="a calibrated combination of metrics against each metric alone, leaving one language pair out",
    )
    _data_options(combo)
    combo.add_argument(
        "--scores-cache",
        type=Path,
        help="JSON file keeping the metrics' segment scores (read where it holds them, written as they are computed)",
    )
    combo.add_argument("--json", type=Path, help="also write the results here (JSON)")
    combo.set_defaults(run=run_combination)


def run_combination(args) -> int:
    import json

    from moverkit.bench import combination as bench
    from moverkit.bench.system_level import read_shipped
    from moverkit.judgments import read_judgments
    from moverkit.lines import check_out, write_atomic

    require_data(args)
    check_out(args.out, [args.data])
    check_out(args.json, [args.data, args.out], "--json")
    check_out(args.scores_cache, [args.data, args.out, args.json], "--scores-cache")
    components = bench.COMBINATIONS["combination (all 7)"]
    data = read_judgments(args.data)
    features = bench.segment_features(data, components, args.scores_cache, log=progress)
    segment = bench.segment_bench(data, features, bench.COMBINATIONS)
    test_sets = read_shipped()
    metrics = [c for c in components if c not in bench.ANCHORS]
    segments = bench.system_segment_scores(test_sets, metrics, args.scores_cache, log=progress)
    system = bench.system_bench(test_sets, segments, bench.COMBINATIONS)
    report = [
        f"Segment level: {args.data.name} ({len(data.human)} segments), each language pair scored by the "
        "combination fitted on the others",
        bench.format_segment(segment),
        bench.format_weights(segment["weights"], "segment"),
        f"System level: the shipped WMT17 extract ({sum(len(t.outputs) for t in test_sets)} systems, the first "
        f"{len(test_sets[0].references)} segments of each test set); a fit pair scored by the combination fitted on "
        "the other fit pairs, an unseen pair by the one fitted on all of them",
        bench.format_system(system),
        bench.format_weights(system["weights"], "system"),
    ]
    if args.json:
        write_atomic(args.json, json.dumps({"segment": segment, "system": system}, indent=2) + "\n")
    return emit("\n\n".join(report), args.out)


def _tune(which) -> None:
    tune = which.add_parser(
        "tune", help="tuned settings (moverkit tune) against the defaults, leaving one language pair out"
    )
    _data_options(tune)
    tune.add_argument(
        "--metrics", nargs="+", choices=METRICS, default=list(METRICS), help="metrics to tune (default: all five)"
    )
    tune.add_argument("--model", help="Hugging Face id or local path (default: the embedded all-MiniLM-L6-v2)")
    tune.add_argument(
        "--system-level",
        action="store_true",
        help="also score the shipped WMT17 system-level extract with each pair's held-out settings",
    )
    tune.add_argument(
        "--segments",
        type=positive_int,
        help="with --system-level: the first N segments of each test set (default: all)",
    )
    tune.add_argument(
        "--cost",
        action="store_true",
        help="also time a tuning run against one scoring pass of the same texts, side by side (each metric)",
    )
    tune.add_argument("--rounds", type=positive_int, default=2, help="with --cost: interleaved rounds (median)")
    tune.add_argument("--json", type=Path, help="also write every setting's per-pair correlations here (JSON)")
    tune.set_defaults(run=run_tune)


def run_tune(args) -> int:
    import json

    from moverkit.bench import tuning as bench
    from moverkit.judgments import read_judgments
    from moverkit.lines import check_out, write_atomic

    require_data(args)
    check_out(args.out, [args.data])
    check_out(args.json, [args.data, args.out], "--json")
    data = read_judgments(args.data)
    tunings = {}
    for metric in args.metrics:
        tunings.update(bench.segment_level(data, [metric], model_type=args.model))
        progress(f"{metric}: {len(tunings[metric].settings)} settings tuned")
    report = [
        f"Segment level: {args.data.name}, each language pair scored with the settings chosen on the others "
        "(Pearson r x 100)",
        bench.format_segment(tunings),
        "Mean Pearson r x 100 of each layer, the other arguments at their defaults:",
        bench.format_layers(tunings),
    ]
    record = {"segment": {metric: tuning.to_dict() for metric, tuning in tunings.items()}}
    if args.system_level:
        from moverkit.bench.system_level import read_shipped

        test_sets = read_shipped(segments=args.segments)
        system = bench.system_level(tunings, test_sets, model_type=args.model)
        report += [
            "System level: the shipped WMT17 extract, each pair with its held-out settings",
            bench.format_system(system),
        ]
        record["system"] = system
    if args.cost:
        costs = {metric: bench.cost(data, metric, rounds=args.rounds, model_type=args.model) for metric in args.metrics}
        lines = ["| metric | settings | one scoring pass (s) | tuning run (s) | ratio |", "|---|---:|---:|---:|---:|"]
        for metric, c in costs.items():
            lines.append(
                f"| {metric} | {c['settings']} | {c['one scoring pass']:.1f} | {c['tuning run']:.1f} | {c['ratio']:.2f}x |"
            )
        report += [f"Cost, medians of {args.rounds} interleaved rounds:", "\n".join(lines)]
        record["cost"] = costs
    if args.json:
        write_atomic(args.json, json.dumps(record, indent=1) + "\n")
    return emit("\n\n".join(report), args.out)
