r"""Privacy accounting for botorch-dp: GDP/zCDP analysis, accountants and a ledger.

``analysis`` holds pure conversion functions; ``accountants`` wraps them (and Opacus's
accountants) behind Opacus's interface; ``ledger`` records what a tuning run spent.
"""

from botorch_dp.privacy.accountants import (
    ACCOUNTANT_NAMES,
    GDPAccountant,
    accountant_epsilon,
    epsilon_table,
    make_accountant,
)
from botorch_dp.privacy.analysis import (
    compose_gdp,
    compose_zcdp,
    gaussian_noise_std_for_mu,
    gaussian_zcdp,
    gdp_delta,
    gdp_epsilon,
    gdp_mu,
    gdp_mu_from_noise,
    gdp_to_zcdp,
    zcdp_epsilon,
    zcdp_epsilon_cks,
)
from botorch_dp.privacy.ledger import PrivacyBudgetExceeded, PrivacyLedger

__all__ = [
    "ACCOUNTANT_NAMES",
    "GDPAccountant",
    "PrivacyBudgetExceeded",
    "PrivacyLedger",
    "accountant_epsilon",
    "compose_gdp",
    "compose_zcdp",
    "epsilon_table",
    "gaussian_noise_std_for_mu",
    "gaussian_zcdp",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu",
    "gdp_mu_from_noise",
    "gdp_to_zcdp",
    "make_accountant",
    "zcdp_epsilon",
    "zcdp_epsilon_cks",
]
