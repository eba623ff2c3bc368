"""sBERTScore: the Space of the moverkit evaluate module ``sbertscore``."""

from pathlib import Path

from moverkit.demo import Heatmap, Param, build_demo, centering_params, model_param

demo = build_demo(
    "sbertscore",
    title="sBERTScore: sentence-level BERTScore",
    description="Greedy matching of sentence embeddings: precision, recall, F1 in [-1, 1]; **higher is better**.",
    params=[
        model_param(),
        *centering_params(("none", "dim", "batch", "corpus"), "moverkit fit-centering --level sentence"),
        Param("lang", "Language of the sentence splitter", "text", info="pysbd's codes: en, de, fr, es, zh, ..."),
    ],
    heatmaps=[
        Heatmap(
            "similarity",
            "cosine similarity",
            rows="prediction_sentences",
            columns="reference_sentences",
            row_label="prediction sentence",
            column_label="reference sentence",
        )
    ],
    examples=[
        (
            "The cat sat on the mat. It purred. Then it slept.",
            "A cat was sitting on the mat. It was purring.",
        ),
        (
            "Dr. Smith paid $3.50 for coffee. He left at 9 a.m.",
            "Dr. Smith left at nine. ||| The doctor bought a coffee for 3.50 dollars and left.",
        ),
        ("hello there, general kenobi", "hello there, general kenobi"),
    ],
    card=Path(__file__).with_name("README.md"),
    main_params=("centering", "lang"),
)

if __name__ == "__main__":
    demo.launch()
