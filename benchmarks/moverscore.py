"""Bench rows of moverscore: MoverScore v2, v1 and MoverScore-b, and the race against the authors'
release itself (``moverscore_v2.word_mover_score``, from a snapshot the user points to)."""

from __future__ import annotations

import math
import multiprocessing
import string
from collections import Counter, defaultdict

import numpy as np
import ot
import torch
from transformers import AutoModel, AutoTokenizer

from benchmarks import CorrelationRow
from benchmarks._shared import PeerUnavailable, metric_run, over_the_encoder
from moverkit._core import embedded_model_path

CORRELATION_ROWS = [
    CorrelationRow("MoverScore v2", "moverscore", "moverscore", {"version": "v2"}),
    CorrelationRow("MoverScore v1", "moverscore", "moverscore", {"version": "v1"}),
    CorrelationRow(
        "MoverScore-b (v2, batch centering)", "moverscore", "moverscore", {"version": "v2", "centering": "batch"}
    ),
]

# --- the release itself: the authors' moverscore_v2.py, loaded at run time -------------------
#
# A peer is the peer's own code run here. The release is not a package: the user points
# MOVERSCORE_V2_PATH at moverscore_v2.py in a snapshot of github.com/AIPHES/emnlp19-moverscore
# (nothing of it is copied into moverkit). Three shims are applied to its text at load time, each
# checked to apply exactly once: the hard-coded ``device = 'cuda'`` becomes this machine's device,
# ``np.float`` (removed in NumPy 1.24) becomes ``np.float64``, and its model variable is set by its
# own MOVERSCORE_MODEL environment variable to the embedded model. It is then run as its README
# says: its own ``get_idf_dict`` on references and hypotheses, ``word_mover_score`` with
# ``stop_words=[]``, ``n_gram=1``, ``remove_subwords=True`` and ``batch_size=64``.

RELEASE_ENV = "MOVERSCORE_V2_PATH"
"""Environment variable: the path of ``moverscore_v2.py`` in a snapshot of the authors' repository."""

_RELEASE_SHIMS = [
    ("device = 'cuda'\n", "device = {device!r}\n"),
    ("dtype=np.float)", "dtype=np.float64)"),
]


def load_release(path: str | None = None, device: str = "cpu"):
    """The authors' ``moverscore_v2`` module from ``path`` (default: ``$MOVERSCORE_V2_PATH``),
    shimmed as described above; :class:`~benchmarks._shared.PeerUnavailable` when absent.
    It needs ``pyemd`` (``pip install pyemd``)."""
    import os
    import sys
    import types

    path = path or os.environ.get(RELEASE_ENV)
    if not path or not os.path.isfile(path):
        raise PeerUnavailable(
            f"the release's moverscore_v2.py is needed: set {RELEASE_ENV} to its path in a snapshot of "
            "github.com/AIPHES/emnlp19-moverscore (and pip install pyemd)"
        )
    with open(path, encoding="utf-8") as f:
        source = f.read()
    for old, new in _RELEASE_SHIMS:
        count = source.count(old)
        if (old.startswith("device") and count != 1) or count == 0:
            raise PeerUnavailable(f"{path} is not the expected moverscore_v2.py: the shim for {old!r} does not apply")
        source = source.replace(old, new.format(device=device))
    import pyemd  # noqa: F401  (the release imports it; fail here with its name if absent)

    module = types.ModuleType("moverscore_v2")
    module.__file__ = path
    sys.modules["moverscore_v2"] = module  # its get_idf_dict pickles its own function for a Pool
    previous = os.environ.get("MOVERSCORE_MODEL")
    os.environ["MOVERSCORE_MODEL"] = embedded_model_path()
    try:
        exec(compile(source, path, "exec"), module.__dict__)
    finally:
        if previous is None:
            del os.environ["MOVERSCORE_MODEL"]
        else:
            os.environ["MOVERSCORE_MODEL"] = previous
    return module


def release_scores(release, predictions: list[str], references: list[str]) -> list[float]:
    """MoverScore v2 by the release's own code, as its README runs it."""
    idf_ref = release.get_idf_dict(references)
    idf_hyp = release.get_idf_dict(predictions)
    return release.word_mover_score(
        references, predictions, idf_ref, idf_hyp, stop_words=[], n_gram=1, remove_subwords=True,
        batch_size=64, device="cpu",
    )  # fmt: skip


def release_itself(predictions, references):
    """The authors' moverscore_v2.py (see :func:`load_release`), warm after one small call."""
    release = load_release()
    release_scores(release, predictions[:2], references[:2])
    return lambda: release_scores(release, predictions, references)


# --- the release's way of running, re-created (written here, not copied) ---------------------
#
# A second row only, labelled as what it is: not the release's code, but a re-creation of how it
# runs (kept to separate what the release's way of running costs from what its code costs).
#
# moverscore_v2.py (github.com/AIPHES/emnlp19-moverscore) fits each IDF dict over a
# multiprocessing pool of 4 workers, then walks the pairs 256 at a time: it encodes the 256
# references and the 256 hypotheses as they come (no deduplication, no sorting by length, one
# forward pass each, the model loaded to return every hidden state and attention map, as the
# release loads it), zeroes subword and punctuation tokens, L2-normalises, computes float32
# distances over the concatenated [reference; hypothesis] tokens, and solves one EMD per pair on
# that (len_ref + len_hyp)-square problem, zero masses included, in a Python loop.

_PEER_TOKENIZER = None  # set before the pool forks, read by the workers
_PEER_BATCH = 256
_PEER_WORKERS = 4


def _token_id_set(text: str) -> set[int]:
    return set(_PEER_TOKENIZER(text, truncation=True)["input_ids"])


def _peer_idf(texts: list[str]) -> defaultdict:
    """log((N+1)/(df+1)) per token id (unseen: log(N+1)), document frequencies counted over a
    process pool."""
    with multiprocessing.get_context("fork").Pool(_PEER_WORKERS) as pool:
        df = Counter(token for ids in pool.map(_token_id_set, texts) for token in ids)
    n = len(texts)
    idf = defaultdict(lambda: math.log(n + 1))
    idf.update({token: math.log((n + 1) / (count + 1)) for token, count in df.items()})
    return idf


def _peer_encode(model, texts: list[str], idf: defaultdict):
    """As the release: each text tokenized on its own into [CLS] tokens [SEP], ids and IDF weights
    padded in Python, one forward pass over all ``texts`` padded to the longest with the model
    returning every hidden state and attention map (its load-time settings), the last layer kept;
    subword and punctuation tokens zeroed in vectors and weights."""
    limit = _PEER_TOKENIZER.model_max_length - 2
    tokens = [["[CLS]"] + _PEER_TOKENIZER.tokenize(text)[:limit] + ["[SEP]"] for text in texts]
    ids = [_PEER_TOKENIZER.convert_tokens_to_ids(row) for row in tokens]
    width = max(len(row) for row in ids)
    input_ids = torch.zeros(len(ids), width, dtype=torch.long)
    mask = torch.zeros(len(ids), width, dtype=torch.long)
    weights = torch.zeros(len(ids), width)
    for i, row in enumerate(ids):
        input_ids[i, : len(row)] = torch.tensor(row)
        mask[i, : len(row)] = 1
        weights[i, : len(row)] = torch.tensor([idf[t] for t in row])
    with torch.no_grad():
        vectors = torch.stack(model(input_ids, attention_mask=mask).hidden_states)[-1]
    punctuation = set(string.punctuation)
    for i, row in enumerate(tokens):
        drop = [k for k, t in enumerate(row) if "##" in t or t in punctuation]
        vectors[i, drop] = 0
        weights[i, drop] = 0
    return vectors, weights


def _peer_scores(model, predictions: list[str], references: list[str]) -> list[float]:
    idf_ref, idf_hyp = _peer_idf(references), _peer_idf(predictions)
    scores = []
    for start in range(0, len(references), _PEER_BATCH):
        ref_vectors, ref_weights = _peer_encode(model, references[start : start + _PEER_BATCH], idf_ref)
        hyp_vectors, hyp_weights = _peer_encode(model, predictions[start : start + _PEER_BATCH], idf_hyp)
        raw = torch.cat([ref_vectors, hyp_vectors], 1)
        raw = raw / (raw.norm(dim=-1, keepdim=True) + 1e-30)
        sq = raw.pow(2).sum(-1)
        dist = (sq[:, :, None] + sq[:, None, :] - 2 * raw @ raw.transpose(1, 2)).clamp_min(1e-30).sqrt()
        dist = dist.double().numpy()
        n_ref = ref_weights.shape[1]
        for row in range(len(ref_weights)):
            a, b = np.zeros(raw.shape[1]), np.zeros(raw.shape[1])
            a[:n_ref], b[n_ref:] = ref_weights[row].numpy(), hyp_weights[row].numpy()
            a, b = a / (a.sum() + 1e-30), b / (b.sum() + 1e-30)
            flow = ot.emd(a, b, dist[row])
            scores.append(1.0 / (1.0 + float((flow * dist[row]).sum())))
    return scores


def release_way(predictions, references):
    """MoverScore v2 run the way the release runs it, on the embedded model (see above)."""
    global _PEER_TOKENIZER
    path = embedded_model_path()
    _PEER_TOKENIZER = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path, output_hidden_states=True, output_attentions=True).eval()
    _peer_scores(model, predictions[:2], references[:2])
    return lambda: _peer_scores(model, predictions, references)


SPEED_SUITES = [
    over_the_encoder(
        "moverscore",
        "moverscore vs the release (moverscore_v2.py)",
        {
            "moverscore (v2)": metric_run("moverscore", version="v2"),
            "release moverscore_v2.py": release_itself,
            "re-creation of the release's way (not its code)": release_way,
        },
        [
            ("release moverscore_v2.py", "moverscore (v2)", ">= 3"),
            ("re-creation of the release's way (not its code)", "moverscore (v2)", None),
        ],
        "moverscore (v2)",
    )
]
