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

import moverkit
from moverkit.publish import CARD_KEYS, front_matter, with_card_metadata

ROOT = SPACES.parent


def _front_matter(name: str) -> tuple[dict, str]:
    """The published Space README's front matter (the card's title, emoji, colours and
    description, then the Space's own keys) and body."""
    text = (SPACES / name / "README.md").read_text(encoding="utf-8")
    card = (ROOT / "metrics" / name / "README.md").read_text(encoding="utf-8")
    _, front, body = with_card_metadata(text, card).split("---\n", 2)
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


@pytest.mark.parametrize("name", APPS)
def test_card_is_the_one_source_of_title_emoji_and_description(name):
    space_meta, _ = front_matter((SPACES / name / "README.md").read_text(encoding="utf-8"))
    card_meta, _ = front_matter((ROOT / "metrics" / name / "README.md").read_text(encoding="utf-8"))
    assert not set(CARD_KEYS) & set(space_meta), "title, emoji, colours and description live in the card"
    meta, _ = _front_matter(name)
    assert {key: meta[key] for key in CARD_KEYS} == {key: card_meta[key] for key in CARD_KEYS}
    assert meta["description"].strip()  # evaluate's key


def test_every_space_pins_the_same_gradio():
    assert len({_front_matter(name)[0]["sdk_version"] for name in APPS}) == 1


@pytest.mark.parametrize("name", APPS)
def test_requirements_install_cpu_torch_and_the_released_moverkit_from_pypi(name):
    """A Space runs on CPU hardware: torch's CPU build from PyTorch's CPU index, pinned (2.1 GB
    installed instead of 6.7 GB with the CUDA build, docs/speed.md), then the released moverkit."""
    lines = [line for line in (SPACES / name / "requirements.txt").read_text().splitlines() if not line.startswith("#")]
    assert lines == [
        "--extra-index-url https://download.pytorch.org/whl/cpu",
        "torch==2.13.0+cpu",
        "moverkit[demo]=={VERSION_PLACEHOLDER}",
    ]
    torch_pin = Requirement(lines[1])
    (pinned,) = torch_pin.specifier
    assert pinned.operator == "==" and Version(pinned.version).local == "cpu"  # the CPU build, one version
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python >= 3.11")
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    torch_range = next(Requirement(r).specifier for r in dependencies if Requirement(r).name == "torch")
    assert torch_range.contains(pinned.version)  # allowed by moverkit's own torch requirement
    requirement = Requirement(lines[2].replace("{VERSION_PLACEHOLDER}", moverkit.__version__))
    assert requirement.name == "moverkit" and requirement.extras == {"demo"}
    assert str(requirement.specifier) == f"=={moverkit.__version__}"


@pytest.mark.parametrize("name", APPS)
def test_card_names_every_compute_argument_and_the_citation(name, load_metric):
    _, body = _front_matter(name)
    how_to_use = body.split("## How to use", 1)[1].split("\n## ", 1)[0]
    for arg in inspect.signature(load_metric(name)._compute).parameters:
        assert f"`{arg}`" in how_to_use, arg
    citation = load_metric(name).info.citation
    first_key = re.search(r"@\w+\{([^,]+),", citation).group(1)
    assert first_key in body.split("## Citation", 1)[1]


@pytest.mark.parametrize("name", APPS)
def test_app_run_locally_shows_no_placeholder(name):
    from moverkit.demo.app import _local_card

    shown = _local_card(name, SPACES / name / "README.md")
    assert "_PLACEHOLDER}" not in shown and shown.lstrip().startswith("#")


@pytest.mark.parametrize("name", APPS)
def test_published_readme_has_evaluates_sections_in_order(name):
    _, body = _front_matter(name)
    sections = [
        "## Metric description",
        "## How to use",
        "## Inputs",
        "## Output values",
        "## Examples",
        "## Limitations and bias",
        "## Citation",
    ]
    positions = [body.find(f"\n{section}\n") for section in sections]
    assert -1 not in positions and positions == sorted(positions), dict(zip(sections, positions))
