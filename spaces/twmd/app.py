"""Tempered Word Mover Distance: the Space of the moverkit evaluate module ``twmd``."""

from pathlib import Path

from moverkit.demo import EXAMPLES, Heatmap, Param, build_demo, centering_params, layer_param, model_param
from moverkit.functional.twmd import DEFAULT_TEMPERATURES, MEAN_CENTERINGS, VARIANTS

CENTERED, UNCENTERED = (
    ", ".join(f"{variant} {t[kind]}" for variant, t in DEFAULT_TEMPERATURES.items())
    for kind in ("centered", "uncentered")
)
TUNED = f"{'/'.join(MEAN_CENTERINGS)} centering: {CENTERED}; else {UNCENTERED}"

demo = build_demo(
    "twmd",
    title="Tempered Word Mover Distance (TWMD)",
    description="A similarity of the tokens through a tempered transport plan: **higher is better**.",
    params=[
        Param("variant", "Variant", "choice", VARIANTS, info="the result is named after it"),
        Param(
            "temperature",
            "Temperature T",
            "float",
            info=f"blank: the paper's; {TUNED}",
            unset=f"{DEFAULT_TEMPERATURES['twmd']['centered']} (tuned)",
        ),
        Param("sinkhorn_iterations", "Sinkhorn iterations", "int", info="TWMD only; the paper uses 1"),
        Param("normalize", "Normalize (Eq. 1)", "bool", info="a text scores 1 against itself"),
        model_param(),
        layer_param(),
        *centering_params(),
    ],
    heatmaps=[
        Heatmap("plan", "transport plan", colormap="Blues", value_format=".3f"),
        Heatmap("similarity", "cosine similarity"),
    ],
    examples=EXAMPLES,
    card=Path(__file__).with_name("README.md"),
    main_params=("variant", "temperature"),
)

if __name__ == "__main__":
    demo.launch()
