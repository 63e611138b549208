r"""Fixtures shared by the tests of ``botorch_dp.optim``."""

import warnings

import pytest

from botorch_dp.privacy.seeding import PrivacyWarning


@pytest.fixture
def quiet_seeds():
    r"""Silence the ``PrivacyWarning`` of explicit noise seeds (the tests seed every run on purpose;
    the warning itself is tested in tests/optim/test_inputs.py and tests/privacy)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        yield
