r"""botorch-dp: differentially private local Bayesian optimization (DP-GIBO).

The package offers the GIBO gradient-information acquisition as a BoTorch
acquisition function, a private local-BO loop, privacy accountants, baselines
and benchmark problems.
"""

from botorch_dp.acquisition import qGradientInformation
from botorch_dp.optim import DPGIBO, DPGIBOConfig
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.plan import PrivatePlan, plan_private_run
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.privacy.seeding import PrivacyWarning

__version__ = "0.1.0"

__all__ = [
    "DPGIBO", "DPGIBOConfig", "GradientGP", "PrivacyLedger", "PrivacyWarning", "PrivatePlan", "plan_private_run",
    "qGradientInformation", "__version__",
]
