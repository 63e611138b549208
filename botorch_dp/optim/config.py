r"""Public settings of a DP-GIBO run: ``DPGIBOConfig``, validated on construction, and how
the kernel and noise variance are read off it (``resolve_model``)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from gpytorch.kernels import Kernel
from torch import Tensor

from botorch_dp.gradient_gp import DEFAULT_JITTER, GradientGP
from botorch_dp.optim.batch_selection import BATCH_SELECTIONS, BatchSelection
from botorch_dp.optim.step_rules import StepRule, check_step_rule
from botorch_dp.privacy.checks import (
    NONFINITE_LOSSES,
    check_choice,
    check_delta,
    check_nonnegative,
    check_nonnegative_int,
    check_positive,
    check_positive_int,
)
from botorch_dp.privacy.mechanisms import NonfiniteLosses
from botorch_dp.utils import check_bounds


@dataclass
class DPGIBOConfig:
    r"""Public settings of a DP-GIBO run (paper symbols in brackets), validated on construction.

    Attributes:
        bounds: ``2 x d`` tensor, the public box ``Θ``.
        kernel: GPyTorch kernel with FIXED hyperparameters ``k``, chosen without looking
            at the sensitive losses. The loop works on a frozen copy and never fits it.
        model: Alternatively, a BoTorch model whose ``covar_module`` and likelihood noise
            are used (its training data are ignored). Models with outcome or input
            transforms are refused (see ``unsafe_allow_sensitive_fitting``).
        num_iterations: ``T``, number of noisy gradient steps.
        privacy_mu: ``μ``, total GDP budget on the validation users; ``math.inf`` runs
            non-private GIBO.
        clip_bound: ``B``, per-user clipping norm of the gradient estimates.
        step_size: ``η``.
        step_rule: ``"sgd"`` (``θ ← θ − η g``) or ``"adagrad"`` on the privatized gradients
            (``torch.optim.SGD``/``Adagrad``, then projection onto ``Θ``; see ``step_rules``).
        batch_size: ``b`` for fixed batches (Alg. 1). Default ``d + 1`` when no
            ``bias_tolerance`` is given.
        bias_tolerance: ``ε`` for adaptive batches (Alg. 2): add points until
            ``tr Σ_D(θ) ≤ ε`` or ``max_batch_size`` points were added.
        max_batch_size: ``b_max`` of the adaptive rule (default ``d + 1``).
        search_radius: Half-width of the local box around ``θ`` in which candidates are
            searched (float or ``d`` tensor, in units of ``θ``); default 10% of the box width.
        noise_variance: ``σ²``, observation-noise variance of the losses.
        theta0: ``θ₀`` (data-independent, finite); default the centre of ``bounds``.
        seed: ``None`` (default): the privacy noise is drawn from the operating system's
            entropy and the (public) candidate-search generator is seeded from it too, so
            no one can regenerate the noise. An integer makes the run reproducible (tests,
            reproductions): the noise comes from child stream 0 of the seed and the
            candidate search from child stream 1, and every ``DPGIBO`` built from the
            config raises a ``PrivacyWarning``: the guarantee then assumes the seed stays
            secret. The seed is stored only in the (protected) checkpoint.
        nonfinite_losses: What a NaN or ``inf`` per-user loss does. ``"refuse"`` (default):
            ``tell`` raises ``ValueError`` naming the points, before anything is released;
            the refusal itself is observable and reveals that some user's loss at those
            points was not finite. ``"zero_user"``: a user with any non-finite loss among
            the losses used at a step contributes 0 to that step's clipped sum (``n`` is
            unchanged, so the sensitivity and the guarantee hold for every input).
        batch_selection: How a batch is chosen. ``"joint"`` (default): ``optimize_acqf``
            over all ``q`` points at once; with adaptive batches, the smallest
            ``q ≤ b_max`` whose optimized batch reaches ``ε`` (bisection over ``q``).
            ``"greedy"``: one point at a time, conditioning on the points already chosen
            (myopic: on the d = 15 GP problem, 16 greedy points leave a posterior gradient
            trace about 3× that of 16 joint points). See ``batch_selection``.
        target_delta: ``δ`` at which ``ε`` is reported.
        privacy_budget_mu: Optional GDP budget for the ledger's filter; a step that would
            exceed it is refused before anything is released.
        record_non_private_diagnostics: Record NON-PRIVATE diagnostics (un-noised
            gradients, clip fractions, noise norms) in ``result().diagnostics``. Off by default.
        num_restarts, raw_samples: Passed to ``optimize_acqf`` (positive integers).
        user_chunk_size: Users per chunk when forming per-user gradients (a positive
            integer), or ``None`` (default): chosen from ``n`` and ``d`` by
            ``privacy.mechanisms.default_chunk_size`` (4096 to 65536 users).
        jitter: Diagonal floor of the kernel matrices (``>= 0``, finite).
        unsafe_allow_sensitive_fitting: LOUD OPT-OUT. Permits ``hyperparameter_fit`` and
            models with transforms, which look at the sensitive losses; the run then
            carries no privacy guarantee (reported ``μ = inf``, ``holds = False``).
        hyperparameter_fit: ``fn(kernel, train_X, mean_losses)`` called before each step;
            refused unless the opt-out is set.
    """

    bounds: Tensor
    kernel: Kernel | None = None
    model: Any = None
    num_iterations: int = 25
    privacy_mu: float = 1.0
    clip_bound: float = 1.0
    step_size: float = 0.1
    step_rule: StepRule = "sgd"
    batch_size: int | None = None
    bias_tolerance: float | None = None
    max_batch_size: int | None = None
    search_radius: float | Tensor | None = None
    noise_variance: float = 0.0
    theta0: Tensor | None = None
    seed: int | None = None
    nonfinite_losses: NonfiniteLosses = "refuse"
    batch_selection: BatchSelection = "joint"
    target_delta: float = 1e-5
    privacy_budget_mu: float | None = None
    record_non_private_diagnostics: bool = False
    num_restarts: int = 4
    raw_samples: int = 128
    user_chunk_size: int | None = None
    jitter: float = DEFAULT_JITTER
    unsafe_allow_sensitive_fitting: bool = False
    hyperparameter_fit: Callable[[Kernel, Tensor, Tensor], None] | None = None

    def __post_init__(self) -> None:
        # Every check raises ValueError naming the field; numeric fields are normalized
        # (numpy and 0-d tensor numbers accepted, tensors copied to float64).
        try:
            bounds = torch.as_tensor(self.bounds).detach()
        except (TypeError, ValueError, RuntimeError) as err:
            raise ValueError(f"bounds must be a 2 x d tensor or array, got {type(self.bounds).__name__}.") from err
        self.bounds = bounds = check_bounds(bounds).clone()
        d = bounds.shape[1]
        self.privacy_mu = check_positive(self.privacy_mu, "privacy_mu (μ)")
        self.clip_bound = check_positive(self.clip_bound, "clip_bound (B)", allow_inf=False)
        self.num_iterations = check_positive_int(self.num_iterations, "num_iterations (T)")
        self.step_size = check_positive(self.step_size, "step_size (η)", allow_inf=False)
        check_step_rule(self.step_rule)
        if self.batch_selection not in BATCH_SELECTIONS:
            raise ValueError(f"batch_selection must be one of {BATCH_SELECTIONS}, got {self.batch_selection!r}.")
        if self.batch_size is not None:
            self.batch_size = check_positive_int(self.batch_size, "batch_size (b)")
        if self.bias_tolerance is not None:
            self.bias_tolerance = check_positive(self.bias_tolerance, "bias_tolerance (ε)", allow_inf=False)
        if self.bias_tolerance is not None and self.batch_size is not None:
            raise ValueError("Give either batch_size (fixed) or bias_tolerance (adaptive), not both.")
        if self.max_batch_size is not None:
            self.max_batch_size = check_positive_int(self.max_batch_size, "max_batch_size (b_max)")
        self.noise_variance = check_nonnegative(self.noise_variance, "noise_variance (σ²)", allow_inf=False)
        self.target_delta = check_delta(self.target_delta, "target_delta")
        if self.privacy_budget_mu is not None:
            self.privacy_budget_mu = check_positive(self.privacy_budget_mu, "privacy_budget_mu")
        self.num_restarts = check_positive_int(self.num_restarts, "num_restarts")
        self.raw_samples = check_positive_int(self.raw_samples, "raw_samples")
        if self.user_chunk_size is not None:
            self.user_chunk_size = check_positive_int(self.user_chunk_size, "user_chunk_size")
        self.jitter = check_nonnegative(self.jitter, "jitter", allow_inf=False)
        if self.seed is not None:
            self.seed = check_nonnegative_int(self.seed, "seed")
        check_choice(self.nonfinite_losses, "nonfinite_losses", NONFINITE_LOSSES)
        if self.theta0 is not None:
            theta0 = _float_tensor(self.theta0, "theta0 (θ₀)").reshape(-1)
            if theta0.shape != (d,) or not torch.isfinite(theta0).all():
                raise ValueError(f"theta0 (θ₀) must be a finite d = {d} vector, got {self.theta0!r}.")
            if (theta0 < bounds[0]).any() or (theta0 > bounds[1]).any():
                raise ValueError("theta0 (θ₀) must lie inside the bounds.")
            self.theta0 = theta0
        if self.search_radius is not None:
            radius = _float_tensor(self.search_radius, "search_radius")
            if radius.dim() > 1 or radius.numel() not in (1, d) or torch.isnan(radius).any() or (radius <= 0).any():
                raise ValueError(
                    f"search_radius must be a positive number or a positive d = {d} vector "
                    f"(inf allowed, NaN not), got {self.search_radius!r}."
                )
            self.search_radius = radius if radius.dim() else float(radius)
        if (self.kernel is None) == (self.model is None):
            raise ValueError("Give exactly one of kernel or model.")
        kernel = self.kernel if self.kernel is not None else getattr(self.model, "covar_module", None)
        if not isinstance(kernel, Kernel):
            raise ValueError(f"kernel (or model.covar_module) must be a gpytorch Kernel, got {type(kernel).__name__}.")
        for module in kernel.modules():
            ard = getattr(module, "ard_num_dims", None) if isinstance(module, Kernel) else None
            active = getattr(module, "active_dims", None)
            expected = d if active is None else int(torch.as_tensor(active).numel())
            if ard is not None and ard != expected:
                raise ValueError(
                    f"kernel: {type(module).__name__} has ard_num_dims = {ard}, but the bounds have "
                    f"d = {d} dimensions{'' if active is None else f' ({expected} active)'}."
                )
        if self.hyperparameter_fit is not None and not self.unsafe_allow_sensitive_fitting:
            raise ValueError(
                "hyperparameter_fit would fit kernel hyperparameters on the sensitive losses, "
                "which breaks the privacy guarantee. Choose the hyperparameters from public "
                "information, or set unsafe_allow_sensitive_fitting=True to run without one."
            )
        transform = getattr(self.model, "outcome_transform", None)
        transform = getattr(self.model, "input_transform", None) if transform is None else transform
        if transform is not None and not self.unsafe_allow_sensitive_fitting:
            raise ValueError(
                f"The model carries a data-dependent transform ({type(transform).__name__}), "
                "which would be fit on the sensitive losses. Pass outcome_transform=None (and no "
                "input transform), or set unsafe_allow_sensitive_fitting=True to run without a "
                "privacy guarantee."
            )


def _float_tensor(value: Any, name: str) -> Tensor:
    r"""``value`` as a new float64 tensor, or a ``ValueError`` naming ``name``."""
    try:
        return torch.as_tensor(value).detach().to(torch.float64, copy=True)
    except (TypeError, ValueError, RuntimeError) as err:
        raise ValueError(f"{name} must be a number or a tensor, got {value!r}.") from err


def _frozen_kernel(kernel: Kernel) -> Kernel:
    kernel = copy.deepcopy(kernel).to(torch.float64)
    kernel.requires_grad_(False)
    kernel.eval()
    return kernel


def resolve_model(config: DPGIBOConfig) -> tuple[Kernel, float, bool]:
    r"""The frozen kernel, ``σ²`` and whether losses are standardized (unsafe opt-out only)."""
    if config.kernel is not None:
        return _frozen_kernel(config.kernel), float(config.noise_variance), False
    model = config.model
    noise = config.noise_variance
    if noise == 0:
        noise = float(model.likelihood.noise.detach().mean())
    return _frozen_kernel(model.covar_module), noise, getattr(model, "outcome_transform", None) is not None


def check_bias_tolerance(bias_tolerance: float, prior: GradientGP, theta0: Tensor) -> None:
    r"""Refuse an adaptive tolerance ``ε`` at or above the prior gradient trace at ``θ₀``
    (the first batch would be empty); ``prior`` is the ``GradientGP`` with no data."""
    with torch.no_grad():
        prior_trace = float(prior.posterior_trace(theta0))
    if not bias_tolerance < prior_trace:
        raise ValueError(
            f"bias_tolerance (ε) = {bias_tolerance:g} is not below the prior gradient trace "
            f"{prior_trace:g} at theta0: the first batch would be empty. Choose a smaller ε."
        )
