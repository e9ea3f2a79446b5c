"""Fixtures of the Python module's tests: the module from build/python (scripts/test.sh
puts it on PYTHONPATH; a missing module is an error, not a skip), the CLI beside it and
the embedded stories260K."""
import os
import pathlib

import pytest

import deferkv
from deferkv import _deferkv  # noqa: F401  (fails the run when the module was not built)

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def cli() -> str:
    path = os.environ.get("DEFERKV_CLI", str(ROOT / "build" / "deferkv"))
    assert os.access(path, os.X_OK), f"the deferkv CLI is not built at {path} (set DEFERKV_CLI)"
    return path


@pytest.fixture(scope="session")
def model_path() -> str:
    return str(ROOT / "models" / "stories260K.gguf")


@pytest.fixture(scope="session")
def model(model_path):
    return deferkv.Model(model_path)
