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


@pytest.mark.slow
def test_dataset_input_is_seeded_and_trains(tiny_model_path, tmp_path):
    """A datasets.Dataset without a group column, no validation split: the same seed gives the
    same weights, and they differ from the base model's (training happened)."""
    import datasets
    from safetensors.torch import load_file

    from moverkit.finetune import finetune
    from moverkit.judgments import read_judgments

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


@pytest.mark.slow
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
    # A corpus statistic ships for the embedded model only: the default (corpus) of centered_bertscore
    # and twmd needs one for another model, so they center with the call's 16 texts.
    kwargs = {"centering": "batch"} if name in ("centered_bertscore", "twmd") else {}
    tuned = metric(predictions, references, model_type=str(finetuned), **kwargs)
    base = metric(predictions, references, model_type=tiny_model_path, **kwargs)
    values = [v for k, v in tuned.items() if isinstance(v, list)]
    assert values and all(len(v) == 8 and all(math.isfinite(x) for x in v) for v in values)
    assert "local@" in tuned["hashcode"] and finetuned.name not in tuned["hashcode"]  # named by what it holds
    assert tuned["hashcode"].partition("@")[2].split("_")[0] != base["hashcode"].partition("@")[2].split("_")[0]


# ---- Reliability: the output folder, degenerate scores, errors that name the row ----


def _tsv(path: Path, rows: int | None = None, *, edit=None) -> Path:
    """The first ``rows`` data rows of the WMT17 sample (all of them by default) written to
    ``path``; ``edit(line, fields)`` may change each row's fields (a list) in place, ``line``
    being the row's line number in the file (the header is line 1)."""
    lines = SAMPLE.read_text(encoding="utf-8").splitlines()
    header, body = lines[0], lines[1 : None if rows is None else rows + 1]
    out = [header]
    for number, line in enumerate(body, start=2):
        fields = line.split("\t")
        if edit is not None:
            edit(number, fields)
        out.append("\t".join(fields))
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def no_loading(monkeypatch):
    """Fail the test if finetune gets as far as loading a model: refusals must come before."""
    import moverkit.finetune

    def refuse(*args, **kwargs):
        raise AssertionError("finetune loaded a model before refusing")

    monkeypatch.setattr(moverkit.finetune, "trainable_encoder", refuse)


def _cli(args, capsys):
    from moverkit.cli import main

    code = main([str(a) for a in args])
    return code, capsys.readouterr().err


def test_a_foreign_folder_is_refused_before_loading(tmp_path, no_loading, capsys):
    """A non-empty --out that no earlier run wrote (no marker) is refused, exit 2, before any
    model is loaded, and nothing in it is touched; --resume needs a run of ours."""
    from moverkit.finetune import finetune

    out = tmp_path / "model"
    (out / "checkpoints").mkdir(parents=True)
    (out / "checkpoints" / "notes.txt").write_text("my notes")
    (out / "README.md").write_text("my readme")
    data = _tsv(tmp_path / "data.tsv", 40)

    code, err = _cli(["finetune", "--data", data, "--out", out, "--model", "x", "--quiet"], capsys)
    assert code == 2 and err.startswith("moverkit: error: ") and "--overwrite" in err and str(out) in err
    with pytest.raises(ValueError, match="overwrite=True"):
        finetune(data, out, model_type="x")
    code, err = _cli(["finetune", "--data", data, "--out", out, "--model", "x", "--resume"], capsys)
    assert code == 2 and "resume" in err
    assert (out / "checkpoints" / "notes.txt").read_text() == "my notes"
    assert (out / "README.md").read_text() == "my readme"
    assert sorted(p.name for p in out.rglob("*")) == ["README.md", "checkpoints", "notes.txt"]

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="resume"):
        finetune(data, empty, model_type="x", resume=True)
    with pytest.raises(ValueError, match="not a folder"):
        finetune(data, data, model_type="x")
    # A folder marked as ours, but with a file of the model folder's that the run did not write.
    (empty / ".moverkit-finetune.json").write_text('{"written_by": "moverkit finetune", "files": []}')
    (empty / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="config.json"):
        finetune(data, empty, model_type="x")
    assert (empty / "config.json").read_text() == "{}"


@pytest.mark.slow
def test_overwrite_keeps_what_the_run_did_not_write(tiny_model_path, tmp_path, capsys):
    """--overwrite writes the model's files over a foreign folder but deletes nothing else: the
    user's files in it and in checkpoints/ stay, only the Trainer's checkpoint-N folders go. The
    marker lists what was written; a second run into the folder needs no --overwrite; a foreign
    checkpoint-N folder is refused even with --overwrite (the Trainer would rotate it away)."""
    import json

    out = tmp_path / "model"
    (out / "checkpoints").mkdir(parents=True)
    (out / "checkpoints" / "notes.txt").write_text("my notes")
    (out / "README.md").write_text("my readme")
    (out / "mine.txt").write_text("mine")
    data = _tsv(tmp_path / "data.tsv", 80)
    args = ["finetune", "--data", data, "--out", out, "--model", tiny_model_path, "--epochs", "1", "--quiet"]

    code, err = _cli([*args, "--overwrite"], capsys)
    assert code == 0, err
    assert (out / "checkpoints" / "notes.txt").read_text() == "my notes"
    assert [p.name for p in (out / "checkpoints").iterdir()] == ["notes.txt"]
    assert (out / "mine.txt").read_text() == "mine"
    assert "moverkit" in (out / "README.md").read_text()
    marker = json.loads((out / ".moverkit-finetune.json").read_text())
    assert {"README.md", "config.json", "model.safetensors"} <= set(marker["files"])
    assert "mine.txt" not in marker["files"] and marker["checkpoints"] == []
    assert marker["moverkit_version"]

    code, err = _cli(args, capsys)  # ours now: no --overwrite needed
    assert code == 0, err
    assert (out / "mine.txt").read_text() == "mine"
    assert (out / "checkpoints" / "notes.txt").read_text() == "my notes"

    (out / "checkpoints" / "checkpoint-7").mkdir()
    code, err = _cli([*args, "--overwrite"], capsys)
    assert code == 2 and "checkpoint-7" in err
    assert (out / "checkpoints" / "checkpoint-7").is_dir()

    fresh = tmp_path / "fresh"  # a run into a new folder leaves no checkpoints/ behind
    code, err = _cli(["finetune", "--data", data, "--out", fresh, *args[5:]], capsys)
    assert code == 0, err
    assert not (fresh / "checkpoints").exists() and (fresh / ".moverkit-finetune.json").is_file()


@pytest.mark.slow
def test_resume_continues_our_run_and_the_card_counts_epochs_trained(tiny_model_path, tmp_path):
    """--resume continues from the last checkpoint of a run of ours; the card and the marker
    report the epochs trained (from the Trainer's state), not the resumed run's --epochs."""
    import json

    from moverkit.finetune import finetune

    data = _tsv(tmp_path / "data.tsv", 80)
    out = tmp_path / "model"
    kwargs = dict(model_type=tiny_model_path, verbose=False, validation_split=0.0)
    finetune(data, out, epochs=1, keep_checkpoints=True, **kwargs)
    marker = json.loads((out / ".moverkit-finetune.json").read_text())
    assert marker["epochs_trained"] == 1 and len(marker["checkpoints"]) == 1
    assert (out / "checkpoints" / marker["checkpoints"][0]).is_dir()

    finetune(data, out, epochs=2, resume=True, keep_checkpoints=True, **kwargs)
    assert "2 epoch(s) trained" in (out / "README.md").read_text()
    finetune(data, out, epochs=1, resume=True, **kwargs)  # nothing left to train: still 2
    card = (out / "README.md").read_text()
    assert "2 epoch(s) trained" in card and "resumed" in card
    assert json.loads((out / ".moverkit-finetune.json").read_text())["epochs_trained"] == 2
    assert not (out / "checkpoints").exists()  # only ours were there: removed, then the empty folder
    with pytest.raises(ValueError, match="resume"):
        finetune(data, out, epochs=1, resume=True, **kwargs)  # no checkpoint of ours left


def test_constant_human_scores_are_refused(tmp_path, no_loading):
    """Human scores without spread would train to NaN validation figures: refused before loading."""
    from moverkit.finetune import finetune

    def constant(line, fields):
        fields[5] = "50"

    same = _tsv(tmp_path / "same.tsv", 80, edit=constant)
    for standardize in ("group", "global", "none"):
        with pytest.raises(ValueError, match="no spread"):
            finetune(same, tmp_path / "out", model_type="x", standardize=standardize)

    def per_group(line, fields):  # constant within each group, different between groups
        fields[5] = str(len(fields[0]) + ord(fields[0][0]))

    grouped = _tsv(tmp_path / "grouped.tsv", 80, edit=per_group)
    with pytest.raises(ValueError, match="no group"):
        finetune(grouped, tmp_path / "out", model_type="x", standardize="group")
    with pytest.raises(ValueError, match="validation"):  # global targets vary, but not within a group
        finetune(grouped, tmp_path / "out", model_type="x", standardize="global")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_constant_group_is_excluded(tiny_model_path, tmp_path):
    """With standardize="group", a group whose scores are all equal teaches nothing: it is left
    out (with a warning, and said in the card), the other groups train."""
    from moverkit.finetune import finetune

    def constant_cs(line, fields):
        if fields[0] == "cs-en":
            fields[5] = "0.5"

    data = _tsv(tmp_path / "data.tsv", 120, edit=constant_cs)
    with pytest.warns(UserWarning, match="cs-en"):
        result = finetune(data, tmp_path / "out", model_type=tiny_model_path, epochs=1, verbose=False)
    assert result.n_train + result.n_validation == 80
    card = (tmp_path / "out" / "README.md").read_text()
    assert "cs-en" in card and "excluded" in card
    assert math.isfinite(result.validation_after["pearson"])


def test_model_card_never_prints_nan():
    import re

    from moverkit.finetune import FinetuneResult, model_card

    nan = math.nan
    figures = {"pearson": nan, "kendall": nan, "mse": 0.01}
    result = FinetuneResult(
        path="/tmp/m",
        validation_before=figures,
        validation_after=figures,
        history=[{"epoch": 1, "train_loss": nan, "pearson": nan, "kendall": nan}],
        seconds_per_epoch=nan,
        cpu_seconds_per_epoch=nan,
        n_train=10,
        n_validation=5,
    )
    recipe = dict(
        base_model="b",
        layer=3,
        layers_in_folder=3,
        device="cpu",
        variant="twmd",
        temperature=0.1,
        sinkhorn_iterations=1,
        centering="batch",
        epochs=1,
        learning_rate=1e-5,
        batch_size=4,
        validation_split=0.1,
        standardize="group",
        target_mean=0.5,
        target_std=0.15,
        early_stopping_patience=1,
        seed=0,
        data="d.tsv",
        groups=["a"],
    )
    card = model_card(recipe, result)
    assert not re.search(r"\bnan\b", card, flags=re.IGNORECASE)
    assert "n/a" in card


def test_tsv_errors_name_the_file_line_and_column(tmp_path, no_loading, capsys):
    from moverkit.finetune import finetune
    from moverkit.judgments import read_judgments

    def bad_number(line, fields):
        if line == 7:
            fields[5] = "abc"

    data = _tsv(tmp_path / "data.tsv", 20, edit=bad_number)
    with pytest.raises(ValueError, match=r"data\.tsv line 7: column 'human' is not a number: 'abc'"):
        read_judgments(data)
    code, err = _cli(["finetune", "--data", data, "--out", tmp_path / "out", "--quiet"], capsys)
    assert code == 2 and "data.tsv line 7: column 'human' is not a number: 'abc'" in err

    lines = SAMPLE.read_text(encoding="utf-8").splitlines()[:12]
    lines[8] = "\t".join(lines[8].split("\t")[:3])
    short = tmp_path / "short.tsv"
    short.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"short\.tsv line 9: 3 fields, the header has 6"):
        finetune(short, tmp_path / "out")

    lines = SAMPLE.read_text(encoding="utf-8").splitlines()[:12]
    lines[5] = "\t".join(lines[5].split("\t")[:5] + ["nan"])
    nan_file = tmp_path / "nan.tsv"
    nan_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"nan\.tsv line 6: column 'human' is not a finite number: 'nan'"):
        finetune(nan_file, tmp_path / "out")

    with pytest.raises(ValueError, match=r"lacks the column\(s\) 'score'.*lp, system, sid, hypothesis"):
        finetune(data, tmp_path / "out", score_column="score")

    raw = bytearray(_tsv(tmp_path / "latin.tsv", 10).read_bytes())
    at = raw.index(b"\n", raw.index(b"\n", raw.index(b"\n") + 1) + 1) + 20  # inside line 4
    raw[at : at + 1] = b"\xe9"
    (tmp_path / "latin.tsv").write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=r"latin\.tsv line 4: .*UTF-8"):
        finetune(tmp_path / "latin.tsv", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_dataset_errors_name_the_row_and_column(no_loading, tmp_path):
    import datasets

    from moverkit.finetune import finetune

    base = {"pred": ["a b", "c d", "e f", "g h"], "ref": ["a", "c", "e", "g"], "score": ["1", "2", "abc", "3"]}
    kwargs = dict(prediction_column="pred", reference_column="ref", score_column="score", group_column=None)
    with pytest.raises(ValueError, match=r"row 2: column 'score' is not a number: 'abc'"):
        finetune(datasets.Dataset.from_dict(base), tmp_path / "out", **kwargs)
    with pytest.raises(ValueError, match=r"row 1: column 'pred' is not a text: None"):
        finetune(datasets.Dataset.from_dict({**base, "pred": ["a", None, "e", "g"]}), tmp_path / "out", **kwargs)
    with pytest.raises(ValueError, match=r"row 3: column 'score' is not a finite number"):
        finetune(datasets.Dataset.from_dict({**base, "score": [1.0, 2.0, 3.0, math.inf]}), tmp_path / "out", **kwargs)
    with pytest.raises(ValueError, match=r"lacks the column\(s\) 'scores'; it has pred, ref, score"):
        finetune(datasets.Dataset.from_dict(base), tmp_path / "out", **{**kwargs, "score_column": "scores"})


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"target_mean": math.nan}, r"target_mean must be a finite number in \[-1, 1\].*got nan"),
        ({"target_mean": math.inf}, r"target_mean must be a finite number in \[-1, 1\].*got inf"),
        ({"target_mean": -math.inf}, r"target_mean must be a finite number in \[-1, 1\].*got -inf"),
        ({"target_mean": 1e308}, r"target_mean must be a finite number in \[-1, 1\].*got 1e\+308"),
        ({"target_mean": 1.5}, r"target_mean must be a finite number in \[-1, 1\]"),
        ({"learning_rate": 1e308}, r"learning_rate must be a finite number > 0 and <= 1 .*got 1e\+308"),
        ({"learning_rate": 2.0}, r"learning_rate must be a finite number > 0 and <= 1"),
        ({"learning_rate": math.nan}, r"learning_rate must be a finite number > 0 and <= 1"),
        ({"learning_rate": math.inf}, r"learning_rate must be a finite number > 0 and <= 1"),
        ({"learning_rate": 0.0}, r"learning_rate must be a finite number > 0 and <= 1"),
        ({"epochs": 10**12}, r"epochs must be an int >= 1 and <= 1,000 .*got 1000000000000"),  # ran unbounded
    ],
)
def test_target_mean_and_learning_rate_are_bounded_before_loading(tmp_path, no_loading, kwargs, message):
    """A NaN or infinite target_mean, or a learning rate of 1e308, trained a model of NaN weights
    (and 1e308 was refused for the wrong reason, blaming validation_split): refused up front, the
    message naming the argument, and no folder made."""
    from moverkit.finetune import finetune

    data = _tsv(tmp_path / "data.tsv", 40)
    with pytest.raises(ValueError, match=message):
        finetune(data, tmp_path / "out", model_type="x", **kwargs)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--target-mean", "nan", "target_mean must be a finite number in [-1, 1]"),
        ("--target-mean", "-inf", "target_mean must be a finite number in [-1, 1]"),
        ("--target-mean", "1e308", "target_mean must be a finite number in [-1, 1]"),
        ("--learning-rate", "1e308", "learning_rate must be a finite number > 0 and <= 1"),
    ],
)
def test_cli_refuses_target_mean_and_learning_rate(tmp_path, no_loading, capsys, flag, value, message):
    data = _tsv(tmp_path / "data.tsv", 40)
    code, err = _cli(["finetune", "--data", data, "--out", tmp_path / "out", "--quiet", f"{flag}={value}"], capsys)
    assert code == 2 and err.startswith("moverkit: error: ") and message in err
    assert "validation_split" not in err and not (tmp_path / "out").exists()


@pytest.fixture
def nan_labels(monkeypatch):
    """Training targets of NaN, as a diverging run gets: the loss is NaN, the weights turn NaN."""
    import moverkit.finetune

    collate = moverkit.finetune.trainer._collate

    def with_nan(rows):
        batch = collate(rows)
        return {**batch, "labels": torch.full_like(batch["labels"], math.nan)}

    monkeypatch.setattr(moverkit.finetune.trainer, "_collate", with_nan)


@pytest.mark.slow
def test_a_diverged_run_writes_no_model_into_a_new_folder(tiny_model_path, tmp_path, nan_labels):
    """Training that turns the weights NaN is refused ("training diverged"): no model folder, no
    checkpoint, no marker, and a folder the run made is removed again."""
    from moverkit.finetune import finetune

    data = _tsv(tmp_path / "data.tsv", 40)
    out = tmp_path / "model"
    # One step and no validation: the NaN weights are found at the end; two steps, or a
    # validation: the encoder's outputs turn NaN during training.
    for split, batch_size, sign in ((0.0, 40, "weights are NaN"), (0.0, 16, "outputs"), (0.2, 32, "outputs")):
        with pytest.raises(ValueError, match=rf"training diverged: .*{sign}.*no model was written.*learning_rate"):
            finetune(
                data,
                out,
                model_type=tiny_model_path,
                epochs=1,
                batch_size=batch_size,
                validation_split=split,
                verbose=False,
            )
        assert not out.exists()


@pytest.mark.slow
def test_a_diverged_run_leaves_an_earlier_model_as_it_was(tiny_model_path, tmp_path, monkeypatch, capsys):
    """A run into the folder of an earlier run that diverges leaves that run's model, card and
    marker as they were, and removes its own checkpoints; the CLI says so with exit status 2."""
    import moverkit.finetune

    data = _tsv(tmp_path / "data.tsv", 40)
    out = tmp_path / "model"
    args = ["finetune", "--data", data, "--out", out, "--model", tiny_model_path, "--quiet"]
    code, err = _cli([*args, "--epochs", "1", "--validation-split", "0"], capsys)
    assert code == 0, err
    before = {p.relative_to(out): p.read_bytes() if p.is_file() else None for p in out.rglob("*")}

    collate = moverkit.finetune.trainer._collate
    monkeypatch.setattr(
        moverkit.finetune.trainer,
        "_collate",
        lambda rows: {**collate(rows), "labels": torch.full((len(rows),), math.nan, dtype=torch.float64)},
    )
    code, err = _cli([*args, "--epochs", "2", "--batch-size", "20", "--validation-split", "0"], capsys)
    error = err.strip().splitlines()[-1]  # after transformers' loading bar (the CLI's own process has none)
    assert code == 2 and error.startswith("moverkit: error: training diverged") and str(out) in error
    after = {p.relative_to(out): p.read_bytes() if p.is_file() else None for p in out.rglob("*")}
    assert after == before


def test_a_field_over_the_csv_limit_is_named(tmp_path, no_loading, capsys):
    """csv refuses a field over 131,072 characters: a ValueError naming the file and line, and
    ``moverkit finetune`` exits 2 with it (it was a traceback)."""
    from moverkit.judgments import read_judgments

    def huge(line, fields):
        if line == 7:
            fields[3] = "word " * 40_000

    data = _tsv(tmp_path / "big.tsv", 20, edit=huge)
    with pytest.raises(ValueError, match=r"big\.tsv line 7: .*field larger than field limit"):
        read_judgments(data)
    code, err = _cli(["finetune", "--data", data, "--out", tmp_path / "out", "--quiet"], capsys)
    assert code == 2 and "big.tsv line 7" in err and "Traceback" not in err


def test_a_header_only_tsv_is_named(tmp_path, no_loading, capsys):
    from moverkit.finetune import finetune

    header = tmp_path / "header.tsv"
    header.write_text(SAMPLE.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{header} has no row of data"):
        finetune(header, tmp_path / "out")
    code, err = _cli(["finetune", "--data", header, "--out", tmp_path / "out", "--quiet"], capsys)
    assert code == 2 and f"{header} has no row of data" in err


@pytest.mark.slow
def test_a_fine_tuned_folder_records_its_data_and_evaluating_it_there_warns(finetuned, tmp_path, capsys):
    """Issue 66: ``moverkit combine`` reported a leave-one-language-pair-out table of an encoder
    trained on all five pairs, with no word. The folder's marker now records what it was trained
    on, and ``tune`` and ``combine`` warn when they evaluate it on that data."""
    from moverkit.cli import main
    from moverkit.formats.training_record import read_record, trained_overlap
    from moverkit.judgments import read_judgments
    from moverkit.tuning import tune

    data = read_judgments(SAMPLE)
    record = read_record(finetuned)
    assert record["rows"] == len(data.human) and set(record["groups"]) == set(data.groups)
    segments, groups = trained_overlap(finetuned, data.predictions, data.references, data.groups)
    assert sum(segments.values()) == len(data.human) and groups == sorted(set(data.groups))
    assert trained_overlap(finetuned, ["unseen text"], ["another"], ["fi-en"]) == ({}, [])
    with pytest.warns(UserWarning, match=r"fine-tuned \(moverkit finetune\) on 200 of these 200 segments"):
        tune(
            data.predictions,
            data.references,
            data.human,
            data.groups,
            "twmd",
            {"temperature": [0.1]},
            model_type=str(finetuned),
            batch_size=200,
        )
    out = tmp_path / "c.json"
    args = ["combine", "--data", str(SAMPLE), "--component", "twmd", "--component", "chrF", "--out", str(out)]
    with pytest.warns(UserWarning, match="twmd's figures on them are not held out"):
        assert main([*args, "--arg", f"twmd:model_type={finetuned}", "--arg", "twmd:centering=batch"]) == 0
