"""The type stub of ``moverkit.functional`` (``metrics/functional/__init__.pyi``), written from the
metric functions' own signatures (issue 41).

Each metric function is declared with its own arguments only; :func:`moverkit.functional.signature.
metric_function` adds the shared ones at run time, so ``inspect.signature`` and ``help()`` see the
whole signature while a static type checker sees the wrapper's ``**kwargs``. The stub gives type
checkers and IDEs the whole signature, from that one declaration: this script writes it, and
tests/test_public_api.py fails when it is out of date. Run it after changing a metric's arguments::

    python tests/functional_stubs.py
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

STUB = Path(__file__).resolve().parents[1] / "metrics" / "functional" / "__init__.pyi"

HEADER = '''"""Type stub of moverkit.functional: the metric functions' whole signatures, for type checkers and
IDEs. Written by tests/functional_stubs.py from the functions themselves; do not edit."""

import os
from collections.abc import Mapping
from typing import TypedDict

import torch
from typing_extensions import Unpack

'''


def _parameter(p: inspect.Parameter) -> str:
    text = p.name if p.annotation is inspect.Parameter.empty else f"{p.name}: {p.annotation}"
    if p.default is inspect.Parameter.empty:
        return text
    default = json.dumps(p.default) if isinstance(p.default, str) else repr(p.default)  # as ruff formats it
    return f"{text} = {default}" if p.annotation is not inspect.Parameter.empty else f"{text}={default}"


def _typed_dict(name: str, base: str, params, doc: str) -> str:
    fields = [f"    {p.name}: {'object' if p.annotation is inspect.Parameter.empty else p.annotation}" for p in params]
    return "\n".join([f"class {name}({base}, total=False):", f'    """{doc}"""', "", *fields]) + "\n\n"


def stub_text() -> str:
    """The stub, from the signatures of the functions ``moverkit.functional.__all__`` names: each
    function's own arguments, then the shared ones once, as typed keyword arguments
    (``**shared: Unpack[...]``, PEP 692; their defaults are ``open_call``'s)."""
    from moverkit import functional
    from moverkit.functional.signature import SHARED, TOKEN_ONLY

    parts = [HEADER]
    parts.append(
        _typed_dict(
            "SharedArguments",
            "TypedDict",
            [p for p in SHARED if p.name not in TOKEN_ONLY],
            "The arguments every metric takes (defaults: moverkit._core.call.opening.open_call's).",
        )
    )
    parts.append(
        _typed_dict(
            "TokenArguments",
            "SharedArguments",
            [p for p in SHARED if p.name in TOKEN_ONLY],
            "The shared arguments of the token-level metrics (all but sbertscore).",
        )
    )
    shared_names = {p.name for p in SHARED}
    for name in functional.__all__:
        signature = inspect.signature(getattr(functional, name))
        params, star, token = [], False, False
        for p in signature.parameters.values():
            if p.name in shared_names:
                token = token or p.name in TOKEN_ONLY
                continue
            if p.kind is inspect.Parameter.KEYWORD_ONLY and not star:
                params.append("*")
                star = True
            params.append(_parameter(p))
        params.append(f"**shared: Unpack[{'TokenArguments' if token else 'SharedArguments'}]")
        returns = "" if signature.return_annotation is inspect.Signature.empty else f" -> {signature.return_annotation}"
        lines = [f"def {name}(", *(f"    {p}," for p in params), f"){returns}: ..."]
        parts.append("\n".join(lines) + "\n")
    parts.append(f"\n__all__ = {json.dumps(list(functional.__all__))}\n")
    return "".join(parts)


if __name__ == "__main__":
    STUB.write_text(stub_text(), encoding="utf-8")
    print(f"wrote {STUB}")
