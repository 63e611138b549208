r"""Pure privacy-analysis functions: μ-GDP (``gdp``) and zCDP (``zcdp``).

No state and no torch: floats in, floats out, checked against published values.
"""

from botorch_dp.privacy.analysis.gdp import (
    compose_gdp,
    gaussian_noise_std_for_mu,
    gdp_delta,
    gdp_epsilon,
    gdp_mu,
    gdp_mu_from_noise,
)
from botorch_dp.privacy.analysis.zcdp import (
    compose_zcdp,
    gaussian_zcdp,
    gdp_to_zcdp,
    zcdp_epsilon,
    zcdp_epsilon_cks,
)

__all__ = [
    "compose_gdp",
    "compose_zcdp",
    "gaussian_noise_std_for_mu",
    "gaussian_zcdp",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu",
    "gdp_mu_from_noise",
    "gdp_to_zcdp",
    "zcdp_epsilon",
    "zcdp_epsilon_cks",
]
