"""``moverkit bench rewards``: where text is generated (issue 53), side by side in one run.

1. Reward latency per GRPO step: ``--prompts`` prompts x ``--generations`` completions (16 x 8 =
   128 completions by default, each prompt's reference repeated per completion, as TRL passes
   the column), the median seconds of ``--rounds`` interleaved rounds for each metric's
   :func:`moverkit.reward_function`, against a sentence-transformers cosine reward (the embedded
   model's ``SentenceTransformer``, kept loaded: the completions and the distinct references
   encoded, then the cosine of each completion with its reference) and a ``bert_score.BERTScorer``
   kept loaded on the same encoder and layer (its ``score``, F1).
2. MBR with ``--candidates`` candidates per source for ``--sources`` sources, BERTScore F1 on the
   embedded model at its layer 6 with no centering: seconds of :func:`moverkit.mbr_select`
   exact and aggregated against mbrs's ``DecoderMBR`` with its ``MetricBERTScore`` (run in a
   subprocess of ``--mbrs-python``, an interpreter whose environment imports mbrs: mbrs 0.1.8
   needs transformers < 5), and how often they choose the same candidate; then how often
   reference aggregation chooses what exact MBR chooses (and the expected utility it gives up),
   for centered_bertscore without centering and for every greedy metric (:data:`GREEDY`) at its
   default centering (those untimed calls with moverkit's cache of token clouds on, so that the
   aggregated call reuses the exact one's).

The candidates are synthetic samples (:func:`sampled_candidates`): word-level perturbations of a
WMT17 segment's translation and reference, so that a source's candidates share most words as a
model's samples do; no generator runs here. Every side is warm (models loaded, one call made)
before it is timed. Each timing keeps wall and CPU seconds; the ratios are of CPU seconds, which
other jobs on a shared machine do not inflate (with ``OMP_NUM_THREADS=1`` for every side, as
advised, a side's CPU time is its wall time on an idle machine). ``--avx2`` runs it again in a
subprocess capped at AVX2.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._shared import (
    AVX2_ENV,
    CENTERED_BY_DEFAULT,
    command_parser,
    interleaved,
    machine_isa,
    run_capped,
    text_pairs,
)
from moverkit.facts.specs import SPECS
from moverkit.formats.options import METRICS, emit, positive_int, progress, rounds

HELP = "reward latency per GRPO step and MBR selection, against sentence-transformers, bert-score and mbrs"

LAYER = 6
"""The embedded model's layer (its last, moverkit's default for it) that every side uses."""

MBRS_SCRIPT = r"""
import json, sys, time
from mbrs.decoders import DecoderMBR
from mbrs.metrics import MetricBERTScore
model, layer, path, device = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
sources = json.load(open(path, encoding="utf-8"))
config = MetricBERTScore.Config(model_type=model, num_layers=layer, cpu=device == "cpu")
decoder = DecoderMBR(DecoderMBR.Config(), MetricBERTScore(config))
decoder.decode(sources[0], sources[0], nbest=1)
start, cpu = time.perf_counter(), time.process_time()
index = [decoder.decode(texts, texts, nbest=1).idx[0] for texts in sources]
seconds = [time.perf_counter() - start, time.process_time() - cpu]
print(json.dumps({"seconds": seconds, "index": index}))
"""
"""mbrs's BERTScore MBR on the sources of a JSON file, warm (one source decoded untimed), as its
README's Python example runs it: the hypotheses are their own pseudo-references. It prints the
wall and CPU seconds of the decoding and the chosen indices."""


def register(which) -> None:
    parser = command_parser(which, "rewards", HELP, command, limit=False)
    parser.add_argument("--metrics", nargs="*", choices=METRICS, help="rewards to time (default: all five)")
    parser.add_argument("--prompts", type=positive_int, default=16, help="prompts per GRPO step (default: 16)")
    parser.add_argument("--generations", type=positive_int, default=8, help="completions per prompt (default: 8)")
    parser.add_argument("--rounds", type=rounds, default=5, help="interleaved timed rounds of the rewards (median)")
    parser.add_argument("--sources", type=positive_int, default=100, help="MBR sources (default: 100)")
    parser.add_argument(
        "--candidates",
        type=positive_int,
        nargs="+",
        default=[32, 64],
        help="MBR candidates per source (default: 32 64)",
    )
    parser.add_argument(
        "--mbrs-python", help="a Python whose environment imports mbrs (default: this one; mbrs needs transformers < 5)"
    )
    parser.add_argument("--device", default="cpu", help="cpu (default) or a CUDA device, for every side")
    parser.add_argument("--avx2", action="store_true", help="run again limited to AVX2, in a subprocess")


def command(args) -> int:
    if args.avx2:
        return run_capped(capped_argv(args), AVX2_ENV)
    segments = text_pairs(args)
    report = [machine_isa(), "", reward_latency(args, segments), "", mbr_comparison(args, segments)]
    return emit("\n".join(report), args.out)


def capped_argv(args) -> list[str]:
    """The command's own options, for its rerun under the AVX2 caps."""
    argv = ["bench", "rewards", "--data", str(args.data), "--rounds", str(args.rounds)]
    argv += ["--prompts", str(args.prompts), "--generations", str(args.generations), "--sources", str(args.sources)]
    argv += ["--candidates", *map(str, args.candidates), "--device", args.device]
    argv += ["--metrics", *args.metrics] if args.metrics else []
    argv += ["--mbrs-python", args.mbrs_python] if args.mbrs_python else []
    return argv + (["--out", str(args.out)] if args.out else [])


def sampled_candidates(translation: str, reference: str, n: int, rng: random.Random) -> list[str]:
    """``n`` samples of one source, made from its translation (7 in 10) or reference: each word
    dropped with probability 0.1, then two neighbouring words swapped with probability 0.3."""
    samples = []
    for _ in range(n):
        words = [w for w in (translation if rng.random() < 0.7 else reference).split() if rng.random() >= 0.1]
        if len(words) > 1 and rng.random() < 0.3:
            k = rng.randrange(len(words) - 1)
            words[k], words[k + 1] = words[k + 1], words[k]
        samples.append(" ".join(words))
    return samples


def grpo_step(segments, prompts: int, generations: int) -> tuple[list[str], list[str]]:
    """One step's completions (``generations`` samples of each of the first ``prompts`` segments)
    and its references column (each prompt's reference once per completion)."""
    rng = random.Random(0)
    completions, references = [], []
    for translation, reference in segments[:prompts]:
        completions += sampled_candidates(translation, reference, generations, rng)
        references += [reference] * generations
    return completions, references


SMALL_BATCHES = CENTERED_BY_DEFAULT
"""The rewards timed again with ``batch_size=16`` on a CPU (those of the metrics centered by
default, as the other throughput tables time a few): the encoder's batches of 64 texts
(sorted by length, each padded to its longest) pad a step's 135 distinct WMT17 texts from 3,417
tokens to 5,396, batches of 16 to 3,844. The scores are the same to rounding (a text's vectors
depend on its batch's shape in the last bits), not to the bit, so the default stays."""


def reward_latency(args, segments) -> str:
    """The reward table: seconds per step, and each against the two peers."""
    import moverkit
    from moverkit._core import embedded_model_path

    completions, references = grpo_step(segments, args.prompts, args.generations)
    model = str(embedded_model_path())
    contenders = {}
    for name in args.metrics or METRICS:
        reward = moverkit.reward_function(name, device=args.device)
        contenders[reward.__name__] = lambda reward=reward: reward(completions, references=references)
    for name in [m for m in SMALL_BATCHES if m in (args.metrics or METRICS)] if args.device == "cpu" else []:
        reward = moverkit.reward_function(name, device=args.device, batch_size=16)
        contenders[f"{reward.__name__}, batch_size=16"] = lambda reward=reward: reward(
            completions, references=references
        )
    contenders["sentence-transformers cosine"] = sentence_cosine(model, completions, references, args.device)
    contenders["bert-score BERTScorer"] = bert_scorer(model, completions, references, args.device)
    for run in contenders.values():
        run()  # warm
    rounds = interleaved(contenders, args.rounds, clock=both_clocks)
    times = {label: [statistics.median(t[k] for t in ts) for k in (0, 1)] for label, ts in rounds.items()}
    cosine, scorer = times["sentence-transformers cosine"][1], times["bert-score BERTScorer"][1]
    lines = [
        f"## Reward latency per GRPO step ({args.prompts} prompts x {args.generations} completions = "
        f"{len(completions)}, device {args.device}, median of {args.rounds} interleaved rounds; "
        "ratios of CPU seconds)",
        "",
        "| reward | wall s per step | CPU s per step | x sentence-transformers cosine | x BERTScorer |",
        "|---|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {label} | {w:.3f} | {c:.3f} | {c / cosine:.2f} | {c / scorer:.2f} |" for label, (w, c) in times.items()
    ]
    return "\n".join(lines)


def both_clocks():
    """Wall and CPU seconds at once (their differences: a side's wall and CPU time). The CPU
    time of a process on one thread (``OMP_NUM_THREADS=1``) is its wall time on an idle machine,
    and is what other jobs on a shared one do not inflate: the ratios are of CPU seconds."""
    import numpy as np

    return np.array([time.perf_counter(), time.process_time()])


def sentence_cosine(model: str, completions: list[str], references: list[str], device: str):
    """The sentence-transformers reward: the completions and the distinct references encoded
    (unit vectors), then each completion's cosine with its reference."""
    import torch
    from sentence_transformers import SentenceTransformer

    encoder = SentenceTransformer(model, device=device)
    distinct = list(dict.fromkeys(references))
    index = torch.tensor([len(completions) + distinct.index(r) for r in references], device=device)

    def run() -> list[float]:
        vectors = encoder.encode(completions + distinct, convert_to_tensor=True, normalize_embeddings=True)
        return (vectors[: len(completions)] * vectors[index]).sum(dim=-1).tolist()

    return run


def bert_scorer(model: str, completions: list[str], references: list[str], device: str):
    """bert-score's reward: a ``BERTScorer`` loaded once on the same encoder and layer, its F1."""
    from bert_score import BERTScorer

    scorer = BERTScorer(model_type=model, num_layers=LAYER, device=device)
    return lambda: scorer.score(completions, references)[2].tolist()


GREEDY = tuple(name for name, s in SPECS.items() if s.matcher == "greedy")
"""The metrics whose MBR agreement with reference aggregation is measured: those that match greedily
(their spec's ``matcher``), the only ones :func:`moverkit.mbr_select` aggregates."""

MBR_CHUNK = 10
"""Sources per turn of the MBR timing: every side scores a chunk in turn (mbrs in a fresh
subprocess, its load untimed), so that drift in the machine's load hits all sides alike."""


def mbr_comparison(args, segments) -> str:
    """The MBR tables: seconds and agreement with mbrs, then aggregated against exact."""
    import moverkit
    from moverkit._core import embedded_model_path
    from moverkit._core.encoding import cache_enabled

    model = str(embedded_model_path())
    timing = [
        "## MBR: BERTScore F1, embedded model, layer 6, no centering "
        f"({args.sources} sources, device {args.device}; candidates are their own pseudo-references; "
        f"every side in turn on chunks of {MBR_CHUNK} sources; wall / CPU seconds, ratios of CPU seconds)",
        "",
        "| candidates per source | moverkit exact (s) | moverkit aggregated (s) | mbrs (s) "
        "| mbrs / moverkit exact | mbrs / moverkit aggregated | same choice as mbrs |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    agreement = [
        "## Reference aggregation against exact MBR (same sources)",
        "",
        "| candidates per source | metric | same choice | expected utility given up (mean, max) |",
        "|---:|---|---:|---:|",
    ]
    for n in args.candidates:
        rng = random.Random(n)
        sources = [sampled_candidates(h, r, n, rng) for h, r in segments[: args.sources]]
        settings = {"model_type": model, "num_layers": LAYER, "device": args.device, "centering": "none"}
        sides = {"exact": settings, "aggregated": {**settings, "aggregate": True}}
        seconds, results = timed_sides(sources, sides, args.mbrs_python, model, args.device)
        exact, theirs = results["exact"], results["mbrs"]
        cells = " | ".join(f"{seconds[side][0]:.1f} / {seconds[side][1]:.1f}" for side in sides)
        if isinstance(theirs, str):
            cells += f" | not run ({theirs}) | | |"
        else:
            same = sum(a == b for a, b in zip(theirs, exact["text"]))  # ties among duplicates: the same text
            ratios = " | ".join(f"{seconds['mbrs'][1] / seconds[side][1]:.2f}x" for side in sides)
            cells += f" | {seconds['mbrs'][0]:.1f} / {seconds['mbrs'][1]:.1f} | {ratios} | {same}/{len(sources)}"
        timing.append(f"| {n} | {cells} |")
        agreement.append(agreement_row(n, "centered_bertscore, centering none", exact, results["aggregated"]))
        with cache_enabled():  # the encodings of exact MBR's call serve the aggregated one (untimed)
            for metric in GREEDY:
                exact = moverkit.mbr_select(sources, metric=metric, device=args.device)
                aggregated = moverkit.mbr_select(sources, metric=metric, aggregate=True, device=args.device)
                agreement.append(agreement_row(n, f"{metric}, its default centering", exact, aggregated))
        progress(f"mbr: {n} candidates per source done")
    return "\n".join([*timing, "", *agreement])


def timed_sides(sources, sides: dict, mbrs_python: str | None, model: str, device: str) -> tuple[dict, dict]:
    """Each side's wall and CPU seconds over all ``sources`` and its results:
    :func:`moverkit.mbr_select` under each of ``sides`` (warm), and mbrs (its chosen texts, or why
    it did not run), chunk by chunk in turn (:data:`MBR_CHUNK`)."""
    import moverkit

    for arguments in sides.values():
        moverkit.mbr_select(sources[:1], **arguments)
    seconds = {side: both_clocks() * 0 for side in [*sides, "mbrs"]}
    results = {side: {"text": [], "index": [], "expected_scores": []} for side in sides}
    results["mbrs"] = []
    for at in range(0, len(sources), MBR_CHUNK):
        chunk = sources[at : at + MBR_CHUNK]
        for side, arguments in sides.items():
            start = both_clocks()
            result = moverkit.mbr_select(chunk, **arguments)
            seconds[side] += both_clocks() - start
            for key, values in results[side].items():
                values += result[key]
        if not isinstance(results["mbrs"], str):
            theirs = mbrs_run(mbrs_python, model, chunk, device)
            if isinstance(theirs, str):
                results["mbrs"] = theirs
            else:
                seconds["mbrs"] += theirs["seconds"]
                results["mbrs"] += [texts[i] for texts, i in zip(chunk, theirs["index"])]
    return seconds, results


def agreement_row(n: int, label: str, exact: dict, aggregated: dict) -> str:
    """One row: how often aggregation chooses exact MBR's text, and the exact expected utility its
    choice gives up (the best expected utility less that of the aggregated choice)."""
    same = sum(a == b for a, b in zip(aggregated["text"], exact["text"]))
    lost = [e[best] - e[pick] for e, best, pick in zip(exact["expected_scores"], exact["index"], aggregated["index"])]
    return f"| {n} | {label} | {same}/{len(lost)} | {statistics.fmean(lost):.4f}, {max(lost):.4f} |"


def mbrs_run(python: str | None, model: str, sources: list[list[str]], device: str) -> dict | str:
    """mbrs's MBR on ``sources`` (:data:`MBRS_SCRIPT` in a subprocess of ``python``): its seconds
    and choices, or why it did not run (mbrs not importable there)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "sources.json"
        path.write_text(json.dumps(sources), encoding="utf-8")
        argv = [python or sys.executable, "-c", MBRS_SCRIPT, model, str(LAYER), str(path), device]
        done = subprocess.run(argv, capture_output=True, text=True, env=os.environ.copy())
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return last.replace("|", "/")[:160]
    return json.loads(done.stdout.strip().splitlines()[-1])
