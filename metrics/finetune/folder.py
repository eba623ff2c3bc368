"""The output folder of a fine-tuning run (:mod:`moverkit.finetune`) and its safety rules.

A run writes :data:`MARKER` into it, a JSON file that lists what the run wrote
(the model's files, the Trainer's ``checkpoints/checkpoint-N`` folders); a later run writes over
those and nothing else. A non-empty folder without the marker is refused (``overwrite=True`` lets
the model's files replace any of the same name there; nothing else is deleted), and so is a
``checkpoints/checkpoint-N`` folder that no run of ours wrote (the Trainer would delete it when it
rotates its checkpoints, or resume from it). These checks come before any model is loaded.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import tempfile
from pathlib import Path

from moverkit.formats.training_record import MARKER, RECORD_KEY

# MARKER, the file a run writes into its output folder: which moverkit wrote it, and what the run
# wrote there (``files``, the model folder's top-level files; ``checkpoints``, the Trainer's folders
# in ``checkpoints/``; ``epochs_trained``; ``trained_on``, the record of the judgments it trained on,
# moverkit.formats.training_record); a later run may write over these, and over nothing else.

MODEL_FOLDER_FILES = (
    "README.md",
    "config.json",
    "generation_config.json",
    "*.safetensors",
    "*.bin",
    "*.index.json",
    "tokenizer*",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.*",
    "merges.txt",
    "*.model",
    "chat_template.*",
)
"""Names that ``save_pretrained`` of a model and its tokenizer, and the model card, may write: in a
folder of ours, a file so named that no run of ours wrote is refused before training."""


class OutputFolder:
    """The output folder of a run (see the module doc): checked when made, before any work, then
    written by :meth:`begin`, :meth:`saved`, :meth:`install` and :meth:`finish`, which keep
    :data:`MARKER` up to date and touch nothing that no run of ours wrote."""

    def __init__(self, path: str | os.PathLike, *, overwrite: bool = False, resume: bool = False):
        self.path = Path(path)
        self.checkpoints = self.path / "checkpoints"
        self.overwrite = overwrite
        self.resume_from: Path | None = None
        if self.path.exists() and not self.path.is_dir():
            raise ValueError(f"output folder {self.path} is not a folder")
        entries = sorted(os.listdir(self.path)) if self.path.is_dir() else []
        marker = self._read_marker() if MARKER in entries else None
        # What :meth:`abandon` puts back: whether the folders existed, and the earlier run's marker.
        self._existed = (self.path.is_dir(), self.checkpoints.is_dir())
        self._earlier_marker = marker
        if resume and marker is None:
            raise ValueError(
                f"resume=True (--resume) continues an earlier run of moverkit finetune into {self.path}, "
                f"and there is none there (no {MARKER})"
            )
        if marker is None and entries and not overwrite:
            shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
            raise ValueError(
                f"output folder {self.path} is not empty ({shown}) and no run of moverkit finetune wrote it "
                f"(it has no {MARKER}): choose a new or empty folder, or pass overwrite=True (--overwrite) to "
                "write the model's files over any of the same name there (nothing else is deleted)"
            )
        self.files = set((marker or {}).get("files", []))
        self.ours = set((marker or {}).get("checkpoints", []))
        if self.checkpoints.exists() and not self.checkpoints.is_dir():
            raise ValueError(f"{self.checkpoints} is not a folder; the Trainer writes its checkpoints there")
        found = self._trainer_checkpoints()
        foreign = sorted(set(found) - self.ours)
        if foreign:
            raise ValueError(
                f"{self.checkpoints} holds checkpoint folders that no run of moverkit finetune wrote "
                f"({', '.join(foreign)}): the Trainer would delete them as it rotates its checkpoints, or "
                "resume from them; move them away or choose another output folder"
            )
        self.ours &= set(found)
        if marker is not None and not overwrite:
            clash = [
                name
                for name in entries
                if name not in self.files and any(fnmatch.fnmatch(name, p) for p in MODEL_FOLDER_FILES)
            ]
            if clash:
                raise ValueError(
                    f"output folder {self.path} holds {', '.join(clash)}, which no run of moverkit finetune wrote "
                    "and the model folder would replace: move them away, or pass overwrite=True (--overwrite)"
                )
        if resume:
            if not self.ours:
                raise ValueError(
                    f"resume=True (--resume): {self.checkpoints} holds no checkpoint of an earlier run to resume "
                    "from (runs remove theirs at the end unless keep_checkpoints=True / --keep-checkpoints)"
                )
            self.resume_from = self.checkpoints / max(self.ours, key=_checkpoint_step)

    def begin(self) -> None:
        """Create the folder and write the marker (status ``training``); a run that does not
        resume first removes the checkpoints of earlier runs here (they are ours, and the
        Trainer would mix them with its own)."""
        self.path.mkdir(parents=True, exist_ok=True)
        if self.resume_from is None:
            for name in sorted(self.ours):
                shutil.rmtree(self.checkpoints / name, ignore_errors=True)
            self.ours = set()
        self._write_marker("training")

    def saved(self, step: int) -> None:
        """After the Trainer saved ``checkpoint-<step>`` (and maybe rotated older ones away)."""
        self.ours = (self.ours | {f"checkpoint-{step}"}) & set(self._trainer_checkpoints())
        self._write_marker("training")

    def install(self, model, tokenizer, card: str) -> None:
        """Write the model folder: ``model`` and ``tokenizer`` (``save_pretrained``) and the card
        (README.md), staged in a new folder inside the output folder and moved in once none of
        them would replace a file that no run of ours wrote (unless ``overwrite``); files of the
        earlier run that this one does not write again are removed."""
        staging = Path(tempfile.mkdtemp(prefix=".moverkit-finetune-", dir=self.path))
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        (staging / "README.md").write_text(card, encoding="utf-8")
        names = sorted(os.listdir(staging))
        clash = [n for n in names if os.path.lexists(self.path / n) and n not in self.files]
        if clash and not self.overwrite:
            raise FileExistsError(
                f"output folder {self.path} holds {', '.join(clash)}, which no run of moverkit finetune wrote: "
                f"nothing was replaced; the fine-tuned model folder is in {staging}"
            )
        stale = self.files - set(names)
        self.files |= set(names)
        self._write_marker("training")  # ours before they are moved in, should the move be cut short
        for name in names:
            os.replace(staging / name, self.path / name)
        for name in sorted(stale):
            if (self.path / name).is_file():
                (self.path / name).unlink()
        staging.rmdir()
        self.files = set(names)

    def abandon(self) -> None:
        """After a run that produced nothing worth keeping (training diverged): remove the
        checkpoints this run wrote, put the earlier run's marker back (or remove ours), and remove
        ``checkpoints/`` and the folder itself where this run made them and left them empty. The
        model files of an earlier run are untouched (:meth:`install` was not called)."""
        earlier = set((self._earlier_marker or {}).get("checkpoints", []))
        for name in sorted(self.ours - earlier):
            shutil.rmtree(self.checkpoints / name, ignore_errors=True)
        self.ours &= earlier
        staged = self.path / (MARKER + ".tmp")
        if staged.exists():
            staged.unlink()
        if self._earlier_marker is None:
            (self.path / MARKER).unlink(missing_ok=True)
        else:
            marker = dict(self._earlier_marker, checkpoints=sorted(self.ours, key=_checkpoint_step))
            (self.path / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
        path_existed, checkpoints_existed = self._existed
        for folder, existed in ((self.checkpoints, checkpoints_existed), (self.path, path_existed)):
            if not existed and folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()

    def finish(self, keep_checkpoints: bool, epochs_trained: int, trained_on: dict) -> None:
        """Remove the checkpoints of our runs (unless ``keep_checkpoints``), then ``checkpoints/``
        if nothing else is in it, and mark the run complete with the record of what it trained on
        (:func:`~moverkit.formats.training_record.training_record`)."""
        if not keep_checkpoints:
            for name in sorted(self.ours):
                if (self.checkpoints / name).is_dir():
                    shutil.rmtree(self.checkpoints / name)
            self.ours = set()
            if self.checkpoints.is_dir() and not any(self.checkpoints.iterdir()):
                self.checkpoints.rmdir()
        self._write_marker("complete", epochs_trained=epochs_trained, **{RECORD_KEY: trained_on})

    def _trainer_checkpoints(self) -> list[str]:
        """The folders of ``checkpoints/`` that the Trainer counts as its checkpoints (it rotates
        and resumes from ``checkpoint-*`` folders)."""
        if not self.checkpoints.is_dir():
            return []
        return sorted(p.name for p in self.checkpoints.glob("checkpoint-*") if p.is_dir())

    def _read_marker(self) -> dict:
        path = self.path / MARKER
        try:
            marker = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise ValueError(f"{path} cannot be read as moverkit finetune's marker ({err}); remove it") from None
        names = [marker.get(key, []) for key in ("files", "checkpoints")] if isinstance(marker, dict) else None
        if (
            names is None
            or marker.get("written_by") != "moverkit finetune"
            or not all(isinstance(listed, list) and all(map(_plain_name, listed)) for listed in names)
        ):
            raise ValueError(f"{path} is not moverkit finetune's marker (a JSON object listing files and checkpoints)")
        return marker

    def _write_marker(self, status: str, **extra) -> None:
        from moverkit.facts.version import __version__

        marker = {
            "written_by": "moverkit finetune",
            "moverkit_version": __version__,
            "status": status,
            "files": sorted(self.files),
            "checkpoints": sorted(self.ours, key=_checkpoint_step),
            **extra,
        }
        staged = self.path / (MARKER + ".tmp")
        staged.write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
        os.replace(staged, self.path / MARKER)


def _plain_name(name) -> bool:
    """A file name in a folder, no path (a marker's list names nothing outside the folder)."""
    return isinstance(name, str) and name not in ("", ".", "..") and os.path.basename(name) == name and "\\" not in name


def _checkpoint_step(name: str) -> int:
    """The step of a ``checkpoint-<step>`` folder (-1 if the name has none)."""
    step = name.rpartition("-")[2]
    return int(step) if step.isdigit() else -1
