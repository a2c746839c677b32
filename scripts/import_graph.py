"""Print the package's import graph as text: which top-level parts import which, the layers they
must respect, and any import cycle between modules (exit 1 if there is one).

    python scripts/import_graph.py            # the layer graph and cycles
    python scripts/import_graph.py --modules  # also every module's own imports

Every import counts, including those inside functions: a lazy import is still a dependency.
The layer rules themselves are the import-linter contract in pyproject.toml ([tool.importlinter]),
checked by tests/test_layers.py.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

import grimp

PACKAGE = "jupyter_gpusched"


def part(module: str) -> str:
    """`jupyter_gpusched.server.handlers.jobs` -> `server`; the package itself -> `(root)`."""
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else "(root)"


def module_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    modules = sorted(graph.modules)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in modules:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.append(m)
                    if m == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modules", action="store_true", help="also list every module's imports")
    args = ap.parse_args(argv)
    # imports under `if TYPE_CHECKING:` are for annotations only: no run-time dependency, no cycle
    graph = grimp.build_graph(PACKAGE, include_external_packages=False, exclude_type_checking_imports=True)
    edges: dict[str, set[str]] = defaultdict(set)
    for m in graph.modules:
        for dep in graph.find_modules_directly_imported_by(m):
            if part(m) != part(dep):
                edges[part(m)].add(part(dep))
    print(
        "Layers (lowest first): core < store, backends, sim < service < server < hub < client, params < cli, magic, widgets"
    )
    print("(testing/ is test support; the package root only holds the entry points)\n")
    print("Imports between parts:")
    for src in sorted(edges):
        print(f"  {src:9} -> {', '.join(sorted(edges[src]))}")
    if args.modules:
        print("\nModules:")
        for m in sorted(graph.modules):
            deps = sorted(graph.find_modules_directly_imported_by(m))
            print(f"  {m}" + (f" -> {', '.join(d.removeprefix(PACKAGE + '.') for d in deps)}" if deps else ""))
    cycles = module_cycles(graph)
    print(f"\nImport cycles between modules: {len(cycles)}")
    for c in cycles:
        print("  " + " <-> ".join(c))
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main())
