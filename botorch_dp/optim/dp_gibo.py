r"""DP-GIBO: differentially private local Bayesian optimization (seed 000 Alg. 1, seed 001 Alg. 1–2).

``DPGIBO`` runs the loop through ``ask``/``tell`` or ``run``; ``DPGIBOConfig`` holds the
public settings; the result separates the private release from non-private diagnostics.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
from botorch.optim import optimize_acqf
from botorch.optim.initializers import gen_batch_initial_conditions
from botorch.utils.sampling import manual_seed
from gpytorch.kernels import Kernel
from torch import Tensor
from tqdm.auto import tqdm

from botorch_dp.acquisition import qGradientInformation
from botorch_dp.gradient_gp import DEFAULT_JITTER, GradientGP
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.privacy.checks import check_delta, check_losses, check_positive, check_positive_int
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.privacy.mechanisms import GaussianGradientMechanism, ReleaseDiagnostics

CHECKPOINT_FILE = "dp_gibo_checkpoint.pt"
STEP_RULES = ("sgd", "adagrad")
BATCH_SELECTIONS = ("joint", "greedy")


@dataclass
class DPGIBOConfig:
    r"""Public settings of a DP-GIBO run (paper symbols in brackets).

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
        step_rule: ``"sgd"`` (``θ ← θ − η g``) or ``"adagrad"`` on the privatized gradients.
        batch_size: ``b`` for fixed batches (Alg. 1). Default ``d + 1`` when no
            ``bias_tolerance`` is given.
        bias_tolerance: ``ε`` for adaptive batches (Alg. 2): add points greedily until
            ``tr Σ_D(θ) ≤ ε`` or ``max_batch_size`` points were added.
        max_batch_size: ``b_max`` of the adaptive rule (default ``d + 1``).
        search_radius: Half-width of the local box around ``θ`` in which candidates are
            searched (float or ``d`` tensor, in units of ``θ``); default 10% of the box width.
        noise_variance: ``σ²``, observation-noise variance of the losses.
        theta0: ``θ₀`` (data-independent); default the centre of ``bounds``.
        seed: Seed of the loop's generators (noise and candidate search).
        generator: Optional ``torch.Generator`` for the privacy noise (overrides ``seed``
            for the noise).
        secure_rng: Draw the privacy noise from OS entropy (not reproducible).
        batch_selection: How a batch is chosen. ``"joint"`` (default): ``optimize_acqf``
            over all ``q`` points at once; with adaptive batches, the smallest
            ``q ≤ b_max`` whose optimized batch reaches ``ε`` (bisection over ``q``).
            ``"greedy"``: one point at a time, conditioning on the points already chosen.
            Greedy is myopic (a single point carries little gradient information on its
            own): on the d = 15 GP problem, 16 greedy points leave a posterior gradient
            trace about 3× that of 16 jointly optimized points.
        target_delta: ``δ`` at which ``ε`` is reported.
        privacy_budget_mu: Optional GDP budget for the ledger's filter; a step that would
            exceed it is refused before anything is released.
        diagnostics: Record NON-PRIVATE diagnostics (un-noised gradients, clip fractions,
            noise norms). Off by default.
        num_restarts, raw_samples: Passed to ``optimize_acqf``.
        user_chunk_size: Users per chunk when forming per-user gradients.
        adagrad_eps: Added to AdaGrad's denominator.
        jitter: Diagonal floor of the kernel matrices.
        unsafe_allow_sensitive_fitting: LOUD OPT-OUT. Permits ``hyperparameter_fit`` and
            models with transforms, which look at the sensitive losses; the run then
            carries no privacy guarantee (reported ``μ = inf``, ``valid = False``).
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
    step_rule: str = "sgd"
    batch_size: int | None = None
    bias_tolerance: float | None = None
    max_batch_size: int | None = None
    search_radius: float | Tensor | None = None
    noise_variance: float = 0.0
    theta0: Tensor | None = None
    seed: int = 0
    generator: torch.Generator | None = None
    secure_rng: bool = False
    batch_selection: str = "joint"
    target_delta: float = 1e-5
    privacy_budget_mu: float | None = None
    diagnostics: bool = False
    num_restarts: int = 4
    raw_samples: int = 128
    user_chunk_size: int = 4096
    adagrad_eps: float = 1e-8
    jitter: float = DEFAULT_JITTER
    unsafe_allow_sensitive_fitting: bool = False
    hyperparameter_fit: Callable[[Kernel, Tensor, Tensor], None] | None = None


@dataclass
class PrivacyGuarantee:
    r"""The validation-data guarantee of a run.

    Attributes:
        mu: Total GDP parameter spent so far (``inf``: no guarantee).
        epsilon: ``ε`` at ``delta`` for ``mu``-GDP (exact conversion).
        delta: The ``δ`` used.
        noise_std: Standard deviation of the noise per coordinate, ``2B√T/(nμ)``.
        noise_multiplier: ``noise_std`` over the sensitivity ``2B/n`` (Opacus's convention).
        num_steps: Number of noisy releases so far.
        valid: ``False`` when the run used the unsafe opt-out.
    """

    mu: float
    epsilon: float
    delta: float
    noise_std: float
    noise_multiplier: float
    num_steps: int
    valid: bool = True


@dataclass
class PrivateRelease:
    r"""Everything a DP-GIBO run may publish.

    Attributes:
        theta: ``d`` tensor, the final iterate ``θ_T``.
        iterates: ``(t + 1) x d`` tensor ``θ_0, ..., θ_t``.
        evaluation_points: ``N x d`` tensor, the points ``D_t`` (chosen from public data).
        batch_sizes: Points added at each iteration.
        posterior_traces: ``tr Σ_{D_t}(θ_t)`` after each batch (depends on ``D``, ``θ`` only).
        released_gradients: ``t x d`` tensor of the privatized gradients.
        guarantee: The ``PrivacyGuarantee``.
    """

    theta: Tensor
    iterates: Tensor
    evaluation_points: Tensor
    batch_sizes: list[int]
    posterior_traces: list[float]
    released_gradients: Tensor
    guarantee: PrivacyGuarantee


@dataclass
class NonPrivateDiagnostics:
    r"""NON-PRIVATE values computed from the sensitive losses. Never publish these.

    Attributes:
        unnoised_gradients: ``t x d`` clipped-mean gradients before noise.
        clip_fractions: Fraction of users clipped at each step.
        noise_norms: ``‖noise‖`` at each step.
    """

    unnoised_gradients: Tensor
    clip_fractions: list[float]
    noise_norms: list[float]
    NON_PRIVATE: bool = field(default=True, init=False)

    def bias_norms(self, iterates: Tensor, true_gradient: Callable[[Tensor], Tensor]) -> Tensor:
        r"""``‖ḡ_t − ∇f(θ_t)‖`` for each step, given the true gradient (NON-PRIVATE).

        Args:
            iterates: The ``(t + 1) x d`` iterates of the release.
            true_gradient: Maps a ``k x d`` tensor to ``k x d`` gradients of ``f``.

        Returns:
            A ``t`` tensor.
        """
        t = self.unnoised_gradients.shape[0]
        return (self.unnoised_gradients - true_gradient(iterates[:t])).norm(dim=-1)


@dataclass
class DPGIBOResult:
    r"""Result of a run: ``release`` is private; ``diagnostics`` is not (``None`` unless asked)."""

    release: PrivateRelease
    diagnostics: NonPrivateDiagnostics | None = None


@dataclass
class IterationInfo:
    r"""Public summary of one finished iteration (passed to ``run``'s callback)."""

    iteration: int
    theta: Tensor
    batch_size: int
    posterior_trace: float


def _frozen_kernel(kernel: Kernel) -> Kernel:
    kernel = copy.deepcopy(kernel).to(torch.float64)
    kernel.requires_grad_(False)
    kernel.eval()
    return kernel


class DPGIBO:
    r"""The DP-GIBO loop with an ask/tell interface.

    Each iteration: choose points around ``θ_t`` with the gradient-information
    acquisition (fixed or adaptive batch), receive the ``q x n`` per-user losses, form
    per-user gradient estimates ``g_i = A y_i`` with ``A = ∇k(θ, D)K⁻¹``, clip them to
    ``B``, average, add ``N(0, (2B√T/(nμ))² I)``, take a gradient step and project onto
    the bounds. Per-user losses stay inside this object (and its checkpoint files,
    which must be protected like the data).

    Args:
        config: The ``DPGIBOConfig``.
        checkpoint_dir: If given, the full state is written there atomically after every
            ``ask`` and ``tell``; ``DPGIBO.resume`` continues from it.
        ledger: A ``PrivacyLedger`` to record the validation steps in (default: a new one
            with ``config.privacy_budget_mu`` as budget). Pass the ledger your objective
            records DP training runs in, so that both guarantees are checkpointed together.
    """

    def __init__(
        self,
        config: DPGIBOConfig,
        *,
        checkpoint_dir: str | os.PathLike | None = None,
        ledger: PrivacyLedger | None = None,
    ) -> None:
        self.config = config
        self.checkpoint_dir = None if checkpoint_dir is None else Path(checkpoint_dir)
        self._validate_config()
        c = config
        self.bounds = c.bounds.detach().to(torch.float64)
        d = self.dim
        self.kernel, self.noise_variance, self._standardize = self._resolve_model()
        theta0 = (self.bounds[0] + self.bounds[1]) / 2 if c.theta0 is None else c.theta0
        theta0 = torch.as_tensor(theta0, dtype=torch.float64).reshape(-1)
        if theta0.shape != (d,) or (theta0 < self.bounds[0]).any() or (theta0 > self.bounds[1]).any():
            raise ValueError("theta0 must be a d-vector inside the bounds.")
        if c.search_radius is None:
            radius = 0.1 * (self.bounds[1] - self.bounds[0])
        else:
            radius = torch.as_tensor(c.search_radius, dtype=torch.float64).expand(d).clone()
        if (radius <= 0).any():
            raise ValueError("search_radius must be positive.")
        self.search_radius = radius
        self.adaptive = c.bias_tolerance is not None
        self.max_batch_size = c.max_batch_size if c.max_batch_size is not None else d + 1
        self.batch_size = c.batch_size if c.batch_size is not None else d + 1
        # state
        self.iteration = 0
        self.theta = theta0.clone()
        self._iterates = [theta0.clone()]
        self._X = torch.empty(0, d, dtype=torch.float64)
        self._Y: Tensor | None = None
        self._gp = GradientGP(self._X, self.kernel, self.noise_variance, jitter=c.jitter)
        self._pending: Tensor | None = None
        self._batch_sizes: list[int] = []
        self._traces: list[float] = []
        self._released: list[Tensor] = []
        self._diag: list[ReleaseDiagnostics] = []
        self._adagrad_sum = torch.zeros(d, dtype=torch.float64)
        self._mechanism: GaussianGradientMechanism | None = None
        if ledger is not None and c.privacy_budget_mu is not None:
            raise ValueError("Set the budget on the ledger you pass, not privacy_budget_mu.")
        self.ledger = ledger if ledger is not None else PrivacyLedger(validation_mu_budget=c.privacy_budget_mu)
        self._noise_gen = c.generator if c.generator is not None else torch.Generator().manual_seed(c.seed)
        self._search_gen = torch.Generator().manual_seed(c.seed + 1)
        if c.unsafe_allow_sensitive_fitting:
            warnings.warn(
                "unsafe_allow_sensitive_fitting=True: this run looks at the sensitive losses "
                "outside the privacy mechanism and carries NO differential-privacy guarantee.",
                stacklevel=2,
            )

    # ------------------------------------------------------------------ validation
    def _validate_config(self) -> None:
        c = self.config
        b = c.bounds
        if not isinstance(b, Tensor) or b.dim() != 2 or b.shape[0] != 2 or b.shape[1] < 1:
            raise ValueError("bounds must be a 2 x d tensor.")
        if not torch.isfinite(b).all() or not (b[0] < b[1]).all():
            raise ValueError("bounds must be finite with lower < upper in every dimension.")
        check_positive(c.privacy_mu, "privacy_mu (μ)")
        check_positive(c.clip_bound, "clip_bound (B)", allow_inf=False)
        check_positive_int(c.num_iterations, "num_iterations (T)")
        if not c.step_size > 0:
            raise ValueError(f"step_size (η) must be positive, got {c.step_size}.")
        if c.step_rule not in STEP_RULES:
            raise ValueError(f"step_rule must be one of {STEP_RULES}, got {c.step_rule!r}.")
        if c.batch_selection not in BATCH_SELECTIONS:
            raise ValueError(f"batch_selection must be one of {BATCH_SELECTIONS}, got {c.batch_selection!r}.")
        if c.batch_size is not None and c.batch_size < 1:
            raise ValueError(f"batch_size (b) must be >= 1, got {c.batch_size}.")
        if c.bias_tolerance is not None and not c.bias_tolerance > 0:
            raise ValueError(f"bias_tolerance (ε) must be positive, got {c.bias_tolerance}.")
        if c.bias_tolerance is not None and c.batch_size is not None:
            raise ValueError("Give either batch_size (fixed) or bias_tolerance (adaptive), not both.")
        if c.max_batch_size is not None and c.max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {c.max_batch_size}.")
        if not c.noise_variance >= 0:
            raise ValueError(f"noise_variance (σ²) must be >= 0, got {c.noise_variance}.")
        check_delta(c.target_delta, "target_delta")
        if (c.kernel is None) == (c.model is None):
            raise ValueError("Give exactly one of kernel or model.")
        if c.hyperparameter_fit is not None and not c.unsafe_allow_sensitive_fitting:
            raise ValueError(
                "hyperparameter_fit would fit kernel hyperparameters on the sensitive losses, "
                "which breaks the privacy guarantee. Choose the hyperparameters from public "
                "information, or set unsafe_allow_sensitive_fitting=True to run without one."
            )

    def _resolve_model(self) -> tuple[Kernel, float, bool]:
        c = self.config
        if c.kernel is not None:
            return _frozen_kernel(c.kernel), float(c.noise_variance), False
        model = c.model
        transform = getattr(model, "outcome_transform", None)
        in_transform = getattr(model, "input_transform", None)
        if (transform is not None or in_transform is not None) and not c.unsafe_allow_sensitive_fitting:
            raise ValueError(
                f"The model carries a data-dependent transform "
                f"({type(transform or in_transform).__name__}), which would be fit on the "
                "sensitive losses. Pass outcome_transform=None (and no input transform), or "
                "set unsafe_allow_sensitive_fitting=True to run without a privacy guarantee."
            )
        noise = float(model.likelihood.noise.detach().mean()) if c.noise_variance == 0 else c.noise_variance
        return _frozen_kernel(model.covar_module), noise, transform is not None

    # ------------------------------------------------------------------ properties
    @property
    def dim(self) -> int:
        return self.config.bounds.shape[1]

    @property
    def is_done(self) -> bool:
        return self.iteration >= self.config.num_iterations

    @property
    def num_users(self) -> int | None:
        return None if self._Y is None else self._Y.shape[1]

    @property
    def evaluation_points(self) -> Tensor:
        return self._X.clone()

    def local_bounds(self, theta: Tensor | None = None) -> Tensor:
        r"""``2 x d`` box ``[θ − r, θ + r] ∩ Θ`` in which candidates are searched."""
        theta = self.theta if theta is None else theta
        lo = torch.maximum(theta - self.search_radius, self.bounds[0])
        hi = torch.minimum(theta + self.search_radius, self.bounds[1])
        return torch.stack([lo, hi])

    # ------------------------------------------------------------------ ask / tell
    def _optimize(self, gp: GradientGP, q: int, warm_start: Tensor | None = None) -> Tensor:
        r"""Maximize the gradient information of a ``q``-batch in the local box.

        ``warm_start`` (``q x d``) is optimized alongside the usual random restarts, so the
        batch returned is at least as informative as the warm start (up to the optimizer).
        """
        acqf = qGradientInformation(gp, self.theta)
        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=self._search_gen))
        bounds = self.local_bounds()
        c = self.config
        # optimize_acqf draws from torch's global generator; fork it so the search is
        # reproducible (and resumable) without touching the caller's random state
        with manual_seed(seed):
            initial = None
            if warm_start is not None:
                initial = gen_batch_initial_conditions(
                    acqf, bounds, q=q, num_restarts=c.num_restarts, raw_samples=c.raw_samples,
                    options={"seed": seed},
                )
                warm = torch.minimum(torch.maximum(warm_start, bounds[0]), bounds[1])
                initial = torch.cat([warm.unsqueeze(0).to(initial), initial])
            cand, _ = optimize_acqf(
                acqf,
                bounds=bounds,
                q=q,
                num_restarts=c.num_restarts if initial is None else initial.shape[0],
                raw_samples=c.raw_samples,
                options={"seed": seed},
                batch_initial_conditions=initial,
            )
        return cand.detach()

    def _trace(self, gp: GradientGP, X: Tensor | None = None) -> float:
        with torch.no_grad():
            gp = gp if X is None or X.shape[0] == 0 else gp.condition_on(X)
            return float(gp.posterior_trace(self.theta))

    def _greedy(self, gp: GradientGP, num_points: int, tolerance: float | None = None) -> list[Tensor]:
        r"""Up to ``num_points`` points, one at a time, each conditioned on those before it;
        with ``tolerance``, stop as soon as ``tr Σ ≤ tolerance``."""
        chosen: list[Tensor] = []
        while len(chosen) < num_points and (tolerance is None or self._trace(gp) > tolerance):
            x = self._optimize(gp, 1)
            gp = gp.condition_on(x)
            chosen.append(x)
        return chosen

    def _adaptive_joint(self, gp: GradientGP) -> list[Tensor]:
        r"""Smallest ``q ≤ b_max`` whose jointly optimized batch reaches ``tr Σ ≤ ε``.

        The batch of size ``b_max`` is optimized first; if even it cannot reach ``ε``, it is
        taken as it is (one optimization, the usual case early in a run). Otherwise the
        smallest sufficient ``q`` is found by bisection, each size warm-started from the
        leading points of the smallest sufficient batch found so far.
        """
        eps = self.config.bias_tolerance
        if self._trace(gp) <= eps:
            return []
        hi = self.max_batch_size
        best = self._optimize(gp, hi)
        if self._trace(gp, best) > eps:
            return [best]
        lo = 0  # the empty batch is known not to suffice
        while hi - lo > 1:
            mid = (lo + hi) // 2
            candidate = self._optimize(gp, mid, warm_start=best[:mid])
            if self._trace(gp, candidate) <= eps:
                hi, best = mid, candidate
            else:
                lo = mid
        return [best]

    def ask(self) -> Tensor:
        r"""Points to evaluate next.

        Returns:
            A ``b x d`` float64 tensor (``b`` may be 0 with adaptive batches when the
            existing evaluations already pin down the gradient). Repeated calls before
            ``tell`` return the same points.
        """
        if self.is_done:
            raise RuntimeError(f"The run is finished ({self.config.num_iterations} iterations).")
        if self._pending is not None:
            return self._pending.clone()
        gp, joint = self._gp, self.config.batch_selection == "joint"
        if self.adaptive and joint:
            chosen = self._adaptive_joint(gp)
        elif self.adaptive:
            chosen = self._greedy(gp, self.max_batch_size, tolerance=self.config.bias_tolerance)
        elif joint:
            chosen = [self._optimize(gp, self.batch_size)]
        else:
            chosen = self._greedy(gp, self.batch_size)
        self._pending = torch.cat(chosen) if chosen else torch.empty(0, self.dim, dtype=torch.float64)
        self._save_checkpoint()
        return self._pending.clone()

    def tell(self, points: Tensor, losses: Tensor) -> IterationInfo:
        r"""Record the per-user losses at the asked points and take one private step.

        Malformed input raises ``ValueError`` before anything is released; the asked
        points stay pending, so they can be told again with corrected losses.

        Args:
            points: The ``b x d`` tensor returned by ``ask``.
            losses: A ``b x n`` tensor of per-user losses (sensitive).

        Returns:
            The public ``IterationInfo`` of the finished iteration.
        """
        if self._pending is None:
            raise RuntimeError("Call ask() before tell().")
        points = torch.as_tensor(points, dtype=torch.float64)
        if points.shape != self._pending.shape or not torch.allclose(points, self._pending):
            raise ValueError("tell() must receive the points returned by the last ask().")
        losses = torch.as_tensor(losses)
        if losses.dim() == 2 and losses.shape[0] == 0 and self._Y is not None:
            losses = losses.reshape(0, self._Y.shape[1])
        check_losses(losses, points.shape[0], self.num_users)
        losses = losses.to(torch.float64)
        c = self.config
        if self._mechanism is None:
            self._mechanism = self._make_mechanism(losses.shape[1])
        self.ledger.check_validation_step(self._mechanism.step_mu)  # budget filter, before release

        # the evaluations are kept from here on, whatever happens to the step
        self._X = torch.cat([self._X, points])
        self._Y = losses if self._Y is None else torch.cat([self._Y, losses])
        self._gp = self._gp.condition_on(points) if points.shape[0] else self._gp
        self._pending = None
        Y = self._Y
        if c.hyperparameter_fit is not None:  # unsafe opt-out only
            c.hyperparameter_fit(self.kernel, self._X, Y.mean(-1))
            self._gp = GradientGP(self._X, self.kernel, self.noise_variance, jitter=c.jitter)
        if self._standardize:  # unsafe opt-out only: data-dependent outcome scaling
            Y = (Y - Y.mean()) / Y.std().clamp_min(1e-12)

        with torch.no_grad():
            A = self._gp.gradient_weights(self.theta)
            release = self._mechanism.release(A, Y, diagnostics=c.diagnostics)
            self.ledger.record_validation_step(mu=release.cost.mu, step_index=self.iteration)
            trace = float(self._gp.posterior_trace(self.theta))
        self._traces.append(trace)
        self._batch_sizes.append(points.shape[0])
        self._released.append(release.gradient)
        if release.diagnostics is not None:
            self._diag.append(release.diagnostics)
        self.theta = self._step(release.gradient)
        self._iterates.append(self.theta.clone())
        self.iteration += 1
        self._save_checkpoint()
        return IterationInfo(self.iteration, self.theta.clone(), points.shape[0], trace)

    def _make_mechanism(self, num_users: int) -> GaussianGradientMechanism:
        c = self.config
        return GaussianGradientMechanism(
            clip_bound=c.clip_bound,
            num_users=num_users,
            privacy_mu=c.privacy_mu,
            num_steps=c.num_iterations,
            generator=self._noise_gen,
            secure_rng=c.secure_rng,
            chunk_size=c.user_chunk_size,
        )

    def _step(self, g: Tensor) -> Tensor:
        c = self.config
        if c.step_rule == "adagrad":
            self._adagrad_sum = self._adagrad_sum + g**2
            direction = g / (self._adagrad_sum.sqrt() + c.adagrad_eps)
        else:
            direction = g
        theta = self.theta - c.step_size * direction
        return torch.minimum(torch.maximum(theta, self.bounds[0]), self.bounds[1])

    def run(
        self,
        objective: Callable[[Tensor], Tensor],
        *,
        callback: Callable[["DPGIBO", IterationInfo], bool | None] | None = None,
        progress: bool = True,
    ) -> DPGIBOResult:
        r"""Run the remaining iterations.

        Args:
            objective: Maps a ``q x d`` tensor to the ``q x n`` per-user losses.
            callback: Called with ``(self, info)`` after each iteration; returning
                ``True`` stops the run early (the guarantee covers the steps taken).
            progress: Show a tqdm bar (public values only).

        Returns:
            The ``DPGIBOResult``.
        """
        bar = tqdm(
            total=self.config.num_iterations, initial=self.iteration, disable=not progress, desc="DP-GIBO"
        )
        try:
            while not self.is_done:
                X = self.ask()
                if X.shape[0] > 0:
                    losses = objective(X)
                else:
                    losses = torch.empty(0, self.num_users or 1, dtype=torch.float64)
                info = self.tell(X, losses)
                bar.update(1)
                bar.set_postfix(b=info.batch_size, trace=f"{info.posterior_trace:.3g}")
                if callback is not None and callback(self, info):
                    break
        finally:
            bar.close()
        return self.result()

    # ------------------------------------------------------------------ results
    def guarantee(self, delta: float | None = None) -> PrivacyGuarantee:
        r"""The validation-data guarantee of the steps taken so far."""
        c = self.config
        delta = c.target_delta if delta is None else delta
        valid = not c.unsafe_allow_sensitive_fitting
        mu = self.ledger.validation_mu() if valid else math.inf
        mechanism = self._mechanism if self._mechanism is not None else self._make_mechanism(1)
        noise_std = 0.0 if self._mechanism is None else mechanism.noise_std
        eps = 0.0 if mu == 0 else (math.inf if math.isinf(mu) else gdp_epsilon(mu, delta))
        return PrivacyGuarantee(
            mu=mu, epsilon=eps, delta=delta, noise_std=noise_std,
            noise_multiplier=mechanism.noise_multiplier, num_steps=self.iteration, valid=valid,
        )

    def result(self) -> DPGIBOResult:
        r"""The private release and, if ``config.diagnostics``, non-private diagnostics."""
        d = self.dim
        release = PrivateRelease(
            theta=self.theta.clone(),
            iterates=torch.stack(self._iterates),
            evaluation_points=self._X.clone(),
            batch_sizes=list(self._batch_sizes),
            posterior_traces=list(self._traces),
            released_gradients=torch.stack(self._released) if self._released else torch.empty(0, d, dtype=torch.float64),
            guarantee=self.guarantee(),
        )
        diagnostics = None
        if self.config.diagnostics:
            diagnostics = NonPrivateDiagnostics(
                unnoised_gradients=torch.stack([x.unnoised_gradient for x in self._diag])
                if self._diag else torch.empty(0, d, dtype=torch.float64),
                clip_fractions=[x.clip_fraction for x in self._diag],
                noise_norms=[x.noise_norm for x in self._diag],
            )
        return DPGIBOResult(release=release, diagnostics=diagnostics)

    # ------------------------------------------------------------------ checkpointing
    _STATE_KEYS = (
        "iteration", "theta", "_iterates", "_X", "_Y", "_pending", "_batch_sizes",
        "_traces", "_released", "_diag", "_adagrad_sum",
    )

    def state_dict(self) -> dict:
        r"""Full state: iterate, evaluations and per-user losses (SENSITIVE), AdaGrad
        state, ledger, generator states and the config."""
        state = {k: copy.deepcopy(getattr(self, k)) for k in self._STATE_KEYS}
        state["gp_factor"] = self._gp.L.clone()  # restored as is: refactorizing changes bits
        state["ledger"] = self.ledger.state_dict()
        state["noise_gen"] = self._noise_gen.get_state()
        state["search_gen"] = self._search_gen.get_state()
        state["config"] = dataclasses.replace(self.config, generator=None)
        state["version"] = 1
        return state

    def load_state_dict(self, state: dict) -> None:
        for k in self._STATE_KEYS:
            setattr(self, k, state[k])
        self.ledger.load_state_dict(state["ledger"])
        self._noise_gen.set_state(state["noise_gen"])
        self._search_gen.set_state(state["search_gen"])
        self._gp = GradientGP.from_factor(
            self._X, state["gp_factor"], self.kernel, self.noise_variance, jitter=self.config.jitter
        )
        self._mechanism = None if self._Y is None else self._make_mechanism(self._Y.shape[1])

    def _save_checkpoint(self) -> None:
        if self.checkpoint_dir is None:
            return
        self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        path = self.checkpoint_dir / CHECKPOINT_FILE
        tmp = path.with_suffix(".tmp")
        torch.save(self.state_dict(), tmp)
        os.replace(tmp, path)  # atomic: a crash leaves the previous checkpoint intact

    @classmethod
    def resume(
        cls,
        checkpoint_dir: str | os.PathLike,
        config: DPGIBOConfig | None = None,
        *,
        ledger: PrivacyLedger | None = None,
    ) -> "DPGIBO":
        r"""Continue a run from its checkpoint directory.

        Args:
            checkpoint_dir: The directory given to the original run.
            config: Optionally the config again (needed to pass a ``generator`` or a
                ``hyperparameter_fit`` function); defaults to the stored one.
            ledger: Optionally a ledger object to load the saved ledger state into (e.g.
                the one a DP-training objective records its runs in).

        Returns:
            A ``DPGIBO`` in the saved state that keeps checkpointing to the same directory.
        """
        path = Path(checkpoint_dir) / CHECKPOINT_FILE
        # the checkpoint holds tensors, the config and the kernel module: a trusted local file
        state = torch.load(path, weights_only=False)
        opt = cls(
            config if config is not None else state["config"], checkpoint_dir=checkpoint_dir, ledger=ledger
        )
        opt.load_state_dict(state)
        return opt
