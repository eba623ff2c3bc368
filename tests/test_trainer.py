"""The README's Seq2SeqTrainer compute_metrics, run as written in a Trainer with a tiny random
BART, and moverkit.means / numpy inputs pinned to the plain per-example scores."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

import moverkit
from moverkit._core import embedded_model_path
from moverkit.functional import centered_bertscore

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
SOURCES = ["the cat sat on the mat", "stocks fell on monday", "he went home early", "a law was passed"]
TARGETS = ["a cat was on the mat", "shares dropped on monday", "he left for home", "parliament passed a law"]


def _readme_block(marker):
    (block,) = [code for code in re.findall(r"^```python\n(.*?)^```", README, flags=re.S | re.M) if marker in code]
    return block


@pytest.mark.slow
def test_readme_compute_metrics_logs_one_float_per_score_in_a_seq2seq_trainer(tmp_path):
    import datasets
    import torch
    from transformers import (
        AutoTokenizer,
        BartConfig,
        BartForConditionalGeneration,
        Seq2SeqTrainer,
        Seq2SeqTrainingArguments,
    )

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_path())
    torch.manual_seed(0)
    config = BartConfig(
        vocab_size=tokenizer.vocab_size,
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_position_embeddings=64,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.cls_token_id,
        eos_token_id=tokenizer.sep_token_id,
        decoder_start_token_id=tokenizer.cls_token_id,
        forced_eos_token_id=None,
    )
    model = BartForConditionalGeneration(config)
    model.generation_config.max_length = 8
    model.generation_config.min_length = 3  # tokens beyond [CLS]/[SEP], so no prediction decodes empty
    features = tokenizer(SOURCES, padding="max_length", max_length=12)
    features["labels"] = tokenizer(TARGETS, padding="max_length", max_length=12)["input_ids"]
    dataset = datasets.Dataset.from_dict(dict(features))

    namespace = {"tokenizer": tokenizer}
    exec(_readme_block("def compute_metrics"), namespace)  # the README block, as written
    args = Seq2SeqTrainingArguments(
        output_dir=str(tmp_path),
        per_device_eval_batch_size=2,
        predict_with_generate=True,
        generation_max_length=8,
        report_to=[],
        use_cpu=True,
    )
    trainer = Seq2SeqTrainer(model=model, args=args, eval_dataset=dataset, compute_metrics=namespace["compute_metrics"])
    logged = trainer.evaluate()
    assert {"eval_precision", "eval_recall", "eval_f1"} <= set(logged)
    assert not [key for key in logged if "hashcode" in key]

    # The same numbers from the decoded generations scored directly, one prediction at a time averaged.
    output = trainer.predict(dataset)
    decoded = tokenizer.batch_decode(
        np.where(output.predictions != -100, output.predictions, 0), skip_special_tokens=True
    )
    direct = centered_bertscore(decoded, TARGETS)
    for key in ("precision", "recall", "f1"):
        assert isinstance(logged[f"eval_{key}"], float)
        assert logged[f"eval_{key}"] == pytest.approx(float(np.mean(direct[key])), abs=1e-6)


def test_means_is_the_mean_of_every_score_list():
    result = centered_bertscore(SOURCES, TARGETS, centering="none", return_alignment=True)
    means = moverkit.means(result)
    assert set(means) == {"precision", "recall", "f1"}
    for key, value in means.items():
        assert value == pytest.approx(sum(result[key]) / len(result[key]), abs=1e-12)
    assert moverkit.means(centered_bertscore([], [])) == {}  # no examples: no key, not a NaN
    assert not any(math.isnan(v) for v in means.values())


def test_numpy_arrays_of_strings_score_as_lists(load_metric):
    expected = centered_bertscore(SOURCES, TARGETS, centering="none")
    as_arrays = centered_bertscore(np.array(SOURCES), np.array(TARGETS), centering="none")
    assert as_arrays == expected
    metric = load_metric("centered_bertscore")
    assert metric.compute(predictions=np.array(SOURCES), references=np.array(TARGETS), centering="none") == expected
    several = np.array([[t, s] for t, s in zip(TARGETS, SOURCES)])  # two references each, a 2-d array
    assert centered_bertscore(np.array(SOURCES), several, centering="none") == centered_bertscore(
        SOURCES, [list(r) for r in several], centering="none"
    )
