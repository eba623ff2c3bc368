"""Hostile corpus-statistic files (issue 21): ``CenteringStats.load`` reads only the five members
that ``save`` writes, each bounded by what the statistic can be (its declared size and its .npy
header checked before any byte of data is decompressed), so a zip bomb, an extra or duplicated
member, a member of another shape or kind, or a file of another kind is a ``ValueError`` naming
the file, at a cost of kilobytes."""

from __future__ import annotations

import io
import os
import pickle
import subprocess
import sys
import tracemalloc
import zipfile

import numpy as np
import pytest
from numpy.lib import format as npy_format

from moverkit._core import CenteringStats
from moverkit._core.centering.stats_file import MAX_MODEL_CHARS, MAX_STATS_DIM, MAX_STATS_FILE_BYTES

FIELDS = {"model": "m", "layer": 2, "n_texts": 3, "n_tokens": 10}
MEAN = np.linspace(-1.0, 1.0, 16)


def _npy(value) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(value), allow_pickle=False)
    return buffer.getvalue()


def _archive(path, members: dict, compression=zipfile.ZIP_STORED):
    """A zip at ``path`` of ``members`` (name -> bytes, or a (header dict, n zero bytes) pair
    streamed, so that a bomb of hundreds of MB is never held here)."""
    with zipfile.ZipFile(path, "w", compression=compression) as archive:
        for name, content in members.items():
            if isinstance(content, bytes):
                archive.writestr(name, content)
                continue
            header, n_bytes = content
            with archive.open(name, "w", force_zip64=n_bytes >= 2**31) as member:
                npy_format.write_array_header_1_0(member, header)
                chunk = bytes(1 << 22)
                while n_bytes:
                    member.write(chunk[: min(n_bytes, len(chunk))])
                    n_bytes -= min(n_bytes, len(chunk))
    return path


def _members(mean=MEAN, **over) -> dict:
    return {f"{key}.npy": _npy(value) for key, value in {"mean": mean, **FIELDS, **over}.items()}


def _refused(path, message):
    with pytest.raises(ValueError, match=f"^centering_stats file {str(path)!r}.*{message}") as refused:
        CenteringStats.load(path)
    return str(refused.value)


@pytest.mark.slow
def test_a_zip_bomb_is_refused_before_it_is_decompressed(tmp_path):
    # A mean that declares 20 million float64 (160 MB) of zeros, deflated into a file of about
    # 160 KB: it loaded (and took twice its size in memory) before; now its header refuses it.
    n = 20_000_000
    bomb = _members()
    bomb["mean.npy"] = ({"descr": "<f8", "fortran_order": False, "shape": (n,)}, 8 * n)
    path = _archive(tmp_path / "bomb.npz", bomb, zipfile.ZIP_DEFLATED)
    assert os.path.getsize(path) < 200_000
    tracemalloc.start()
    try:
        message = _refused(path, "mean")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "'mean.npy' declares 160,000,128 bytes once decompressed" in message
    assert peak < 4 * 2**20, f"loading the bomb peaked at {peak / 2**20:.1f} MiB"


def test_a_member_that_inflates_past_its_declared_size_is_refused(tmp_path):
    # The zip directory lies: mean.npy declares the size of 65,536 float64 (admissible) but
    # deflates to 10 MB. zipfile stops at the declared size, and the CRC then fails.
    n = 10 * 2**20 // 8
    members = _members()
    members["mean.npy"] = ({"descr": "<f8", "fortran_order": False, "shape": (MAX_STATS_DIM,)}, 8 * n)
    path = _archive(tmp_path / "lying.npz", members, zipfile.ZIP_DEFLATED)
    declared = 128 + 8 * MAX_STATS_DIM
    data = bytearray(path.read_bytes())
    local = data.index(b"PK\x03\x04")  # mean.npy is the first member
    central = data.index(b"PK\x01\x02")
    assert data[local + 30 : local + 38] == data[central + 46 : central + 54] == b"mean.npy"
    data[local + 22 : local + 26] = data[central + 24 : central + 28] = declared.to_bytes(4, "little")
    path.write_bytes(data)
    assert zipfile.ZipFile(path).getinfo("mean.npy").file_size == declared
    tracemalloc.start()
    try:
        _refused(path, "'mean.npy' is truncated or corrupted .*Bad CRC-32")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2**20


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"notes.npy": _npy(np.zeros(3))}, "holds a member 'notes.npy' that a statistic has not"),
        ({"../../evil.npy": b"x"}, r"holds a member '\.\./\.\./evil\.npy' that a statistic has not"),
        ({"mean.npy": None}, "lacks mean"),
    ],
)
def test_extra_or_missing_members_are_refused(tmp_path, change, message):
    members = {name: content for name, content in {**_members(), **change}.items() if content is not None}
    _refused(_archive(tmp_path / "stats.npz", members), message)


def test_a_duplicated_member_is_refused(tmp_path):
    path = tmp_path / "twice.npz"
    with zipfile.ZipFile(path, "w") as archive, pytest.warns(UserWarning, match="Duplicate name"):
        for name, content in _members().items():
            archive.writestr(name, content)
        archive.writestr("mean.npy", _npy(np.zeros(16)))
    _refused(path, "holds 'mean.npy' twice")


@pytest.mark.parametrize(
    ("member", "value", "message"),
    [
        ("mean", np.zeros(MAX_STATS_DIM + 1), f"mean must be a non-empty vector of at most {MAX_STATS_DIM:,}"),
        ("mean", np.zeros((4, 4)), "mean must be a non-empty vector of at most"),
        ("mean", np.zeros(4, dtype=np.complex128), "mean must be a non-empty vector of at most .* real numbers"),
        ("mean", np.array(["a", "b"]), "mean must be a non-empty vector of at most .* real numbers"),
        ("mean", np.zeros(4, dtype=np.float128), "mean must be a non-empty vector of at most .* real numbers"),
        ("model", np.array("m" * (MAX_MODEL_CHARS + 1)), f"model must be a string of at most {MAX_MODEL_CHARS:,}"),
        ("model", np.array(["m"]), "model must be a string"),
        ("layer", np.array("two"), "layer must be an integer"),
        ("n_tokens", np.zeros(3, dtype=np.int64), "n_tokens must be an integer"),
        ("n_texts", np.array(2.5), "n_texts must be an integer"),
    ],
)
def test_a_member_of_another_shape_or_kind_is_refused_from_its_header(tmp_path, member, value, message):
    _refused(_archive(tmp_path / "stats.npz", _members(**{member: value})), message)


def test_an_object_array_is_refused_without_unpickling(tmp_path):
    buffer = io.BytesIO()
    np.save(buffer, np.array([object()], dtype=object), allow_pickle=True)
    _refused(
        _archive(tmp_path / "stats.npz", _members() | {"mean.npy": buffer.getvalue()}),
        "mean must be a non-empty vector",
    )


def _npy_header(length: int) -> bytes:
    """A version 1.0 .npy header of ``length`` bytes for 16 float64, followed by their data."""
    text = b"{'descr': '<f8', 'fortran_order': False, 'shape': (16,), }"
    return b"\x93NUMPY\x01\x00" + length.to_bytes(2, "little") + text.ljust(length - 1) + b"\n" + bytes(128)


@pytest.mark.parametrize(
    ("mean", "message"),
    [
        (
            _npy_header(60_000),
            r"'mean.npy' is truncated or corrupted \(ValueError: Header info length \(60000\) is large",
        ),
        (b"\x93NUMPY\x03\x00" + bytes(64), "'mean.npy' is truncated or corrupted .*format version 3.0"),
        (b"\x93NUMPX\x01\x00" + bytes(64), "'mean.npy' is truncated or corrupted"),
        (_npy(np.zeros(4, dtype=[("a", "<f8")])), "mean must be a non-empty vector"),
        (_npy(np.zeros(0)), "mean must be a non-empty vector"),
    ],
)
def test_a_header_numpy_would_not_read_safely_is_refused_without_its_advice(tmp_path, mean, message):
    text = _refused(_archive(tmp_path / "stats.npz", _members() | {"mean.npy": mean}), message)
    assert "allow_pickle" not in text and "\n" not in text


def test_an_encrypted_member_is_refused(tmp_path):
    path = _archive(tmp_path / "stats.npz", _members())
    data = bytearray(path.read_bytes())
    for signature, flags in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):  # the flag bits of every header
        start = 0
        while (start := data.find(signature, start)) != -1:
            data[start + flags] |= 1
            start += 4
    path.write_bytes(data)
    _refused(path, "'mean.npy' is encrypted")


@pytest.mark.parametrize("cut", [8, 1])
def test_a_member_shorter_or_longer_than_its_header_says_is_refused(tmp_path, cut):
    good = _npy(np.linspace(-1.0, 1.0, 16))
    content = good[:-cut] if cut == 8 else good + b"\0" * 8
    message = "ends before" if cut == 8 else "8 bytes after"
    _refused(_archive(tmp_path / "stats.npz", _members() | {"mean.npy": content}), message)


@pytest.mark.parametrize("compression", [zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
def test_compression_numpy_does_not_write_is_refused(tmp_path, compression):
    # bz2 and lzma members are decompressed by zipfile in unbounded steps: not read at all.
    _refused(_archive(tmp_path / "stats.npz", _members(), compression), "is compressed with")


def test_a_file_larger_than_any_statistic_is_refused_unopened(tmp_path):
    path = _archive(tmp_path / "stats.npz", _members())
    with open(path, "ab") as f:
        f.write(bytes(MAX_STATS_FILE_BYTES))
    _refused(path, f"is larger than any statistic .*at most {MAX_STATS_FILE_BYTES:,} bytes")


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"mean,model\n0.1,m\n", "is not a zip archive"),
        (b"", "is empty"),
        (_npy(np.ones(16)), "is a single .npy array"),
        (b"\x89PNG\r\n\x1a\n" + bytes(64), "is not a zip archive"),
    ],
)
def test_a_file_of_another_kind_says_what_a_statistic_is(tmp_path, content, reason):
    # Not numpy's advice about allow_pickle: what the file should have been, and where it comes from.
    path = tmp_path / "scores.csv"
    path.write_bytes(content)
    message = _refused(path, "is not a statistic written by CenteringStats.save")
    assert "a moverkit corpus statistic" in message and reason in message
    assert "moverkit fit-centering" in message and "fit_centering" in message
    assert "pickle" not in message


def test_a_statistic_saved_by_save_or_compressed_by_numpy_loads(tmp_path):
    stats = CenteringStats(mean=np.linspace(-1.0, 1.0, 768), **FIELDS)
    stats.save(tmp_path / "s.npz")
    np.savez_compressed(tmp_path / "c.npz", mean=stats.mean, **{k: np.array(v) for k, v in FIELDS.items()})
    for name in ("s.npz", "c.npz"):
        loaded = CenteringStats.load(tmp_path / name)
        assert loaded.digest == stats.digest and (loaded.model, loaded.layer, loaded.n_texts) == ("m", 2, 3)
        assert loaded.mean.dtype == np.float64 and loaded.mean.flags.writeable
    # Big-endian and float32 means (numpy writes them as given) are read as the same numbers.
    np.savez(tmp_path / "b.npz", mean=stats.mean.astype(">f4"), **{k: np.array(v) for k, v in FIELDS.items()})
    np.testing.assert_allclose(CenteringStats.load(tmp_path / "b.npz").mean, stats.mean, rtol=1e-7)


def test_the_largest_admissible_statistic_fits_the_file_bound(tmp_path):
    stats = CenteringStats(
        mean=np.full(MAX_STATS_DIM, 0.5), model="m" * MAX_MODEL_CHARS, layer=2, n_texts=1, n_tokens=1
    )
    stats.save(tmp_path / "max.npz")
    assert os.path.getsize(tmp_path / "max.npz") <= MAX_STATS_FILE_BYTES
    assert CenteringStats.load(tmp_path / "max.npz").digest == stats.digest


_CENTER_READ_ONLY = """
import pickle, warnings
import numpy as np, torch
from moverkit._core import CenteringStats, center_rows
stats = CenteringStats.load({path!r})
buffers = []
data = pickle.dumps(stats, protocol=5, buffer_callback=buffers.append)
# Out-of-band buffers come back read-only, as Ray hands an object to its workers.
shared = pickle.loads(data, buffers=[memoryview(b.raw()).toreadonly() for b in buffers])
assert not shared.mean.flags.writeable
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for stats in (CenteringStats.load({path!r}), shared):
        center_rows(torch.ones(2, 16), "corpus", stats=stats)
print(repr([str(w.message) for w in caught]))
"""


@pytest.mark.integration
def test_centering_with_a_loaded_or_shared_statistic_warns_nothing(tmp_path):
    # Torch warns once per process for a non-writable array, so this runs in a fresh interpreter.
    path = tmp_path / "s.npz"
    CenteringStats(mean=np.linspace(-1.0, 1.0, 16), **FIELDS).save(path)
    assert pickle.loads(pickle.dumps(CenteringStats.load(path))).mean.shape == (16,)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = subprocess.run(
        [sys.executable, "-c", _CENTER_READ_ONLY.format(path=str(path))],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]", run.stdout


def test_the_shipped_statistic_is_read_once_per_process(monkeypatch):
    # The default corpus centering read and checked its .npz on every call and every chunk (issue 33).
    from moverkit import functional
    from moverkit._core.centering import stats_file

    reads = []
    load = stats_file.CenteringStats.load.__func__
    monkeypatch.setattr(stats_file.CenteringStats, "load", classmethod(lambda cls, p: reads.append(p) or load(cls, p)))
    stats_file._shipped_stats.cache_clear()
    for _ in range(3):
        functional.centered_bertscore(["a cat sat on the mat"], ["the cat sat"])
    assert len(reads) == 1
