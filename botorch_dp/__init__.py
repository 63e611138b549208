r"""botorch-dp: differentially private local Bayesian optimization (DP-GIBO).

The package offers the GIBO gradient-information acquisition as a BoTorch
acquisition function, a private local-BO loop, privacy accountants, baselines
and benchmark problems.

Importing the package loads none of them (issue 33, item 4: ``import botorch_dp`` at most
1.3x ``import botorch``, which is itself lazy): each public name, and each subpackage as an
attribute (``botorch_dp.optim``), is imported on first access (PEP 562), so that a script
that needs only the ledger does not pay for BoTorch's acquisition functions.
``from botorch_dp import X`` works for every ``X`` in ``__all__``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from botorch_dp.acquisition import qGradientInformation
    from botorch_dp.gradient_gp import GradientGP
    from botorch_dp.optim import DPGIBO, DPGIBOConfig
    from botorch_dp.optim.public_checks import SettingsWarning
    from botorch_dp.plan import PrivatePlan, plan_private_run
    from botorch_dp.privacy.ledger import PrivacyLedger
    from botorch_dp.privacy.seeding import PrivacyWarning
    from botorch_dp.tuning.one_call import tune

__version__ = "0.1.0"

#: Public name → the module that defines it.
_LAZY_NAMES = {
    "DPGIBO": "botorch_dp.optim",
    "DPGIBOConfig": "botorch_dp.optim",
    "GradientGP": "botorch_dp.gradient_gp",
    "PrivacyLedger": "botorch_dp.privacy.ledger",
    "PrivacyWarning": "botorch_dp.privacy.seeding",
    "PrivatePlan": "botorch_dp.plan",
    "plan_private_run": "botorch_dp.plan",
    "SettingsWarning": "botorch_dp.optim.public_checks",
    "qGradientInformation": "botorch_dp.acquisition",
    "tune": "botorch_dp.tuning.one_call",
}

#: The subpackages and modules, imported on first attribute access (``botorch_dp.optim``).
_SUBMODULES = (
    "acquisition",
    "audit",
    "baselines",
    "demo",
    "distributed",
    "evaluation",
    "gradient_gp",
    "integrations",
    "kernel_derivatives",
    "optim",
    "methods",
    "objectives",
    "plan",
    "plot",
    "privacy",
    "problems",
    "storage",
    "training",
    "tuning",
    "utils",
)

__all__ = [
    "DPGIBO",
    "DPGIBOConfig",
    "GradientGP",
    "PrivacyLedger",
    "PrivacyWarning",
    "PrivatePlan",
    "SettingsWarning",
    "plan_private_run",
    "qGradientInformation",
    "tune",
    "__version__",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY_NAMES:
        value = getattr(importlib.import_module(_LAZY_NAMES[name]), name)
        globals()[name] = value  # once: later lookups do not come here
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")  # the import sets the attribute
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | set(_SUBMODULES))
