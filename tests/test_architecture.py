"""The layers of the package hold (issue 33): read from the source by tests/import_graph.py, which
resolves ``moverkit`` and relative imports and counts imports inside functions."""

from __future__ import annotations

import ast

import pytest
from import_graph import ROOT, SOURCE, cycles, package_imports, room, room_edges

MAX_LINES = 600
ROOT_IMPORTERS = {"cli", "demo"}
"""The rooms that may import the package root: front ends over the whole package."""


@pytest.fixture(scope="module")
def edges():
    return room_edges(package_imports())


def _where(found) -> str:
    return ", ".join(f"{imp.path.relative_to(SOURCE.parent)}:{imp.line}" for imp in found)


def test_the_graph_resolves_package_imports(edges):
    # The script sees what a folder-based tool misses: ``from moverkit.x import`` in the evaluate
    # modules and imports inside functions (the root's lazy attributes come in through TYPE_CHECKING).
    assert ("twmd", "functional") in edges
    assert ("moverkit", "_core") in edges
    assert any(imp.in_function for found in edges.values() for imp in found)


def test_no_cycle_between_rooms(edges):
    found = cycles(edges)
    detail = {
        " <-> ".join(group): {f"{a} -> {b}": _where(imps) for (a, b), imps in edges.items() if {a, b} <= set(group)}
        for group in found
    }
    assert not found, f"import cycles between rooms (imports inside functions included): {detail}"


def test_no_cycle_between_modules():
    """Issue 52: no two modules import each other, in a function or under TYPE_CHECKING included
    (before it, encoder.py and tokens.py did; a package's ``__init__`` is a module of its own)."""
    found = cycles({(imp.source, imp.target) for imp in package_imports() if imp.source != imp.target})
    assert not found, f"import cycles between modules: {found}"


def test_only_front_ends_import_the_package_root(edges):
    bad = {a: _where(found) for (a, b), found in edges.items() if b == ROOT and a not in ROOT_IMPORTERS}
    assert not bad, f"rooms other than {sorted(ROOT_IMPORTERS)} import the package root (metrics/__init__.py): {bad}"


CORE_MAY_READ = {"facts", "formats"}
"""What ``_core`` may import from outside itself: the light rooms (``moverkit.facts``: the release
literal its hashcodes name; ``moverkit.formats``: files written whole or not at all), which import
nothing of the package but each other. They stay outside ``_core`` because ``moverkit --help``,
``--version`` and ``import moverkit`` read them without torch, which importing anything under
``_core`` loads."""


def test_core_stands_on_the_ground(edges):
    bad = {b: _where(found) for (a, b), found in edges.items() if a == "_core" and b not in {"_core", *CORE_MAY_READ}}
    assert not bad, f"_core imports rooms outside it: {bad}"


def test_the_light_rooms_import_nothing_but_each_other(edges):
    bad = {(a, b): _where(found) for (a, b), found in edges.items() if a in CORE_MAY_READ and b not in CORE_MAY_READ}
    assert not bad, f"a light room imports a room above them: {bad}"


def test_the_facts_import_nothing_of_the_package(edges):
    bad = {b: _where(found) for (a, b), found in edges.items() if a == "facts"}
    assert not bad, f"moverkit.facts imports the package: {bad}"


CORE_LAYERS = ("base", "maths", "encoding", "centering", "call")
"""``_core``'s layers, lowest first (issue 41): each imports only those before it."""


def _core_layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "_core" else None


def test_core_is_its_five_layers():
    core = SOURCE / "_core"
    assert sorted(p.name for p in core.iterdir() if p.is_dir() and p.name != "__pycache__") == sorted(CORE_LAYERS)
    assert [p.name for p in core.glob("*.py")] == ["__init__.py"], "a module file of _core outside its layers"


@pytest.mark.slow
def test_each_core_layer_imports_only_the_layers_below():
    bad = []
    for imp in package_imports():
        a, b = _core_layer(imp.source), _core_layer(imp.target)
        if a and b and CORE_LAYERS.index(b) > CORE_LAYERS.index(a):
            bad.append(f"{a} -> {b}: {_where([imp])}")
    assert not bad, f"a layer of _core imports one above it: {bad}"


def test_code_outside_core_enters_it_only_through_a_front_door():
    # ``moverkit._core`` or ``moverkit._core.<layer>`` (its __init__), never a module file.
    doors = {"moverkit._core", *(f"moverkit._core.{layer}" for layer in CORE_LAYERS)}
    bad = [
        f"{imp.target}: {_where([imp])}"
        for imp in package_imports()
        if room(imp.source) != "_core" and room(imp.target) == "_core" and imp.target not in doors
    ]
    assert not bad, f"imports of a module file of _core from outside it: {bad}"


def test_no_package_file_over_600_lines():
    sizes = {
        p.relative_to(SOURCE.parent): len(p.read_text(encoding="utf-8").splitlines()) for p in SOURCE.rglob("*.py")
    }
    long = {str(p): n for p, n in sorted(sizes.items()) if n > MAX_LINES}
    assert not long, f"files over {MAX_LINES} lines (a room that does several jobs): {long}"


def test_the_evaluate_modules_do_not_restate_their_functions():
    # They were 956 lines, 247 of them a _compute that restated each function's signature: each is
    # now its card's texts and one evaluate_module(...) call, _compute derived from the function.
    modules = [p for p in SOURCE.glob("*/*.py") if p.stem == p.parent.name]
    assert len(modules) == 5
    assert sum(len(p.read_text(encoding="utf-8").splitlines()) for p in modules) <= MAX_LINES
    for path in modules:
        assert "def _compute" not in path.read_text(encoding="utf-8"), path


def test_the_shared_arguments_are_declared_once_and_opened_by_one_function():
    """Every metric's public signature is its inputs, its own arguments, the shared ones as
    ``open_call`` declares them (sbertscore without the token-level ones; a metric's own default
    centering) and ``settings``; none of the five functions spells a shared argument itself."""
    import inspect

    from moverkit import functional
    from moverkit._core.call.opening import open_call
    from moverkit.functional.signature import INPUTS, SHARED, TOKEN_ONLY
    from moverkit.integrations.registry import REGISTRY

    declared = inspect.signature(open_call).parameters
    for name, metric in REGISTRY.items():
        public = list(inspect.signature(metric.function).parameters.values())
        assert public[:2] == list(INPUTS) and public[-1].name == "settings", name
        shared = [p for p in public if p.name in declared and p.name not in ("predictions", "references")]
        expected = [p.name for p in SHARED if name != "sbertscore" or p.name not in TOKEN_ONLY]
        assert [p.name for p in shared] == expected, name
        for p in shared:
            if p.name != "centering":
                assert p.default == declared[p.name].default, (name, p.name)
        source = (SOURCE / "functional" / f"{name}.py").read_text(encoding="utf-8")
        for p in SHARED:
            assert f"    {p.name}:" not in source, (name, p.name)  # no parameter written out again
        with pytest.raises(TypeError, match=f"{name}\\(\\) got an unexpected keyword argument 'call'"):
            getattr(functional, name)(["a"], ["a"], call=None)


PUBLIC_SIGNATURES = {
    ("finetune/__init__.py", "finetune"): "moverkit.finetune.finetune: moverkit finetune's flags",
    ("_core/call/opening.py", "open_call"): "its keyword-only parameters are the metrics' shared public arguments",
    ("tuning/__init__.py", "tune"): "moverkit.tuning.tune (docs/tuning.md)",
    ("functional/moverscore.py", "moverscore"): "moverkit.functional.moverscore: its own public arguments",
    ("baselines/__init__.py", "fit_baseline"): "moverkit.baselines.fit_baseline: moverkit fit-baseline's flags",
    ("integrations/serve.py", "application"): "moverkit.serve.application: moverkit serve's flags, Serve's args",
}
"""The functions whose parameters are a public signature (issue 46): what they are. Behind them a
request or options object carries the arguments (EncoderRequest, PairOptions, Loop, GpuPlan)."""


def _functions():
    for path in sorted(SOURCE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield str(path.relative_to(SOURCE)), node


def test_no_function_body_is_longer_than_100_lines():
    long = {}
    for where, node in _functions():
        body = node.body
        has_doc = isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant)
        start = body[1].lineno if has_doc and len(body) > 1 else body[0].lineno
        if node.end_lineno - start + 1 > 100:
            long[f"{where}:{node.name}"] = node.end_lineno - start + 1
    assert not long, long


def test_no_internal_function_takes_more_than_10_parameters():
    many = {}
    for where, node in _functions():
        a = node.args
        n = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + bool(a.vararg) + bool(a.kwarg)
        n -= bool(a.args) and a.args[0].arg in ("self", "cls")
        if n > 10 and (where, node.name) not in PUBLIC_SIGNATURES:
            many[f"{where}:{node.name}"] = n
    assert not many, many


def test_the_registry_does_not_import_tuning():
    """docs/architecture.md: tuning reads the registry, never the other way (tuning is a feature)."""
    found = [imp for imp in package_imports() if imp.source == "moverkit.integrations.registry"]
    assert found and not [imp.target for imp in found if room(imp.target) == "tuning"]


FRAMEWORK_PATHS = {"lighteval", "lm_eval", "ray", "serve", "torchmetrics", "verl"}
"""The loose modules at the top of the package (issue 68): the paths users type in their frameworks'
configurations, each a thin module over its door in ``integrations/`` (tests/test_public_api.py)."""


def test_the_doors_live_in_one_room():
    """The top holds at most 8 loose modules (the design's bound); the framework paths import their
    door and nothing else, and no module of the package imports them but the shipped examples,
    which are the users' files: code reaches a door in its room, ``moverkit.integrations``."""
    loose = {p.stem for p in SOURCE.glob("*.py")} - {"__init__"}
    assert loose == FRAMEWORK_PATHS and len(loose) <= 8
    imports = package_imports()
    for name in FRAMEWORK_PATHS:
        targets = {imp.target for imp in imports if imp.source == f"moverkit.{name}"}
        assert targets == {f"moverkit.integrations.{name}"}, (name, targets)
    reaching = [
        f"{imp.target}: {_where([imp])}"
        for imp in imports
        if room(imp.target) in FRAMEWORK_PATHS and room(imp.source) != "examples"
    ]
    assert not reaching, f"package code imports a framework path instead of its door: {reaching}"


def _lists_of_every_metric(tree: ast.AST, names: set[str]):
    """Line numbers of the literals that name every metric: lists, tuples and sets (an ``__all__``
    among them), and dicts by their keys (issue 61: a table keyed by every metric's name is a second
    list of the metrics)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            elements = node.elts
        elif isinstance(node, ast.Dict):
            elements = [key for key in node.keys if key is not None]
        else:
            continue
        if names <= {e.value for e in elements if isinstance(e, ast.Constant)}:
            yield node.lineno


@pytest.mark.slow
def test_the_metrics_are_listed_once():
    """Issues 52 and 61: the list of the metrics is spelled out in one place, the specs table;
    everything else reads it (no literal list, tuple, set, ``__all__`` or dict keyed by every
    metric's name elsewhere in the package: a per-metric fact goes in the spec). A selection of
    some metrics with its reason is not the list."""
    from moverkit.facts.specs import SPECS

    names = set(SPECS)
    home = SOURCE / "facts" / "specs.py"
    spelled = {
        str(path.relative_to(SOURCE)): list(_lists_of_every_metric(ast.parse(path.read_text(encoding="utf-8")), names))
        for path in SOURCE.rglob("*.py")
        if path != home
    }
    assert not {path: lines for path, lines in spelled.items() if lines}, "metric names listed outside facts/specs.py"


@pytest.mark.parametrize("name", ["centered_bertscore", "lazy_emd", "moverscore", "sbertscore", "twmd"])
def test_each_evaluate_module_computes_with_the_registry_s_function(load_metric, name):
    """docs/architecture.md: the registry's ``function`` is the very function each evaluate
    module's ``_compute`` calls."""
    from moverkit.integrations.registry import REGISTRY

    compute = type(load_metric(name))._compute
    called = {c.cell_contents for c in compute.__closure__ or () if callable(c.cell_contents)}
    assert REGISTRY[name].function in called


def test_the_encoder_request_holds_the_device_resolved():
    """docs/architecture.md: the device is resolved (and the dtype checked against it) when an
    EncoderRequest is made, before any model loads."""
    import torch

    from moverkit._core.encoding import EncoderRequest

    assert EncoderRequest().device == torch.device("cuda" if torch.cuda.is_available() else "cpu")
    assert EncoderRequest(device="cpu").device == torch.device("cpu")
    with pytest.raises(ValueError, match="float16"):
        EncoderRequest(device="cpu", dtype="float16")
