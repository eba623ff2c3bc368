"""Lazy-EMD: the Space of the moverkit evaluate module ``lazy_emd``."""

from pathlib import Path

from moverkit.demo import (
    EXAMPLES,
    Heatmap,
    Param,
    build_demo,
    centering_params,
    idf_param,
    layer_param,
    model_param,
    preset_default,
)
from moverkit.functional.lazy_emd import PENALTY_PRESETS


def from_lang(key: str) -> dict:
    presets = {lang: dict(zip(("reg_c", "reg_r"), penalties)) for lang, penalties in PENALTY_PRESETS.items()}
    return preset_default("lang", presets, key, "en", "inf: a hard constraint")


demo = build_demo(
    "lazy_emd",
    title="Lazy-EMD: unbalanced optimal transport",
    description="A distance: **lower is closer**.",
    params=[
        Param("lang", "Penalty preset", "choice", ("en", "zh", "other"), info="Section 5.2's tuned (reg_c, reg_r)"),
        Param("reg_c", "λc, prediction marginal", "float", **from_lang("reg_c")),
        Param("reg_r", "λr, reference marginal", "float", **from_lang("reg_r")),
        Param("epsilon", "ε, entropic regularization", "float"),
        Param("max_iter", "Sinkhorn iterations at most", "int"),
        idf_param(),
        model_param(),
        layer_param(),
        *centering_params(),
    ],
    heatmaps=[
        Heatmap("plan", "transport plan", colormap="Blues", value_format=".3f"),
        Heatmap("cost", "cost 1 - cosine", colormap="viridis_r"),
    ],
    examples=EXAMPLES,
    card=Path(__file__).with_name("README.md"),
    main_params=("lang", "idf"),
)

if __name__ == "__main__":
    demo.launch()
