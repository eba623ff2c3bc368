"""Facts only in the spec (issue 68, item 2): outside ``metrics/facts/specs.py``, no code compares a
value with a metric's name or keeps a table of metric names; what differs between metrics is a
field of the metric's :class:`~moverkit.facts.specs.MetricSpec`, read from the spec.

The rule, over the package (``metrics/``, the CLI included), the Spaces (``spaces/``) and the
benchmarks (``benchmarks/``, while they are in the repository), read with :mod:`ast`; each finding
is named ``file:line``. A *metric name* is a string literal equal to a key of
:data:`moverkit.facts.specs.SPECS`, or a name the same file binds to one (``NAMED = "twmd"``, then
``metric == NAMED``). Found:

- a comparison with one (``==``, ``!=``, ``is``, ``is not``, ``in``, ``not in``, either side);
- a ``match`` case on one;
- a table holding one: a tuple, list or set literal with one among its elements, a dict literal
  with one among its keys or values.

Allowed, because there code names one metric on purpose and decides nothing by it: a metric name
as an argument (``spec("twmd")``, ``load("twmd")``, ``metric="twmd"``, an ``argparse`` default),
a parameter's default value (``metrics=("centered_bertscore",)`` too), a subscript
(``REGISTRY["twmd"]``, ``result["twmd"]``), a docstring or a comment. Two homonyms are not metric
names: in a metric's own modules (``metrics/<name>/``, ``metrics/functional/<name>.py``, its
benchmark ``benchmarks/<name>.py``) its own name is its output's or a variant's (lazy_emd's output
``"lazy_emd"``, twmd's ``variant == "twmd"``); and anywhere, a dict's value under the key of an
argument that names an output (a spec's ``output_named_by``: twmd's grid ``{"variant": ["twmd"]}``)
is that output's name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
PACKAGE = REPOSITORY / "metrics"
HOME = PACKAGE / "facts" / "specs.py"


def _specs():
    from moverkit.facts.specs import SPECS

    return SPECS


def checked_files() -> list[Path]:
    """The files the rule reads: the package (the CLI and, while they are there, the benchmarks
    among them) but the spec, the Spaces, and ``benchmarks/`` at the repository's root."""
    files = [path for path in PACKAGE.rglob("*.py") if path != HOME]
    files += (REPOSITORY / "spaces").rglob("*.py")
    if (REPOSITORY / "benchmarks").is_dir():
        files += (REPOSITORY / "benchmarks").rglob("*.py")
    return sorted(files)


def own_name(path: Path, names) -> str | None:
    """The metric of ``names`` whose own module ``path`` is (``metrics/<name>/...``,
    ``metrics/functional/<name>.py``, its benchmark ``benchmarks/<name>.py``), else ``None``."""
    if path.parent == REPOSITORY / "benchmarks":
        own = path.stem
    elif path.is_relative_to(PACKAGE):
        parts = path.relative_to(PACKAGE).parts
        own = path.stem if parts[:1] == ("functional",) else parts[0] if len(parts) > 1 else None
    else:
        own = None
    return own if own in names else None


class _Finder(ast.NodeVisitor):
    """Collects ``(line, what)`` for each comparison, case or table holding a metric name."""

    def __init__(self, names: frozenset[str], aliases: frozenset[str], naming_keys: frozenset[str]):
        self.names = names
        self.aliases = aliases
        self.naming_keys = naming_keys
        self.found: list[tuple[int, str]] = []

    def _named(self, node: ast.AST) -> str | None:
        """The metric name ``node`` is: a literal, or a name bound to one in the file."""
        if isinstance(node, ast.Constant) and node.value in self.names:
            return node.value
        if isinstance(node, ast.Name) and node.id in self.aliases:
            return node.id
        return None

    def _held(self, elements) -> str | None:
        return next((named for named in map(self._named, elements) if named is not None), None)

    def visit_Compare(self, node: ast.Compare) -> None:
        named = self._held([node.left, *node.comparators])
        if named is not None:
            self.found.append((node.lineno, f"comparison with {named!r}"))
        self.generic_visit(node)

    def visit_MatchValue(self, node: ast.MatchValue) -> None:
        named = self._named(node.value)
        if named is not None:
            self.found.append((node.lineno, f"match case on {named!r}"))
        self.generic_visit(node)

    def _table(self, node: ast.AST, elements) -> None:
        named = self._held(elements)
        if named is not None:
            self.found.append((node.lineno, f"{type(node).__name__.lower()} holding {named!r}"))
        self.generic_visit(node)

    def visit_Tuple(self, node: ast.Tuple) -> None:
        self._table(node, node.elts)

    def visit_List(self, node: ast.List) -> None:
        self._table(node, node.elts)

    def visit_Set(self, node: ast.Set) -> None:
        self._table(node, node.elts)

    def visit_Dict(self, node: ast.Dict) -> None:
        keys = [key for key in node.keys if key is not None]
        values = [
            value
            for key, value in zip(node.keys, node.values)
            if not (isinstance(key, ast.Constant) and key.value in self.naming_keys)
        ]
        named = self._held(keys + values)
        if named is not None:
            self.found.append((node.lineno, f"dict holding {named!r}"))
        for key in keys:
            self.visit(key)
        for value in values:
            self.visit(value)

    def visit_arguments(self, node: ast.arguments) -> None:
        """A signature: its defaults are left out (a default names what a call takes, on purpose)."""
        for argument in (*node.posonlyargs, *node.args, node.vararg, *node.kwonlyargs, node.kwarg):
            if argument is not None:
                self.visit(argument)


def _aliases(tree: ast.AST, names: frozenset[str]) -> frozenset[str]:
    """The names ``tree`` binds to a metric name literal (``NAMED = "centered_bertscore"``)."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign):
            targets, value = [node.target], node.value
        else:
            continue
        if isinstance(value, ast.Constant) and value.value in names:
            bound.update(target.id for target in targets if isinstance(target, ast.Name))
    return frozenset(bound)


def metric_name_uses(
    source: str, names: frozenset[str], naming_keys: frozenset[str] = frozenset()
) -> list[tuple[int, str]]:
    """``(line, what)`` for each comparison, ``match`` case or table of ``source`` that holds one
    of ``names`` (the rule of this module's docstring; a dict's values under ``naming_keys`` are
    left out, and the caller leaves out a metric's own name in its own modules)."""
    tree = ast.parse(source)
    finder = _Finder(names, _aliases(tree, names), naming_keys)
    finder.visit(tree)
    return sorted(set(finder.found))


def test_the_checker_finds_every_banned_shape():
    source = """
NAMED = "b"
if metric == "a": pass
if "a" != metric: pass
if metric in ("a", "x"): pass
if metric not in {"b"}: pass
if metric is NAMED: pass
match metric:
    case "a": pass
TABLE = ["x", "b"]
KEYED = {"a": 1}
VALUED = {1: "b"}
f(choices=("a", "x"))
GRID = {"variant": ["a"], "other": ["a"]}
"""
    found = metric_name_uses(source, frozenset({"a", "b"}), naming_keys=frozenset({"variant"}))
    assert [line for line, _ in found] == [3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14], found


def test_the_checker_passes_one_metric_named_on_purpose():
    source = '''
"""A docstring naming a, b."""
import argparse

def f(metric="a", *, other="b", metrics=("a",)):  # a comment on b
    parser = argparse.ArgumentParser()
    parser.add_argument("--metric", default="a", choices=sorted(SPECS))
    spec("a").main, load(metric="b"), REGISTRY["a"], result["b"], f"{metric} is not a"
    grid = {"variant": ["a"]}
    return metric == spec("a").name
'''
    assert metric_name_uses(source, frozenset({"a", "b"}), naming_keys=frozenset({"variant"})) == []


def test_own_modules_are_those_of_one_metric():
    names = _specs()
    assert own_name(PACKAGE / "twmd" / "twmd.py", names) == "twmd"
    assert own_name(PACKAGE / "functional" / "twmd.py", names) == "twmd"
    assert own_name(REPOSITORY / "benchmarks" / "twmd.py", names) == "twmd"
    assert own_name(PACKAGE / "functional" / "signature.py", names) is None
    assert own_name(REPOSITORY / "benchmarks" / "scale.py", names) is None
    assert own_name(PACKAGE / "cli" / "tune.py", names) is None
    assert own_name(REPOSITORY / "spaces" / "twmd" / "app.py", names) is None


@pytest.mark.parametrize("path", checked_files(), ids=lambda path: str(path.relative_to(REPOSITORY)))
def test_no_metric_name_is_compared_or_tabled_outside_the_spec(path):
    specs = _specs()
    names = frozenset(specs) - {own_name(path, specs)}
    naming_keys = frozenset(spec.output_named_by for spec in specs.values() if spec.output_named_by)
    uses = metric_name_uses(path.read_text(encoding="utf-8"), names, naming_keys)
    where = "\n".join(f"{path.relative_to(REPOSITORY)}:{line}: {what}" for line, what in uses)
    assert not uses, f"a metric's name decides something outside metrics/facts/specs.py (read the spec):\n{where}"
