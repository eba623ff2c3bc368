"""The import graph of moverkit between its rooms, read from the source (issue 33).

The package folder is ``metrics/`` and is imported as ``moverkit``, so tools that draw imports from
folder names do not resolve ``from moverkit... import``. This script does: it reads every ``.py`` file
under ``metrics/`` with :mod:`ast`, and resolves absolute (``moverkit.x``) and relative (``.x``,
``..x``) imports, at the top of a file and inside functions alike (about half of the package's own
imports sit inside functions, to keep ``import moverkit`` light; a graph of top-of-file imports
alone misses them). Imports under ``if TYPE_CHECKING:`` count too: the root's stand for the
attributes it imports on first use (``_LAZY``).

A *room* is what sits directly in the package: a top-level module (``settings``, ``tuning``) or a
subpackage (``_core``, ``functional``, ``cli``, an evaluate module's folder such as ``twmd``). The
package root, ``metrics/__init__.py``, is the room ``moverkit``.

Run it to print the rooms' edges, the cycles between rooms and who imports the root::

    python tests/import_graph.py
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "moverkit"
SOURCE = Path(__file__).resolve().parents[1] / "metrics"
ROOT = PACKAGE
"""The room of the package root (``metrics/__init__.py``)."""


@dataclass(frozen=True)
class Import:
    """One import of a package module by another: ``source`` imports ``target`` (module names,
    dotted from ``moverkit``) at ``line`` of ``path``, ``in_function`` if inside a def."""

    source: str
    target: str
    path: Path
    line: int
    in_function: bool


def module_name(path: Path, source: Path = SOURCE) -> str:
    """``moverkit._core.centering.maths`` for ``metrics/_core/centering.py``; ``moverkit`` for the root."""
    parts = path.relative_to(source).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((PACKAGE, *parts))


def room(module: str) -> str:
    """The room of a module: the first name under the package, or :data:`ROOT` for the root."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT


def _walk(node: ast.AST, in_function: bool = False):
    """Every import node under ``node``, with whether it sits inside a function."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, in_function
        yield from _walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))


def package_imports(source: Path = SOURCE) -> list[Import]:
    """Every import of one package module by another, resolved to the module imported."""
    modules = {module_name(p, source): p for p in sorted(source.rglob("*.py"))}
    found = []
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node, in_function in _walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = name.split(".")
                    base = base[: len(base) - node.level + (1 if is_package else 0)]
                    base = ".".join(base + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                # ``from pkg import sub`` imports the module pkg.sub when there is one, else a name of pkg.
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in dict.fromkeys(targets):  # one import per module a statement names
                while target and target not in modules:  # import moverkit.x.y.Name -> moverkit.x.y
                    target = target.rpartition(".")[0]
                if target and target.split(".")[0] == PACKAGE and target != name:
                    found.append(Import(name, target, path, node.lineno, in_function))
    return found


def room_edges(imports: list[Import]) -> dict[tuple[str, str], list[Import]]:
    """The imports between two different rooms, by (importing room, imported room)."""
    edges = defaultdict(list)
    for imp in imports:
        a, b = room(imp.source), room(imp.target)
        if a != b:
            edges[a, b].append(imp)
    return dict(edges)


def cycles(edges) -> list[list[str]]:
    """The strongly connected groups of two or more rooms (Tarjan): each holds a cycle."""
    graph = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(set(graph) | {b for targets in graph.values() for b in targets}):
        if v not in index:
            visit(v)
    return groups


def _where(imp: Import) -> str:
    return f"{imp.path.relative_to(SOURCE.parent)}:{imp.line}{' (in a function)' if imp.in_function else ''}"


def main() -> int:
    sys.setrecursionlimit(10_000)
    imports = package_imports()
    edges = room_edges(imports)
    inside = sum(imp.in_function for imp in imports)
    print(f"{len(imports)} imports between package modules, {inside} inside functions; {len(edges)} room edges")
    for (a, b), found in sorted(edges.items()):
        print(f"  {a} -> {b}: {len(found)}")
    groups = cycles(edges)
    print(f"cycles between rooms: {len(groups)}")
    for group in groups:
        print(f"  {' <-> '.join(group)}")
        for (a, b), found in sorted(edges.items()):
            if a in group and b in group:
                for imp in found:
                    print(f"    {a} -> {b}: {_where(imp)}")
    print("imports of the package root:")
    for (a, b), found in sorted(edges.items()):
        if b == ROOT:
            for imp in found:
                print(f"  {a}: {_where(imp)}")
    return 1 if groups else 0


if __name__ == "__main__":
    raise SystemExit(main())
