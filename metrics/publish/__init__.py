"""What goes to the Hugging Face Hub on a release, and the upload: one Space per metric.

``evaluate.load("<org>/<name>")`` reads ``<name>.py`` from the *Space* ``<org>/<name>``
(evaluate's ``HUB_EVALUATE_URL`` is a Space URL), so, as with evaluate's own metrics, each
metric's Space is at once its evaluate module and its demo. Its folder is assembled from

- ``metrics/<name>/*.py``: the module (and any flat helper file it imports with a single dot);
  its card and requirements stay in the package (the Space's README links to the card, and the
  Space's requirements install moverkit, which the module imports);
- ``spaces/<name>/``: ``app.py``, ``README.md`` (Space front matter and the card's essentials)
  and ``requirements.txt``,

with the placeholders of the text files replaced: ``{VERSION_PLACEHOLDER}`` (``moverkit.__version__``:
the Space's requirements pin that release of the ``moverkit`` distribution on PyPI, which the
publish workflow uploads first), ``{COMMIT_PLACEHOLDER}`` (the released commit,
a full 40-hex hash, as evaluate pins its Spaces: a branch or tag could move), ``{REPOSITORY_PLACEHOLDER}``
(the GitHub ``owner/name`` the Space installs moverkit from) and ``{SPACE_ID_PLACEHOLDER}``
(``<org>/<name>``).

Only regular files are published: a dotfile or anything under a dot-folder (``.env``, ``.git/``)
and Python's caches are left out, and a symbolic link (or any other special file) is an error, as
its target could be any file of the machine.

``moverkit publish --dry-run OUT`` assembles and stops (with placeholders for the repository and
commit it cannot tell); ``.github/workflows/publish.yml`` runs the same command without
``--dry-run`` on a release tag, which uploads each folder with ``HfApi.upload_folder``.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

_TEXT_FILES = (".md", ".txt")
_PLACEHOLDER = re.compile(r"\{[A-Z_]+_PLACEHOLDER\}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_COMMIT = re.compile(r"[0-9a-f]{40}")
_GITHUB_REMOTE = re.compile(r"github\.com[:/]([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+?)(?:\.git)?/?$")

DRY_RUN_REPOSITORY = "OWNER/moverkit"
"""What a dry run's Spaces install moverkit from when the repository cannot be told."""

DRY_RUN_COMMIT = "0" * 40
"""What a dry run's Spaces install when the commit cannot be told (not a git checkout)."""


@dataclass(frozen=True)
class Release:
    """Where the Spaces go and what they install: Hub ``org``, GitHub ``repository`` (owner/name)
    and the ``commit`` of that repository (its full 40-hex hash)."""

    org: str
    repository: str
    commit: str

    def __post_init__(self):
        if not _NAME.fullmatch(self.org):
            raise ValueError(f"org must be a Hub user or organisation name, got {self.org!r}")
        owner, _, name = self.repository.partition("/")
        if not (_NAME.fullmatch(owner) and _NAME.fullmatch(name)):
            raise ValueError(f"repository must be a GitHub 'owner/name', got {self.repository!r}")
        if not _COMMIT.fullmatch(self.commit):
            raise ValueError(f"commit must be a full 40-character git commit hash (lowercase hex), got {self.commit!r}")

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
    """Write one Space folder per metric under ``out`` (absent or empty) and return them.

    Whole or not at all: the folders are assembled in a temporary folder beside ``out``, which
    takes its name at the end; a failure (an unknown placeholder, say) leaves ``out`` as it was."""
    root, out = Path(root), Path(os.path.realpath(out))  # a link to a folder: the folder is filled, the link kept
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out} is a file; give a new or empty folder")
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} is not empty; give a new or empty folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".part", dir=out.parent))
    try:
        names = _assemble_into(root, staging, release)
        if out.exists():
            out.rmdir()  # empty, checked above
        os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return [out / name for name in names]


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path} is not UTF-8 text ({err.reason} at byte {err.start})") from None


def _assemble_into(root: Path, out: Path, release: Release) -> list[str]:
    names = []
    version = source_version(root)
    for name in space_names(root):
        folder = out / name
        sources = _published_files(root / "metrics" / name, "*.py")
        for relative, path in _published_files(root / "spaces" / name, "**/*").items():
            if relative in sources:
                raise ValueError(f"spaces/{name}/{relative} would overwrite the module's file of that name")
            sources[relative] = path
        for relative, path in sources.items():
            target = folder / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            if path.suffix in _TEXT_FILES:
                placeholders = {**release.placeholders(name), **version}
                text = _fill(_read_text(path), placeholders, path)
                card = root / "metrics" / name / "README.md"
                if relative == "README.md" and card.is_file():
                    text = with_card_metadata(text, card.read_text(encoding="utf-8"))
                target.write_text(text, encoding="utf-8")
            else:
                shutil.copyfile(path, target)
        names.append(name)
    return names


CARD_KEYS = ("title", "emoji", "colorFrom", "colorTo", "description")
"""Front matter keys whose one source is the metric card (``metrics/<name>/README.md``): the
published Space README takes them from it (``description`` is the key evaluate reads)."""


def front_matter(markdown: str) -> tuple[dict, str]:
    """The YAML front matter of a Markdown file (``{}`` if none) and the text after it."""
    import yaml

    if markdown.startswith("---\n"):
        end = markdown.find("\n---\n", 4)
        if end != -1:
            return yaml.safe_load(markdown[4:end]) or {}, markdown[end + 5 :]
    return {}, markdown


def with_card_metadata(space_readme: str, card: str) -> str:
    """The Space README with the card's :data:`CARD_KEYS` first in its front matter."""
    import yaml

    space_meta, body = front_matter(space_readme)
    card_meta, _ = front_matter(card)
    meta = {key: card_meta[key] for key in CARD_KEYS if key in card_meta}
    meta.update((key, value) for key, value in space_meta.items() if key not in CARD_KEYS)
    return "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=100) + "---\n" + body


def source_version(root: Path) -> dict[str, str]:
    """``{VERSION_PLACEHOLDER}``: ``__version__`` of the checkout ``root`` (its
    ``metrics/facts/version.py``), the moverkit release on PyPI that the Spaces pin; none where the
    checkout sets no version (a file using the placeholder is then an error)."""
    init = root / "metrics" / "facts" / "version.py"
    match = re.search(r'^__version__ = "([^"]+)"', init.read_text(encoding="utf-8"), re.M) if init.is_file() else None
    return {"{VERSION_PLACEHOLDER}": match.group(1)} if match else {}


def _published_files(folder: Path, pattern: str) -> dict[str, Path]:
    """The files of ``folder`` matching ``pattern`` that its Space gets, by relative path: regular
    files, less dotfiles, anything under a dot-folder and Python's caches. A symbolic link (the
    folder itself too) or any other special file is an error: a link to ``/etc/passwd`` must not
    become a published file."""
    files = {}
    for path in [folder, *sorted(folder.glob(pattern))]:
        relative = path.relative_to(folder)
        if any(part.startswith(".") or part == "__pycache__" for part in relative.parts) or path.suffix == ".pyc":
            continue
        mode = path.lstat().st_mode
        if stat.S_ISDIR(mode):
            continue
        if not stat.S_ISREG(mode):
            kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
            raise ValueError(f"{path} is {kind}; a Space is assembled from regular files only")
        files[relative.as_posix()] = path
    return files


def upload(folders: list[Path], release: Release, *, tag: str | None = None, token: str | None = None) -> list[str]:
    """Create (if needed) and update the Space of each folder, so that it holds exactly the
    folder's files; tag it with ``tag`` (the release). Returns the Space ids. The token defaults
    to ``HF_TOKEN`` (huggingface_hub's own lookup)."""
    from huggingface_hub import HfApi

    from moverkit.facts.version import __version__

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
    candidates = [Path(source)] if source else [Path(__file__).resolve().parents[2], Path.cwd()]
    for root in candidates:
        if (root / "spaces").is_dir() and (root / "metrics").is_dir():
            return root
    raise ValueError(f"no checkout with metrics/ and spaces/ at {' or '.join(map(str, candidates))}; give --source")


def resolve_release(
    root: Path, org: str, repository: str | None = None, commit: str | None = None, *, dry_run: bool = False
) -> Release:
    """Fill what is not given from GitHub Actions' variables, else from the checkout's git; in a
    dry run, what is still unknown is a placeholder (:data:`DRY_RUN_REPOSITORY`,
    :data:`DRY_RUN_COMMIT`), as nothing is uploaded."""
    repository = repository or os.environ.get("GITHUB_REPOSITORY") or _origin_repository(root)
    commit = commit or os.environ.get("GITHUB_SHA") or _git(root, "rev-parse", "HEAD")
    if dry_run:
        repository, commit = repository or DRY_RUN_REPOSITORY, commit or DRY_RUN_COMMIT
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


__all__ = [
    "DRY_RUN_COMMIT",
    "DRY_RUN_REPOSITORY",
    "Release",
    "assemble",
    "find_root",
    "resolve_release",
    "space_names",
    "upload",
]
