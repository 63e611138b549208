r"""What a DP-GIBO run reports, read off its ``RunState``, its strategies and its ledger: the
guarantee, the ``PrivateRelease`` (and opt-in NON-PRIVATE diagnostics); and the small checks
and arithmetic of the facade that do not need its internals."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch
from torch import Tensor

from botorch_dp.distributed.partitions import PartitionedObjective
from botorch_dp.optim.batch_search import local_bounds, moved_batch
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
from botorch_dp.optim.selection import SELECTION_KEY
from botorch_dp.optim.state import Run
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.privacy.checks import check_told_batch
from botorch_dp.privacy.ledger import parse_release_key
from botorch_dp.privacy.statement import guarantee_statement

__all__ = [
    "budget_cautions",
    "check_known_users",
    "check_next_release",
    "step_bound",
    "checked_batch",
    "checked_partitioned",
    "guarantee",
    "replace",
    "result",
    "spent",
]

replace = dataclasses.replace


def _last_bound(opt: Run) -> float:
    r"""The bound the latest step was clipped at (the first step's before any)."""
    s = opt.state
    if s.clip.bounds and s.iteration:
        return s.clip.bounds[s.iteration - 1]
    return opt.options.clip.current(s.clip)


def guarantee(opt: Run, delta: float | None = None) -> PrivacyGuarantee:
    r"""The validation-data guarantee of the steps taken so far.

    ``mu`` and ``epsilon`` are the ledger's, all runs on it; when the ledger's validation side
    also holds a release known only by its RDP curve (a DP-HyPO run on the same users), no μ
    covers the composition: ``mu`` is NaN and ``epsilon`` the ledger's RDP conversion. The noise
    is the latest gradient release's (0 before any)."""
    c, s = opt.config, opt.state
    holds = opt.options.fitting.holds
    mu, rdp = math.inf, False
    if holds:
        try:
            mu = opt.ledger.validation.mu()
        except ValueError:  # the ledger's validation side holds an RDP entry: no μ covers it
            mu, rdp = math.nan, True
    delta = c.target_delta if delta is None else delta
    epsilon = opt.ledger.validation.epsilon(delta) if rdp else gdp_epsilon(mu, delta)
    std, multiplier = opt.options.noise.noise(opt.plan(s.num_users or 1), s.noise, _last_bound(opt))
    return PrivacyGuarantee(
        mu=mu,
        epsilon=epsilon,
        delta=delta,
        noise_std=std if s.iteration else 0.0,
        noise_multiplier=multiplier,
        num_steps=s.iteration,
        holds=holds,
        cautions=budget_cautions(c, s.num_users),
    )


def result(opt: Run) -> DPGIBOResult:
    r"""The private release and, if ``config.record_non_private_diagnostics``, NON-PRIVATE diagnostics."""
    s = opt.state
    selected = opt.selected_index()
    precond_mu = opt.plan().split.precond_mu
    release = PrivateRelease(
        theta=(s.theta if selected is None else s.iterates[selected]).clone(),
        iterates=torch.stack(s.iterates),
        evaluation_points=s.X.clone(),
        batch_sizes=list(s.batch_sizes),
        posterior_traces=list(s.traces),
        released_gradients=s.released_matrix(opt.dim),
        guarantee=guarantee(opt),
        step_mus=list(s.noise.step_mus),
        noise_stds=list(s.noise.noise_stds),
        noisy_norms=list(s.noise.noisy_norms),
        norm_mus=list(s.noise.norm_mus),
        selected_index=selected,
        selection_scores=None if s.selection_scores is None else s.selection_scores.clone(),
        subspace_bases=list(s.track.bases),
        released_coordinates=list(s.track.coordinates),
        released_preconditioners=list(s.track.preconditioners),
        preconditioner_mus=(
            [precond_mu / math.sqrt(opt.config.iteration_cap)] * len(s.track.preconditioners)
            if precond_mu is not None
            else []
        ),
        preconditioner_noise_stds=list(s.track.preconditioner_noise_stds),
        clip_bounds=list(s.clip.bounds),
        clip_counts=list(s.clip.counts),
    )
    diagnostics = None
    if opt.config.record_non_private_diagnostics:
        diagnostics = NonPrivateDiagnostics.from_releases(list(s.diagnostics), opt.dim)
    return DPGIBOResult(
        release=release,
        diagnostics=diagnostics,
        statement=guarantee_statement(opt.ledger, release.guarantee.delta),
        records=tuple(opt.ledger.validation.records(opt.run_id)),
    )


def checked_partitioned(opt: Run, points: Any, partitions: PartitionedObjective) -> Tensor:
    r"""The asked points, for users held in ``partitions``; ``RuntimeError`` (losses held here, no
    pending ask) or ``ValueError`` (other points, another ``n``, sensitive fitting) before
    anything is evaluated or released."""
    s = opt.state
    if s.users is not None:
        raise RuntimeError("This run's losses are held in this process: use tell().")
    if not opt.options.fitting.holds:
        raise ValueError(
            "partitions: partitioned users do not support hyperparameter_fit or a standardizing model "
            "(they need the raw losses, which never leave the partitions)."
        )
    if s.pending is None:
        if opt.is_done:
            raise RuntimeError(f"The run is finished ({s.iteration} iterations); nothing to tell.")
        raise RuntimeError("Call ask() before tell_partitioned().")
    points = torch.as_tensor(points).detach().to(s.pending.device, torch.float64)
    if points.shape != s.pending.shape or not torch.allclose(points, s.pending):
        raise ValueError("tell_partitioned() must receive the points returned by the last ask().")
    n = partitions.num_users
    if s.num_users is None:
        check_per_user_losses(n, opt.config.privacy_mu)
        _first_batch_checks(opt, n)
    elif n != s.num_users:
        raise ValueError(f"partitions hold {n} users, earlier steps had {s.num_users}; n must stay fixed.")
    return s.pending.clone()


def spent(opt: Run) -> list[float]:
    r"""The μ of every norm and gradient release the run has recorded, in order (an adaptive
    schedule's spent budget; a release made twice, e.g. by a copy of the run, counts twice)."""
    return [
        r.event.mu for r in opt.ledger.validation.records(opt.run_id) if parse_release_key(r.key)[1] in ("norm", "grad")
    ]


def checked_batch(opt: Run, points: Any, losses: Any) -> tuple[Tensor, Tensor]:
    r"""The asked points and a float64 COPY of the told losses on the points' device (detached, so a caller reusing
    its buffer cannot change what is stored), or a ``RuntimeError`` (no pending ask) /
    ``ValueError`` naming the problem; nothing changes before this returns."""
    s = opt.state
    if s.pending is None:
        if opt.is_done:
            raise RuntimeError(f"The run is finished ({s.iteration} iterations); nothing to tell.")
        raise RuntimeError("Call ask() before tell().")
    points, losses = check_told_batch(points, losses, s.pending, s.num_users, opt.config.nonfinite_losses)
    if s.num_users is None:  # the first batch fixes n: one loss per user, n >= 2
        check_per_user_losses(losses.shape[1], opt.config.privacy_mu)
        _first_batch_checks(opt, losses.shape[1])
    return points, losses


def _first_batch_checks(opt: Run, n: int) -> None:
    r"""The checks that need ``n``, when the first batch is told (before its release), or before the
    first evaluation when ``run``'s objective knows ``n`` (``check_known_users``): ``δ ≥ 1/n`` and a
    noise-dominated budget are refused unless opted in (``budget_cautions``), a first step that is
    mostly noise is warned (``optim.public_checks``; public)."""
    c, o, s = opt.config, opt.options, opt.state
    if math.isinf(c.privacy_mu):
        return
    for caution, opt_in, allow, because in _cautions(c, n):
        enforce(caution, opt_in, allow, because=because, stacklevel=6)
    bound = o.clip.current(s.clip)
    noise_std, _ = o.noise.noise(opt.plan(n), s.noise, bound)
    warn_noise(noise_std, o.projection.released_dim(opt.dim), bound, n, c.privacy_mu, stacklevel=5)


def check_known_users(opt: Run, n: int) -> None:
    r"""Refuse, before anything is evaluated, what the first batch's checks would refuse at ``n`` (for an
    objective that knows its ``n``; nothing once the run has its ``n``). Warnings wait for the first batch."""
    if opt.state.num_users is None and not math.isinf(opt.config.privacy_mu):
        check_per_user_losses(n, opt.config.privacy_mu)
        for caution, opt_in, allow, _ in _cautions(opt.config, n):
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


def step_bound(opt: Run, plan: Any) -> tuple[dict[str, Any], list[float], float]:
    r"""The next step's worst case (``Options.step_bound``, public) with what it reads: the run's
    spent norm and gradient μ's and the ledger's room."""
    spent_mus, room = spent(opt), opt.ledger.validation.remaining_mu()
    return opt.options.step_bound(plan, opt.state.noise, spent_mus, room), spent_mus, room


def check_next_release(opt: Run) -> None:
    r"""Refuse the next release's worst case (``PrivacyBudgetExceeded``) before its points are
    searched for or evaluated, so that a ledger which cannot pay for one more step costs the user
    no evaluation: the step's bound (``Options.step_bound``: ``n`` does not enter it, so 1 stands
    in before the first ``tell``) or the evaluated selection's charge. Public: settings and the
    ledger only. ``tell`` charges the same bound again (other runs may spend in between)."""
    s, o = opt.state, opt.options
    if opt.steps_done:
        bound, what = {SELECTION_KEY: o.selection.event()}, f"the selection of run {opt.run_id!r}"
    else:
        bound = step_bound(opt, opt.plan(s.num_users or 1))[0]
        what = f"step {s.iteration} of run {opt.run_id!r}"
    opt.ledger.validation.check_admits(bound, f"{what} (checked before its points are evaluated)")


def run_plan(opt: Run, num_users: int | None = None) -> RunPlan:
    r"""The run's public ``RunPlan`` (for ``num_users``, default the run's ``n``)."""
    c = opt.config
    return RunPlan(
        num_iterations=c.num_iterations,
        iteration_cap=c.iteration_cap,
        dim=opt.dim,
        num_users=num_users or opt.state.num_users or 0,
        split=opt.options.split(c.privacy_mu),
        generator=opt.generators.noise,
        chunk_size=c.user_chunk_size,
        diagnostics=c.record_non_private_diagnostics,
    )


def next_batch(opt: Run) -> Tensor:
    r"""The batch rule's next points around ``θ_t`` (public: the GP's inputs and the iterates), on
    the gradient-information acquisition in the projection's coordinates (the same public ``Ṽ_t``
    as the step computes), warm-started from the previous batch moved by the step."""
    s, o, c = opt.state, opt.options, opt.config
    return o.batches.select(
        s.gp,
        s.theta,
        local_bounds(s.theta, opt.search_radius, opt.bounds),
        opt.generators.search,
        default=o.projection.default_batch_size(opt.dim),
        num_restarts=c.num_restarts,
        basis=o.projection.acquisition_basis(s.theta, s.gp, s.track),
        raw_samples=c.raw_samples,
        previous=moved_batch(s.X, s.batch_sizes, s.iterates),
    )
