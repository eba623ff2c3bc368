"""centered_bertscore as a drop-in for evaluate's bertscore: its arguments, and its numbers pinned to
the bert-score package's BERTScorer (rescaled with a baseline file too), and fit-baseline pinned to
bert-score's scores of the same random pairs."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from moverkit import MoverkitWarning, fit_centering
from moverkit._core import DEFAULT_MODEL, MODEL_LAYERS, embedded_model_path
from moverkit._core.call.baseline import BASELINE_DIR, baseline_csv, read_baseline
from moverkit.baselines import fit_baseline, random_pairs
from moverkit.cli import main
from moverkit.functional.centered_bertscore import centered_bertscore

bert_score = pytest.importorskip("bert_score")

TOL = 1e-5
LAYER = MODEL_LAYERS[DEFAULT_MODEL]
SHIPPED = BASELINE_DIR / "sentence-transformers__all-MiniLM-L6-v2.none.csv"


def _max_diff(ours, theirs):
    return max(
        float(np.max(np.abs(np.asarray(ours[k]) - t.numpy()))) for k, t in zip(("precision", "recall", "f1"), theirs)
    )


@pytest.fixture(scope="module")
def pairs(wmt_pairs):
    predictions, references = wmt_pairs
    return predictions[:60], references[:60]


@pytest.mark.slow  # parity with the bert-score package
@pytest.mark.parametrize("idf", [False, True])
def test_rescaled_scores_equal_bert_score_with_the_same_baseline_file(pairs, idf):
    predictions, references = pairs
    scorer = bert_score.BERTScorer(
        model_type=embedded_model_path(),
        num_layers=LAYER,
        lang="en",
        idf=idf,
        idf_sents=references if idf else None,
        rescale_with_baseline=True,
        baseline_path=str(SHIPPED),
    )
    theirs = scorer.score(predictions, references)
    ours = centered_bertscore(predictions, references, centering="none", idf=idf, rescale_with_baseline=True)
    assert _max_diff(ours, theirs) <= TOL
    plain = centered_bertscore(predictions, references, centering="none", idf=idf)
    assert _max_diff(plain, theirs) > 0.01  # the rescaling is not a no-op on these pairs


@pytest.mark.slow
def test_drop_in_call_takes_bertscore_arguments_unchanged(pairs, load_metric):
    predictions, references = pairs
    args = dict(
        lang="en",
        model_type=embedded_model_path(),
        num_layers=LAYER,
        verbose=False,
        idf=False,
        device="cpu",
        batch_size=16,
        nthreads=4,
        all_layers=False,
        use_fast_tokenizer=False,
        rescale_with_baseline=True,
        baseline_path=str(SHIPPED),
    )
    theirs = bert_score.BERTScorer(**{k: v for k, v in args.items() if k != "verbose"}).score(predictions, references)
    ours = load_metric("centered_bertscore").compute(
        predictions=predictions, references=references, centering="none", **args
    )
    assert _max_diff(ours, theirs) <= TOL


@pytest.mark.slow
def test_fit_baseline_is_the_mean_bert_score_of_random_pairs(tiny_model_path, pairs, tmp_path):
    texts = pairs[1]
    rows = fit_baseline(texts, model_type=tiny_model_path, n_pairs=40, seed=3)
    assert [row[0] for row in rows] == [0, 1, 2, 3]
    predictions, references = random_pairs(texts, 40, seed=3)
    assert all(p != r for p, r in zip(predictions, references))
    for layer, *means in rows:
        scorer = bert_score.BERTScorer(model_type=tiny_model_path, num_layers=layer)
        theirs = [float(t.mean()) for t in scorer.score(predictions, references)]
        assert means == pytest.approx(theirs, abs=TOL)
    # ... and a file bert-score reads: rescaling with it equals bert-score's on another layer set.
    path = tmp_path / "tiny.csv"
    path.write_text(baseline_csv(rows))
    scorer = bert_score.BERTScorer(
        model_type=tiny_model_path, num_layers=2, lang="en", rescale_with_baseline=True, baseline_path=str(path)
    )
    theirs = scorer.score(*pairs)
    ours = centered_bertscore(
        *pairs,
        model_type=tiny_model_path,
        num_layers=2,
        centering="none",
        rescale_with_baseline=True,
        baseline_path=str(path),
    )
    assert _max_diff(ours, theirs) <= TOL


def test_fit_baseline_command_writes_bert_scores_format(tiny_model_path, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    # Ten texts, ten pairs: batch centering over ten distinct texts (fewer warn).
    lines = ["the cat sat on the mat", "stocks fell on monday", "he went home early", "a law was passed"]
    lines += ["rain is expected this week", "the museum opens at nine", "scientists found water"]
    lines += ["the team won the final", "prices keep rising", "a new bridge links two towns"]
    texts.write_text("\n".join(lines) + "\n")
    out = tmp_path / "baseline.csv"
    assert (
        main(
            [
                "fit-baseline",
                "--texts",
                str(texts),
                "--out",
                str(out),
                "--model",
                tiny_model_path,
                "--pairs",
                "10",
                "--layers",
                "1",
                "3",
                "--centering",
                "batch",
            ]
        )
        == 0
    )
    assert out.read_text().splitlines()[0] == "LAYER,P,R,F"
    assert read_baseline(out, 3).shape == (3,)
    with pytest.raises(ValueError, match="no row for layer 2"):
        read_baseline(out, 2)


def test_shipped_baselines_cover_every_layer_of_the_embedded_model():
    shipped = sorted(BASELINE_DIR.glob("sentence-transformers__all-MiniLM-L6-v2.*.csv"))  # centered_bertscore's
    assert SHIPPED in shipped
    for path in shipped:
        for layer in range(LAYER + 1):
            values = read_baseline(path, layer)
            assert ((values > -1) & (values < 1)).all()


@pytest.mark.slow
@pytest.mark.parametrize("centering", ["none", "dim", "sentence", "batch", "corpus"])
def test_every_centering_rescales_with_its_shipped_baseline(pairs, centering):
    """No baseline_path needed: (s - b) / (1 - b) with b the layer's row of the shipped file (for
    corpus: the one fitted under the shipped statistic, which corpus takes without centering_stats)."""
    predictions, references = pairs[0][:20], pairs[1][:20]
    shipped = BASELINE_DIR / f"sentence-transformers__all-MiniLM-L6-v2.{centering}.csv"
    table = np.loadtxt(shipped, delimiter=",", skiprows=1)
    _, *baseline = table[table[:, 0] == LAYER][0]
    raw = centered_bertscore(predictions, references, centering=centering)
    rescaled = centered_bertscore(predictions, references, centering=centering, rescale_with_baseline=True)
    for key, b in zip(("precision", "recall", "f1"), baseline):
        assert rescaled[key] == pytest.approx([(s - b) / (1 - b) for s in raw[key]], abs=1e-9)
    assert f"rescaled={baseline[0]:.6f}," in rescaled["hashcode"]
    if centering == "corpus":  # the default
        assert centered_bertscore(predictions, references, rescale_with_baseline=True) == rescaled


@pytest.mark.slow
def test_an_own_corpus_statistic_rescales_only_with_its_own_baseline_file(pairs, tmp_path):
    # The shipped corpus baseline holds for the shipped statistic only.
    predictions, references = pairs[0][:4], pairs[1][:4]
    stats = fit_centering(pairs[1][:20])
    kwargs = {"centering": "corpus", "centering_stats": stats}
    with pytest.raises(ValueError, match="own centering_stats needs a baseline_path"):
        centered_bertscore(predictions, references, rescale_with_baseline=True, **kwargs)
    own = tmp_path / "own.csv"
    own.write_text(baseline_csv([(LAYER, 0.5, 0.5, 0.5)]))
    raw = centered_bertscore(predictions, references, **kwargs)
    rescaled = centered_bertscore(predictions, references, rescale_with_baseline=True, baseline_path=str(own), **kwargs)
    assert rescaled["f1"] == pytest.approx([2 * s - 1 for s in raw["f1"]], abs=1e-12)
    assert "rescaled=0.500000,0.500000,0.500000" in rescaled["hashcode"]


def test_rescaling_is_in_the_hashcode_with_the_baseline_values(pairs, tiny_model_path, tmp_path):
    predictions, references = pairs[0][:4], pairs[1][:4]
    plain = centered_bertscore(predictions, references, centering="none")["hashcode"]
    shipped = centered_bertscore(predictions, references, centering="none", rescale_with_baseline=True)["hashcode"]
    other = tmp_path / "other.csv"
    other.write_text(baseline_csv([(LAYER, 0.5, 0.5, 0.5)]))
    custom = centered_bertscore(
        predictions, references, centering="none", rescale_with_baseline=True, baseline_path=str(other)
    )
    assert len({plain, shipped, custom["hashcode"]}) == 3
    assert "rescaled=0.500000,0.500000,0.500000" in custom["hashcode"]
    # (s - b) / (1 - b) with b = 0.5: 2 s - 1
    raw = centered_bertscore(predictions, references, centering="none")
    assert custom["f1"] == pytest.approx([2 * s - 1 for s in raw["f1"]], abs=1e-12)


def test_bertscore_arguments_without_an_equivalent_are_clear(tiny_model_path):
    with pytest.raises(ValueError, match="all_layers=True is not supported"):
        centered_bertscore(["a"], ["b"], all_layers=True)
    with pytest.raises(ValueError, match="no baseline ships for model"):
        centered_bertscore(["a"], ["b"], model_type=tiny_model_path, centering="none", rescale_with_baseline=True)
    with pytest.raises(TypeError, match="nthreads must be an int"):
        centered_bertscore(["a"], ["b"], nthreads="4")


@pytest.mark.parametrize("name", ["centered_bertscore", "twmd", "moverscore", "lazy_emd", "sbertscore"])
def test_non_english_text_with_the_english_embedded_model_warns(name, tiny_model_path):
    from moverkit import functional

    function = getattr(functional, name)
    # Two pairs: IDF fitted on one text (moverscore's default) is 0 on its every token, and warns.
    german = (["der Hund", "ein Baum"], ["die Katze", "das Haus"])
    with pytest.warns(MoverkitWarning, match="English embedded model"):
        function(*german, lang="de")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        function(["the dog"], ["a cat"], lang="en")
        # centering="none": no corpus statistic ships for the tiny model.
        function(*german, lang="de", model_type=tiny_model_path, centering="none")
    assert not [w for w in caught if "English embedded model" in str(w.message)]
    with pytest.raises((TypeError, ValueError), match="lang"):
        function(["a"], ["b"], lang=None)
