"""MoverScore: the Space of the moverkit evaluate module ``moverscore``."""

from pathlib import Path

from moverkit.demo import EXAMPLES, Heatmap, Param, build_demo, centering_params, layer_param, model_param

demo = build_demo(
    "moverscore",
    title="MoverScore",
    description="A similarity from the exact Earth Mover's Distance of the tokens: **higher is better**.",
    params=[
        Param("version", "Release preset", "choice", ("v2", "v1"), info="settings left at (default) follow it"),
        Param("variant", "Mover", "choice", ("wmd", "smd"), info="word mover or sentence mover"),
        Param("n_gram", "n-gram", "int", info="blank: the preset's (1)"),
        Param("score_form", "Score form", "choice", ("1/(1+wmd)", "1-wmd")),
        Param("cost", "Cost", "choice", ("euclidean", "sqeuclidean")),
        Param("aggregation", "Layers", "choice", ("layer", "power_means"), info="one layer, or Eq. 5's power means"),
        Param("idf", "IDF weights", "bool"),
        Param("remove_subwords", "Drop subword pieces", "bool"),
        Param("remove_punctuation", "Drop punctuation", "bool"),
        Param("stop_words", "Stop words", "words", info="separated by spaces or commas"),
        model_param(),
        layer_param(),
        *centering_params(),
    ],
    heatmaps=[
        Heatmap("flow", "optimal flow", colormap="Blues", value_format=".3f"),
        Heatmap("cost", "transport cost", colormap="viridis_r"),
    ],
    examples=EXAMPLES,
    card=Path(__file__).with_name("README.md"),
)

if __name__ == "__main__":
    demo.launch()
