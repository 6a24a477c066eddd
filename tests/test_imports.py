"""The service never imports the tests: the reference model lives in tests/, production in
app/, and app/ must run where tests/ is not installed (the image ships app/ alone). And no
module of app/ imports itself back through others (the layers themselves are import-linter's
contracts in pyproject.toml, run by `make lint`)."""
from __future__ import annotations

import subprocess
import sys

import grimp

from tests.conftest import ROOT

# Run from the repository root, where `tests` is importable: an import of it would succeed
# there, so it is caught by what is loaded, not by an ImportError.
LOADED = """
import importlib, pkgutil, sys
import app
{imports}
print("\\n".join(sorted(m for m in sys.modules if m.split(".")[0] in ("tests", "bench"))))
"""


def loaded_from_tests(imports: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", LOADED.format(imports=imports)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=True)
    return done.stdout.split()


def test_importing_the_app_loads_no_test_or_bench_module():
    assert loaded_from_tests("import app.main") == []


def test_no_module_of_app_loads_a_test_or_bench_module():
    every = ("for m in pkgutil.walk_packages(app.__path__, 'app.'):\n"
             "    importlib.import_module(m.name)")
    assert loaded_from_tests(every) == []


def test_the_check_sees_an_import_of_the_tests():
    assert "tests.sides" in loaded_from_tests("import tests.sides")


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Every group of modules that import each other in a circle, at any depth, imports
    under TYPE_CHECKING and inside functions included (Tarjan's strongly connected
    components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while not group or group[-1] != module:
                group.append(stack.pop())
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_app_has_no_import_cycle():
    # A cycle is a layering fault to fix by design (an interface the lower module owns,
    # a type moved down), not to hide under TYPE_CHECKING: the check counts those too.
    assert cycles(grimp.build_graph("app", cache_dir=None)) == []


def test_the_cycle_check_sees_a_cycle():
    graph = grimp.ImportGraph()
    for importer, imported in (("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d")):
        graph.add_import(importer=importer, imported=imported)
    assert cycles(graph) == [["p.a", "p.b", "p.c"]]


def package_graph(graph: grimp.ImportGraph) -> grimp.ImportGraph:
    """The imports between the packages of `app/` (app.config, app.rules, …): a module's
    imports, each side folded into the package it is in."""
    packages = grimp.ImportGraph()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            importer, target = ".".join(module.split(".")[:2]), ".".join(imported.split(".")[:2])
            if importer != target:
                packages.add_import(importer=importer, imported=target)
    return packages


def test_the_packages_of_app_import_each_other_one_way():
    # No module cycle is not enough: config/load.py importing rules/ while a rule imports
    # config/pipeline.py is a circle between the two packages, and the layers would not hold.
    assert cycles(package_graph(grimp.build_graph("app", cache_dir=None))) == []


def test_the_package_check_sees_a_circle_that_no_module_makes():
    graph = grimp.ImportGraph()
    for importer, imported in (("p.a.x", "p.b.y"), ("p.b.z", "p.a.w")):
        graph.add_import(importer=importer, imported=imported)
    assert cycles(graph) == []
    assert cycles(package_graph(graph)) == [["p.a", "p.b"]]
