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


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (ctest's python_gpu, label gpu)")


_passed = []


def pytest_runtest_logreport(report):
    if report.when == "call" and report.passed:
        _passed.append(report.nodeid)


def pytest_sessionfinish(session, exitstatus):
    """Under SPECDEC_SKIP_WITHOUT_RUN (ctest's python_gpu): exit 77, ctest's "skipped", when every
    selected test skipped (no device), as the C++ gpu tests do."""
    if os.environ.get("SPECDEC_SKIP_WITHOUT_RUN") and exitstatus == 0 and not _passed:
        session.exitstatus = 77
