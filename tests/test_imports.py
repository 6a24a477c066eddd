"""The service never imports the tests: the reference model lives in tests/, production in
app/, and app/ must run where tests/ is not installed (the image ships app/ alone)."""
from __future__ import annotations

import subprocess
import sys

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
    assert loaded_from_tests("import app.api.app") == []


def test_no_module_of_app_loads_a_test_or_bench_module():
    every = ("for m in pkgutil.walk_packages(app.__path__, 'app.'):\n"
             "    importlib.import_module(m.name)")
    assert loaded_from_tests(every) == []


def test_the_check_sees_an_import_of_the_tests():
    assert "tests.reference.pipeline" in loaded_from_tests("import tests.reference.pipeline")
