"""Sentence vectors: sentence-transformers models loaded once, and run.

The sentence-level metric (sBERTScore) compares texts sentence by sentence; the texts are split
by :mod:`~moverkit._core.encoding.splitting`. This is where a
``sentence_transformers.SentenceTransformer`` is loaded through the model registry (once per
(model, device) for the process, freed by ``moverkit.release()``) and run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from tqdm.auto import tqdm

from moverkit._core.base.hardware import resolve_device
from moverkit._core.encoding.architecture import (
    PROBE_TOKENS,
    config_settings,
    position_limit,
    probe_rows,
    square_mask,
    takes_square_mask,
)
from moverkit._core.encoding.clouds import TokenClouds
from moverkit._core.encoding.encoder import all_finite, encode_batches, forward_region, non_finite_error
from moverkit._core.encoding.models import cached_model, check_padding
from moverkit._core.encoding.request import EncoderRequest, local_files_only, resolve_model
from moverkit._core.encoding.tokens import Truncations

SENTENCE_LAYER = -1
"""The layer tag of sentence vectors, in hashcodes (``_L-1``) and in centering statistics: the
model's pooled sentence embedding (what ``SentenceTransformer.encode`` returns), not a transformer
block. Token-level statistics always carry a block index >= 0, so the two never mix."""


@dataclass(eq=False)
class SentenceEncoder:
    """A ``SentenceTransformer`` on ``device``; get one with :func:`get_sentence_encoder`, and one
    that encodes with another prompt with :meth:`with_prompt`. ``prompt``: the text put before
    every sentence (resolved as ``SentenceTransformer.encode`` resolves it; ``None``: none), at
    first the folder's default prompt. ``dim``: the width of its sentence vectors, measured on its
    own output when it is loaded (after ``truncate_dim``)."""

    name: str
    path: str
    device: torch.device
    model: object  # sentence_transformers.SentenceTransformer
    layer: int = SENTENCE_LAYER
    square_mask: bool = False  # its transformer takes the (batch, 1, length, length) mask (takes_square_mask)
    prompt: str | None = None
    dim: int = 0

    def embed(self, features: dict) -> torch.Tensor:
        """The sentence embeddings of a batch the model's ``preprocess`` made (on the device):
        its modules in turn, as its own forward runs them, cut at its ``truncate_dim`` as
        ``encode`` cuts them. Its transformer is given
        :func:`~moverkit._core.encoding.architecture.square_mask`'s mask where it takes it (an
        argument of the module's call, which overrides the features' mask for the transformer
        alone: pooling reads the (batch, length) mask)."""
        from sentence_transformers.util import truncate_embeddings

        if self.square_mask:
            modules = list(self.model)
            features = modules[0](features, attention_mask=square_mask(features["attention_mask"]))
            for module in modules[1:]:
                features = module(features)
        else:
            features = self.model(features)
        return truncate_embeddings(features["sentence_embedding"], self.model.truncate_dim)

    def with_prompt(self, prompt_name: str | None = None, prompt: str | None = None) -> SentenceEncoder:
        """This encoder with the prompt that ``SentenceTransformer.encode(prompt_name=...,
        prompt=...)`` takes: ``prompt_name`` one of the model's prompts (its
        ``config_sentence_transformers.json``), ``prompt`` a literal text; neither keeps the folder's
        default. A ``ValueError`` naming the argument for a prompt name the model does not have,
        for both given (``encode`` would warn and drop ``prompt_name``), or for a value that is
        not a string. A prompt other than the folder's default names another encoder
        (``<name>+prompt@<digest of the prompt>``). The model is shared, not copied."""
        for argument, value in (("prompt_name", prompt_name), ("prompt", prompt)):
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{argument} must be a string or None, not {type(value).__name__}")
        if prompt_name is not None and prompt is not None:
            raise ValueError("give prompt_name (one of the model's prompts) or prompt (a text), not both")
        if prompt_name is not None:
            prompts = self.model.prompts
            if prompt_name not in prompts:
                raise ValueError(
                    f"prompt_name={prompt_name!r} is not a prompt of {self.name}: its prompts are {sorted(prompts)}"
                )
            prompt = prompts[prompt_name]
        if prompt is None or (prompt or None) == self.prompt:
            return self
        # Another prompt is another vector: its own name, so that nothing made for the folder's
        # default (a shipped or fitted mean, a baseline, a cached vector) is taken for it.
        tag = hashlib.sha256((prompt or "").encode()).hexdigest()[:10]
        return dataclasses.replace(self, prompt=prompt or None, name=f"{self.name}+prompt@{tag}")


def _default_prompt(model) -> str | None:
    """The prompt ``encode`` puts before a sentence when given none: the model's
    ``default_prompt_name``'s, if it names one; ``None`` for none (or an empty one)."""
    name = model.default_prompt_name
    return (model.prompts.get(name) or None) if name is not None else None


@dataclass(eq=False)
class SentenceClouds(TokenClouds):
    """The sentence vectors of texts laid out as token clouds are (text ``i`` owns rows
    ``offsets[i]:offsets[i + 1]``, one per sentence, none special, no token ids and no tokenizer),
    so that the same padding and matching score them; ``units[i]`` are text ``i``'s sentences,
    what its alignment names."""

    units: list[list[str]] = field(default_factory=list)

    def tokens(self, i: int) -> list[str]:
        """The sentences of text ``i``."""
        return self.units[i]


def get_sentence_encoder(
    model_type: str | os.PathLike | None = None, device: str | int | torch.device | None = None
) -> SentenceEncoder:
    """The sentence-transformers model ``model_type`` (a Hugging Face id, from the local cache
    when offline, or a local folder; ``None`` is the embedded all-MiniLM-L6-v2), loaded once per
    (model, device) through the model registry. A plain transformers model (no
    sentence-transformers config) gets sentence-transformers' default, mean pooling."""
    return _shared_sentence_encoder(model_type, resolve_device(device))


def _shared_sentence_encoder(model_type, device: torch.device) -> SentenceEncoder:
    name, path = resolve_model(model_type)
    return cached_model(("sentence", path, str(device)), lambda: _load_sentence_encoder(name, path, device))


def sentence_encoder_for(request: EncoderRequest) -> SentenceEncoder:
    """The process-wide sentence encoder of ``request`` (:func:`get_sentence_encoder`; its
    ``num_layers``, ``max_length`` and ``long_texts`` do not apply), on the device the request
    resolved and checked when it was made."""
    return _shared_sentence_encoder(request.model_type, request.device)


def _load_sentence_encoder(name: str, path: str, device: torch.device) -> SentenceEncoder:
    """The sentence encoder of ``path``, loaded as the token encoder is
    (:func:`~moverkit._core.encoding.models.load_encoder`): float32 weights whatever the folder
    holds, the config's :func:`~moverkit._core.encoding.architecture.load_settings`, the folder's
    default prompt, and refused with a ``ValueError`` where its vectors could not be the model's:
    weights its token vectors read that its files did not hold (:func:`_missing_weights`), or
    token or sentence vectors that move when a text is padded
    (:func:`~moverkit._core.encoding.models.check_padding`, the token metrics' probe)."""
    from sentence_transformers import SentenceTransformer

    local_only = local_files_only(path)
    try:
        model = SentenceTransformer(
            path,
            device=str(device),
            local_files_only=local_only,
            model_kwargs={"dtype": torch.float32},
            config_kwargs=config_settings(path, local_only),
        )
    except (OSError, ValueError) as err:
        where = "a local folder" if os.path.isdir(path) else "a Hugging Face id (offline: from the local cache)"
        raise ValueError(f"model_type={path!r} ({where}) could not be loaded: {err}") from err
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is not None:
        tokenizer.split_special_tokens = True  # user text is text: "[CLS]" is not the [CLS] id
        if getattr(tokenizer, "pad_token", False) is None and getattr(tokenizer, "eos_token", None) is not None:
            # A decoder saved without a pad token (GPT-2): encode() cannot batch it at all. Padding
            # is masked, and a model whose vectors padding moves is refused below, so any id pads.
            tokenizer.pad_token = tokenizer.eos_token
    encoder = SentenceEncoder(name=name, path=path, device=device, model=model.eval(), prompt=_default_prompt(model))
    transformer = getattr(model[0], "auto_model", None) if len(model) else None
    if isinstance(transformer, torch.nn.Module):
        _check_transformer(encoder, transformer)
    with forward_region("float32", device):
        encoder.dim = int(encoder.embed(_on(model.preprocess(["a"], prompt=encoder.prompt), device)).shape[-1])
    return encoder


def _check_transformer(encoder: SentenceEncoder, transformer: torch.nn.Module) -> None:
    """The load-time checks of a model whose first module runs a transformers model
    (``transformer``), and its limit and mask: its ``max_seq_length`` capped by its position
    table, its weights (:func:`_missing_weights`), its token vectors and its sentence vectors
    unmoved by padding (:func:`~moverkit._core.encoding.models.check_padding`), and whether it
    takes the square mask. The probes pad their rows on the side the model's tokenizer pads
    (:func:`_padded_left`), as its ``preprocess`` pads the batches."""
    model, device = encoder.model, encoder.device
    first = model[0]
    described = f"model_type={encoder.path!r} ({encoder.name}"
    # sentence-transformers reads max_seq_length from its config or the tokenizer, past the
    # position table of a model whose positions start after a padding index (MPNet: 66 of 64).
    positions = position_limit(transformer, transformer.config)
    if None not in (positions, model.max_seq_length) and model.max_seq_length > positions:
        model.max_seq_length = positions
    limit = model.max_seq_length or PROBE_TOKENS
    missing = _missing_weights(first, device, limit)
    if missing:
        shown = ", ".join(missing[:MISSING_SHOWN]) + (
            f", ... ({len(missing)} in all)" if len(missing) > MISSING_SHOWN else ""
        )
        raise ValueError(
            f"{described}): sentence-transformers loaded it as {type(transformer).__name__} without weights its "
            f"vectors read, which its files do not hold under that model's names: {shown}. They were initialised at "
            "random (as an encoder-decoder checkpoint such as Marian or M2M100/NLLB loads), so its scores would be "
            "noise; moverkit refuses it"
        )
    pad_id = getattr(model.tokenizer, "pad_token_id", None) or 0

    def tokens(ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return first({"input_ids": ids, "attention_mask": mask})["token_embeddings"]

    def sentences(ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return encoder.embed({"input_ids": ids, "attention_mask": mask})

    left = getattr(model.tokenizer, "padding_side", "right") == "left"
    with forward_region("float32", device):
        for vectors, run in (("token vectors", tokens), ("sentence vectors", sentences)):
            run = _padded_left(run) if left else run
            check_padding(f"{described}, {vectors})", transformer, run, limit, device, pad_id)
    encoder.square_mask = takes_square_mask(transformer, device, limit) and _module_takes_mask(model, device, limit)


def _padded_left(run: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> Callable:
    """``run`` given the padding of each row on its left, as a tokenizer with
    ``padding_side="left"`` pads the model's batches, and its token vectors given back in the
    order of the rows it was called with (real tokens first): what the padding probe of
    :func:`~moverkit._core.encoding.models.check_padding`, whose rows are padded on the right,
    must see of a model whose batches are padded on the left (BERT's absolute positions move
    with it)."""

    def left(ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        length = ids.shape[1]
        steps = torch.arange(length, device=ids.device)
        pads = (mask == 0).sum(1, keepdim=True)
        vectors = run(ids.gather(1, (steps - pads) % length), mask.gather(1, (steps - pads) % length))
        if vectors.dim() == 2:  # one vector a row
            return vectors
        back = ((steps + pads) % length)[..., None].expand(-1, -1, vectors.shape[-1])
        return vectors.gather(1, back)

    return left


MISSING_SHOWN = 12
"""The missing weights a refusal names (:func:`_check_transformer`); it counts the rest."""


def _missing_weights(first, device: torch.device, limit: int) -> list[str]:
    """The parameters of the first module's transformers model that were not in the weights
    files it was loaded from, and that its token vectors read: sentence-transformers 6 loads a
    Marian or M2M100 checkpoint as the bare encoder class, whose names (``layers.0...``) are not
    the checkpoint's (``model.encoder.layers.0...``), so every encoder weight is initialised at
    random, with a log line as the only sign.

    transformers' own record of the load says which they are: it marks each tensor it loads
    from the files (or ties to one) ``_is_hf_initialized`` before it initialises the others at
    random, the same record its load report lists as MISSING; a model without that mark on
    itself was not loaded by a transformers that keeps it, and is not judged. A missing weight
    that the token vectors do not read (the pooler of a masked-LM checkpoint loaded as the bare
    model) is harmless and not counted: what the vectors read is what gets a gradient from them on
    the probe rows of :func:`~moverkit._core.encoding.architecture.probe_rows`."""
    model = first.auto_model
    if not getattr(model, "_is_hf_initialized", False):
        return []
    missing = {n: p for n, p in model.named_parameters() if not getattr(p, "_is_hf_initialized", False)}
    if not missing:
        return []
    ids, mask = probe_rows(limit, device)
    with torch.enable_grad():
        vectors = first({"input_ids": ids, "attention_mask": mask})["token_embeddings"]
        learnable = [n for n, p in missing.items() if p.requires_grad] if vectors.requires_grad else []
        grads = (
            torch.autograd.grad(vectors.sum(), [missing[n] for n in learnable], allow_unused=True) if learnable else ()
        )
    unread = {n for n, g in zip(learnable, grads) if g is None}
    return [n for n in missing if n not in unread]


def _on(features: dict, device: torch.device) -> dict:
    """``features`` with their tensors on ``device`` (what ``preprocess`` gives is on the host)."""
    return {k: v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v for k, v in features.items()}


def _module_takes_mask(model, device: torch.device, limit: int) -> bool:
    """Whether the model's first module, called with ``attention_mask=`` beside its features,
    passes that mask to its transformer (sentence-transformers >= 5 lets a call's arguments
    override the features), bit for bit as its own call: probed on the rows of
    :func:`~moverkit._core.encoding.architecture.probe_rows`."""
    ids, mask = probe_rows(limit, device)
    try:
        with torch.no_grad():
            plain = model[0]({"input_ids": ids, "attention_mask": mask})["token_embeddings"]
            square = model[0]({"input_ids": ids, "attention_mask": mask}, attention_mask=square_mask(mask))
    except Exception:  # any refusal of the argument means: no square mask for this model
        return False
    kept = mask.bool()
    return bool(torch.equal(plain[kept], square["token_embeddings"][kept]))


def sentence_truncations(encoder: SentenceEncoder, truncations: Truncations | None = None) -> Truncations:
    """``truncations`` (a call's tally, :class:`~moverkit._core.encoding.tokens.Truncations`; a new
    one if not given) made to count sentences cut at ``encoder``'s ``max_seq_length``: what
    :class:`~moverkit._core.encoding.tokens.CallTokenizer.of` does for a token-level call."""
    truncations = Truncations() if truncations is None else truncations
    truncations.unit, truncations.limit = "sentences", encoder.model.max_seq_length or 0
    truncations.reason = f"and were truncated (the max_seq_length of {encoder.name})."
    return truncations


def encode_sentences(
    encoder: SentenceEncoder, sentences: Sequence[str], request: EncoderRequest, truncations: Truncations
) -> torch.Tensor:
    """Sentence embeddings of ``sentences``, shape (n, ``encoder.dim``), float32 on the encoder's
    device, as ``SentenceTransformer.encode`` gives them with the encoder's ``prompt``: made by the
    model's own machinery, its ``preprocess`` (the prompt, the chat template of a model that has
    one, the prompt's length that pooling with ``include_prompt=False`` leaves out, truncation at
    ``max_seq_length``), its modules and its ``truncate_dim`` (:meth:`SentenceEncoder.embed`); not
    yet centered or re-normalized. Sentences longer than ``max_seq_length`` (their prompt
    included) are added to ``truncations`` (:func:`sentence_truncations`), whose owner gives the
    one warning. ``request`` (:class:`~moverkit._core.encoding.request.EncoderRequest`) gives the
    batch size, the progress bar and ``dtype``, the precision of the forward pass; the embeddings
    are float32 whatever it is.

    The sentences are sorted by token length and cut into the shared batches
    (:func:`~moverkit._core.encoding.encoder.encode_batches`), each preprocessed by the model (the
    Rust tokenizer's batch call, padded to its longest row) and run in one forward region
    (:func:`~moverkit._core.encoding.encoder.forward_region`: no cast of a weight per batch); the
    batches' finiteness is read once, after the last. Only a batch's padding differs from
    ``encode``'s batches, which moves no vector beyond rounding: a model whose vectors padding
    moves is refused at load."""
    vectors = torch.zeros(len(sentences), encoder.dim, dtype=torch.float32, device=encoder.device)
    if not sentences:
        return vectors
    lengths = _token_lengths(encoder, sentences, truncations)
    limit = encoder.model.max_seq_length or max(lengths)  # caps the padded widths on a CUDA device
    finite = torch.ones((), dtype=torch.bool, device=encoder.device)
    batches = encode_batches(lengths, request.batch_size, encoder.device, limit, request.dtype)
    bar = tqdm(total=len(sentences), desc="encoding sentences", unit="sentence", disable=not request.verbose)
    with bar, forward_region(request.dtype, encoder.device):
        for batch, _ in batches:
            features = encoder.model.preprocess([sentences[i] for i in batch], prompt=encoder.prompt)
            out = encoder.embed(_on(features, encoder.device))
            finite &= all_finite(out)
            vectors[torch.tensor(batch, device=encoder.device)] = out.float()
            bar.update(len(batch))
    if not bool(finite):
        raise non_finite_error(f"model_type={encoder.path!r} ({encoder.name}, sentence vectors)", request.dtype)
    return vectors


UNCUT = {"text": {"truncation": False, "padding": False, "verbose": False}, "common": {"return_tensors": None}}
"""The processing settings of a ``preprocess`` that gives each sentence's whole token ids: no
truncation, no padding, lists (and no log line from the tokenizer on a long one: moverkit warns)."""


def _token_lengths(encoder: SentenceEncoder, sentences: Sequence[str], truncations: Truncations) -> list[int]:
    """The tokens the model's ``preprocess`` gives each sentence (the prompt, a chat template and
    special tokens included), capped at ``max_seq_length``, those over it added to
    ``truncations``: one tokenizer call over all the sentences, uncut (:data:`UNCUT`). Character
    counts for a model whose first module is not a sentence-transformers ``Transformer`` (a
    ``StaticEmbedding`` has no limit): an order for the batches, no more."""
    from sentence_transformers.base.modules import Transformer

    if not isinstance(encoder.model[0], Transformer):
        return [len(s) for s in sentences]
    ids = encoder.model.preprocess(list(sentences), prompt=encoder.prompt, processing_kwargs=UNCUT)["input_ids"]
    lengths = [len(row) for row in ids]
    limit = encoder.model.max_seq_length
    if not limit:
        return lengths
    truncations.add(s for s, n in zip(sentences, lengths) if n > limit)
    return [min(n, limit) for n in lengths]
