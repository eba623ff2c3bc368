"""The ground layer of the core: what every other layer uses and nothing of moverkit's own below it.

Argument checks (``checks``, a namespace: ``checks.positive_int(...)``), moverkit's warnings, the
environment a call reads, the hardware (devices, dtypes, CPU flags), the random generators a model
load leaves as it found them, a lock per key, sizes and the heap, the padding and bucketing of token
clouds, the inputs of a call (texts, references, groups) and long-text windows.
The metric maths the metrics share (cosines, greedy matching) is the ``maths`` layer's.
"""

from moverkit._core.base import checks
from moverkit._core.base.batching import offsets_from, pad, pair_buckets
from moverkit._core.base.environment import PLAN_VARIABLE
from moverkit._core.base.hardware import (
    BFLOAT16_CPU_FLAGS,
    SlowPrecisionWarning,
    cpu_flags,
    cpuinfo_field,
    cuda_plan,
    native_bfloat16_cpu,
    resolve_device,
)
from moverkit._core.base.inputs import (
    CallTexts,
    best_per_group,
    call_texts,
    check_inputs,
    check_text,
    check_texts,
    flatten_pairs,
    from_numpy,
    is_missing,
    reference_index,
)
from moverkit._core.base.random_state import kept_random_state
from moverkit._core.base.sizes import parse_size
from moverkit._core.base.user_warnings import ConvergenceWarning, MoverkitWarning, collected_warnings, warn_user

__all__ = [
    "BFLOAT16_CPU_FLAGS",
    "CallTexts",
    "ConvergenceWarning",
    "MoverkitWarning",
    "PLAN_VARIABLE",
    "SlowPrecisionWarning",
    "best_per_group",
    "call_texts",
    "check_inputs",
    "check_text",
    "check_texts",
    "checks",
    "collected_warnings",
    "cpu_flags",
    "cpuinfo_field",
    "cuda_plan",
    "flatten_pairs",
    "from_numpy",
    "is_missing",
    "kept_random_state",
    "native_bfloat16_cpu",
    "offsets_from",
    "pad",
    "pair_buckets",
    "parse_size",
    "reference_index",
    "resolve_device",
    "warn_user",
]
