"""What goes to the Hugging Face Hub on a release, and the upload: one Space per metric.

``evaluate.load("<org>/<name>")`` reads ``<name>.py`` from the *Space* ``<org>/<name>``
(evaluate's ``HUB_EVALUATE_URL`` is a Space URL), so, as with evaluate's own metrics, each
metric's Space is at once its evaluate module and its demo. Its folder is assembled from

- ``metrics/<name>/*.py``: the module (and any flat helper file it imports with a single dot);
  its card and requirements stay in the package (the Space's README links to the card, and the
  Space's requirements install moverkit, which the module imports);
- ``spaces/<name>/``: ``app.py``, ``README.md`` (Space front matter and the card's essentials)
  and ``requirements.txt``,

with the placeholders of the text files replaced: ``{COMMIT_PLACEHOLDER}`` (the released commit,
as evaluate pins its Spaces), ``{REPOSITORY_PLACEHOLDER}`` (the GitHub ``owner/name`` the Space
installs moverkit from) and ``{SPACE_ID_PLACEHOLDER}`` (``<org>/<name>``).

``moverkit publish --dry-run OUT`` assembles and stops; ``.github/workflows/publish.yml`` runs
the same command without ``--dry-run`` on a release tag, which uploads each folder with
``HfApi.upload_folder``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

_TEXT_FILES = (".md", ".txt")
_PLACEHOLDER = re.compile(r"\{[A-Z_]+_PLACEHOLDER\}")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_./-]*$")
_GITHUB_REMOTE = re.compile(r"github\.com[:/]([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+?)(?:\.git)?/?$")


@dataclass(frozen=True)
class Release:
    """Where the Spaces go and what they install: Hub ``org``, GitHub ``repository`` (owner/name)
    and the ``commit`` (or tag) of that repository."""

    org: str
    repository: str
    commit: str

    def __post_init__(self):
        if not _NAME.match(self.org):
            raise ValueError(f"org must be a Hub user or organisation name, got {self.org!r}")
        owner, _, name = self.repository.partition("/")
        if not (_NAME.match(owner) and _NAME.match(name)):
            raise ValueError(f"repository must be a GitHub 'owner/name', got {self.repository!r}")
        if not _REF.match(self.commit):
            raise ValueError(f"commit must be a git commit hash or tag, got {self.commit!r}")

    def space_id(self, name: str) -> str:
        return f"{self.org}/{name}"

    def placeholders(self, name: str) -> dict[str, str]:
        return {
            "{COMMIT_PLACEHOLDER}": self.commit,
            "{REPOSITORY_PLACEHOLDER}": self.repository,
            "{SPACE_ID_PLACEHOLDER}": self.space_id(name),
        }


def space_names(root: Path) -> list[str]:
    """The metrics to publish: every module folder ``metrics/<name>/<name>.py`` of the checkout,
    each of which must have its Space ``spaces/<name>/app.py`` (and no Space may lack a module)."""
    modules = {p.parent.name for p in (root / "metrics").glob("*/*.py") if p.stem == p.parent.name}
    spaces = {p.parent.name for p in (root / "spaces").glob("*/app.py")}
    if modules - spaces:
        raise ValueError(f"metrics without a Space (add spaces/<name>/app.py): {', '.join(sorted(modules - spaces))}")
    if spaces - modules:
        raise ValueError(f"Spaces without a module metrics/<name>/<name>.py: {', '.join(sorted(spaces - modules))}")
    return sorted(modules)


def assemble(root: str | os.PathLike, out: str | os.PathLike, release: Release) -> list[Path]:
    """Write one Space folder per metric under ``out`` (absent or empty) and return them."""
    root, out = Path(root), Path(out)
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} is not empty; give a new or empty folder")
    folders = []
    for name in space_names(root):
        folder = out / name
        sources = {p.name: p for p in sorted((root / "metrics" / name).glob("*.py"))}
        space = root / "spaces" / name
        for path in sorted(space.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                relative = path.relative_to(space).as_posix()
                if relative in sources:
                    raise ValueError(f"spaces/{name}/{relative} would overwrite the module's file of that name")
                sources[relative] = path
        for relative, path in sources.items():
            target = folder / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            if path.suffix in _TEXT_FILES:
                text = _fill(path.read_text(encoding="utf-8"), release.placeholders(name), path)
                target.write_text(text, encoding="utf-8")
            else:
                shutil.copyfile(path, target)
        folders.append(folder)
    return folders


def upload(folders: list[Path], release: Release, *, tag: str | None = None, token: str | None = None) -> list[str]:
    """Create (if needed) and update the Space of each folder, so that it holds exactly the
    folder's files; tag it with ``tag`` (the release). Returns the Space ids. The token defaults
    to ``HF_TOKEN`` (huggingface_hub's own lookup)."""
    from huggingface_hub import HfApi

    from . import __version__

    api = HfApi(token=token)
    ids = []
    for folder in folders:
        repo_id = release.space_id(folder.name)
        api.create_repo(repo_id, repo_type="space", space_sdk="gradio", exist_ok=True)
        api.upload_folder(
            repo_id=repo_id,
            repo_type="space",
            folder_path=folder,
            commit_message=f"moverkit {__version__} ({release.commit[:12]})",
            delete_patterns="*",  # files of an earlier release that this one no longer has
        )
        if tag:
            api.create_tag(repo_id, tag=tag, repo_type="space", exist_ok=True)
        ids.append(repo_id)
    return ids


def find_root(source: str | os.PathLike | None = None) -> Path:
    """The checkout holding ``metrics/`` and ``spaces/``: ``source``, else the one moverkit is
    installed from (an editable install), else the working directory."""
    candidates = [Path(source)] if source else [Path(__file__).resolve().parent.parent, Path.cwd()]
    for root in candidates:
        if (root / "spaces").is_dir() and (root / "metrics").is_dir():
            return root
    raise ValueError(f"no checkout with metrics/ and spaces/ at {' or '.join(map(str, candidates))}; give --source")


def resolve_release(root: Path, org: str, repository: str | None = None, commit: str | None = None) -> Release:
    """Fill what is not given from GitHub Actions' variables, else from the checkout's git."""
    repository = repository or os.environ.get("GITHUB_REPOSITORY") or _origin_repository(root)
    commit = commit or os.environ.get("GITHUB_SHA") or _git(root, "rev-parse", "HEAD")
    if not repository:
        raise ValueError("no GITHUB_REPOSITORY and no origin remote on github.com; give --repository")
    if not commit:
        raise ValueError("cannot tell the commit (no GITHUB_SHA, not a git checkout); give --commit")
    return Release(org, repository, commit)


def _fill(text: str, placeholders: dict[str, str], path: Path) -> str:
    for placeholder, value in placeholders.items():
        text = text.replace(placeholder, value)
    left = _PLACEHOLDER.search(text)
    if left:
        raise ValueError(f"{path} has an unknown placeholder {left.group()}")
    return text


def _origin_repository(root: Path) -> str | None:
    url = _git(root, "remote", "get-url", "origin")
    match = _GITHUB_REMOTE.search(url or "")
    return match.group(1) if match else None


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return done.stdout.strip() or None


__all__ = ["Release", "assemble", "find_root", "resolve_release", "space_names", "upload"]
