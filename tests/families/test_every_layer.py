"""Issue 66: every width and every layer transformers runs (the families of ``models.STACKS``).

moverkit sized its vectors by the config's ``hidden_size`` and cut a model by its one list of
blocks. opt-350m projects its last block's output to another width (``word_embed_proj_dim``):
every token metric raised ``shape mismatch [15, 16] vs [15, 32]``, and a layer below the top
raised from the cut's comparison. Reformer's output is its two streams side by side, twice
``hidden_size``, and its hidden states are recorded at the length it pads a row to. XLM and
FlauBERT run their blocks from four parallel lists over ``range(n_layers)``: cut one, and the
model fails on its missing index (``num_layers=0`` and ``1`` of 3 were refused, bert-score's
tuned layers of xlm-mlm models among them). Here each of them, at every layer 0 to the top, gives
transformers' own ``hidden_states[k]`` (at the top its output) and scores in every metric.
"""

from __future__ import annotations

import math

import pytest
import torch

from families.models import STACKS, quiet_transformers
from moverkit import functional
from moverkit._core.base import MoverkitWarning
from moverkit._core.encoding.encoder import encode_texts
from moverkit._core.encoding.models import load_encoder
from moverkit._core.encoding.request import EncoderRequest

N_LAYERS = 3
"""The blocks of every family of :data:`~families.models.STACKS`."""

EVERY_LAYER = pytest.mark.parametrize("layer", range(N_LAYERS + 1))
STACK = pytest.mark.parametrize("name", sorted(STACKS))

TEXTS = [
    "the council approved a new budget for schools while markets fell",
    "a cat sat",
    "the cat sat on the mat",
]
"""Texts of 13, 5 and 8 tokens with [CLS] and [SEP]: padded in one batch, and of lengths that are
and are not a multiple of Reformer's chunk length (8), which it pads a row to by itself."""

PAIRS = (["the cat sat on the mat", "markets fell sharply on monday", ""], ["a cat sat on a mat", "schools", "a"])


def _reference(folder: str, layer: int):
    """transformers' vectors of layer ``layer`` of the model at ``folder``, whole, each text alone:
    ``hidden_states[layer]`` (its first rows: Reformer records them at its padded length), at the
    top the model's output."""
    from transformers import AutoModel, AutoTokenizer

    with quiet_transformers():
        model = AutoModel.from_pretrained(folder).eval()
        tokenizer = AutoTokenizer.from_pretrained(folder)

    def vectors(text: str) -> torch.Tensor:
        ids = torch.tensor([tokenizer(text)["input_ids"]])
        with torch.no_grad():
            out = model(input_ids=ids, output_hidden_states=True)
        return out[0][0] if layer == N_LAYERS else out.hidden_states[layer][0, : ids.shape[1]]

    return vectors


@STACK
@EVERY_LAYER
def test_layer_k_is_transformers_hidden_states_k(family_model, name, layer):
    """Each text's vectors at layer ``k``, batched with padding, are transformers' ``hidden_states[k]``
    of the text alone (at the top: the model's output, 16 wide for the projected OPT, 64 for
    Reformer), within 1e-5; the encoder's ``dim`` is their width, and the vectors of ``layers``
    from the same pass are those of each layer."""
    folder = family_model(name)
    encoder = load_encoder(folder, layer)
    reference = _reference(folder, layer)
    clouds = encode_texts(encoder, TEXTS, EncoderRequest(batch_size=len(TEXTS)), layers=[layer])
    assert clouds.vectors.shape[1] == encoder.dim
    for i, text in enumerate(TEXTS):
        rows = clouds.vectors[clouds.offsets[i] : clouds.offsets[i + 1]]
        torch.testing.assert_close(rows, reference(text), atol=1e-5, rtol=1e-5, msg=lambda m, t=text: f"{t!r}: {m}")
    assert torch.equal(clouds.layer_vectors[0], clouds.vectors)


@STACK
@EVERY_LAYER
@pytest.mark.parametrize("metric", ["twmd", "moverscore", "lazy_emd", "centered_bertscore"])
def test_every_layer_scores_in_every_token_metric(family_model, name, layer, metric):
    """Every token metric scores at every layer: finite scores, in the metric's range, one per pair
    (an empty text included)."""
    kwargs = {"centering": "none"} if metric in ("twmd", "centered_bertscore") else {}
    with quiet_transformers():
        out = getattr(functional, metric)(*PAIRS, model_type=family_model(name), num_layers=layer, **kwargs)
    scores = out["f1"] if "f1" in out else out[metric]
    assert len(scores) == len(PAIRS[0]) and all(math.isfinite(score) for score in scores), scores
    assert min(scores) >= -1.0 - 1e-6 and (metric == "lazy_emd" or max(scores) <= 1.0 + 1e-6)


@STACK
def test_sbertscore_scores(family_model, name):
    """The sentence metric scores with each family (mean pooling of the model's output); the empty
    text's pair scores 0, with moverkit's warning."""
    with quiet_transformers(), pytest.warns(MoverkitWarning, match="hold no sentence"):
        out = functional.sbertscore(*PAIRS, model_type=family_model(name))
    assert len(out["f1"]) == len(PAIRS[0]) and all(math.isfinite(score) for score in out["f1"])


def test_layers_of_two_widths_are_refused_together_and_taken_apart(family_model):
    """OPT's projected top layer (16 wide) and its blocks' outputs (32 wide) cannot be stacked:
    asking for them together (moverscore's power means over the last layers) is refused with a
    ``ValueError`` naming the widths, not a raw shape error; each width alone is taken."""
    folder = family_model("opt-projected")
    encoder = load_encoder(folder, N_LAYERS)
    assert encoder.widths == (32, 32, 32, 16) and encoder.dim == 16
    with pytest.raises(ValueError, match=r"of one width .* widths \{2: 32, 3: 16\}"):
        encode_texts(encoder, TEXTS, EncoderRequest(), layers=[2, 3])
    with pytest.raises(ValueError, match="of one width"), quiet_transformers():
        functional.moverscore(*PAIRS, model_type=folder, version="v1")
    clouds = encode_texts(encoder, TEXTS, EncoderRequest(), layers=[0, 1, 2])
    for layer in range(N_LAYERS):
        reference = _reference(folder, layer)
        torch.testing.assert_close(clouds.layer_vectors[layer][: clouds.offsets[1]], reference(TEXTS[0]))


def test_a_cut_that_does_not_run_keeps_the_model_whole(family_model):
    """XLM below its top: the blocks' list cut runs no model (its loop reads four lists by
    ``range(n_layers)``), so moverkit keeps every block and reads ``hidden_states[k]``; the
    projected OPT and Reformer are cut after block ``k + 1``, whose input is layer ``k``."""
    for name, blocks in (("xlm", N_LAYERS), ("opt-projected", 1), ("reformer", 1)):
        encoder = load_encoder(family_model(name), 0)
        assert (encoder.hidden_states_only, encoder.blocks) == (True, blocks), name
