"""The digits data set, shared by the objectives tests."""

import pytest

from botorch_dp.tuning import load_sklearn_classification


@pytest.fixture(scope="module")
def data():
    return load_sklearn_classification("digits", seed=0)
