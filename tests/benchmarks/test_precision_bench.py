"""``moverkit bench precision``: it names the ISA it ran on (no model is run), and a run on the
sample reports both precisions."""

from pathlib import Path

import pytest

from benchmarks import _shared, precision
from moverkit.cli import main

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "wmt17_sample.tsv"

XEON = "Intel(R) Xeon(R) Platinum 8480+"
AMX = frozenset({"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"})


def _row():
    return {
        "metric": "twmd", "pairs": 40, "rounds": 1, "seconds": {"float32": 2.0, "bfloat16": 1.0}, "speedup": 2.0,
        "mean_abs_delta": 1e-4, "max_abs_delta": 1e-3,
        "pearson_kendall": {"float32": (0.6, 0.4), "bfloat16": (0.6, 0.4)},
    }  # fmt: skip


def test_isa_line_names_the_cpu_its_bfloat16_units_and_the_caps():
    native = _shared.isa_line(XEON, AMX, {}, True)
    assert (
        native
        == f"ISA: {XEON}; bfloat16 units: amx_bf16, avx512_bf16; caps: none (native); bfloat16 fast (AMX, or AVX512-BF16 on AMD)"
    )
    caps = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
    capped = _shared.isa_line(XEON, AMX, caps, False)
    assert "caps: ONEDNN_MAX_CPU_ISA=AVX2, ATEN_CPU_CAPABILITY=avx2;" in capped
    assert capped.endswith("bfloat16 not faster than float32 (no AMX nor AMD AVX512-BF16, or capped below them)")
    laptop = _shared.isa_line("AMD Ryzen 7 5800U", frozenset({"avx2", "fma"}), {}, False)
    assert "bfloat16 units: none;" in laptop


def test_table_keeps_its_columns_and_ends_with_the_isa():
    lines = precision.format_table([_row()], isa="ISA: some CPU").splitlines()
    assert lines[0].startswith("| metric | float32 (s) | bfloat16 (s) | speed-up |")
    assert lines[2].startswith("| twmd | 2.0 | 1.0 | 2.00x |")
    assert lines[-2:] == ["", "ISA: some CPU"]


def test_machine_isa_follows_the_environment_caps(monkeypatch):
    for name in _shared.ISA_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    native = _shared.machine_isa()
    assert native.startswith(f"ISA: {_shared.cpu_model()}; bfloat16 units: ") and "caps: none (native)" in native
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    capped = _shared.machine_isa()
    assert "caps: ONEDNN_MAX_CPU_ISA=AVX2, ATEN_CPU_CAPABILITY=avx2;" in capped
    assert capped.endswith("bfloat16 not faster than float32 (no AMX nor AMD AVX512-BF16, or capped below them)")
    assert precision.format_table([_row()]).splitlines()[-1] == capped


def test_run_capped_reruns_the_cli_with_the_caps(monkeypatch):
    import subprocess
    import sys
    from types import SimpleNamespace

    calls = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, env: calls.append((cmd, env)) or SimpleNamespace(returncode=3))
    caps = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
    assert _shared.run_capped(["bench", "precision", "--data", "d.tsv"], caps) == 3
    ((cmd, env),) = calls
    assert cmd == [sys.executable, "-m", "moverkit.cli", "bench", "precision", "--data", "d.tsv"]
    assert env["ONEDNN_MAX_CPU_ISA"] == "AVX2" and env["ATEN_CPU_CAPABILITY"] == "avx2" and "PATH" in env


@pytest.mark.slow  # runs a benchmark end to end
def test_bench_precision_reports_both_dtypes(tmp_path, capsys):
    out = tmp_path / "precision.md"
    args = ["bench", "precision", "--data", str(SAMPLE), "--limit", "16", "--metrics", "centered_bertscore"]
    assert main([*args, "--rounds", "1", "--out", str(out)]) == 0
    table = out.read_text().splitlines()
    assert table[0].startswith("| metric | float32 (s) | bfloat16 (s) | speed-up |")
    cells = table[2].strip("|").split("|")
    assert cells[0].strip() == "centered_bertscore"
    assert 0 < float(cells[4]) < 1e-2 and float(cells[4]) <= float(cells[5])  # bfloat16 moves the scores a little
