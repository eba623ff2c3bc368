"""Fine-tuning (moverkit.finetune): gradients through the batched Sinkhorn step and Eq. (1) against
finite differences, the ``moverkit finetune`` command on a tiny random model, and the folder it
writes loading in every metric under its own hashcode."""

from __future__ import annotations

import importlib
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from moverkit.functional.twmd import family_value, normalized, resolve_params, similarity

SAMPLE = Path(__file__).resolve().parent / "data" / "wmt17_sample.tsv"
METRICS = ("centered_bertscore", "twmd", "moverscore", "lazy_emd", "sbertscore")


def padded_sim(x1, x2, rows, cols, params):
    """Eq. (1) Sim of padded clouds by the inference path's functions (``similarity``,
    ``family_value``, ``normalized``), the self-similarities computed as pairs of a text with itself."""
    n = len(x1)

    class Side:
        def __init__(self, vectors):
            self.vectors = vectors

    unit1 = torch.nn.functional.normalize(x1, dim=-1) * rows[..., None]
    unit2 = torch.nn.functional.normalize(x2, dim=-1) * cols[..., None]
    cross = family_value(similarity(Side(unit1), Side(unit2)), rows, cols, params)
    own = torch.cat(
        [
            family_value(similarity(Side(unit1), Side(unit1)), rows, rows, params),
            family_value(similarity(Side(unit2), Side(unit2)), cols, cols, params),
        ]
    )
    return normalized(cross, own, torch.arange(n), torch.arange(n, 2 * n))


@pytest.mark.parametrize(("variant", "iterations"), [("twmd", 1), ("twmd", 3), ("trwmd", 1)])
def test_sinkhorn_gradients_match_finite_differences(variant, iterations):
    """Autograd through the batched log-domain Sinkhorn steps and Eq. (1), at T = 0.02, equals
    central finite differences (float64, torch.autograd.gradcheck), padding included and an empty
    prediction among the pairs; in float32 the gradients are finite and agree with float64."""
    params = resolve_params(variant, 0.02, iterations, True, "batch")
    gen = torch.Generator().manual_seed(0)
    rows = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    cols = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1], [0, 0, 0, 0]], dtype=torch.bool)  # pair 2: empty prediction
    x1 = torch.randn(3, 5, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    x2 = torch.randn(3, 4, 4, generator=gen, dtype=torch.float64, requires_grad=True)

    assert torch.autograd.gradcheck(lambda a, b: padded_sim(a, b, rows, cols, params), (x1, x2))

    weights = torch.randn(3, generator=gen, dtype=torch.float64)
    grads = {}
    for dtype in (torch.float64, torch.float32):
        a, b = (x.detach().to(dtype).requires_grad_() for x in (x1, x2))
        (padded_sim(a, b, rows, cols, params) * weights.to(dtype)).sum().backward()
        grads[dtype] = (a.grad, b.grad)
    for g32, g64 in zip(grads[torch.float32], grads[torch.float64]):
        assert torch.isfinite(g32).all()
        torch.testing.assert_close(g32.double(), g64, rtol=1e-3, atol=1e-4)
    assert grads[torch.float64][1][2].abs().max() == 0  # nothing flows from the empty side


def test_encoder_gradients_match_finite_differences(tiny_model_path):
    """Through the whole training path on a tiny random model (trainable encoder, batch centering
    over the mini-batch, one Sinkhorn step at T = 0.02, Eq. (1)), in float32: the directional
    derivative of a weighted sum of Sims along a random direction of three weight matrices equals
    central finite differences, and no gradient is NaN."""
    from moverkit.finetune import Scorer, trainable_encoder

    encoder = trainable_encoder(tiny_model_path, device="cpu")
    encoder.model.eval()  # no dropout: the function must be deterministic for finite differences
    scorer = Scorer(encoder, resolve_params("twmd", 0.02, 1, True, "batch"), "batch", None)
    # 11 distinct texts (one repeated), so that batch centering has enough texts to mean over.
    predictions = [
        "the cat sat on the mat .",
        "a quick brown fox jumps",
        "hello",
        "the cat sat on the mat .",
        "there is a house on the hill",
        "we went home early",
    ]
    references = [
        "a cat was sitting on the mat",
        "the fast brown fox jumped over the dog",
        "hello there my friend",
        "cats",
        "a house stands on top of the hill",
        "they went home late",
    ]
    weights = torch.tensor([0.3, -0.7, 0.5, 0.9, -0.4, 0.6], dtype=torch.float64)

    (scorer(predictions, references) * weights).sum().backward()
    parameters = dict(encoder.model.named_parameters())
    assert all(torch.isfinite(p.grad).all() for p in parameters.values() if p.grad is not None)

    names = [
        "encoder.layer.0.attention.self.query.weight",
        "encoder.layer.2.output.dense.weight",
        "embeddings.LayerNorm.weight",
    ]
    gen = torch.Generator().manual_seed(1)
    direction = {n: torch.randn(parameters[n].shape, generator=gen) for n in names}
    analytic = sum(float((parameters[n].grad * direction[n]).sum()) for n in names)
    start = {n: parameters[n].detach().clone() for n in names}

    def shifted(step):
        with torch.no_grad():
            for n in names:
                parameters[n].copy_(start[n] + step * direction[n])
            value = float((scorer(predictions, references) * weights).sum())
            for n in names:
                parameters[n].copy_(start[n])
        return value

    eps = 3e-3
    numeric = (shifted(eps) - shifted(-eps)) / (2 * eps)
    assert abs(analytic) > 1e-3
    assert numeric == pytest.approx(analytic, rel=1e-2)


def test_standardized_and_split():
    from moverkit.finetune import split_rows, standardized

    scores = [1.0, 2.0, 3.0, 10.0, 30.0, 5.0, 5.0]
    groups = ["a", "a", "a", "b", "b", "c", "c"]
    z = standardized(scores, groups, "group")
    for g in "ab":
        members = np.array(groups) == g
        assert z[members].mean() == pytest.approx(0, abs=1e-12)
        assert z[members].std() == pytest.approx(1)
    assert (z[5:] == 0).all()  # a constant group
    g = standardized(scores, groups, "global")
    assert g.mean() == pytest.approx(0, abs=1e-12) and g.std() == pytest.approx(1)
    assert (standardized(scores, groups, "none") == np.array(scores)).all()

    train, valid = split_rows(100, 0.1, seed=3)
    assert len(valid) == 10 and sorted(train + valid) == list(range(100))
    assert split_rows(100, 0.1, seed=3) == (train, valid)
    assert split_rows(100, 0.1, seed=4) != (train, valid)


def test_bad_arguments(tiny_model_path, tmp_path):
    from moverkit.finetune import finetune

    with pytest.raises(ValueError, match="centering"):
        finetune(SAMPLE, tmp_path, model_type=tiny_model_path, centering="corpus")
    with pytest.raises(ValueError, match="validation_split"):
        finetune(SAMPLE, tmp_path, model_type=tiny_model_path, validation_split=1.0)
    with pytest.raises(ValueError, match="variant"):
        finetune(SAMPLE, tmp_path, model_type=tiny_model_path, variant="wmd")
    with pytest.raises(ValueError, match="lacks the column"):
        finetune(SAMPLE, tmp_path, model_type=tiny_model_path, score_column="z")


def test_dataset_input_is_seeded_and_trains(tiny_model_path, tmp_path):
    """A datasets.Dataset without a group column, no validation split: the same seed gives the
    same weights, and they differ from the base model's (training happened)."""
    import datasets
    from safetensors.torch import load_file

    from moverkit.bench._data import read_judgments
    from moverkit.finetune import finetune

    rows = read_judgments(SAMPLE, limit=32)
    table = datasets.Dataset.from_dict({"pred": rows.predictions, "ref": rows.references, "score": rows.human})
    kwargs = dict(
        model_type=tiny_model_path,
        epochs=1,
        validation_split=0.0,
        prediction_column="pred",
        reference_column="ref",
        score_column="score",
        group_column=None,
        verbose=False,
        learning_rate=1e-3,
    )
    first = finetune(table, tmp_path / "a", **kwargs)
    finetune(table, tmp_path / "b", **kwargs)
    assert first.validation_before is None and first.n_train == 32
    a, b = (load_file(tmp_path / name / "model.safetensors") for name in "ab")
    base = load_file(Path(tiny_model_path) / "model.safetensors")
    key = "encoder.layer.0.attention.self.query.weight"
    torch.testing.assert_close(a[key], b[key], rtol=0, atol=0)
    assert not torch.equal(a[key], base[key])


@pytest.fixture(scope="module")
def finetuned(tiny_model_path, tmp_path_factory):
    """``moverkit finetune`` on the 200-pair WMT17 sample, one epoch, tiny random model."""
    from moverkit.cli import main

    out = tmp_path_factory.mktemp("ft") / "tiny-twmd"
    args = [
        "finetune",
        "--data",
        str(SAMPLE),
        "--out",
        str(out),
        "--model",
        tiny_model_path,
        "--epochs",
        "1",
        "--quiet",
    ]
    assert main(args) == 0
    return out


def test_cli_writes_a_model_folder_with_a_card(finetuned):
    files = {p.name for p in finetuned.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "README.md"} <= files
    assert "checkpoints" not in files
    card = (finetuned / "README.md").read_text()
    for fact in (
        "MSE(Sim(X1, X2), y)",
        "T = 0.1",
        "`batch` centering",
        "up to 1 epoch",
        "180 training pairs",
        "20 validation pairs",
        "before fine-tuning: Pearson r",
        "at the user's risk",
    ):
        assert fact in card
    import json

    assert json.loads((finetuned / "config.json").read_text())["num_hidden_layers"] == 3


@pytest.mark.parametrize("name", METRICS)
def test_finetuned_folder_loads_in_every_metric(finetuned, tiny_model_path, wmt_pairs, name):
    metric = getattr(importlib.import_module(f"moverkit.functional.{name}"), name)
    predictions, references = wmt_pairs[0][:8], wmt_pairs[1][:8]
    tuned = metric(predictions, references, model_type=str(finetuned))
    base = metric(predictions, references, model_type=tiny_model_path)
    values = [v for k, v in tuned.items() if isinstance(v, list)]
    assert values and all(len(v) == 8 and all(math.isfinite(x) for x in v) for v in values)
    assert f"{finetuned.name}@" in tuned["hashcode"]
    assert tuned["hashcode"].partition("@")[2].split("_")[0] != base["hashcode"].partition("@")[2].split("_")[0]
