"""The speed/faithfulness frontier of faster CPU paths for the embedded encoder (issue 24).

Paths (:data:`PATHS`), all on the embedded all-MiniLM-L6-v2 cut after layer 6, one thread:
``float32`` (torch, the reference); ``bfloat16`` (``torch.autocast``); torch dynamic int8 of the
Linear layers, per-tensor and per-channel weights; per-channel int8 keeping the :data:`KEEP` Linear
layers whose own quantization moves the output most in float32; ONNX Runtime float32 and dynamic
int8 (per-tensor and per-channel weights) of the same graph, exported once to a temporary folder.

Measured for each path:

- ``speedup``: the float32 forward time over the path's, on ``n_texts`` texts (distinct
  references, then distinct hypotheses, of ``data_path``), tokenized once, sorted by length and
  batched 64 at a time; only the forward passes are timed, in interleaved rounds (each round runs
  every path once), best round per path;
- faithfulness: ``centered_bertscore`` F1 (``centering="none"``, no IDF) of ``n_pairs`` pairs
  (the first ``n_pairs / n_groups`` of each language pair) with the path's vectors substituted
  for the encoder's (the encoder's model is swapped), against float32's: mean and max
  :math:`|\\Delta F1|`, and the average over language pairs of Pearson r with ``human``.

The ISA the kernels may use is capped by environment variables read when torch loads: run the
module a second time with :data:`~benchmarks._shared.AVX2_ENV` (``--avx2`` does it in a subprocess). ONNX Runtime
has no such cap: its kernels use every instruction of the CPU in both runs.
"""

from __future__ import annotations

import contextlib
import csv
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from moverkit.formats.options import emit, positive_int, require_data, rounds

if TYPE_CHECKING:
    import torch

from benchmarks._shared import (
    STRICT_AVX2_ENV,
    cap_options,
    child_environment,
    command_parser,
    environment_caps,
    machine_isa,
    run_capped,
)

HELP = "int8 and ONNX Runtime paths of the encoder vs float32: speed, |delta F1|, Pearson"

PATHS = (
    "float32", "bfloat16", "int8 per-tensor", "int8 per-channel", "int8 per-channel, keep",
    "onnx float32", "onnx int8 per-tensor", "onnx int8 per-channel",
)  # fmt: skip
KEEP = 4
"""How many of the most sensitive Linear layers ``int8 per-channel, keep`` leaves in float32."""
BATCH = 64

Forward = Callable[["torch.Tensor", "torch.Tensor"], "torch.Tensor"]
"""``forward(input_ids, attention_mask) -> last hidden states``: one path of the encoder (torch is
imported where a path is built, so that ``moverkit bench --help`` loads no torch)."""


def read_pairs(data_path: str) -> list[dict]:
    """The rows of a tab-separated judgments file (lp, system, sid, hypothesis, reference, human)."""
    with open(data_path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def timing_texts(rows: list[dict], n_texts: int) -> list[str]:
    """``n_texts / 2`` distinct references, then as many distinct hypotheses, in file order."""
    half = n_texts // 2
    refs = list(dict.fromkeys(r["reference"] for r in rows))[:half]
    hyps = list(dict.fromkeys(r["hypothesis"] for r in rows))[: n_texts - half]
    return refs + hyps


def balanced_pairs(rows: list[dict], n_pairs: int) -> list[dict]:
    """The first ``n_pairs / n_groups`` rows of each language pair."""
    groups = list(dict.fromkeys(r["lp"] for r in rows))
    per = n_pairs // len(groups)
    return [r for g in groups for r in [r for r in rows if r["lp"] == g][:per]]


def batches(tokenizer, texts: list[str], size: int = BATCH) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``texts`` tokenized, sorted by length (longest first), padded ``size`` at a time."""
    ids = sorted(tokenizer(texts, truncation=True, max_length=512)["input_ids"], key=len, reverse=True)
    out = []
    for start in range(0, len(ids), size):
        chunk = ids[start : start + size]
        encoded = tokenizer.pad({"input_ids": chunk}, return_tensors="pt")
        out.append((encoded["input_ids"], encoded["attention_mask"]))
    return out


def sensitive_linears(model: torch.nn.Module, calib: list, k: int) -> list[str]:
    """The ``k`` Linear layers whose per-channel int8 quantization alone (all others float32)
    moves the encoder's output most: mean |delta| of the output vectors on ``calib``."""
    import torch

    ref = [model(input_ids=i, attention_mask=m)[0] for i, m in calib]
    errors = {}
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and "pooler" not in name:
            spec = {name: torch.ao.quantization.per_channel_dynamic_qconfig}
            quantized = torch.ao.quantization.quantize_dynamic(model, spec, dtype=torch.qint8)
            outs = [quantized(input_ids=i, attention_mask=m)[0] for i, m in calib]
            errors[name] = float(sum((o - r).abs().mean() for o, r in zip(outs, ref)))
    return sorted(errors, key=errors.get, reverse=True)[:k]


def _torch_path(model: torch.nn.Module, autocast: bool = False) -> Forward:
    import torch

    def forward(ids, mask):
        with torch.autocast("cpu", dtype=torch.bfloat16) if autocast else contextlib.nullcontext():
            return model(input_ids=ids, attention_mask=mask)[0].float()

    return forward


def _onnx_path(path: str) -> Forward:
    import onnxruntime as ort
    import torch

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    return lambda ids, mask: torch.from_numpy(
        session.run(["hidden"], {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})[0]
    )


def build_paths(model: torch.nn.Module, calib: list, folder: str) -> tuple[dict[str, Forward], list[str]]:
    """Every path of :data:`PATHS` as a forward function, and the Linear layers the ``keep``
    path leaves in float32. The ONNX graphs are written to ``folder``."""
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    class _LastHidden(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            return self.model(input_ids=input_ids, attention_mask=attention_mask)[0]

    q = torch.ao.quantization
    linears = {n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and "pooler" not in n}
    kept = sensitive_linears(model, calib, KEEP)
    channel = dict.fromkeys(linears, q.per_channel_dynamic_qconfig)
    keep = {n: c for n, c in channel.items() if n not in kept}
    onnx32 = os.path.join(folder, "float32.onnx")
    dims = {0: "batch", 1: "tokens"}
    torch.onnx.export(  # an eval() wrapper: export restores the wrapper's mode on the model inside
        _LastHidden(model).eval(), calib[0], onnx32, input_names=["input_ids", "attention_mask"], output_names=["hidden"],
        dynamic_axes={"input_ids": dims, "attention_mask": dims, "hidden": dims}, opset_version=17, dynamo=False,
    )  # fmt: skip
    for per_channel in (False, True):
        out = os.path.join(folder, f"int8_{'channel' if per_channel else 'tensor'}.onnx")
        quantize_dynamic(onnx32, out, per_channel=per_channel, weight_type=QuantType.QInt8)
    return {
        "float32": _torch_path(model),
        "bfloat16": _torch_path(model, autocast=True),
        "int8 per-tensor": _torch_path(q.quantize_dynamic(model, linears, dtype=torch.qint8)),
        "int8 per-channel": _torch_path(q.quantize_dynamic(model, channel, dtype=torch.qint8)),
        "int8 per-channel, keep": _torch_path(q.quantize_dynamic(model, keep, dtype=torch.qint8)),
        "onnx float32": _onnx_path(onnx32),
        "onnx int8 per-tensor": _onnx_path(os.path.join(folder, "int8_tensor.onnx")),
        "onnx int8 per-channel": _onnx_path(os.path.join(folder, "int8_channel.onnx")),
    }, kept


def f1_scores(encoder, forward: Forward, pairs: list[dict]) -> np.ndarray:
    """centered_bertscore F1 (no centering, no IDF) of ``pairs`` with ``forward`` as the encoder."""
    import torch

    class _Swapped(torch.nn.Module):
        """Stands in for the encoder's model: ``forward(ids, mask)`` gives ``(vectors,)``."""

        def __init__(self, forward: Forward, config):
            super().__init__()
            self.fn, self.config = forward, config

        def forward(self, input_ids, attention_mask, **_):
            return (self.fn(input_ids, attention_mask),)

    from moverkit.functional import centered_bertscore

    original, encoder.model = encoder.model, _Swapped(forward, encoder.model.config)
    try:
        hyps, refs = [r["hypothesis"] for r in pairs], [r["reference"] for r in pairs]
        return np.array(centered_bertscore(hyps, refs, centering="none", device="cpu")["f1"])
    finally:
        encoder.model = original


def mean_pearson(scores: np.ndarray, pairs: list[dict]) -> float:
    """Pearson r of ``scores`` with ``human``, averaged over language pairs."""
    lps = np.array([r["lp"] for r in pairs])
    human = np.array([float(r["human"]) for r in pairs])
    from moverkit.judgments.correlation import pearson

    return float(np.mean([pearson(scores[lps == g].tolist(), human[lps == g].tolist()) for g in dict.fromkeys(lps)]))


def frontier(data_path: str, n_texts: int = 1200, n_pairs: int = 1400, rounds: int = 2) -> list[dict]:
    """One row per path of :data:`PATHS` (see the module's docstring), measured in this process
    under the ISA caps of its environment."""
    import torch

    from moverkit._core.encoding import get_encoder

    torch.set_num_threads(1)
    encoder = get_encoder(None, None, "cpu")
    rows = read_pairs(data_path)
    timed = batches(encoder.tokenizer, timing_texts(rows, n_texts))
    pairs = balanced_pairs(rows, n_pairs)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder, torch.no_grad():
        paths, kept = build_paths(encoder.model, timed[::6], folder)  # calibration: 4 of the batches
        print(f"built in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        seconds = {name: [] for name in paths}
        for _ in range(rounds):
            for name, forward in paths.items():
                forward(*timed[-1])  # warm
                start = time.perf_counter()
                for ids, mask in timed:
                    forward(ids, mask)
                seconds[name].append(time.perf_counter() - start)
        print(f"timed in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        f1 = {name: f1_scores(encoder, forward, pairs) for name, forward in paths.items()}
    env = ", ".join(f"{k}={os.environ[k]}" for k in STRICT_AVX2_ENV if k in os.environ) or "native"
    best = {name: min(s) for name, s in seconds.items()}
    pearson32 = mean_pearson(f1["float32"], pairs)
    out = []
    for name in paths:
        delta = np.abs(f1[name] - f1["float32"])
        out.append({
            "path": name, "isa": env, "seconds": best[name], "speedup": best["float32"] / best[name],
            "mean_abs_delta": float(delta.mean()), "max_abs_delta": float(delta.max()),
            "pearson": mean_pearson(f1[name], pairs), "pearson_float32": pearson32,
            "kept_float32": kept if name.endswith("keep") else [], "texts": n_texts, "pairs": len(pairs),
        })  # fmt: skip
    return out


def passes(row: dict) -> str:
    """Issue 24's bar for the row's path (meant for the AVX2-capped run): int8 >= 2x faster with
    mean |delta F1| <= 2e-3 and average Pearson within 0.3 points; ONNX float32 >= 1.3x with
    max |delta F1| <= 1e-5; other paths have none."""
    if "int8" in row["path"]:
        close = abs(row["pearson"] - row["pearson_float32"]) <= 0.003
        return "yes" if row["speedup"] >= 2 and row["mean_abs_delta"] <= 2e-3 and close else "no"
    if row["path"] == "onnx float32":
        return "yes" if row["speedup"] >= 1.3 and row["max_abs_delta"] <= 1e-5 else "no"
    return ""


def format_table(rows: list[dict]) -> str:
    """The rows as a Markdown table, one line per path and ISA setting."""
    lines = [
        "| ISA | path | forward (s) | speed-up | mean abs dF1 | max abs dF1 | Pearson (float32 / path) | passes |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['isa']} | {r['path']} | {r['seconds']:.1f} | {r['speedup']:.2f}x | {r['mean_abs_delta']:.1e} "
            f"| {r['max_abs_delta']:.1e} | {100 * r['pearson_float32']:.2f} / {100 * r['pearson']:.2f} | {passes(r)} |"
        )
    kept = next((r["kept_float32"] for r in rows if r["kept_float32"]), [])
    return "\n".join(lines) + (f"\n\nKept in float32 by `keep`: {', '.join(kept)}." if kept else "")


def report(data_path: str, n_texts: int = 1200, n_pairs: int = 1400, rounds: int = 2) -> str:
    """:func:`frontier` as :func:`format_table`, then the line of the ISA it ran on
    (:func:`benchmarks._shared.machine_isa`)."""
    table = format_table(frontier(data_path, n_texts=n_texts, n_pairs=n_pairs, rounds=rounds))
    return f"{table}\n\n{machine_isa()}"


def parse_args(argv: list[str]):
    """The options of :func:`main` (``--help`` lists them)."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.quantized",
        allow_abbrev=False,
        description="Speed and score change of int8 and ONNX Runtime paths of the embedded encoder "
        "against torch float32, one thread (issue 24).",
    )
    parser.add_argument("data", help="tab-separated judgments (lp, system, sid, hypothesis, reference, human)")
    parser.add_argument("--n-texts", type=int, default=1200, help="texts timed per path (half references) [1200]")
    parser.add_argument("--n-pairs", type=int, default=1400, help="pairs scored per path, balanced over lps [1400]")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved timed rounds, best kept [2]")
    cap = parser.add_mutually_exclusive_group()
    cap.add_argument("--avx2", action="store_true", help="run capped by AVX2_ENV (oneDNN and ATen) in a subprocess")
    cap.add_argument(
        "--strict-avx2", action="store_true", help="also cap MKL and FBGEMM (STRICT_AVX2_ENV), in a subprocess"
    )
    args = parser.parse_args(argv)
    for name in ("n_texts", "n_pairs", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


def main(argv: list[str]) -> None:
    """``python -m benchmarks.quantized DATA [--n-texts N] [--n-pairs N] [--rounds N]
    [--avx2 | --strict-avx2]``: the table of this process's environment, or of a subprocess capped
    by :func:`~benchmarks._shared.environment_caps` (the caps are read when torch loads)."""
    args = parse_args(argv)
    caps = environment_caps(args) or {}
    if any(os.environ.get(k) != v for k, v in caps.items()):  # not capped yet: torch reads the caps as it loads
        rest = [a for a in argv if a not in ("--avx2", "--strict-avx2")]
        subprocess.run([sys.executable, "-m", "benchmarks.quantized", *rest], env=child_environment(caps), check=True)
        return
    print(report(args.data, n_texts=args.n_texts, n_pairs=args.n_pairs, rounds=args.rounds), flush=True)


def register(which) -> None:
    parser = command_parser(which, "quantized", HELP, command)
    parser.add_argument("--n-texts", type=positive_int, default=1200, help="texts timed per path (half references)")
    parser.add_argument("--n-pairs", type=positive_int, default=1400, help="pairs scored per path")
    parser.add_argument("--rounds", type=rounds, default=2, help="interleaved timed rounds (best kept)")
    cap_options(parser)


def command(args) -> int:
    from moverkit.formats.lines import check_out

    require_data(args)
    check_out(args.out, [args.data])
    sizes = ["--n-texts", str(args.n_texts), "--n-pairs", str(args.n_pairs), "--rounds", str(args.rounds)]
    caps = environment_caps(args)
    if caps:
        out = ["--out", str(args.out)] if args.out else []
        return run_capped(["bench", "quantized", "--data", str(args.data), *sizes, *out], caps)
    text = report(str(args.data), n_texts=args.n_texts, n_pairs=args.n_pairs, rounds=args.rounds)
    return emit(text, args.out)


if __name__ == "__main__":
    main(sys.argv[1:])
