"""Which precision is fast on which machine: bfloat16 units read from the CPU's flags, with
ONEDNN_MAX_CPU_ISA and ATEN_CPU_CAPABILITY honoured (so that one machine tests both cases),
``dtype="auto"`` made concrete before hashing, and a warning for bfloat16 where it is slow."""

from __future__ import annotations

import pytest
import torch

from moverkit import functional
from moverkit._core.base import hardware
from moverkit._core.base.hardware import SlowPrecisionWarning, auto_dtype, check_dtype, native_bfloat16_cpu
from moverkit._core.encoding.request import EncoderRequest

CPU = torch.device("cpu")


@pytest.fixture
def cpu(monkeypatch):
    """A CPU whose flags the test sets, with neither ISA variable set."""
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)

    def with_flags(*flags, vendor="GenuineIntel"):
        monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset(flags))
        monkeypatch.setattr(hardware, "cpu_vendor", lambda: vendor)

    return with_flags


@pytest.mark.parametrize(
    ("flags", "vendor", "native"),
    [
        (("amx_bf16", "avx512_bf16"), "GenuineIntel", True),  # 3.2x float32
        (("avx512_bf16",), "AuthenticAMD", True),  # 1.8x (AMD EPYC)
        (("avx512_bf16",), "GenuineIntel", False),  # 0.64-0.69x (Intel Xeon without AMX)
        (("avx512f",), "GenuineIntel", False),
        (("avx512f",), "AuthenticAMD", False),
    ],
)
def test_bfloat16_units_are_read_from_the_flags_and_vendor(cpu, flags, vendor, native):
    cpu("sse4_2", "avx2", *flags, vendor=vendor)
    assert native_bfloat16_cpu() is native
    assert auto_dtype(CPU) == ("bfloat16" if native else "float32")


@pytest.mark.parametrize(
    "variable, value, native",
    [
        ("ONEDNN_MAX_CPU_ISA", "AVX2", False),
        ("ONEDNN_MAX_CPU_ISA", "avx512_core", False),  # AVX512 without its BF16 extension
        ("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16", False),  # AMX capped away: AVX512-BF16 alone, on Intel
        ("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_AMX", True),
        ("ONEDNN_MAX_CPU_ISA", "ALL", True),
        ("ATEN_CPU_CAPABILITY", "avx2", False),
        ("ATEN_CPU_CAPABILITY", "default", False),
        ("ATEN_CPU_CAPABILITY", "avx512", True),
    ],
)
def test_the_isa_variables_cap_the_units(cpu, monkeypatch, variable, value, native):
    cpu("avx512_bf16", "amx_bf16")
    monkeypatch.setenv(variable, value)
    assert native_bfloat16_cpu() is native
    assert auto_dtype(CPU) == ("bfloat16" if native else "float32")


def test_bfloat16_without_units_warns_at_each_check_with_the_measured_ratio(cpu):
    cpu("avx2")
    with pytest.warns(SlowPrecisionWarning, match=r"0\.22-0\.25x the speed of float32.*dtype='auto'") as caught:
        check_dtype("bfloat16", CPU)
        check_dtype("bfloat16", CPU)
    assert len(caught) == 2  # the warnings machinery, not moverkit, decides what is shown
    cpu("amx_bf16")
    check_dtype("bfloat16", CPU)  # native units: no warning (an unasserted one fails the test)


def test_each_call_in_bfloat16_on_a_slow_cpu_warns_its_own_collecting_block(monkeypatch):
    """Issue 68: the warning was given once per process (functools.cache), so a second
    ``collected_warnings`` block (a server's second request) never saw it. Each call that asks for
    bfloat16 on a CPU without bfloat16 units now warns, and each block gathers its own."""
    from moverkit._core.base import collected_warnings

    monkeypatch.setattr(hardware, "native_bfloat16_cpu", lambda: False)
    for _ in range(2):
        with collected_warnings() as caught:
            functional.centered_bertscore(["the cat sat"], ["a cat sat"], dtype="bfloat16", device="cpu")
        assert [type(w) for w in caught] == [SlowPrecisionWarning]


def test_float16_on_the_cpu_is_refused_naming_the_alternatives(cpu):
    with pytest.raises(ValueError, match="dtype='auto'"):
        check_dtype("float16", CPU)


def test_auto_is_made_concrete_before_hashing(cpu):
    cpu("amx_bf16")
    assert EncoderRequest(dtype="auto", device="cpu").dtype == "bfloat16"
    cpu("avx2")
    assert EncoderRequest(dtype="auto", device="cpu").dtype == "float32"
    auto = functional.centered_bertscore(["the cat sat"], ["a cat sat"], dtype="auto", device="cpu")
    exact = functional.centered_bertscore(["the cat sat"], ["a cat sat"], dtype="float32", device="cpu")
    assert auto == exact and "dtype=float32" in auto["hashcode"]


def test_a_bad_dtype_lists_auto(cpu):
    with pytest.raises(ValueError, match="auto"):
        EncoderRequest(dtype="int8")


def test_tokenizing_ahead_on_an_accelerator_by_default_or_as_the_environment_says(monkeypatch):
    """tokenizes_ahead: on an accelerator, not on a CPU, unless MOVERKIT_TOKENIZE_AHEAD says 1 or
    0; another value is an error that names the variable."""
    from moverkit._core.base.environment import TOKENIZE_AHEAD_VARIABLE
    from moverkit._core.base.hardware import tokenizes_ahead

    cpu, cuda = torch.device("cpu"), torch.device("cuda:0")
    monkeypatch.delenv(TOKENIZE_AHEAD_VARIABLE, raising=False)
    assert tokenizes_ahead(cuda) and not tokenizes_ahead(cpu)
    monkeypatch.setenv(TOKENIZE_AHEAD_VARIABLE, "1")
    assert tokenizes_ahead(cpu)
    monkeypatch.setenv(TOKENIZE_AHEAD_VARIABLE, " 0 ")
    assert not tokenizes_ahead(cuda)
    monkeypatch.setenv(TOKENIZE_AHEAD_VARIABLE, "yes")
    with pytest.raises(ValueError, match="MOVERKIT_TOKENIZE_AHEAD must be 1 or 0, got 'yes'"):
        tokenizes_ahead(cpu)
