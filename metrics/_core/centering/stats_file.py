"""The ``corpus`` centering statistic (:class:`CenteringStats`): its file, read as untrusted input,
and the statistics shipped for the embedded model.

A statistic is a mean vector fitted once on a corpus (:mod:`~moverkit._core.centering.fit`) for one
model and layer, saved as a NumPy ``.npz`` archive, and subtracted by ``centering="corpus"``
(:mod:`~moverkit._core.centering`). A statistic file may come from a stranger (an upload to a demo
page), so :meth:`CenteringStats.load` reads it as hostile (:func:`read_stats_file`, issue 21);
:func:`resolve_stats` takes a statistic, a path to one or ``None`` (the shipped one) and checks it
fits the encoder in use.
"""

from __future__ import annotations

import functools
import hashlib
import io
import math
import numbers
import os
import re
import stat
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
from numpy.lib import format as npy_format

from moverkit._core.encoding.sentences import SENTENCE_LAYER


@dataclass(frozen=True, eq=False)
class CenteringStats:
    """A mean vector fitted on a corpus for one (model, layer): the ``corpus`` statistic.

    Token vectors carry their layer (a block index >= 0); sentence vectors carry
    ``layer = -1`` (the model's pooled sentence embedding) and count sentences in ``n_tokens``,
    so that a statistic of one kind is refused for the other.

    ``source``: what defines the mean, as :func:`~moverkit._core.centering.fit.fit_centering`
    records it (a SHA-1 of the model, layer, level, the counted corpus, token limit and precision);
    ``""`` for a mean given as numbers. The :attr:`digest` hashes it when it is there.
    """

    mean: np.ndarray  # (dim,), float64
    model: str
    layer: int
    n_texts: int
    n_tokens: int
    source: str = ""

    def __post_init__(self):
        # Checked however it was made (fit, loaded, or built by hand): a bad mean would turn every
        # score of a call into NaN, 0 or 1 without a word.
        fields = {"model": self.model, "layer": self.layer, "n_texts": self.n_texts, "n_tokens": self.n_tokens}
        object.__setattr__(self, "mean", check_stats_fields("centering_stats", mean=self.mean, **fields))
        if not isinstance(self.source, str) or not _SOURCE.fullmatch(self.source):
            raise ValueError(f"centering_stats: source must be '' or a SHA-1 in hexadecimal, got {self.source!r:.80}")

    @property
    def digest(self) -> str:
        """Short fingerprint of the statistic, named in hashcodes. A fitted statistic's digest hashes
        its :attr:`source`, what defines its mean, not the mean's float64 bits: those differ in
        their last bits by the CPU's kernels and the batch size (all-mpnet-base-v2's mean on the
        shipped corpus: 8e-10 apart at batch sizes 16 and 64), and a hashcode names the
        configuration. A mean given as numbers (built by hand, or read from a file written before
        moverkit recorded the source, as the shipped statistics) is hashed by its bits."""
        h = hashlib.sha1(self.source.encode() if self.source else np.ascontiguousarray(self.mean, np.float64).tobytes())
        h.update(f"{self.model}|{self.layer}".encode())
        return h.hexdigest()[:10]

    def save(self, path: str | os.PathLike | BinaryIO) -> None:
        """Write to ``path`` (a NumPy ``.npz`` archive; the name is used as given) whole or not at
        all (:func:`moverkit.formats.lines.write_atomic`), or into a binary file object."""
        if isinstance(path, (str, os.PathLike)):
            from moverkit.formats.lines import write_atomic

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
            **({"source": np.array(self.source)} if self.source else {}),
        )

    @classmethod
    def load(cls, path: str | os.PathLike) -> CenteringStats:
        """Read a statistic written by :meth:`save`. A file that is not one (empty, truncated,
        another kind of file, a field missing, extra or of the wrong kind) or whose mean is
        inadmissible (:func:`check_stats_fields`) is a ``ValueError`` naming ``centering_stats`` and
        the file; a file that does not open keeps its ``OSError`` (``FileNotFoundError``, ...).

        A statistic may come from a stranger (an upload to a demo page), so the file is read as
        hostile (:func:`read_stats_file`): at most :data:`MAX_STATS_FILE_BYTES` on disk, only the
        members :meth:`save` writes (five, and ``source`` for a fitted statistic), each member's declared size and ``.npy`` header checked
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
        optional = {key: _scalar(where, key, arrays[key]) for key in _OPTIONAL if key in arrays}
        return cls(**fields, **optional)


_FIELDS = ("mean", "model", "layer", "n_texts", "n_tokens")
_OPTIONAL = ("source",)
"""Fields a file may hold (written since moverkit recorded them) and may lack."""
_SOURCE = re.compile(r"|[0-9a-f]{40}")

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

_MAX_CHARS = {"model": MAX_MODEL_CHARS, "source": 40}
"""The longest string of each string field."""

_MEMBER_BYTES = {
    "mean": _MAX_NPY_HEADER + 8 * MAX_STATS_DIM,
    **{key: _MAX_NPY_HEADER + 4 * chars for key, chars in _MAX_CHARS.items()},  # numpy stores a str as UTF-32
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
    """The arrays of the statistic file ``path`` (by field name: five, and ``source`` when it was
    fitted), read as hostile input; a ``ValueError`` starting with ``where`` for any file
    :meth:`CenteringStats.save` did not write.

    In this order, each step before any later one reads a byte: the file is a regular file of at
    most :data:`MAX_STATS_FILE_BYTES`; it is a zip archive whose members are exactly ``mean.npy``,
    ``model.npy``, ``layer.npy``, ``n_texts.npy`` and ``n_tokens.npy``, once each, and at most once
    ``source.npy``; per member, stored or deflated, declaring at most the bytes its field can take once decompressed
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
                if name.removesuffix(".npy") not in _FIELDS + _OPTIONAL or not name.endswith(".npy"):
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
    elif key in _MAX_CHARS:
        if shape != () or dtype.kind != "U" or dtype.itemsize > 4 * _MAX_CHARS[key]:
            raise ValueError(f"{where}: {key} must be a string of at most {_MAX_CHARS[key]:,} characters, {got}")
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
    text = key in _MAX_CHARS
    if array.ndim != 0 or array.dtype.kind not in ("U" if text else "iu"):
        expected = "a string" if text else "an integer"
        raise ValueError(f"{where}: {key} must be {expected}, got an array of {array.dtype} and shape {array.shape}")
    return str(array) if text else int(array)


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


def _describe(model: str, layer: int) -> str:
    return f"{model} sentence vectors (layer {layer})" if layer == SENTENCE_LAYER else f"{model} layer {layer}"


STATS_DIR = Path(__file__).resolve().parents[2] / "centering_stats"
"""The shipped ``corpus`` statistics: ``<model name, / as __>.layer<k>.npz`` (token vectors of
layer ``k``) and ``<model name>.sentence.npz`` (sentence vectors), fitted by
``moverkit fit-centering`` on the 2,191 distinct references of the WMT17 segment-level DA file
(news, to-English; see ``centering_stats/README.md``)."""


def shipped_stats_path(model: str, layer: int) -> Path:
    """Where the shipped statistic of ``model`` (a resolved model name) at ``layer`` (or
    :data:`SENTENCE_LAYER`) is, whether or not it exists."""
    kind = "sentence" if layer == SENTENCE_LAYER else f"layer{layer}"
    return STATS_DIR / f"{model.replace('/', '__')}.{kind}.npz"


@functools.lru_cache(maxsize=16)
def _shipped_stats(path: Path) -> CenteringStats:
    """A statistic shipped with the package, loaded once per process (the default ``corpus``
    centering read and checked its file on every call and every chunk of a call before)."""
    return CenteringStats.load(path)


def resolve_stats(
    centering_stats, model: str, layer: int, dim: int, fallback: Callable[[], CenteringStats] | None = None
) -> CenteringStats:
    """Check a :class:`CenteringStats` fits the encoder in use (its model, its layer, or ``-1`` for
    sentence vectors, and its dimension); a path given as ``centering_stats`` was read where the
    call's :class:`~moverkit._core.centering.Centering` was made. ``None`` takes the
    statistic shipped for the model and layer (:func:`shipped_stats_path`: the embedded model's
    layers and sentence vectors); for any other model, ``fallback()`` (a metric call's: the mean
    of the shipped corpus, :func:`~moverkit._core.centering.fit.default_corpus_stats`), else a
    ``ValueError`` that says what to do."""
    stats = centering_stats
    if centering_stats is None:
        path = shipped_stats_path(model, layer)
        if not path.is_file() and fallback is not None:
            stats = fallback()
        elif not path.is_file():
            how = 'texts, level="sentence"' if layer == SENTENCE_LAYER else "texts, model_type=..., num_layers=..."
            raise ValueError(
                f"centering='corpus' subtracts a mean fitted on a corpus, and one ships only for the embedded "
                f"model; for {_describe(model, layer)} fit one with moverkit.fit_centering({how}) and pass it "
                "(or the path it was saved to) as centering_stats, or pass centering='batch' (the mean of the "
                "call's own texts, the paper's method) or centering='none'"
            )
        else:
            stats = _shipped_stats(path)  # read once per process: package data
    if not isinstance(stats, CenteringStats):
        raise TypeError(f"centering_stats must be a CenteringStats or a path, got {type(centering_stats).__name__}")
    if stats.model != model or stats.layer != layer or stats.mean.shape != (dim,):
        raise ValueError(
            f"centering_stats was fitted for {_describe(stats.model, stats.layer)} (dim {stats.mean.shape[0]}), "
            f"but the encoder in use is {_describe(model, layer)} (dim {dim}); fit it again for this encoder"
        )
    return stats
