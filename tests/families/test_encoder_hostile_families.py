"""Issue 60: tiny seeded models of the families a hostile user tries (BigBird, Funnel, CANINE, decoders
with a final norm, a folder saved in float16), held to what moverkit promises of any encoder: a load
leaves the model as its folder made it, scores do not depend on the batch, and a model moverkit
cannot score that way is refused at load with the reason."""

from __future__ import annotations

import pytest
import torch

from families.models import READS_PADDING, REFUSED, SPECS, quiet_transformers, reference_model, wmt17_pairs
from moverkit import functional
from moverkit._core.encoding.encoder import encode_texts
from moverkit._core.encoding.models import load_encoder
from moverkit._core.encoding.request import EncoderRequest, weights_fingerprint
from moverkit._core.encoding.sentences import get_sentence_encoder

METRICS = ("twmd", "moverscore", "lazy_emd", "sbertscore", "centered_bertscore")


def _scores(metric: str, folder: str, predictions, references, **kwargs) -> list[float]:
    if metric in ("twmd", "centered_bertscore"):
        kwargs["centering"] = "none"
    with quiet_transformers():
        out = getattr(functional, metric)(predictions, references, model_type=folder, **kwargs)
    return out["f1"] if "f1" in out else out[metric]


def _attention_types(model: torch.nn.Module) -> set[str]:
    return {
        module.attention_type for module in model.modules() if isinstance(getattr(module, "attention_type", None), str)
    }


def test_bigbird_runs_full_attention_and_a_load_or_a_call_changes_nothing(family_model):
    """BigBird saved with ``attention_type="block_sparse"`` (the released setting): moverkit builds
    it with full attention (documented), so no row, short or long, switches it during the load's
    probes or a call; its config and its modules' attention type are the same after a call as
    after the load. Its vectors are transformers' full-attention vectors of the text alone,
    texts both shorter and longer than block-sparse attention's 28 tokens."""
    folder = family_model("bigbird")
    encoder = load_encoder(folder, 2)
    config = encoder.model.config.to_dict()
    assert config["attention_type"] == "original_full" and _attention_types(encoder.model) == {"original_full"}
    tokenizer = encoder.tokenizer
    short, long = "the cat sat", _bigbird_pairs(tokenizer)[0][0]
    assert len(tokenizer(short)["input_ids"]) <= 28 < len(tokenizer(long)["input_ids"])
    clouds = encode_texts(encoder, [long, short], EncoderRequest(batch_size=2))
    assert encoder.model.config.to_dict() == config and _attention_types(encoder.model) == {"original_full"}
    reference = reference_model("bigbird", folder, 2)
    for i, text in enumerate((long, short)):
        ids = torch.tensor([tokenizer(text)["input_ids"]])
        rows = clouds.vectors[clouds.offsets[i] : clouds.offsets[i + 1]]
        torch.testing.assert_close(rows, reference(ids), atol=1e-5, rtol=1e-5)


def test_a_probe_refuses_a_model_that_switches_itself(family_model):
    """What kept BigBird's switch from going unseen: a load-time probe that changes a setting of
    the model (here transformers' switch of a block-sparse BigBird to full attention on a row
    of 3 tokens, set on its modules, not in its config) is refused, naming the setting."""
    from transformers import AutoModel

    from moverkit._core.encoding.architecture import ModelChangesItself, unchanged

    with quiet_transformers():
        model = AutoModel.from_pretrained(family_model("bigbird")).eval()  # block-sparse, as saved
    assert _attention_types(model) == {"block_sparse"}
    switched = "attention_type when it runs .*'block_sparse' -> 'original_full'"
    with pytest.raises(ModelChangesItself, match=switched), quiet_transformers(), unchanged(model), torch.no_grad():
        model(input_ids=torch.tensor([[5, 6, 7]]))


def _bigbird_pairs(tokenizer) -> tuple[list[str], list[str]]:
    """Ten WMT17 pairs whose texts are all longer than block-sparse attention's 28 tokens and
    within the tiny BigBird's limit of 128."""
    chosen = ([], [])
    for pair in zip(*wmt17_pairs()):
        if all(28 < len(tokenizer(text)["input_ids"]) <= SPECS["bigbird"].limit for text in pair):
            chosen[0].append(pair[0])
            chosen[1].append(pair[1])
    return chosen[0][:10], chosen[1][:10]


@pytest.mark.parametrize("metric", ["centered_bertscore", "sbertscore"])
def test_bigbird_scores_do_not_depend_on_the_batch(family_model, metric):
    """Before issue 60, sbertscore's BigBird switched to full attention partway through a call (at
    its first short batch), and the scores of its first batches differed by 1.6e-4 from those at
    ``batch_size=1``: now the same within 1e-6, texts short and long, and the sentence model's
    config and modules unchanged."""
    folder = family_model("bigbird")
    predictions, references = _bigbird_pairs(load_encoder(folder).tokenizer)
    predictions, references = predictions + ["a", "the cat sat"], references + ["b", "a dog"]
    batched = _scores(metric, folder, predictions, references, batch_size=64)
    alone = _scores(metric, folder, predictions, references, batch_size=1)
    assert max(abs(a - b) for a, b in zip(batched, alone)) <= 1e-6
    if metric == "sbertscore":
        assert _attention_types(get_sentence_encoder(folder).model) == {"original_full"}


@pytest.mark.parametrize("name", sorted(REFUSED))
@pytest.mark.parametrize("metric", METRICS)
def test_a_model_that_reads_padding_is_refused_at_load_by_every_metric(family_model, name, metric):
    """Funnel (its pooling averages padded positions in) and CANINE (a strided convolution over
    characters) give a text other vectors when it is padded: probed at load, refused by every
    metric with a ValueError naming the model and the reason. Before issue 60, four metrics raised
    Funnel's ``TypeError: FunnelEncoder.forward() got an unexpected keyword argument 'input_ids'``,
    sbertscore's F1 moved with the batch, CANINE raised ``NotImplementedError`` from moverkit's
    fingerprint of its weights, and a 1-character text raised torch's ``max_pool1d() Invalid
    computed output size: 0``: the refusal comes first, a 1-character text at ``batch_size=1``
    included."""
    folder = family_model(name)
    with pytest.raises(ValueError, match=rf"model_type='{folder}' .*{READS_PADDING}"):
        _scores(metric, folder, ["a", "the cat sat on the mat"], ["b", "a cat sat"], batch_size=1)


@pytest.mark.parametrize("name, layer", [("funnel", 2), ("canine", 1)])
def test_a_refused_model_is_refused_below_the_top(family_model, name, layer):
    """Below the top, Funnel's blocks after the first run on a pooled sequence (fewer vectors
    than tokens), and CANINE's deep layers on downsampled characters: refused too, with the
    reason. (Funnel's first block runs before any pooling: its layer 1 is a plain encoder's.)"""
    folder = family_model(name)
    with pytest.raises(ValueError, match=rf"model_type='{folder}' .*({READS_PADDING}|vectors to a row of)"):
        load_encoder(folder, layer)
    if name == "funnel":
        assert load_encoder(folder, 1).layer == 1


def test_the_weights_fingerprint_of_a_model_without_input_embeddings(family_model):
    """CANINE has no one table of input embeddings (transformers raises NotImplementedError from
    ``get_input_embeddings``): the fingerprint reads its first parameter instead, and still tells
    two trainings apart."""
    from transformers import AutoModel

    with quiet_transformers():
        model = AutoModel.from_pretrained(family_model("canine"))
    with pytest.raises(NotImplementedError):
        model.get_input_embeddings()
    before = weights_fingerprint(model)
    with torch.no_grad():
        next(model.parameters()).add_(0.01)
    assert weights_fingerprint(model) != before


@pytest.mark.parametrize("name", ["llama", "mistral", "qwen2", "gpt2"])
def test_a_decoder_s_layer_k_is_transformers_hidden_states_k(family_model, name):
    """A decoder whose final norm follows its last block: layer ``k`` below the top is
    transformers' ``output_hidden_states`` ``hidden_states[k]`` of the whole model (block ``k``'s
    output), the top layer its ``last_hidden_state`` (the final norm applied: also its
    ``hidden_states[-1]``), every layer of one forward pass too (moverscore's ``layers``). Before
    issue 60, layer ``k`` was the final norm of block ``k``'s output."""
    from transformers import AutoModel

    folder, spec = family_model(name), SPECS[name]
    text = "the council approved a new budget for schools"
    with quiet_transformers():
        model = AutoModel.from_pretrained(folder).eval()
    encoder = load_encoder(folder, spec.layer)
    ids = torch.tensor([encoder.tokenizer(text)["input_ids"]])
    with torch.no_grad():
        out = model(input_ids=ids, output_hidden_states=True)
    assert torch.equal(out.hidden_states[-1], out.last_hidden_state)
    clouds = encode_texts(encoder, [text], EncoderRequest(), layers=range(spec.layer + 1))
    torch.testing.assert_close(clouds.vectors, out.hidden_states[spec.layer][0], atol=1e-5, rtol=1e-5)
    for layer in range(spec.layer + 1):
        torch.testing.assert_close(clouds.layer_vectors[layer], out.hidden_states[layer][0], atol=1e-5, rtol=1e-5)
    top = encode_texts(load_encoder(folder, -1), [text], EncoderRequest()).vectors
    torch.testing.assert_close(top, out.last_hidden_state[0], atol=1e-5, rtol=1e-5)
    normed = model.norm if hasattr(model, "norm") else model.ln_f
    with torch.no_grad():
        assert not torch.allclose(normed(out.hidden_states[spec.layer][0]), clouds.vectors, atol=1e-3)


def test_a_folder_saved_in_float16_runs_in_float32_as_its_hashcode_says(family_model, tmp_path):
    """A folder saved in float16 (``torch_dtype`` float16 in its config): moverkit casts its
    weights to float32 at load, so a float32 call runs in float32 as the hashcode says, with the
    vectors of the float32 model of the same (float16-rounded) weights, and the same fingerprint
    of its weights as that model. Before issue 60 it ran in float16 on the CPU (scores up to
    4.8e-4 off, 4.2x the time)."""
    from transformers import AutoModel, AutoTokenizer

    source = family_model("bert-uncased")
    half = tmp_path / "bert-half"
    with quiet_transformers():
        AutoModel.from_pretrained(source).half().save_pretrained(half)
        AutoTokenizer.from_pretrained(source).save_pretrained(half)
        rounded = AutoModel.from_pretrained(half, dtype=torch.float32).eval()
    assert AutoModel.from_pretrained(half).dtype == torch.float16  # what transformers 5 loads by default
    assert weights_fingerprint(load_encoder(str(half)).model) == weights_fingerprint(rounded)  # the top: not cut
    encoder = load_encoder(str(half), 2)
    assert {p.dtype for p in encoder.model.parameters()} == {torch.float32}
    sentence = get_sentence_encoder(str(half))
    assert {p.dtype for p in sentence.model.parameters()} == {torch.float32}
    text = "the cat sat on the mat"
    ids = torch.tensor([encoder.tokenizer(text)["input_ids"]])
    with torch.no_grad():
        expected = rounded(input_ids=ids, output_hidden_states=True).hidden_states[2][0]
    vectors = encode_texts(encoder, [text], EncoderRequest()).vectors
    assert vectors.dtype == torch.float32
    torch.testing.assert_close(vectors, expected, atol=1e-5, rtol=1e-5)
    with quiet_transformers():
        out = functional.centered_bertscore([text], ["a cat sat"], model_type=str(half), centering="none")
    assert "dtype=float32" in out["hashcode"]
