r"""Noisy gradient descent with exact per-user gradients (DP-GD, the paper's E.4 baseline).

Per-user gradients are clipped to ``B``, averaged and noised by the same Gaussian
mechanism as DP-GIBO (noise ``2B√T/(nμ)``), so ``T`` steps are ``μ``-GDP in total; or, with
``noise_schedule="adaptive_norm"``, with noise scaled to a released noisy gradient norm and
stopped by a GDP filter (Menart et al., ``optim.options.noise``). The returned iterate can be
chosen privately (``selection``, see ``optim.options.selection``).
"""

from __future__ import annotations

import concurrent.futures as cf
import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from botorch_dp.baselines.base import BaselineGuarantee, BaselineHistory, BaselineResult, evaluate_losses
from botorch_dp.objectives.per_user_problem import PerUserProblem
from botorch_dp.optim.options import (
    ClipState,
    EvaluatedSelection,
    FixedClip,
    NoiseState,
    Options,
    RunPlan,
    is_strategy,
    resolve,
)
from botorch_dp.optim.options.noise import DEFAULT_NORM_MU_FRACTION, NoisePolicy, NoiseSchedule
from botorch_dp.optim.options.projection import SubspaceTrack
from botorch_dp.optim.options.selection import SELECTION_KEY, Selection
from botorch_dp.optim.options.steps import StepRule, projected_step
from botorch_dp.optim.users import InMemoryUsers
from botorch_dp.privacy.analysis.gdp import compose_gdp, gdp_epsilon
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.privacy.seeding import noise_generator
from botorch_dp.utils import check_bounds

#: A ``PerUserProblem`` (its ``per_user_gradient`` is used) or a callable
#: mapping a ``1 x d`` tensor to the ``1 x n x d`` per-user gradients.
GradientOracle = PerUserProblem | Callable[[Tensor], Tensor]


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
    noise_schedule: NoiseSchedule | NoisePolicy = "fixed",
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
    ``optim.options.steps``, as in DP-GIBO). The clipped
    mean has replace-one sensitivity ``2B/n``, so each step is ``μ/√T``-GDP and the run
    ``μ``-GDP (the accounting of DP-GIBO, Sopa et al. Thm. 3.1). ``privacy_mu = inf`` gives
    clipped, noise-free gradient descent (non-private).

    Args:
        oracle: A ``PerUserProblem`` with ``per_user_gradient`` or a callable
            ``1 x d -> 1 x n x d`` of per-user gradients (sensitive).
        bounds: ``2 x d`` box ``Θ``.
        num_iterations: ``T``.
        clip_bound: ``B``, or a clip policy of ``optim.options`` (e.g. ``QuantileClip(...)``:
            the bound tracks a private quantile of the per-user gradient norms, its counts
            charged as part ``"clip"``; ``extras["clip_bounds"]``/``["clip_counts"]``).
        step_size: ``η``.
        privacy_mu: ``μ``, total GDP budget (``math.inf``: non-private).
        theta0: ``d`` start (default: box centre).
        step_rule: ``"sgd"``, ``"adagrad"`` or ``"adagrad_full"`` (``torch.optim.SGD``/``Adagrad``,
            ``FullMatrixAdagrad``), or a step-rule strategy of ``optim.options`` (e.g.
            ``FullMatrixAdaGrad(PrivateGOE())``). The options are DP-GIBO's strategies
            (``optim.options``): the same checks, budget split and releases.
        target_delta: ``δ`` at which ``ε`` is reported.
        seed: ``None`` (default): the noise comes from OS entropy, so nobody can
            regenerate it. An integer: reproducible noise (tests, reproductions), with a
            ``PrivacyWarning``; the guarantee then assumes the seed stays secret. The
            noise is the only randomness of the method.
        noise_schedule: ``"fixed"`` (default, the above), ``"adaptive_norm"`` or an ``AdaptiveNorm``: each step
            releases a noisy norm of the clipped mean gradient and then the gradient with
            noise scaled to it, each charged its realised ``μ_t``; a GDP filter stops the
            run when the budget is spent (the last step spends exactly the rest), after at
            most ``num_iterations`` (``T_max``) steps. See ``optim.options.noise``.
        norm_mu_fraction: ``f_N`` of ``"adaptive_norm"`` (``μ_N = μ_steps √(f_N/T_max)``).
        snr_factor: ``c_snr`` of ``"adaptive_norm"`` (default ``√log(nμ/(√2·0.05))``, ≥ 1).
        max_step_mu: ``μ_max`` of ``"adaptive_norm"`` (default ``μ_steps/2``).
        selection: Which iterate is returned: ``"last"`` (default), ``"min_noisy_norm"``
            (free; ``"adaptive_norm"`` only), ``"exponential"`` or ``"noisy_loss"`` (evaluate
            ``θ_0..θ_T`` on the users, ``T + 1`` more evaluations). See ``optim.options.selection``.
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
    # the option strings resolve once, here, through the registry; strategy objects are taken as they are
    noise_keywords = {
        "norm_mu_fraction": ("norm_mu_fraction", norm_mu_fraction),
        "snr_factor": ("snr_factor", snr_factor),
        "max_step_mu": ("max_step_mu", max_step_mu),
    }
    selection_keywords = {
        "epsilon": ("selection_epsilon", selection_epsilon),
        "mu": ("selection_mu", selection_mu),
        "loss_clip": ("loss_clip", loss_clip),
    }
    options = Options(
        clip=resolve("clip", clip_bound, "clip_bound") if is_strategy(clip_bound) else FixedClip(clip_bound),
        noise=resolve("noise", noise_schedule, "noise_schedule", noise_keywords),
        step_rule=resolve("step_rule", step_rule, "step_rule", {}),
        selection=resolve("selection", selection, "selection", selection_keywords, strict=True),
    )
    options.check(privacy_mu, d, int(num_iterations))
    evaluator = None  # what the evaluated selections evaluate the iterates with
    chosen_by = options.selection
    evaluated = chosen_by if chosen_by.evaluated and isinstance(chosen_by, EvaluatedSelection) else None
    if evaluated is not None:
        if loss_oracle is None and not isinstance(oracle, PerUserProblem):
            raise ValueError(
                f"selection={selection!r} evaluates the iterates: pass loss_oracle (q x d -> q x n losses)."
            )
        evaluator = oracle if loss_oracle is None else loss_oracle
    if ledger is not None and not isinstance(ledger, PrivacyLedger):
        raise ValueError(f"ledger must be a PrivacyLedger or None, got {type(ledger).__name__}.")
    run_id = f"noisy-gd-{uuid.uuid4().hex}" if run_id is None else run_id
    account = _Account(PrivacyLedger() if ledger is None else ledger, run_id)
    # None: no generator, the mechanism draws from OS entropy; a seed warns, and its stream
    # is derived as before issue 13 (manual_seed(seed)), so seeded runs are unchanged
    generator = None if seed is None else noise_generator(seed).manual_seed(int(seed))
    theta, iterates_t, released, record, n = _descent(
        oracle, bounds, theta, int(num_iterations), step_size, privacy_mu, options, generator, account
    )
    num_steps = iterates_t.shape[0] - 1
    extras: dict = {"released_gradients": torch.stack(released), "noise_std": record.noise.noise_stds[-1]}
    selected, scores, num_evaluations = num_steps, None, num_steps
    spent = [*record.noise.norm_mus, *record.noise.step_mus, *record.others]
    if evaluated is not None and evaluator is not None:  # evaluator is set whenever the selection is evaluated
        losses = evaluate_losses(evaluator, iterates_t, n, executor=executor)  # T + 1 candidates θ_0..θ_T, sensitive
        num_evaluations += iterates_t.shape[0]
        sums = InMemoryUsers((losses,)).clamped_loss_sums(iterates_t, losses, evaluated.loss_clip)
        with account.ledger.charge({SELECTION_KEY: evaluated.event()}, run_id=account.run_id) as meter:
            chosen = evaluated.release(sums, n, meter, generator)
        selected, scores = chosen.index, chosen.scores
        spent = [*spent, chosen.mu]
    else:
        selected = options.selection.index(num_steps + 1, record.noise.noisy_norms)  # post-processing: free
    # plain: the T fixed-schedule gradients are all the run released (no norm, no selection's charge, no
    # count or preconditioner), so it is privacy_mu-GDP exactly, T releases of μ/√T
    plain = not record.noise.norm_mus and not options.selection.charge and not record.others
    if not plain:
        extras.update(
            {
                "step_mus": list(record.noise.step_mus),
                "noise_stds": list(record.noise.noise_stds),
                "noisy_norms": list(record.noise.noisy_norms),
                "norm_mus": list(record.noise.norm_mus),
            }
        )
        extras.update({"selected_index": selected, "selection_scores": scores})
    if record.clip.bounds:
        extras.update({"clip_bounds": list(record.clip.bounds), "clip_counts": list(record.clip.counts)})
    guarantee = None
    if not math.isinf(privacy_mu):
        total_mu = float(privacy_mu) if plain else compose_gdp(spent)
        if plain:
            description = (
                f"{num_iterations} Gaussian steps, each {privacy_mu / math.sqrt(num_iterations):.4g}-GDP "
                f"(sensitivity 2B/n, noise 2B√T/(nμ)), composed to {privacy_mu:g}-GDP; exact GDP→(ε, δ)."
            )
        else:
            split = options.split(privacy_mu)
            description = _description(
                bool(record.noise.norm_mus), evaluated, num_steps, split.steps_mu, split.selection_mu, total_mu
            )
        guarantee = BaselineGuarantee(
            epsilon=gdp_epsilon(total_mu, target_delta),
            delta=target_delta,
            mu=total_mu,
            description=description,
            details={"noise_std": record.noise.noise_stds[-1], "clip_bound": _first_bound(options), "num_users": n},
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


def _first_bound(options: Options) -> float:
    r"""The first step's clip bound ``B`` (``B₀`` of a moving bound; public)."""
    return options.clip.current(options.clip.initial_state())


def _description(
    norms: bool, selection: EvaluatedSelection | None, steps: int, mu_steps: float, mu_sel: float, total: float
) -> str:
    r"""The guarantee in words: ``norms``: the steps released noisy norms (the adaptive schedule);
    ``selection``: the evaluated selection, if any."""
    what = (
        f"{steps} adaptive steps (noisy norm + gradient, each charged its realised μ_t = Δ/σ_t, "
        f"GDP filter at μ_steps = {mu_steps:.4g})"
        if norms
        else f"{steps} Gaussian steps composed to μ_steps = {mu_steps:.4g}"
    )
    if selection is not None:
        what += f", plus a {selection.name} selection of the returned iterate charged μ_sel = {mu_sel:.4g}"
    return f"{what}; composed to {total:.6g}-GDP (fully adaptive GDP composition); exact GDP→(ε, δ)."


class _Account:
    r"""The ledger and run id a noisy-GD call charges (its first charge refuses a taken id)."""

    def __init__(self, ledger: PrivacyLedger, run_id: str) -> None:
        self.ledger, self.run_id, self.started = ledger, run_id, False

    def charge(self, bound: dict, step: int):
        new_run, self.started = not self.started, True
        return self.ledger.charge(bound, run_id=self.run_id, step=step, new_run=new_run)


@dataclass(frozen=True)
class _Record:
    r"""The public record of a descent: the noise schedule's, the clip policy's, and the μ's of
    the releases besides the gradients and norms (clip counts, preconditioners)."""

    noise: NoiseState
    clip: ClipState
    others: tuple[float, ...]


def _descent(oracle, bounds, theta, num_iterations, step_size, privacy_mu, options, generator, account):
    r"""At most ``T`` steps (``T_max`` of an adaptive schedule), each through the strategies of
    ``options``: its worst case charged before anything is drawn (``Options.step_bound``), the
    users' clipped sum of their exact gradients (``W = I``) released by the noise schedule
    (``Options.release_step``), then a projected step (post-processing)."""
    d = bounds.shape[1]
    eye = torch.eye(d, dtype=torch.float64)
    n = None
    noise, clip, track, others = NoiseState(), options.clip.initial_state(), SubspaceTrack(), ()
    iterates, released = [theta.clone()], []
    optimizer = options.step_rule.make_optimizer(theta, step_size)
    cap = options.iteration_cap(num_iterations)
    for t in range(cap):
        G = _per_user_gradients(oracle, theta, n)  # n x d, sensitive
        n = G.shape[0]
        plan = RunPlan(
            num_iterations=num_iterations,
            iteration_cap=cap,
            dim=d,
            num_users=n,
            split=options.split(privacy_mu),
            generator=generator,
        )
        spent = [*noise.norm_mus, *noise.step_mus]  # this run's norm and gradient releases, in order
        room = account.ledger.validation.remaining_mu()
        with account.charge(options.step_bound(plan, noise, spent, room), t) as meter:
            # the clip policy clips the rows of (W Y)ᵀ; with W = I and Y = Gᵀ those are the ∇ℓ_i
            out = options.release_step(
                InMemoryUsers((G.T,)),
                eye,
                plan,
                noise=noise,
                clip=clip,
                track=track,
                meter=meter,
                step=t,
                spent=spent,
                room=room,
            )
            others = (*others, *(e.mu for k, e in meter.recorded.items() if k not in ("grad", "norm")))
        noise, clip, track = out.noise, out.clip, out.track
        released.append(out.release.gradient)
        theta = projected_step(
            optimizer,
            out.release.gradient,
            bounds,  # post-processing of the release
            **options.step_rule.extras(None, noise.noise_stds[-1], track),
        )
        iterates.append(theta.clone())
        if noise.stopped:
            break
    return theta, torch.stack(iterates), released, _Record(noise, clip, others), n
