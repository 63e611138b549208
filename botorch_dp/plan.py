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
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from botorch.exceptions.warnings import InputDataWarning
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from gpytorch.constraints import GreaterThan
from gpytorch.kernels import Kernel
from gpytorch.likelihoods import GaussianLikelihood
from gpytorch.mlls import ExactMarginalLogLikelihood
from torch import Tensor
from torch.quasirandom import SobolEngine

from botorch_dp.gradient_gp import GradientGP
from botorch_dp.optim.config import MIN_USERS, DPGIBOConfig, check_per_user_losses, resolve_model
from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.privacy.analysis.gdp import pure_dp_to_gdp_mu
from botorch_dp.privacy.checks import check_nonnegative_int, check_positive, check_positive_int, check_probability
from botorch_dp.privacy.mechanisms import clip_rows
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.utils import child_seeds

__all__ = [
    "DEFAULT_CLIP_QUANTILES",
    "KERNEL_FIT_POINTS_PER_DIM",
    "KernelFit",
    "PlanTrial",
    "PrivatePlan",
    "fit_kernel_on_proxy",
    "plan_private_run",
    "simulation_config",
]

#: Quantiles of the proxy's per-user gradient-estimate norms tried as ``B``.
DEFAULT_CLIP_QUANTILES = (0.5, 0.75, 0.9)
#: Default number of kernel-fit points per dimension (``m = 10 d``, the usual size of an
#: initial space-filling design for GP hyperparameters).
KERNEL_FIT_POINTS_PER_DIM = 10
#: Numerical nugget of a noiseless fit, relative to the variance of the fitted mean losses.
_RELATIVE_NUGGET = 1e-6


@dataclass(frozen=True)
class PlanTrial:
    r"""One setting tried on the proxy (all values public).

    Attributes:
        clip_quantile: The quantile of the proxy norms the bound was taken at.
        clip_bound: ``B`` (``B₀`` with ``clip_bound="adaptive"``).
        step_size: ``η``.
        num_iterations: ``T``.
        proxy_losses: The proxy's mean loss at the returned iterate, one per repeat.
        noise_std: The first gradient release's noise std per coordinate at the private
            budget and ``n`` (the same in the simulation, by construction).
        noise_to_signal: ``σ√d/‖ḡ_B(θ₀)‖``: expected norm of that noise over the norm of the
            proxy's clipped mean gradient estimate at ``θ₀`` (``inf`` if the latter is 0).
        bias_tolerance: The batch rule: the adaptive rule's tolerance on ``tr Σ_D(θ)``, or
            ``None`` for fixed batches (``batch_size``, default ``d + 1``).
    """

    clip_quantile: float
    clip_bound: float
    step_size: float
    num_iterations: int
    proxy_losses: tuple[float, ...]
    noise_std: float
    noise_to_signal: float
    bias_tolerance: float | None = None

    @property
    def mean_proxy_loss(self) -> float:
        r"""The mean of ``proxy_losses``: the setting's score (smaller is better)."""
        return math.fsum(self.proxy_losses) / len(self.proxy_losses)


@dataclass(frozen=True)
class KernelFit:
    r"""GP hyperparameters fitted on the PUBLIC proxy's mean loss (all values public).

    Attributes:
        points: The ``m x d`` scrambled Sobol points of the fit, in the raw ``θ`` coordinates
            the kernel acts on (DP-GIBO applies no input transform).
        mean_losses: The ``m`` proxy mean losses ``(1/n_p) Σ_i ℓ_i`` at ``points``.
        region: The ``2 x d`` box the points fill.
        hyperparameters: ``{name: values}`` of the fitted kernel, constrained values (e.g.
            ``"base_kernel.lengthscale"``, ``"outputscale"``), named as in the kernel.
        noise_variance: The fitted ``σ²``, or ``None`` when the config models no noise (the
            fit then fixes a numerical nugget, ``1e-6`` of the losses' variance).
        log_marginal_likelihood: The fitted model's exact marginal log likelihood per point.
    """

    points: Tensor
    mean_losses: Tensor
    region: Tensor
    hyperparameters: dict[str, tuple[float, ...]]
    noise_variance: float | None
    log_marginal_likelihood: float

    @property
    def lengthscales(self) -> tuple[float, ...] | None:
        r"""The first ``lengthscale`` among ``hyperparameters`` (``None`` if the kernel has none)."""
        for name, values in self.hyperparameters.items():
            if name.split(".")[-1] == "lengthscale":
                return values
        return None

    def describe(self) -> str:
        r"""One line per fitted hyperparameter."""
        lines = [f"kernel fitted by marginal likelihood on the proxy's mean loss at {len(self.points)} Sobol points:"]
        for name, values in self.hyperparameters.items():
            lines.append(f"  {name} = " + ", ".join(f"{v:.4g}" for v in values))
        noise = "not modelled (numerical nugget only)" if self.noise_variance is None else f"{self.noise_variance:.4g}"
        lines.append(f"  noise variance = {noise}")
        return "\n".join(lines)


def _constrained_hyperparameters(kernel: Kernel) -> dict[str, tuple[float, ...]]:
    r"""``{name: values}`` of every parameter of ``kernel``, through its constraint if any."""
    out = {}
    for name, raw, constraint in kernel.named_parameters_and_constraints():
        value = raw if constraint is None else constraint.transform(raw)
        parts = name.split(".")
        parts[-1] = parts[-1].removeprefix("raw_")
        out[".".join(parts)] = tuple(float(v) for v in value.detach().reshape(-1))
    return out


def _proxy_losses(proxy_objective: Callable[[Tensor], Tensor], points: Tensor) -> Tensor:
    r"""The proxy's ``q x n_p`` per-user losses at ``q x d`` points, checked, in float64."""
    losses = torch.as_tensor(proxy_objective(points)).detach().to(torch.float64)
    if losses.dim() != 2 or losses.shape[0] != points.shape[0]:
        raise ValueError(f"proxy_objective must return a q x n_p tensor of per-user losses, got shape {tuple(losses.shape)}.")
    check_per_user_losses(losses.shape[1], 1.0)
    if not torch.isfinite(losses).all():
        raise ValueError("proxy_objective returned non-finite losses.")
    return losses


def _fit_region(config: DPGIBOConfig, radius: float | Tensor | None, name: str = "radius") -> Tensor:
    r"""The ``2 x d`` box ``[θ₀ − r, θ₀ + r] ∩ Θ`` (``Θ`` itself for ``radius=None``)."""
    bounds = config.bounds.to(torch.float64)
    if radius is None:
        return bounds.clone()
    d = bounds.shape[1]
    r = torch.as_tensor(radius, dtype=torch.float64)
    if r.dim() > 1 or r.numel() not in (1, d) or not torch.isfinite(r).all() or (r <= 0).any():
        raise ValueError(f"{name} must be a positive finite number or d = {d} vector, got {radius!r}.")
    theta0 = (bounds[0] + bounds[1]) / 2 if config.theta0 is None else config.theta0.to(torch.float64)
    return torch.stack([torch.maximum(theta0 - r, bounds[0]), torch.minimum(theta0 + r, bounds[1])])


def fit_kernel_on_proxy(
    proxy_objective: Callable[[Tensor], Tensor],
    config: DPGIBOConfig,
    *,
    num_points: int | None = None,
    radius: float | Tensor | None = None,
    seed: int = 0,
) -> tuple[DPGIBOConfig, KernelFit]:
    r"""Fit the config's kernel on a PUBLIC proxy's mean loss by marginal likelihood.

    The proxy is evaluated at ``m`` scrambled Sobol points of the region (``Θ``, or the box of
    half-width ``radius`` around ``θ₀``), and a BoTorch ``SingleTaskGP`` with a copy of the
    config's kernel (``config.kernel`` or ``config.model.covar_module``: same class, same
    structure, float64) is fitted to the mean losses with ``fit_gpytorch_mll``. The fit is in
    the raw ``θ`` coordinates and loss units DP-GIBO's kernel acts on (no input or outcome
    transform), with a constant prior mean: the level of the loss says nothing about its
    gradient, which is all DP-GIBO asks of the GP. Every hyperparameter of the kernel is fitted
    (length-scales, outputscale, offsets, ...), also frozen ones: ``requires_grad=False``, as in
    the ``problems``' recommended kernels, guards against fits on sensitive losses (the
    returned copy keeps the flags). With ``σ² > 0`` in the config (or the model's likelihood)
    the noise variance is fitted too, from that value; with ``σ² = 0`` it stays 0 (the fit uses
    a numerical nugget only). The user's kernel and model are not changed.

    Never pass the sensitive objective: fitted hyperparameters of sensitive losses are
    sensitive, and this function does not privatize anything.

    Args:
        proxy_objective: Maps ``q x d`` points to ``q x n_p`` public per-user losses.
        config: The private run's config.
        num_points: ``m`` (default ``10 d``); at least 2.
        radius: Half-width (float or ``d`` tensor, units of ``θ``) of the fit box around
            ``θ₀``, cut to ``Θ``; ``None`` (default): all of ``Θ``.
        seed: Seed of the Sobol scrambling (public randomness).

    Returns:
        The config with the fitted kernel (and ``noise_variance``), and the ``KernelFit``.

    Raises:
        ValueError: Naming the argument, for a bad ``num_points`` or ``radius``, a proxy that
            does not return finite per-user losses, or a mean loss that is constant at the points.
        botorch.exceptions.ModelFittingError: If every attempt of ``fit_gpytorch_mll`` fails.
    """
    d = config.bounds.shape[1]
    m = KERNEL_FIT_POINTS_PER_DIM * d if num_points is None else check_positive_int(num_points, "num_points")
    if m < 2:
        raise ValueError(f"num_points must be at least 2, got {m}.")
    region = _fit_region(config, radius)
    seed = check_nonnegative_int(seed, "seed")
    sobol = SobolEngine(d, scramble=True, seed=seed).draw(m, dtype=torch.float64)
    points = region[0] + (region[1] - region[0]) * sobol
    y = _proxy_losses(proxy_objective, points).mean(dim=1)
    if not float(y.var()) > 0:
        raise ValueError("The proxy's mean loss is constant at the kernel-fit points: there is nothing to fit.")
    source = config.kernel if config.kernel is not None else config.model.covar_module
    _, noise, _ = resolve_model(config)
    nugget = max(config.jitter, _RELATIVE_NUGGET * float(y.var()))
    # every hyperparameter is fitted, also those the user froze (``requires_grad=False`` is how
    # kernels say "never fit on the sensitive losses"; this fit is on public ones)
    kernel = copy.deepcopy(source).to(torch.float64).requires_grad_(True)
    if noise > 0:
        likelihood = GaussianLikelihood(noise_constraint=GreaterThan(nugget)).to(torch.float64)
        likelihood.noise = max(noise, 2 * nugget)
        model_kw = dict(likelihood=likelihood)
    else:
        model_kw = dict(train_Yvar=torch.full((m, 1), nugget, dtype=torch.float64))
    with warnings.catch_warnings():
        # raw coordinates and raw loss units on purpose: they are the ones the kernel acts on
        warnings.filterwarnings("ignore", category=InputDataWarning)
        model = SingleTaskGP(points, y.unsqueeze(-1), covar_module=kernel, outcome_transform=None, **model_kw)
        mll = fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        model.train()
        with torch.no_grad():
            lml = float(mll(model(points), y))
    model.eval()
    fitted = copy.deepcopy(source).to(torch.float64)
    fitted.load_state_dict(kernel.state_dict())
    fitted_noise = float(model.likelihood.noise.detach().mean()) if noise > 0 else None
    changes = {} if fitted_noise is None else {"noise_variance": fitted_noise}
    if config.kernel is not None:
        changes["kernel"] = fitted
    else:
        fitted_model = copy.deepcopy(config.model)
        fitted_model.covar_module = fitted
        changes["model"] = fitted_model
    fit = KernelFit(
        points=points, mean_losses=y, region=region, hyperparameters=_constrained_hyperparameters(fitted),
        noise_variance=fitted_noise, log_marginal_likelihood=lml,
    )
    return dataclasses.replace(config, **changes), fit


@dataclass
class PrivatePlan:
    r"""What ``plan_private_run`` returns. Everything here comes from the public proxy and the
    public settings, so all of it may be published.

    Attributes:
        config: The recommended ``DPGIBOConfig``: the given one with the fitted kernel (and
            noise variance) and the best ``B``, ``η``, ``T`` and batch rule.
        trials: Every ``PlanTrial``, in the order tried.
        best: The index of the recommended trial.
        norm_quantiles: ``{γ: B_γ}``, the proxy's per-user gradient-estimate norm quantiles at
            ``θ₀``, for the recommended batch rule (the other rules' are in ``trials``).
        gradient_points: The ``b x d`` first batch at ``θ₀`` the norms were taken at (same rule).
        num_users: ``n`` of the private run.
        num_proxy_users: ``n_p`` of the proxy.
        kernel_fit: The ``KernelFit`` on the proxy, or ``None`` with ``fit_kernel=False``
            (the config's kernel kept).
    """

    config: DPGIBOConfig
    trials: list[PlanTrial]
    best: int
    norm_quantiles: dict[float, float]
    gradient_points: Tensor
    num_users: int
    num_proxy_users: int
    kernel_fit: KernelFit | None = None

    def table(self) -> str:
        r"""The trials as a fixed-width text table, the recommended one marked ``*``."""
        head = (
            f"{'':1} {'batch rule':>12} {'quantile':>8} {'B':>10} {'eta':>8} {'T':>4} {'proxy loss':>11} {'+-':>9} "
            f"{'noise std':>10} {'noise/signal':>12}"
        )
        lines = [head]
        for i, t in enumerate(self.trials):
            spread = (max(t.proxy_losses) - min(t.proxy_losses)) / 2
            rule = "fixed" if t.bias_tolerance is None else f"tol {t.bias_tolerance:.3g}"
            lines.append(
                f"{'*' if i == self.best else '':1} {rule:>12} {t.clip_quantile:>8.3g} {t.clip_bound:>10.4g} "
                f"{t.step_size:>8.3g} {t.num_iterations:>4d} {t.mean_proxy_loss:>11.5g} {spread:>9.2g} "
                f"{t.noise_std:>10.3g} {t.noise_to_signal:>12.3g}"
            )
        return "\n".join(lines)

    def __str__(self) -> str:
        c = self.config
        budget = f"mu = {c.privacy_mu:.4g}" + ("" if c.epsilon is None else f" (epsilon = {c.epsilon:g}, delta = {c.delta:g})")
        kernel = "kernel: the config's (not fitted)" if self.kernel_fit is None else self.kernel_fit.describe()
        return (
            f"DP-GIBO plan on a public proxy of {self.num_proxy_users} users for a private run on "
            f"{self.num_users} users at {budget}; noise simulated at the private budget.\n{kernel}\n{self.table()}"
        )


def simulation_config(config: DPGIBOConfig, num_users: int, num_proxy_users: int, **changes) -> DPGIBOConfig:
    r"""The config whose run on ``n_p`` proxy users draws the noise the private run on ``n``
    users will draw.

    Every release's noise is ``c/(n μ_j)`` on the scale of the mean, so each GDP parameter is
    scaled by ``s = n/n_p``: the steps' ``μ_steps`` (and with it every per-step ``μ``, the
    adaptive schedule's and the clip counts'), ``selection_mu``, ``max_step_mu``, and for the
    exponential selection ``ε_sel`` (its scores' sensitivity is ``C/n`` too). ``privacy_mu``
    is then ``√((s μ_steps)² + μ_sel'²)``. The budget filter is dropped (the proxy is public).

    Args:
        config: The private run's config.
        num_users: ``n``.
        num_proxy_users: ``n_p``.
        **changes: Further fields to replace (e.g. ``clip_bound``, ``seed``).
    """
    scale = check_positive_int(num_users, "num_users (n)") / check_positive_int(num_proxy_users, "num_proxy_users")
    c = config
    selection_epsilon = None if c.selection_epsilon is None else c.selection_epsilon * scale
    selection_mu = None if c.selection_mu is None else c.selection_mu * scale
    if math.isinf(c.privacy_mu):
        mu = math.inf
    else:
        mu_sel = 0.0
        if selection_epsilon is not None:
            mu_sel = pure_dp_to_gdp_mu(selection_epsilon)
        elif selection_mu is not None:
            mu_sel = selection_mu
        mu = math.hypot(scale * c.mu_split.steps_mu, mu_sel)
    return dataclasses.replace(
        c, privacy_mu=mu, epsilon=None, delta=None, validation_mu_budget=None,
        selection_epsilon=selection_epsilon, selection_mu=selection_mu,
        max_step_mu=None if c.max_step_mu is None else c.max_step_mu * scale, **changes,
    )


def _checked_floats(values: Sequence[float], name: str, check: Callable[[float, str], float]) -> tuple[float, ...]:
    values = tuple(values)
    if not values:
        raise ValueError(f"{name} must hold at least one value.")
    return tuple(check(v, name) for v in values)


def _with_batch_rule(config: DPGIBOConfig, bias_tolerance: float | None) -> DPGIBOConfig:
    r"""``config`` with the adaptive rule at ``bias_tolerance``, or fixed batches for ``None``."""
    if bias_tolerance is None:
        return config if config.bias_tolerance is None else dataclasses.replace(config, bias_tolerance=None)
    return dataclasses.replace(config, bias_tolerance=bias_tolerance, batch_size=None)


def _checked_tolerances(values: Sequence[float | None]) -> tuple[float | None, ...]:
    values = tuple(values)
    if not values:
        raise ValueError("bias_tolerances must hold at least one value (None: fixed batches).")
    return tuple(None if v is None else check_positive(v, "bias_tolerances", allow_inf=False) for v in values)


def plan_private_run(
    proxy_objective: Callable[[Tensor], Tensor],
    config: DPGIBOConfig,
    *,
    num_users: int,
    clip_quantiles: Sequence[float] = DEFAULT_CLIP_QUANTILES,
    step_sizes: Sequence[float] | None = None,
    num_iterations: Sequence[int] | None = None,
    bias_tolerances: Sequence[float | None] | None = None,
    fit_kernel: bool = True,
    kernel_fit_points: int | None = None,
    kernel_fit_radius: float | Tensor | None = None,
    num_repeats: int = 2,
    seed: int = 0,
) -> PrivatePlan:
    r"""Fit the kernel, then choose ``B``, ``η``, ``T`` and the batch rule of a private DP-GIBO
    run, all on a PUBLIC proxy objective.

    The proxy's users must be public (a public dataset or split, opt-in or synthetic users): their
    losses are used without noise or accounting. Never pass the sensitive objective. A proxy that
    TRAINS on the sensitive training rows (``TorchModelTuningObjective.with_data`` on a public
    validation split) is charged: every model it trains goes to the sensitive objective's ledger.

    Args:
        proxy_objective: Maps ``q x d`` points to the ``q x n_p`` per-user losses of the
            proxy users (the signature of the private objective).
        config: The private run's config: bounds, kernel, batch rule, privacy budget
            (``privacy_mu`` or ``epsilon``/``delta``), schedule and selection. Its kernel
            hyperparameters (and ``noise_variance`` when positive) are fitted unless
            ``fit_kernel=False``; its ``clip_bound`` (``clip_init`` with ``"adaptive"``),
            ``step_size``, ``num_iterations`` and batch rule are what the search chooses.
        num_users: ``n``, the number of users of the private run (public).
        clip_quantiles: Quantiles in ``(0, 1]`` of the proxy's per-user gradient-estimate
            norms at ``θ₀`` tried as ``B`` (or ``B₀``), per batch rule.
        step_sizes: ``η`` candidates (default: ``config.step_size`` times 0.5, 1 and 2).
        num_iterations: ``T`` candidates (default: ``config.num_iterations``).
        bias_tolerances: Batch rules tried: a positive ``bias_tolerance`` (adaptive batches up
            to ``max_batch_size``; in units of the fitted kernel's gradient variance, and below
            its prior trace at ``θ₀``), or ``None`` for fixed batches of ``config.batch_size``
            (default ``d + 1``). Default: the config's own rule only.
        fit_kernel: Fit the kernel on the proxy first (``fit_kernel_on_proxy``); ``False``
            keeps the config's kernel and noise variance.
        kernel_fit_points: ``m``, Sobol points of the fit (default ``10 d``).
        kernel_fit_radius: Half-width of the fit box around ``θ₀`` (cut to ``Θ``); ``None``
            (default): all of ``Θ``, the region the run's iterates may visit.
        num_repeats: Simulated runs per setting (different noise; the same across settings).
        seed: Seed of the fit points and of the simulated runs' noise and search (public
            randomness on public data).

    Returns:
        The ``PrivatePlan``: recommended config and report.

    Raises:
        ValueError: Naming the argument, for a bad candidate list, ``num_users < 2``, a
            bias tolerance at or above the prior gradient trace, or a proxy that does not
            return per-user losses.
    """
    n = check_positive_int(num_users, "num_users (n)")
    if n < MIN_USERS:
        raise ValueError(f"num_users (n) must be at least {MIN_USERS}: the private run protects each of its n users.")
    quantiles = _checked_floats(clip_quantiles, "clip_quantiles", lambda v, name: check_probability(v, name, allow_one=True))
    etas = _checked_floats(
        (0.5 * config.step_size, config.step_size, 2.0 * config.step_size) if step_sizes is None else step_sizes,
        "step_sizes", lambda v, name: check_positive(v, name, allow_inf=False),
    )
    Ts = tuple(check_positive_int(T, "num_iterations") for T in ((config.num_iterations,) if num_iterations is None else num_iterations))
    if not Ts:
        raise ValueError("num_iterations must hold at least one value.")
    tolerances = _checked_tolerances((config.bias_tolerance,) if bias_tolerances is None else bias_tolerances)
    if not isinstance(fit_kernel, bool):
        raise ValueError(f"fit_kernel must be True or False, got {fit_kernel!r}.")
    if kernel_fit_points is not None and check_positive_int(kernel_fit_points, "kernel_fit_points") < 2:
        raise ValueError(f"kernel_fit_points must be at least 2, got {kernel_fit_points}.")
    if kernel_fit_radius is not None:
        _fit_region(config, kernel_fit_radius, "kernel_fit_radius")  # refused before the proxy is called
    num_repeats = check_positive_int(num_repeats, "num_repeats")
    seeds = child_seeds([check_nonnegative_int(seed, "seed")], num_repeats)
    adaptive_clip = config.clip_bound == "adaptive"

    kernel_fit = None
    if fit_kernel:
        config, kernel_fit = fit_kernel_on_proxy(
            proxy_objective, config, num_points=kernel_fit_points, radius=kernel_fit_radius, seed=seed
        )
    with warnings.catch_warnings():
        # the simulation's seeded noise is public randomness on public data, not a release
        warnings.filterwarnings("ignore", category=PrivacyWarning)
        probes = []
        for tol in tolerances:  # every rule is checked (against the fitted kernel) before any run
            try:
                probes.append(DPGIBO(dataclasses.replace(_with_batch_rule(config, tol), seed=seeds[0], validation_mu_budget=None)))
            except ValueError as err:
                raise ValueError(f"bias_tolerances: {err}") from err
        trials, norm_quantiles, gradient_points, n_p = [], {}, {}, None
        for tol, probe in zip(tolerances, probes):
            rule_config = _with_batch_rule(config, tol)
            points = probe.ask()  # public: depends on θ₀, the kernel and the search seed only
            losses = _proxy_losses(proxy_objective, points)
            if n_p is not None and losses.shape[1] != n_p:
                raise ValueError(f"proxy_objective returned {losses.shape[1]} users, earlier {n_p}.")
            n_p = losses.shape[1]
            gp = GradientGP(points, probe.kernel, probe.noise_variance, jitter=config.jitter)
            with torch.no_grad():
                estimates = (gp.gradient_weights(probe.theta) @ losses).transpose(0, 1)  # n_p x d, public
            norms = estimates.norm(dim=1)
            bounds = torch.quantile(norms, torch.tensor(quantiles, dtype=torch.float64)).tolist()
            if not all(b > 0 and math.isfinite(b) for b in bounds):
                raise ValueError(f"The proxy's gradient-estimate norm quantiles {bounds} are not all positive and finite.")
            norm_quantiles[tol], gradient_points[tol] = dict(zip(quantiles, bounds)), points.clone()
            for (gamma, bound), eta, T in itertools.product(zip(quantiles, bounds), etas, Ts):
                clip = {"clip_init": bound} if adaptive_clip else {"clip_bound": bound}
                signal = float(clip_rows(estimates, bound)[0].mean(0).norm())
                scores, noise_std = [], math.nan
                for r, s in enumerate(seeds):
                    sim = simulation_config(rule_config, n, n_p, step_size=eta, num_iterations=T, seed=s, **clip)
                    release = DPGIBO(sim).run(proxy_objective, progress=False).release
                    value = torch.as_tensor(proxy_objective(release.theta.unsqueeze(0))).to(torch.float64).mean()
                    scores.append(float(value))
                    if r == 0:
                        noise_std = release.noise_stds[0] if release.noise_stds else math.nan
                dim = points.shape[1]
                ratio = noise_std * math.sqrt(dim) / signal if signal > 0 else math.inf
                trials.append(PlanTrial(gamma, bound, eta, T, tuple(scores), noise_std, ratio, tol))
    best = min(range(len(trials)), key=lambda i: trials[i].mean_proxy_loss)
    t = trials[best]
    chosen = {"clip_init": t.clip_bound} if adaptive_clip else {"clip_bound": t.clip_bound}
    recommended = dataclasses.replace(
        _with_batch_rule(config, t.bias_tolerance), step_size=t.step_size, num_iterations=t.num_iterations, **chosen
    )
    return PrivatePlan(
        config=recommended, trials=trials, best=best, norm_quantiles=norm_quantiles[t.bias_tolerance],
        gradient_points=gradient_points[t.bias_tolerance], num_users=n, num_proxy_users=n_p, kernel_fit=kernel_fit,
    )
