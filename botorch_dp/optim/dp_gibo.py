r"""DP-GIBO: differentially private local Bayesian optimization (seed 000 Alg. 1, seed 001 Alg. 1–2).

``DPGIBOConfig`` holds (and validates) the public settings; ``DPGIBO`` runs the loop
through ``ask``/``tell`` or ``run`` and resumes from checkpoints. Batch selection lives in
``batch_selection``, the step rule in ``step_rules``, results in ``results``, the file
I/O in ``checkpoint``; the release itself is ``privacy.mechanisms``.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math
import numbers
import os
import secrets
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from gpytorch.kernels import Kernel, LinearKernel, MaternKernel, PolynomialKernel, RBFKernel, RQKernel, ScaleKernel
from torch import Tensor
from tqdm.auto import tqdm

from botorch_dp.gradient_gp import DEFAULT_JITTER, GradientGP
from botorch_dp.optim.batch_selection import BATCH_SELECTIONS, BatchSelection, local_bounds, select_batch
from botorch_dp.optim import checkpoint as ckpt
from botorch_dp.optim.checkpoint import load_state, save_state
from botorch_dp.optim.results import DPGIBOResult, IterationInfo, NonPrivateDiagnostics, PrivacyGuarantee, PrivateRelease
from botorch_dp.optim.step_rules import StepRule, check_step_rule, make_step_optimizer, projected_step
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.privacy.checks import (
    NONFINITE_LOSSES,
    check_choice,
    check_delta,
    check_losses,
    check_nonnegative,
    check_nonnegative_int,
    check_positive,
    check_positive_int,
)
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.privacy.mechanisms import GaussianGradientMechanism, NonfiniteLosses, ReleaseDiagnostics
from botorch_dp.privacy.seeding import PrivacyWarning, noise_generator
from botorch_dp.utils import check_bounds, child_seeds

#: Version of ``DPGIBO.state_dict`` (3: JSON + safetensors, per-batch loss blocks, run id).
STATE_VERSION = 3


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
        user_chunk_size: Users per chunk when forming per-user gradients (a positive integer).
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
    user_chunk_size: int = 4096
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


def _resolve_model(config: DPGIBOConfig) -> tuple[Kernel, float, bool]:
    r"""The frozen kernel, ``σ²`` and whether losses are standardized (unsafe opt-out only)."""
    if config.kernel is not None:
        return _frozen_kernel(config.kernel), float(config.noise_variance), False
    model = config.model
    noise = config.noise_variance
    if noise == 0:
        noise = float(model.likelihood.noise.detach().mean())
    return _frozen_kernel(model.covar_module), noise, getattr(model, "outcome_transform", None) is not None


class DPGIBO:
    r"""The DP-GIBO loop with an ask/tell interface.

    Each iteration: choose points around ``θ_t`` with the gradient-information
    acquisition (fixed or adaptive batch), receive the ``q x n`` per-user losses, release
    ``(1/n) Σ_i clip_B(A y_i) + N(0, (2B√T/(nμ))² I)`` with ``A = ∇k(θ, D)K⁻¹`` through
    ``GaussianGradientMechanism``, take a gradient step and project onto the bounds.
    Per-user losses stay inside this object (and its checkpoint files, which must be
    protected like the data).

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
        self.config = c = config
        self.checkpoint_dir = None if checkpoint_dir is None else Path(checkpoint_dir)
        self.bounds = check_bounds(c.bounds.detach())
        d = self.dim
        self.kernel, self.noise_variance, self._standardize = _resolve_model(c)
        theta0 = (self.bounds[0] + self.bounds[1]) / 2 if c.theta0 is None else c.theta0
        theta0 = torch.as_tensor(theta0, dtype=torch.float64).reshape(-1).clone()
        radius = 0.1 * (self.bounds[1] - self.bounds[0]) if c.search_radius is None else c.search_radius
        self.search_radius = torch.as_tensor(radius, dtype=torch.float64).expand(d).clone()
        self.adaptive = c.bias_tolerance is not None
        self.max_batch_size = c.max_batch_size if c.max_batch_size is not None else d + 1
        self.batch_size = c.batch_size if c.batch_size is not None else d + 1
        if self.adaptive:  # needs the kernel, so checked here rather than in the config
            with torch.no_grad():
                prior_trace = float(GradientGP(torch.empty(0, d, dtype=torch.float64), self.kernel,
                                               self.noise_variance, jitter=c.jitter).posterior_trace(theta0))
            if not c.bias_tolerance < prior_trace:
                raise ValueError(
                    f"bias_tolerance (ε) = {c.bias_tolerance:g} is not below the prior gradient trace "
                    f"{prior_trace:g} at theta0: the first batch would be empty. Choose a smaller ε."
                )
        # state
        self.iteration = 0
        self.theta = theta0.clone()
        self._optimizer = make_step_optimizer(theta0, c.step_rule, c.step_size)
        self._iterates = [theta0.clone()]
        self._X = torch.empty(0, d, dtype=torch.float64)
        self._Y_blocks: list[Tensor] = []  # per-batch b_t x n loss blocks, never concatenated
        self._gp = GradientGP(self._X, self.kernel, self.noise_variance, jitter=c.jitter)
        self._pending: Tensor | None = None
        self._batch_sizes: list[int] = []
        self._traces: list[float] = []
        self._released: list[Tensor] = []
        self._diag: list[ReleaseDiagnostics] = []
        self._mechanism: GaussianGradientMechanism | None = None
        self.run_id = uuid.uuid4().hex
        self._committed: dict[str, Any] | None = None  # files of the last checkpoint written
        self._kernel_fingerprint = _kernel_fingerprint(self.kernel) if self.checkpoint_dir is not None else None
        self._config_json = _config_to_json(c) if self.checkpoint_dir is not None else None
        if ledger is not None and c.privacy_budget_mu is not None:
            raise ValueError("Set the budget on the ledger you pass, not privacy_budget_mu.")
        self.ledger = ledger if ledger is not None else PrivacyLedger(validation_mu_budget=c.privacy_budget_mu)
        self.run_id = uuid.uuid4().hex  # the run's name in the ledger
        # Privacy noise: OS entropy unless a seed is given (then child stream 0, with a
        # PrivacyWarning; μ = inf draws no noise, so no generator and no warning).
        # Candidate search is public randomness on a separate stream.
        self._noise_gen = None if math.isinf(c.privacy_mu) else noise_generator(c.seed, stream=0, stacklevel=3)
        search_seed = secrets.randbits(63) if c.seed is None else child_seeds([c.seed, 1], 1)[0]
        self._search_gen = torch.Generator().manual_seed(search_seed)
        if c.unsafe_allow_sensitive_fitting:
            warnings.warn(
                "unsafe_allow_sensitive_fitting=True: this run looks at the sensitive losses "
                "outside the privacy mechanism and carries NO differential-privacy guarantee.",
                PrivacyWarning,
                stacklevel=2,
            )

    # ------------------------------------------------------------------ properties
    @property
    def dim(self) -> int:
        return self.config.bounds.shape[1]

    @property
    def is_done(self) -> bool:
        return self.iteration >= self.config.num_iterations

    @property
    def num_users(self) -> int | None:
        return self._Y_blocks[0].shape[1] if self._Y_blocks else None

    @property
    def evaluation_points(self) -> Tensor:
        return self._X.clone()

    def local_bounds(self) -> Tensor:
        r"""``2 x d`` box ``[θ_t − r, θ_t + r] ∩ Θ`` in which the next candidates are searched."""
        return local_bounds(self.theta, self.search_radius, self.bounds)

    # ------------------------------------------------------------------ ask / tell
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
        c = self.config
        saved = self._snapshot()
        try:
            self._pending = select_batch(
                self._gp, self.theta, self.local_bounds(), self._search_gen,
                batch_selection=c.batch_selection, batch_size=self.batch_size, bias_tolerance=c.bias_tolerance,
                max_batch_size=self.max_batch_size, num_restarts=c.num_restarts, raw_samples=c.raw_samples,
            )
            self._save_checkpoint()
        except BaseException:
            self._restore(saved)
            raise
        return self._pending.clone()

    def tell(self, points: Tensor, losses: Tensor) -> IterationInfo:
        r"""Record the per-user losses at the asked points and take one private step.

        Malformed input raises ``ValueError`` before anything is released; the asked
        points stay pending, so they can be told again with corrected losses.

        Atomic: the new state (losses, iterate, ledger entry, generator states) is written
        to the checkpoint before the step is returned. If anything fails (the budget
        filter, the release, the checkpoint write), ``tell`` raises and the optimizer,
        the ledger and the noise generator are exactly as before the call: nothing was
        released, the points stay pending, and a retry releases once, with the same noise
        when the noise generator is seeded.

        Args:
            points: The ``b x d`` tensor returned by ``ask``.
            losses: A ``b x n`` tensor of per-user losses (sensitive).

        Returns:
            The public ``IterationInfo`` of the finished iteration.
        """
        points, losses = self._checked_batch(points, losses)
        saved = self._snapshot()
        try:
            return self._step(points, losses)
        except BaseException:
            self._restore(saved)
            raise

    def _step(self, points: Tensor, losses: Tensor) -> IterationInfo:
        c = self.config
        if self._mechanism is None:
            self._mechanism = self._make_mechanism(losses.shape[1])
        self.ledger.check_validation_step(self._mechanism.step_mu)  # budget filter, before release

        self._X = torch.cat([self._X, points])
        self._Y_blocks = [*self._Y_blocks, losses]  # a new list: the snapshot keeps the old one
        self._gp = self._gp.condition_on(points) if points.shape[0] else self._gp
        self._pending = None
        Y: Tensor | list[Tensor] = self._Y_blocks
        if c.hyperparameter_fit is not None or self._standardize:  # unsafe opt-out only
            Y = torch.cat(self._Y_blocks)
        if c.hyperparameter_fit is not None:
            c.hyperparameter_fit(self.kernel, self._X, Y.mean(-1))
            self._gp = GradientGP(self._X, self.kernel, self.noise_variance, jitter=c.jitter)
        if self._standardize:  # data-dependent outcome scaling
            Y = (Y - Y.mean()) / Y.std().clamp_min(1e-12)

        with torch.no_grad():
            A = self._gp.gradient_weights(self.theta)
            release = self._mechanism.release(
                A, Y, diagnostics=c.record_non_private_diagnostics, nonfinite=c.nonfinite_losses
            )
            self.ledger.record_validation_step(mu=release.cost.mu, run_id=self.run_id, key=f"step-{self.iteration:04d}")
            trace = float(self._gp.posterior_trace(self.theta))
        self._traces = [*self._traces, trace]
        self._batch_sizes = [*self._batch_sizes, points.shape[0]]
        self._released = [*self._released, release.gradient]
        if release.diagnostics is not None:
            self._diag = [*self._diag, release.diagnostics]
        self.theta = projected_step(self._optimizer, release.gradient, self.bounds)  # post-processing
        self._iterates = [*self._iterates, self.theta.clone()]
        self.iteration += 1
        self._save_checkpoint()  # durable before the step is returned
        return IterationInfo(self.iteration, self.theta.clone(), points.shape[0], trace)

    def _checked_batch(self, points: Tensor, losses: Tensor) -> tuple[Tensor, Tensor]:
        r"""The asked points and a float64 CPU COPY of the told losses (detached from any
        autograd graph, so a caller reusing its buffer cannot change what is stored), or a
        ``RuntimeError`` (no pending ask) / ``ValueError`` naming the problem; nothing is
        released and no state changes before this returns."""
        if self._pending is None:
            if self.is_done:
                raise RuntimeError(f"The run is finished ({self.config.num_iterations} iterations); nothing to tell.")
            raise RuntimeError("Call ask() before tell().")
        try:
            points = torch.as_tensor(points).detach().to("cpu", torch.float64)
        except (TypeError, ValueError, RuntimeError) as err:
            raise ValueError(f"points must be the tensor returned by ask(), got {type(points).__name__}.") from err
        if points.shape != self._pending.shape or not torch.allclose(points, self._pending):
            raise ValueError("tell() must receive the points returned by the last ask().")
        try:  # Python lists become float64 (torch's default float32 would round them)
            as_list = isinstance(losses, (list, tuple))
            losses = torch.as_tensor(losses, dtype=torch.float64 if as_list else None).detach()
        except (TypeError, ValueError, RuntimeError) as err:
            raise ValueError(f"losses must be a (num_points x num_users) tensor, got {type(losses).__name__}.") from err
        if losses.dim() == 2 and losses.shape[0] == 0 and self.num_users is not None:
            losses = losses.reshape(0, self.num_users)
        check_losses(losses, points.shape[0], self.num_users, nonfinite=self.config.nonfinite_losses)
        return self._pending.clone(), losses.to(device="cpu", dtype=torch.float64, copy=True)

    def _make_mechanism(self, num_users: int) -> GaussianGradientMechanism:
        c = self.config
        return GaussianGradientMechanism(
            clip_bound=c.clip_bound, num_users=num_users, privacy_mu=c.privacy_mu, num_steps=c.num_iterations,
            generator=self._noise_gen, chunk_size=c.user_chunk_size,
        )

    def run(
        self,
        objective: Callable[[Tensor], Tensor],
        *,
        callback: Callable[[IterationInfo], bool | None] | None = None,
        progress: bool = True,
    ) -> DPGIBOResult:
        r"""Run the remaining iterations.

        Args:
            objective: Maps a ``q x d`` tensor to the ``q x n`` per-user losses.
            callback: Called with the public ``IterationInfo`` after each iteration (never
                with the optimizer, which holds the sensitive losses); returning ``True``
                stops the run early (the guarantee covers the steps taken).
            progress: Show a tqdm bar (public values only).

        Returns:
            The ``DPGIBOResult``.
        """
        bar = tqdm(total=self.config.num_iterations, initial=self.iteration, disable=not progress, desc="DP-GIBO")
        try:
            while not self.is_done:
                X = self.ask()
                if X.shape[0] > 0:
                    losses = objective(X)
                elif self.num_users is not None:
                    losses = torch.empty(0, self.num_users, dtype=torch.float64)
                else:  # an empty first batch: only the objective knows n (never assume n = 1)
                    losses = self._first_empty_losses(objective, X)
                info = self.tell(X, losses)
                bar.update(1)
                bar.set_postfix(b=info.batch_size, trace=f"{info.posterior_trace:.3g}")
                if callback is not None and callback(info):
                    break
        finally:
            bar.close()
        return self.result()

    @staticmethod
    def _first_empty_losses(objective: Callable[[Tensor], Tensor], X: Tensor) -> Tensor:
        r"""The ``0 x n`` losses of an empty first batch, from the objective itself."""
        try:
            losses = objective(X)
        except Exception as err:  # noqa: BLE001 - re-raised with the reason
            raise ValueError(
                "The first batch is empty, so the number of users n is unknown; the objective "
                "failed on the empty 0 x d batch. Make it return a 0 x n tensor there."
            ) from err
        if not isinstance(losses, Tensor) or losses.dim() != 2 or losses.shape[0] != 0 or losses.shape[1] < 1:
            raise ValueError(
                "The first batch is empty, so the number of users n is unknown; the objective "
                "must return a 0 x n tensor for the empty batch."
            )
        return losses

    # ------------------------------------------------------------------ results
    def guarantee(self, delta: float | None = None) -> PrivacyGuarantee:
        r"""The validation-data guarantee of the steps taken so far (noise read from the mechanism)."""
        c = self.config
        delta = c.target_delta if delta is None else delta
        holds = not c.unsafe_allow_sensitive_fitting
        mu = self.ledger.validation_mu() if holds else math.inf
        mechanism = self._mechanism if self._mechanism is not None else self._make_mechanism(1)
        noise_std = 0.0 if self._mechanism is None else mechanism.noise_std
        eps = gdp_epsilon(mu, delta)
        return PrivacyGuarantee(
            mu=mu, epsilon=eps, delta=delta, noise_std=noise_std,
            noise_multiplier=mechanism.noise_multiplier, num_steps=self.iteration, holds=holds,
        )

    def result(self) -> DPGIBOResult:
        r"""The private release and, if ``config.record_non_private_diagnostics``, NON-PRIVATE diagnostics."""
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
        if self.config.record_non_private_diagnostics:
            diagnostics = NonPrivateDiagnostics.from_releases(self._diag, d)
        return DPGIBOResult(release=release, diagnostics=diagnostics)

    # ------------------------------------------------------------------ checkpointing
    def _snapshot(self) -> dict[str, Any]:
        r"""What ``ask``/``tell`` may change, to restore it exactly when they fail."""
        return {
            "attrs": {k: getattr(self, k) for k in _MUTABLE},
            "theta": self.theta.clone(),
            "optimizer": copy.deepcopy(self._optimizer.state_dict()),
            "ledger": copy.deepcopy(self.ledger.state_dict()),
            "noise_gen": None if self._noise_gen is None else self._noise_gen.get_state(),
            "search_gen": self._search_gen.get_state(),
            "kernel": copy.deepcopy(self.kernel.state_dict()) if self.config.hyperparameter_fit is not None else None,
        }

    def _restore(self, saved: dict[str, Any]) -> None:
        for k, v in saved["attrs"].items():
            setattr(self, k, v)
        self.theta = saved["theta"]
        self._optimizer = make_step_optimizer(self.theta, self.config.step_rule, self.config.step_size)
        self._optimizer.load_state_dict(saved["optimizer"])
        self.ledger.load_state_dict(saved["ledger"])
        if saved["noise_gen"] is not None:
            self._noise_gen.set_state(saved["noise_gen"])
        self._search_gen.set_state(saved["search_gen"])
        if saved["kernel"] is not None:
            self.kernel.load_state_dict(saved["kernel"])

    def state_dict(self) -> dict[str, Any]:
        r"""Full state as written to the checkpoint (SENSITIVE): ``meta`` (JSON-able: public
        state, config, ledger, generator states, run id), ``gp`` (``X``, the Cholesky factor,
        the kernel's tensors) and ``loss_blocks`` (the per-batch per-user losses)."""
        config_json = self._config_json if self._config_json is not None else _config_to_json(self.config)
        fingerprint = self._kernel_fingerprint or _kernel_fingerprint(self.kernel)
        meta = {
            "format": ckpt.FORMAT,
            "schema_version": ckpt.SCHEMA_VERSION,
            "version": STATE_VERSION,
            "run_id": self.run_id,
            "config": config_json,
            "config_fingerprint": _fingerprint(config_json),
            "kernel": {
                "spec": _kernel_spec(self.kernel),
                "fingerprint": fingerprint,
                "noise_variance": float(self.noise_variance).hex(),
                "standardize": self._standardize,
            },
            "iteration": self.iteration,
            "theta": ckpt.tensor_to_json(self.theta),
            "iterates": ckpt.tensor_to_json(torch.stack(self._iterates)),
            "pending": None if self._pending is None else ckpt.tensor_to_json(self._pending),
            "batch_sizes": list(self._batch_sizes),
            "traces": [float(t).hex() for t in self._traces],
            "released": ckpt.tensor_to_json(self._released_matrix()),
            "diagnostics": [
                {
                    "unnoised_gradient": ckpt.tensor_to_json(dg.unnoised_gradient),
                    "clip_fraction": float(dg.clip_fraction).hex(),
                    "noise_norm": float(dg.noise_norm).hex(),
                }
                for dg in self._diag
            ],
            "step_optimizer": _encode(self._optimizer.state_dict()),
            "ledger": self.ledger.state_dict(),
            "noise_generator": ckpt.generator_to_json(self._noise_gen),
            "search_generator": ckpt.generator_to_json(self._search_gen),
        }
        gp = {"X": self._X, "L": self._gp.L}  # the factor is restored as is: refactorizing changes bits
        gp.update({f"kernel.{k}": v.to(torch.float64) for k, v in _kernel_tensors(self.kernel).items()})
        return {"meta": meta, "gp": gp, "loss_blocks": list(self._Y_blocks)}

    def _released_matrix(self) -> Tensor:
        return torch.stack(self._released) if self._released else torch.empty(0, self.dim, dtype=torch.float64)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        r"""Restore a state produced by ``state_dict`` (e.g. read by ``checkpoint.load_state``).

        Every field is checked (type, shape, finiteness, consistency with the config and
        with the other fields); a ``ValueError`` names the first field that is wrong, and
        nothing is changed then.
        """
        meta, gp, blocks = state["meta"], state["gp"], list(state["loss_blocks"])
        if meta.get("version") != STATE_VERSION:
            raise ValueError(f"Checkpoint state version {meta.get('version')!r}, expected {STATE_VERSION}.")
        ckpt._check_keys(meta, _META_KEYS, "state")
        d, T = self.dim, meta["iteration"]
        if not ckpt._is_int(T) or not 0 <= T <= self.config.num_iterations:
            raise ValueError(f"Checkpoint field 'iteration' must be an integer in [0, num_iterations], got {T!r}.")
        if not isinstance(meta["run_id"], str) or len(meta["run_id"]) != 32 or not all(ch in "0123456789abcdef" for ch in meta["run_id"]):
            raise ValueError("Checkpoint field 'run_id' must be a uuid4 hex string.")
        theta = ckpt.tensor_from_json(meta["theta"], "theta", (d,))
        iterates = ckpt.tensor_from_json(meta["iterates"], "iterates", (T + 1, d))
        if not torch.equal(iterates[-1], theta):
            raise ValueError("Checkpoint fields 'theta' and 'iterates' disagree.")
        pending = None if meta["pending"] is None else ckpt.tensor_from_json(meta["pending"], "pending", (None, d))
        sizes = meta["batch_sizes"]
        if not isinstance(sizes, list) or len(sizes) != T or not all(ckpt._is_int(b) and b >= 0 for b in sizes):
            raise ValueError(f"Checkpoint field 'batch_sizes' must be {T} integers >= 0.")
        if [b.shape[0] for b in blocks] != sizes:
            raise ValueError("Checkpoint field 'batch_sizes' does not match the rows of the loss files.")
        if not isinstance(meta["traces"], list) or len(meta["traces"]) != T:
            raise ValueError(f"Checkpoint field 'traces' must hold {T} values.")
        traces = [ckpt.float_from_json(v, "traces") for v in meta["traces"]]
        released = ckpt.tensor_from_json(meta["released"], "released", (T, d))
        if not isinstance(meta["diagnostics"], list) or len(meta["diagnostics"]) not in (0, T):
            raise ValueError(f"Checkpoint field 'diagnostics' must hold 0 or {T} entries.")
        diag = []
        for entry in meta["diagnostics"]:
            ckpt._check_keys(entry, {"unnoised_gradient", "clip_fraction", "noise_norm"}, "diagnostics")
            diag.append(ReleaseDiagnostics(
                unnoised_gradient=ckpt.tensor_from_json(entry["unnoised_gradient"], "diagnostics", (d,)),
                clip_fraction=ckpt.float_from_json(entry["clip_fraction"], "diagnostics"),
                noise_norm=ckpt.float_from_json(entry["noise_norm"], "diagnostics"),
            ))
        X, L = gp["X"], gp["L"]
        if X.shape[1:] != (d,):
            raise ValueError(f"Checkpoint tensor 'X' must have {d} columns.")
        kernel_tensors = {k.removeprefix("kernel."): v for k, v in gp.items() if k.startswith("kernel.")}
        if set(kernel_tensors) != set(_kernel_tensors(self.kernel)):
            raise ValueError("Checkpoint kernel tensors do not match the kernel's hyperparameters.")
        noise_gen = ckpt.generator_state_from_json(meta["noise_generator"], "noise_generator")
        search_gen = ckpt.generator_state_from_json(meta["search_generator"], "search_generator")
        if (noise_gen is None) != (self._noise_gen is None) or search_gen is None:
            raise ValueError("Checkpoint field 'noise_generator'/'search_generator' does not match the config's generators.")
        optimizer = make_step_optimizer(theta, self.config.step_rule, self.config.step_size)
        try:
            optimizer.load_state_dict(_decode(meta["step_optimizer"], "step_optimizer", optimizer_state=True))
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"Checkpoint field 'step_optimizer' is not a {self.config.step_rule} state: {err}") from None
        ledger_state = meta["ledger"]
        PrivacyLedger.from_state_dict(ledger_state)  # validates before anything changes
        n = blocks[0].shape[1] if blocks else None
        if n is not None and self.config.privacy_mu < math.inf and n == 0:
            raise ValueError("Checkpoint loss files hold no users.")
        # all checked: assign
        self.run_id = meta["run_id"]
        self.iteration, self.theta, self._iterates, self._pending = T, theta, list(iterates), pending
        self._batch_sizes, self._traces, self._released, self._diag = list(sizes), traces, list(released), diag
        self._X, self._Y_blocks = X, blocks
        self.kernel.load_state_dict({**self.kernel.state_dict(), **kernel_tensors})
        self._optimizer = optimizer
        self.ledger.load_state_dict(ledger_state)
        if noise_gen is not None:
            self._noise_gen.set_state(noise_gen)
        self._search_gen.set_state(search_gen)
        self._gp = GradientGP.from_factor(X, L, self.kernel, self.noise_variance, jitter=self.config.jitter)
        self._mechanism = None if n is None else self._make_mechanism(n)

    def _save_checkpoint(self) -> None:
        if self.checkpoint_dir is not None:
            self._committed = save_state(self.checkpoint_dir, self.state_dict(), self._committed)

    @classmethod
    def resume(
        cls,
        checkpoint_dir: str | os.PathLike,
        config: DPGIBOConfig | None = None,
        *,
        ledger: PrivacyLedger | None = None,
    ) -> DPGIBO:
        r"""Continue a run from its checkpoint directory (verified on load; nothing is unpickled).

        Without ``config`` the config is rebuilt from the checkpoint (its kernel from an
        allow-list of GPyTorch kernels: RBF, Matérn, polynomial, RQ, linear, scale; a run
        with a ``model`` or a ``hyperparameter_fit`` needs ``config``).
        With ``config``, every field that affects privacy or the algorithm must equal the
        stored one (the kernel is compared by class, settings and hyperparameter values),
        else ``ValueError`` names the field. Only the budget may change, and only downwards:
        a ``privacy_budget_mu`` (on ``config`` or on the passed ``ledger``) at most the
        stored budget is applied to the ledger; a looser one raises ``ValueError`` (a budget
        can be tightened on resume, never loosened).

        Args:
            checkpoint_dir: The directory given to the original run.
            config: Optionally the config again (needed to pass a ``model`` or a
                ``hyperparameter_fit`` function); defaults to the stored one.
            ledger: Optionally a ledger object to load the saved ledger state into (e.g.
                the one a DP-training objective records its runs in).

        Returns:
            A ``DPGIBO`` in the saved state that keeps checkpointing to the same directory.
        """
        state = load_state(checkpoint_dir)
        meta = state["meta"]
        ckpt._check_keys(meta, _META_KEYS, "state")
        stored = _config_from_json(meta["config"], state["gp"], meta["kernel"], rebuild=config is None)
        stored_budget = _stored_budget(meta["ledger"])
        budgets = [] if config is None else [config.privacy_budget_mu]
        if ledger is not None:
            budgets.append(ledger.validation_mu_budget)
        for budget in budgets:
            if budget is not None and stored_budget is not None and budget > stored_budget:
                raise ValueError(
                    f"privacy_budget_mu={budget!r} on resume is looser than the checkpoint's budget "
                    f"{stored_budget!r}; a budget can only be tightened on resume."
                )
        budget = min([b for b in [stored_budget, *budgets] if b is not None], default=None)
        if config is None:
            config = stored
        else:
            _check_same_run(meta, config)
        init_config = config if ledger is None else dataclasses.replace(config, privacy_budget_mu=None)
        with warnings.catch_warnings():
            if config.unsafe_allow_sensitive_fitting:
                warnings.simplefilter("ignore")  # already warned when the run started
            opt = cls(init_config, checkpoint_dir=checkpoint_dir, ledger=ledger)
        opt.config = dataclasses.replace(config, privacy_budget_mu=budget) if ledger is None else config
        if opt._config_json is not None and ledger is None:
            opt._config_json = _config_to_json(opt.config)
        opt._kernel_fingerprint = meta["kernel"]["fingerprint"]
        opt.load_state_dict(state)
        opt.ledger.validation_mu_budget = budget
        opt._committed = _committed_records(checkpoint_dir)
        return opt


#: Attributes that ``ask``/``tell`` replace (never mutate in place), restored when they fail.
_MUTABLE = (
    "iteration", "_iterates", "_X", "_Y_blocks", "_gp", "_pending", "_batch_sizes", "_traces",
    "_released", "_diag", "_mechanism", "_committed",
)
_META_KEYS = {
    "format", "schema_version", "version", "run_id", "config", "config_fingerprint", "kernel", "iteration",
    "theta", "iterates", "pending", "batch_sizes", "traces", "released", "diagnostics", "step_optimizer",
    "ledger", "noise_generator", "search_generator",
}
#: Config fields that may differ on resume: the budget (only tightened), the noise generator
#: object (its state comes from the checkpoint) and the unsafe fitting callable (its presence
#: is compared).
_RESUME_MAY_DIFFER = {"privacy_budget_mu", "hyperparameter_fit"}
_KERNELS: dict[str, type[Kernel]] = {
    k.__name__: k for k in (RBFKernel, MaternKernel, PolynomialKernel, RQKernel, LinearKernel, ScaleKernel)
}


def _committed_records(directory: str | os.PathLike) -> dict[str, Any]:
    r"""The file records of the checkpoint just loaded (so that they are not written again)."""
    raw = json.loads((Path(directory) / ckpt.STATE_FILE).read_text("utf-8"))
    return {"gp_file": raw["gp_file"], "loss_files": raw["loss_files"]}


def _stored_budget(ledger_state: Any) -> float | None:
    budget = ledger_state.get("validation_mu_budget") if isinstance(ledger_state, dict) else None
    return None if budget is None else float(budget)


def _fingerprint(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, allow_nan=True).encode("utf-8")).hexdigest()


def _kernel_spec(kernel: Kernel) -> dict[str, Any]:
    r"""Class and settings of an allow-listed GPyTorch kernel (``ValueError`` for any other)."""
    name = type(kernel).__name__
    if _KERNELS.get(name) is not type(kernel):
        raise ValueError(
            f"kernel: {name} cannot be stored in a checkpoint; allowed are {sorted(_KERNELS)} "
            "(or pass the config again on resume)."
        )
    if len(kernel.batch_shape) != 0:
        raise ValueError("kernel: batched kernels cannot be stored in a checkpoint.")
    spec: dict[str, Any] = {
        "class": name,
        "ard_num_dims": kernel.ard_num_dims,
        "active_dims": None if kernel.active_dims is None else [int(i) for i in kernel.active_dims.tolist()],
        "constraints": {
            k: [
                type(c).__name__,
                getattr(getattr(c, "_transform", None), "__name__", None),
                [float(v).hex() for v in torch.stack([c.lower_bound, c.upper_bound]).reshape(-1).tolist()],
            ]
            for k, c in kernel.named_constraints()
        },
    }
    if isinstance(kernel, MaternKernel):
        spec["nu"] = float(kernel.nu).hex()
    if isinstance(kernel, PolynomialKernel):
        spec["power"] = int(kernel.power)
    if isinstance(kernel, ScaleKernel):
        spec["base"] = _kernel_spec(kernel.base_kernel)
    return spec


def _kernel_tensors(kernel: Kernel) -> dict[str, Tensor]:
    r"""The kernel's hyperparameters (raw parameters; constraint bounds are in the spec)."""
    return {k: v.detach() for k, v in kernel.named_parameters()}


def _kernel_fingerprint(kernel: Kernel) -> str:
    r"""SHA-256 of the kernel's class, settings and exact hyperparameter values."""
    spec = _kernel_spec(kernel)
    values = {k: [float(x).hex() for x in v.to(torch.float64).reshape(-1).tolist()] for k, v in _kernel_tensors(kernel).items()}
    return _fingerprint({"spec": spec, "values": values})


def _build_kernel(spec: Any) -> Kernel:
    if not isinstance(spec, dict) or spec.get("class") not in _KERNELS:
        raise ValueError(f"Checkpoint field 'kernel': class not in the allow-list {sorted(_KERNELS)}.")
    kw: dict[str, Any] = {"ard_num_dims": spec.get("ard_num_dims"), "active_dims": spec.get("active_dims")}
    name = spec["class"]
    if name == "MaternKernel":
        kw["nu"] = ckpt.float_from_json(spec.get("nu"), "kernel.nu")
    if name == "PolynomialKernel":
        kw["power"] = spec.get("power")
    if name == "ScaleKernel":
        kw = {"base_kernel": _build_kernel(spec.get("base"))}
    try:
        kernel = _KERNELS[name](**kw)
    except Exception as err:
        raise ValueError(f"Checkpoint field 'kernel': cannot build {name}: {err}") from None
    if _kernel_spec(kernel) != spec:
        raise ValueError(
            f"Checkpoint field 'kernel': the stored {name} has settings or constraints that cannot be "
            "rebuilt from the checkpoint; pass the config on resume."
        )
    return kernel


def _encode(value: Any) -> Any:
    r"""Exact JSON encoding of plain values and tensors (floats as ``float.hex``)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return {"float": float(value).hex()}
    if isinstance(value, Tensor):
        return {"tensor": ckpt.tensor_to_json(value.to(torch.float64) if not value.is_floating_point() else value)}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {"dict": [[_encode(k), _encode(v)] for k, v in value.items()]}
    raise TypeError(f"{type(value).__name__} cannot be stored exactly")


def _decode(value: Any, name: str, optimizer_state: bool = False) -> Any:
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, list):
        return [_decode(v, name, optimizer_state) for v in value]
    if isinstance(value, dict) and set(value) == {"float"}:
        return ckpt.float_from_json(value["float"], name, allow_inf=True)
    if isinstance(value, dict) and set(value) == {"tensor"}:
        return ckpt.tensor_from_json(value["tensor"], name)
    if isinstance(value, dict) and set(value) == {"dict"} and isinstance(value["dict"], list):
        items = value["dict"]
        if not all(isinstance(kv, list) and len(kv) == 2 for kv in items):
            raise ValueError(f"Checkpoint field {name!r}: malformed mapping.")
        return {_decode(k, name): _decode(v, name, optimizer_state) for k, v in items}
    raise ValueError(f"Checkpoint field {name!r}: unknown value {value!r:.80}.")


def _config_to_json(config: DPGIBOConfig) -> dict[str, Any]:
    r"""The config's fields, exactly: kernel/model/callables are recorded by kind (the kernel
    itself is stored as the resolved kernel's spec and tensors); anything else not JSON-able
    raises a ``ValueError`` naming the field."""
    out: dict[str, Any] = {}
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if field.name == "kernel":
            out[field.name] = None if value is None else {"kernel": "resolved"}
        elif value is not None and (field.name == "model" or callable(value) or isinstance(value, torch.Generator)):
            out[field.name] = {"object": type(value).__qualname__}
        else:
            try:
                out[field.name] = _encode(value)
            except TypeError as err:
                raise ValueError(f"Config field {field.name!r} cannot be written to a checkpoint: {err}.") from None
    return out


def _config_from_json(stored: Any, gp: dict[str, Tensor], kernel_meta: Any, *, rebuild: bool) -> DPGIBOConfig | None:
    r"""Check the stored config's fields and, if ``rebuild``, build the ``DPGIBOConfig``."""
    names = {f.name for f in dataclasses.fields(DPGIBOConfig)}
    if not isinstance(stored, dict) or set(stored) != names:
        have = set(stored) if isinstance(stored, dict) else set()
        raise ValueError(
            f"Checkpoint field 'config': missing fields {sorted(names - have)}, unknown fields {sorted(have - names)}."
        )
    ckpt._check_keys(kernel_meta, {"spec", "fingerprint", "noise_variance", "standardize"}, "kernel")
    if not rebuild:
        return None
    values: dict[str, Any] = {}
    for name, value in stored.items():
        if isinstance(value, dict) and set(value) == {"object"}:
            raise ValueError(
                f"The checkpoint's config has a {name!r} ({value['object']}), which is not stored; "
                "pass the config to DPGIBO.resume."
            )
        if name == "kernel":
            values[name] = None
            continue
        values[name] = _decode(value, f"config.{name}")
    if stored["kernel"] is not None:
        kernel = _build_kernel(kernel_meta["spec"])
        tensors = {k.removeprefix("kernel."): v for k, v in gp.items() if k.startswith("kernel.")}
        if set(tensors) != set(_kernel_tensors(kernel)):
            raise ValueError("Checkpoint kernel tensors do not match the kernel's hyperparameters.")
        kernel.load_state_dict({**kernel.state_dict(), **tensors})
        kernel = kernel.to(torch.float64)
        if _kernel_fingerprint(kernel) != kernel_meta["fingerprint"]:
            raise ValueError("Checkpoint field 'kernel': the rebuilt kernel does not match its stored fingerprint.")
        values["kernel"] = kernel
    try:
        return DPGIBOConfig(**values)
    except (TypeError, ValueError) as err:
        raise ValueError(f"Checkpoint field 'config' is not a valid DPGIBOConfig: {err}") from None


def _check_same_run(meta: dict[str, Any], config: DPGIBOConfig) -> None:
    r"""``ValueError`` naming the first field of ``config`` that differs from the checkpoint's."""
    stored = meta["config"]
    given = _config_to_json(config)
    for field in dataclasses.fields(config):
        if field.name in _RESUME_MAY_DIFFER or field.name in ("kernel", "model"):
            continue
        if given[field.name] != stored.get(field.name):
            raise ValueError(
                f"Config field {field.name!r} differs from the checkpoint's; resuming would change "
                "the run (and its privacy accounting). Start a new run instead."
            )
    if (config.hyperparameter_fit is None) != (stored.get("hyperparameter_fit") is None):
        raise ValueError("Config field 'hyperparameter_fit' differs from the checkpoint's (given vs not given).")
    if (config.model is None) != (stored.get("model") is None):
        raise ValueError("Config field 'model' differs from the checkpoint's (kernel vs model).")
    kernel, noise_variance, standardize = _resolve_model(config)
    k = meta["kernel"]
    if _kernel_fingerprint(kernel) != k.get("fingerprint"):
        raise ValueError(
            "Config field 'kernel' differs from the checkpoint's (class, settings or hyperparameter values)."
        )
    if float(noise_variance).hex() != k.get("noise_variance") or standardize != k.get("standardize"):
        raise ValueError("Config field 'noise_variance' (or the model's likelihood noise) differs from the checkpoint's.")
