"""moverkit.mbr_select and ``moverkit mbr`` (issue 53): minimum Bayes risk selection equal to the
plain loop of the metric over every pair, each distinct text embedded once, the documented
conventions (self-pairs, duplicates, one candidate, empty and unequal lists), reference
aggregation, and mbrs's BERTScore MBR on the same model and layer."""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pytest

import moverkit
from moverkit import functional
from moverkit.cli import main
from moverkit.facts.specs import SPECS
from moverkit.facts.ties import first_best

SOURCES = [
    ["the cat sat on the mat", "a cat sat on the mat", "the dog ran in the park"],
    ["stocks fell sharply on monday", "shares dropped on monday"],
]


QUICK = ("centered_bertscore", "twmd")
"""The plain loop of the quick test loop: the default metric (the block path) and one of the
metrics scored through the function; the other three (3 to 10 s each on a busy 2-core CPU) are slow."""


@pytest.mark.parametrize(
    "name", [n if n in QUICK else pytest.param(n, marks=pytest.mark.slow) for n in moverkit.METRICS]
)
def test_the_matrix_is_the_plain_loop_of_the_metric_over_all_pairs(name):
    result = moverkit.mbr_select(SOURCES, metric=name, return_matrix=True)
    arguments = {"idf": False} if name == "moverscore" else {}
    main_output = SPECS[name].main
    for s, texts in enumerate(SOURCES):
        loop = [[getattr(functional, name)([h], [y], **arguments)[main_output][0] for y in texts] for h in texts]
        assert np.allclose(result["matrix"][s], loop, atol=1e-6), name
        expected = np.mean(loop, axis=1)
        assert np.allclose(result["expected_scores"][s], expected, atol=1e-6)
        best = first_best(expected, SPECS[name].higher_is_better)  # ties within float32 noise: the first
        assert result["index"][s] == best and result["text"][s] == texts[best]
        assert result["expected_score"][s] == pytest.approx(expected[best], abs=1e-6)
    assert result["hashcode"].startswith(f"{name}:")


@pytest.mark.parametrize("name", ["centered_bertscore", "sbertscore"])
def test_a_symmetric_utility_over_two_candidates_picks_the_first(name):
    # F1 is symmetric: the two expected utilities are equal in exact arithmetic, and which of their
    # float32 last bits is larger depends on the CPU; the tie goes to the first, in either order
    pair = ["stocks fell sharply on monday", "shares dropped on monday"]
    result = moverkit.mbr_select([pair, pair[::-1]], metric=name)
    assert result["index"] == [0, 0] and result["text"] == [pair[0], pair[1]]
    first, second = result["expected_scores"][0]
    assert abs(first - second) < 1e-6


def test_the_matched_blocks_are_the_metric_pair_by_pair():
    # use_fast_tokenizer (a no-op argument of centered_bertscore) sends the call down the
    # function's own paired batches: the same matrices as the blocks of every candidate's cosines
    # a third source of 20 candidates: the symmetric block runs in chunks of 3 rows, each matched
    # from its own first column, the pairs below read from the transposes (mbr.SYMMETRIC_CHUNKS)
    words = ["the", "markets", "fell", "sharply", "on", "monday", "as", "investors", "sold", "shares", "of", "banks"]
    sources = [*SOURCES, [" ".join(words[: 4 + i % 9] + words[i % 3 :: 4]) for i in range(20)]]
    for name, arguments in (("centered_bertscore", {"use_fast_tokenizer": False}), ("sbertscore", {"lang": "en"})):
        for output in ("recall", "f1"):
            blocks = moverkit.mbr_select(sources, metric=name, return_matrix=True, output=output)
            paired = moverkit.mbr_select(
                sources, metric=name, return_matrix=True, output=output, rescale_with_baseline=False, **arguments
            )
            for s in range(len(sources)):
                assert np.allclose(blocks["matrix"][s], paired["matrix"][s], atol=1e-6), (name, output)


def test_each_distinct_text_is_embedded_once(monkeypatch):
    from moverkit._core import Encoder

    rows = []
    forward = Encoder.forward

    def counting(self, input_ids, attention_mask):
        rows.append(input_ids.shape[0])
        return forward(self, input_ids, attention_mask)

    monkeypatch.setattr(Encoder, "forward", counting)
    candidates = [[f"candidate number {i} of source {s}" for i in range(12)] for s in range(3)]
    moverkit.mbr_select(candidates)
    assert sum(rows) == 36  # N rows for N candidates (not N^2 = 432)


def test_duplicates_weigh_as_samples_and_ties_take_the_first():
    texts = ["the cat sat", "a dog ran", "the cat sat", "a bird flew"]
    result = moverkit.mbr_select([texts], return_matrix=True)
    matrix = np.array(result["matrix"][0])
    assert matrix.shape == (4, 4) and np.allclose(matrix[0], matrix[2]) and np.allclose(matrix[:, 0], matrix[:, 2])
    assert result["expected_scores"][0][0] == result["expected_scores"][0][2]
    assert result["index"] == [0]  # the duplicated text, counted twice, and the first of the tie


def test_one_candidate_unequal_lists_and_given_pseudo_references():
    result = moverkit.mbr_select([["only one"], ["a", "b", "c"]], metric="twmd")
    assert result["index"][0] == 0 and result["expected_score"][0] == pytest.approx(1.0)  # its self-pair
    given = moverkit.mbr_select(
        [["the cat sat", "a dog ran"]],
        pseudo_references=[["a cat sat", "the cat sat down", "cats sit"]],
        return_matrix=True,
    )
    assert np.array(given["matrix"][0]).shape == (2, 3) and given["index"] == [0]
    sbert = moverkit.mbr_select([["the cat sat", "a cat sat"]], metric="twmd", variant="sbert", return_matrix=True)
    assert sbert["matrix"][0][0][1] == pytest.approx(
        functional.twmd(["the cat sat"], ["a cat sat"], variant="sbert")["sbert"][0]
    )


def test_lazy_emd_chooses_the_least_expected_distance():
    result = moverkit.mbr_select([["the cat sat", "the cat sat down", "stock prices"]], metric="lazy_emd")
    assert result["expected_score"][0] == min(result["expected_scores"][0]) and result["index"] == [1]  # the middle one


def test_empty_and_bad_candidates():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", moverkit.MoverkitWarning)  # the empty text's
        result = moverkit.mbr_select([["", "the cat sat", "a cat sat"]])
    assert result["index"] == [1] and np.isfinite(result["expected_scores"][0]).all()
    with pytest.raises(ValueError, match=r"candidates\[1\] is an empty list"):
        moverkit.mbr_select([["a"], []])
    with pytest.raises(ValueError, match=r"candidates\[0\]\[1\] is None"):
        moverkit.mbr_select([["a", None]])
    for item in (3, b"bytes", ["a"]):
        with pytest.raises(TypeError, match=r"candidates\[0\]\[1\] must be a string"):
            moverkit.mbr_select([["a", item]])
    with pytest.raises(ValueError, match=r"candidates\[0\]\[0\] holds a lone surrogate"):
        moverkit.mbr_select([["broken \ud800", "a"]])
    with pytest.raises(ValueError, match=r"pseudo_references\[0\] is None"):
        moverkit.mbr_select([["a"]], pseudo_references=[None])
    for given in (None, "a", 3):
        with pytest.raises(TypeError, match="candidates must be a list with one list of texts per source"):
            moverkit.mbr_select(given)
    with pytest.raises(TypeError, match=r"candidates\[0\] is a string"):
        moverkit.mbr_select(["a", "b"])
    with pytest.raises(ValueError, match="2 sources of candidates but 1 of pseudo_references"):
        moverkit.mbr_select([["a"], ["b"]], pseudo_references=[["a"]])
    with pytest.raises(ValueError, match="centering='batch'"):
        moverkit.mbr_select([["a"]], centering="batch")
    assert moverkit.mbr_select([])["index"] == []


def test_a_thousand_candidates_and_hostile_texts(tiny_model_path):
    hostile = ["word " * 2000, "🐈 sat 在垫子上 на коврике", "🙂🙂🙂", "a cat", "   "]
    candidates = [hostile[i % len(hostile)] + ("" if i % 2 else " !") for i in range(1000)]  # 10 distinct texts
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", moverkit.MoverkitWarning)  # truncation, empty text
        exact = moverkit.mbr_select([candidates], model_type=tiny_model_path, centering="none")
        distinct = [f"sample {i} of {1000 - i} tokens" for i in range(1000)]
        aggregated = moverkit.mbr_select([distinct], model_type=tiny_model_path, centering="none", aggregate=True)
    assert len(exact["expected_scores"][0]) == 1000 and np.isfinite(exact["expected_scores"][0]).all()
    assert len(aggregated["expected_scores"][0]) == 1000 and np.isfinite(aggregated["expected_scores"][0]).all()


@pytest.mark.parametrize("name", moverkit.METRICS)
def test_sources_of_empty_and_hostile_texts_get_finite_utilities(name, tiny_model_path):
    blank = ["", "   ", "\n\t"]
    hostile = ["word " * 2000, "🐈 sat 在垫子上 на коврике 🙂", "🙂🙂🙂", "a cat sat"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", moverkit.MoverkitWarning)  # truncation, empty texts
        result = moverkit.mbr_select([blank, hostile], metric=name, model_type=tiny_model_path, centering="none")
    empty = SPECS[name].empty  # an empty text against any text, itself included
    assert result["expected_scores"][0] == [pytest.approx(empty)] * 3 and result["index"][0] == 0
    assert len(result["expected_scores"][1]) == 4 and np.isfinite(result["expected_scores"][1]).all()


def test_aggregation_is_exact_for_sentence_vectors_of_one_sentence():
    exact = moverkit.mbr_select(SOURCES, metric="sbertscore")
    aggregated = moverkit.mbr_select(SOURCES, metric="sbertscore", aggregate=True)
    assert np.allclose(np.concatenate(exact["expected_scores"]), np.concatenate(aggregated["expected_scores"]))
    assert aggregated["index"] == exact["index"] and aggregated["hashcode"].endswith("|mbr=aggregate")


def test_aggregation_of_token_clouds_is_the_cosine_of_mean_pooled_embeddings():
    result = moverkit.mbr_select(SOURCES, aggregate=True)
    h, y = SOURCES[1]

    def mean_cosine(a, b):  # the mean cosine of the scored tokens of a and b: the dot product of their means
        return np.mean(functional.centered_bertscore([a], [b], return_alignment=True)["alignment"][0]["similarity"])

    cosine = mean_cosine(h, y) / np.sqrt(mean_cosine(h, h) * mean_cosine(y, y))  # of the two mean vectors
    assert result["expected_scores"][1][0] == pytest.approx((1 + cosine) / 2, abs=1e-6)  # itself, and y
    with pytest.raises(ValueError, match="centered_bertscore or sbertscore"):
        moverkit.mbr_select(SOURCES, metric="twmd", aggregate=True)
    with pytest.raises(ValueError, match="no candidate-by-reference matrix"):
        moverkit.mbr_select(SOURCES, aggregate=True, return_matrix=True)
    with pytest.raises(ValueError, match="encoder and centering arguments and idf only, not rescale_with_baseline"):
        moverkit.mbr_select(SOURCES, aggregate=True, rescale_with_baseline=True)


def test_the_command_reads_json_lines_or_n_lines_per_source(tmp_path, capsys):
    jsonl = tmp_path / "sources.jsonl"
    jsonl.write_text(
        json.dumps({"candidates": SOURCES[0]})
        + "\n"
        + json.dumps({"candidates": SOURCES[1], "pseudo_references": ["shares fell"]})
        + "\n",
        encoding="utf-8",
    )
    out = tmp_path / "chosen.jsonl"
    assert main(["mbr", "--candidates", str(jsonl), "--metric", "twmd", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    expected = moverkit.mbr_select(SOURCES, metric="twmd", pseudo_references=[SOURCES[0], ["shares fell"]])
    assert [r["index"] for r in rows] == expected["index"] and [r["source"] for r in rows] == [1, 2]
    assert rows[1]["expected_score"] == round(expected["expected_score"][1], 6)
    text = tmp_path / "samples.txt"
    text.write_text("".join(t + "\n" for t in SOURCES[0][:2] + SOURCES[1]), encoding="utf-8")
    capsys.readouterr()
    assert main(["mbr", "--candidates", str(text), "--num-candidates", "2", "--aggregate"]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["text"] for r in printed] == moverkit.mbr_select([SOURCES[0][:2], SOURCES[1]], aggregate=True)["text"]


@pytest.mark.parametrize(
    "lines, flags, message",
    [
        (['{"candidates": []}'], [], "line 1: candidates is an empty list"),
        (['{"candidates": ["a"]}', "not json"], [], "line 2: not a JSON file"),
        (['{"texts": ["a"]}'], [], 'line 1: each line must be a JSON object with a "candidates" list'),
        (['{"candidates": ["a", 3]}'], [], r"line 1: candidates\[1\] must be a string"),
        (["a", "b", "c"], ["--num-candidates", "2"], "3 lines, not a multiple of --num-candidates 2"),
    ],
)
def test_the_command_names_the_line_of_a_bad_input(tmp_path, capsys, lines, flags, message):
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["mbr", "--candidates", str(path), *flags, "--out", str(tmp_path / "out.jsonl")]) == 2
    assert "moverkit: error:" in (err := capsys.readouterr().err)
    assert re.search(message, err), err
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.integration
def test_mbrs_bertscore_mbr_chooses_what_moverkit_chooses(wmt_pairs):
    """mbrs's BERTScore MBR (its DecoderMBR and MetricBERTScore, which runs bert-score's greedy
    match) on the same candidates, model and layer, against ``centering="none"``. Where a score
    differs, the cause is bert-score's padded zero: mbrs pads each batch of hypotheses to the
    longest, and a reference token whose every cosine with a hypothesis's real tokens is negative
    matches a padding row's 0 instead; scored alone (a batch of one, no padding), mbrs's score of
    that pair is moverkit's."""
    import random

    try:
        from mbrs.decoders import DecoderMBR
        from mbrs.metrics import MetricBERTScore
    except ImportError as err:  # mbrs 0.1.8 imports transformers.tokenization_utils, gone in transformers 5
        pytest.skip(f"mbrs does not import here ({err}); it needs transformers < 5: pip install 'moverkit[mbrs]'")
    from benchmarks.rewards import sampled_candidates
    from moverkit._core import embedded_model_path

    model = str(embedded_model_path())
    metric = MetricBERTScore(MetricBERTScore.Config(model_type=model, num_layers=6, cpu=True))
    decoder = DecoderMBR(DecoderMBR.Config(), metric)
    rng = random.Random(0)
    sources = [sampled_candidates(h, r, 8, rng) for h, r in zip(*wmt_pairs)][:12]
    ours = moverkit.mbr_select(sources, centering="none", model_type=model, num_layers=6, return_matrix=True)
    padded_pairs = 0
    for s, texts in enumerate(sources):
        theirs = metric.pairwise_scores(texts, texts).double().numpy()
        matrix = np.array(ours["matrix"][s])
        alone = theirs.copy()
        for i, j in zip(*np.nonzero(np.abs(theirs - matrix) > 1e-5)):
            alone[i, j] = metric.scores([texts[i]], [texts[j]]).item()
            padded_pairs += 1
        assert np.allclose(alone, matrix, atol=1e-5), s  # without padding, mbrs's scores are moverkit's
        chosen = texts[decoder.decode(texts, texts, nbest=1).idx[0]]  # among duplicates, maybe a later copy
        assert chosen == texts[int(np.argmax(theirs.mean(axis=1)))]
        assert ours["text"][s] == texts[int(np.argmax(alone.mean(axis=1)))]  # and so are the choices
        print(f"source {s}: the same choice: {chosen == ours['text'][s]}")
    print(f"{padded_pairs} of {sum(len(t) ** 2 for t in sources)} pairs scored differently by the padded zero")
