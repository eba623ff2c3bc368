"""MoverScore: the Space of the moverkit evaluate module ``moverscore``."""

from pathlib import Path

from moverkit.demo import (
    EXAMPLES,
    Heatmap,
    Param,
    build_demo,
    centering_params,
    layer_param,
    model_param,
    preset_default,
)
from moverkit.facts.specs import spec
from moverkit.functional.moverscore import PRESETS


def from_version(key: str, info: str = "") -> dict:
    return preset_default("version", PRESETS, key, "v2", info)


demo = build_demo(
    "moverscore",
    title="MoverScore",
    description="A similarity from the exact Earth Mover's Distance of the tokens: **higher is better**.",
    params=[
        Param("version", "Release preset", "choice", ("v2", "v1"), info="the values marked (v2) come from it"),
        Param("variant", "Mover", "choice", ("wmd", "smd"), **from_version("variant", "word or sentence mover")),
        Param("n_gram", "n-gram", "int", **from_version("n_gram")),
        Param("score_form", "Score form", "choice", ("1/(1+wmd)", "1-wmd"), **from_version("score_form")),
        Param("cost", "Cost", "choice", ("euclidean", "sqeuclidean"), **from_version("cost")),
        Param(
            "aggregation",
            "Layers",
            "choice",
            ("layer", "power_means"),
            **from_version("aggregation", "one, or Eq. 5's power means"),
        ),
        Param("idf", "IDF weights", "bool", **from_version("idf")),
        Param("remove_subwords", "Drop subword pieces", "bool", **from_version("remove_subwords")),
        Param("remove_punctuation", "Drop punctuation", "bool", **from_version("remove_punctuation")),
        Param("stop_words", "Stop words", "words", **from_version("stop_words", "separated by spaces or commas")),
        model_param(),
        layer_param(spec("moverscore").default_layer),
        *centering_params(),
    ],
    heatmaps=[
        Heatmap("plan", "optimal plan", colormap="Blues", value_format=".3f"),
        Heatmap("cost", "transport cost", colormap="viridis_r"),
    ],
    examples=EXAMPLES,
    card=Path(__file__).with_name("README.md"),
    main_params=("version", "variant", "n_gram"),
)

if __name__ == "__main__":
    demo.launch()
