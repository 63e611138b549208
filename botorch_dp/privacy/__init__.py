r"""Privacy for botorch-dp: the mechanisms, GDP/zCDP/RDP analysis, accountants and a ledger.

``mechanisms`` is the privacy boundary (every release, with its cost); ``checks`` the one
set of argument checks; ``analysis`` pure conversion functions; ``ledger`` records what a
tuning run spent; ``accountants`` wraps the analysis (and Opacus's accountants) behind
Opacus's interface. ``accountants`` is the only module that imports Opacus; its names
are loaded from here on first use, so ``import botorch_dp.privacy`` does not load Opacus.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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
    private_selection_epsilon,
    rdp_to_epsilon,
    zcdp_epsilon,
    zcdp_epsilon_cks,
)
from botorch_dp.privacy.ledger import PrivacyBudgetExceeded, PrivacyLedger

if TYPE_CHECKING:
    from botorch_dp.privacy.accountants import (
        ACCOUNTANT_NAMES,
        GDPAccountant,
        accountant_epsilon,
        epsilon_table,
        make_accountant,
    )

_FROM_ACCOUNTANTS = ("ACCOUNTANT_NAMES", "GDPAccountant", "accountant_epsilon", "epsilon_table", "make_accountant")


def __getattr__(name: str) -> Any:
    # PEP 562: the Opacus-backed names are imported on first access.
    if name in _FROM_ACCOUNTANTS:
        return getattr(importlib.import_module("botorch_dp.privacy.accountants"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


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
    "private_selection_epsilon",
    "rdp_to_epsilon",
    "zcdp_epsilon",
    "zcdp_epsilon_cks",
]
