r"""Private random search with a random number of trials (Papernot & Steinke, ICLR 2022).

The number of trials ``K`` is drawn from a truncated negative binomial or a Poisson
distribution; each trial scores a uniform random ``θ`` by a Gaussian-noised mean of
clipped per-user losses (``privacy.mechanisms.GaussianScoreMechanism``); only the best
(``θ``, noisy score) pair is released. The guarantee is Papernot & Steinke's Rényi-DP
bound (``privacy.analysis.private_selection``), converted to ``(ε, δ)``-DP.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import secrets
import uuid

import numpy as np
import torch

from botorch_dp.baselines.base import BaselineGuarantee, Objective, evaluate_losses, noisy_selection, uniform_points
from botorch_dp.baselines.selection import (
    NonPrivateTrials,
    PrivateSelectionResult,
    check_max_trials,
    hidden_trials,
    padded_trials,
    timing_note,
    trials_tail,
)
from botorch_dp.privacy.analysis.private_selection import (
    DISTRIBUTIONS,
    private_selection_rdp,
    sample_num_trials,
    tnb_gamma_for_mean,
)
from botorch_dp.privacy.analysis.rdp import rdp_to_epsilon
from botorch_dp.privacy.checks import check_choice, check_delta, check_positive_int
from botorch_dp.privacy.ledger import TRAINING_RDP_ORDERS, PrivacyLedger, ValidationMechanism
from botorch_dp.privacy.ledger.events import SELECTION_PART
from botorch_dp.privacy.mechanisms import GaussianScoreMechanism
from botorch_dp.privacy.seeding import noise_generator
from botorch_dp.utils import check_bounds

__all__ = ["private_random_search"]


def private_random_search(
    objective: Objective,
    bounds: torch.Tensor,
    *,
    mean_trials: float,
    per_trial_mu: float,
    loss_clip: float,
    distribution: str = "truncated_negative_binomial",
    tnb_eta: float = 1.0,
    target_delta: float = 1e-5,
    fallback: torch.Tensor | None = None,
    seed: int | None = None,
    batch_size: int = 32,
    executor: cf.Executor | None = None,
    ledger: PrivacyLedger | None = None,
    run_id: str | None = None,
    max_trials: int | None = None,
    non_private_trials: bool = False,
) -> PrivateSelectionResult:
    r"""Private random search: release the best of ``K`` privately scored uniform points.

    ``K`` is drawn from ``distribution`` with mean ``mean_trials``. Trial ``j`` draws
    ``θ_j`` uniformly from the box (data independent) and scores it by

        ``s_j = (1/n) Σ_i min(max(ℓ_i(θ_j), 0), C) + N(0, (C/(n μ₀))²)``;

    replacing one user moves the clipped mean by at most ``C/n``, so each trial is
    ``μ₀``-GDP. The pair ``(θ_j, s_j)`` with the smallest ``s_j`` is released. The
    guarantee (``privacy.analysis.private_selection_epsilon``) needs ``K``, the other
    trials and their scores to stay hidden: the result holds the winner only
    (``baselines.selection``), and the trials exist only in the NON-PRIVATE
    ``NonPrivateTrials`` that ``non_private_trials=True`` returns. For the same reason ``K`` and
    the trial points are privacy randomness, like the noise: a known candidate sequence would
    reveal the winner's index (a lower bound on ``K`` and that earlier trials scored worse).
    With the Poisson distribution ``K = 0`` can occur; then ``fallback`` (default: the box
    centre) is returned.

    Hidden while it runs: every argument is checked before ``K`` is drawn; during the trials a
    non-finite per-user loss counts 0 (the ``"zero_user"`` policy: the clipped mean's
    sensitivity stays ``C/n``, no error), any other error (a wrong shape, an exception of the
    objective) surfaces as ``HiddenTrialError`` with one message that names no trial, and
    warnings raised inside the trials are dropped. Not hidden: the wall time, which grows with
    ``K``; ``max_trials = M`` runs ``max(K, M)`` trials (the ones after the ``K``-th are
    evaluated and scored like the others, then discarded: ``M/E[K]`` times the compute), so the
    run's length is ``M`` unless ``K > M`` (probability ``guarantee.details["p_more_than_max_trials"]``),
    and the release is the one the first ``K`` trials give (the same for the same seed).

    Args:
        objective: A ``PerUserProblem`` or a callable ``q x d -> q x n`` per-user losses.
        bounds: ``2 x d`` box.
        mean_trials: ``E[K]``, the expected number of evaluations.
        per_trial_mu: ``μ₀``, GDP parameter of one trial (see
            ``privacy.analysis.private_selection.per_trial_mu_for_epsilon``).
        loss_clip: ``C > 0``; per-user losses are clipped to ``[0, C]``.
        distribution: ``"truncated_negative_binomial"`` or ``"poisson"``.
        tnb_eta: ``η`` of the truncated negative binomial (1: geometric).
        target_delta: ``δ`` at which ``ε`` is reported.
        fallback: ``d`` tensor returned when ``K = 0`` (data independent).
        seed: ``None`` (default): ``K``, the trial points and the noise all come from OS
            entropy (``secrets``; nothing is stored), so nobody can regenerate them. An
            integer: all three are reproducible from it (tests, reproductions), with a
            ``PrivacyWarning``; the guarantee then assumes the seed stays secret.
        batch_size: Trials evaluated per call of ``objective``.
        executor: Evaluate the rows of each call on this ``concurrent.futures.Executor``
            (``evaluation.evaluate_rows``, losses in row order); ``None``: in this process.
        ledger: Optional ``PrivacyLedger`` of the validation users: the run's RDP curve (which
            depends on public parameters only) is charged under ``(run_id, "select")`` before
            ``K`` is drawn, so its budget filter refuses the run (``PrivacyBudgetExceeded``)
            before anything is released; the run then composes in RDP with the ledger's other
            releases.
        run_id: The run's id in ``ledger`` (default ``"private-rs-<uuid4 hex>"``); one the
            ledger already holds is refused (``ValueError``).
        max_trials: A public number of trials ``M`` to run whatever ``K`` is (see above);
            ``None`` (default): ``K``.
        non_private_trials: Return the NON-PRIVATE ``NonPrivateTrials`` (``K`` and every trial,
            for tests and measurements; publish only its ``release``).

    Returns:
        The ``PrivateSelectionResult``: ``theta``, ``released_score`` and ``guarantee``, nothing of
        the other trials or ``K``. With ``non_private_trials=True`` the ``NonPrivateTrials``
        (``num_evaluations = K``, ``history.points``, ``history.extras["noisy_scores"]``).
    """
    bounds = check_bounds(bounds)
    check_choice(distribution, "distribution", DISTRIBUTIONS)
    if not callable(objective):
        raise ValueError(f"objective must be callable (q x d -> q x n losses), got {type(objective).__name__}.")
    batch_size = check_positive_int(batch_size, "batch_size")
    max_trials = check_max_trials(max_trials)
    target_delta = check_delta(target_delta, "target_delta")
    fallback = _checked_fallback(fallback, bounds.shape[1])
    if executor is not None and not callable(getattr(executor, "submit", None)):
        raise ValueError(f"executor must be a concurrent.futures.Executor (with submit), got {executor!r}.")
    if ledger is not None and not isinstance(ledger, PrivacyLedger):
        raise ValueError(f"ledger must be a PrivacyLedger or None, got {type(ledger).__name__}.")
    if run_id is not None and ledger is None:
        raise ValueError("run_id names a ledger entry: pass a ledger with it (or leave run_id=None).")
    rdp = functools.partial(
        private_selection_rdp,
        per_trial_mu=per_trial_mu,
        mean_trials=mean_trials,
        distribution=distribution,
        tnb_eta=tnb_eta,
    )
    epsilon, order = rdp_to_epsilon(rdp, target_delta)  # public parameters only: checked before any trial
    timing = timing_note(max_trials, distribution=distribution, mean_trials=mean_trials, tnb_eta=tnb_eta)
    if ledger is not None:  # the whole run's curve, admitted and recorded before K is drawn
        run_id = f"private-rs-{uuid.uuid4().hex}" if run_id is None else run_id
        event = ValidationMechanism(
            f"private random search (Papernot & Steinke), K ~ {distribution} with E[K] = {mean_trials:g}, "
            f"each trial {per_trial_mu:.4g}-GDP",
            tuple(rdp(order) for order in TRAINING_RDP_ORDERS),
        )
        with ledger.charge({SELECTION_PART: event}, run_id=run_id, new_run=True) as meter:
            meter.record(SELECTION_PART, event)
    if seed is None:  # no noise generator: the mechanism draws from OS entropy
        rng = np.random.default_rng(secrets.randbits(128))
        noise_gen = None
        point_gen = torch.Generator().manual_seed(secrets.randbits(63))
    else:  # warns; the streams are derived as before issue 13, so seeded runs are unchanged
        # (reduced mod 2**63: torch seeds are int64, and child_seeds gives seeds up to 2**63)
        noise_gen = noise_generator(seed).manual_seed((int(seed) * 7919 + 1) % 2**63)
        rng = np.random.default_rng([int(seed), 0])
        point_gen = torch.Generator().manual_seed(int(seed))
    mechanism = GaussianScoreMechanism(loss_clip=loss_clip, per_trial_mu=per_trial_mu, generator=noise_gen)
    K = sample_num_trials(distribution=distribution, mean_trials=mean_trials, rng=rng, tnb_eta=tnb_eta)

    X = uniform_points(bounds, K, point_gen)
    # padding trials (max_trials): drawn after the K trials from the same streams, so those are unchanged
    padded = torch.cat([X, uniform_points(bounds, padded_trials(K, max_trials) - K, point_gen)])
    scores, n, noise_std = [], None, None
    with hidden_trials():
        for start in range(0, padded.shape[0], batch_size):
            chunk = padded[start : start + batch_size]
            losses = evaluate_losses(objective, chunk, n, executor=executor, nonfinite="zero_user")
            n = losses.shape[1]
            real = max(0, min(K - start, chunk.shape[0]))  # the chunk's rows among the first K
            for part in (losses[:real], losses[real:]):  # the K trials' noise first, as without padding
                if part.shape[0]:
                    release = mechanism.release(part)
                    scores.append(release.scores)
                    noise_std = release.noise_std
    scores_t = torch.cat(scores)[:K] if K else torch.empty(0, dtype=torch.float64)
    theta, history = noisy_selection(X, scores_t, bounds, fallback)

    details = {
        "distribution": distribution,
        "mean_trials": float(mean_trials),
        "per_trial_mu": float(per_trial_mu),
        "loss_clip": float(loss_clip),
        "noise_std": noise_std,
        "rdp_order": order,
        "ledger_run_id": run_id,
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
        description=(
            f"Papernot & Steinke (2022) private selection, K ~ {distribution} with E[K] = {mean_trials:g}, "
            f"each trial {per_trial_mu:.4g}-GDP (Gaussian on the [0, C]-clipped mean loss); "
            "Rényi-DP bound converted to (ε, δ) with Canonne-Kamath-Steinke Prop. 12. "
            f"Holds only while K and the other trials stay hidden. {timing}"
        ),
        details=details,
    )
    released = history.extras["released_score"]
    if non_private_trials:
        return NonPrivateTrials(theta, released, guarantee, num_evaluations=K, history=history)
    return PrivateSelectionResult(theta, released, guarantee)


def _checked_fallback(fallback: torch.Tensor | None, dim: int) -> torch.Tensor | None:
    r"""``fallback`` as a finite ``d`` float64 tensor (``ValueError`` naming it), checked before ``K`` is drawn."""
    if fallback is None:
        return None
    value = torch.as_tensor(fallback, dtype=torch.float64)
    if value.numel() != dim or not torch.isfinite(value).all():
        raise ValueError(f"fallback must be a finite tensor with {dim} entries, got shape {tuple(value.shape)}.")
    return value.reshape(dim)
