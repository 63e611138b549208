import pytest

from botorch_dp.utils import torch_threads


@pytest.fixture(autouse=True)
def one_torch_thread():
    """The audits run many tiny DP-GIBO runs: one torch thread each, as scripts/audit_privacy.py runs them
    (two threads on a busy 2-core machine made the runs several times slower)."""
    with torch_threads(1):
        yield
