r"""DP-GIBO (Sopa et al. Alg. 1; short version Alg. 1–2): the ask/tell/run/resume facade ``DPGIBO``.

Settings: ``config``; batches: ``batch_selection``; steps: ``step_rules``; results:
``results``; state encoding: ``run_state``; files: ``checkpoint``; the release itself:
``privacy.mechanisms``.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import math
import os
import secrets
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from tqdm.auto import tqdm

from botorch_dp.distributed.partitions import PartitionedObjective
from botorch_dp.evaluation import evaluate_rows
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.optim.adaptive_clip import next_clip_bound
from botorch_dp.optim.batch_selection import local_bounds, select_batch
from botorch_dp.optim.checkpoint import check_new_checkpoint_dir, save_state
from botorch_dp.optim.config import (
    DPGIBOConfig,
    check_bias_tolerance,
    check_per_user_losses,
    clip_count_privacy_mu,
    default_batch_size,
    resolve_model,
    split_privacy_mu,
)
from botorch_dp.optim.noise_schedule import AdaptiveNormSchedule, release_adaptive_step
from botorch_dp.optim.results import (
    DPGIBOResult,
    IterationInfo,
    NonPrivateDiagnostics,
    PrivacyGuarantee,
    PrivateRelease,
)
from botorch_dp.optim.run_state import (
    apply_state,
    config_to_json,
    encode_state,
    kernel_fingerprint,
    released_matrix,
    resume_run,
    rollback_on_error,
)
from botorch_dp.optim.selection import EVALUATED_SELECTIONS, SELECTION_KEY, min_noisy_norm_index, release_selection
from botorch_dp.optim.step_rules import make_step_optimizer, projected_step
from botorch_dp.optim.subspace import (
    SubspaceTrack,
    lift_release,
    preconditioner_mechanism,
    step_basis,
    step_extras,
    subspace_release,
)
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.privacy.checks import (
    check_told_batch,
    empty_batch_losses,
)
from botorch_dp.privacy.ledger import Gaussian, Meter, PrivacyBudgetExceeded, PrivacyLedger
from botorch_dp.privacy.mechanisms import (
    AdaptiveGaussianGradientMechanism,
    GaussianClipCountMechanism,
    GaussianGradientMechanism,
    GOEPreconditionerMechanism,
    GradientRelease,
    ReleaseDiagnostics,
    default_chunk_size,
    release_partial_sums,
)
from botorch_dp.privacy.seeding import PrivacyWarning, noise_generator
from botorch_dp.utils import check_bounds, child_seeds


class DPGIBO:
    r"""The DP-GIBO loop with an ask/tell interface.

    Each iteration: choose points around ``θ_t`` by the gradient-information acquisition,
    receive the ``q x n`` per-user losses, release ``(1/n) Σ_i clip_B(A y_i) + N(0,
    (2B√T/(nμ))² I)`` (``A = ∇k(θ, D)K⁻¹``) through ``GaussianGradientMechanism``, step
    and project. Per-user losses stay in this object and its (protected) checkpoint.

    With ``noise_schedule="adaptive_norm"`` each step releases a noisy norm and then the
    gradient at the ``μ_t`` the schedule derives from it (``AdaptiveGaussianGradientMechanism``,
    ``optim.noise_schedule``), until the filter has spent the budget. With
    ``selection="exponential"`` or ``"noisy_loss"``, ``ask`` returns the iterates once the
    steps are done, and ``tell`` with their losses chooses the returned iterate
    (``optim.selection``).

    Args:
        config: The ``DPGIBOConfig``.
        checkpoint_dir: If given, the full state is written there atomically after every
            ``ask`` and ``tell``; ``DPGIBO.resume`` continues from it. It must be missing or
            hold no checkpoint yet, must not be a symbolic link, and must be private (this
            user's, mode ``0700``); else ``ValueError`` (``checkpoint.check_new_checkpoint_dir``).
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
        _resuming: bool = False,
    ) -> None:
        self.config = c = config
        self.checkpoint_dir = None if checkpoint_dir is None else Path(checkpoint_dir)
        if self.checkpoint_dir is not None and not _resuming:  # DPGIBO.resume continues its own checkpoint
            check_new_checkpoint_dir(self.checkpoint_dir)  # before anything is computed or released
        self.bounds = check_bounds(c.bounds.detach())
        d = self.dim
        self.kernel, self.noise_variance, self._standardize = resolve_model(c)
        theta0 = (self.bounds[0] + self.bounds[1]) / 2 if c.theta0 is None else c.theta0
        theta0 = torch.as_tensor(theta0, dtype=torch.float64).reshape(-1).clone()
        radius = 0.1 * (self.bounds[1] - self.bounds[0]) if c.search_radius is None else c.search_radius
        self.search_radius = torch.as_tensor(radius, dtype=torch.float64).expand(d).clone()
        self.adaptive = c.bias_tolerance is not None
        self.max_batch_size = c.max_batch_size if c.max_batch_size is not None else default_batch_size(c)
        self.batch_size = c.batch_size if c.batch_size is not None else default_batch_size(c)
        if self.adaptive:  # needs the kernel, so checked here rather than in the config
            prior = GradientGP(torch.empty(0, d, dtype=torch.float64), self.kernel, self.noise_variance, jitter=c.jitter)
            basis = step_basis(c, theta0, prior, SubspaceTrack()) if c.subspace_acquisition else None
            check_bias_tolerance(c.bias_tolerance, prior, theta0, basis)
        # state
        self.iteration = 0
        self.theta = theta0.clone()
        self._optimizer = make_step_optimizer(theta0, c.step_rule, c.step_size, preconditioner=c.preconditioner)
        self._iterates = [theta0.clone()]
        self._X = torch.empty(0, d, dtype=torch.float64)
        self._Y_blocks: list[Tensor] = []  # per-batch b_t x n loss blocks, never concatenated
        self._gp = GradientGP(self._X, self.kernel, self.noise_variance, jitter=c.jitter)
        self._pending: Tensor | None = None
        self._batch_sizes: list[int] = []
        self._traces: list[float] = []
        self._released: list[Tensor] = []
        self._diag: list[ReleaseDiagnostics] = []
        self._mechanism: GaussianGradientMechanism | AdaptiveGaussianGradientMechanism | None = None
        # Menart et al. (noise_schedule="adaptive_norm", selection): public per-step values
        self._step_mus: list[float] = []  # μ_t of each adaptive gradient release
        self._noise_stds: list[float] = []  # σ_t = Δ/μ_t
        self._noisy_norms: list[float] = []  # released N_t
        self._norm_mus: list[float] = []  # μ_N of each norm release
        self._stopped = False  # the filter ended the adaptive steps
        self._selected: int | None = None  # the evaluated selection's choice
        self._selection_scores: Tensor | None = None  # "noisy_loss": the released scores
        self._subspace = SubspaceTrack()  # Kairouz et al.: Ṽ_t, ũ_t, Ĝ_t (public), ū_t (SENSITIVE)
        # Andrew et al. (clip_bound="adaptive"): B_0..B_t and the released counts b̃_0..b̃_{t-1} (public)
        self._clip_bounds: list[float] = [c.clip_init] if c.clip_bound == "adaptive" else []
        self._clip_counts: list[float] = []
        self._committed: dict[str, Any] | None = None  # files of the last checkpoint written
        self._partitioned_users: int | None = None  # n of a run whose users are held in partitions
        self._kernel_fingerprint = kernel_fingerprint(self.kernel) if self.checkpoint_dir is not None else None
        self._config_json = config_to_json(c) if self.checkpoint_dir is not None else None
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

    @property
    def dim(self) -> int:
        return self.config.bounds.shape[1]

    @property
    def steps_done(self) -> bool:
        r"""No gradient step is left: ``T`` steps made (``T_max`` with ``"adaptive_norm"``),
        or the adaptive schedule's filter spent the budget."""
        return self._stopped or self.iteration >= self.config.iteration_cap

    @property
    def is_done(self) -> bool:
        r"""The steps are done and so is the choice of the returned iterate (an evaluated
        ``selection`` asks for one more batch, the iterates)."""
        return self.steps_done and not (self.config.selection in EVALUATED_SELECTIONS and self._selected is None)

    @property
    def num_users(self) -> int | None:
        return self._Y_blocks[0].shape[1] if self._Y_blocks else self._partitioned_users

    @property
    def evaluation_points(self) -> Tensor:
        return self._X.clone()

    def local_bounds(self) -> Tensor:
        r"""``2 x d`` box ``[θ_t − r, θ_t + r] ∩ Θ`` in which the next candidates are searched."""
        return local_bounds(self.theta, self.search_radius, self.bounds)

    def ask(self) -> Tensor:
        r"""Points to evaluate next.

        Returns:
            A ``b x d`` float64 tensor (``b`` may be 0 with adaptive batches when the
            existing evaluations already pin down the gradient). Repeated calls before
            ``tell`` return the same points. After the last step of a run with
            ``selection="exponential"`` or ``"noisy_loss"``, the ``(t + 1) x d`` iterates
            ``θ_0..θ_t``, whose losses choose the returned iterate.
        """
        if self.is_done:
            raise RuntimeError(f"The run is finished ({self.iteration} iterations).")
        if self._pending is not None:
            return self._pending.clone()
        c = self.config
        if self.steps_done:  # the evaluated selection's batch: the iterates θ_0..θ_T (public)
            with rollback_on_error(self):
                self._pending = torch.stack(self._iterates)
                self._save_checkpoint()
            return self._pending.clone()
        with rollback_on_error(self):  # a failed search or checkpoint write leaves no trace
            # projected acquisition (spec A5): the same public Ṽ_t as tell() computes (same θ_t, same GP)
            basis = step_basis(c, self.theta, self._gp, self._subspace) if c.subspace_acquisition else None
            self._pending = select_batch(
                self._gp, self.theta, self.local_bounds(), self._search_gen,
                batch_selection=c.batch_selection, batch_size=self.batch_size, bias_tolerance=c.bias_tolerance,
                max_batch_size=self.max_batch_size, num_restarts=c.num_restarts, raw_samples=c.raw_samples,
                basis=basis, maxiter=c.acqf_maxiter,
            )
            self._save_checkpoint()
        return self._pending.clone()

    def tell(self, points: Tensor, losses: Tensor) -> IterationInfo:
        r"""Record the per-user losses at the asked points and take one private step.

        Malformed input raises ``ValueError`` before anything is released; the asked
        points stay pending, so they can be told again with corrected losses.

        Atomic for the run: the new state is durable in the checkpoint before the step is
        returned. The step's worst case is admitted by the ledger before any noise is drawn
        (``PrivacyBudgetExceeded`` then: nothing was released or recorded). If anything fails
        later (a release, the checkpoint write), ``tell`` raises and the run — optimizer,
        noise generator, pending points — is as before, but the ledger is not rolled back:
        every release whose noise was drawn stays recorded, and a retry that draws again is
        charged again (an over-count, never an under-count).

        Args:
            points: The ``b x d`` tensor returned by ``ask``.
            losses: A ``b x n`` tensor of per-user losses (sensitive).

        Returns:
            The public ``IterationInfo`` of the finished iteration.
        """
        if self._partitioned_users is not None:
            raise RuntimeError("This run's users are held in partitions: use tell_partitioned().")
        points, losses = self._checked_batch(points, losses)
        with rollback_on_error(self):
            if self.steps_done:  # the iterates' losses: the evaluated selection
                return self._select(points, losses)
            return self._step(points, losses)

    def tell_partitioned(self, points: Tensor, partitions: PartitionedObjective) -> IterationInfo:
        r"""``tell`` for users held in partitions (``botorch_dp.distributed``): no loss reaches this process.

        The partitions evaluate their users' losses at ``points`` (and at any earlier batch
        of ``D`` they do not hold, e.g. after a lost worker or a resume) and keep them; the
        driver sends ``A = ∇k(θ, D)K⁻¹`` (public), receives each partition's sum of
        clipped estimates and releases ``(1/n) Σ_P s_P`` plus the noise of the in-process
        release (``privacy.mechanisms.release_partial_sums``), once. Malformed losses raise
        ``ValueError`` naming the partition before anything is released. Atomic as
        ``tell``: the step is durable in the checkpoint before it is returned, a failure
        leaves the driver and noise generator as before (the ledger keeps what was drawn),
        and a retry is charged again.
        The fixed noise schedule without a subspace, a private preconditioner, an evaluated
        selection or sensitive fitting is supported.

        Args:
            points: The ``b x d`` tensor returned by ``ask``.
            partitions: The ``PartitionedObjective`` holding the users (``n`` fixed).

        Returns:
            The public ``IterationInfo`` of the finished iteration.
        """
        c = self.config
        unsupported = [name for name, used in (
            ("noise_schedule='adaptive_norm'", c.noise_schedule == "adaptive_norm"),
            ("clip_bound='adaptive'", c.clip_bound == "adaptive"),
            ("subspace", c.subspace is not None), ("preconditioner='private'", c.preconditioner == "private"),
            ("an evaluated selection", c.selection in EVALUATED_SELECTIONS),
            ("hyperparameter_fit or a standardizing model", c.hyperparameter_fit is not None or self._standardize),
        ) if used]
        if unsupported:
            raise ValueError(f"partitions: partitioned users do not support {', '.join(unsupported)}.")
        if self._Y_blocks:
            raise RuntimeError("This run's losses are held in this process: use tell().")
        if self._pending is None:
            if self.is_done:
                raise RuntimeError(f"The run is finished ({self.iteration} iterations); nothing to tell.")
            raise RuntimeError("Call ask() before tell_partitioned().")
        points = torch.as_tensor(points).detach().to("cpu", torch.float64)
        if points.shape != self._pending.shape or not torch.allclose(points, self._pending):
            raise ValueError("tell_partitioned() must receive the points returned by the last ask().")
        n = partitions.num_users
        if self._partitioned_users is None:
            check_per_user_losses(n, c.privacy_mu)
        elif n != self._partitioned_users:
            raise ValueError(f"partitions hold {n} users, earlier steps had {self._partitioned_users}; n must stay fixed.")
        points = self._pending.clone()
        batches = [*self._X.split(self._batch_sizes), points]  # public: the points of every batch of D
        partitions.evaluate(batches, nonfinite=c.nonfinite_losses)  # checked there; no driver state changes
        with rollback_on_error(self):
            self._partitioned_users = n
            return self._step(points, None, partitions)

    def _step(self, points: Tensor, losses: Tensor | None, partitions: PartitionedObjective | None = None) -> IterationInfo:
        c = self.config
        adaptive_clip = c.clip_bound == "adaptive"
        if self._mechanism is None or adaptive_clip:  # adaptive clipping: this step's B_t
            self._mechanism = self._make_mechanism(losses.shape[1] if partitions is None else partitions.num_users)
        adaptive_noise = c.noise_schedule == "adaptive_norm"
        precond = None if adaptive_noise else preconditioner_mechanism(c, self._mechanism, self._noise_gen)
        # the step's worst case, charged before anything is computed from the losses
        bound, plan = self._step_bound(precond)
        with self.ledger.charge(bound, run_id=self.run_id, step=self.iteration) as meter:
            basis = step_basis(c, self.theta, self._gp, self._subspace)  # Kairouz et al.: Ṽ_t (public), or None
            self._X = torch.cat([self._X, points])
            if partitions is None:
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
                release = self._release(meter, plan, basis, precond, Y, partitions)
                trace = float(self._gp.posterior_trace(self.theta))
        self._traces = [*self._traces, trace]
        self._batch_sizes = [*self._batch_sizes, points.shape[0]]
        self._released = [*self._released, release.gradient]
        if release.diagnostics is not None:
            self._diag = [*self._diag, release.diagnostics]
        noise_std = self._noise_stds[-1] if adaptive_noise else self._mechanism.noise_std
        self.theta = projected_step(  # post-processing
            self._optimizer, release.gradient, self.bounds, **step_extras(c, basis, noise_std, self._subspace)
        )
        self._iterates = [*self._iterates, self.theta.clone()]
        self.iteration += 1
        self._save_checkpoint()  # durable before the step is returned
        return IterationInfo(self.iteration, self.theta.clone(), points.shape[0], trace)

    def _step_bound(
        self, precond: GOEPreconditionerMechanism | None
    ) -> tuple[dict[str, Gaussian], tuple[list[float], float] | None]:
        r"""Everything this step can release, at its largest cost (public): the ledger admits
        it before any noise is drawn. Adaptive schedule: the norm and the largest gradient
        ``min(its own rest, what the ledger has left)`` allows, with that plan (the run's
        spent ``μ_j`` and the ledger's room) for the release; otherwise ``μ_g/√T``, plus the
        clip count ``μ_C/√T`` or the preconditioner ``μ_H/√T``, and no plan."""
        c = self.config
        if c.noise_schedule == "adaptive_norm":
            schedule, room, spent = self._adaptive_schedule(), self.ledger.remaining_validation_mu(), self._spent_mus()
            if not schedule.can_start_step(self.iteration, spent, room):
                what = (f"the ledger has mu={room:.6g} left" if schedule.can_start_step(self.iteration, spent) else
                        f"this run's releases already spent its steps' mu={schedule.total_mu:.6g} (a copy of the run "
                        "resumed from the same checkpoint spends it too)")
                raise PrivacyBudgetExceeded(
                    f"Validation privacy budget exceeded: {what}, less than one adaptive step needs (a norm at "
                    f"mu={schedule.norm_mu:.6g} and a gradient at mu={schedule.min_step_mu:.6g}). Nothing was released."
                )
            return schedule.step_bound(spent, room), (spent, room)
        bound = {"grad": Gaussian(self._mechanism.step_mu)}
        if c.clip_bound == "adaptive":
            bound["clip"] = Gaussian(self._clip_step_mu())
        if precond is not None:
            bound["precond"] = Gaussian(precond.step_mu)
        return bound, None

    def _release(self, meter: Meter, plan: tuple[list[float], float] | None, basis: Tensor | None,
                 precond: GOEPreconditionerMechanism | None, Y: Tensor | list[Tensor],
                 partitions: PartitionedObjective | None) -> GradientRelease:
        r"""This step's releases, each recorded through ``meter`` just before its draw."""
        c = self.config
        A = self._gp.gradient_weights(self.theta)
        if c.noise_schedule == "adaptive_norm":  # with a subspace: released in k coordinates (d_eff = k)
            release = self._adaptive_release(A if basis is None else basis.transpose(0, 1) @ A, Y, meter, plan)
            if basis is not None:
                release, self._subspace = lift_release(release, basis, self._subspace)
            return release
        if c.clip_bound == "adaptive":  # Andrew et al.: the gradient at B_t, the count at B_t, then B_{t+1}
            return self._adaptive_clip_release(A, Y, meter)
        if partitions is not None:  # the partitions' clipped sums, in partition order
            chunk = self._mechanism.chunk_size or default_chunk_size(self._mechanism.num_users, A.shape[0])
            partials = partitions.partial_sums(A, clip_bound=c.clip_bound, chunk_size=chunk, nonfinite=c.nonfinite_losses)
            return release_partial_sums(self._mechanism, partials, diagnostics=c.record_non_private_diagnostics, meter=meter)
        if basis is None and precond is None:
            return self._mechanism.release(
                A, Y, diagnostics=c.record_non_private_diagnostics, nonfinite=c.nonfinite_losses, meter=meter
            )
        # Kairouz et al.: k-dimensional release, and the private preconditioner's
        release, self._subspace = subspace_release(
            self._mechanism, precond, basis, A, Y, self._subspace, meter=meter,
            diagnostics=c.record_non_private_diagnostics, nonfinite=c.nonfinite_losses,
        )
        return release

    # ------------------------------------------------- Andrew et al.: adaptive clipping
    def _clip_step_mu(self) -> float:
        r"""``μ_C/√T``, the GDP parameter of one clip-count release (``clip_bound="adaptive"``)."""
        return clip_count_privacy_mu(self.config) / math.sqrt(self.config.num_iterations)

    def _adaptive_clip_release(self, A: Tensor, Y: Tensor | list[Tensor], meter: Meter) -> GradientRelease:
        r"""One ``clip_bound="adaptive"`` step: the gradient clipped at ``B_t`` (``μ_g/√T``,
        recorded as ``step-t/grad``), the noisy count of users within ``B_t`` (``μ_C/√T``,
        ``step-t/clip``), and the geometric update to ``B_{t+1}`` (post-processing)."""
        c = self.config
        n = self._mechanism.num_users
        release = self._mechanism.release(
            A, Y, diagnostics=c.record_non_private_diagnostics, nonfinite=c.nonfinite_losses, meter=meter
        )
        counter = GaussianClipCountMechanism(num_users=n, generator=self._noise_gen, chunk_size=c.user_chunk_size)
        count = counter.release(A, Y, self._clip_bounds[-1], self._clip_step_mu(), nonfinite=c.nonfinite_losses, meter=meter)
        bound = next_clip_bound(self._clip_bounds[-1], count.count, n, c.clip_quantile, c.clip_learning_rate)
        self._clip_counts = [*self._clip_counts, count.count]
        self._clip_bounds = [*self._clip_bounds, bound]
        return release

    # ------------------------------------------------- Menart et al.: adaptive noise, selection
    def _adaptive_schedule(self, dim: int | None = None) -> AdaptiveNormSchedule:
        r"""The B1′ schedule of this run (public: config, ``n``, ``d_eff``)."""
        c = self.config
        return AdaptiveNormSchedule.build(
            total_mu=c.steps_privacy_mu, sensitivity=self._mechanism.sensitivity, dim=self.dim if dim is None else dim,
            max_iterations=c.iteration_cap, num_users=self._mechanism.num_users, norm_mu_fraction=c.norm_mu_fraction,
            snr_factor=c.snr_factor, max_step_mu=c.max_step_mu,
        )

    def _spent_mus(self) -> list[float]:
        r"""Every ``μ_j`` this run has recorded in the ledger (its filter's spent budget; a
        release made twice, e.g. a retried step, counts twice)."""
        return [r.event.mu for r in self.ledger.validation_records(self.run_id) if r.key != SELECTION_KEY]

    def _adaptive_release(
        self, A: Tensor, Y: Tensor | list[Tensor], meter: Meter, plan: tuple[list[float], float]
    ) -> GradientRelease:
        r"""One ``"adaptive_norm"`` step (``release_adaptive_step``) within the charged bound
        (``plan``: the run's spent ``μ_j`` and the ledger's room before the step), recorded as
        ``step-t/norm``, ``step-t/grad``."""
        c = self.config
        spent, room = plan
        step = release_adaptive_step(
            self._mechanism.clipped_mean(A, Y, nonfinite=c.nonfinite_losses), self._adaptive_schedule(dim=A.shape[0]),
            index=self.iteration, spent_mus=spent, meter=meter, ledger_room=room,
            diagnostics=c.record_non_private_diagnostics,
        )
        self._noisy_norms = [*self._noisy_norms, step.norm.norm]
        self._norm_mus = [*self._norm_mus, step.norm.cost.mu]
        self._step_mus = [*self._step_mus, step.gradient.cost.mu]
        self._noise_stds = [*self._noise_stds, step.noise_std]
        self._stopped = step.final
        return step.gradient

    def _select(self, points: Tensor, losses: Tensor) -> IterationInfo:
        r"""The evaluated selection over the iterates' ``(t + 1) x n`` losses, checked against
        the ledger first and recorded under ``"select"``."""
        c = self.config
        chosen = release_selection(
            c.selection, losses, selection_epsilon=c.selection_epsilon, selection_mu=c.selection_mu,
            loss_clip=c.loss_clip, generator=self._noise_gen, ledger=self.ledger, run_id=self.run_id,
            nonfinite=c.nonfinite_losses,
        )
        self._selected, self._selection_scores = chosen.index, chosen.scores
        self._pending = None
        self._save_checkpoint()  # durable before the choice is returned
        return IterationInfo(self.iteration, self._iterates[chosen.index].clone(), points.shape[0], math.nan, chosen.index)

    def selected_index(self) -> int | None:
        r"""The index ``j`` of the iterate the run returns (``θ_j``): the last one, the argmin
        of the released noisy norms, or the evaluated selection's choice (``None`` until
        it is made)."""
        c = self.config
        if c.selection in EVALUATED_SELECTIONS:
            return self._selected
        if c.selection == "min_noisy_norm" and self._noisy_norms:
            return min_noisy_norm_index(self._noisy_norms)  # post-processing: free
        return len(self._iterates) - 1

    def _checked_batch(self, points: Tensor, losses: Tensor) -> tuple[Tensor, Tensor]:
        r"""The asked points and a float64 CPU COPY of the told losses (detached from any
        autograd graph, so a caller reusing its buffer cannot change what is stored), or a
        ``RuntimeError`` (no pending ask) / ``ValueError`` naming the problem; nothing is
        released and no state changes before this returns."""
        if self._pending is None:
            if self.is_done:
                raise RuntimeError(f"The run is finished ({self.iteration} iterations); nothing to tell.")
            raise RuntimeError("Call ask() before tell().")
        points, losses = check_told_batch(points, losses, self._pending, self.num_users, self.config.nonfinite_losses)
        if self.num_users is None:  # the first batch fixes n: one loss per user, n >= 2
            check_per_user_losses(losses.shape[1], self.config.privacy_mu)
        return points, losses

    def _make_mechanism(
        self, num_users: int, clip_bound: float | None = None
    ) -> GaussianGradientMechanism | AdaptiveGaussianGradientMechanism:
        c = self.config
        if c.clip_bound == "adaptive":  # B_t: the current bound unless one is given
            return GaussianGradientMechanism(
                clip_bound=self._clip_bounds[-1] if clip_bound is None else clip_bound, num_users=num_users,
                privacy_mu=split_privacy_mu(c)[0], num_steps=c.num_iterations, generator=self._noise_gen,
                chunk_size=c.user_chunk_size,
            )
        if c.noise_schedule == "adaptive_norm":
            return AdaptiveGaussianGradientMechanism(
                clip_bound=c.clip_bound, num_users=num_users, generator=self._noise_gen, chunk_size=c.user_chunk_size
            )
        return GaussianGradientMechanism(
            clip_bound=c.clip_bound, num_users=num_users, privacy_mu=split_privacy_mu(c)[0], num_steps=c.num_iterations,
            generator=self._noise_gen, chunk_size=c.user_chunk_size,
        )

    def run(
        self,
        objective: Callable[[Tensor], Tensor] | PartitionedObjective,
        *,
        callback: Callable[[IterationInfo], bool | None] | None = None,
        progress: bool = True,
        executor: concurrent.futures.Executor | None = None,
    ) -> DPGIBOResult:
        r"""Run the remaining iterations.

        Args:
            objective: Maps a ``q x d`` tensor to the ``q x n`` per-user losses, or a
                ``distributed.PartitionedObjective`` whose partitions keep the losses
                (each step is then ``tell_partitioned``).
            callback: Called with the public ``IterationInfo`` after each iteration (never
                with the optimizer, which holds the sensitive losses); returning ``True``
                stops the run early (the guarantee covers the steps taken).
            progress: Show a tqdm bar (public values only).
            executor: Evaluate each batch's rows on this ``concurrent.futures.Executor``
                (``evaluation.evaluate_rows``: one row per call, losses in row order);
                ``None``: ``objective(X)`` in this process.

        Returns:
            The ``DPGIBOResult``.
        """
        bar = tqdm(total=self.config.iteration_cap, initial=self.iteration, disable=not progress, desc="DP-GIBO")
        try:
            while not self.is_done:
                X = self.ask()
                if isinstance(objective, PartitionedObjective):  # the losses stay in the partitions
                    info = self.tell_partitioned(X, objective)
                else:
                    info = self.tell(X, self._losses_at(objective, X, executor))
                if info.selected_index is None:  # a step (not the evaluated selection)
                    bar.update(1)
                    eps = self.guarantee().epsilon  # public: a function of the recorded μ's
                    bar.set_postfix(b=info.batch_size, trace=f"{info.posterior_trace:.3g}", eps=f"{eps:.3g}")
                if callback is not None and callback(info):
                    break
        finally:
            bar.close()
        return self.result()

    def _losses_at(
        self, objective: Callable[[Tensor], Tensor], X: Tensor, executor: concurrent.futures.Executor | None
    ) -> Tensor:
        r"""The objective's ``b x n`` losses at the asked ``X`` (over ``executor`` if given)."""
        if X.shape[0] > 0:
            return evaluate_rows(objective, X, executor=executor)
        if self.num_users is not None:
            return torch.empty(0, self.num_users, dtype=torch.float64)
        return empty_batch_losses(objective, X)  # an empty first batch: only the objective knows n (never assume n = 1)

    def guarantee(self, delta: float | None = None) -> PrivacyGuarantee:
        r"""The validation-data guarantee of the steps taken so far (noise read from the mechanism).

        ``mu`` and ``epsilon`` are the ledger's, all runs on it; when the ledger's validation
        side also holds a release known only by its RDP curve (a DP-HyPO run on the same
        users), no μ covers the composition: ``mu`` is NaN and ``epsilon`` the ledger's RDP
        conversion (``PrivacyLedger.validation_epsilon``)."""
        holds = not self.config.unsafe_allow_sensitive_fitting
        mu, rdp = math.inf, False
        if holds:
            try:
                mu = self.ledger.validation_mu()
            except ValueError:  # the ledger's validation side holds an RDP entry: no μ covers it
                mu, rdp = math.nan, True
        delta = self.config.target_delta if delta is None else delta
        epsilon = self.ledger.validation_epsilon(delta) if rdp else gdp_epsilon(mu, delta)
        if self.config.noise_schedule == "adaptive_norm":  # σ_t differs per step: report the latest
            std = self._noise_stds[-1] if self._noise_stds else 0.0
            return PrivacyGuarantee(
                mu=mu, epsilon=epsilon, delta=delta, noise_std=std,
                noise_multiplier=std / self._mechanism.sensitivity if std else 0.0, num_steps=self.iteration, holds=holds,
            )
        mechanism = self._mechanism if self._mechanism is not None else self._make_mechanism(1)
        if self.config.clip_bound == "adaptive" and self.iteration:  # the latest release's B_t (also after a resume)
            mechanism = self._make_mechanism(mechanism.num_users, self._clip_bounds[self.iteration - 1])
        guarantee = PrivacyGuarantee.of(
            mu=0.0 if rdp else mu, delta=delta, mechanism=mechanism,  # rdp: mu and epsilon replaced below
            released=self._mechanism is not None, num_steps=self.iteration, holds=holds,
        )
        return dataclasses.replace(guarantee, mu=mu, epsilon=epsilon) if rdp else guarantee

    def result(self) -> DPGIBOResult:
        r"""The private release and, if ``config.record_non_private_diagnostics``, NON-PRIVATE diagnostics."""
        d = self.dim
        selected = self.selected_index()
        if self.config.noise_schedule == "adaptive_norm" or self._mechanism is None:
            step_mus, noise_stds = list(self._step_mus), list(self._noise_stds)
        elif self.config.clip_bound == "adaptive":  # σ_t = 2B_t√T/(nμ_g): one per bound
            step_mus = [self._mechanism.step_mu] * self.iteration
            n = self._mechanism.num_users
            noise_stds = [self._make_mechanism(n, bound).noise_std for bound in self._clip_bounds[: self.iteration]]
        else:  # fixed schedule: the same μ/√T and σ at every step
            step_mus = [self._mechanism.step_mu] * self.iteration
            noise_stds = [self._mechanism.noise_std] * self.iteration
        precond = preconditioner_mechanism(self.config, self._mechanism, None)
        release = PrivateRelease(
            theta=(self.theta if selected is None else self._iterates[selected]).clone(),
            iterates=torch.stack(self._iterates),
            evaluation_points=self._X.clone(),
            batch_sizes=list(self._batch_sizes),
            posterior_traces=list(self._traces),
            released_gradients=released_matrix(self),
            guarantee=self.guarantee(),
            step_mus=step_mus,
            noise_stds=noise_stds,
            noisy_norms=list(self._noisy_norms),
            norm_mus=list(self._norm_mus),
            selected_index=selected,
            selection_scores=None if self._selection_scores is None else self._selection_scores.clone(),
            subspace_bases=list(self._subspace.bases),
            released_coordinates=list(self._subspace.coordinates),
            released_preconditioners=list(self._subspace.preconditioners),
            preconditioner_mus=[precond.step_mu] * len(self._subspace.preconditioners) if precond else [],
            preconditioner_noise_stds=list(self._subspace.preconditioner_noise_stds),
            clip_bounds=list(self._clip_bounds),
            clip_counts=list(self._clip_counts),
        )
        diagnostics = None
        if self.config.record_non_private_diagnostics:
            diagnostics = NonPrivateDiagnostics.from_releases(self._diag, d)
        return DPGIBOResult(release=release, diagnostics=diagnostics)

    def state_dict(self) -> dict[str, Any]:
        r"""Full state as written to the checkpoint (SENSITIVE; see ``run_state.encode_state``)."""
        return encode_state(self)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        r"""Restore a ``state_dict``, every field checked first (``run_state.apply_state``)."""
        apply_state(self, state)

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
        return resume_run(cls, checkpoint_dir, config, ledger)
