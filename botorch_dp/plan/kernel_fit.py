r"""Fitting the config's kernel on a public proxy's mean loss by marginal likelihood.

``fit_kernel_on_proxy`` evaluates the proxy at scrambled Sobol points of ``Θ`` (or of a box
around ``θ₀``), fits a copy of the config's kernel (and ``σ²`` when the config models noise)
with BoTorch, and returns the config with the fitted kernel and a ``KernelFit`` report. All
of it is public because the proxy is. A fit that fails (BoTorch gives up, a covariance that is
not positive definite or a singular solve, NaNs, a non-finite fitted value or likelihood) does
not stop the plan: the config's own kernel is kept as it is (in ``tune``, the space's public
``recommended_kernel()``), a ``KernelFitWarning`` names its hyperparameters, and
``KernelFit.failure`` says why.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import torch
from botorch.exceptions.errors import ModelFittingError
from botorch.exceptions.warnings import InputDataWarning
from botorch.models import SingleTaskGP
from gpytorch.constraints import GreaterThan
from gpytorch.kernels import Kernel
from gpytorch.likelihoods import GaussianLikelihood
from gpytorch.mlls import ExactMarginalLogLikelihood
from linear_operator.utils.errors import NanError, NotPSDError
from torch import Tensor
from torch.quasirandom import SobolEngine

from botorch_dp.methods.proxy import proxy_losses
from botorch_dp.optim.config import DPGIBOConfig, resolve_model
from botorch_dp.optim.public_checks import SettingsWarning
from botorch_dp.privacy.checks import check_nonnegative_int, check_positive_int

__all__ = [
    "KERNEL_FIT_POINTS_PER_DIM",
    "UNCHANGED_RTOL",
    "KernelFit",
    "KernelFitWarning",
    "fit_kernel_on_proxy",
    "fit_region",
]

KERNEL_FIT_POINTS_PER_DIM = 10
"""Default number of kernel-fit points per dimension (``m = 10 d``, the usual size of an initial
space-filling design for GP hyperparameters)."""
#: Numerical nugget of a noiseless fit, relative to the variance of the fitted mean losses.
_RELATIVE_NUGGET = 1e-6
#: A fitted length-scale within this relative distance of its start value counts as unchanged.
UNCHANGED_RTOL = 1e-3
#: What a failed fit raises: BoTorch giving up (every attempt failed), a covariance that is not
#: positive definite, a singular solve, NaNs in a factorization.
_FIT_FAILURES = (ModelFittingError, NotPSDError, NanError, torch.linalg.LinAlgError)


class KernelFitWarning(SettingsWarning):
    r"""The kernel fit on the public proxy failed (the plan went on with the config's own kernel), or
    left every length-scale at its start value."""


class _FittedFields(TypedDict, total=False):
    r"""The ``DPGIBOConfig`` fields a kernel fit replaces."""

    noise_variance: float
    kernel: Kernel
    model: Any  # the config's BoTorch model (``DPGIBOConfig.model``), its covariance module replaced


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
        failure: ``None`` for a fit; for a failed one, why (e.g. ``"NotPSDError: ..."``), and
            then ``hyperparameters`` and ``noise_variance`` are the config's own, not fitted,
            and ``log_marginal_likelihood`` is NaN.
        max_evaluations: The cap on the fit's likelihood evaluations (``None``: none, the fit ran to
            convergence); a planning budget's cut (``plan.budget``).
    """

    points: Tensor
    mean_losses: Tensor
    region: Tensor
    hyperparameters: dict[str, tuple[float, ...]]
    noise_variance: float | None
    log_marginal_likelihood: float
    failure: str | None = None
    max_evaluations: int | None = None

    @property
    def lengthscales(self) -> tuple[float, ...] | None:
        r"""The first ``lengthscale`` among ``hyperparameters`` (``None`` if the kernel has none)."""
        for name, values in self.hyperparameters.items():
            if name.split(".")[-1] == "lengthscale":
                return values
        return None

    def describe(self) -> str:
        r"""One line per fitted hyperparameter (per kept one after a failed fit)."""
        if self.failure is None:
            head = f"kernel fitted by marginal likelihood on the proxy's mean loss at {len(self.points)} Sobol points"
            capped = "" if self.max_evaluations is None else f", at most {self.max_evaluations} likelihood evaluations"
            head += f"{capped}:"
        else:
            head = f"kernel fit on the proxy failed ({self.failure}); the config's kernel kept, not fitted:"
        lines = [head]
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


def fit_region(config: DPGIBOConfig, radius: float | Tensor | None, name: str = "radius") -> Tensor:
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
    coordinate_names: Sequence[str] | None = None,
    max_evaluations: int | None = None,
    fit_lengthscales: bool = True,
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

    A fit that fails (``ModelFittingError`` when every attempt of ``fit_gpytorch_mll`` failed,
    ``NotPSDError``, a singular matrix, NaNs, a non-finite fitted value or marginal likelihood)
    keeps the config's own kernel (and ``σ²``) as they are: public settings, in ``tune`` the
    space's ``recommended_kernel()``. It warns once (``KernelFitWarning``) with the kept
    hyperparameters by name, the length-scales by ``coordinate_names`` where given, and the
    returned ``KernelFit.failure`` says why; planning goes on with them. A fit that leaves every
    length-scale at its start value (within a relative ``UNCHANGED_RTOL``: the points did not
    inform them, e.g. at ``d = 30`` with ``m = 10 d``) warns too (``KernelFitWarning``, the
    length-scales by ``coordinate_names``), and its values are returned as fitted.

    Never pass the sensitive objective: fitted hyperparameters of sensitive losses are
    sensitive, and this function does not privatize anything.

    Args:
        proxy_objective: Maps ``q x d`` points to ``q x n_p`` public per-user losses.
        config: The private run's config.
        num_points: ``m`` (default ``10 d``); at least 2.
        radius: Half-width (float or ``d`` tensor, units of ``θ``) of the fit box around
            ``θ₀``, cut to ``Θ``; ``None`` (default): all of ``Θ``.
        seed: Seed of the Sobol scrambling (public randomness).
        coordinate_names: The ``d`` names of ``θ``'s coordinates (``tune``: the search space's),
            used only to name the length-scales in the warnings (a failed fit, an unchanged one).
        max_evaluations: At most this many evaluations of the marginal likelihood and its gradient
            (L-BFGS-B's ``maxfun``: it stops at the end of the iteration that reaches it, so a line
            search may add a few); ``None`` (default): run to convergence. A cheaper fit for a
            planning budget (``plan.budget``); a fit that converges sooner is the same fit.
        fit_lengthscales: ``False``: the length-scales stay the config's (public) values and only the other
            hyperparameters (outputscale, noise variance, ...) are fitted: a cheaper fit for a planning budget.

    Returns:
        The config with the fitted kernel (and ``noise_variance``), and the ``KernelFit``; after
        a failed fit, the config unchanged and a ``KernelFit`` with its ``failure``.

    Raises:
        ValueError: Naming the argument, for a bad ``num_points``, ``radius`` or
            ``coordinate_names``, a proxy that does not return finite per-user losses, or a mean
            loss that is constant at the points.
    """
    d = config.bounds.shape[1]
    names = None if coordinate_names is None else [str(name) for name in coordinate_names]
    if names is not None and len(names) != d:
        raise ValueError(f"coordinate_names must name the d = {d} coordinates, got {coordinate_names!r}.")
    m = KERNEL_FIT_POINTS_PER_DIM * d if num_points is None else check_positive_int(num_points, "num_points")
    if m < 2:
        raise ValueError(f"num_points must be at least 2, got {m}.")
    region = fit_region(config, radius)
    seed = check_nonnegative_int(seed, "seed")
    if max_evaluations is not None:
        max_evaluations = check_positive_int(max_evaluations, "max_evaluations (kernel_fit_evaluations)")
    sobol = SobolEngine(d, scramble=True, seed=seed).draw(m, dtype=torch.float64)
    points = region[0] + (region[1] - region[0]) * sobol
    y = proxy_losses(proxy_objective, points).mean(dim=1)
    if not float(y.var()) > 0:
        raise ValueError("The proxy's mean loss is constant at the kernel-fit points: there is nothing to fit.")
    source = config.kernel if config.kernel is not None else config.model.covar_module
    _, noise, _ = resolve_model(config)
    nugget = max(config.jitter, _RELATIVE_NUGGET * float(y.var()))
    try:
        fitted, fitted_noise, lml = _fit(points, y, source, noise, nugget, max_evaluations, fit_lengthscales)
        failure = None if math.isfinite(lml) else "a non-finite fitted value or marginal likelihood"
    except _FIT_FAILURES as err:
        first_line = next(iter(str(err).splitlines()), "")
        failure = f"{type(err).__name__}: {first_line}" if first_line else type(err).__name__
    if failure is not None:
        kept = _constrained_hyperparameters(source)
        kept_noise = noise if noise > 0 else None
        cause = failure.split(":")[0]  # the error's type: the same message for every configuration of a tune
        message = _fallback_message(cause, type(source).__name__, kept, kept_noise, names)
        warnings.warn(message, KernelFitWarning, stacklevel=2)
        fit = KernelFit(points, y, region, kept, kept_noise, math.nan, failure=failure)
        return config, fit
    changes: _FittedFields = {} if fitted_noise is None else {"noise_variance": fitted_noise}
    if config.kernel is not None:
        changes["kernel"] = fitted
    else:
        fitted_model = copy.deepcopy(config.model)
        fitted_model.covar_module = fitted
        changes["model"] = fitted_model
    start, fitted_values = _constrained_hyperparameters(source), _constrained_hyperparameters(fitted)
    unchanged = _unchanged_lengthscales(start, fitted_values) if fit_lengthscales else None  # kept on purpose
    if unchanged is not None:
        warnings.warn(_unchanged_message(unchanged, start, names, m), KernelFitWarning, stacklevel=2)
    fit = KernelFit(
        points=points,
        mean_losses=y,
        region=region,
        hyperparameters=fitted_values,
        noise_variance=fitted_noise,
        log_marginal_likelihood=lml,
        max_evaluations=max_evaluations,
    )
    return dataclasses.replace(config, **changes), fit


def _fit(
    points: Tensor,
    y: Tensor,
    source: Kernel,
    noise: float,
    nugget: float,
    max_evaluations: int | None = None,
    fit_lengthscales: bool = True,
) -> tuple[Kernel, float | None, float]:
    r"""``(fitted kernel, fitted σ² or None, marginal log likelihood per point)`` of a copy of
    ``source``; the likelihood is NaN when a fitted value is not finite (it is not computed). With
    ``max_evaluations``, L-BFGS-B stops there (BoTorch takes that stop as a fit, not a failure to retry)."""
    from botorch.fit import fit_gpytorch_mll

    m = points.shape[0]
    # every hyperparameter is fitted, also those the user froze (``requires_grad=False`` is how
    # kernels say "never fit on the sensitive losses"; this fit is on public ones)
    kernel = copy.deepcopy(source).to(torch.float64).requires_grad_(True)
    if not fit_lengthscales:  # the length-scales kept as given (raw and constrained names end the same way)
        for name, parameter in kernel.named_parameters():
            if name.split(".")[-1] in ("raw_lengthscale", "lengthscale"):
                parameter.requires_grad_(False)
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
        capped = None if max_evaluations is None else {"options": {"maxfun": max_evaluations}}
        mll = fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model), optimizer_kwargs=capped)
    fitted = copy.deepcopy(source).to(torch.float64)
    fitted.load_state_dict(kernel.state_dict())
    fitted_noise = float(model.likelihood.noise.detach().mean()) if noise > 0 else None
    values = [v for vs in _constrained_hyperparameters(fitted).values() for v in vs] + [fitted_noise or 0.0]
    lml = math.nan
    if all(map(math.isfinite, values)):
        model.train()
        with torch.no_grad():
            lml = float(mll(model(points), y))
    model.eval()
    return fitted, fitted_noise, lml


def _unchanged_lengthscales(
    start: dict[str, tuple[float, ...]], fitted: dict[str, tuple[float, ...]]
) -> list[str] | None:
    r"""The length-scale hyperparameters' names when EVERY length-scale value is still at its start
    (within ``UNCHANGED_RTOL``): the fit did not move them; ``None`` otherwise or without any."""
    names = [name for name in fitted if name.split(".")[-1] == "lengthscale" and name in start]
    if not names:
        return None
    for name in names:
        for a, b in zip(start[name], fitted[name], strict=True):
            if not abs(b - a) <= UNCHANGED_RTOL * abs(a):
                return None
    return names


def _unchanged_message(
    unchanged: list[str], start: dict[str, tuple[float, ...]], names: list[str] | None, m: int
) -> str:
    r"""The warning of a fit that left every length-scale at its start value, by coordinate name."""

    def values(name: str) -> str:
        vs = start[name]
        if names is not None and len(vs) == len(names):
            return ", ".join(f"{n} {v:.4g}" for n, v in zip(names, vs, strict=True))
        return ", ".join(f"{v:.4g}" for v in vs)

    kept = "; ".join(f"{name} = {values(name)}" for name in unchanged)
    return (
        f"The kernel fit on the public proxy left every length-scale at its start value ({kept}; within a "
        f"relative {UNCHANGED_RTOL:g}): the {m} points did not inform them, so the plan goes on with the start "
        "values as if fitted. Give more kernel_fit_points, a kernel_fit_radius, or length-scales of your own."
    )


def _fallback_message(
    cause: str, kind: str, kept: dict[str, tuple[float, ...]], noise: float | None, names: list[str] | None
) -> str:
    r"""The warning of a failed fit: the kept hyperparameters by name (length-scales by coordinate)."""

    def values(name: str, vs: tuple[float, ...]) -> str:
        if names is not None and name.split(".")[-1] == "lengthscale" and len(vs) == len(names):
            return ", ".join(f"{n} {v:.4g}" for n, v in zip(names, vs, strict=True))
        return ", ".join(f"{v:.4g}" for v in vs)

    kept_text = "; ".join(f"{name} = {values(name, vs)}" for name, vs in kept.items())
    noise_text = "not modelled" if noise is None else f"{noise:.4g}"
    return (
        f"The kernel fit on the public proxy failed ({cause}); planning goes on with the config's own "
        f"{kind}, not fitted (public settings): {kept_text}; noise variance {noise_text}. "
        "PrivatePlan.kernel_fit.failure says why."
    )
