"""Centered BERTScore: the Space of the moverkit evaluate module ``centered_bertscore``."""

from pathlib import Path

from moverkit.demo import Heatmap, build_demo, centering_params, idf_param, layer_param, model_param

demo = build_demo(
    "centered_bertscore",
    title="Centered BERTScore",
    params=[model_param(), layer_param(), *centering_params(), idf_param()],
    heatmaps=[Heatmap("similarity", "cosine similarity")],
    examples=[
        ("the cat sat on the mat\nhello there, general kenobi", "a cat was sitting on the mat\nhello there, general kenobi"),
        ("The weather is cold today.", "It is freezing today. ||| Today is a cold day."),
        ("the president met the press on monday", "on monday, reporters questioned the president"),
    ],
    card=Path(__file__).with_name("README.md"),
)

if __name__ == "__main__":
    demo.launch()
