r"""``tune``: the one call that tunes a model's hyperparameters at a total ``(ε, δ)``.

``tune(objective, space, epsilon=..., delta=...)`` runs DP-GIBO over the space's continuous
and integer hyperparameters (θ's coordinates). With categorical hyperparameters it
**enumerates** their configurations: one DP-GIBO run per configuration, each with an equal
share of the budget, then a private choice among the runs, the Gaussian score mechanism on
each run's final point (the clipped mean validation loss, ``C/n`` sensitivity) and the lowest
noisy score wins. Every release is charged to one ledger through the charge protocol, and the
split is exact in Gaussian DP: with ``K`` configurations and a selection share ``f``,

    μ² = K μ_run² + K μ_score²,   μ_run = μ √((1 − f)/K),   μ_score = μ √(f/K),

with ``μ = gdp_mu(ε, δ)``, so the whole procedure is ``μ``-GDP, i.e. ``(ε, δ)``-DP, for the
validation users. ``objective(configs)`` takes a list of ``q`` dicts in natural units (plain
Python values; integers rounded, the configuration's categorical values included) and returns
the ``q x n`` per-user losses.

With ``proxy=`` (an objective of the same signature on PUBLIC users) and ``num_users=n``,
each configuration's run is first planned on the proxy (``plan_private_run``: the kernel, ``B``,
``η``, ``T`` and batch rule chosen with the private run's noise simulated), at no privacy cost.

The choice's scores are audited on this path (``audit.one_call``, row ``tune_choice_score``).
Not built yet (issue 30): checkpoints, a ``TorchModelTuningObjective`` as the objective, and
the sampled (Papernot–Steinke) strategy for spaces with many configurations.
"""

from __future__ import annotations

import dataclasses
import json
import math
import uuid
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor
from tqdm.auto import tqdm

from botorch_dp.optim import DPGIBO, DPGIBOConfig, DPGIBOResult
from botorch_dp.optim.public_checks import SettingsWarning
from botorch_dp.plan import PrivatePlan, plan_private_run
from botorch_dp.privacy.analysis.gdp import compose_gdp, gdp_epsilon, gdp_mu
from botorch_dp.privacy.checks import check_delta, check_positive, check_probability
from botorch_dp.privacy.ledger import Gaussian, PrivacyLedger
from botorch_dp.privacy.mechanisms import GaussianScoreMechanism
from botorch_dp.privacy.seeding import noise_generator
from botorch_dp.privacy.statement import GuaranteeStatement, guarantee_statement
from botorch_dp.tuning.search_space import SearchSpace
from botorch_dp.utils import child_seeds

__all__ = ["TUNE_DEFAULTS", "TuneGuarantee", "TuneResult", "tune"]

#: DP-GIBO settings of ``tune`` unless given as keywords (those of the README's main example:
#: a scaled RBF kernel on the unit cube with length-scale 0.2, AdaGrad, losses of order one).
TUNE_DEFAULTS: dict[str, Any] = dict(num_iterations=10, clip_bound=2.0, step_size=0.2, step_rule="adagrad",
                                     noise_variance=1e-4)
SCORE_PART = "score"


@dataclass(frozen=True)
class TuneGuarantee:
    r"""The guarantee of the whole procedure for the validation users (all its runs and its choice)."""

    mu: float
    epsilon: float
    delta: float


@dataclass
class ConfigurationRun:
    r"""One configuration's DP-GIBO run and, with several, its released noisy score."""

    configuration: dict[str, Any]
    result: DPGIBOResult
    run_id: str
    num_users: int
    config: DPGIBOConfig
    plan: PrivatePlan | None = None
    noisy_score: float | None = None


@dataclass
class TuneResult:
    r"""What ``tune`` releases: the chosen hyperparameters in natural units and the guarantee.

    Attributes:
        hyperparameters: ``{name: value}`` in the space's order, plain Python values.
        guarantee: ``TuneGuarantee`` of this procedure (``.epsilon``, ``.delta``, ``.mu``).
        runs: The ``ConfigurationRun`` of each configuration, in ``space.configurations()`` order.
        chosen: The index of the chosen run.
        statement: What the ledger protected (all its runs; ``privacy.statement``).
        score_mu: ``μ_score``, the GDP parameter of each configuration's noisy score (``None``
            with one configuration: no choice is made).
    """

    hyperparameters: dict[str, Any]
    guarantee: TuneGuarantee
    runs: list[ConfigurationRun]
    chosen: int
    statement: GuaranteeStatement
    ledger: PrivacyLedger = field(repr=False)
    score_mu: float | None = None

    def guarantee_report(self) -> str:
        r"""What was protected, in plain words (``GuaranteeStatement``), after this procedure's own line."""
        g = self.guarantee
        return (f"tune: (epsilon = {g.epsilon:.4g}, delta = {g.delta:.3g})-DP for the validation users over "
                f"{len(self.runs)} configuration(s) (mu = {g.mu:.4g} Gaussian DP)\n{self.statement}")

    def to_json(self, path: str | None = None) -> str:
        r"""The released hyperparameters, scores and guarantee as strict JSON (no noise seed)."""
        out = {
            "hyperparameters": self.hyperparameters,
            "guarantee": {"mu": self.guarantee.mu, "epsilon": self.guarantee.epsilon, "delta": self.guarantee.delta},
            "configurations": [{"configuration": r.configuration, "noisy_score": r.noisy_score,
                                "theta": r.result.release.theta.tolist()} for r in self.runs],
            "chosen": self.chosen,
            "statement": self.statement.to_dict(),
        }
        text = json.dumps(out, indent=1, allow_nan=False)
        if path is not None:
            with open(path, "w") as f:
                f.write(text + "\n")
        return text


def _configs_objective(objective: Callable[[list[dict[str, Any]]], Any], space: SearchSpace,
                       choice: dict[str, Any]) -> Callable[[Tensor], Tensor]:
    r"""θ-batch → the objective's losses at the batch's natural configurations (public points)."""
    def evaluate(X: Tensor) -> Tensor:
        rows = space.to_natural(X.reshape(-1, space.dim), choice=choice)
        return torch.as_tensor(objective(list(rows)), dtype=torch.float64)
    return evaluate


def _final_losses(evaluate: Callable[[Tensor], Tensor], theta: Tensor, num_users: int, what: str) -> Tensor:
    losses = evaluate(theta.reshape(1, -1))
    if losses.shape != (1, num_users):
        raise ValueError(f"objective returned shape {tuple(losses.shape)} at {what}, expected (1, {num_users}).")
    if not torch.isfinite(losses).all():
        raise ValueError(f"objective returned non-finite losses at {what}; nothing was released for the choice.")
    return losses


def tune(
    objective: Callable[[list[dict[str, Any]]], Any],
    space: SearchSpace,
    *,
    epsilon: float,
    delta: float,
    ledger: PrivacyLedger | None = None,
    proxy: Callable[[list[dict[str, Any]]], Any] | None = None,
    num_users: int | None = None,
    plan_options: dict[str, Any] | None = None,
    selection_share: float = 0.1,
    loss_clip: float = 3.0,
    seed: int | None = None,
    progress: bool = True,
    executor: Any = None,
    **settings: Any,
) -> TuneResult:
    r"""Tune ``space`` on ``objective`` at a total ``(epsilon, delta)`` for the validation users.

    Args:
        objective: Maps a list of ``q`` hyperparameter dicts (natural units) to the ``q x n``
            per-user validation losses (sensitive).
        space: The ``SearchSpace`` (continuous, ``Integer`` and ``Categorical`` hyperparameters).
        epsilon: ``ε`` of the whole procedure (``μ = gdp_mu(ε, δ)``, split as the module says).
        delta: ``δ``.
        ledger: The ledger to charge (default a new one whose budget is the procedure's ``μ``).
        proxy: A PUBLIC objective of the same signature (its users' losses are used without
            noise or accounting): each configuration's settings are planned on it first.
        num_users: ``n`` of ``objective`` (public), needed with ``proxy``.
        plan_options: Keywords of ``plan_private_run`` (``clip_quantiles``, ``step_sizes``, ...).
        selection_share: ``f``, the share of ``μ²`` for the choice among configurations (used
            only with more than one).
        loss_clip: ``C`` of the scores (losses clamped to ``[0, C]``).
        seed: A noise seed (reproductions only: a ``PrivacyWarning``; default OS entropy).
        progress: Show progress bars.
        executor: Evaluate batches on this ``concurrent.futures.Executor`` (``DPGIBO.run``).
        **settings: ``DPGIBOConfig`` keywords; ``TUNE_DEFAULTS`` otherwise (the kernel is
            ``space.recommended_kernel()`` unless ``kernel=`` is given).

    Returns:
        The ``TuneResult``.
    """
    if not isinstance(space, SearchSpace):
        raise ValueError(f"space must be a SearchSpace, got {type(space).__name__}.")
    mu = gdp_mu(check_positive(epsilon, "epsilon", allow_inf=False), check_delta(delta))
    share = check_probability(selection_share, "selection_share")
    check_positive(loss_clip, "loss_clip (C)", allow_inf=False)
    blocked = {"bounds", "privacy_mu", "epsilon", "delta", "seed", "validation_mu_budget"} & set(settings)
    if blocked:
        raise ValueError(f"tune sets {sorted(blocked)} itself; give epsilon, delta and seed to tune().")
    if proxy is not None and (num_users is None or isinstance(num_users, bool) or not isinstance(num_users, int)):
        raise ValueError(f"num_users: planning on a proxy needs n, the number of users of objective (public), "
                         f"got {num_users!r}.")
    if proxy is None and plan_options:
        raise ValueError("plan_options: give proxy= to plan on.")
    configurations = space.configurations()
    K = len(configurations)
    mu_run = mu if K == 1 else mu * math.sqrt((1.0 - share) / K)
    mu_score = mu * math.sqrt(share / K)
    ledger = ledger if ledger is not None else PrivacyLedger(validation_mu_budget=mu)
    seeds: Sequence[int | None] = [None] * (K + 1) if seed is None else child_seeds([int(seed)], K + 1)
    base = {**TUNE_DEFAULTS, "kernel": space.recommended_kernel(), **settings}
    runs: list[ConfigurationRun] = []
    for k, choice in enumerate(tqdm(configurations, disable=not progress or K == 1, desc="configurations")):
        config = DPGIBOConfig(bounds=space.bounds, privacy_mu=mu_run, target_delta=delta, seed=seeds[k], **base)
        plan = None
        if proxy is not None:  # public: the proxy's users only; the private run's noise simulated
            plan = plan_private_run(_configs_objective(proxy, space, choice), config, num_users=num_users,
                                    progress=progress, **(plan_options or {}))
            config = dataclasses.replace(plan.config, seed=seeds[k])
        optimizer = DPGIBO(config, ledger=ledger)
        result = optimizer.run(_configs_objective(objective, space, choice), progress=progress, executor=executor)
        runs.append(ConfigurationRun(choice, result, optimizer.run_id, int(optimizer.num_users or 0), config, plan))
        if plan is not None and optimizer.num_users != num_users:
            warnings.warn(f"The run was planned for num_users = {num_users}, but objective has {optimizer.num_users} "
                          "users: the plan simulated other noise than the run drew.", SettingsWarning, stacklevel=2)
    chosen, run_ids = 0, [r.run_id for r in runs]
    if K > 1:
        n = runs[0].num_users
        if any(r.num_users != n for r in runs):
            raise ValueError(f"objective returned {sorted({r.num_users for r in runs})} users across configurations; "
                             "every configuration must be scored on the same n users.")
        losses = torch.cat([
            _final_losses(_configs_objective(objective, space, r.configuration), r.result.release.theta, n,
                          f"the final point of configuration {r.configuration}")
            for r in runs
        ])
        mechanism = GaussianScoreMechanism(loss_clip=loss_clip, per_trial_mu=mu_score,
                                           generator=noise_generator(seeds[K], stacklevel=3))
        selection_id = uuid.uuid4().hex
        with ledger.charge({SCORE_PART: Gaussian(mu_score * math.sqrt(K))}, run_id=selection_id, new_run=True) as meter:
            scores = mechanism.release(losses, meter=meter, part=SCORE_PART).scores
        for r, s in zip(runs, scores.tolist()):
            r.noisy_score = float(s)
        chosen = int(torch.argmin(scores))  # post-processing of the released scores
        run_ids.append(selection_id)
    spent = compose_gdp([ledger.validation_mu(run_id) for run_id in run_ids])
    winner = runs[chosen]
    hyperparameters = space.to_natural(winner.result.release.theta, choice=winner.configuration)
    return TuneResult(
        hyperparameters=dict(hyperparameters), guarantee=TuneGuarantee(spent, gdp_epsilon(spent, delta), delta),
        runs=runs, chosen=chosen, statement=guarantee_statement(ledger, delta), ledger=ledger,
        score_mu=mu_score if K > 1 else None,
    )

