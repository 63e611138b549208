r"""The E.1 investigation's variants (``e1``): their problems and runs, and the random-search curves.

Functions here take the E.1 protocol's ``paper.Settings`` (``e1.Settings`` is one). All losses
are NON-PRIVATE diagnostics.
"""

from __future__ import annotations

import contextlib
import math
import time
import warnings
from collections.abc import Collection, Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

from benchmarks import paper
from benchmarks.paper import gp_problem, gp_theta0
from benchmarks.runs import iterate_curve
from botorch_dp import DPGIBO, DPGIBOConfig
from botorch_dp.baselines import NO_CLIP, from_dp_gibo_result
from botorch_dp.baselines.base import uniform_points
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.objectives.per_user_problem import PerUserProblem
from botorch_dp.optim.options import AdaGrad, FixedClip, batch_rule
from botorch_dp.problems import GPRegressionLengthscales

METHODS = ("GIBO (non-private)", "DP-GIBO (μ=1)")


@dataclass(frozen=True)
class Variant:
    r"""One change of the E.1 protocol (defaults: the protocol of ``reports/``)."""

    step_size: float = 0.3
    iterations: int = 25
    theta0: str = "random"
    centre_losses: bool = False
    log_lengthscales: bool = False
    note: str = ""


VARIANTS: dict[str, Variant] = {
    "baseline": Variant(note="E.1 as in reports/ (AdaGrad η = 0.3, T = 25, zero prior mean, θ₀ uniform)"),
    "centred": Variant(centre_losses=True, note="per-user centred losses (per-user constant prior mean)"),
    "eta1": Variant(step_size=1.0, note="AdaGrad η = 1"),
    "centred_eta1": Variant(centre_losses=True, step_size=1.0, note="centred losses and η = 1"),
    "log": Variant(log_lengthscales=True, note="log length-scales, box [ln 0.05, ln 5]"),
    "centred_eta1_log": Variant(
        centre_losses=True, step_size=1.0, log_lengthscales=True, note="centred losses, η = 1, log length-scales"
    ),
    "theta0_centre": Variant(theta0="centre", note="θ₀ = box centre"),
    "T50": Variant(iterations=50, note="T = 50"),
}


class LogLengthscales(PerUserProblem):
    r"""The E.1 problem with θ = log ℓ: ``ℓ_i(θ) = base.ℓ_i(exp θ)`` on the log of its box."""

    name = "gp_regression_log"

    def __init__(self, base: GPRegressionLengthscales) -> None:
        r"""Wrap ``base`` (its data, users and seed).

        Args:
            base: The E.1 problem in raw length-scales.
        """
        super().__init__(bounds=base.bounds.log(), num_users=base.num_users, seed=base.seed)
        self.base = base
        self.fit_noise_variance = base.fit_noise_variance
        self.true_lengthscales = base.true_lengthscales.log()

    def evaluate_true(self, X: Tensor) -> Tensor:
        r"""Per-user losses at the length-scales ``exp X`` (``q x d`` → ``q x n``)."""
        return self.base.evaluate_true(X.exp())


@contextlib.contextmanager
def centred_gradient_weights(enabled: bool = True) -> Iterator[None]:
    r"""While active, ``GradientGP.gradient_weights`` returns ``A (I − 1 1ᵀ/N)``.

    ``A y`` then estimates the gradient from ``y`` centred on its mean over the ``N``
    evaluated points (a constant prior mean equal to that mean). Applied to one user's
    losses it uses only that user's losses, so per-user clipping bounds the sensitivity as
    before.

    Args:
        enabled: ``False`` makes the context a no-op.
    """
    if not enabled:
        yield
        return
    original = GradientGP.gradient_weights

    def centred(self, theta, jacobian=None):
        A = original(self, theta, jacobian)
        return A - A.mean(dim=-1, keepdim=True)

    GradientGP.gradient_weights = centred  # type: ignore[method-assign]  # deliberate patch, undone below
    try:
        yield
    finally:
        GradientGP.gradient_weights = original  # type: ignore[method-assign]  # the patch undone


def make_problem(settings: paper.Settings, variant: Variant, seed: int) -> tuple[PerUserProblem, Tensor]:
    r"""The variant's problem for ``seed`` and its θ₀ (the log of the raw θ₀ for ``log_lengthscales``)."""
    base = gp_problem(settings, seed)
    theta0 = gp_theta0(base, seed, variant.theta0)
    if variant.log_lengthscales:
        return LogLengthscales(base), theta0.log()
    return base, theta0


def run_seed(
    settings: paper.Settings,
    variant_name: str,
    seed: int,
    clip: float | None,
    methods: tuple[str, ...] = METHODS,
    done: Collection[str] = frozenset(),
) -> list[dict]:
    r"""The variant's runs of ``methods`` on ``seed``.

    Args:
        settings: E.1 settings (``Settings()`` or ``quick_settings()``).
        variant_name: A key of ``VARIANTS``.
        seed: The replication seed (problem data, θ₀, noise and search generators).
        clip: DP-GIBO's clip bound B.
        methods: The methods to run (a subset of ``METHODS``).
        done: Methods already recorded for this seed; skipped.

    Returns:
        One record per run (final loss and curve are NON-PRIVATE diagnostics).
    """
    v = VARIANTS[variant_name]
    problem, theta0 = make_problem(settings, v, seed)
    records = []
    for method in methods:
        if method in done:
            continue
        mu = math.inf if method.startswith("GIBO") else settings.privacy_mu
        if clip is None and not math.isinf(mu):
            raise ValueError(f"clip: {method} needs a clip bound, got None")
        config = DPGIBOConfig(
            bounds=problem.bounds,
            kernel=problem.recommended_kernel(),
            num_iterations=v.iterations,
            privacy_mu=mu,
            clip=FixedClip(NO_CLIP if clip is None or math.isinf(mu) else clip),
            step_size=v.step_size,
            step_rule=AdaGrad(),
            batches=batch_rule(bias_tolerance=settings.bias_tolerance, search=paper.batch_search(settings)),
            noise_variance=paper.fit_noise_variance(problem),
            search_radius=settings.search_radius,
            theta0=theta0,
            seed=seed,
            target_delta=settings.target_delta,
            raw_samples=settings.raw_samples,
            num_restarts=settings.num_restarts,
        )
        start = time.perf_counter()
        with warnings.catch_warnings(), centred_gradient_weights(v.centre_losses):
            warnings.simplefilter("ignore")  # seeded noise warns: a comparison needs common seeds
            dp_result = DPGIBO(config).run(problem, progress=False)
        result = from_dp_gibo_result(dp_result)
        evals, losses = iterate_curve(problem, result)
        records.append(
            dict(
                variant=variant_name,
                method=method,
                seed=seed,
                final_loss=losses[-1],
                initial_loss=losses[0],
                num_evaluations=int(result.num_evaluations),
                clip=None if math.isinf(mu) else clip,
                wall_s=time.perf_counter() - start,
                evals=evals,
                losses=losses,
                final_theta=result.theta.tolist(),
            )
        )
    return records


def gradient_alignment(
    settings: paper.Settings, seed: int, log_lengthscales: bool = False, batch_seed: int = 0
) -> dict:
    r"""How well one batch's gradient estimate points along the true gradient at θ₀ (NON-PRIVATE).

    ``d + 1`` uniform points in the search box (half-width ``search_radius``) around θ₀, the
    surrogate's weights ``A`` at θ₀, and the mean losses ``y`` there; the estimate ``A y``
    (zero prior mean, as DP-GIBO) and ``A (y − ȳ 1)`` (centred) are compared with a central
    finite-difference gradient of f at θ₀ (step 1e-4) by their cosine.

    Args:
        settings: E.1 settings.
        seed: The replication seed (problem and θ₀).
        log_lengthscales: Measure in the log parameterisation.
        batch_seed: Seed of the batch's points.

    Returns:
        The two cosines, the norms and the largest ``|∂f/∂θ_k|``.
    """
    variant = Variant(log_lengthscales=log_lengthscales)
    problem, theta0 = make_problem(settings, variant, seed)
    d = problem.dim
    lo = torch.maximum(theta0 - settings.search_radius, problem.bounds[0])
    hi = torch.minimum(theta0 + settings.search_radius, problem.bounds[1])
    gen = torch.Generator().manual_seed(batch_seed)
    X = lo + (hi - lo) * torch.rand(d + 1, d, generator=gen, dtype=torch.float64)
    y = problem.objective(X)
    with torch.no_grad():
        A = GradientGP(X, problem.recommended_kernel(), paper.fit_noise_variance(problem)).gradient_weights(theta0)
    h = 1e-4
    E = torch.eye(d, dtype=torch.float64) * h
    truth = (problem.objective(theta0 + E) - problem.objective(theta0 - E)) / (2 * h)

    def cos(g: Tensor) -> float:
        return float(g @ truth / (g.norm() * truth.norm()).clamp_min(1e-300))

    zero, centred = A @ y, A @ (y - y.mean())
    return dict(
        seed=seed,
        log=log_lengthscales,
        cos_zero_mean=cos(zero),
        cos_centred=cos(centred),
        norm_true=float(truth.norm()),
        norm_zero_mean=float(zero.norm()),
        norm_centred=float(centred.norm()),
        mean_loss=float(y.mean()),
    )


def rs_key(settings: paper.Settings, variant_name: str, seed: int) -> str:
    r"""Key of a random-search curve: the search space (raw or log box), the mode and the seed."""
    space = "log" if VARIANTS[variant_name].log_lengthscales else "raw"
    return f"{space}/{settings.mode}/{seed}"


def extend_rs_curve(
    settings: paper.Settings, variant_name: str, seed: int, curve: list[float], budget: int
) -> list[float]:
    r"""The random-search curve of ``seed`` (best loss after 1, 2, ... evaluations) up to ``budget``.

    ``random_search(seed=s)`` draws its points from one generator, so its first ``m`` points
    do not depend on the total; only the points after ``len(curve)`` are evaluated.
    """
    if budget <= len(curve):
        return curve
    problem, _ = make_problem(settings, VARIANTS[variant_name], seed)
    X = uniform_points(problem.bounds, budget, torch.Generator().manual_seed(int(seed)))[len(curve) :]
    values = torch.cat([problem.objective(chunk) for chunk in X.split(32)])
    best = torch.cummin(values, 0).values
    if curve:
        best = best.clamp_max(curve[-1])
    return curve + best.tolist()
