r"""Benchmark problems that return per-user losses ℓ_i(θ) for the private loop.

``get_problem(name, **kwargs)`` builds one of the paper's problems by registry name;
``AMPTuningObjective`` (``logistic_regression``) tunes AMP-trained logistic regression, on
the data of ``logistic_data`` with the per-run privacy budgets of ``run_budgets``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from botorch_dp.objectives.per_user_problem import PerUserProblem
    from botorch_dp.problems.gp_regression import GPRegressionLengthscales
    from botorch_dp.problems.huber import HuberRegression
    from botorch_dp.problems.logistic_data import LOGISTIC_DATASETS, LogisticData, load_logistic_data
    from botorch_dp.problems.logistic_regression import AMPTuningObjective, DPSGDTuningObjective
    from botorch_dp.problems.normal_location import NormalLocation
    from botorch_dp.problems.run_budgets import AMPRunBudget, plan_amp_runs, plan_amp_selection
    from botorch_dp.problems.svm import KernelSVMRegression

#: Public name → the module that defines it. Each is imported on first use (PEP 562), so that
#: ``botorch_dp.objectives.per_user_problem`` (which the baselines and the planner need) does not load SciPy's
#: optimizers, the logistic-regression data or the AMP budgets.
_LAZY_NAMES = {
    "PerUserProblem": "botorch_dp.objectives.per_user_problem",
    "GPRegressionLengthscales": "botorch_dp.problems.gp_regression",
    "HuberRegression": "botorch_dp.problems.huber",
    **dict.fromkeys(("LOGISTIC_DATASETS", "LogisticData", "load_logistic_data"), "botorch_dp.problems.logistic_data"),
    **dict.fromkeys(("AMPTuningObjective", "DPSGDTuningObjective"), "botorch_dp.problems.logistic_regression"),
    "NormalLocation": "botorch_dp.problems.normal_location",
    **dict.fromkeys(("AMPRunBudget", "plan_amp_runs", "plan_amp_selection"), "botorch_dp.problems.run_budgets"),
    "KernelSVMRegression": "botorch_dp.problems.svm",
}
#: Registry name → the public name of its problem class (paper settings are the constructor defaults).
_REGISTRY = {
    "normal_location": "NormalLocation",
    "huber": "HuberRegression",
    "gp_regression": "GPRegressionLengthscales",
    "svm": "KernelSVMRegression",
}


def __getattr__(name: str) -> Any:
    if name == "PROBLEMS":  # registry name -> problem class, importing the four problem modules
        value: Any = {key: __getattr__(cls) for key, cls in _REGISTRY.items()}
    elif name in _LAZY_NAMES:
        value = getattr(importlib.import_module(_LAZY_NAMES[name]), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # once: later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


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
    if name not in _REGISTRY:
        raise ValueError(f"Unknown problem {name!r}; choose from {sorted(_REGISTRY)}.")
    cls: type[PerUserProblem] = __getattr__(_REGISTRY[name])
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
