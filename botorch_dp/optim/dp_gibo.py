r"""DP-GIBO (seed 000 Alg. 1, seed 001 Alg. 1–2): the ask/tell/run/resume facade ``DPGIBO``.

Settings: ``config``; batches: ``batch_selection``; steps: ``step_rules``; results:
``results``; state encoding: ``run_state``; files: ``checkpoint``; the release itself:
``privacy.mechanisms``.
"""

from __future__ import annotations

import copy
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

from botorch_dp.gradient_gp import GradientGP
from botorch_dp.optim.batch_selection import local_bounds, select_batch
from botorch_dp.optim import checkpoint as ckpt
from botorch_dp.optim.checkpoint import load_state, save_state
from botorch_dp.optim.results import DPGIBOResult, IterationInfo, NonPrivateDiagnostics, PrivacyGuarantee, PrivateRelease
from botorch_dp.optim.step_rules import make_step_optimizer, projected_step
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.privacy.checks import (
    empty_batch_losses,
    check_losses,
)
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.privacy.mechanisms import GaussianGradientMechanism, ReleaseDiagnostics
from botorch_dp.privacy.seeding import PrivacyWarning, noise_generator
from botorch_dp.utils import check_bounds, child_seeds
from botorch_dp.optim.config import DPGIBOConfig, resolve_model
from botorch_dp.optim.run_state import (
    encode_diagnostics,
    resume_config,
    STATE_VERSION,
    check_state,
    committed_records,
    config_to_json,
    encode_value,
    json_fingerprint,
    kernel_fingerprint,
    kernel_spec,
    kernel_tensors,
)



class DPGIBO:
    r"""The DP-GIBO loop with an ask/tell interface.

    Each iteration: choose points around ``θ_t`` by the gradient-information acquisition,
    receive the ``q x n`` per-user losses, release ``(1/n) Σ_i clip_B(A y_i) + N(0,
    (2B√T/(nμ))² I)`` (``A = ∇k(θ, D)K⁻¹``) through ``GaussianGradientMechanism``, step
    and project. Per-user losses stay in this object and its (protected) checkpoint.

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
        self.kernel, self.noise_variance, self._standardize = resolve_model(c)
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

        Atomic: the new state is durable in the checkpoint before the step is returned. If
        anything fails (budget filter, release, checkpoint write), ``tell`` raises and the
        optimizer, ledger and noise generator are as before: nothing was released, the
        points stay pending, and a retry releases once (with the same noise if seeded).

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
                    losses = empty_batch_losses(objective, X)
                info = self.tell(X, losses)
                bar.update(1)
                bar.set_postfix(b=info.batch_size, trace=f"{info.posterior_trace:.3g}")
                if callback is not None and callback(info):
                    break
        finally:
            bar.close()
        return self.result()

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
        config_json = self._config_json if self._config_json is not None else config_to_json(self.config)
        fingerprint = self._kernel_fingerprint or kernel_fingerprint(self.kernel)
        meta = {
            "format": ckpt.FORMAT,
            "schema_version": ckpt.SCHEMA_VERSION,
            "version": STATE_VERSION,
            "run_id": self.run_id,
            "config": config_json,
            "config_fingerprint": json_fingerprint(config_json),
            "kernel": {
                "spec": kernel_spec(self.kernel),
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
            "diagnostics": encode_diagnostics(self._diag),
            "step_optimizer": encode_value(self._optimizer.state_dict()),
            "ledger": self.ledger.state_dict(),
            "noise_generator": ckpt.generator_to_json(self._noise_gen),
            "search_generator": ckpt.generator_to_json(self._search_gen),
        }
        gp = {"X": self._X, "L": self._gp.L}  # the factor is restored as is: refactorizing changes bits
        gp.update({f"kernel.{k}": v.to(torch.float64) for k, v in kernel_tensors(self.kernel).items()})
        return {"meta": meta, "gp": gp, "loss_blocks": list(self._Y_blocks)}

    def _released_matrix(self) -> Tensor:
        return torch.stack(self._released) if self._released else torch.empty(0, self.dim, dtype=torch.float64)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        r"""Restore a state produced by ``state_dict`` (e.g. read by ``checkpoint.load_state``).

        Every field is checked (type, shape, finiteness, consistency with the config and
        with the other fields); a ``ValueError`` names the first field that is wrong, and
        nothing is changed then.
        """
        checked = check_state(
            state, config=self.config, kernel=self.kernel, has_noise_generator=self._noise_gen is not None
        )
        meta, X, L, blocks = checked["meta"], checked["X"], checked["L"], checked["blocks"]
        T, theta, iterates, pending = checked["T"], checked["theta"], checked["iterates"], checked["pending"]
        sizes, traces, released, diag = checked["sizes"], checked["traces"], checked["released"], checked["diag"]
        kernel_tensors_, optimizer, ledger_state = checked["kernel_tensors"], checked["optimizer"], checked["ledger_state"]
        noise_gen, search_gen, n = checked["noise_gen"], checked["search_gen"], checked["n"]
        # all checked: assign
        self.run_id = meta["run_id"]
        self.iteration, self.theta, self._iterates, self._pending = T, theta, list(iterates), pending
        self._batch_sizes, self._traces, self._released, self._diag = list(sizes), traces, list(released), diag
        self._X, self._Y_blocks = X, blocks
        self.kernel.load_state_dict({**self.kernel.state_dict(), **kernel_tensors_})
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
        config, budget = resume_config(state, config, ledger)
        init_config = config if ledger is None else dataclasses.replace(config, privacy_budget_mu=None)
        with warnings.catch_warnings():
            if config.unsafe_allow_sensitive_fitting:
                warnings.simplefilter("ignore")  # already warned when the run started
            opt = cls(init_config, checkpoint_dir=checkpoint_dir, ledger=ledger)
        opt.config = dataclasses.replace(config, privacy_budget_mu=budget) if ledger is None else config
        if opt._config_json is not None and ledger is None:
            opt._config_json = config_to_json(opt.config)
        opt._kernel_fingerprint = meta["kernel"]["fingerprint"]
        opt.load_state_dict(state)
        opt.ledger.validation_mu_budget = budget
        opt._committed = committed_records(checkpoint_dir)
        return opt


#: Attributes that ``ask``/``tell`` replace (never mutate in place), restored when they fail.
_MUTABLE = (
    "iteration", "_iterates", "_X", "_Y_blocks", "_gp", "_pending", "_batch_sizes", "_traces",
    "_released", "_diag", "_mechanism", "_committed",
)
