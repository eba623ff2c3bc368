"""``moverkit bench combination``: a calibrated combination of metrics against each metric alone,
leaving one language pair out (:mod:`moverkit.bench.combination`)."""

from __future__ import annotations

from pathlib import Path

from ..options import emit, progress, require_data
from .options import data_options


def register(which) -> None:
    combo = which.add_parser(
        "combination",
        help="a calibrated combination of metrics against each metric alone, leaving one language pair out",
    )
    data_options(combo)
    combo.add_argument(
        "--scores-cache",
        type=Path,
        help="JSON file keeping the metrics' segment scores (read where it holds them, written as they are computed)",
    )
    combo.add_argument("--json", type=Path, help="also write the results here (JSON)")
    combo.set_defaults(run=run)


def run(args) -> int:
    import json

    from moverkit.bench import combination as bench
    from moverkit.combination.crossval import format_segment, segment_report
    from moverkit.judgments import read_judgments, read_shipped
    from moverkit.lines import check_out, write_atomic

    require_data(args)
    check_out(args.out, [args.data])
    check_out(args.json, [args.data, args.out], "--json")
    check_out(args.scores_cache, [args.data, args.out, args.json], "--scores-cache")
    components = bench.COMBINATIONS["combination (all 7)"]
    data = read_judgments(args.data)
    features = bench.segment_features(data, components, args.scores_cache, log=progress)
    segment = segment_report(data, features, bench.COMBINATIONS)
    test_sets = read_shipped()
    metrics = [c for c in components if c not in bench.ANCHORS]
    segments = bench.system_segment_scores(test_sets, metrics, args.scores_cache, log=progress)
    system = bench.system_bench(test_sets, segments, bench.COMBINATIONS)
    report = [
        f"Segment level: {args.data.name} ({len(data.human)} segments), each language pair scored by the "
        "combination fitted on the others",
        format_segment(segment),
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
