r"""Baselines for DP-GIBO: random search, private random search, DP-HyPO, UCB-BO, GIBO, noisy GD.

Every baseline takes an objective (a ``PerUserProblem`` or a callable ``q x d -> q x n``
per-user losses), the ``2 x d`` bounds and a budget, and returns a ``BaselineResult``; the
private selections (``private_random_search``, ``dp_hypo``) return their winner only, a
``PrivateSelectionResult`` (their trials: the NON-PRIVATE ``NonPrivateTrials``, on request).
"""

from botorch_dp.baselines.base import BaselineGuarantee, BaselineHistory, BaselineResult, Objective, incumbent_history
from botorch_dp.baselines.dp_hypo import dp_hypo, gp_sampling_log_weights, project_to_ratio_class
from botorch_dp.baselines.gibo import NO_CLIP, from_dp_gibo_result, gibo
from botorch_dp.baselines.noisy_gd import noisy_gradient_descent
from botorch_dp.baselines.private_random_search import private_random_search
from botorch_dp.baselines.random_search import random_search
from botorch_dp.baselines.selection import HiddenTrialError, NonPrivateTrials, PrivateSelectionResult
from botorch_dp.baselines.ucb import ucb_bo

# The analysis of private selection lives in privacy.analysis; it is re-exported here
# because the paper scripts import it next to the method.
from botorch_dp.privacy.analysis.private_selection import (
    DISTRIBUTIONS,
    per_trial_mu_for_epsilon,
    private_selection_epsilon,
    private_selection_rdp,
    sample_num_trials,
    tnb_gamma_for_mean,
    tnb_log_pmf,
    tnb_mean,
)
from botorch_dp.privacy.analysis.rdp import rdp_to_epsilon

__all__ = [
    "DISTRIBUTIONS",
    "NO_CLIP",
    "BaselineGuarantee",
    "BaselineHistory",
    "BaselineResult",
    "HiddenTrialError",
    "NonPrivateTrials",
    "Objective",
    "dp_hypo",
    "from_dp_gibo_result",
    "gibo",
    "gp_sampling_log_weights",
    "incumbent_history",
    "noisy_gradient_descent",
    "per_trial_mu_for_epsilon",
    "private_random_search",
    "project_to_ratio_class",
    "private_selection_epsilon",
    "private_selection_rdp",
    "random_search",
    "rdp_to_epsilon",
    "PrivateSelectionResult",
    "sample_num_trials",
    "tnb_gamma_for_mean",
    "tnb_log_pmf",
    "tnb_mean",
    "ucb_bo",
]
