r"""Plan a private DP-GIBO run on a PUBLIC proxy, without touching the sensitive data.

Choosing the kernel's length-scales, the clip bound ``B``, the bias tolerance, the step size
``η`` or the number of steps ``T`` by trying or fitting them on the sensitive objective silently
voids the guarantee (every try is a release that nobody accounts for). ``plan_private_run``
chooses them on a public proxy instead: an objective with the same signature (``q x d`` points to
``q x n_p`` per-user losses) built from public users (a public dataset or split, opt-in or synthetic
users; a proxy whose MODELS train on sensitive rows charges each training run to their ledger, see
``plan_private_run``). The sensitive objective is not an argument: the plan cannot
see it. Because everything it looks at is public, the returned config is public too, and the
private run that uses it is exactly as private as one with a hand-picked config.

How the private run's noise is simulated on the proxy. Every release of DP-GIBO (gradient,
noisy norm, clip count, selection score) has sensitivity proportional to ``1/n``: the noise on
the scale of the mean is ``c/(n μ)`` for a constant ``c`` of the setting. A proxy run with
``n_p`` users at ``μ' = μ n/n_p`` therefore draws noise of exactly the distribution the private
run with ``n`` users at ``μ`` will draw (``simulation_config``), and the existing DP-GIBO loop
runs unchanged on the proxy. What the proxy cannot tell is how far its losses are from the
sensitive ones: the plan is as good as the proxy is similar.

The steps:

1. Kernel (``fit_kernel=True``, default; ``fit_kernel_on_proxy``): the proxy's mean loss at
   ``m = 10 d`` scrambled Sobol points of ``Θ`` (or of the box of half-width
   ``kernel_fit_radius`` around ``θ₀``) fits the hyperparameters of a copy of the config's own
   kernel (length-scales, outputscale, ...; and ``σ²`` when the config models noise) by
   marginal likelihood (BoTorch ``SingleTaskGP`` with a constant mean, ``fit_gpytorch_mll``).
   The fit is in the raw ``θ`` coordinates and loss units DP-GIBO's kernel acts on (it applies
   no input or outcome transform). ``Θ`` by default because the iterates may go anywhere in it
   and the kernel is stationary: the length-scales should describe the loss where the run goes,
   not only the first search box. Fitted on a public proxy, the hyperparameters are public;
   they are never fitted on the sensitive objective, which the plan never sees.
2. For each batch rule (``bias_tolerances``: adaptive tolerances, ``None`` for fixed batches;
   default the config's own rule), ``B`` candidates: quantiles of the proxy's per-user
   gradient-estimate norms ``‖A y_i‖`` at ``θ₀`` (the first batch DP-GIBO would ask for, with
   the fitted kernel; ``A = ∇k(θ₀, D)K⁻¹``). With ``clip_bound="adaptive"`` the candidates are
   ``clip_init`` (``B₀``).
3. Each setting (batch rule × ``B`` × ``η`` × ``T``) runs DP-GIBO on the proxy at the
   simulated budget ``num_repeats`` times; its score is the proxy's mean loss at the returned
   iterate.
4. The setting with the smallest mean score is returned in a ``DPGIBOConfig`` (with the fitted
   kernel), with a report of the fit and of every setting: scores, the first step's noise std
   at the private budget, and the expected noise-to-signal ratio ``σ√d/‖ḡ_B(θ₀)‖`` of that
   step on the proxy.

The privacy budget, θ₀, the box and the step rule are taken from the given config (public
choices); the plan does not choose them.

The planner plans DP-GIBO's settings only. The choice of METHOD is the methods layer's
(``methods.choice``, the one place methods are compared): ``methods.choice.plan_then_compare``
plans with ``plan_private_run`` on the fitting half of the proxy's users and simulates DP-GIBO with
the recommended config, private random search and DP-HyPO (where affordable) on the other half with
the private run's noise, ``num_repeats`` times with paired seeds; ``tune(method="auto", proxy=...)``
calls it (``tuning.mixed_methods.plan_and_compare``, which keeps the comparison on the plan:
``PrivatePlan.methods``). ``plan_private_run(choose_method=True)`` is deprecated and does the same.

The package: ``kernel_fit`` (step 1, ``fit_kernel_on_proxy``) and ``search`` (steps 2 to 4,
``plan_private_run``); the proxy's checked losses and ``simulation_config`` are
``methods.proxy``'s, re-exported here. The method choice and the methods themselves
live in ``botorch_dp.methods`` (``protocol``, ``dp_gibo``, ``private_random_search``,
``dp_hypo``, ``choice``), the layer below planning; their names are still importable from here
and from the old modules ``plan.method_*``, loaded on first use (PEP 562), so that importing
the planner does not load every method.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from botorch_dp.methods.proxy import simulation_config
from botorch_dp.plan.kernel_fit import KERNEL_FIT_POINTS_PER_DIM, KernelFit, KernelFitWarning, fit_kernel_on_proxy
from botorch_dp.plan.search import DEFAULT_CLIP_QUANTILES, PlanTrial, PrivatePlan, plan_private_run, planned_simulations

if TYPE_CHECKING:  # for type checkers and the API reference; loaded on first use below
    from botorch_dp.methods.choice import DEFAULT_METHODS, MethodComparison, MethodScore, compare_methods
    from botorch_dp.methods.dp_gibo import DPGIBOMethod
    from botorch_dp.methods.dp_hypo import DPHyPOMethod
    from botorch_dp.methods.private_random_search import PrivateRandomSearchMethod, proxy_loss_clip
    from botorch_dp.methods.protocol import CandidateMethod as CandidateMethod
    from botorch_dp.methods.protocol import MethodContext, MethodRun, MethodUnavailable

#: The methods layer's names re-exported here → their module (imported on first use).
_METHOD_NAMES = {
    **dict.fromkeys(("DEFAULT_METHODS", "MethodComparison", "MethodScore", "compare_methods"), "choice"),
    "DPGIBOMethod": "dp_gibo",
    "DPHyPOMethod": "dp_hypo",
    **dict.fromkeys(("CandidateMethod", "MethodContext", "MethodRun", "MethodUnavailable"), "protocol"),
    **dict.fromkeys(("PrivateRandomSearchMethod", "proxy_loss_clip"), "private_random_search"),
}

# ``CandidateMethod`` stays importable from here (an alias of ``botorch_dp.methods.Method``, documented there)
__all__ = [
    "DEFAULT_CLIP_QUANTILES",
    "DEFAULT_METHODS",
    "KERNEL_FIT_POINTS_PER_DIM",
    "DPGIBOMethod",
    "DPHyPOMethod",
    "KernelFit",
    "KernelFitWarning",
    "MethodComparison",
    "MethodContext",
    "MethodRun",
    "MethodScore",
    "MethodUnavailable",
    "PlanTrial",
    "PrivatePlan",
    "PrivateRandomSearchMethod",
    "compare_methods",
    "fit_kernel_on_proxy",
    "plan_private_run",
    "planned_simulations",
    "proxy_loss_clip",
    "simulation_config",
]


def __getattr__(name: str) -> Any:
    if name in _METHOD_NAMES:
        value = getattr(importlib.import_module(f"botorch_dp.methods.{_METHOD_NAMES[name]}"), name)
        globals()[name] = value  # once: later lookups do not come here
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
