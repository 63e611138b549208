r"""DP-GIBO (Sopa et al. Alg. 1; short version Alg. 1–2): the ask/tell/run/resume facade ``DPGIBO``.

The facade wires a config's strategies (``optim.options``: clip policy, noise schedule,
projection, step rule, selection, batch rule, fitting) to the users (``optim.users``), the
ledger's charge protocol and the checkpoint, and keeps the run's one ``RunState``
(``optim.state``). A step asks the strategies; it compares no option. Settings: ``config``;
the plan, the next batch, the checks, the guarantee and the result (from explicit arguments):
``report``; ``run``'s loop: ``driver``; state encoding: ``run_state``; files: ``checkpoint``; the
releases themselves: ``privacy.mechanisms``.
"""

from __future__ import annotations

import concurrent.futures
import math
import os
import secrets
import uuid
import warnings
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from botorch_dp.distributed.partitions import PartitionedObjective
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.optim import report
from botorch_dp.optim.checkpoint import check_new_checkpoint_dir, kernel_fingerprint, save_state
from botorch_dp.optim.config import DPGIBOConfig, check_bias_tolerance, resolve_model
from botorch_dp.optim.driver import run_to_end
from botorch_dp.optim.options import EvaluatedSelection, RunPlan, resolved_mu, state_keepers
from botorch_dp.optim.options.batches import local_bounds
from botorch_dp.optim.options.selection import SELECTION_KEY
from botorch_dp.optim.options.steps import projected_step
from botorch_dp.optim.public_checks import check_kernel
from botorch_dp.optim.results import DPGIBOResult, IterationInfo, PrivacyGuarantee
from botorch_dp.optim.run_state import apply_state, encode_state, resume_run
from botorch_dp.optim.state import CheckpointBook, RunGenerators, RunState, rollback_on_error
from botorch_dp.optim.stored_config import config_to_json
from botorch_dp.optim.users import InMemoryUsers, PartitionedUsers, Users
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.privacy.seeding import PrivacyWarning, noise_generator
from botorch_dp.storage.lock import CheckpointLock, OwnsCheckpoint, own_checkpoint
from botorch_dp.utils import check_bounds, child_seeds

__all__ = ["DPGIBO"]


_UNSAFE_FITTING = (
    "unsafe_allow_sensitive_fitting=True: this run looks at the sensitive losses outside the "
    "privacy mechanism and carries NO differential-privacy guarantee."
)


def _check_unsafe_fitting(ledger: PrivacyLedger) -> None:
    r"""``unsafe_allow_sensitive_fitting=True``: refused on a ledger with a validation budget (the run has no
    guarantee, each step recorded at ``μ = ∞``, which no budget admits), else a ``PrivacyWarning``."""
    if math.isfinite(ledger.validation.remaining_mu()):
        raise ValueError(
            "unsafe_allow_sensitive_fitting=True on a ledger with a validation budget: the run has no "
            "guarantee (each step is recorded as mu = inf), which no budget admits. Use a ledger without "
            "a budget (and no validation_mu_budget)."
        )
    warnings.warn(_UNSAFE_FITTING, PrivacyWarning, stacklevel=4)


class DPGIBO(OwnsCheckpoint):
    r"""The DP-GIBO loop with an ask/tell interface.

    Each iteration: choose points around ``θ_t`` (the batch rule, on the gradient-information acquisition),
    receive the ``q x n`` per-user losses, release the clipped mean of the users' gradient estimates ``A y_i``
    (``A = ∇k(θ, D)K⁻¹``) with Gaussian noise (the noise schedule, at the clip policy's bound, in the
    projection's coordinates), step (the step rule) and project onto ``Θ``. Every step's worst case is charged
    before any noise is drawn (``PrivacyLedger.charge``). Per-user losses stay in this object and its
    (protected) checkpoint, or in the partitions that hold them (``tell_partitioned``). With an evaluated
    ``selection``, ``ask`` returns the iterates once the steps are done, and ``tell`` with their losses chooses
    the returned iterate.

    Args:
        config: The ``DPGIBOConfig``.
        checkpoint_dir: If given, the full state is written there atomically after every
            ``ask`` and ``tell``; ``DPGIBO.resume`` continues from it. It must be missing or
            hold no checkpoint yet, must not be a symbolic link, and must be private (this
            user's, mode ``0700``); else ``ValueError`` (``checkpoint.check_new_checkpoint_dir``).
            The object owns it until ``close()`` (a ``with`` block, garbage collection, the
            process's end): another opener is refused (``storage.lock``).
        ledger: A ``PrivacyLedger`` to charge (default: a new one with
            ``config.validation_mu_budget`` as budget). Pass the ledger your objective records DP
            training runs in, or a stored one shared by other runs on the same users.
    """

    def __init__(
        self,
        config: DPGIBOConfig,
        *,
        checkpoint_dir: str | os.PathLike | None = None,
        ledger: PrivacyLedger | None = None,
        _resuming: CheckpointLock | None = None,
    ) -> None:
        self.config = c = config
        self.options = o = c.options
        self.checkpoint_dir = None if checkpoint_dir is None else Path(checkpoint_dir)
        self.bounds = check_bounds(c.bounds.detach())
        self.kernel, self.noise_variance, _ = resolve_model(c)
        theta0 = (self.bounds[0] + self.bounds[1]) / 2 if c.theta0 is None else c.theta0
        f64: dict[str, Any] = dict(dtype=torch.float64, device=self.bounds.device)  # follow the bounds' device
        theta0 = torch.as_tensor(theta0, **f64).reshape(-1).clone()
        radius = 0.1 * (self.bounds[1] - self.bounds[0]) if c.search_radius is None else c.search_radius
        self.search_radius = torch.as_tensor(radius, **f64).expand(self.dim).clone()
        check_kernel(self.kernel, theta0, self.search_radius)  # public: refuses k(θ₀, θ₀) = 0, warns on scale mismatch
        gp = GradientGP(torch.empty(0, self.dim, **f64), self.kernel, self.noise_variance, jitter=c.jitter)
        self.step_optimizer = o.step_rule.make_optimizer(theta0, c.step_size)  # public: θ and released steps
        self.state = RunState.initial(theta0, gp, self.step_optimizer.state_dict(), o.clip.initial_state())
        if (tolerance := o.batches.tolerance) is not None:  # needs the kernel, so checked here, not in the config
            check_bias_tolerance(
                tolerance, gp, theta0, o.projection.acquisition_basis(theta0, gp, self.state.records.track)
            )
        if self.checkpoint_dir is not None:
            state_keepers(o)  # a strategy whose records could not be kept is refused before anything is written
        stored = (config_to_json(c), kernel_fingerprint(self.kernel)) if self.checkpoint_dir is not None else ()
        self.checkpoint_book = CheckpointBook(*stored)  # what the checkpoint holds of the config and the kernel
        if ledger is not None and c.validation_mu_budget is not None:
            raise ValueError("Set the budget on the ledger you pass, not validation_mu_budget.")
        self.ledger = ledger if ledger is not None else PrivacyLedger(validation_mu_budget=c.validation_mu_budget)
        self.run_id = uuid.uuid4().hex  # the run's name in the ledger
        # Privacy noise: OS entropy unless a seed is given (then child stream 0, with a PrivacyWarning)
        no_noise = math.isinf(resolved_mu(c.privacy_mu))  # μ = inf: no noise, no generator
        noise = None if no_noise else noise_generator(c.seed, stream=0, stacklevel=3)
        search_seed = secrets.randbits(63) if c.seed is None else child_seeds([c.seed, 1], 1)[0]  # public, stream 1
        self.generators = RunGenerators(noise, torch.Generator().manual_seed(search_seed))
        if not o.fitting.holds:
            _check_unsafe_fitting(self.ledger)
        new = None if _resuming else check_new_checkpoint_dir  # DPGIBO.resume continues its own (its lock taken)
        self._checkpoint_lock = own_checkpoint(self.checkpoint_dir, "DPGIBO", _resuming, check=new)  # last

    # ------------------------------------------------------------------ public state
    @property
    def dim(self) -> int:
        return self.config.bounds.shape[1]

    @property
    def theta(self) -> Tensor:
        return self.state.theta

    @property
    def iteration(self) -> int:
        return self.state.iteration

    @property
    def num_users(self) -> int | None:
        return self.state.num_users

    @property
    def evaluation_points(self) -> Tensor:
        return self.state.X.clone()

    @property
    def steps_done(self) -> bool:
        r"""No gradient step is left: the schedule's cap reached, or its filter spent the budget."""
        return self.state.records.noise.stopped or self.iteration >= self.config.iteration_cap

    @property
    def is_done(self) -> bool:
        r"""The steps are done and so is the choice of the returned iterate."""
        return self.steps_done and not (self.options.selection.evaluated and self.state.records.selected is None)

    def plan(self, num_users: int | None = None) -> RunPlan:
        r"""The run's public ``RunPlan`` (for ``num_users``, default the run's ``n``)."""
        return report.run_plan(self.config, self.options, self.dim, num_users or self.num_users, self.generators.noise)

    def local_bounds(self) -> Tensor:
        r"""``2 x d`` box ``[θ_t − r, θ_t + r] ∩ Θ`` in which the next candidates are searched."""
        return local_bounds(self.theta, self.search_radius, self.bounds)

    # ------------------------------------------------------------------- ask / tell
    def ask(self) -> Tensor:
        r"""Points to evaluate next: a ``b x d`` float64 tensor (``b`` may be 0 with adaptive batches),
        the same until ``tell``; after the last step of an evaluated selection, the iterates ``θ_0..θ_t``."""
        if self.is_done:
            raise RuntimeError(f"The run is finished ({self.iteration} iterations).")
        self._check_owner()  # closed: nothing more
        s, c, o = self.state, self.config, self.options
        if (pending := s.pending) is None:  # a ledger that cannot pay refuses before any evaluation:
            report.check_next_release(o, s, self.ledger, self.plan(s.num_users or 1), self.run_id, self.steps_done)
            with rollback_on_error(self):  # a failed search or checkpoint write leaves no trace
                if self.steps_done:  # the evaluated selection's batch: the iterates (public)
                    pending = torch.stack(s.iterates)
                else:  # projected acquisition: the same public Ṽ_t as tell() computes
                    pending = report.next_batch(c, o, s, self.local_bounds(), self.generators.search)
                self.state = replace(s, pending=pending)
                self._save_checkpoint()
        return pending.clone()

    def tell(self, points: Tensor, losses: Tensor) -> IterationInfo:
        r"""Record the per-user losses at the asked points and take one private step.

        Malformed input raises ``ValueError`` before anything is released; the asked points stay
        pending, so they can be told again with corrected losses. Atomic for the run: the new
        state is durable in the checkpoint before the step is returned. The step's worst case is
        admitted by the ledger before any noise is drawn (``PrivacyBudgetExceeded`` then: nothing
        was released or recorded). If anything fails later (a release, the checkpoint write),
        ``tell`` raises and the run — optimizer, noise generator, pending points — is as before,
        but the ledger is not rolled back: every release whose noise was drawn stays recorded,
        and a retry that draws again is charged again (an over-count, never an under-count).
        ``losses``: the ``b x n`` per-user losses (sensitive) at the ``points`` ``ask`` returned.
        """
        if self.state.partitioned:
            raise RuntimeError("This run's users are held in partitions: use tell_partitioned().")
        self._check_owner()
        c, o, s = self.config, self.options, self.state
        points, losses = report.checked_batch(points, losses, c, o, s, self.plan, self.is_done)
        if (users := self.state.users) is None:
            users = InMemoryUsers((losses,), self.config.user_chunk_size, self.config.nonfinite_losses)
        with rollback_on_error(self):
            if self.steps_done:  # the iterates' losses: the evaluated selection
                return self._select(points, users, losses)
            return self._step(points, users if self.state.users is None else users.with_batch(losses))

    def tell_partitioned(self, points: Tensor, partitions: PartitionedObjective) -> IterationInfo:
        r"""``tell`` for users held in partitions (``botorch_dp.distributed``): no loss reaches this process.

        The partitions evaluate their users' losses at the batches of ``D`` (keeping what they
        hold) and answer the step's primitives (``optim.users.PartitionedUsers``); the driver adds
        their answers in partition order and releases once. Every option works (only sensitive
        fitting, which needs the raw losses, is refused). Malformed losses raise ``ValueError``
        naming the partition before anything is released. Atomic as ``tell``.
        """
        s, c = self.state, self.config
        self._check_owner()
        points = report.checked_partitioned(points, partitions, c, self.options, s, self.plan, done=self.is_done)
        users = PartitionedUsers(partitions, c.user_chunk_size, c.nonfinite_losses)
        if not self.steps_done:
            users.prepare([*s.X.split(list(s.batch_sizes)), points])  # checked there; nothing changes here
        with rollback_on_error(self):
            if self.steps_done:
                return self._select(points, users, None)
            return self._step(points, users)

    def _step(self, points: Tensor, users: Users) -> IterationInfo:
        s, o, plan = self.state, self.options, self.plan(users.num_users)
        bound, spent, room = report.step_bound(o, s, self.ledger, plan, self.run_id)  # worst case, before any draw
        with self.ledger.charge(bound, run_id=self.run_id, step=s.iteration) as meter, torch.no_grad():
            basis = o.projection.basis(s.theta, s.gp, s.records.track)  # Ṽ_t from the GP before the batch, or None
            gp = s.gp.condition_on(points) if points.shape[0] else s.gp
            users, gp = o.fitting.prepare(
                users, torch.cat([s.X, points]), self.kernel, gp, self.noise_variance, self.config.jitter, meter
            )
            W = gp.gradient_weights(s.theta)
            W = W if basis is None else basis.transpose(0, 1) @ W
            out = o.release_step(users, W, plan, meter=meter, spent=spent, room=room, **s.step_records())
            release, track = o.projection.lift(out.release, basis, out.track, o.step_rule.keeps_coordinates)
            out = replace(out, release=release, track=track)  # the step's records in θ's coordinates
            trace = float(gp.posterior_trace(s.theta))
        extras = o.step_rule.extras(basis, out.noise.noise_stds[-1], out.track)
        theta = projected_step(self.step_optimizer, out.release.gradient, self.bounds, **extras)  # post-processing
        self.state = s.stepped(
            points=points, gp=gp, users=users, theta=theta, trace=trace, outcome=out, optimizer=self.step_optimizer
        )
        self._save_checkpoint()  # durable before the step is returned
        return IterationInfo(self.iteration, theta.clone(), points.shape[0], trace)

    def _select(self, points: Tensor, users: Users, losses: Tensor | None) -> IterationInfo:
        r"""The evaluated selection over the iterates, charged (``"select"``) before its draw."""
        selection = self.options.selection
        if not (selection.evaluated and isinstance(selection, EvaluatedSelection)):  # steps_done, not is_done
            raise RuntimeError(f"selection={selection.name!r} does not evaluate the iterates.")
        sums = users.clamped_loss_sums(points, losses, selection.loss_clip)
        with self.ledger.charge({SELECTION_KEY: selection.event()}, run_id=self.run_id) as meter:
            chosen = selection.release(sums, users.num_users, meter, self.generators.noise)
        records = replace(self.state.records, selected=chosen.index, selection_scores=chosen.scores)
        self.state = replace(self.state, records=records, pending=None)
        self._save_checkpoint()  # durable before the choice is returned
        return IterationInfo(
            self.iteration, self.state.iterates[chosen.index].clone(), points.shape[0], math.nan, chosen.index
        )

    # ------------------------------------------------------------------- run, report
    def run(
        self,
        objective: Callable[[Tensor], Tensor] | PartitionedObjective,
        *,
        callback: Callable[[IterationInfo], bool | None] | None = None,
        progress: bool = True,
        executor: concurrent.futures.Executor | None = None,
    ) -> DPGIBOResult:
        r"""Run the remaining iterations on ``objective`` (``q x d`` → ``q x n`` per-user losses, or a
        ``distributed.PartitionedObjective``), each batch's rows on ``executor`` if given. ``callback``
        gets each iteration's public ``IterationInfo``; returning ``True`` stops the run early (the
        guarantee covers the steps taken). ``progress``: a tqdm bar of public values."""
        report.check_known_users(self.config, getattr(objective, "num_users", None), self.num_users)  # refuse first
        return run_to_end(self, objective, self.config.iteration_cap, callback, progress, executor)

    def guarantee(self, delta: float | None = None) -> PrivacyGuarantee:
        r"""The validation-data guarantee of the steps taken so far (``report.guarantee``)."""
        return report.guarantee(self.config, self.options, self.state, self.ledger, self.plan, delta)

    def selected_index(self) -> int | None:
        r"""The index ``j`` of the iterate the run returns (``None`` until an evaluated choice is made)."""
        s, r = self.state, self.state.records
        return self.options.selection.record(len(s.iterates), r.noise.noisy_norms, r.selected, None).index

    def result(self) -> DPGIBOResult:
        r"""The private release and, if ``config.record_non_private_diagnostics``, NON-PRIVATE diagnostics."""
        return report.result(self.config, self.options, self.state, self.ledger, self.plan, self.run_id)

    # ------------------------------------------------------------------- checkpoints
    def state_dict(self) -> dict[str, Any]:
        r"""Full state as written to the checkpoint (SENSITIVE; see ``run_state.encode_state``)."""
        return encode_state(self)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        r"""Restore a ``state_dict``, every field checked first (``run_state.apply_state``)."""
        apply_state(self, state)

    def _save_checkpoint(self) -> None:
        if self.checkpoint_dir is not None:
            self._check_owner()
            book = self.checkpoint_book
            book.committed = save_state(self.checkpoint_dir, self.state_dict(), book.committed)

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
        allow-list of GPyTorch kernels; a run with a ``model`` or a ``hyperparameter_fit`` needs
        ``config``). With ``config``, every field that affects privacy or the algorithm must equal
        the stored one, else ``ValueError`` names the field; only the budget may change, and only
        downwards. The checkpoint's ledger is merged into ``ledger`` (never replacing it), its
        records must cover the steps taken, and reservations the run left are settled. ``config``
        defaults to the stored one; the resumed run keeps checkpointing to the same directory.
        """
        return resume_run(cls, checkpoint_dir, config, ledger)
