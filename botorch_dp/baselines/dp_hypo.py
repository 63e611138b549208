r"""DP-HyPO (Wang, Gao, Zhang, Su and Shen, NeurIPS 2023): adaptive private selection.

Like private random search, a random number ``K`` of trials is scored by Gaussian-noised
clipped mean losses (``privacy.mechanisms.GaussianScoreMechanism``) and only the best is
released; unlike it, trial ``j`` samples its point from a density built from a GP fit to
the noisy scores of the earlier trials, projected to the class of densities within a
bounded ratio of the uniform prior. The guarantee is ``privacy.analysis.dp_hypo``.
"""

from __future__ import annotations

import functools
import math
import secrets
import uuid
import warnings

import numpy as np
import torch
from botorch.models import SingleTaskGP
from botorch.models.transforms import Standardize
from gpytorch.mlls import ExactMarginalLogLikelihood
from torch import Tensor
from torch.quasirandom import SobolEngine

from botorch_dp.baselines.base import BaselineGuarantee, Objective, evaluate_losses, noisy_selection
from botorch_dp.baselines.selection import (
    NonPrivateTrials,
    PrivateSelectionResult,
    check_max_trials,
    hidden_trials,
    padded_trials,
    timing_note,
    trials_tail,
)
from botorch_dp.privacy.analysis.dp_hypo import check_ratio_bounds, dp_hypo_rdp
from botorch_dp.privacy.analysis.private_selection import DISTRIBUTIONS, sample_num_trials, tnb_gamma_for_mean
from botorch_dp.privacy.analysis.rdp import DEFAULT_RDP_ORDERS, rdp_curve_epsilon
from botorch_dp.privacy.checks import (
    check_choice,
    check_delta,
    check_greater,
    check_nonnegative,
    check_positive,
    check_positive_int,
)
from botorch_dp.privacy.ledger import TRAINING_RDP_ORDERS, PrivacyLedger, ValidationMechanism
from botorch_dp.privacy.mechanisms import GaussianScoreMechanism
from botorch_dp.privacy.seeding import noise_generator
from botorch_dp.utils import check_bounds, child_seeds

__all__ = ["LEDGER_KEY", "dp_hypo", "gp_sampling_log_weights", "project_to_ratio_class"]

#: The key of a DP-HyPO run's one validation release in the ledger (under its ``run_id``).
LEDGER_KEY = "select"

#: Iteration cap of the L-BFGS marginal-likelihood fit of the sampling GP.
FIT_MAXITER = 100
#: Log-weights are floored this far below their maximum: a zero weight has no finite
#: projection parameter, and ``e^{−1000}`` is far below any ratio bound anyway.
_LOG_WEIGHT_FLOOR = 1000.0
_BISECTION_STEPS = 200


def project_to_ratio_class(log_weights: Tensor, *, ratio_upper: float, ratio_lower: float | None = None) -> Tensor:
    r"""Project a density over ``N`` candidates to ``{p : c/N ≤ p_i ≤ C/N, Σ p_i = 1}``.

    The prior is uniform on the candidates, so the class is DP-HyPO's
    ``c ≤ π/π_0 ≤ C``. The projection is the KL projection of ``w ∝ exp(log_weights)``:
    ``p_i = clip(τ w_i, c/N, C/N)`` with the one ``τ > 0`` that makes ``Σ p_i = 1``
    (``Σ_i clip(τ w_i, ·)`` is continuous and non-decreasing in ``τ``, from ``c ≤ 1`` to
    ``C ≥ 1``; ``log τ`` is found by bisection, a loop over bisection steps, not over
    candidates). Clipping ``w/Σw`` and then renormalising would NOT do: renormalising moves
    the clipped entries off the bounds (e.g. ``w = (1, 0, 0, 0)``, ``C = 2``, ``c = 1/2``:
    clipping gives ``(1/2, 1/8, 1/8, 1/8)`` and renormalising ``(4/7, 1/7, 1/7, 1/7)``,
    whose first ratio is ``16/7 > C``). Here the constraint holds after the final
    normalisation up to float64 rounding (relative ``1e-12``).

    Args:
        log_weights: ``N`` log-weights (``−inf`` allowed: floored at ``max − 1000``;
            ``+inf`` and NaN refused).
        ratio_upper: ``C ≥ 1``.
        ratio_lower: ``c ∈ (0, 1]`` (``None``: ``1/C``).

    Returns:
        ``N`` float64 probabilities summing to 1.
    """
    upper, lower = check_ratio_bounds(ratio_upper, ratio_lower)
    z = torch.as_tensor(log_weights, dtype=torch.float64)
    if z.dim() != 1 or z.numel() == 0:
        raise ValueError(f"log_weights must be a non-empty 1-d tensor, got shape {tuple(z.shape)}.")
    if torch.isnan(z).any() or (z == math.inf).any():
        raise ValueError("log_weights must not contain NaN or +inf.")
    num = z.numel()
    if (z == -math.inf).all():
        return torch.full((num,), 1.0 / num, dtype=torch.float64)
    z = (z - z.max()).clamp(min=-_LOG_WEIGHT_FLOOR)
    lo_p, hi_p = lower / num, upper / num
    # at log τ = log(c/N) every entry is ≤ c/N (sum ≤ 1); at log(C/N) + floor every entry is C/N
    lo, hi = math.log(lo_p), math.log(hi_p) + _LOG_WEIGHT_FLOOR
    for _ in range(_BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if float(torch.exp(z + mid).clamp(lo_p, hi_p).sum()) < 1.0:
            lo = mid
        else:
            hi = mid
    p = torch.exp(z + hi).clamp(lo_p, hi_p)
    return p / p.sum()


def gp_sampling_log_weights(
    train_X: Tensor,
    train_Y: Tensor,
    candidates: Tensor,
    *,
    noise_variance: float,
    exploration: float = 2.0,
    temperature: float = 0.1,
    state: dict | None = None,
    fit: bool = True,
) -> tuple[Tensor, dict]:
    r"""Log-weights of DP-HyPO's GP sampling density over the candidates (before projection).

    A ``SingleTaskGP`` (float64, ``Standardize`` outcomes, the scores' known noise variance
    as fixed observation noise) is fit by marginal likelihood to the NOISY scores of the
    earlier trials, and the lower confidence bound ``m(x) − sqrt(β) s(x)`` of the posterior
    (scores are minimised) is turned into ``log w(x) = −(LCB(x) − min LCB)/(T · range LCB)``:
    a softmax whose sharpness ``T`` is relative to the spread of the LCB, so it does not
    depend on the loss scale.

    Privacy: the scores are outputs of the Gaussian score mechanism, already paid for, so
    fitting a GP to them (hyperparameters, ``Standardize`` statistics) is post-processing;
    DP-HyPO's bound covers any density computed from earlier outputs as long as it lies in
    the ratio class. The GP and the density must still stay hidden, like ``K`` and the
    scores they are computed from (see ``dp_hypo``).

    Args:
        train_X: ``j x d`` earlier trial points in the unit cube.
        train_Y: ``j`` noisy scores (``j ≥ 2``).
        candidates: ``N x d`` candidate points in the unit cube.
        noise_variance: Variance of the score noise (``(C/(n μ₀))²``, public).
        exploration: ``β ≥ 0`` of the LCB.
        temperature: ``T > 0``.
        state: Hyperparameters of an earlier fit (``state_dict`` of the model) to start from.
        fit: Fit the hyperparameters (else keep ``state``'s, or the defaults).

    Returns:
        ``(log_w, state)``: ``N`` float64 log-weights with maximum 0, and the model's
        hyperparameters (mean and kernel) for the next call.
    """
    X = train_X.to(torch.float64)
    Y = train_Y.to(torch.float64).reshape(-1, 1)
    Yvar = torch.full_like(Y, float(noise_variance))
    model = SingleTaskGP(X, Y, train_Yvar=Yvar, outcome_transform=Standardize(m=1))
    if state is not None:
        model.load_state_dict(state, strict=False)
    if fit:
        _fit(model)
    model.eval()
    with torch.no_grad():
        posterior = model.posterior(candidates.to(torch.float64))
        lcb = posterior.mean.reshape(-1) - math.sqrt(exploration) * posterior.variance.reshape(-1).clamp_min(0.0).sqrt()
    state = {k: v for k, v in model.state_dict().items() if k.startswith(("mean_module", "covar_module"))}
    if not torch.isfinite(lcb).all():  # a failed fit: fall back to the prior (any choice is allowed)
        return torch.zeros(candidates.shape[0], dtype=torch.float64), state
    spread = float(lcb.max() - lcb.min())
    if spread <= 0.0:
        return torch.zeros_like(lcb), state
    return -(lcb - lcb.min()) / (temperature * spread), state


def _fit(model: SingleTaskGP) -> None:
    r"""One capped L-BFGS marginal-likelihood fit; on failure the hyperparameters stay."""
    from botorch.fit import fit_gpytorch_mll

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # optimizer warnings on hard likelihoods; the fit falls back
        try:
            fit_gpytorch_mll(
                ExactMarginalLogLikelihood(model.likelihood, model),
                optimizer_kwargs={"options": {"maxiter": FIT_MAXITER, "maxfun": 2 * FIT_MAXITER}},
                max_attempts=1,
            )
        except Exception:  # pragma: no cover - keep the current hyperparameters
            pass


def _rdp(
    order: float, *, per_trial_mu: float, mean_trials: float, ratio: float, distribution: str, tnb_eta: float
) -> float:
    r"""``dp_hypo_rdp`` with ``C = R``, ``c = 1/R``, floored at 0 (a Rényi divergence is
    ``≥ 0``; the Poisson bound's ``log E[K]/(α − 1)`` is negative for ``E[K] < 1``)."""
    value = dp_hypo_rdp(
        order,
        per_trial_mu=per_trial_mu,
        mean_trials=mean_trials,
        ratio_upper=ratio,
        ratio_lower=1.0 / ratio,
        distribution=distribution,
        tnb_eta=tnb_eta,
    )
    return max(value, 0.0)


@functools.lru_cache(maxsize=16)
def _unit_candidates(dim: int, num: int, seed: int) -> Tensor:
    r"""``num x dim`` scrambled Sobol points in the unit cube (public; cached, scrambling is slow)."""
    return SobolEngine(dim, scramble=True, seed=seed).draw(num, dtype=torch.float64)


@functools.lru_cache(maxsize=64)
def _grid_epsilon(
    per_trial_mu: float, mean_trials: float, ratio: float, distribution: str, tnb_eta: float, target_delta: float
) -> tuple[float, float]:
    r"""``(ε, order)`` of ``_rdp`` on ``DEFAULT_RDP_ORDERS`` (cached: repeated runs, audits)."""
    curve = [
        _rdp(
            float(a),
            per_trial_mu=per_trial_mu,
            mean_trials=mean_trials,
            ratio=ratio,
            distribution=distribution,
            tnb_eta=tnb_eta,
        )
        for a in DEFAULT_RDP_ORDERS
    ]
    return rdp_curve_epsilon(curve, DEFAULT_RDP_ORDERS, target_delta)


def dp_hypo(
    objective: Objective,
    bounds: Tensor,
    *,
    mean_trials: float,
    per_trial_mu: float,
    loss_clip: float,
    ratio_bound: float,
    distribution: str = "truncated_negative_binomial",
    tnb_eta: float = 1.0,
    target_delta: float = 1e-5,
    num_candidates: int = 1024,
    exploration: float = 2.0,
    temperature: float = 0.1,
    refit_every: int = 1,
    density_update_every: int = 1,
    max_points: int | None = None,
    candidate_seed: int = 0,
    fallback: Tensor | None = None,
    ledger: PrivacyLedger | None = None,
    run_id: str | None = None,
    seed: int | None = None,
    max_trials: int | None = None,
    non_private_trials: bool = False,
) -> PrivateSelectionResult:
    r"""DP-HyPO with a GP sampling density: release the best of ``K`` adaptively sampled trials.

    Candidates: ``num_candidates`` scrambled Sobol points in the box (public, from
    ``candidate_seed``); the prior ``π_0`` is uniform on them. ``K`` is drawn from
    ``distribution`` with mean ``mean_trials``. Trial ``j`` samples a candidate from
    ``π_j``: the prior for the first two trials (and always when ``ratio_bound = 1``),
    afterwards the GP density of ``gp_sampling_log_weights`` fit to the earlier trials'
    noisy scores (recomputed every ``density_update_every`` trials), projected to ``1/R ≤ π_j/π_0 ≤ R``
    (``R = ratio_bound``,
    ``project_to_ratio_class``). The trial is scored by the Gaussian score mechanism,
    ``s_j = (1/n) Σ_i min(max(ℓ_i(θ_j), 0), C) + N(0, (C/(n μ₀))²)`` (``μ₀``-GDP), and the
    pair ``(θ_j, s_j)`` with the smallest ``s_j`` is released. ``ratio_bound = 1`` is private
    random search over the candidates (the Papernot–Steinke bound exactly).

    Privacy: ``π_j`` depends only on earlier noisy scores, so the whole run is covered by
    DP-HyPO's Rényi-DP bound over the per-trial curve ``α μ₀²/2``
    (``privacy.analysis.dp_hypo.dp_hypo_rdp`` with ``C = R``, ``c = 1/R``), converted to
    ``(ε, δ)`` with ``rdp_curve_epsilon`` on ``DEFAULT_RDP_ORDERS``, the ledger's grid. The
    bound needs ``K``, the other trials, their scores and the sampling densities to stay
    hidden: the result holds the winner only, and the trials exist only in the NON-PRIVATE
    ``NonPrivateTrials`` that ``non_private_trials=True`` returns. ``K`` and the candidate
    draws are privacy randomness (from OS entropy unless ``seed`` is given), like the noise.

    Hidden while it runs (as ``private_random_search``): arguments are checked before ``K`` is
    drawn; a non-finite per-user loss counts 0 (``"zero_user"``); any other error during the
    trials is one ``HiddenTrialError``; their warnings are dropped. The wall time grows with
    ``K``; ``max_trials = M`` runs ``max(K, M)`` trials of the same algorithm (density updates
    included) and selects among the first ``K``, so the release equals the one without it (for
    the same seed) and the run's length is ``M`` unless ``K > M``, at ``M/E[K]`` times the compute.

    Ledger: with ``ledger``, the run's RDP curve is charged to the VALIDATION side (the
    scores are per-user validation losses) BEFORE the first evaluation, under
    ``(run_id, "select")`` with ``PrivacyLedger.charge``: the curve depends on public
    parameters only, so the ledger's validation budget filter can refuse the run
    (``PrivacyBudgetExceeded``) before anything is released. A ``run_id`` the ledger
    already holds is refused (``ValueError``): a second run is charged under its own id. The bound is no μ-GDP (the
    ``log E[K]/(α − 1)`` term makes no ``μ`` dominate it) and charging each trial as a
    μ₀-GDP step would publish ``K`` (and void the selection bound), so the ledger composes
    it in RDP with the other validation releases (a DP-GIBO run's Gaussian steps on the
    same users, say): ``ledger.validation.epsilon(δ)`` then covers both, the μ budget ``B``
    holds as ``(α, α B²/2)``-RDP at every grid order, and ``ledger.validation.mu()`` raises
    (no μ covers the run). Nothing is charged to the training side.

    Args:
        objective: A ``PerUserProblem`` or a callable ``q x d -> q x n`` per-user losses.
        bounds: ``2 x d`` box.
        mean_trials: ``E[K]``.
        per_trial_mu: ``μ₀``, GDP parameter of one score.
        loss_clip: ``C > 0``; per-user losses are clipped to ``[0, C]``.
        ratio_bound: ``R ≥ 1``, finite: ``π_j/π_0 ∈ [1/R, R]``.
        distribution: ``"truncated_negative_binomial"`` or ``"poisson"``.
        tnb_eta: ``η`` of the truncated negative binomial (1: geometric).
        target_delta: ``δ`` at which ``ε`` is reported.
        num_candidates: ``N ≥ 2`` Sobol candidates.
        exploration: ``β ≥ 0`` of the LCB.
        temperature: ``T > 0`` of the softmax (relative to the LCB's spread).
        refit_every: Fit the GP's hyperparameters at a density update at least
            ``refit_every`` trials after the last fit (the first update always fits); in
            between the GP keeps the last fit and only conditions on the new scores (fits
            dominate the run time).
        density_update_every: Recompute the sampling density at trial 2 and every
            ``density_update_every`` trials after it; the trials in between draw from the
            last density (a batch of draws, as a batched BO loop would make). Any density
            in the ratio class computed from earlier scores is covered by the bound, so
            this changes the cost (``K / density_update_every`` GP updates instead of
            ``K``), not the guarantee.
        max_points: The density's GP sees only the last ``max_points`` trials (its fit and
            its posterior; ``None``: all). Its cost and memory grow as ``j³`` and ``j²`` in the
            trials ``j`` it sees, and ``K`` has a long tail (a geometric ``K`` with mean 2525
            came out at 9007 and the GP on all of them used 19 GB); the bound does not change.
        candidate_seed: Seed of the (public) Sobol scrambling.
        fallback: ``d`` tensor returned when ``K = 0`` (Poisson; default: the box centre).
        ledger: Optional ``PrivacyLedger`` to charge (see above).
        run_id: The ledger entry's id (default ``"dp-hypo-<uuid4 hex>"``); one the ledger
            already holds is refused.
        seed: ``None`` (default): ``K``, the candidate draws and the noise come from OS
            entropy. An integer: all three are reproducible from it (tests), with a
            ``PrivacyWarning``.
        max_trials: A public number of trials ``M`` to run whatever ``K`` is; ``None``: ``K``.
        non_private_trials: Return the NON-PRIVATE ``NonPrivateTrials`` (tests, measurements).

    Returns:
        The ``PrivateSelectionResult`` (``theta``, ``released_score``, ``guarantee``). With
        ``non_private_trials=True`` the ``NonPrivateTrials``: ``num_evaluations`` (= ``K``),
        ``history.points``, ``history.extras["noisy_scores"]`` and ``history.extras["max_ratio"]``
        (the largest ``π_j/π_0`` of each trial, a check of the constraint).
    """
    bounds = check_bounds(bounds)
    check_choice(distribution, "distribution", DISTRIBUTIONS)
    if not callable(objective):
        raise ValueError(f"objective must be callable (q x d -> q x n losses), got {type(objective).__name__}.")
    max_trials = check_max_trials(max_trials)
    mean_trials = check_positive(mean_trials, "mean_trials", allow_inf=False)
    if distribution == "truncated_negative_binomial":
        mean_trials = check_greater(mean_trials, "mean_trials", 1.0)
        tnb_eta = check_greater(tnb_eta, "tnb_eta", -1.0)
    per_trial_mu = check_positive(per_trial_mu, "per_trial_mu", allow_inf=False)
    loss_clip = check_positive(loss_clip, "loss_clip", allow_inf=False)
    ratio = check_positive(ratio_bound, "ratio_bound", allow_inf=False)
    if ratio < 1.0:
        raise ValueError(f"ratio_bound must be >= 1 (the density ratio bound R in [1/R, R]), got {ratio!r}.")
    target_delta = check_delta(target_delta, "target_delta")
    num_candidates = check_positive_int(num_candidates, "num_candidates")
    if num_candidates < 2:
        raise ValueError(f"num_candidates must be at least 2, got {num_candidates}.")
    exploration = check_nonnegative(exploration, "exploration", allow_inf=False)
    temperature = check_positive(temperature, "temperature", allow_inf=False)
    refit_every = check_positive_int(refit_every, "refit_every")
    density_update_every = check_positive_int(density_update_every, "density_update_every")
    if max_points is not None:
        max_points = check_positive_int(max_points, "max_points")
        if max_points < 2:
            raise ValueError(f"max_points must be at least 2 (or None), got {max_points}.")
    d = bounds.shape[1]
    if fallback is not None:
        fallback = torch.as_tensor(fallback, dtype=torch.float64)
        if fallback.numel() != d or not torch.isfinite(fallback).all():
            raise ValueError(f"fallback must be a finite tensor with {d} entries, got shape {tuple(fallback.shape)}.")
        fallback = fallback.reshape(d)
    if ledger is not None and not isinstance(ledger, PrivacyLedger):
        raise ValueError(f"ledger must be a PrivacyLedger or None, got {type(ledger).__name__}.")
    if run_id is not None and ledger is None:
        raise ValueError("run_id names a ledger entry: pass a ledger with it (or leave run_id=None).")

    # the guarantee depends on public parameters only: computed (and charged) before any release
    rdp = functools.partial(
        _rdp,
        per_trial_mu=per_trial_mu,
        mean_trials=mean_trials,
        ratio=ratio,
        distribution=distribution,
        tnb_eta=tnb_eta,
    )
    epsilon, order = _grid_epsilon(per_trial_mu, mean_trials, ratio, distribution, tnb_eta, target_delta)
    description = (
        f"DP-HyPO (Wang et al. 2023), K ~ {distribution} with E[K] = {mean_trials:g}, density ratio in "
        f"[1/{ratio:g}, {ratio:g}], each trial {per_trial_mu:.4g}-GDP (Gaussian on the [0, {loss_clip:g}]-clipped "
        "mean validation loss)"
    )
    if ledger is not None:  # the whole run's curve, admitted and recorded before anything is drawn
        run_id = f"dp-hypo-{uuid.uuid4().hex}" if run_id is None else run_id
        event = ValidationMechanism(description, tuple(rdp(order) for order in TRAINING_RDP_ORDERS))
        with ledger.charge({LEDGER_KEY: event}, run_id=run_id, new_run=True) as meter:
            meter.record(LEDGER_KEY, event)

    if seed is None:  # no noise generator: the mechanism draws from OS entropy
        rng = np.random.default_rng(secrets.randbits(128))
        noise_gen = None
        choice_gen = torch.Generator().manual_seed(secrets.randbits(63))
    else:  # warns
        noise_gen = noise_generator(seed)
        rng = np.random.default_rng([int(seed), 1])
        choice_gen = torch.Generator().manual_seed(child_seeds([int(seed), 2], 1)[0])
    mechanism = GaussianScoreMechanism(loss_clip=loss_clip, per_trial_mu=per_trial_mu, generator=noise_gen)
    K = sample_num_trials(distribution=distribution, mean_trials=mean_trials, rng=rng, tnb_eta=tnb_eta)

    unit = _unit_candidates(d, num_candidates, int(candidate_seed)).clone()
    candidates = bounds[0] + unit * (bounds[1] - bounds[0])
    indices: list[int] = []
    scores: list[float] = []
    max_ratio: list[float] = []
    n: int | None = None
    noise_std: float | None = None
    gp_state, last_fit = None, None
    p = torch.full((num_candidates,), 1.0 / num_candidates, dtype=torch.float64)  # the prior
    with hidden_trials():  # the trials after the K-th (max_trials) run the same algorithm, then are discarded
        for j in range(padded_trials(K, max_trials)):
            if ratio > 1.0 and j >= 2 and (j - 2) % density_update_every == 0:
                if noise_std is None:  # set by trial 0's release
                    raise RuntimeError("The density update needs the released scores' noise std; none was released.")
                fit = last_fit is None or j - last_fit >= refit_every
                first = 0 if max_points is None else max(0, j - max_points)
                log_w, gp_state = gp_sampling_log_weights(
                    unit[torch.tensor(indices[first:])],
                    torch.tensor(scores[first:], dtype=torch.float64),
                    unit,
                    noise_variance=max(noise_std**2, 1e-6 * loss_clip**2),
                    exploration=exploration,
                    temperature=temperature,
                    state=gp_state,
                    fit=fit,
                )
                last_fit = j if fit else last_fit
                p = project_to_ratio_class(log_w, ratio_upper=ratio, ratio_lower=1.0 / ratio)
            cumulative = torch.cumsum(p, 0)
            u = torch.rand(1, generator=choice_gen, dtype=torch.float64) * cumulative[-1]
            index = min(int(torch.searchsorted(cumulative, u)), num_candidates - 1)
            losses = evaluate_losses(objective, candidates[index : index + 1], n, nonfinite="zero_user")
            n = losses.shape[1]
            release = mechanism.release(losses)
            indices.append(index)
            scores.append(float(release.scores[0]))
            max_ratio.append(float(p.max()) * num_candidates)
            noise_std = release.noise_std

    timing = timing_note(max_trials, distribution=distribution, mean_trials=mean_trials, tnb_eta=tnb_eta)
    X = candidates[torch.tensor(indices[:K], dtype=torch.long)] if K else torch.empty(0, d, dtype=torch.float64)
    theta, history = noisy_selection(
        X, torch.tensor(scores[:K], dtype=torch.float64), bounds, fallback, {"max_ratio": torch.tensor(max_ratio[:K])}
    )

    details = {
        "distribution": distribution,
        "mean_trials": float(mean_trials),
        "per_trial_mu": float(per_trial_mu),
        "loss_clip": float(loss_clip),
        "ratio_bound": float(ratio),
        "num_candidates": num_candidates,
        "candidate_seed": int(candidate_seed),
        "noise_std": noise_std,
        "rdp_order": order,
        "ledger_run_id": run_id if ledger is not None else None,
        "max_trials": max_trials,
        "timing": timing,
        "p_more_than_max_trials": trials_tail(
            max_trials, distribution=distribution, mean_trials=mean_trials, tnb_eta=tnb_eta
        ),
    }
    if distribution == "truncated_negative_binomial":
        details.update(tnb_eta=float(tnb_eta), tnb_gamma=tnb_gamma_for_mean(eta=tnb_eta, mean_trials=mean_trials))
    guarantee = BaselineGuarantee(
        epsilon=epsilon,
        delta=target_delta,
        mu=None,
        description=description + "; Rényi-DP bound (privacy.analysis.dp_hypo) converted to (ε, δ) on "
        "DEFAULT_RDP_ORDERS, for this run alone (with a ledger, its validation.epsilon composes it with "
        "the other validation releases). Holds only while K, the other trials and the sampling densities "
        f"stay hidden. {timing}",
        details=details,
    )
    released = history.extras["released_score"]
    if non_private_trials:
        return NonPrivateTrials(theta, released, guarantee, num_evaluations=K, history=history)
    return PrivateSelectionResult(theta, released, guarantee)
