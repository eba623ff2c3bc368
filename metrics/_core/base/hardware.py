"""The device a call runs on and the precision of the encoder's forward pass there: which devices
there are, how work on one is planned, and which precision is fast on it (what a call reads from
its environment variables is :mod:`~moverkit._core.base.environment`'s; the memory it may take,
:func:`~moverkit._core.call.streaming.memory_budget`'s).

``bfloat16`` matrix products are fast only where the CPU has bfloat16 units that oneDNN uses
well: Intel AMX (``amx_bf16``), or AVX512-BF16 (``avx512_bf16``) on an AMD CPU. Measured with the
embedded encoder, one thread (ratios of the forward pass to float32): 3.2x on a Xeon with AMX,
1.8x on an AMD EPYC with AVX512-BF16 only, 0.64-0.69x on an Intel Xeon with AVX512-BF16 but no
AMX (torch 2.13: slower than float32), and 0.22-0.25x (four times slower) on the same CPUs
limited to AVX2 (``ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2``), as on most laptops and
cloud VMs. :func:`native_bfloat16_cpu` reads the CPU's flags and vendor and honours both
variables, so each case can be tested on one machine.
"""

from __future__ import annotations

import contextlib
import functools
import os

import torch

from moverkit._core.base.environment import current_environment
from moverkit._core.base.user_warnings import MoverkitWarning, warn_user

DTYPES = ("float32", "bfloat16", "float16", "auto")
"""Precisions of the encoder's forward pass (``dtype=``): ``float32`` is exact (bert-score
parity); ``auto`` is :func:`auto_dtype` of the device."""

BFLOAT16_CPU_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})
"""``/proc/cpuinfo`` flags of CPUs that run bfloat16 matrix products in hardware (fast with
oneDNN: ``amx_bf16``; ``avx512_bf16`` on AMD only, see the module doc)."""

ONEDNN_AMX_ISAS = frozenset(
    {"AVX512_CORE_AMX", "AVX512_CORE_AMX_FP16", "AVX10_1_512_AMX", "AVX10_1_512_AMX_FP16", "AVX10_2_512_AMX_2"}
)
"""Values of ``ONEDNN_MAX_CPU_ISA`` that still allow oneDNN's AMX kernels."""

ONEDNN_BFLOAT16_ISAS = frozenset(
    {
        "AVX512_CORE_BF16",
        "AVX512_CORE_FP16",
        "AVX512_CORE_AMX",
        "AVX512_CORE_AMX_FP16",
        "AVX10_1_512",
        "AVX10_1_512_AMX",
        "AVX10_1_512_AMX_FP16",
        "AVX10_2_512",
        "AVX10_2_512_AMX_2",
    }
)
"""Values of ``ONEDNN_MAX_CPU_ISA`` that still allow oneDNN's bfloat16 kernels (lower caps, such as
``AVX2`` or ``AVX512_CORE``, make it emulate bfloat16)."""

SLOW_BFLOAT16_RATIO = "0.22-0.25x"
"""The measured speed of ``bfloat16`` relative to ``float32`` on a CPU without bfloat16 units."""


class SlowPrecisionWarning(MoverkitWarning):
    """``dtype="bfloat16"`` on a CPU that emulates it: slower than ``float32``. Which machines warn
    depends on the hardware, so a test suite may filter it (the library's own tests do)."""


def resolve_device(device: str | int | torch.device | None) -> torch.device:
    """``None`` picks CUDA when there is one, else the CPU; an int is a CUDA ordinal.

    A device this machine lacks (``"cuda"`` without CUDA, ``"cuda:7"`` with fewer GPUs, ``"mps"``
    without Metal) is a ``ValueError`` that names ``device`` and lists :func:`available_devices`,
    before any model is loaded.
    """
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        if isinstance(device, bool):
            raise TypeError
        dev = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
    except (RuntimeError, TypeError, ValueError) as err:
        raise ValueError(f"device must be like 'cpu', 'cuda' or 'cuda:1', got {device!r}") from err
    if dev.type == "cpu":
        return dev
    backend = getattr(torch, dev.type, None)  # torch.cuda, torch.mps, torch.xpu, ...
    is_available = getattr(backend, "is_available", None)
    if not (callable(is_available) and is_available()):
        raise ValueError(
            f"device={device!r}: this machine has no {dev.type} device; available: {', '.join(available_devices())}"
        )
    count = getattr(backend, "device_count", None)
    if dev.index is not None and callable(count) and dev.index >= count():
        raise ValueError(
            f"device={device!r}: this machine has {count()} {dev.type} device(s), numbered from 0; "
            f"available: {', '.join(available_devices())}"
        )
    return dev


# ---------------------------------------------------------------------------------------------
def cuda_plan(device: torch.device) -> bool:
    """Whether work on ``device`` is planned as on a CUDA device: batches cut by padded tokens to a
    few widths, padding gathered without data-dependent shapes, lazy_emd's convergence read every
    few checks. True on a CUDA device, and on the CPU when the environment variable
    :data:`~moverkit._core.base.environment.PLAN_VARIABLE` is ``cuda`` (read when the call opened,
    :func:`~moverkit._core.base.environment.read_environment`): a
    CUDA call differs from a CPU call only by these parameters, so a CPU run under the CUDA plan dispatches the ops a GPU will launch and its host
    reads can be counted there (``moverkit bench host``). Under the CUDA plan a CPU's float32 scores
    move in the last bits (other batch shapes), as a GPU's do."""
    if device.type == "cuda":
        return True
    return device.type == "cpu" and current_environment().cuda_plan


def tokenizes_ahead(device: torch.device) -> bool:
    """Whether a call cut into parts tokenizes the next part in a thread while this one encodes
    (:mod:`~moverkit._core.call.streaming`). By default, where the forward passes run on an
    accelerator, whose host only launches kernels meanwhile; not on a CPU, whose cores run the
    forward, where the Rust tokenizer's pool (a thread per logical CPU) competes with it. Measured
    on 2 cores (docs/speed.md), a chunked call with a tiny model took 1.12x its time with 2 torch
    threads and 0.77x with one; with the embedded model, 0.98x (its forward dwarfs tokenizing).
    Hyperthreads, CPU quotas and other processes make a free core unknowable from inside.
    :data:`~moverkit._core.base.environment.TOKENIZE_AHEAD_VARIABLE` set to ``1`` or ``0`` decides
    instead."""
    ahead = current_environment().tokenize_ahead
    return device.type != "cpu" if ahead is None else ahead


def available_devices() -> list[str]:
    """The devices ``device=`` accepts on this machine: ``cpu``, each CUDA GPU, ``mps``."""
    devices = ["cpu"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    return devices + (["mps"] if torch.backends.mps.is_available() else [])


@functools.cache
def cpuinfo_field(name: str) -> str:
    """The first ``name`` field of ``/proc/cpuinfo`` (Linux: ``flags``, ``vendor_id``,
    ``model name``); empty where it cannot be read."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.partition(":")[0].strip() == name:
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return ""


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags from ``/proc/cpuinfo`` (Linux); empty elsewhere, which counts as
    "no bfloat16 units" (the safe side: :func:`auto_dtype` then keeps ``float32``)."""
    return frozenset(cpuinfo_field("flags").split())


def cpu_vendor() -> str:
    """The CPU's ``vendor_id`` (``GenuineIntel``, ``AuthenticAMD``); empty where it cannot be read."""
    return cpuinfo_field("vendor_id")


def native_bfloat16_cpu() -> bool:
    """Whether bfloat16 matrix products run faster than float32 on this CPU: AMX
    (``amx_bf16``), or AVX512-BF16 on an AMD CPU (on an Intel CPU without AMX it measured 0.64-0.69x
    of float32), and neither ``ONEDNN_MAX_CPU_ISA`` (below :data:`ONEDNN_BFLOAT16_ISAS`; below
    :data:`ONEDNN_AMX_ISAS` it leaves an Intel CPU AVX512-BF16 alone) nor ``ATEN_CPU_CAPABILITY``
    (``default``, ``avx2``) caps the kernels below them."""
    isa = os.environ.get("ONEDNN_MAX_CPU_ISA", "").strip().upper()
    uncapped = isa in ("", "ALL", "DEFAULT")
    if not uncapped and isa not in ONEDNN_BFLOAT16_ISAS:
        return False
    if os.environ.get("ATEN_CPU_CAPABILITY", "").strip().lower() in ("default", "avx2", "avx", "sse"):
        return False
    flags = cpu_flags()
    amx = "amx_bf16" in flags and (uncapped or isa in ONEDNN_AMX_ISAS)
    return amx or ("avx512_bf16" in flags and cpu_vendor() == "AuthenticAMD")


def auto_dtype(device: torch.device) -> str:
    """The fastest precision that keeps scores for ``device`` (``dtype="auto"``): ``bfloat16`` on
    a CPU with bfloat16 units (measured on the 2,800 WMT17 pairs: mean |delta| 8e-5 to 4e-4 and
    average Pearson within 0.01 of float32 for all five metrics, 1.9-2.8x faster on an AMX CPU),
    ``float32`` on any other CPU (where bfloat16 is four times slower, and dynamic int8 moved
    centered_bertscore's F1 by 0.048 on average); on a CUDA GPU ``bfloat16`` where supported, else
    ``float16`` (not measured here: no GPU at hand); ``float32`` on other devices."""
    if device.type == "cpu":
        return "bfloat16" if native_bfloat16_cpu() else "float32"
    if device.type == "cuda":
        return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
    return "float32"


def check_dtype(dtype: str, device: torch.device) -> str:
    """``dtype`` (concrete) if it runs on ``device``. ``float16`` on a CPU is refused: measured
    (Xeon with AVX512-FP16/AMX, torch 2.13) it was no faster than float32 (autocast) or slower than
    ``bfloat16``, and on CPUs without half-precision units it is far slower. ``bfloat16`` on a CPU
    without bfloat16 units warns in every call that asks for it (:class:`SlowPrecisionWarning`,
    through :func:`~moverkit._core.base.user_warnings.warn_user`: Python's default filter shows it
    once per line of the caller's, and each ``collected_warnings`` block gathers its own)."""
    if dtype == "float16" and device.type == "cpu":
        raise ValueError(
            "dtype='float16' is not offered on the CPU (it is no faster than float32 there); "
            "use dtype='bfloat16' on a CPU with bfloat16 units, dtype='auto', or float16 on a GPU"
        )
    if dtype == "bfloat16" and device.type == "cpu" and not native_bfloat16_cpu():
        warn_user(
            f"dtype='bfloat16' on a CPU without fast bfloat16 units (no AMX, nor AVX512-BF16 on an AMD CPU, or "
            f"capped by ONEDNN_MAX_CPU_ISA / ATEN_CPU_CAPABILITY): measured {SLOW_BFLOAT16_RATIO} the speed of "
            "float32 (0.64-0.69x on an Intel CPU with AVX512-BF16 but no AMX); "
            "pass dtype='float32' (or dtype='auto', which picks the fastest precision for the device)",
            SlowPrecisionWarning,
        )
    return dtype


def precision(dtype: str, device: torch.device) -> contextlib.AbstractContextManager:
    """The context of a forward pass in ``dtype``: nothing for ``float32``; otherwise
    ``torch.autocast``, which runs the matrix products in ``dtype`` and keeps layer norms, softmax
    and the weights themselves in float32. Chosen by measurement over casting the weights: on 700
    WMT17 texts (2-core CPU under load) a first round gave float32 28.3 s, autocast 14.7 s, cast
    weights 10.8 s, a second round 17.0 / 19.5 / 23.5 s: neither consistently faster, while
    autocast's vectors were 3x closer to float32's (max |delta| 0.025 against 0.075) and one
    float32 model serves every dtype."""
    if dtype == "float32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=getattr(torch, dtype))
