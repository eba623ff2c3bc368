"""The ``moverkit`` command: score files, fit a centering statistic, run the benchmarks.

    moverkit score --metric centered_bertscore --predictions hyp.txt --references ref.txt --out scores.jsonl
    moverkit fit-centering --texts corpus.txt --out stats.npz
    moverkit fit-baseline --texts corpus.txt --out baseline.csv
    moverkit bench correlation --data wmt17_seg_da_to_en.tsv
    moverkit bench speed --data wmt17_seg_da_to_en.tsv
    moverkit bench shuffled --data wmt17_seg_da_to_en.tsv --pairs 400
    moverkit publish --dry-run OUTDIR

Input files hold one text per line, a line ending at "\n" (see :func:`moverkit.lines.split_lines`). A mistake of
the user (a missing or empty file, files of different lengths, an argument the metric refuses, an
``--out`` that is a folder or an input) prints ``moverkit: error: ...`` and exits with status 2,
as argparse does, before any scoring; there is no traceback.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import sys
from pathlib import Path

from .lines import check_out, read_texts

# Files longer than this get a progress bar without --verbose.
_PROGRESS_LINES = 1000


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except (ValueError, TypeError, OSError) as err:
        print(f"moverkit: error: {err}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    import moverkit

    parser = argparse.ArgumentParser(prog="moverkit", description=__doc__.split("\n")[0])
    parser.add_argument("--version", action="version", version=f"moverkit {moverkit.__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    score = commands.add_parser("score", help="score a file of predictions against references, one text per line")
    score.add_argument("--metric", required=True, choices=moverkit.METRICS)
    score.add_argument("--predictions", required=True, type=Path, help="one prediction per line")
    score.add_argument(
        "--references",
        required=True,
        type=Path,
        action="append",
        help="one reference per line; repeat the option for several references per prediction",
    )
    _add_encoder_options(score)
    score.add_argument(
        "--dtype",
        choices=("float32", "bfloat16", "float16"),
        help="precision of the encoder's forward pass (default: float32; bfloat16 is faster on recent CPUs)",
    )
    score.add_argument(
        "--long-texts",
        choices=("truncate", "window"),
        help="texts over the model's limit: cut at it (default) or encoded whole in overlapping windows",
    )
    score.add_argument("--idf", action="store_true", help="weight tokens by IDF fitted on the references")
    score.add_argument("--centering", help="none, dim, sentence, batch or corpus (default: the metric's)")
    score.add_argument(
        "--centering-stats", type=Path, help="with --centering corpus: a statistic saved by 'moverkit fit-centering'"
    )
    score.add_argument(
        "--arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other compute argument of the metric (VALUE read as JSON when it parses, e.g. temperature=0.1)",
    )
    score.add_argument("--out", type=Path, help="write per-line scores here (JSON lines; a new or overwritten file)")
    score.add_argument("--verbose", action="store_true", help="progress bar (on by default for long files)")
    score.set_defaults(run=_score)

    fit = commands.add_parser("fit-centering", help="fit a corpus centering statistic on a file of texts")
    fit.add_argument("--texts", required=True, type=Path, help="one text per line")
    fit.add_argument("--out", required=True, type=Path, help="where to save the statistic (.npz)")
    fit.add_argument(
        "--level",
        choices=("token", "sentence"),
        help="token vectors (default; centered_bertscore, twmd, moverscore, lazy_emd) or sentence vectors (sbertscore)",
    )
    fit.add_argument("--lang", help="with --level sentence: the language of the sentence splitter (default: en)")
    _add_encoder_options(fit)
    fit.set_defaults(run=_fit_centering)

    base = commands.add_parser(
        "fit-baseline",
        help="fit a rescaling baseline (bert-score's LAYER,P,R,F csv): mean centered_bertscore of random text pairs",
    )
    base.add_argument("--texts", required=True, type=Path, help="one text per line; pairs are drawn from them")
    base.add_argument("--out", required=True, type=Path, help="where to write the baseline (.csv)")
    base.add_argument("--centering", default="none", help="none, dim, sentence or batch (default: none)")
    base.add_argument("--pairs", type=int, default=1000, help="random pairs (default: 1000)")
    base.add_argument("--seed", type=int, default=0, help="seed of the random pairing (default: 0)")
    base.add_argument("--model", help="Hugging Face id or local path (default: the embedded all-MiniLM-L6-v2)")
    base.add_argument("--layers", type=int, nargs="*", help="layers to fit (default: every layer, 0 to the last)")
    base.add_argument("--batch-size", type=int, default=64, help="texts per forward pass")
    base.add_argument("--device", help="cpu, cuda, cuda:1, ... (default: CUDA when available)")
    base.set_defaults(run=_fit_baseline)

    bench = commands.add_parser("bench", help="benchmarks: correlation with humans, speed against peers")
    which = bench.add_subparsers(dest="bench", required=True)
    corr = which.add_parser("correlation", help="Pearson and Kendall per group with human judgments")
    speed = which.add_parser("speed", help="time metrics side by side against the encoder and peers")
    for sub in (corr, speed):
        sub.add_argument("--data", type=Path, help="TSV with columns lp, hypothesis, reference, human (required)")
        sub.add_argument("--limit", type=int, help="use only the first N rows")
        sub.add_argument("--out", type=Path, help="also write the report here (Markdown)")
    corr.add_argument("--rows", nargs="*", help="row labels to run (default: all; see --list)")
    corr.set_defaults(run=_bench_correlation)
    speed.add_argument("--suite", nargs="*", help="run only these suites, by key (--list shows the keys)")
    speed.add_argument("--repeats", type=int, default=3, help="timed rounds (median reported)")
    corr.add_argument("--list", action="store_true", help="list the row labels and exit")
    speed.add_argument("--list", action="store_true", help="list the suites and their contenders and exit")
    speed.set_defaults(run=_bench_speed)
    precision = which.add_parser("precision", help="float32 vs bfloat16 encoder: speed, score change, correlation")
    precision.add_argument("--data", type=Path, help="TSV with columns lp, hypothesis, reference, human (required)")
    precision.add_argument("--limit", type=int, help="use only the first N rows")
    precision.add_argument(
        "--metrics", nargs="*", choices=moverkit.METRICS, help="metrics to measure (default: all five)"
    )
    precision.add_argument("--rounds", type=int, default=3, help="interleaved timed rounds (median reported)")
    precision.add_argument("--out", type=Path, help="also write the table here (Markdown)")
    precision.set_defaults(run=_bench_precision)
    cache = which.add_parser("cache", help="an evaluation loop (fixed references, new predictions) with the cache on")
    cache.add_argument("--data", type=Path, help="TSV with columns lp, hypothesis, reference, human (required)")
    cache.add_argument(
        "--metric", choices=moverkit.METRICS, default="centered_bertscore", help="(default: centered_bertscore)"
    )
    cache.add_argument("--references", type=int, default=1000, help="references of every evaluation (default: 1000)")
    cache.add_argument("--evaluations", type=int, default=5, help="evaluations in the loop (default: 5)")
    cache.add_argument("--rounds", type=int, default=1, help="times the loop runs (median per evaluation reported)")
    cache.add_argument("--out", type=Path, help="also write the report here (Markdown)")
    cache.set_defaults(run=_bench_cache)
    scale = which.add_parser("scale", help="wall time and peak RSS of one call at growing numbers of distinct pairs")
    scale.add_argument("--data", type=Path, help="TSV of judgments whose segments make the texts (required)")
    scale.add_argument("--sizes", type=int, nargs="*", help="numbers of pairs (default: 1000 10000 100000)")
    scale.add_argument(
        "--runs",
        nargs="*",
        help="METRIC:CENTERING runs (default: centered_bertscore and twmd, each with batch and corpus centering)",
    )
    scale.add_argument("--memory-budget", help="moverkit.set_memory_budget for the runs (default: the default)")
    scale.add_argument("--out", type=Path, help="also write the table here (Markdown)")
    scale.set_defaults(run=_bench_scale)
    shuffled = which.add_parser(
        "shuffled", help="share of pairs where each metric scores the true reference above another pair's"
    )
    shuffled.add_argument("--data", type=Path, help="TSV with columns lp, hypothesis, reference, human (required)")
    shuffled.add_argument("--pairs", type=int, default=400, help="pairs drawn at random (default: 400)")
    shuffled.add_argument("--seed", type=int, default=0, help="seed of the draw and of the shuffle (default: 0)")
    shuffled.add_argument("--out", type=Path, help="also write the report here (Markdown)")
    shuffled.set_defaults(run=_bench_shuffled)

    publish = commands.add_parser("publish", help="assemble each metric's Hub Space (module + demo) and upload it")
    publish.add_argument("out", type=Path, help="a new or empty folder to assemble the Spaces in")
    publish.add_argument("--dry-run", action="store_true", help="assemble only, upload nothing")
    publish.add_argument("--org", default="moverkit", help="Hub user or organisation of the Spaces (default: moverkit)")
    publish.add_argument(
        "--repository",
        help="GitHub owner/name the Spaces install moverkit from (default: $GITHUB_REPOSITORY, else the origin "
        "remote; a placeholder in a dry run)",
    )
    publish.add_argument(
        "--commit",
        help="full 40-hex commit hash the Spaces install (default: $GITHUB_SHA, else HEAD; a placeholder in a dry run)",
    )
    publish.add_argument("--tag", help="also tag every Space with this (the release tag)")
    publish.add_argument("--source", type=Path, help="checkout holding metrics/ and spaces/ (default: moverkit's own)")
    publish.set_defaults(run=_publish)

    from .finetune import register as add_finetune

    add_finetune(commands)
    return parser


def _add_encoder_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="Hugging Face id or local path (default: the embedded all-MiniLM-L6-v2)")
    parser.add_argument("--num-layers", type=int, help="layer to use (default: tuned per model, else the last)")
    parser.add_argument("--batch-size", type=int, help="texts per forward pass")
    parser.add_argument("--device", help="cpu, cuda, cuda:1, ... (default: CUDA when available)")


def _score(args) -> int:
    import moverkit

    check_out(args.out, [args.predictions, *args.references, args.centering_stats])
    predictions = read_texts(args.predictions)
    reference_sets = [read_texts(path) for path in args.references]
    for path, refs in zip(args.references, reference_sets):
        if len(refs) != len(predictions):
            raise ValueError(
                f"{args.predictions} has {len(predictions)} lines but {path} has {len(refs)}; "
                "every file needs one line per example"
            )
    references = reference_sets[0] if len(reference_sets) == 1 else [list(r) for r in zip(*reference_sets)]
    metric = moverkit.load(args.metric)
    kwargs = _compute_kwargs(metric, args, verbose=args.verbose or len(predictions) > _PROGRESS_LINES)
    result = metric.compute(predictions=predictions, references=references, **kwargs)

    per_line = {k: v for k, v in result.items() if isinstance(v, list) and len(v) == len(predictions)}
    for key, values in per_line.items():
        if values and all(isinstance(v, (int, float)) for v in values):
            print(f"{key}\t{math.fsum(values) / len(values):.6f}")
    print(f"hashcode\t{result['hashcode']}")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            for i in range(len(predictions)):
                f.write(json.dumps({"line": i + 1, **{k: v[i] for k, v in per_line.items()}}) + "\n")
        print(f"per-line scores written to {args.out}", file=sys.stderr)
    return 0


def _compute_kwargs(metric, args, verbose: bool) -> dict:
    """The options the user gave, under the metric's own argument names; an option the metric
    does not take is an error, not silently dropped."""
    accepted = set(inspect.signature(metric._compute).parameters)
    given = {
        "model_type": args.model,
        "num_layers": args.num_layers,
        "batch_size": args.batch_size,
        "device": args.device,
        "centering": args.centering,
        "centering_stats": str(args.centering_stats) if args.centering_stats else None,
        "idf": True if args.idf else None,
        "dtype": args.dtype,
        "long_texts": args.long_texts,
    }
    kwargs = {k: v for k, v in given.items() if v is not None}
    for item in args.arg:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--arg takes KEY=VALUE, got {item!r}")
        try:
            kwargs[key] = json.loads(value)
        except json.JSONDecodeError:
            kwargs[key] = value
    unknown = sorted(set(kwargs) - accepted)
    if unknown:
        raise ValueError(
            f"{args.metric} takes no argument {', '.join(unknown)}; it takes {', '.join(sorted(accepted))}"
        )
    if "centering_stats" in kwargs and kwargs.get("centering") != "corpus":
        raise ValueError("--centering-stats is used only with --centering corpus")
    if "verbose" in accepted:
        kwargs["verbose"] = verbose
    return kwargs


def _fit_centering(args) -> int:
    import moverkit

    if args.lang is not None and args.level != "sentence":
        raise ValueError("--lang is used only with --level sentence (it picks the sentence splitter)")
    check_out(args.out, [args.texts])
    texts = read_texts(args.texts)
    given = {"level": args.level, "lang": args.lang, "batch_size": args.batch_size}
    kwargs = {key: value for key, value in given.items() if value is not None}
    stats = moverkit.fit_centering(
        texts, model_type=args.model, num_layers=args.num_layers, device=args.device, verbose=True, **kwargs
    )
    stats.save(args.out)
    if args.level == "sentence":
        print(f"{stats.model}: mean of {stats.n_tokens} sentences of {stats.n_texts} texts")
    else:
        print(f"{stats.model} layer {stats.layer}: mean of {stats.n_tokens} tokens of {stats.n_texts} texts")
    print(f"digest\t{stats.digest}\nsaved to {args.out}")
    return 0


def _fit_baseline(args) -> int:
    from ._core.baseline import fit_baseline, write_baseline

    check_out(args.out, [args.texts])
    rows = fit_baseline(
        read_texts(args.texts),
        model_type=args.model,
        layers=args.layers,
        centering=args.centering,
        n_pairs=args.pairs,
        seed=args.seed,
        batch_size=args.batch_size,
        device=args.device,
    )
    write_baseline(rows, args.out)
    print(f"baseline of {args.pairs} random pairs, centering={args.centering}, layers {rows[0][0]}-{rows[-1][0]}")
    print(f"saved to {args.out}")
    return 0


def _bench_correlation(args) -> int:
    from .bench import registry
    from .bench._correlation import correlation_table, format_table
    from .bench._data import read_judgments

    rows, _ = registry()
    if args.list:
        print("\n".join(f"{r.label}\t{r.metric}.{r.output} {r.kwargs}" for r in rows))
        return 0
    _require_data(args)
    check_out(args.out, [args.data])
    if args.rows:
        missing = sorted(set(args.rows) - {r.label for r in rows})
        if missing:
            raise ValueError(f"unknown row(s) {', '.join(missing)}; see 'moverkit bench correlation --list'")
        rows = [r for r in rows if r.label in args.rows]
    data = read_judgments(args.data, limit=args.limit)
    report = format_table(correlation_table(rows, data), rows)
    header = f"Kendall tau / Pearson r (x100) with human judgments of {args.data.name} ({len(data.human)} segments)"
    return _emit(f"{header}\n\n{report}", args.out)


def _bench_speed(args) -> int:
    from .bench import registry
    from .bench._data import read_judgments
    from .bench._speed import format_report, run_suite

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
    _require_data(args)
    check_out(args.out, [args.data])
    data = read_judgments(args.data, limit=args.limit)
    reports = [format_report(run_suite(s, data.predictions, data.references, args.repeats)) for s in suites]
    return _emit("\n\n".join(reports), args.out)


def _bench_precision(args) -> int:
    import moverkit

    from .bench import precision
    from .bench._data import read_judgments

    _require_data(args)
    check_out(args.out, [args.data])
    data = read_judgments(args.data, limit=args.limit)
    rows = []
    for metric in args.metrics or moverkit.METRICS:
        rows.append(precision.measure(metric, data, rounds=args.rounds))
        print(precision.format_row(rows[-1]), file=sys.stderr, flush=True)  # each row as it ends
    return _emit(precision.format_table(rows), args.out)


def _bench_cache(args) -> int:
    from .bench import cache_loop
    from .bench._data import read_judgments

    _require_data(args)
    check_out(args.out, [args.data])
    report = cache_loop.run(read_judgments(args.data), args.metric, args.references, args.evaluations, args.rounds)
    return _emit(cache_loop.format_report(report), args.out)


def _bench_scale(args) -> int:
    from .bench import scale

    _require_data(args)
    check_out(args.out, [args.data])
    progress = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731 (each row as it ends)
    runs = scale.RUNS if not args.runs else tuple(scale.parse_run(run) for run in args.runs)
    rows = scale.run(args.data, tuple(args.sizes or scale.SIZES), runs, memory_budget=args.memory_budget, log=progress)
    return _emit(scale.format_table(rows), args.out)


def _bench_shuffled(args) -> int:
    from .bench import shuffled
    from .bench._data import read_judgments

    _require_data(args)
    check_out(args.out, [args.data])
    rows = shuffled.run(read_judgments(args.data), pairs=args.pairs, seed=args.seed)
    header = (
        f"True reference against another pair's (a derangement, seed {args.seed}) on {args.pairs} pairs of "
        f"{args.data.name}, each metric with its default arguments"
    )
    return _emit(f"{header}\n\n{shuffled.format_table(rows)}", args.out)


def _require_data(args) -> None:
    if args.data is None:
        raise ValueError(f"bench {args.bench}: --data is required (the WMT17 judgments TSV)")


def _publish(args) -> int:
    from .publish import DRY_RUN_COMMIT, DRY_RUN_REPOSITORY, assemble, find_root, resolve_release, upload

    root = find_root(args.source)
    release = resolve_release(root, args.org, args.repository, args.commit, dry_run=args.dry_run)
    folders = assemble(root, args.out, release)
    for folder in folders:
        files = ", ".join(sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()))
        print(f"{release.space_id(folder.name)}\t{folder}\t{files}")
    if args.dry_run:
        source = f"{release.repository}@{release.commit}"
        if release.repository == DRY_RUN_REPOSITORY or release.commit == DRY_RUN_COMMIT:
            source += " (placeholders where not given and not found)"
        print(f"dry run: {len(folders)} Spaces assembled in {args.out}, installing moverkit from {source}")
        print("nothing uploaded")
        return 0
    for space_id in upload(folders, release, tag=args.tag):
        print(f"uploaded https://huggingface.co/spaces/{space_id}")
    return 0


def _emit(text: str, out: Path | None) -> int:
    print(text)
    if out:
        out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
