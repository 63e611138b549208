import os

# The regression pins (tests/test_regression_pins.py) are exact floating-point values, and
# the L-BFGS-B batch search runs on numpy's and scipy's OpenBLAS, whose kernels are chosen by
# CPU: an AVX-512 machine picks "SkylakeX" kernels that round differently from the
# "Haswell"/"Zen" ones the pins were written with. Fix the kernel set before numpy loads
# (a caller's own OPENBLAS_CORETYPE wins).
os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")

import pytest  # noqa: E402
import torch  # noqa: E402


def pytest_configure(config):
    # Tests that need reproducible noise pass a seed explicitly (issue 13); the warning itself
    # is tested with pytest.warns in tests/optim/test_inputs.py and tests/privacy. Added here
    # rather than in setup.cfg, where naming the category would import botorch_dp (and numpy)
    # before the OpenBLAS setting above.
    config.addinivalue_line(
        "filterwarnings", "ignore:A noise seed was given:botorch_dp.privacy.seeding.PrivacyWarning"
    )


@pytest.fixture(params=[torch.float32, torch.float64], ids=["float32", "float64"])
def dtype(request):
    return request.param
