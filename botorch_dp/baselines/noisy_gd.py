r"""Noisy gradient descent with exact per-user gradients (DP-GD, the paper's E.4 baseline).

Per-user gradients are clipped to ``B``, averaged and noised by the same Gaussian
mechanism as DP-GIBO (noise ``2B√T/(nμ)``), so ``T`` steps are ``μ``-GDP in total; or, with
``noise_schedule="adaptive_norm"``, with noise scaled to a released noisy gradient norm and
stopped by a GDP filter (Menart et al., ``optim.noise_schedule``). The returned iterate can be
chosen privately (``selection``, see ``optim.selection``).
"""

from __future__ import annotations

import concurrent.futures as cf
import math
import uuid
from typing import Callable, Union

import torch
from torch import Tensor

from botorch_dp.baselines.base import BaselineGuarantee, BaselineHistory, BaselineResult, evaluate_losses
from botorch_dp.optim.noise_schedule import (
    DEFAULT_NORM_MU_FRACTION,
    NOISE_SCHEDULES,
    AdaptiveNormSchedule,
    NoiseSchedule,
    release_adaptive_step,
)
from botorch_dp.optim.selection import (
    EVALUATED_SELECTIONS,
    Selection,
    check_selection,
    min_noisy_norm_index,
    release_selection,
    selection_mu_of,
    steps_mu,
)
from botorch_dp.optim.step_rules import StepRule, make_step_optimizer, projected_step
from botorch_dp.privacy.analysis.gdp import compose_gdp, gdp_epsilon
from botorch_dp.privacy.checks import check_choice, check_positive, check_probability
from botorch_dp.privacy.ledger import Gaussian, PrivacyBudgetExceeded, PrivacyLedger
from botorch_dp.privacy.mechanisms import AdaptiveGaussianGradientMechanism, GaussianGradientMechanism
from botorch_dp.privacy.seeding import noise_generator
from botorch_dp.problems.base import PerUserProblem
from botorch_dp.utils import check_bounds

#: A ``PerUserProblem`` (its ``per_user_gradient`` is used) or a callable
#: mapping a ``1 x d`` tensor to the ``1 x n x d`` per-user gradients.
GradientOracle = Union[PerUserProblem, Callable[[Tensor], Tensor]]


def _per_user_gradients(oracle: GradientOracle, theta: Tensor, num_users: int | None) -> Tensor:
    fn = oracle.per_user_gradient if isinstance(oracle, PerUserProblem) else oracle
    G = torch.as_tensor(fn(theta.unsqueeze(0)))
    if G.dim() == 3:
        G = G[0]
    if G.dim() != 2 or G.shape[-1] != theta.shape[0]:
        raise ValueError(f"per-user gradients must be 1 x n x d or n x d, got shape {tuple(G.shape)}.")
    if num_users is not None and G.shape[0] != num_users:
        raise ValueError(f"got {G.shape[0]} users, earlier steps had {num_users}.")
    if not torch.isfinite(G).all():
        raise ValueError("per-user gradients contain non-finite values; nothing was released.")
    return G.to(torch.float64)


def noisy_gradient_descent(
    oracle: GradientOracle,
    bounds: Tensor,
    *,
    num_iterations: int,
    clip_bound: float,
    step_size: float,
    privacy_mu: float,
    theta0: Tensor | None = None,
    step_rule: StepRule = "sgd",
    target_delta: float = 1e-5,
    seed: int | None = None,
    noise_schedule: NoiseSchedule = "fixed",
    norm_mu_fraction: float = DEFAULT_NORM_MU_FRACTION,
    snr_factor: float | None = None,
    max_step_mu: float | None = None,
    selection: Selection = "last",
    selection_epsilon: float | None = None,
    selection_mu: float | None = None,
    loss_clip: float | None = None,
    loss_oracle: Callable[[Tensor], Tensor] | None = None,
    executor: cf.Executor | None = None,
    ledger: PrivacyLedger | None = None,
    run_id: str | None = None,
) -> BaselineResult:
    r"""``T`` steps of projected noisy gradient descent on ``f = (1/n) Σ ℓ_i``.

    Each step: ``g = (1/n) Σ_i clip_B(∇ℓ_i(θ_t)) + N(0, (2B√T/(nμ))² I)``, then
    ``θ_{t+1} = Π_Θ(θ_t − η g)`` (or an AdaGrad step on the noised ``g``; both through
    ``optim.step_rules``, as in DP-GIBO). The clipped
    mean has replace-one sensitivity ``2B/n``, so each step is ``μ/√T``-GDP and the run
    ``μ``-GDP (the accounting of DP-GIBO, Sopa et al. Thm. 3.1). ``privacy_mu = inf`` gives
    clipped, noise-free gradient descent (non-private).

    Args:
        oracle: A ``PerUserProblem`` with ``per_user_gradient`` or a callable
            ``1 x d -> 1 x n x d`` of per-user gradients (sensitive).
        bounds: ``2 x d`` box ``Θ``.
        num_iterations: ``T``.
        clip_bound: ``B``.
        step_size: ``η``.
        privacy_mu: ``μ``, total GDP budget (``math.inf``: non-private).
        theta0: ``d`` start (default: box centre).
        step_rule: ``"sgd"`` or ``"adagrad"`` (``torch.optim.SGD``/``Adagrad``).
        target_delta: ``δ`` at which ``ε`` is reported.
        seed: ``None`` (default): the noise comes from OS entropy, so nobody can
            regenerate it. An integer: reproducible noise (tests, reproductions), with a
            ``PrivacyWarning``; the guarantee then assumes the seed stays secret. The
            noise is the only randomness of the method.
        noise_schedule: ``"fixed"`` (default, the above) or ``"adaptive_norm"``: each step
            releases a noisy norm of the clipped mean gradient and then the gradient with
            noise scaled to it, each charged its realised ``μ_t``; a GDP filter stops the
            run when the budget is spent (the last step spends exactly the rest), after at
            most ``num_iterations`` (``T_max``) steps. See ``optim.noise_schedule``.
        norm_mu_fraction: ``f_N`` of ``"adaptive_norm"`` (``μ_N = μ_steps √(f_N/T_max)``).
        snr_factor: ``c_snr`` of ``"adaptive_norm"`` (default ``√log(nμ/(√2·0.05))``, ≥ 1).
        max_step_mu: ``μ_max`` of ``"adaptive_norm"`` (default ``μ_steps/2``).
        selection: Which iterate is returned: ``"last"`` (default), ``"min_noisy_norm"``
            (free; ``"adaptive_norm"`` only), ``"exponential"`` or ``"noisy_loss"`` (evaluate
            ``θ_0..θ_T`` on the users, ``T + 1`` more evaluations). See ``optim.selection``.
        selection_epsilon: ``ε_sel`` of ``"exponential"``; charged ``μ_sel = 2Φ⁻¹(e^ε/(1+e^ε))``.
        selection_mu: ``μ_sel`` of ``"noisy_loss"`` (all ``T + 1`` scores together).
        loss_clip: ``C`` of both evaluated selections (losses clamped to ``[0, C]``).
        loss_oracle: Per-user losses ``q x d -> q x n`` for the evaluated selections;
            default the ``oracle`` itself when it is a ``PerUserProblem``.
        executor: Evaluate the ``T + 1`` iterates' rows of an evaluated selection on this
            ``concurrent.futures.Executor`` (``evaluation.evaluate_rows``); ``None``: in
            this process. (The gradient oracle is called once per step, one point: nothing
            to spread.)
        ledger: The ``PrivacyLedger`` of the users (default: a new one, private to this call).
            Every release is charged to it (``PrivacyLedger.charge``: each step's worst case
            admitted before its noise, each release recorded just before its draw); a step
            its budget cannot admit raises ``PrivacyBudgetExceeded`` before anything of that
            step is released (the earlier steps stay recorded). With ``"adaptive_norm"`` the
            schedule also plans with what the ledger has left.
        run_id: The run's id in the ledger (default ``"noisy-gd-<uuid4 hex>"``); one the
            ledger already holds is refused (``ValueError``).

    The budget split is explicit: the selection gets ``μ_sel`` and the gradient steps
    ``μ_steps = √(μ² − μ_sel²)``, so the whole run is ``μ``-GDP.

    Returns:
        A ``BaselineResult``; ``num_evaluations`` counts per-user gradient evaluations
        (``T``) plus, for an evaluated selection, the ``T + 1`` loss evaluations. The
        history is public (post-processing of the released values): ``iterates`` are
        ``θ_0..θ_T``, ``extras["released_gradients"]`` the ``T x d`` noised gradients,
        ``extras["noise_std"]`` the per-coordinate noise standard deviation (fixed
        schedule; with ``"adaptive_norm"`` the per-step values are
        ``extras["noise_stds"]``). With ``"adaptive_norm"`` or a selection other than
        ``"last"``, also ``extras["step_mus"]`` (``μ_t`` of each gradient release),
        ``extras["noise_stds"]``, ``extras["noisy_norms"]`` and ``extras["norm_mus"]``
        (empty with ``"fixed"``), ``extras["selected_index"]`` (the returned iterate) and
        ``extras["selection_scores"]`` (the released noisy losses of ``"noisy_loss"``,
        else ``None``).
    """
    bounds = check_bounds(bounds)
    d = bounds.shape[1]
    if int(num_iterations) != num_iterations or num_iterations < 1:
        raise ValueError(f"num_iterations (T) must be an integer >= 1, got {num_iterations}.")
    if not step_size > 0:
        raise ValueError(f"step_size (η) must be positive, got {step_size}.")
    theta = bounds.mean(0) if theta0 is None else torch.as_tensor(theta0, dtype=torch.float64).reshape(d).clone()
    if (theta < bounds[0]).any() or (theta > bounds[1]).any():
        raise ValueError("theta0 must lie inside the bounds.")
    check_choice(noise_schedule, "noise_schedule", NOISE_SCHEDULES)
    if noise_schedule == "adaptive_norm":
        if math.isinf(privacy_mu):
            raise ValueError("noise_schedule='adaptive_norm' scales the noise to a privacy budget; it needs a finite privacy_mu.")
        check_probability(norm_mu_fraction, "norm_mu_fraction (f_N)")
        if snr_factor is not None:
            check_positive(snr_factor, "snr_factor (c_snr)", allow_inf=False)
        if max_step_mu is not None:
            check_positive(max_step_mu, "max_step_mu (μ_max)", allow_inf=False)
    selection_epsilon, selection_mu, loss_clip = check_selection(
        selection, noise_schedule=noise_schedule, privacy_mu=privacy_mu, selection_epsilon=selection_epsilon,
        selection_mu=selection_mu, loss_clip=loss_clip,
    )
    if selection in EVALUATED_SELECTIONS:
        if loss_oracle is None and not isinstance(oracle, PerUserProblem):
            raise ValueError(f"selection={selection!r} evaluates the iterates: pass loss_oracle (q x d -> q x n losses).")
        loss_oracle = oracle if loss_oracle is None else loss_oracle
    selection_charge = selection_mu_of(selection, selection_epsilon, selection_mu)
    mu_steps = steps_mu(privacy_mu, selection_charge)
    if ledger is not None and not isinstance(ledger, PrivacyLedger):
        raise ValueError(f"ledger must be a PrivacyLedger or None, got {type(ledger).__name__}.")
    run_id = f"noisy-gd-{uuid.uuid4().hex}" if run_id is None else run_id
    account = _Account(PrivacyLedger() if ledger is None else ledger, run_id)
    # None: no generator, the mechanism draws from OS entropy; a seed warns, and its stream
    # is derived as before issue 13 (manual_seed(seed)), so seeded runs are unchanged
    generator = None if seed is None else noise_generator(seed).manual_seed(int(seed))
    if noise_schedule == "adaptive_norm":
        theta, iterates_t, released, record = _adaptive_descent(
            oracle, bounds, theta, int(num_iterations), clip_bound, step_size, mu_steps, step_rule, generator,
            norm_mu_fraction, snr_factor, max_step_mu, account,
        )
        n = record["num_users"]
    else:
        theta, iterates_t, released, mechanism, n = _fixed_descent(
            oracle, bounds, theta, int(num_iterations), clip_bound, step_size, mu_steps, step_rule, generator, account
        )
        steps = iterates_t.shape[0] - 1
        record = {
            "noise_std": mechanism.noise_std, "step_mus": [mechanism.step_mu] * steps,
            "noise_stds": [mechanism.noise_std] * steps, "noisy_norms": [], "norm_mus": [],
        }
    num_steps = iterates_t.shape[0] - 1
    extras: dict = {"released_gradients": torch.stack(released), "noise_std": record["noise_std"]}
    selected, scores, num_evaluations, spent = num_steps, None, num_steps, record["norm_mus"] + record["step_mus"]
    if selection == "min_noisy_norm":
        selected = min_noisy_norm_index(record["noisy_norms"])  # post-processing: free
    elif selection in EVALUATED_SELECTIONS:
        losses = evaluate_losses(loss_oracle, iterates_t, n, executor=executor)  # T + 1 candidates θ_0..θ_T, sensitive
        num_evaluations += iterates_t.shape[0]
        chosen = release_selection(
            selection, losses, selection_epsilon=selection_epsilon, selection_mu=selection_mu, loss_clip=loss_clip,
            generator=generator, ledger=account.ledger, run_id=account.run_id,
        )
        selected, scores = chosen.index, chosen.scores
        spent = [*spent, chosen.mu]
    if noise_schedule == "adaptive_norm" or selection != "last":
        extras.update({k: record[k] for k in ("step_mus", "noise_stds", "noisy_norms", "norm_mus")})
        extras.update({"selected_index": selected, "selection_scores": scores})
    guarantee = None
    if not math.isinf(privacy_mu):
        total_mu = float(privacy_mu) if (noise_schedule == "fixed" and selection == "last") else compose_gdp(spent)
        if noise_schedule == "fixed" and selection == "last":
            description = (
                f"{num_iterations} Gaussian steps, each {privacy_mu / math.sqrt(num_iterations):.4g}-GDP "
                f"(sensitivity 2B/n, noise 2B√T/(nμ)), composed to {privacy_mu:g}-GDP; exact GDP→(ε, δ)."
            )
        else:
            description = _description(noise_schedule, selection, num_steps, mu_steps, selection_charge, total_mu)
        guarantee = BaselineGuarantee(
            epsilon=gdp_epsilon(total_mu, target_delta),
            delta=target_delta,
            mu=total_mu,
            description=description,
            details={"noise_std": record["noise_std"], "clip_bound": float(clip_bound), "num_users": n},
        )
    history = BaselineHistory(
        iterates=iterates_t,
        evaluations=torch.arange(0, num_steps + 1),
        points=iterates_t[:-1],
        mean_losses=None,
        public=True,
        extras=extras,
    )
    return BaselineResult(
        theta=iterates_t[selected].clone(), num_evaluations=num_evaluations, guarantee=guarantee, history=history
    )


def _description(schedule: str, selection: str, steps: int, mu_steps: float, mu_sel: float, total: float) -> str:
    what = (
        f"{steps} adaptive steps (noisy norm + gradient, each charged its realised μ_t = Δ/σ_t, "
        f"GDP filter at μ_steps = {mu_steps:.4g})"
        if schedule == "adaptive_norm"
        else f"{steps} Gaussian steps composed to μ_steps = {mu_steps:.4g}"
    )
    if selection in EVALUATED_SELECTIONS:
        what += f", plus a {selection} selection of the returned iterate charged μ_sel = {mu_sel:.4g}"
    return f"{what}; composed to {total:.6g}-GDP (fully adaptive GDP composition); exact GDP→(ε, δ)."


class _Account:
    r"""The ledger and run id a noisy-GD call charges (its first charge refuses a taken id)."""

    def __init__(self, ledger: PrivacyLedger, run_id: str) -> None:
        self.ledger, self.run_id, self.started = ledger, run_id, False

    def charge(self, bound: dict, step: int):
        new_run, self.started = not self.started, True
        return self.ledger.charge(bound, run_id=self.run_id, step=step, new_run=new_run)


def _fixed_descent(oracle, bounds, theta, num_iterations, clip_bound, step_size, privacy_mu, step_rule, generator, account):
    r"""``T`` steps at ``μ/√T`` each (``GaussianGradientMechanism``), each charged before its noise."""
    d = bounds.shape[1]
    eye = torch.eye(d, dtype=torch.float64)
    mechanism, n = None, None
    iterates, released = [theta.clone()], []
    optimizer = make_step_optimizer(theta, step_rule, step_size)  # refuses an unknown step_rule
    for t in range(num_iterations):
        G = _per_user_gradients(oracle, theta, n)  # n x d, sensitive
        if mechanism is None:
            n = G.shape[0]
            mechanism = GaussianGradientMechanism(
                clip_bound=clip_bound, num_users=n, privacy_mu=privacy_mu, num_steps=num_iterations,
                generator=generator,
            )
        # the mechanism clips the rows of (A Y)ᵀ; with A = I and Y = Gᵀ those are the ∇ℓ_i
        with account.charge({"grad": Gaussian(mechanism.step_mu)}, t) as meter:
            g = mechanism.release(eye, G.T, meter=meter).gradient
        released.append(g)
        theta = projected_step(optimizer, g, bounds)  # post-processing of the release
        iterates.append(theta.clone())
    return theta, torch.stack(iterates), released, mechanism, n


def _adaptive_descent(
    oracle, bounds, theta, max_iterations, clip_bound, step_size, mu_steps, step_rule, generator,
    norm_mu_fraction, snr_factor, max_step_mu, account,
):
    r"""At most ``T_max`` steps of B1′: noisy norm, then the gradient at the ``μ_t`` the
    schedule derives from it; the filter (the schedule's and the ledger's, one check) runs
    before every step, and the step's worst case is charged before its noise."""
    d = bounds.shape[1]
    eye = torch.eye(d, dtype=torch.float64)
    mechanism = schedule = n = None
    iterates, released, spent = [theta.clone()], [], []
    record: dict = {"step_mus": [], "noise_stds": [], "noisy_norms": [], "norm_mus": []}
    optimizer = make_step_optimizer(theta, step_rule, step_size)
    for t in range(max_iterations):
        if schedule is not None and not schedule.can_start_step(t, spent):
            break  # the filter: no room for a norm release and a minimal gradient release
        G = _per_user_gradients(oracle, theta, n)  # n x d, sensitive
        if mechanism is None:
            n = G.shape[0]
            mechanism = AdaptiveGaussianGradientMechanism(clip_bound=clip_bound, num_users=n, generator=generator)
            schedule = AdaptiveNormSchedule.build(
                total_mu=mu_steps, sensitivity=mechanism.sensitivity, dim=d, max_iterations=max_iterations,
                num_users=n, norm_mu_fraction=norm_mu_fraction, snr_factor=snr_factor, max_step_mu=max_step_mu,
            )
        room = account.ledger.remaining_validation_mu()
        if not schedule.can_start_step(t, spent, room):
            raise PrivacyBudgetExceeded(
                f"Validation privacy budget exceeded: the ledger has mu={room:.6g} left, less than adaptive "
                f"step {t} needs; nothing of that step was released."
            )
        with account.charge(schedule.step_bound(spent, room), t) as meter:
            step = release_adaptive_step(
                mechanism.clipped_mean(eye, G.T), schedule, index=t, spent_mus=spent, meter=meter, ledger_room=room
            )
        spent += [step.norm.cost.mu, step.gradient.cost.mu]
        record["norm_mus"].append(step.norm.cost.mu)
        record["noisy_norms"].append(step.norm.norm)
        record["step_mus"].append(step.gradient.cost.mu)
        record["noise_stds"].append(step.noise_std)
        released.append(step.gradient.gradient)
        theta = projected_step(optimizer, step.gradient.gradient, bounds)  # post-processing of the release
        iterates.append(theta.clone())
        if step.final:
            break
    record["noise_std"] = record["noise_stds"][-1]
    record["num_users"] = n
    return theta, torch.stack(iterates), released, record
