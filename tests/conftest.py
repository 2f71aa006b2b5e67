"""Fixtures shared by the project's own tests: loaded only where tests/ is collected."""

import numpy as np
import pytest

from pytest_gostcnn.model.network import Network, load_networks


@pytest.fixture
def rng() -> np.random.Generator:
    """A generator with a fixed seed, so that every test draws the same data on every run."""
    return np.random.default_rng(20210101)


@pytest.fixture(scope="session")
def shipped_networks() -> dict[str, Network]:
    """The six reconstruction tables shipped in pytest_gostcnn/networks, by Latin id."""
    return load_networks()
