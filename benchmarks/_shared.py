"""What the benchmarks share: the opening of a ``moverkit bench`` command, and what several of
them measure with. No benchmark module imports another: what two of them use lives here.

The opening. A command's parser (:func:`command_parser`; ``--data`` and ``--out`` first where it
reads a judgments TSV), or one that can run again capped at AVX2 (:func:`capped_parser`); then
:func:`judgments` before any work: ``--data`` required, no output written over an input or another
output, the first ``--limit`` rows read. ``moverkit --help`` builds every command's parser, so
importing this module loads no torch.

A child process (a capped run, a fresh process per measurement) runs in
:func:`child_environment`, which finds this package in the checkout.

What is measured with: the metrics' arguments in the throughput benchmarks (:data:`RUNS`), timing
in interleaved rounds (:func:`interleaved`), the floors no metric can beat (:func:`encoder_floor`,
:func:`sentence_encoder_floor`, :func:`floor`), peers that cannot run here
(:class:`PeerUnavailable`), the distinct texts of a call or of a scale run, one correlation row's
scores (:func:`score_row`), the ISA a run ran on (:func:`machine_isa`) and BLEU and chrF as the
system-level table computes them (:func:`anchor_scores`).
"""

from __future__ import annotations

import functools
import math
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from benchmarks import CorrelationRow, SpeedSuite
from moverkit.facts.specs import SPECS
from moverkit.formats.lines import check_out
from moverkit.formats.options import METRICS, positive_int, require_data, rounds
from moverkit.judgments import Judgments, TestSet, read_judgments

# ---------------------------------------------------------------------------------------------
# The opening of a command

DATA_HELP = "TSV with columns lp, hypothesis, reference, human (required)"


def command_parser(which, name: str, help: str, run: Callable, data: str | None = DATA_HELP, limit: bool = False):
    """The parser of ``moverkit bench NAME`` (``help``: its line in ``moverkit bench --help``),
    which runs ``run(args)``; with ``data`` (the help of ``--data``), ``--data`` and ``--out``
    come first, then with ``limit`` the ``--limit`` that :func:`judgments` reads."""
    parser = which.add_parser(name, help=help)
    if data is not None:
        parser.add_argument("--data", type=Path, help=data)
        parser.add_argument("--out", type=Path, help="also write the report here (Markdown)")
    if limit:
        parser.add_argument("--limit", type=positive_int, help="use only the first N rows")
    parser.set_defaults(run=run)
    return parser


def cap_options(parser) -> None:
    cap = parser.add_mutually_exclusive_group()
    cap.add_argument(
        "--avx2",
        action="store_true",
        help="run limited to AVX2 (ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2), in a subprocess",
    )
    cap.add_argument("--strict-avx2", action="store_true", help="as --avx2, and MKL and FBGEMM limited to AVX2 too")


def capped_parser(which, name: str, help: str, run: Callable, *, measured: str, rounds_default: int):
    """:func:`command_parser` of a command that :func:`capped` can run again limited to AVX2
    (``bench precision``, ``bench overhead``), with the options :func:`capped` passes on:
    ``--limit``, ``--metrics`` (what the command does to them: ``measured``), ``--rounds``, then
    the caps. ``run(args)`` runs in this process where no cap is asked for."""
    parser = command_parser(which, name, help, functools.partial(_here_or_capped, run), limit=True)
    parser.add_argument("--metrics", nargs="*", choices=METRICS, help=f"metrics to {measured} (default: all five)")
    parser.add_argument(
        "--rounds", type=rounds, default=rounds_default, help="interleaved timed rounds (median reported)"
    )
    cap_options(parser)
    return parser


def _here_or_capped(run: Callable, args) -> int:
    status = capped(args)
    return run(args) if status is None else status


AVX2_ENV = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
"""The two variables of issue 24 that cap oneDNN and ATen's own kernels at AVX2."""
STRICT_AVX2_ENV = {**AVX2_ENV, "MKL_ENABLE_INSTRUCTIONS": "AVX2", "FBGEMM_ENABLE_INSTRUCTIONS": "AVX2"}
"""Also caps MKL (torch's float32 matrix products) and FBGEMM (torch's int8 Linear)."""


def environment_caps(args) -> dict[str, str] | None:
    """The environment caps of --avx2 / --strict-avx2, or None to run in this process."""
    return AVX2_ENV if args.avx2 else STRICT_AVX2_ENV if args.strict_avx2 else None


def capped(args) -> int | None:
    """With --avx2 or --strict-avx2, ``moverkit bench <command>`` again in a subprocess limited by
    their caps (:func:`environment_caps`), with the options of :func:`capped_parser` (--data,
    --rounds, --limit, --metrics, --out): its exit status. Else None: the command runs here."""
    caps = environment_caps(args)
    if caps is None:
        return None
    require_data(args)
    argv = ["bench", args.bench, "--data", str(args.data), "--rounds", str(args.rounds)]
    argv += ["--limit", str(args.limit)] if args.limit else []
    argv += ["--metrics", *args.metrics] if args.metrics else []
    argv += ["--out", str(args.out)] if args.out else []
    return run_capped(argv, caps)


def run_capped(argv: list[str], caps: Mapping[str, str]) -> int:
    """``moverkit ARGV`` in a subprocess whose environment adds ``caps`` (such as
    :data:`AVX2_ENV`): the caps are read when torch loads, so a process that has loaded it cannot
    cap itself. Returns the subprocess's exit status."""
    return subprocess.run([sys.executable, "-m", "moverkit.cli", *argv], env=child_environment(caps)).returncode


CHECKOUT = Path(__file__).resolve().parents[1]
"""The repository checkout that holds this package (``benchmarks/`` is not installed: the wheel
does not hold it)."""


def child_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a benchmark's child process: this process's, plus ``extra``, with
    :data:`CHECKOUT` first on ``PYTHONPATH``, so that a child that imports this package
    (``python -m benchmarks.<name>``, ``python -c "from benchmarks..."``) finds it wherever it
    runs."""
    path = os.pathsep.join(p for p in (str(CHECKOUT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, **(extra or {}), "PYTHONPATH": path}


def judgments(args, *outputs: str, limit: bool = True) -> Judgments:
    """The opening of a command on the judgments TSV: ``--data`` required; ``--out``, then the
    command's other ``outputs`` (``"json"``, ``"scores_cache"``: the options' names) each checked
    against ``--data`` and the outputs before it (no output overwrites an input or another output);
    then the judgments read: the first ``--limit`` rows where the command takes ``--limit`` (and
    ``limit``)."""
    require_data(args)
    taken = [args.data]
    for name in ("out", *outputs):
        path = getattr(args, name)
        check_out(path, list(taken), f"--{name.replace('_', '-')}")
        taken.append(path)
    return read_judgments(args.data, limit=getattr(args, "limit", None) if limit else None)


def text_pairs(args) -> list[tuple[str, str]]:
    """The (hypothesis, reference) rows of :func:`judgments` whose two texts are not blank: the
    texts a generation bench samples completions and references from."""
    data = judgments(args)
    return [(h, r) for h, r in zip(data.predictions, data.references) if h.strip() and r.strip()]


# ---------------------------------------------------------------------------------------------
# What the benchmarks measure with

CENTERED_BY_DEFAULT = tuple(name for name, s in SPECS.items() if s.centering == "corpus")
"""The metrics whose default centering is a corpus statistic (their spec's ``centering``:
centered_bertscore and twmd), the subjects of the benchmarks that measure centering and of the
throughput tables that time a few metrics only (issue 34's)."""

RUNS = {
    name: {"centering": "batch"} if name in CENTERED_BY_DEFAULT else {}
    for name in sorted(METRICS, key=lambda name: name not in CENTERED_BY_DEFAULT)
}
"""The metrics the throughput benchmarks run (``bench overhead``, ``bench gpu``, ``bench host``), every
metric of :data:`~moverkit.facts.specs.SPECS`, and their arguments: those of
:data:`CENTERED_BY_DEFAULT` with batch centering, first (issue 34's table; a random or fine-tuned
encoder has no fitted corpus statistic), the others with their defaults."""


def interleaved(contenders: Mapping[str, Callable[[], object]], rounds: int, clock=time.perf_counter) -> dict:
    """``{label: [seconds of each round]}``: each round runs every contender once, in turn, so
    drift in machine load hits all alike (every side-by-side timing of the benches)."""
    times = {label: [] for label in contenders}
    for _ in range(rounds):
        for label, run in contenders.items():
            start = clock()
            run()
            times[label].append(clock() - start)
    return times


class PeerUnavailable(ImportError):
    """A peer that cannot run here (its code or a snapshot of it is absent); the message says how
    to provide it."""


def distinct(predictions, references) -> list[str]:
    """The distinct texts of a call (predictions, then references), in the order of first use."""
    return list(dict.fromkeys([*predictions, *references]))


def distinct_texts(segments: list[str], n: int, seed: int = 0) -> list[str]:
    """``n`` distinct texts of sentence length made from ``segments``: each the first half of one
    segment's words and the second half of another's, drawn with ``seed`` until ``n`` differ
    (``bench scale``'s and ``bench gpu``'s large calls, where no text repeats)."""
    words = [s.split() for s in dict.fromkeys(segments) if len(s.split()) >= 2]
    if len(words) ** 2 < n:
        raise ValueError(f"{len(words)} usable segments cannot make {n} distinct texts")
    rng = random.Random(seed)
    texts: dict[str, None] = {}
    while len(texts) < n:
        head, tail = rng.choice(words), rng.choice(words)
        texts[" ".join(head[: len(head) // 2] + tail[len(tail) // 2 :])] = None
    return list(texts)


def encoder_floor(predictions, references, model_type=None, num_layers=None):
    """The encoder alone on the distinct texts: the floor no embedding metric can beat."""
    from moverkit._core.encoding import EncoderRequest, encode_texts, encoder_for

    request = EncoderRequest(model_type, num_layers)
    encoder = encoder_for(request)
    texts = distinct(predictions, references)
    encode_texts(encoder, texts[:2], request)
    return lambda: encode_texts(encoder, texts, request)


def over_the_encoder(
    key: str, name: str, contenders: dict[str, Callable], ratios: list, fastest: str, target: str | None = None
) -> SpeedSuite:
    """A speed suite that times the encoder alone first (:func:`encoder_floor`, the floor no
    embedding metric can beat), then ``contenders``, and reports last ``fastest`` over the encoder
    alone (``target``), after ``ratios``."""
    floor = "encoder alone"
    return SpeedSuite(key, name, {floor: encoder_floor, **contenders}, [*ratios, (fastest, floor, target)])


def sentence_encoder_floor(predictions, references):
    """The sentence encoder alone on the distinct sentences of the texts (split untimed): the floor
    of sbertscore, as :func:`encoder_floor` is the token-level metrics'."""
    from moverkit._core import encode_sentences, split_sentences
    from moverkit._core.encoding import EncoderRequest, sentence_encoder_for, sentence_truncations

    request = EncoderRequest()
    encoder = sentence_encoder_for(request)
    texts = dict.fromkeys(list(predictions) + list(references))
    sentences = list(dict.fromkeys(s for text in texts for s in split_sentences(text)))
    truncations = sentence_truncations(encoder)  # counted, never reported: the floor is timed, not scored
    encode_sentences(encoder, sentences[:2], request, truncations)
    return lambda: encode_sentences(encoder, sentences, request, truncations)


def metric_run(name: str, **kwargs):
    """A factory timing ``moverkit.load(name).compute(..., **kwargs)`` (module loaded, encoder warm)."""

    def factory(predictions, references):
        import moverkit

        metric = moverkit.load(name)
        metric.compute(predictions=predictions[:16], references=references[:16], **kwargs)  # 16: no few-texts warning
        return lambda: metric.compute(predictions=predictions, references=references, **kwargs)

    return factory


def floor(
    model_path: str, texts: Sequence[str], token_budget: int, *, device: str = "cpu", dtype: str = "float32"
) -> Callable[[], None]:
    """The floor's run: ``texts`` tokenized in one call of the Rust tokenizer behind the model's
    fast tokenizer (``encode_batch_fast``, the fastest tokenization there is, truncated at the
    model's limit, no padding), then encoded in batches sorted by length, longest first, of at most
    ``token_budget`` padded tokens, by the model's weights in ``dtype`` on ``device`` (``moverkit
    bench gpu`` takes float16 weights on a CUDA device); plain transformers and torch, no moverkit
    code. The model is loaded (and run once) here, untimed."""
    import numpy as np
    import torch
    from tokenizers import Tokenizer
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModel.from_pretrained(model_path).to(device=device, dtype=getattr(torch, dtype)).eval()
    limit = min(tokenizer.model_max_length, model.config.max_position_embeddings)
    rust = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    rust.no_padding()
    rust.enable_truncation(limit)
    texts = list(texts)

    def run() -> None:
        ids = [e.ids for e in rust.encode_batch_fast(texts, add_special_tokens=True)]
        lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        flat = np.fromiter((t for row in ids for t in row), dtype=np.int64, count=int(lengths.sum()))
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        order = np.argsort(-lengths, kind="stable")
        at = 0
        while at < len(order):
            width = int(lengths[order[at]])
            batch = order[at : at + max(token_budget // width, 1)]
            steps = np.arange(width)
            mask = steps[None, :] < lengths[batch, None]
            input_ids = np.where(mask, flat[np.minimum(starts[batch, None] + steps, len(flat) - 1)], 0)
            with torch.inference_mode():
                model(
                    input_ids=torch.from_numpy(input_ids).to(device),
                    attention_mask=torch.from_numpy(mask.astype(np.int64)).to(device),
                )
            at += len(batch)

    run()
    return run


def score_row(row: CorrelationRow, data: Judgments) -> list[float]:
    """The metric's scores for every segment, computed one group (language pair) per call, so
    ``batch`` centering takes the mean of that test set."""
    import moverkit

    metric = moverkit.load(row.metric)
    scores = [math.nan] * len(data.predictions)
    for members in data.by_group().values():
        result = metric.compute(
            predictions=[data.predictions[i] for i in members],
            references=[data.references[i] for i in members],
            **row.kwargs,
        )
        for i, value in zip(members, result[row.output]):
            scores[i] = value
    return scores


ISA_VARIABLES = ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "FBGEMM_ENABLE_INSTRUCTIONS")
"""Environment variables, read when torch loads, that cap the instructions of its CPU kernels."""


def peak_rss_bytes() -> int:
    """This process's peak resident set, in bytes: ``VmHWM`` of ``/proc/self/status`` on Linux.

    Not ``ru_maxrss``: Linux carries it across ``fork`` and ``exec``, so a subprocess started by a
    large parent (a test run, a notebook) reports at least the parent's size. Elsewhere
    ``ru_maxrss`` is what there is (bytes on macOS, KiB on other systems).
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024  # "VmHWM:   123456 kB"
    except OSError:
        pass
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else :func:`platform.processor`)."""
    import platform

    from moverkit._core.base import cpuinfo_field

    return cpuinfo_field("model name") or platform.processor() or platform.machine() or "unknown CPU"


def isa_line(cpu: str, flags: frozenset[str], caps: Mapping[str, str], native_bfloat16: bool) -> str:
    """The ISA a benchmark ran on, in one line: ``cpu`` (model name), its bfloat16 units among
    ``flags``, the ``caps`` (variables of :data:`ISA_VARIABLES` that are set) and whether bfloat16
    is fast under them (``native_bfloat16``, :func:`~moverkit._core.base.hardware.native_bfloat16_cpu`)."""
    from moverkit._core.base import BFLOAT16_CPU_FLAGS

    units = ", ".join(sorted(BFLOAT16_CPU_FLAGS & flags)) or "none"
    capped = ", ".join(f"{k}={v}" for k, v in caps.items()) or "none (native)"
    verdict = (
        "fast (AMX, or AVX512-BF16 on AMD)"
        if native_bfloat16
        else "not faster than float32 (no AMX nor AMD AVX512-BF16, or capped below them)"
    )
    return f"ISA: {cpu}; bfloat16 units: {units}; caps: {capped}; bfloat16 {verdict}"


def machine_isa() -> str:
    """:func:`isa_line` of this process: its CPU, and the caps of its environment."""
    from moverkit._core.base import cpu_flags, native_bfloat16_cpu

    caps = {k: os.environ[k] for k in ISA_VARIABLES if os.environ.get(k, "").strip()}
    return isa_line(cpu_model(), cpu_flags(), caps, native_bfloat16_cpu())


ANCHORS = ("BLEU", "chrF")
"""sacrebleu's corpus scores, beside the metrics: the anchors users know."""


def anchor_metric(anchor: str, references: list[str] | None = None):
    """A sacrebleu metric object: BLEU on the texts' own tokens, or chrF (sacrebleu's defaults);
    with ``references``, their statistics are computed once and kept (sacrebleu's reference cache)."""
    import sacrebleu

    refs = None if references is None else [references]
    # The texts come tokenized (as distributed): BLEU splits on their spaces only.
    if anchor == "BLEU":
        return sacrebleu.metrics.BLEU(tokenize="none", force=True, references=refs)
    if anchor == "chrF":
        return sacrebleu.metrics.CHRF(references=refs)
    raise ValueError(f"no anchor {anchor!r}; the anchors are {', '.join(ANCHORS)}")


def anchor_scores(test_set: TestSet, anchor: str) -> dict[str, float]:
    """sacrebleu's corpus BLEU or chrF of each system."""
    metric = anchor_metric(anchor)
    return {s: metric.corpus_score(out, [test_set.references]).score for s, out in test_set.outputs.items()}
