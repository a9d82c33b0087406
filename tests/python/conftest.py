"""Fixtures of the module's tests: the C++ reference program and the data files.

ctest runs these with PYTHONPATH at the built module and SPECDEC_PYTHON_REFERENCE at
specdec_python_reference (python/CMakeLists.txt)."""
import os
import subprocess
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def reference():
    """Runs the C++ reference (tests/python/reference.cpp) and returns its output lines."""
    program = os.environ.get("SPECDEC_PYTHON_REFERENCE")
    if not program:
        pytest.fail("SPECDEC_PYTHON_REFERENCE is not set: run these tests through ctest -R python")

    def run(*args):
        done = subprocess.run([program, *map(str, args)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    return run


def data_file(relative):
    """A data file under $SPECDEC_DATA, else the build's default data directory; skips without it
    (as the C++ tests do)."""
    root = os.environ.get("SPECDEC_DATA") or os.environ.get("SPECDEC_DEFAULT_DATA") or \
        Path(__file__).resolve().parents[3] / "shared" / "data"
    path = Path(root) / relative
    if not path.exists():
        pytest.skip(f"data file {path} not found (set SPECDEC_DATA to the data directory)")
    return path
