"""dtype: the encoder's forward pass in reduced precision (torch.autocast), everything after it in float32."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from moverkit import functional
from moverkit._core import embedded_model_path, encode_texts, get_encoder
from moverkit._core.base.hardware import check_dtype
from moverkit._core.encoding.request import EncoderRequest

TEXTS = ["The cat sat on the mat.", "Stocks fell sharply on Monday after the report."]


def test_bfloat16_is_the_model_run_under_autocast():
    encoder = get_encoder()
    clouds = encode_texts(encoder, TEXTS[:1], EncoderRequest(dtype="bfloat16"))
    path = embedded_model_path()
    model = AutoModel.from_pretrained(path).eval()
    inputs = AutoTokenizer.from_pretrained(path)(TEXTS[0], return_tensors="pt")
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        expected = model(**inputs).last_hidden_state[0].float()
    with torch.no_grad():
        exact = model(**inputs).last_hidden_state[0]
    assert clouds.vectors.dtype == torch.float32
    torch.testing.assert_close(clouds.vectors, expected, atol=1e-5, rtol=1e-5)
    assert not torch.equal(clouds.vectors, exact)  # it really ran in bfloat16
    cos = torch.nn.functional.cosine_similarity(clouds.vectors, exact)
    assert cos.min() > 0.99


def test_float32_default_is_unchanged():
    encoder = get_encoder()
    torch.testing.assert_close(
        encode_texts(encoder, TEXTS, EncoderRequest()).vectors,
        encode_texts(encoder, TEXTS, EncoderRequest(dtype="float32")).vectors,
    )


@pytest.mark.parametrize("name", ["centered_bertscore", "twmd", "moverscore", "lazy_emd", "sbertscore"])
def test_bfloat16_scores_close_to_float32_and_hashed(name):
    function = getattr(functional, name)
    predictions, references = TEXTS, ["A cat was sitting on the mat.", "Shares dropped on Monday."]
    exact = function(predictions, references, centering="none")
    fast = function(predictions, references, centering="none", dtype="bfloat16")
    key = next(k for k, v in exact.items() if isinstance(v, list))
    assert fast[key] == pytest.approx(exact[key], abs=2e-2)
    assert "dtype=bfloat16" in fast["hashcode"] and "dtype=float32" in exact["hashcode"]


def test_float16_is_refused_on_the_cpu():
    with pytest.raises(ValueError, match="dtype='float16'.*CPU"):
        check_dtype("float16", torch.device("cpu"))
    with pytest.raises(ValueError, match="dtype"):
        functional.centered_bertscore(["a b"], ["a b"], dtype="float16", device="cpu")
    with pytest.raises(ValueError, match="dtype"):
        functional.sbertscore(["a b."], ["a b."], dtype="float16", device="cpu")


@pytest.mark.parametrize("bad", ["half", "fp32", 16])
def test_unknown_dtype_names_the_argument(bad):
    with pytest.raises((TypeError, ValueError), match="dtype"):
        functional.twmd(["a b"], ["a b"], dtype=bad)


def _weight_casts(encoder, texts, batch_size, dtype="bfloat16"):
    """Casts of the model's own weights (``_to_copy``, or ``to`` under inference mode, of a
    parameter's storage) during one encode."""
    from torch.utils._python_dispatch import TorchDispatchMode

    weights = {p.data_ptr() for p in encoder.model.parameters()}
    casts = []

    class Casts(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            cast = func.overloadpacket in (torch.ops.aten._to_copy, torch.ops.aten.to)
            if cast and isinstance(args[0], torch.Tensor) and args[0].data_ptr() in weights:
                casts.append(args[0].data_ptr())
            return func(*args, **(kwargs or {}))

    with Casts():
        encode_texts(encoder, texts, EncoderRequest(dtype=dtype, batch_size=batch_size))
    return casts


def test_each_weight_is_cast_once_per_call_not_once_per_batch(tiny_model_path):
    """Issue 45: one autocast region under no_grad around all of a call's forward passes, so a
    half-precision call casts each weight once, however many batches (inference_mode, or a region
    per batch, cast every weight again in each batch)."""
    encoder = get_encoder(tiny_model_path)
    texts = [f"text number {i} " + "word " * (i % 7) for i in range(40)]
    one_batch = _weight_casts(encoder, texts, batch_size=64)
    ten_batches = _weight_casts(encoder, texts, batch_size=4)
    assert one_batch, "the forward pass ran in bfloat16"
    assert len(ten_batches) == len(one_batch) == len(set(one_batch))
