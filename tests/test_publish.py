"""``moverkit publish --dry-run``: exactly the folders a release uploads, one Space per metric, each
an evaluate module that loads offline and computes, and a Gradio app that starts."""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
from pathlib import Path

import pytest

import moverkit
from moverkit.cli import main
from moverkit.publish import (
    DRY_RUN_COMMIT,
    DRY_RUN_REPOSITORY,
    Release,
    assemble,
    resolve_release,
    space_names,
    with_card_metadata,
)

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"

ROOT = Path(__file__).resolve().parents[1]
REPOSITORY = "acme/moverkit"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
ORG = "acme-org"
PREDICTIONS = ["the cat sat on the mat", "hello there"]
REFERENCES = ["a cat was sitting on the mat", "hello there"]


@pytest.fixture(scope="module")
def assembled(tmp_path_factory):
    out = tmp_path_factory.mktemp("publish") / "hub"
    argv = ["publish", "--dry-run", str(out), "--org", ORG, "--repository", REPOSITORY, "--commit", COMMIT]
    assert main(argv) == 0
    return out


@pytest.fixture
def no_network(monkeypatch):
    """Any connection or name lookup beyond the loopback interface fails the test."""
    loopback = {"127.0.0.1", "::1", "localhost"}
    connect, getaddrinfo = socket.socket.connect, socket.getaddrinfo

    def guarded_connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in loopback:
            raise AssertionError(f"network access to {address}")
        return connect(self, address)

    def guarded_getaddrinfo(host, *args, **kwargs):
        if host not in loopback:
            raise AssertionError(f"name lookup of {host}")
        return getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket, "getaddrinfo", guarded_getaddrinfo)


def _files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def test_one_space_per_metric_holding_the_module_and_the_app(assembled):
    assert sorted(p.name for p in assembled.iterdir()) == sorted(moverkit.METRICS)
    for name in moverkit.METRICS:
        folder, space = assembled / name, ROOT / "spaces" / name
        module_files = {p.name for p in moverkit.module_path(name).glob("*.py")}
        assert f"{name}.py" in module_files
        assert _files(folder) == module_files | {"app.py", "README.md", "requirements.txt"}
        for file in module_files:
            assert (folder / file).read_bytes() == (moverkit.module_path(name) / file).read_bytes()
        assert (folder / "app.py").read_bytes() == (space / "app.py").read_bytes()

        requirements = (folder / "requirements.txt").read_text()
        assert f"moverkit[demo]=={moverkit.__version__}\n" in requirements
        readme = (folder / "README.md").read_text()
        assert f'evaluate.load("{ORG}/{name}")' in readme
        assert f"https://github.com/{REPOSITORY}/blob/{COMMIT}/metrics/{name}/README.md" in readme
        assert "PLACEHOLDER" not in requirements + readme
        # Only the placeholders changed.
        source = (space / "README.md").read_text()
        filled = source.replace("{SPACE_ID_PLACEHOLDER}", f"{ORG}/{name}").replace(
            "{VERSION_PLACEHOLDER}", moverkit.__version__
        )
        filled = filled.replace("{REPOSITORY_PLACEHOLDER}", REPOSITORY).replace("{COMMIT_PLACEHOLDER}", COMMIT)
        card = (moverkit.module_path(name) / "README.md").read_text()
        assert readme == with_card_metadata(filled, card)  # and the card's title, emoji, description


@pytest.mark.parametrize("name", moverkit.METRICS)
def test_assembled_module_loads_offline_and_computes(assembled, name, load_metric, no_network):
    import evaluate

    metric = evaluate.load(str(assembled / name))
    result = metric.compute(predictions=PREDICTIONS, references=REFERENCES)
    assert result == load_metric(name).compute(predictions=PREDICTIONS, references=REFERENCES)


@pytest.mark.integration  # starts each assembled Space's app
@pytest.mark.parametrize("name", moverkit.METRICS)
def test_assembled_space_starts_and_scores(assembled, name, no_network):
    pytest.importorskip("gradio")
    import httpx
    from gradio_client import Client

    spec = importlib.util.spec_from_file_location(f"_published_app_{name}", assembled / name / "app.py")
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)  # builds the demo, as the Space's `python app.py` does
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app.demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True, ssr_mode=False)
    try:
        url = f"http://127.0.0.1:{port}/"
        config = httpx.get(url + "config", timeout=30).json()
        # The page shows the assembled README: its placeholders are filled in.
        assert f"{ORG}/{name}" in str(config["components"])
        client = Client(url, verbose=False, analytics_enabled=False)
        hashcode = client.predict(predictions_text="a cat", references_text="the cat", api_name="/score")[2]
        assert hashcode.startswith(f"{name}:")
    finally:
        app.demo.close()


def test_every_metric_needs_its_space_and_every_space_its_metric(tmp_path):
    for name in ("alpha", "beta"):
        (tmp_path / "metrics" / name).mkdir(parents=True)
        (tmp_path / "metrics" / name / f"{name}.py").write_text("")
    (tmp_path / "spaces" / "beta").mkdir(parents=True)
    (tmp_path / "spaces" / "beta" / "app.py").write_text("")
    (tmp_path / "spaces" / "gamma").mkdir(parents=True)
    (tmp_path / "spaces" / "gamma" / "app.py").write_text("")
    with pytest.raises(ValueError, match="metrics without a Space .*: alpha"):
        space_names(tmp_path)
    shutil.rmtree(tmp_path / "metrics" / "alpha")
    with pytest.raises(ValueError, match="Spaces without a module .*: gamma"):
        space_names(tmp_path)


def test_refuses_a_folder_in_use_and_an_unknown_placeholder(tmp_path):
    release = Release(ORG, REPOSITORY, COMMIT)
    used = tmp_path / "used"
    used.mkdir()
    (used / "old").write_text("x")
    with pytest.raises(ValueError, match="not empty"):
        assemble(ROOT, used, release)
    (tmp_path / "root" / "metrics" / "m").mkdir(parents=True)
    (tmp_path / "root" / "metrics" / "m" / "m.py").write_text("")
    (tmp_path / "root" / "spaces" / "m").mkdir(parents=True)
    (tmp_path / "root" / "spaces" / "m" / "app.py").write_text("")
    (tmp_path / "root" / "spaces" / "m" / "README.md").write_text("{TOKEN_PLACEHOLDER}")
    with pytest.raises(ValueError, match="unknown placeholder {TOKEN_PLACEHOLDER}"):
        assemble(tmp_path / "root", tmp_path / "out", release)
    # Nothing half-assembled is left behind: no out folder, no temporary one.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root", "used"]


@pytest.mark.parametrize(
    ("org", "repository", "commit", "wrong"),
    [
        ("acme org", REPOSITORY, COMMIT, "org"),
        (ORG, "moverkit", COMMIT, "repository"),
        (ORG, REPOSITORY, "a b", "commit"),
        # A branch or tag can move, and a "commit" is pasted into a pip requirement and a URL.
        (ORG, REPOSITORY, "main", "commit"),
        (ORG, REPOSITORY, "v1.0.0", "commit"),
        (ORG, REPOSITORY, "a/../../x", "commit"),
        (ORG, REPOSITORY, COMMIT[:12], "commit"),
        (ORG, REPOSITORY, COMMIT + "0", "commit"),
        (ORG, REPOSITORY, COMMIT.upper(), "commit"),
        # `$` matches before a trailing newline: the newline would land in the Space card's link.
        (ORG, REPOSITORY, "0" * 40 + "\n", "commit"),
        (ORG + "\n", REPOSITORY, COMMIT, "org"),
        (ORG, REPOSITORY + "\n", COMMIT, "repository"),
        (ORG, "octo\n/moverkit", COMMIT, "repository"),
    ],
)
def test_release_names_are_checked(org, repository, commit, wrong):
    with pytest.raises(ValueError, match=f"^{wrong} must"):
        Release(org, repository, commit)


def test_release_comes_from_github_actions_variables(monkeypatch, tmp_path):
    monkeypatch.setenv("GITHUB_REPOSITORY", "octo/moverkit")
    monkeypatch.setenv("GITHUB_SHA", "f" * 40)
    assert resolve_release(tmp_path, ORG) == Release(ORG, "octo/moverkit", "f" * 40)
    assert resolve_release(tmp_path, ORG, "a/b", "e" * 40) == Release(ORG, "a/b", "e" * 40)
    monkeypatch.delenv("GITHUB_REPOSITORY")
    with pytest.raises(ValueError, match="give --repository"):
        resolve_release(tmp_path, ORG)  # not a git checkout: no origin remote to read
    monkeypatch.delenv("GITHUB_SHA")
    with pytest.raises(ValueError, match="give --commit"):
        resolve_release(tmp_path, ORG, "a/b")
    # A dry run uploads nothing: what it cannot tell is a placeholder.
    assert resolve_release(tmp_path, ORG, dry_run=True) == Release(ORG, DRY_RUN_REPOSITORY, DRY_RUN_COMMIT)
    assert resolve_release(tmp_path, ORG, "a/b", "e" * 40, dry_run=True) == Release(ORG, "a/b", "e" * 40)


def _checkout(root: Path) -> Path:
    """A checkout of one metric ``m``: its module, and a Space with placeholders to fill."""
    for relative, text in {
        "metrics/m/m.py": "# module",
        "metrics/m/helper.py": "# helper",
        "spaces/m/app.py": "# app",
        "spaces/m/requirements.txt": "moverkit @ git+https://github.com/{REPOSITORY_PLACEHOLDER}@{COMMIT_PLACEHOLDER}\n",
        "spaces/m/assets/logo.txt": "logo",
    }.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    return root


def test_only_regular_files_are_published_no_dotfiles(tmp_path):
    root = _checkout(tmp_path / "root")
    for relative in ("spaces/m/.env", "spaces/m/.git/config", "spaces/m/assets/.DS_Store", "metrics/m/.hidden.py"):
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text("SECRET=1")
    (root / "spaces/m/__pycache__").mkdir()
    (root / "spaces/m/__pycache__/app.cpython-311.pyc").write_bytes(b"\0")
    (folder,) = assemble(root, tmp_path / "out", Release(ORG, REPOSITORY, COMMIT))
    assert _files(folder) == {"m.py", "helper.py", "app.py", "requirements.txt", "assets/logo.txt"}


@pytest.mark.parametrize(
    ("link", "target"),
    [
        ("spaces/m/passwd", "/etc/passwd"),
        ("spaces/m/assets/hosts.txt", "/etc/hosts"),
        ("spaces/m/etc", "/etc"),  # a folder
        ("metrics/m/linked.py", "spaces/m/app.py"),  # even inside the checkout
    ],
)
def test_a_symbolic_link_is_refused(tmp_path, link, target):
    root = _checkout(tmp_path / "root")
    (root / link).symlink_to(target if target.startswith("/") else root / target)
    with pytest.raises(ValueError, match=f"^{root / link} is a symbolic link; a Space is assembled from regular files"):
        assemble(root, tmp_path / "out", Release(ORG, REPOSITORY, COMMIT))
    assert not any((tmp_path / "out").rglob("passwd"))


def test_cli_publish_mistakes_are_messages_not_tracebacks(tmp_path, capsys):
    root = _checkout(tmp_path / "root")
    (tmp_path / "file").write_text("x")
    base = ["publish", "--dry-run", "--source", str(root), "--repository", REPOSITORY]
    for argv, message in (
        (
            [*base, str(tmp_path / "file"), "--commit", COMMIT],
            f"{tmp_path / 'file'} is a file; give a new or empty folder",
        ),
        ([*base, str(tmp_path / "a"), "--commit", "main"], "commit must be a full 40-character git commit hash"),
        ([*base, str(tmp_path / "b"), "--commit", "a/../../x"], "commit must be a full 40-character git commit hash"),
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("moverkit: error: ") and message in err and "Traceback" not in err
    assert (tmp_path / "file").read_text() == "x" and not (tmp_path / "a").exists()


def test_cli_dry_run_without_repository_or_commit_uses_placeholders(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("GITHUB_REPOSITORY", raising=False)
    monkeypatch.delenv("GITHUB_SHA", raising=False)
    root = _checkout(tmp_path / "root")  # not a git checkout: no origin remote, no HEAD
    assert main(["publish", "--dry-run", str(tmp_path / "out"), "--source", str(root)]) == 0
    requirements = (tmp_path / "out" / "m" / "requirements.txt").read_text()
    assert requirements == f"moverkit @ git+https://github.com/{DRY_RUN_REPOSITORY}@{DRY_RUN_COMMIT}\n"
    assert "(placeholders where not given and not found)" in capsys.readouterr().out
    # Without --dry-run the same command refuses (it would upload).
    assert main(["publish", str(tmp_path / "out2"), "--source", str(root)]) == 2
    assert "give --repository" in capsys.readouterr().err


def test_upload_makes_each_folder_the_whole_content_of_its_space(monkeypatch, tmp_path):
    """The Hub calls, recorded (no network here): a Gradio Space per folder, created if absent,
    updated to hold exactly the folder (files of an earlier release deleted), then tagged."""
    import huggingface_hub

    from moverkit.publish import upload

    calls = []

    class RecordingApi:
        def __init__(self, token=None):
            calls.append(("HfApi", token))

        def __getattr__(self, method):
            return lambda *args, **kwargs: calls.append((method, args, kwargs))

    monkeypatch.setattr(huggingface_hub, "HfApi", RecordingApi)
    folders = [tmp_path / "lazy_emd", tmp_path / "twmd"]
    assert upload(folders, Release(ORG, REPOSITORY, COMMIT), tag="v0.1.0", token="t") == [
        f"{ORG}/lazy_emd",
        f"{ORG}/twmd",
    ]
    assert calls[0] == ("HfApi", "t")
    for k, folder in enumerate(folders):
        create, send, tag = calls[1 + 3 * k : 4 + 3 * k]
        repo_id = f"{ORG}/{folder.name}"
        assert create == ("create_repo", (repo_id,), {"repo_type": "space", "space_sdk": "gradio", "exist_ok": True})
        assert send[0] == "upload_folder" and send[2]["repo_id"] == repo_id and send[2]["folder_path"] == folder
        assert send[2]["repo_type"] == "space" and send[2]["delete_patterns"] == "*"
        assert COMMIT[:12] in send[2]["commit_message"]
        assert tag == ("create_tag", (repo_id,), {"tag": "v0.1.0", "repo_type": "space", "exist_ok": True})


def test_every_version_literal_is_the_package_version():
    """The modules' requirements and their install hint must name a version literally (they are
    read where moverkit is absent): each literal is the package's version, so a release bump
    that misses one fails here, not on the Hub."""
    import re

    literals = {
        path.relative_to(ROOT): re.findall(r"moverkit(?:\[\w+\])?==([\w.]+)", path.read_text(encoding="utf-8"))
        for name in moverkit.METRICS
        for path in (ROOT / "metrics" / name / "requirements.txt", ROOT / "metrics" / name / f"{name}.py")
    }
    assert all(literals.values()), {p: v for p, v in literals.items() if not v}
    assert {v for found in literals.values() for v in found} == {moverkit.__version__}, literals


def test_a_space_file_that_is_not_utf8_is_named(tmp_path):
    (tmp_path / "root" / "metrics" / "m").mkdir(parents=True)
    (tmp_path / "root" / "metrics" / "m" / "m.py").write_text("")
    (tmp_path / "root" / "spaces" / "m").mkdir(parents=True)
    (tmp_path / "root" / "spaces" / "m" / "app.py").write_text("")
    (tmp_path / "root" / "spaces" / "m" / "README.md").write_bytes(b"caf\xe9\n")
    with pytest.raises(ValueError, match=r"README.md is not UTF-8 text"):
        assemble(tmp_path / "root", tmp_path / "out", Release(ORG, REPOSITORY, COMMIT))
    assert not (tmp_path / "out").exists()


def test_an_out_folder_given_by_a_link_is_filled_and_the_link_kept(tmp_path):
    """The empty folder a link names takes the Spaces; the link stays a link (``rmdir`` on the
    link failed with NotADirectoryError before)."""
    root = _checkout(tmp_path / "root")
    (tmp_path / "spaces").mkdir()
    (tmp_path / "out").symlink_to(tmp_path / "spaces")
    assemble(root, tmp_path / "out", Release(ORG, REPOSITORY, COMMIT))
    assert (tmp_path / "out").is_symlink() and _files(tmp_path / "spaces" / "m") >= {"m.py", "app.py"}
