r"""What a DP-GIBO run reports and checks, from explicit arguments (its config, strategies,
``RunState``, ledger and ``RunPlan``; never the run object): the guarantee, the ``PrivateRelease``
with each strategy's record (and opt-in NON-PRIVATE diagnostics), and the public checks of a
told batch."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from botorch_dp.distributed.partitions import PartitionedObjective
from botorch_dp.optim.config import check_per_user_losses
from botorch_dp.optim.options import RunPlan
from botorch_dp.optim.privacy_target import DEFAULT_TARGET_DELTA
from botorch_dp.optim.public_checks import (
    LARGE_DELTA_OPT_IN,
    NOISE_DOMINATED_OPT_IN,
    delta_caution,
    enforce,
    gradient_noise_caution,
    warn_noise,
)
from botorch_dp.optim.results import DPGIBOResult, NonPrivateDiagnostics, PrivacyGuarantee, PrivateRelease
from botorch_dp.optim.state import RunState
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.privacy.checks import check_told_batch
from botorch_dp.privacy.statement import guarantee_statement

__all__ = [
    "budget_cautions",
    "check_known_users",
    "checked_batch",
    "checked_partitioned",
    "guarantee",
    "release_records",
    "result",
]

#: What the checks of a first batch read to plan its noise: ``n`` to the run's ``RunPlan``.
PlanFor = Callable[[int], RunPlan]


def _last_bound(options: Any, state: RunState) -> float:
    r"""The bound the latest step was clipped at (the first step's before any)."""
    if state.clip.bounds and state.iteration:
        return state.clip.bounds[state.iteration - 1]
    return options.clip.current(state.clip)


def guarantee(
    config: Any, options: Any, state: RunState, ledger: Any, plan: RunPlan, delta: float | None = None
) -> PrivacyGuarantee:
    r"""The validation-data guarantee of the steps taken so far.

    ``mu`` and ``epsilon`` are the ledger's, all runs on it; when the ledger's validation side
    also holds a release known only by its RDP curve (a DP-HyPO run on the same users), no μ
    covers the composition: ``mu`` is NaN and ``epsilon`` the ledger's RDP conversion. The noise
    is the latest gradient release's (0 before any), read off ``plan`` (the run's at ``n``, or
    at 1 before ``n`` is known)."""
    holds = options.fitting.holds
    mu, rdp = math.inf, False
    if holds:
        try:
            mu = ledger.validation_mu()
        except ValueError:  # the ledger's validation side holds an RDP entry: no μ covers it
            mu, rdp = math.nan, True
    delta = config.target_delta if delta is None else delta
    epsilon = ledger.validation_epsilon(delta) if rdp else gdp_epsilon(mu, delta)
    std, multiplier = options.noise.noise(plan, state.noise, _last_bound(options, state))
    return PrivacyGuarantee(
        mu=mu,
        epsilon=epsilon,
        delta=delta,
        noise_std=std if state.iteration else 0.0,
        noise_multiplier=multiplier,
        num_steps=state.iteration,
        holds=holds,
        cautions=budget_cautions(config, state.num_users),
    )


def release_records(options: Any, state: RunState, plan: RunPlan) -> dict[str, Any]:
    r"""Each strategy's public record of the run (``PrivateRelease.records``), made by the strategy."""
    s = state
    return {
        "clip": options.clip.record(s.clip),
        "noise": options.noise.record(s.noise),
        "projection": options.projection.record(s.track),
        "step_rule": options.step_rule.record(plan, s.track),
        "selection": options.selection.record(len(s.iterates), s.noise.noisy_norms, s.selected, s.selection_scores),
    }


def result(
    config: Any, options: Any, state: RunState, ledger: Any, plan: RunPlan, *, run_id: str, dim: int
) -> DPGIBOResult:
    r"""The private release (``plan``: as for ``guarantee``) and, if
    ``config.record_non_private_diagnostics``, NON-PRIVATE diagnostics."""
    s = state
    records = release_records(options, s, plan)
    selected = records["selection"].index
    release = PrivateRelease(
        theta=(s.theta if selected is None else s.iterates[selected]).clone(),
        iterates=torch.stack(s.iterates),
        evaluation_points=s.X.clone(),
        batch_sizes=list(s.batch_sizes),
        posterior_traces=list(s.traces),
        released_gradients=s.released_matrix(dim),
        guarantee=guarantee(config, options, s, ledger, plan),
        records=records,
    )
    diagnostics = None
    if config.record_non_private_diagnostics:
        diagnostics = NonPrivateDiagnostics.from_releases(list(s.diagnostics), dim)
    return DPGIBOResult(
        release=release,
        diagnostics=diagnostics,
        statement=guarantee_statement(ledger, release.guarantee.delta),
        records=tuple(ledger.validation_records(run_id)),
    )


def _check_pending(state: RunState, done: bool, call: str) -> Tensor:
    r"""The asked points; ``RuntimeError`` when nothing is asked (``call``: what to call first)."""
    if state.pending is None:
        if done:
            raise RuntimeError(f"The run is finished ({state.iteration} iterations); nothing to tell.")
        raise RuntimeError(f"Call ask() before {call}().")
    return state.pending


def checked_partitioned(
    points: Any,
    partitions: PartitionedObjective,
    *,
    config: Any,
    options: Any,
    state: RunState,
    plan_for: PlanFor,
    dim: int,
    done: bool,
) -> Tensor:
    r"""The asked points, for users held in ``partitions``; ``RuntimeError`` (losses held here, no
    pending ask) or ``ValueError`` (other points, another ``n``, sensitive fitting) before
    anything is evaluated or released (``done``: whether the run is finished)."""
    s = state
    if s.users is not None:
        raise RuntimeError("This run's losses are held in this process: use tell().")
    if not options.fitting.holds:
        raise ValueError(
            "partitions: partitioned users do not support hyperparameter_fit or a standardizing model "
            "(they need the raw losses, which never leave the partitions)."
        )
    pending = _check_pending(s, done, "tell_partitioned")
    points = torch.as_tensor(points).detach().to(pending.device, torch.float64)
    if points.shape != pending.shape or not torch.allclose(points, pending):
        raise ValueError("tell_partitioned() must receive the points returned by the last ask().")
    n = partitions.num_users
    if s.num_users is None:
        check_per_user_losses(n, config.privacy_mu)
        _first_batch_checks(config, options, s, plan_for(n), dim)
    elif n != s.num_users:
        raise ValueError(f"partitions hold {n} users, earlier steps had {s.num_users}; n must stay fixed.")
    return pending.clone()


def checked_batch(
    points: Any,
    losses: Any,
    *,
    config: Any,
    options: Any,
    state: RunState,
    plan_for: PlanFor,
    dim: int,
    done: bool,
) -> tuple[Tensor, Tensor]:
    r"""The asked points and a float64 COPY of the told losses on the points' device (detached, so a caller reusing
    its buffer cannot change what is stored), or a ``RuntimeError`` (no pending ask) /
    ``ValueError`` naming the problem; nothing changes before this returns."""
    s = state
    pending = _check_pending(s, done, "tell")
    points, losses = check_told_batch(points, losses, pending, s.num_users, config.nonfinite_losses)
    if s.num_users is None:  # the first batch fixes n: one loss per user, n >= 2
        check_per_user_losses(losses.shape[1], config.privacy_mu)
        _first_batch_checks(config, options, s, plan_for(losses.shape[1]), dim)
    return points, losses


def _first_batch_checks(config: Any, options: Any, state: RunState, plan: RunPlan, dim: int) -> None:
    r"""The checks that need ``n`` (``plan.num_users``), when the first batch is told (before its
    release), or before the first evaluation when ``run``'s objective knows ``n``
    (``check_known_users``): ``δ ≥ 1/n`` and a noise-dominated budget are refused unless opted in
    (``budget_cautions``), a first step that is mostly noise is warned (``optim.public_checks``;
    public)."""
    c, o, n = config, options, plan.num_users
    if math.isinf(c.privacy_mu):
        return
    for caution, opt_in, allow, because in _cautions(c, n):
        enforce(caution, opt_in, allow, because=because, stacklevel=6)
    bound = o.clip.current(state.clip)
    noise_std, _ = o.noise.noise(plan, state.noise, bound)
    warn_noise(noise_std, o.projection.released_dim(dim), bound, n, c.privacy_mu, stacklevel=5)


def check_known_users(config: Any, n: int) -> None:
    r"""Refuse, before anything is evaluated, what the first batch's checks would refuse at ``n`` (for an
    objective that knows its ``n``; the caller skips it once the run has its ``n``). Warnings wait for
    the first batch."""
    if not math.isinf(config.privacy_mu):
        check_per_user_losses(n, config.privacy_mu)
        for caution, opt_in, allow, _ in _cautions(config, n):
            if not allow:
                enforce(caution, opt_in, allow)


def _cautions(config: Any, n: int) -> list[tuple[str, str, bool, str | None]]:
    r"""``(caution, opt-in, allowed, why it runs)`` of each public check of ``config`` at ``n`` that fires."""
    c = config
    if math.isinf(c.privacy_mu):
        return []
    found: list[tuple[str, str, bool, str | None]] = []
    # a privacy_mu run at the default target_delta: the run is μ-GDP and δ only where its ε is read (warned)
    default_delta = c.epsilon is None and c.target_delta == DEFAULT_TARGET_DELTA
    caution = delta_caution(c.target_delta, n, argument="delta" if c.epsilon is not None else "target_delta")
    if caution is not None:
        because = "target_delta is the default of a privacy_mu run" if default_delta else None
        found.append((caution, LARGE_DELTA_OPT_IN, c.unsafe_allow_large_delta or default_delta, because))
    mu = c.privacy_mu
    argument, value = ("epsilon", c.epsilon) if c.epsilon is not None else ("privacy_mu", mu)

    def needed(factor: float) -> float:
        return mu * factor if c.epsilon is None else gdp_epsilon(mu * factor, c.delta)

    caution = gradient_noise_caution(
        n,
        c.mu_split.gradient_mu,
        c.options.projection.released_dim(c.bounds.shape[-1]),
        argument=argument,
        value=value,
        needed=needed,
    )
    if caution is not None:
        found.append((caution, NOISE_DOMINATED_OPT_IN, c.allow_noise_dominated, None))
    return found


def budget_cautions(config: Any, num_users: int | None) -> tuple[str, ...]:
    r"""The warnings a run of ``config`` on ``num_users`` users carries (its checks' opted-in or
    warned cautions; public: the settings and ``n``). Empty before ``n`` is known."""
    if not num_users:
        return ()
    return tuple(caution for caution, _, allow, _ in _cautions(config, num_users) if allow)
