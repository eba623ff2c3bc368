"""
name:
moverkit WMT16 translation

dataset:
lighteval/sacrebleu_manual

abstract:
WMT16 German-to-English and Romanian-to-English news translation (lighteval's own sacrebleu data),
scored with moverkit's metrics beside BLEU and chrF.

languages:
english

tags:
translation

A lighteval custom-tasks file (lighteval 0.13), e.g.::

    lighteval accelerate "model_name=gpt2" "moverkit_wmt16:de-en|0" --custom-tasks docs/lighteval_tasks.py
"""

import ast

from lighteval.metrics.metrics import Metrics
from lighteval.tasks.lighteval_task import LightevalTaskConfig
from lighteval.tasks.requests import Doc

from moverkit.lighteval import (
    centered_bertscore,
    centered_bertscore_precision,
    centered_bertscore_recall,
    lazy_emd,
    moverscore,
    sbertscore,
    twmd,
)

LANGUAGES = {"de": "German", "ro": "Romanian", "en": "English"}


def translation_prompt(line: dict, task_name: str | None = None) -> Doc:
    """One sentence to translate into English; its reference is the only choice (the gold)."""
    pair = line["translation"]
    if isinstance(pair, str):  # some subsets store the pair as the text of a dict
        pair = ast.literal_eval(pair)
    source = next(code for code in pair if code != "en")
    return Doc(
        task_name=task_name,
        query=f"{LANGUAGES[source]} phrase: {pair[source].rstrip()}\nEnglish phrase:",
        choices=[pair["en"].rstrip()],
        gold_index=0,
        instruction="",
    )


TASKS_TABLE = [
    LightevalTaskConfig(
        name=f"moverkit_wmt16:{source}-en",
        prompt_function=translation_prompt,
        hf_repo="lighteval/sacrebleu_manual",
        hf_subset=f"wmt16_{source}-en",
        hf_avail_splits=["test"],
        evaluation_splits=["test"],
        few_shots_split=None,
        few_shots_select=None,
        generation_size=None,
        metrics=[
            centered_bertscore_precision,
            centered_bertscore_recall,
            centered_bertscore,
            sbertscore,
            twmd,
            moverscore,
            lazy_emd,
            Metrics.bleu,
            Metrics.chrf,
        ],
        stop_sequence=["\n"],
        version=0,
    )
    for source in ("de", "ro")
]
