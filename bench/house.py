"""Measures of the code base's structure (issue "One house"): import circles, module sizes, lines of code.

Prints one JSON object::

    {"modules": N, "lines": total non-migration Python lines in the apps and config,
     "largest": [[path, lines], ...] (the 5 largest non-migration modules),
     "circles_top": [[module, ...], ...]  (strongly connected components of the import graph
                                          built from module-level imports only),
     "circles_all": [[module, ...], ...]  (the same, counting imports inside functions too)}

Usage: ``python bench/house.py`` from the repository root. Reads source files only (``ast``);
imports nothing of the project, so it needs neither Django nor a database.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("annotation", "refinement", "modelling", "config")


def module_name(path: Path) -> str:
    """Dotted module name of ``path`` (relative to the repository root); packages end without ``__init__``."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_files() -> list[Path]:
    """Every non-migration ``.py`` file of the apps and ``config``, sorted."""
    files = []
    for package in PACKAGES:
        files += [p for p in (ROOT / package).rglob("*.py") if "migrations" not in p.parts]
    return sorted(files)


def _resolve(node: ast.ImportFrom, current: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = current.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph(files: list[Path], *, top_level_only: bool) -> dict[str, set[str]]:
    """Edges module → imported project modules. ``top_level_only`` skips imports inside functions/classes
    (those run lazily) and inside ``if TYPE_CHECKING:`` blocks."""
    names = {module_name(p) for p in files}
    graph: dict[str, set[str]] = {}
    for path in files:
        current = module_name(path)
        tree = ast.parse(path.read_text(), filename=str(path))
        nodes = _top_level_nodes(tree) if top_level_only else ast.walk(tree)
        edges: set[str] = set()
        for node in nodes:
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(node, current, path.name == "__init__.py")
                targets = [f"{base}.{a.name}" for a in node.names] + [base]
            for target in targets:
                # The longest project module that the target names (``from x import y`` may name a module or an
                # attribute).
                parts = target.split(".")
                while parts and ".".join(parts) not in names:
                    parts.pop()
                if parts and ".".join(parts) != current:
                    edges.add(".".join(parts))
        graph[current] = edges
    return graph


def _top_level_nodes(tree: ast.Module):
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        yield node
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            for field in ("body", "orelse", "finalbody", "handlers"):
                stack += getattr(node, field, [])


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted, largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(10_000)

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found, key=lambda c: (-len(c), c))


def main() -> None:
    files = project_files()
    sizes = sorted(((str(p.relative_to(ROOT)), len(p.read_text().splitlines())) for p in files), key=lambda x: -x[1])
    print(
        json.dumps(
            {
                "modules": len(files),
                "lines": sum(n for _, n in sizes),
                "largest": [list(s) for s in sizes[:5]],
                "circles_top": circles(import_graph(files, top_level_only=True)),
                "circles_all": circles(import_graph(files, top_level_only=False)),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
