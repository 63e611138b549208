r"""Benchmark problems that return per-user losses ℓ_i(θ) for the private loop.

``get_problem(name, **kwargs)`` builds one of the paper's problems by registry name;
``AMPTuningObjective`` (``logistic_regression``) tunes AMP-trained logistic regression, on
the data of ``logistic_data`` with the per-run privacy budgets of ``run_budgets``.
"""

from __future__ import annotations

from botorch_dp.problems.base import PerUserProblem
from botorch_dp.problems.gp_regression import GPRegressionLengthscales
from botorch_dp.problems.huber import HuberRegression
from botorch_dp.problems.logistic_data import LOGISTIC_DATASETS, LogisticData, load_logistic_data
from botorch_dp.problems.logistic_regression import AMPTuningObjective, DPSGDTuningObjective
from botorch_dp.problems.normal_location import NormalLocation
from botorch_dp.problems.run_budgets import AMPRunBudget, plan_amp_runs, plan_amp_selection
from botorch_dp.problems.svm import KernelSVMRegression

#: Registry name -> problem class (paper settings are the constructor defaults).
PROBLEMS: dict[str, type[PerUserProblem]] = {
    "normal_location": NormalLocation,
    "huber": HuberRegression,
    "gp_regression": GPRegressionLengthscales,
    "svm": KernelSVMRegression,
}


def get_problem(name: str, **kwargs) -> PerUserProblem:
    r"""Instantiate a registered problem.

    Args:
        name: One of ``"normal_location"``, ``"huber"``, ``"gp_regression"``,
            ``"svm"``.
        **kwargs: Passed to the problem's constructor (e.g. ``seed``,
            ``observation_noise_std``).

    Returns:
        The problem instance.
    """
    try:
        cls = PROBLEMS[name]
    except KeyError:
        raise ValueError(f"Unknown problem {name!r}; choose from {sorted(PROBLEMS)}.") from None
    return cls(**kwargs)


__all__ = [
    "LOGISTIC_DATASETS",
    "PROBLEMS",
    "AMPRunBudget",
    "AMPTuningObjective",
    "DPSGDTuningObjective",
    "GPRegressionLengthscales",
    "HuberRegression",
    "KernelSVMRegression",
    "LogisticData",
    "NormalLocation",
    "PerUserProblem",
    "get_problem",
    "load_logistic_data",
    "plan_amp_runs",
    "plan_amp_selection",
]
