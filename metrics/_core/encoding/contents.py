"""What a local model folder holds, as one digest: the identity of a local model in hashcodes.

A local model is known by its contents, never by its folder's name or place: a renamed or moved
copy is the same model (same hashcode, same fitted statistics), and a change to any byte that can
move a score is another model. :func:`model_digest` hashes every such byte, whole:

- the weights files (all of each: a partial fine-tune or a merged LoRA changes a middle block,
  which a digest of a file's ends would miss), the config and the tokenizer's files, at the top of
  the folder (:func:`scored_file`);
- a sentence-transformers pipeline's ``modules.json``, ``config_sentence_transformers.json``
  (prompts, ``truncate_dim``, the similarity) and every module folder ``modules.json`` names
  (``1_Pooling/``, ``2_Dense/``, ``3_Normalize/``: their configs and weights), and transformers'
  ``additional_chat_templates/``.

Files that load nothing a score reads are left out, so that they do not split one model into two:
hidden files (moverkit finetune's marker, ``.gitattributes``), the model card (``*.md``), a
Trainer's state and optimizer files, and other folders (``checkpoints/``, ``onnx/``, ``runs/``).

Hashing is xxHash's XXH3-128 (the ``xxhash`` package; ``hashlib`` has no hash of memory speed:
SHA-256 runs at 1.8 GB/s on an AMD EPYC core, XXH3 at 29 GB/s, so a 1.4 GB folder costs the time
of reading it). A file's digest is kept by its path, size, modification time and inode, in the
process and on disk (:func:`_stored`), so a later load of an unchanged folder reads none of it.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

import xxhash

from moverkit._core.base.environment import current_environment

SCORED_SUFFIXES = frozenset({".json", ".txt", ".model", ".jinja", ".tiktoken", ".safetensors", ".bin", ".pt", ".pth"})
"""Kinds of file a load reads: configs and tokenizer files (JSON, vocabularies, merges,
SentencePiece models, chat templates) and torch weights."""

NOT_SCORED = frozenset(
    {
        "data_config.json",
        "trainer_state.json",
        "training_args.bin",
        "optimizer.pt",
        "scheduler.pt",
        "scaler.pt",
        "rng_state.pth",
    }
)
"""Files of those kinds that no load reads: the Hub's list of a sentence model's training data, and
what transformers' Trainer saves beside a model."""

EXTRA_FOLDERS = ("additional_chat_templates",)
"""Sub-folders a load reads besides the modules ``modules.json`` names."""

_CHUNK = 16 << 20  # bytes read at a time: large enough that the hash runs at memory speed
_KNOWN: dict[tuple, str] = {}  # (path, size, mtime_ns, inode) -> a file's digest, for the process
_LOCK = threading.Lock()


def scored_file(path: Path) -> bool:
    """Whether a file can move a score (see the module doc): not hidden, of a kind a load reads
    (:data:`SCORED_SUFFIXES`), and not a Trainer's state (:data:`NOT_SCORED`, ``rng_state_*.pth``)."""
    name = path.name
    if name.startswith(".") or name in NOT_SCORED or name.startswith("rng_state_"):
        return False
    return path.suffix in SCORED_SUFFIXES


def scored_files(folder: Path) -> list[Path]:
    """The files of ``folder`` that :func:`model_digest` hashes, in a fixed order: the scored files
    at its top, and every scored file under the module folders of its ``modules.json`` and the
    :data:`EXTRA_FOLDERS`."""
    files = [path for path in folder.iterdir() if path.is_file() and scored_file(path)]
    for sub in _module_folders(folder) + [folder / name for name in EXTRA_FOLDERS]:
        if sub.is_dir() and sub.resolve() != folder.resolve():
            files += [path for path in sub.rglob("*") if path.is_file() and scored_file(path)]
    return sorted(set(files), key=lambda path: path.relative_to(folder).as_posix())


def _module_folders(folder: Path) -> list[Path]:
    """The folders of the modules a sentence-transformers pipeline lists in ``modules.json``
    (those that are not the folder itself); none where it has no such file, or one that does not
    read (its bytes are hashed all the same)."""
    try:
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
        paths = [str(module.get("path") or "") for module in modules]
    except (OSError, ValueError, TypeError, AttributeError):
        return []
    return [folder / path for path in paths if path and not Path(path).is_absolute() and ".." not in Path(path).parts]


def model_digest(folder: str | os.PathLike) -> str:
    """The digest of what a local model folder holds (16 hex digits): the relative path, size and
    bytes of each of its :func:`scored_files`. Equal for a renamed or moved copy; other for any
    change to one of those bytes."""
    folder = Path(folder)
    h = hashlib.sha256()
    for path in scored_files(folder):
        h.update(f"{path.relative_to(folder).as_posix()}\0{file_digest(path)}\0".encode())
    return h.hexdigest()[:16]


def file_digest(path: Path) -> str:
    """XXH3-128 of a file's bytes, kept by its path, size, modification time and inode (in the
    process, and in the running call's cache folder where there is one: :func:`_stored`)."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, stat.st_ino)
    with _LOCK:
        known = _KNOWN.get(key)
    if known is not None:
        return known
    store = _stored(key)
    digest = _read(store)
    if digest is None:
        h = xxhash.xxh3_128()
        with open(path, "rb") as file:
            while chunk := file.read(_CHUNK):
                h.update(chunk)
        digest = h.hexdigest()
        _write(store, digest)
    with _LOCK:
        _KNOWN[key] = digest
    return digest


def _stored(key: tuple) -> Path | None:
    """Where a file's digest is kept across processes: ``digests/`` in the folder of
    :data:`~moverkit._core.base.environment.CENTERING_CACHE_VARIABLE` (``~/.cache/moverkit/centering``
    by default; ``off``: nowhere), one small file per (path, size, modification time, inode)."""
    folder = current_environment().centering_cache
    if folder is None:
        return None
    return Path(folder) / "digests" / f"{hashlib.sha1(repr(key).encode()).hexdigest()}.txt"


def _read(store: Path | None) -> str | None:
    try:
        digest = store.read_text(encoding="ascii").strip() if store is not None else None
    except (OSError, ValueError):
        return None
    return digest if digest and len(digest) == 32 and all(c in "0123456789abcdef" for c in digest) else None


def _write(store: Path | None, digest: str) -> None:
    """Keep ``digest`` at ``store`` (through a temporary file); a folder that cannot be written
    keeps it in the process only."""
    if store is None:
        return
    try:
        store.parent.mkdir(parents=True, exist_ok=True)
        partial = store.with_name(f"{store.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        partial.write_text(digest, encoding="ascii")
        os.replace(partial, store)
    except OSError:
        pass
