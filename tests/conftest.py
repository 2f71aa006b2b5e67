"""Fixtures shared by the project's own tests: loaded only where tests/ is collected."""

import os

import numpy as np
import pytest

from pytest_gostcnn.model.network import Network
from pytest_gostcnn.model.table_files import load_networks


@pytest.fixture
def rng() -> np.random.Generator:
    """A generator with a fixed seed, so that every test draws the same data on every run."""
    return np.random.default_rng(20210101)


@pytest.fixture(scope="session")
def shipped_networks() -> dict[str, Network]:
    """The six reconstruction tables shipped in pytest_gostcnn/networks, by Latin id."""
    return load_networks()


@pytest.fixture(scope="session", autouse=True)
def runs_of_the_suite_see_no_xdist_worker():
    """Under ``pytest -n 2`` (pytest-xdist, docs/contributing.md) each worker's environment names it
    (PYTEST_XDIST_WORKER): the suite's runs inside a test, in-process or in a subprocess,
    would read it and pytest-benchmark would disable their timing. They run as a user's do."""
    with pytest.MonkeyPatch.context() as patch:
        for name in [n for n in os.environ if n.startswith("PYTEST_XDIST_")]:
            patch.delenv(name)
        yield
