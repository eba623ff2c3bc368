"""Centered BERTScore: the Space of the moverkit evaluate module ``centered_bertscore``."""

from pathlib import Path

from moverkit.demo import EXAMPLES, Heatmap, build_demo, centering_params, idf_param, layer_param, model_param

demo = build_demo(
    "centered_bertscore",
    title="Centered BERTScore",
    description="Greedy matching of centered token embeddings: precision, recall, F1 in [-1, 1]; **higher is better**.",
    params=[model_param(), layer_param(), *centering_params(), idf_param()],
    heatmaps=[Heatmap("similarity", "cosine similarity")],
    examples=EXAMPLES,
    card=Path(__file__).with_name("README.md"),
    main_params=("centering", "idf"),
)

if __name__ == "__main__":
    demo.launch()
