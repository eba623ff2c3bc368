"""``moverkit bench gpu`` (issue 34) on a CPU: its refusal without CUDA, its arguments and its
report, the device's facts faked (``bench.gpu.device_api``) and the scoring run on the CPU."""

from __future__ import annotations

import pytest

from benchmarks import gpu
from moverkit.cli import main

SAMPLE = "tests/data/wmt17_sample.tsv"


class FakeCuda:
    """What the bench reads of ``torch.cuda``: a device that is there, named, with a peak memory."""

    def __init__(self, available=True):
        self.available = available
        self.synchronized = 0

    def is_available(self):
        return self.available

    def get_device_name(self, device):
        return f"Fake GPU ({device})"

    def synchronize(self, device):
        self.synchronized += 1

    def reset_peak_memory_stats(self, device):
        pass

    def max_memory_allocated(self, device):
        return 3 * 2**29  # 1.5 GiB


def test_refuses_without_a_cuda_device(monkeypatch, capsys):
    monkeypatch.setattr(gpu, "device_api", lambda: FakeCuda(available=False))
    assert main(["bench", "gpu", "--data", SAMPLE]) == 2
    assert capsys.readouterr().err.startswith("moverkit: error: bench gpu needs a CUDA device")


def test_a_bad_scale_budget_is_refused_before_the_runs(monkeypatch, capsys):
    monkeypatch.setattr(gpu, "device_api", lambda: FakeCuda())
    monkeypatch.setattr(gpu, "measure", lambda *args, **kwargs: pytest.fail("measured with a bad budget"))
    assert main(["bench", "gpu", "--data", SAMPLE, "--scale-budget", "lots"]) == 2
    assert "--scale-budget must look like '512MB' or '2GB', got 'lots'" in capsys.readouterr().err


@pytest.mark.parametrize("bad", [["--dtypes", "float64"], ["--scale-pairs", "-1"], ["--rounds", "0"]])
def test_bad_arguments_are_refused_by_name(bad, capsys):
    with pytest.raises(SystemExit):
        main(["bench", "gpu", "--data", SAMPLE, *bad])
    assert bad[0] in capsys.readouterr().err


@pytest.mark.slow
def test_the_whole_path_runs_and_reports_every_figure(monkeypatch, capsys, tiny_model_path, tmp_path):
    """The real scoring, timing and report on the CPU (the device named "cpu"), the device's facts faked."""
    fake = FakeCuda()
    monkeypatch.setattr(gpu, "device_api", lambda: fake)
    monkeypatch.setattr(gpu, "bert_score_call", lambda *args: ((lambda: None), "0.3.13"))
    out = tmp_path / "gpu.md"
    argv = ["bench", "gpu", "--data", SAMPLE, "--limit", "6", "--model", tiny_model_path, "--device", "cpu"]
    argv += ["--dtypes", "float32", "bfloat16", "--rounds", "1", "--scale-pairs", "8", "--scale-dtype", "float32"]
    argv += ["--scale-budget", "64KB", "--check-pairs", "6", "--out", str(out)]
    import moverkit
    from moverkit._core.call.streaming import memory_budget

    budgets, timed = [], gpu.timed
    monkeypatch.setattr(gpu, "timed", lambda *args: budgets.append(memory_budget()) or timed(*args))
    moverkit.set_memory_budget("300MB")  # a budget the user set before
    try:
        assert main(argv) == 0
        assert memory_budget() == 300 * 2**20  # given back after the scale run
    finally:
        moverkit.set_memory_budget(None)
    assert budgets.count(64 * 2**10) == len(gpu.SCALE_METRICS)  # the scale run's calls, and only they
    report = out.read_text()
    assert report.startswith("Metrics on Fake GPU (cpu) (torch ")
    assert "6 pairs, after a warm-up call, median of 1 calls" in report
    for name in gpu.TIMED:
        assert f"| {name}" in report
    assert "| 1.50 GiB |" in report  # the peak memory, from the device
    for name in gpu.TIMED:  # each half precision against float32, from the timed calls' own scores
        assert f"- {name} bfloat16 against float32 on the GPU, main score: mean |diff| " in report
    assert "- bert-score 0.3.13 (same weights and layer" in report
    assert "- centered_bertscore on 8 distinct pairs, float32, memory budget 64KB:" in report
    assert "- twmd on 8 distinct pairs" in report and "x floor), peak" in report
    assert "- the floor on those 16 texts: " in report
    assert "Floor: one Rust tokenizer call (encode_batch_fast) and the forward with float16 weights over the " in report
    assert report.count("x floor)") == 1 + len(gpu.TIMED) * 2 + len(gpu.SCALE_METRICS)  # the heading, then each cell
    # GPU and CPU are both the CPU here: the same scores.
    assert "on 6 pairs: centered_bertscore 0.0e+00, twmd 0.0e+00, lazy_emd 0.0e+00, sbertscore 0.0e+00" in report
    assert fake.synchronized >= 2 * len(gpu.TIMED) + 2  # every timed call waits for the device


def test_report_gives_seconds_and_pairs_per_second_per_precision():
    cell = {"seconds": 0.5, "pairs_per_s": 5600.0, "peak": 2**30}
    report = {
        "device": "NVIDIA H200",
        "torch": "2.11",
        "n_pairs": 2800,
        "rounds": 3,
        "dtypes": ["float32", "float16"],
        "table": {(name, d): cell for name in gpu.TIMED for d in ("float32", "float16")},
        "drift": {("twmd", "float16"): {"mean": 1.2e-4, "max": 4.5e-4}},
        "batch_table": {
            (name, d, b): 0.25 + b / 1000
            for name in gpu.BATCH_METRICS
            for d in ("float32", "float16")
            for b in gpu.BATCH_SIZES
        },
        "peer": None,
        "scale": {},
        "floor": {"seconds": 0.125, "pairs_per_s": 22400.0, "texts": 4982},
        "scale_floor": None,
        "scale_pairs": 0,
        "scale_dtype": "float16",
        "check_pairs": 200,
        "differences": {"twmd": 3e-7},
    }
    text = gpu.format_report(report)
    assert "| metric | float32 | float16 | peak GPU memory |" in text
    assert (
        "| twmd (centering='batch') | 0.50 s (5,600 pairs/s, 4.0x floor) | 0.50 s (5,600 pairs/s, 4.0x floor) | 1.00 GiB |"
        in text
    )
    assert (
        "Floor: one Rust tokenizer call (encode_batch_fast) and the forward with float16 weights over the 4,982 distinct texts (batches of "
        "65,536 padded tokens): 0.125 s (22,400 pairs/s)" in text
    )
    assert "| centered_bertscore | float16 | 0.266 | 0.314 | 0.506 |" in text
    assert "- twmd float16 against float32 on the GPU, main score: mean |diff| 1.2e-04, max 4.5e-04" in text
    assert "- bert-score: not installed, not timed" in text
    assert "on 200 pairs: twmd 3.0e-07" in text
