"""A fine-tuned folder holds every block its encoder ran, with its weights, and its config says
how many: below the top layer of a model with a final norm after its last block (Llama, GPT-2) the
encoder runs one block more than the layer (the input of that block is the layer), and a config
still saying the base model's count made transformers draw the missing blocks at random on load."""

from __future__ import annotations

import pytest
import torch

from moverkit._core import encode_texts, get_encoder
from moverkit._core.encoding.request import EncoderRequest
from moverkit.finetune import trainable_encoder

TEXTS = ["the cat sat on the mat", "stocks fell sharply on monday", "a dog barked"]


@pytest.mark.parametrize(("family", "blocks"), [("llama", 2), ("gpt2", 2), ("bert-uncased", 1)])
def test_a_fine_tuned_folder_saves_every_block_it_runs(family_model, tmp_path, family, blocks):
    from transformers import AutoModel

    folder = family_model(family)
    encoder = trainable_encoder(folder, num_layers=1, device="cpu")
    assert (encoder.blocks, encoder.model.config.num_hidden_layers) == (blocks, blocks)
    saved = tmp_path / "saved"
    encoder.model.save_pretrained(saved)
    encoder.tokenizer.save_pretrained(saved)
    _, loading = AutoModel.from_pretrained(saved, output_loading_info=True)
    assert not loading["missing_keys"]  # no block drawn at random
    read_at = {} if blocks == 1 else {"num_layers": 1}  # as the card says: the last layer, or num_layers=1
    base = encode_texts(get_encoder(folder, 1, "cpu"), TEXTS, EncoderRequest())
    again = encode_texts(get_encoder(str(saved), read_at.get("num_layers"), "cpu"), TEXTS, EncoderRequest())
    assert again.token_ids == base.token_ids
    torch.testing.assert_close(again.vectors, base.vectors, rtol=1e-5, atol=1e-6)
