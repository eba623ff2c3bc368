"""Each Space's README front matter and requirements: what the Hub needs to build and run it."""

from __future__ import annotations

import inspect
import re

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from spaceserver import APPS, SPACES

ROOT = SPACES.parent


def _front_matter(name: str) -> tuple[dict, str]:
    text = (SPACES / name / "README.md").read_text(encoding="utf-8")
    _, front, body = text.split("---\n", 2)
    return yaml.safe_load(front), body


def _demo_gradio_specifier() -> SpecifierSet:
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python >= 3.11")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["demo"]
    return next(Requirement(r).specifier for r in extras if Requirement(r).name == "gradio")


@pytest.mark.parametrize("name", APPS)
def test_front_matter_makes_a_gradio_space(name):
    meta, _ = _front_matter(name)
    assert meta["sdk"] == "gradio" and meta["app_file"] == "app.py"
    assert (SPACES / name / meta["app_file"]).is_file()
    assert re.fullmatch(r"\d+\.\d+\.\d+", meta["sdk_version"])  # pinned, not a range
    assert Version(meta["sdk_version"]) in _demo_gradio_specifier()
    assert {"evaluate", "metric"} <= set(meta["tags"])
    assert len(meta["short_description"]) <= 60  # the Hub's limit
    assert meta["title"] and meta["license"] == "apache-2.0"


def test_every_space_pins_the_same_gradio():
    assert len({_front_matter(name)[0]["sdk_version"] for name in APPS}) == 1


@pytest.mark.parametrize("name", APPS)
def test_requirements_install_moverkit_at_the_released_commit(name):
    lines = [line for line in (SPACES / name / "requirements.txt").read_text().splitlines() if not line.startswith("#")]
    assert lines == ["moverkit[demo] @ git+https://github.com/{REPOSITORY_PLACEHOLDER}@{COMMIT_PLACEHOLDER}"]
    filled = lines[0].replace("{REPOSITORY_PLACEHOLDER}", "owner/moverkit").replace("{COMMIT_PLACEHOLDER}", "0" * 40)
    requirement = Requirement(filled)
    assert requirement.name == "moverkit" and requirement.extras == {"demo"}
    assert requirement.url == f"git+https://github.com/owner/moverkit@{'0' * 40}"


@pytest.mark.parametrize("name", APPS)
def test_card_names_every_compute_argument_and_the_citation(name, load_metric):
    _, body = _front_matter(name)
    how_to_use = body.split("## How to use", 1)[1].split("\n## ", 1)[0]
    for arg in inspect.signature(load_metric(name)._compute).parameters:
        assert f"`{arg}`" in how_to_use, arg
    citation = load_metric(name).info.citation
    first_key = re.search(r"@\w+\{([^,]+),", citation).group(1)
    assert first_key in body.split("## Citation", 1)[1]
