r"""Centering of contextual vectors (Chen et al., 2020, Section 5): the one implementation, for
token clouds and for sentence vectors.

Contextual vectors are anisotropic: two random tokens (or sentences) of BERT-like models have a
high cosine similarity. Subtracting a mean before taking cosines fixes that. The vectors are rows
:math:`w_{i,j}` (row :math:`j` of text :math:`i`, :math:`N_i` rows counted for means,
:math:`D` dimensions); a token cloud gives each text its tokens, sentence vectors give each
"text" one row (one sentence):

.. math::

    \text{dim:}\quad      v_{i,j} = w_{i,j} - \tfrac{1}{D} \textstyle\sum_{l} w_{i,j}^{(l)} \\
    \text{sentence:}\quad v_{i,j} = w_{i,j} - \tfrac{1}{N_i} \textstyle\sum_{k} w_{i,k} \\
    \text{batch / corpus:}\quad v_{i,j} = w_{i,j} - \mu,\qquad
        \mu = \frac{\sum_i c_i \sum_k w_{i,k}}{\sum_i c_i N_i}

then every vector is scaled to unit length (a vector that centering makes zero stays zero, so it
has similarity 0 with everything instead of NaN). Means run over the rows that count (for token
clouds the non-special tokens; special tokens are shifted by the same mean). For ``batch``,
:math:`\mu` runs over every text of the compute call, each counted as often as it occurs
(:math:`c_i`); for ``corpus`` it was fitted once (:func:`fit_centering`) and stored, so a pair gets
the same score whatever else is in the call. ``sentence`` does not apply to sentence vectors: the
mean of one vector is the vector itself, and every vector would be zero (Chen et al., 2020,
Section 6.1, leave it out for Sentence-BERT for this reason).

References
----------
.. [1] X. Chen, N. Ding, T. Levinboim, R. Soricut. Improving Text Generation Evaluation with Batch
   Centering and Tempered Word Mover Distance. EMNLP Eval4NLP workshop, 2020.
"""

from __future__ import annotations

import hashlib
import io
import math
import numbers
import os
import stat
import zipfile
import zlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
import torch
from numpy.lib import format as npy_format

from . import checks
from .encoder import TokenClouds, encode, get_encoder
from .inputs import check_texts
from .request import EncoderRequest
from .sentences import SENTENCE_LAYER, encode_sentences, get_sentence_encoder, split_sentences
from .user_warnings import warn_user

CENTERING_MODES = ("none", "dim", "sentence", "batch", "corpus")
"""The centering modes of token vectors."""

SENTENCE_CENTERING_MODES = ("none", "dim", "batch", "corpus")
"""The centering modes of sentence vectors: :data:`CENTERING_MODES` less ``sentence``."""

LEVELS = ("token", "sentence")

MIN_BATCH_TEXTS = 10
"""``batch`` centering over fewer distinct texts (token clouds: texts with a scored token; sentence
vectors: distinct sentences) than this warns once per call (:func:`warn_small_batch`): the mean
then holds too much of each text's own vector, and a single pair can score near -1. Measured with
centered_bertscore (twmd) on 120 WMT17 pairs against batch centering over all 120: mean absolute
change of the score 0.110 (0.132) for one pair (2 texts), 0.038 (0.046) for 4 texts, 0.015 (0.018)
for 10, 0.008 (0.010) for 20; the standard deviation of the scores across pairs is 0.127 (0.162).
From 10 texts on, the batch moves a score by about a tenth of the differences between pairs or less."""

MIN_FIT_TEXTS = MIN_BATCH_TEXTS
""":func:`fit_centering` over fewer distinct units than this (token level: distinct non-blank
texts; sentence level: distinct sentences) warns. A ``corpus`` mean fitted on a few texts is what
``batch`` centering subtracts in a call of as few texts, fixed once for all: the measurements of
:data:`MIN_BATCH_TEXTS` hold for it (a mean of 1 text, or of 3 identical ones, moves the scores
by about as much as they differ between pairs; one of 10 distinct texts by about a tenth)."""


@dataclass(frozen=True, eq=False)
class CenteringStats:
    """A mean vector fitted on a corpus for one (model, layer): the ``corpus`` statistic.

    Token vectors carry their layer (a block index >= 0); sentence vectors carry
    ``layer = -1`` (the model's pooled sentence embedding) and count sentences in ``n_tokens``,
    so that a statistic of one kind is refused for the other.
    """

    mean: np.ndarray  # (dim,), float64
    model: str
    layer: int
    n_texts: int
    n_tokens: int

    def __post_init__(self):
        # Checked however it was made (fit, loaded, or built by hand): a bad mean would turn every
        # score of a call into NaN, 0 or 1 without a word.
        fields = {"model": self.model, "layer": self.layer, "n_texts": self.n_texts, "n_tokens": self.n_tokens}
        object.__setattr__(self, "mean", check_stats_fields("centering_stats", mean=self.mean, **fields))

    @property
    def digest(self) -> str:
        """Short fingerprint of the statistic, named in hashcodes."""
        h = hashlib.sha1(np.ascontiguousarray(self.mean, dtype=np.float64).tobytes())
        h.update(f"{self.model}|{self.layer}".encode())
        return h.hexdigest()[:10]

    def save(self, path: str | os.PathLike | BinaryIO) -> None:
        """Write to ``path`` (a NumPy ``.npz`` archive; the name is used as given) whole or not at
        all (:func:`moverkit.lines.write_atomic`), or into a binary file object."""
        if isinstance(path, (str, os.PathLike)):
            from ..lines import write_atomic

            archive = io.BytesIO()
            self.save(archive)
            write_atomic(Path(path), archive.getvalue())
            return
        np.savez(
            path,
            mean=self.mean,
            model=np.array(self.model),
            layer=np.array(self.layer),
            n_texts=np.array(self.n_texts),
            n_tokens=np.array(self.n_tokens),
        )

    @classmethod
    def load(cls, path: str | os.PathLike) -> CenteringStats:
        """Read a statistic written by :meth:`save`. A file that is not one (empty, truncated,
        another kind of file, a field missing, extra or of the wrong kind) or whose mean is
        inadmissible (:func:`check_stats_fields`) is a ``ValueError`` naming ``centering_stats`` and
        the file; a file that does not open keeps its ``OSError`` (``FileNotFoundError``, ...).

        A statistic may come from a stranger (an upload to a demo page), so the file is read as
        hostile (:func:`read_stats_file`): at most :data:`MAX_STATS_FILE_BYTES` on disk, only the
        five members :meth:`save` writes, each member's declared size and ``.npy`` header checked
        against what its field can be (:data:`MAX_STATS_DIM`, :data:`MAX_MODEL_CHARS`) before a
        byte of its data is decompressed. ``numpy.load`` would decompress any member in full: a
        file of 0.8 MB whose mean declares 10^8 zeros took 1.6 GB to load (issue 21).
        A ``path`` that is not a path (``None``, a number) is a ``TypeError`` naming ``centering_stats``."""
        if not isinstance(path, (str, bytes, os.PathLike)):
            raise TypeError(
                "centering_stats must be the path (a str or os.PathLike) of a statistic saved by "
                f"CenteringStats.save or 'moverkit fit-centering', got {path!r}"
            )
        where = f"centering_stats file {os.fspath(path)!r}"
        arrays = read_stats_file(path, where)
        fields = {key: _scalar(where, key, arrays[key]) for key in _FIELDS[1:]}
        fields["mean"] = check_stats_fields(where, mean=arrays["mean"], **fields)
        return cls(**fields)


_FIELDS = ("mean", "model", "layer", "n_texts", "n_tokens")

MAX_STATS_DIM = 65_536
"""The largest dimension of a mean that :meth:`CenteringStats.load` reads. Hidden sizes reach 768
(BERT-base, the embedded model's 384), 1,024 (large encoders), 4,096 (7B decoders) and 16,384
(the largest open decoders); four times the last is room to spare, and bounds what a file can make
``load`` allocate to 512 KiB of float64."""

MAX_MODEL_CHARS = 4_096
"""The longest model name a statistic file may hold: a Hub id, or a local path (4,096 bytes is
Linux's PATH_MAX)."""

_MAX_NPY_HEADER = 1_024
"""The longest ``.npy`` header read (numpy writes 128 bytes for the fields of a statistic)."""

_MEMBER_BYTES = {
    "mean": _MAX_NPY_HEADER + 8 * MAX_STATS_DIM,
    "model": _MAX_NPY_HEADER + 4 * MAX_MODEL_CHARS,  # numpy stores a str as UTF-32
    **dict.fromkeys(_FIELDS[2:], _MAX_NPY_HEADER + 8),
}
"""The most bytes a member of a statistic file may declare, once decompressed."""

MAX_STATS_FILE_BYTES = 1 << 20
"""The largest statistic file :meth:`CenteringStats.load` opens (1 MiB). A statistic at both
bounds, :data:`MAX_STATS_DIM` float64 and a model name of :data:`MAX_MODEL_CHARS`, takes 541 KB as
:meth:`CenteringStats.save` writes it (uncompressed); a real one far less: 34 KB for a 4,096-dim
model, 7.6 KB for 768 dims. A larger file is not a statistic, and its zip directory alone could
list millions of members."""

_COMPRESSION = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}
"""The zip methods numpy writes (``savez``, ``savez_compressed``); zipfile inflates bzip2 and lzma
members in unbounded steps, so those are refused unread."""

_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, RuntimeError, NotImplementedError)
"""What zipfile and numpy.lib.format raise on a corrupted archive or member."""


def _not_a_statistic(where: str, reason: str) -> ValueError:
    return ValueError(
        f"{where} is not a statistic written by CenteringStats.save (a moverkit corpus statistic: the .npz archive "
        f"that 'moverkit fit-centering --out FILE' or moverkit.fit_centering(texts).save(FILE) writes): {reason}"
    )


def read_stats_file(path: str | os.PathLike, where: str) -> dict[str, np.ndarray]:
    """The five arrays of the statistic file ``path`` (by field name), read as hostile input; a
    ``ValueError`` starting with ``where`` for any file :meth:`CenteringStats.save` did not write.

    In this order, each step before any later one reads a byte: the file is a regular file of at
    most :data:`MAX_STATS_FILE_BYTES`; it is a zip archive whose members are exactly ``mean.npy``,
    ``model.npy``, ``layer.npy``, ``n_texts.npy`` and ``n_tokens.npy``, once each; per member,
    stored or deflated, declaring at most the bytes its field can take once decompressed
    (zipfile never inflates past the declared size); its ``.npy`` header (read from the member
    stream) declares the dtype and shape of its field (:func:`_check_header`); then exactly the
    data that header declares is read, and nothing after it."""
    with open(path, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise _not_a_statistic(where, "it is not a regular file")
        if info.st_size > MAX_STATS_FILE_BYTES:
            raise ValueError(
                f"{where} is larger than any statistic ({info.st_size:,} bytes; a statistic written by "
                f"CenteringStats.save takes at most {MAX_STATS_FILE_BYTES:,} bytes)"
            )
        head = f.read(8)
        f.seek(0)
        if not head:
            raise _not_a_statistic(where, "the file is empty")
        if head.startswith(npy_format.MAGIC_PREFIX):
            raise _not_a_statistic(where, "it is a single .npy array (numpy.save), not an .npz archive")
        try:
            archive = zipfile.ZipFile(f)
        except _ZIP_ERRORS as err:
            if head.startswith(b"PK"):
                raise _not_a_statistic(where, f"the zip archive is truncated or corrupted ({err})") from None
            raise _not_a_statistic(where, f"it is not a zip archive (it begins with {head!r})") from None
        with archive:
            members = archive.infolist()
            names = [member.filename for member in members]
            for name in names:
                if name.removesuffix(".npy") not in _FIELDS or not name.endswith(".npy"):
                    raise ValueError(
                        f"{where} holds a member {name!r} that a statistic has not (it holds "
                        f"{', '.join(key + '.npy' for key in _FIELDS)}): not a statistic written by CenteringStats.save"
                    )
                if names.count(name) > 1:
                    raise ValueError(f"{where} holds {name!r} twice: not a statistic written by CenteringStats.save")
            missing = [key for key in _FIELDS if f"{key}.npy" not in names]
            if missing:
                raise ValueError(
                    f"{where} lacks {', '.join(missing)}: it was not written by CenteringStats.save (fields: "
                    f"{', '.join(_FIELDS)})"
                )
            return {member.filename.removesuffix(".npy"): _read_member(archive, member, where) for member in members}


def _read_member(archive: zipfile.ZipFile, member: zipfile.ZipInfo, where: str) -> np.ndarray:
    """One member of a statistic file, its size and header checked before its data is read."""
    name, key = member.filename, member.filename.removesuffix(".npy")
    if member.compress_type not in _COMPRESSION:
        raise ValueError(
            f"{where}: {name!r} is compressed with method {member.compress_type}; a statistic is stored or "
            "deflated, as numpy.savez and numpy.savez_compressed write it"
        )
    if member.flag_bits & 0x1:
        raise ValueError(f"{where}: {name!r} is encrypted: not a statistic written by CenteringStats.save")
    if member.file_size > _MEMBER_BYTES[key]:
        raise ValueError(
            f"{where}: {name!r} declares {member.file_size:,} bytes once decompressed; the {key} of a statistic takes "
            f"at most {_MEMBER_BYTES[key]:,}: not a statistic written by CenteringStats.save"
        )

    def corrupted(err: Exception) -> ValueError:
        # The first line only: numpy goes on with advice (allow_pickle=True) that does not apply.
        reason = str(err).strip().partition("\n")[0]
        return ValueError(f"{where}: {name!r} is truncated or corrupted ({type(err).__name__}: {reason})")

    try:
        stream = archive.open(member)
    except _ZIP_ERRORS as err:
        raise corrupted(err) from None
    with stream:
        try:
            version = npy_format.read_magic(stream)
            if version == (1, 0):
                shape, fortran_order, dtype = npy_format.read_array_header_1_0(stream, _MAX_NPY_HEADER)
            elif version == (2, 0):
                shape, fortran_order, dtype = npy_format.read_array_header_2_0(stream, _MAX_NPY_HEADER)
            else:
                raise ValueError(f".npy format version {version[0]}.{version[1]}, not 1.0 or 2.0")
        except _ZIP_ERRORS as err:
            raise corrupted(err) from None
        _check_header(where, key, shape, dtype)
        n_bytes = math.prod(shape) * dtype.itemsize
        try:
            data = stream.read(n_bytes)
            after = len(stream.read())  # at most the declared size; reading to the end checks the CRC
        except _ZIP_ERRORS as err:
            raise corrupted(err) from None
    if len(data) < n_bytes:
        raise ValueError(f"{where}: {name!r} ends before the {n_bytes:,} bytes of data its header declares")
    if after:
        raise ValueError(f"{where}: {name!r} has {after:,} bytes after its array: not written by CenteringStats.save")
    order = "F" if fortran_order else "C"
    return np.frombuffer(data, dtype=dtype).reshape(shape, order=order).copy()  # writable, owned


def _check_header(where: str, key: str, shape: tuple, dtype: np.dtype) -> None:
    """The ``.npy`` header of member ``key`` declares what its field can be: ``mean``, a vector of
    1 to :data:`MAX_STATS_DIM` real numbers of at most 8 bytes; ``model``, a 0-d string of at most
    :data:`MAX_MODEL_CHARS`; the others, a 0-d integer of at most 8 bytes. Else a ``ValueError``
    naming the field, before its data is read."""
    got = f"got an array of {dtype} and shape {shape}"
    if key == "mean":
        if len(shape) != 1 or not 1 <= shape[0] <= MAX_STATS_DIM or dtype.kind not in "fiu" or dtype.itemsize > 8:
            raise ValueError(
                f"{where}: mean must be a non-empty vector of at most {MAX_STATS_DIM:,} real numbers (of at most 8 "
                f"bytes each), {got}; fit it again with moverkit.fit_centering"
            )
    elif key == "model":
        if shape != () or dtype.kind != "U" or dtype.itemsize > 4 * MAX_MODEL_CHARS:
            raise ValueError(f"{where}: model must be a string of at most {MAX_MODEL_CHARS:,} characters, {got}")
    elif shape != () or dtype.kind not in "iu" or dtype.itemsize > 8:
        raise ValueError(f"{where}: {key} must be an integer, {got}")


MAX_ABS_MEAN = 1e4
"""The largest admissible magnitude of a coordinate of a corpus mean. A mean lies in the convex
hull of the vectors it averages, so no coordinate exceeds the model's largest activation. Encoder
outputs (after LayerNorm) stay within tens: on the 200 WMT17 test pairs the embedded model's token
means peak at 2.6 (layer 3) and 0.15 (layer 6), its sentence mean at 0.04. Even the "massive
activations" of large decoders (Sun et al., 2024) are in the thousands, on one or two tokens of a
text. A larger value comes from a corrupted or foreign file, and would swamp every centered vector
(``1e300`` overflows float32 to inf, and the scores to NaN)."""


def _scalar(where: str, key: str, array: np.ndarray) -> str | int:
    """The 0-d string (``model``) or integer (the others) field ``key`` of a loaded statistic."""
    kind = "U" if key == "model" else "iu"
    if array.ndim != 0 or array.dtype.kind not in kind:
        expected = "a string" if key == "model" else "an integer"
        raise ValueError(f"{where}: {key} must be {expected}, got an array of {array.dtype} and shape {array.shape}")
    return str(array) if key == "model" else int(array)


def check_stats_fields(where: str, *, mean, model, layer, n_texts, n_tokens) -> np.ndarray:
    """``mean`` as a float64 vector, if the fields make an admissible statistic: a non-empty
    1-d real ``mean``, finite, every coordinate within :data:`MAX_ABS_MEAN`; a ``model`` name;
    ``layer`` >= -1; at least one text and one token. Else a ``ValueError`` starting with ``where``."""
    refit = "; fit it again with moverkit.fit_centering"
    array = np.asarray(mean)
    if array.ndim != 1 or array.size == 0 or array.dtype.kind not in "fiu":
        raise ValueError(
            f"{where}: mean must be a non-empty vector of real numbers, got {array.dtype} {array.shape}{refit}"
        )
    # A copy of its own: a mean that shared the caller's array would change (and its digest with it)
    # when the caller writes to that array; and a read-only one would make torch warn.
    array = np.array(array, dtype=np.float64, order="C", copy=True)
    bad = ~np.isfinite(array)
    if bad.any():
        raise ValueError(f"{where}: mean holds {int(bad.sum())} NaN or infinite value(s) of {array.size}{refit}")
    peak = float(np.abs(array).max())
    if peak > MAX_ABS_MEAN:
        raise ValueError(
            f"{where}: mean has a coordinate of magnitude {peak:.3g}, beyond any hidden state (at most "
            f"{MAX_ABS_MEAN:g}): a corrupted or foreign statistic{refit}"
        )
    if not isinstance(model, str) or not model:
        raise ValueError(f"{where}: model must be a model name, got {model!r}")
    for name, value, minimum in (("layer", layer, -1), ("n_texts", n_texts, 1), ("n_tokens", n_tokens, 1)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
            raise ValueError(f"{where}: {name} must be an int >= {minimum}, got {value!r}{refit}")
    return array


def check_centering(mode, level: str = "token") -> str:
    """``mode`` if it applies to vectors of ``level`` (``"token"`` or ``"sentence"``), else an error
    naming the valid modes (``sentence`` for sentence vectors: with the reason)."""
    if level == "sentence" and isinstance(mode, str) and mode == "sentence":
        raise ValueError(
            "centering='sentence' does not apply to one vector per sentence (it would leave every vector zero); "
            f"choose one of {', '.join(SENTENCE_CENTERING_MODES)}"
        )
    return checks.one_of("centering", mode, CENTERING_MODES if level == "token" else SENTENCE_CENTERING_MODES)


def _text_sums(
    vectors: torch.Tensor, offsets: torch.Tensor | None, scored: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per text, the sum (float64) and the number of its rows that count, and the text of every row."""
    n_rows = vectors.shape[0]
    if offsets is None:
        text_of_row = torch.arange(n_rows, device=vectors.device)
        n_texts = n_rows
    else:
        n_texts = len(offsets) - 1
        text_of_row = torch.repeat_interleave(torch.arange(n_texts, device=offsets.device), offsets[1:] - offsets[:-1])
    keep = torch.ones(n_rows, dtype=torch.bool, device=vectors.device) if scored is None else scored
    kept_text = text_of_row[keep]
    # Summing a text's few rows in their own dtype loses nothing that matters; sums over texts run in float64.
    sums = torch.zeros(n_texts, vectors.shape[1], dtype=vectors.dtype, device=vectors.device)
    sums.index_add_(0, kept_text, vectors[keep])
    sizes = torch.zeros(n_texts, dtype=torch.float64, device=vectors.device)
    sizes.index_add_(0, kept_text, torch.ones_like(kept_text, dtype=torch.float64))
    return sums.double(), sizes, text_of_row


def row_mean(
    vectors: torch.Tensor,
    *,
    offsets: torch.Tensor | None = None,
    scored: torch.Tensor | None = None,
    counts: torch.Tensor | None = None,
) -> tuple[torch.Tensor, int]:
    r"""The mean :math:`\mu` of the module doc (float64, shape (D,)) and the number of rows it
    averages (each counted :math:`c_i` times).

    ``vectors`` (n_rows, D); ``offsets`` (n_texts + 1,): text ``i`` owns rows
    ``offsets[i]:offsets[i + 1]`` (``None``: one row per text); ``scored`` (n_rows,) bool: the rows
    that count (``None``: all); ``counts`` (n_texts,): how often each text occurs (``None``: once).
    """
    sums, sizes, _ = _text_sums(vectors, offsets, scored)
    weight = torch.ones(len(sizes), dtype=torch.float64, device=sums.device)
    if counts is not None:
        weight = counts.to(device=sums.device, dtype=torch.float64)
    total = weight @ sizes
    return (weight @ sums) / total.clamp_min(1.0), int(total.item())


def center_rows(
    vectors: torch.Tensor,
    mode: str,
    *,
    offsets: torch.Tensor | None = None,
    scored: torch.Tensor | None = None,
    counts: torch.Tensor | None = None,
    stats: CenteringStats | None = None,
    warn: bool = True,
) -> torch.Tensor:
    """Center the rows of ``vectors`` (n_rows, D) by ``mode`` and scale them to unit length (see
    the module doc); a new tensor of the dtype of ``vectors``. ``batch`` over too few texts warns
    (:func:`warn_small_batch`) unless ``warn`` is False (the second and later layers of one call).

    ``mode`` was checked once, where the call's :class:`Centering` was made (sentence vectors take
    no ``sentence`` mode). ``offsets``, ``scored`` and ``counts`` are as in :func:`row_mean`: token
    clouds pass their text offsets and non-special rows; sentence vectors pass neither (one row per
    text). ``stats`` is the fitted statistic of ``corpus`` mode.
    """
    w = vectors
    if mode == "none":
        v = w
    elif mode == "dim":
        v = w - w.mean(dim=1, keepdim=True)
    elif mode == "sentence":
        sums, sizes, text_of_row = _text_sums(w, offsets, scored)
        v = w - (sums / sizes.clamp_min(1.0)[:, None]).to(w.dtype)[text_of_row]
    elif mode == "batch":
        if warn:
            warn_small_batch(_text_sums(w, offsets, scored)[1], "texts" if offsets is not None else "sentences")
        v = w - row_mean(w, offsets=offsets, scored=scored, counts=counts)[0].to(w.dtype)
    elif mode == "corpus":
        if stats is None:
            raise ValueError("centering='corpus' needs centering_stats")
        # A copy (torch.tensor), not a view (as_tensor): the mean of a statistic sent to Ray workers
        # comes back read-only, and torch warned of that once in every worker.
        v = w - torch.tensor(stats.mean, device=w.device).to(w.dtype)
    else:  # not a user's mistake: Centering refuses unknown modes before any vector is made
        raise AssertionError(f"center_rows got an unchecked centering mode {mode!r}")
    return torch.nn.functional.normalize(v, dim=-1)


def warn_small_batch(sizes: torch.Tensor, unit: str) -> None:
    """One warning if fewer than :data:`MIN_BATCH_TEXTS` of the ``unit`` (``"texts"``,
    ``"sentences"``) whose rows counted ``sizes`` (per distinct unit) have a row in the batch mean.
    A call with no text at all has no mean and no score to warn about (moverkit.torchmetrics checks
    its arguments with such a call)."""
    n = int((sizes > 0).sum())
    if 0 < n < MIN_BATCH_TEXTS:
        warn_user(
            f"centering='batch' over only {n} distinct {unit.removesuffix('s') if n == 1 else unit} "
            f"(fewer than {MIN_BATCH_TEXTS}): the mean it "
            f"subtracts is mostly these {unit}' own vectors, so the scores say little (a single pair can score "
            f"near -1). Score more pairs per call (at least {MIN_BATCH_TEXTS} distinct {unit} together), or pass "
            "centering='corpus' (the default of centered_bertscore and twmd: a mean shipped for the embedded model, "
            "or one from moverkit.fit_centering) or centering='none'.",
        )


def warn_small_fit(n: int, unit: str) -> None:
    """One warning if :func:`fit_centering` averages fewer than :data:`MIN_FIT_TEXTS` distinct
    ``unit`` (``"texts"``, ``"sentences"``)."""
    if n < MIN_FIT_TEXTS:
        warn_user(
            f"fit_centering over only {n} distinct {unit.removesuffix('s') if n == 1 else unit} "
            f"(fewer than {MIN_FIT_TEXTS}): the corpus mean is then "
            f"mostly these {unit}' own vectors, not the offset the model gives every text, and centering with it "
            f"moves scores by about as much as they differ between pairs. Fit it on at least {MIN_FIT_TEXTS} "
            f"distinct {unit} (more is better), such as the references to score or other texts of their domain.",
        )


def center(
    clouds: TokenClouds,
    mode: str,
    *,
    counts: torch.Tensor | None = None,
    stats: CenteringStats | None = None,
    warn: bool = True,
) -> TokenClouds:
    """:func:`center_rows` for token clouds: means over the non-special tokens, ``counts`` per text.
    Returns new clouds; ``clouds`` is not modified."""
    vectors = center_rows(
        clouds.vectors, mode, offsets=clouds.offsets, scored=~clouds.special, counts=counts, stats=stats, warn=warn
    )
    return clouds.with_vectors(vectors)


def _describe(model: str, layer: int) -> str:
    return f"{model} sentence vectors (layer {layer})" if layer == SENTENCE_LAYER else f"{model} layer {layer}"


STATS_DIR = Path(__file__).resolve().parents[1] / "centering_stats"
"""The shipped ``corpus`` statistics: ``<model name, / as __>.layer<k>.npz`` (token vectors of
layer ``k``) and ``<model name>.sentence.npz`` (sentence vectors), fitted by
``moverkit fit-centering`` on the 2,191 distinct references of the WMT17 segment-level DA file
(news, to-English; see ``centering_stats/README.md``)."""


def shipped_stats_path(model: str, layer: int) -> Path:
    """Where the shipped statistic of ``model`` (a resolved model name) at ``layer`` (or
    :data:`SENTENCE_LAYER`) is, whether or not it exists."""
    kind = "sentence" if layer == SENTENCE_LAYER else f"layer{layer}"
    return STATS_DIR / f"{model.replace('/', '__')}.{kind}.npz"


def resolve_stats(centering_stats, model: str, layer: int, dim: int) -> CenteringStats:
    """Accept a :class:`CenteringStats` or a path to one; check it fits the encoder in use (its
    model, its layer, or ``-1`` for sentence vectors, and its dimension). ``None`` takes the
    statistic shipped for the model and layer (:func:`shipped_stats_path`: the embedded model's
    layers and sentence vectors), and is a ``ValueError`` that says what to do for any other."""
    if centering_stats is None:
        centering_stats = shipped_stats_path(model, layer)
        if not centering_stats.is_file():
            how = 'texts, level="sentence"' if layer == SENTENCE_LAYER else "texts, model_type=..., num_layers=..."
            raise ValueError(
                f"centering='corpus' subtracts a mean fitted on a corpus, and one ships only for the embedded "
                f"model; for {_describe(model, layer)} fit one with moverkit.fit_centering({how}) and pass it "
                "(or the path it was saved to) as centering_stats, or pass centering='batch' (the mean of the "
                "call's own texts, the paper's method) or centering='none'"
            )
    stats = centering_stats
    if isinstance(centering_stats, (str, os.PathLike)):
        stats = CenteringStats.load(centering_stats)
    if not isinstance(stats, CenteringStats):
        raise TypeError(f"centering_stats must be a CenteringStats or a path, got {type(centering_stats).__name__}")
    if stats.model != model or stats.layer != layer or stats.mean.shape != (dim,):
        raise ValueError(
            f"centering_stats was fitted for {_describe(stats.model, stats.layer)} (dim {stats.mean.shape[0]}), "
            f"but the encoder in use is {_describe(model, layer)} (dim {dim}); fit it again for this encoder"
        )
    return stats


def fit_centering(
    texts: Iterable[str],
    model_type: str | os.PathLike | None = None,
    num_layers: int | None = None,
    *,
    level: str = "token",
    lang: str = "en",
    device: str | int | torch.device | None = None,
    batch_size: int = 64,
    max_length: int | None = None,
    verbose: bool = False,
) -> CenteringStats:
    r"""Fit the ``corpus`` centering statistic: the mean vector :math:`\mu` of ``texts`` (a list
    or any iterable of strings, a generator too; each unit counted as often as it occurs) for one
    model; texts with no token (or no sentence) at all are a ``ValueError``. Save it with ``.save(path)`` and pass it (or the
    path) as ``centering_stats`` with ``centering="corpus"``.

    ``level="token"`` (centered_bertscore, twmd, moverscore, lazy_emd): the mean non-special token
    vector of layer ``num_layers`` of ``model_type`` (as those metrics' arguments), texts truncated
    to ``max_length`` tokens. ``level="sentence"`` (sbertscore): the mean sentence embedding of the
    sentence-transformers model ``model_type`` over the sentences of ``texts``, split in language
    ``lang`` as sbertscore splits them; the statistic's ``layer`` is ``-1`` and ``n_tokens`` counts
    sentences (``num_layers`` and ``max_length`` do not apply). ``device``, ``batch_size`` and
    ``verbose`` are as in the metrics.

    Fewer than :data:`MIN_FIT_TEXTS` distinct texts (sentences) warn (:func:`warn_small_fit`):
    the mean would hold mostly their own vectors.
    """
    if isinstance(texts, Iterable) and not isinstance(texts, (str, bytes, Sequence)):
        texts = list(texts)  # a generator, a set, ...: read once
    texts = check_texts(texts, "texts")
    level = checks.one_of("level", level, LEVELS)
    batch_size = checks.positive_int("batch_size", batch_size)
    verbose = checks.boolean("verbose", verbose)
    if level == "token":
        checks.optional_positive_int("max_length", max_length)
        frequency = Counter(text for text in texts if text.strip())  # a blank text has no token to average
    else:
        for name, value in (("num_layers", num_layers), ("max_length", max_length)):
            if value is not None:
                raise ValueError(f"{name} does not apply to level='sentence' (sentence embeddings); got {value!r}")
        frequency = Counter(s for text in texts for s in split_sentences(text, lang))
    if not frequency:
        raise ValueError(f"texts hold no {level}: the corpus mean needs at least one non-empty text")
    unique = list(frequency)
    counts = torch.tensor([frequency[u] for u in unique], dtype=torch.float64)
    if level == "token":
        encoder = get_encoder(model_type, num_layers, device)
        clouds = encode(encoder, unique, EncoderRequest(batch_size=batch_size, max_length=max_length, verbose=verbose))
        mean, n = row_mean(clouds.vectors, offsets=clouds.offsets, scored=~clouds.special, counts=counts)
        if n == 0:
            raise ValueError(
                "texts hold no token once tokenized (only characters the tokenizer drops, such as zero-width "
                "spaces): the corpus mean needs at least one token"
            )
    else:
        encoder = get_sentence_encoder(model_type, device)
        vectors = encode_sentences(encoder, unique, EncoderRequest(batch_size=batch_size, verbose=verbose)).double()
        mean, n = row_mean(vectors, counts=counts)
    warn_small_fit(len(unique), "texts" if level == "token" else "sentences")  # once it is fitted, not before an error
    return CenteringStats(
        mean=mean.cpu().numpy(), model=encoder.name, layer=encoder.layer, n_texts=len(texts), n_tokens=n
    )


@dataclass(frozen=True)
class Centering:
    """How a call centers its vectors (Chen et al., 2020, Section 5): ``mode`` (one of
    :data:`CENTERING_MODES`), ``stats``, the fitted statistic that
    ``corpus`` subtracts (a :class:`CenteringStats` or a path to one;
    ignored by the other modes), and ``level``, ``"token"`` or ``"sentence"`` (sentence vectors
    take no ``sentence`` mode). ``call_mean`` is set only for the chunks of a streamed ``batch``
    call (:mod:`~moverkit._core.streaming`): the mean over every text of the whole call, which each
    chunk subtracts instead of its own."""

    mode: str = "none"
    stats: CenteringStats | str | os.PathLike | None = None
    level: str = "token"
    call_mean: CenteringStats | None = None

    def __post_init__(self):
        check_centering(self.mode, self.level)

    def resolved(self, model: str, layer: int, dim: int) -> CenteringStats | None:
        """The statistic of ``corpus`` centering, loaded and checked against the encoder in use
        (model, layer, dimension); ``None`` for the other modes."""
        return resolve_stats(self.stats, model, layer, dim) if self.mode == "corpus" else None

    def within_call(self, call_mean: CenteringStats | None) -> Centering:
        """This centering for one chunk of a streamed call whose ``batch`` mean is ``call_mean``;
        the other modes are the same in every chunk."""
        if self.mode != "batch" or call_mean is None:
            return self
        return Centering(self.mode, self.stats, self.level, call_mean)
