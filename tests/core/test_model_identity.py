"""A local model is known by all it holds, never by its folder's name (issue 66, trust round 8).

Before, a local folder's name in hashcodes was ``<folder name>@<digest of its config, tokenizer and
each weights file's first and last MiB>``, and a folder whose light weights fingerprint matched a
known model took that model's Hub id: a renamed copy was another model, a changed middle block, a
changed Pooling, Dense or prompt of a sentence pipeline was the same one, and a fine-tune of the
embedded model took its hashcode and its shipped statistic.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from moverkit._core.encoding import contents
from moverkit._core.encoding.request import DEFAULT_MODEL, embedded_model_path, resolve_model, weights_fingerprint

PAIRS = (["the cat sat on the mat", "markets fell sharply"], ["a cat sat on a mat", "stocks dropped"])


@pytest.fixture
def digest_cache(tmp_path, monkeypatch):
    """Digests kept in a folder of the test's own, and none kept in the process."""
    monkeypatch.setenv("MOVERKIT_CENTERING_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(contents, "_KNOWN", {})
    return tmp_path / "cache" / "digests"


def _copy(source, target: Path) -> Path:
    return Path(shutil.copytree(source, target))


@pytest.mark.slow
def test_a_renamed_or_moved_copy_is_the_same_model_with_the_same_statistic(tiny_model_path, tmp_path):
    from moverkit import fit_centering
    from moverkit.functional import centered_bertscore

    copy = _copy(tiny_model_path, tmp_path / "runs" / "x" / "final_model")
    assert resolve_model(str(copy))[0] == resolve_model(tiny_model_path)[0]
    assert resolve_model(str(copy))[0].startswith("local@")
    assert Path(tiny_model_path).name not in resolve_model(tiny_model_path)[0]
    corpus = [
        f"text number {i} about the {w}"
        for i, w in enumerate(("cat", "dog", "sun", "rain", "sea", "car", "bus", "map", "pen", "cup"))
    ]
    stats = fit_centering(corpus, tiny_model_path)
    original = centered_bertscore(*PAIRS, model_type=tiny_model_path, centering_stats=stats)
    moved = centered_bertscore(*PAIRS, model_type=str(copy), centering_stats=stats)  # accepted by contents
    assert moved == original


@pytest.mark.slow
def test_a_changed_middle_block_is_another_model(tmp_path):
    """Block 3 of 6 changed, in a weights file where it lies over 1 MiB from both ends (where the
    old digest read): another name, another hashcode, another score."""
    from safetensors.torch import load_file, save_file
    from transformers import AutoTokenizer, BertConfig, BertModel

    from moverkit.functional import centered_bertscore

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_path())
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=128, num_hidden_layers=6, num_attention_heads=4)
    base = tmp_path / "base"
    BertModel(config).eval().save_pretrained(base)
    tokenizer.save_pretrained(base)
    changed = _copy(base, tmp_path / "changed")
    weights = load_file(changed / "model.safetensors")
    key = "encoder.layer.3.attention.self.query.weight"
    weights[key] = weights[key] + 0.05
    save_file(weights, changed / "model.safetensors", metadata={"format": "pt"})
    size = (changed / "model.safetensors").stat().st_size
    start, end = _offsets(changed / "model.safetensors", key)
    assert start > 1 << 20 and end < size - (1 << 20)
    assert resolve_model(str(changed))[0] != resolve_model(str(base))[0]
    before = centered_bertscore(*PAIRS, model_type=str(base), centering="none")
    after = centered_bertscore(*PAIRS, model_type=str(changed), centering="none")
    assert before["hashcode"] != after["hashcode"] and before["f1"] != after["f1"]


def _offsets(path: Path, key: str) -> tuple[int, int]:
    """The byte range of tensor ``key`` in a safetensors file (its 8-byte header length, the JSON
    header, then the data)."""
    raw = path.read_bytes()
    length = int.from_bytes(raw[:8], "little")
    begin, end = json.loads(raw[8 : 8 + length])[key]["data_offsets"]
    return 8 + length + begin, 8 + length + end


def _pipeline(tmp_path: Path, name: str, edit) -> Path:
    """A copy of the embedded sentence-transformers folder with ``edit(folder)`` applied."""
    folder = _copy(embedded_model_path(), tmp_path / name)
    edit(folder)
    return folder


def _cls_pooling(folder: Path) -> None:
    config = json.loads((folder / "1_Pooling" / "config.json").read_text())
    config.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(config))


def _prompt(folder: Path) -> None:
    config = json.loads((folder / "config_sentence_transformers.json").read_text())
    config.update(prompts={"query": "query: "}, default_prompt_name="query")
    (folder / "config_sentence_transformers.json").write_text(json.dumps(config))


def _dense(folder: Path) -> None:
    from sentence_transformers.models import Dense

    torch.manual_seed(0)
    (folder / "2_Dense").mkdir()
    Dense(384, 384).save(str(folder / "2_Dense"))
    modules = json.loads((folder / "modules.json").read_text())
    modules.append({"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    (folder / "modules.json").write_text(json.dumps(modules))


def _card(folder: Path) -> None:
    (folder / "README.md").write_text("my own notes")
    (folder / ".moverkit-finetune.json").write_text("{}")


@pytest.mark.slow
@pytest.mark.parametrize("edit", [_cls_pooling, _prompt, _dense])
def test_a_pipeline_module_or_prompt_changed_is_another_model(tmp_path, edit):
    """Pooling, a Dense module or a default prompt change a sentence vector: another name, so
    neither the embedded model's hashcode nor its shipped baselines and statistics."""
    from moverkit._core.encoding.sentences import get_sentence_encoder

    folder = _pipeline(tmp_path, edit.__name__.strip("_"), edit)
    name = resolve_model(str(folder))[0]
    assert name != DEFAULT_MODEL and name.startswith("local@")
    assert get_sentence_encoder(str(folder)).name == name  # its weights' fingerprint renames it no more


def test_what_no_load_reads_leaves_the_model_as_it_is(tmp_path):
    """A model card or a hidden marker beside the model: still the embedded model."""
    folder = _pipeline(tmp_path, "with-card", _card)
    assert resolve_model(str(folder))[0] == DEFAULT_MODEL


@pytest.mark.slow
def test_a_fine_tune_of_the_embedded_model_is_its_own_model_with_its_own_mean(tmp_path, monkeypatch):
    """A middle block trained, the [PAD] row and the pooler untouched (no gradient reaches them):
    the light fingerprint still matches MiniLM (which gives it MiniLM's layer), but its name, its
    hashcode and its corpus mean are its own (fitted, with the warning), never the shipped one."""
    from safetensors.torch import load_file, save_file

    from moverkit._core.centering import fit
    from moverkit._core.encoding.models import load_encoder
    from moverkit.functional import twmd

    tuned = _copy(embedded_model_path(), tmp_path / "twmd-b-wmt17")
    weights = load_file(tuned / "model.safetensors")
    key = next(k for k in weights if "layer.2.attention.self.query.weight" in k)
    weights[key] = weights[key] * 1.05
    save_file(weights, tuned / "model.safetensors", metadata={"format": "pt"})
    encoder = load_encoder(str(tuned))
    assert weights_fingerprint(encoder.model) == weights_fingerprint(load_encoder().model)  # what renamed it
    assert encoder.name.startswith("local@") and encoder.layer == 6

    monkeypatch.setenv("MOVERKIT_CENTERING_CACHE", str(tmp_path / "cache"))
    corpus = [f"sentence {i} of a small corpus about the {w}" for i, w in enumerate("abcdefghijkl")]
    monkeypatch.setattr(fit, "default_corpus", lambda: corpus)
    with pytest.warns(UserWarning, match=r"no statistic ships for local@"):
        result = twmd(*PAIRS, model_type=str(tuned))
    shipped = twmd(*PAIRS)
    assert result["hashcode"] != shipped["hashcode"]
    assert DEFAULT_MODEL not in result["hashcode"]


def test_a_digest_is_read_once_then_kept_by_path_size_and_time(tiny_model_path, digest_cache, monkeypatch):
    reads = []
    real = contents.xxhash.xxh3_128
    monkeypatch.setattr(contents.xxhash, "xxh3_128", lambda: reads.append(1) or real())
    first = contents.model_digest(tiny_model_path)
    n = len(reads)
    assert n == len(contents.scored_files(Path(tiny_model_path))) > 0
    assert contents.model_digest(tiny_model_path) == first and len(reads) == n  # the process keeps it
    monkeypatch.setattr(contents, "_KNOWN", {})  # a new process: read from the cache folder
    assert contents.model_digest(tiny_model_path) == first and len(reads) == n
    assert len(list(digest_cache.glob("*.txt"))) == n


def test_a_file_written_over_is_hashed_again(tmp_path, tiny_model_path, digest_cache):
    folder = _copy(tiny_model_path, tmp_path / "m")
    before = contents.model_digest(folder)
    config = json.loads((folder / "config.json").read_text())
    config["layer_norm_eps"] = 1e-5
    (folder / "config.json").write_text(json.dumps(config))
    assert contents.model_digest(folder) != before
