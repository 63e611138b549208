r"""``tune``'s refusals before spending: ``δ ≥ 1/n`` and a noise-dominated budget (issue 43).

``TuneChecks`` holds the public facts of a call (its ``(ε, δ)``, the ``μ`` of each DP-GIBO run and of
the choice's scores, the released coordinates, the opt-ins); ``enforce(n)`` refuses, before any
release, what ``optim.public_checks`` refuses at ``n`` validation users. ``tune`` calls it before
the first objective call when ``n`` is known (``num_users=``, a ``TorchModelTuningObjective``),
otherwise ``FirstCallChecked`` calls it on the first losses the objective returns, before they
reach any mechanism. ``carried(n)`` is what the result's report and JSON then say.

The rules, all on public inputs (``optim.public_checks``): ``δ ≥ 1/n`` for the validation users, and
for the training records (``n`` training examples) when the objective trains with DP-SGD (``tune``'s
``δ`` and a DP-SGD target's ``target_delta``); DP-GIBO's pooled gradient noise
``R = 2√k/(n μ_g) ≥ 10``; the choice's score noise ``R = 1/(n μ_score) ≥ 10``; and for the selection
methods, whose per-trial ``μ₀`` is below ``μ``, the same score rule at the whole budget ``μ``
(a bound that refuses only what no split of the budget could rescue).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from botorch_dp.baselines.selection import PublicRefusal
from botorch_dp.objectives.search_space import SearchSpace, SearchSpaceObjective
from botorch_dp.optim import DPGIBOConfig
from botorch_dp.optim.legacy_options import FLAT_FIELDS
from botorch_dp.optim.public_checks import (
    LARGE_DELTA_OPT_IN,
    NOISE_DOMINATED_OPT_IN,
    delta_caution,
    enforce,
    gradient_noise_caution,
    score_noise_caution,
)
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.privacy.checks import did_you_mean
from botorch_dp.tuning.tune_result import TuneResult

__all__ = ["FirstCallChecked", "SearchedRun", "TuneChecks", "check_setting_names"]


@dataclass(frozen=True)
class TuneChecks:
    r"""The public facts ``tune``'s checks read (see the module docstring).

    Attributes:
        epsilon: ``ε`` of the call.
        delta: ``δ`` of the call.
        mu: ``μ = gdp_mu(ε, δ)``.
        gradient_mu: ``μ_g`` of each DP-GIBO run (``None``: no DP-GIBO run is planned yet).
        dims: ``k``, the coordinates each DP-GIBO step noises.
        score_mu: ``μ_score`` of the choice among configurations (``None``: no choice).
        allow_large_delta: ``unsafe_allow_large_delta``.
        allow_noise_dominated: ``allow_noise_dominated``.
        training_records: The DP-trained objective's number of training records (``None``: no DP training).
        training_delta: Its DP-SGD target's ``target_delta`` (``None``: no target).
    """

    epsilon: float
    delta: float
    mu: float
    gradient_mu: float | None
    dims: int
    score_mu: float | None
    allow_large_delta: bool
    allow_noise_dominated: bool
    training_records: int | None = None
    training_delta: float | None = None

    @classmethod
    def of(
        cls,
        objective: Any,
        run_config: DPGIBOConfig,
        epsilon: float,
        mu: float,
        K: int,
        mu_score: float,
        method: str,
        sampled: bool,
        trains: bool,
    ) -> TuneChecks:
        r"""A ``tune`` call's facts: DP-GIBO's gradient budget (``run_config``: one configuration's run,
        its ``target_delta`` the call's ``δ``) and the choice's score budget when DP-GIBO runs per
        configuration (``method``, not ``sampled``: a sampled trial's ``μ₀`` is checked by its run); the
        training records when the objective ``trains`` with DP-SGD (``num_training_records``, ``dp_sgd``)."""
        per_configuration = method == "dp_gibo" and not sampled
        dp_sgd = getattr(objective, "dp_sgd", None) if trains else None
        target = dp_sgd.target() if dp_sgd is not None else None
        assert run_config.target_delta is not None  # resolved by DPGIBOConfig
        return cls(
            epsilon=epsilon,
            delta=run_config.target_delta,
            mu=mu,
            gradient_mu=run_config.mu_split.gradient_mu if per_configuration else None,
            dims=run_config.options.projection.released_dim(run_config.bounds.shape[-1]),
            score_mu=mu_score if per_configuration and K > 1 else None,
            allow_large_delta=run_config.unsafe_allow_large_delta,
            allow_noise_dominated=run_config.allow_noise_dominated,
            training_records=objective.num_training_records if trains else None,
            training_delta=None if target is None else target[1],
        )

    def _epsilon_at(self, factor: float) -> float:
        r"""``ε`` when every ``μ`` of the call is scaled by ``factor`` (each is proportional to ``μ``)."""
        return gdp_epsilon(self.mu * factor, self.delta)

    def static(self) -> list[tuple[str, str, bool]]:
        r"""The cautions known without ``n``: ``δ ≥ 1/n`` for the training records."""
        found = []
        if self.training_records is not None:
            found.append(delta_caution(self.delta, self.training_records, users="training records"))
            if self.training_delta is not None:
                found.append(
                    delta_caution(
                        self.training_delta,
                        self.training_records,
                        argument="dp_sgd target_delta",
                        users="training records",
                    )
                )
        return [(c, LARGE_DELTA_OPT_IN, self.allow_large_delta) for c in found if c is not None]

    def cautions(self, num_users: int | None) -> list[tuple[str, str, bool]]:
        r"""``(caution, opt-in, allowed)`` of every check that fires at ``num_users`` validation users."""
        found = self.static()
        if num_users is None or num_users < 1:
            return found
        n, eps = num_users, self.epsilon
        caution = delta_caution(self.delta, n)
        if caution is not None:
            found.append((caution, LARGE_DELTA_OPT_IN, self.allow_large_delta))
        noise: list[str | None] = []
        needed: Callable[[float], float] = self._epsilon_at
        if self.gradient_mu is None:  # a selection method: its per-trial μ₀ < μ, so μ bounds its score noise
            noise.append(
                score_noise_caution(
                    n, self.mu, argument="epsilon", value=eps, needed=needed, what="a noisy validation score"
                )
            )
        else:
            noise.append(
                gradient_noise_caution(n, self.gradient_mu, self.dims, argument="epsilon", value=eps, needed=needed)
            )
            if self.score_mu is not None:
                noise.append(score_noise_caution(n, self.score_mu, argument="epsilon", value=eps, needed=needed))
        found += [(c, NOISE_DOMINATED_OPT_IN, self.allow_noise_dominated) for c in noise if c is not None]
        return found

    def enforce(self, num_users: int | None, *, stacklevel: int = 4) -> None:
        r"""Refuse (``ValueError``) each caution at ``num_users`` not opted into; warn the others."""
        for caution, opt_in, allow in self.cautions(num_users):
            enforce(caution, opt_in, allow, stacklevel=stacklevel)

    def guarded(self, objective: Any, num_users: int | None) -> Any:
        r"""``objective`` after the checks at ``num_users`` (``enforce``); without ``n``, a plain
        callable is wrapped in ``FirstCallChecked``, which checks the ``n`` of its first losses."""
        self.enforce(num_users, stacklevel=5)
        if num_users is None and not isinstance(objective, SearchSpaceObjective):
            return FirstCallChecked(objective, self)
        return objective

    def carried(self, num_users: int | None) -> tuple[str, ...]:
        r"""The cautions a result carries (those opted into) at ``num_users``."""
        return tuple(caution for caution, _, allow in self.cautions(num_users) if allow)

    def carry(self, result: TuneResult) -> TuneResult:
        r"""``result`` with the cautions at its ``n`` (its runs') in ``cautions``."""
        n = result.runs[0].num_users if result.runs else 0
        result.cautions = self.carried(n or None)
        return result


class FirstCallChecked:
    r"""``objective`` (configurations ↦ ``q x n`` losses), whose first returned losses are checked
    (``TuneChecks.enforce`` at their ``n``) before they are handed on: the refusal comes at the first
    call, before any release. A class, so that it pickles whenever ``objective`` does."""

    def __init__(self, objective: Callable[[list[dict[str, Any]]], Any], checks: TuneChecks) -> None:
        self.objective, self.checks, self.checked = objective, checks, False

    def __call__(self, configurations: list[dict[str, Any]]) -> Any:
        losses = self.objective(configurations)
        if not self.checked:
            shape = tuple(losses.shape) if hasattr(losses, "shape") else np.shape(losses)
            if len(shape) == 2:  # other shapes are refused where they are read
                try:
                    self.checks.enforce(int(shape[1]), stacklevel=5)
                except ValueError as err:  # public facts only, at the first call: a selection lets it through
                    raise PublicRefusal(str(err)) from None
                self.checked = True
        return losses


def check_setting_names(settings: dict[str, Any], tune: Callable[..., Any]) -> None:
    r"""``ValueError`` naming an unknown ``**settings`` keyword of ``tune``, with the closest of its
    keywords and ``DPGIBOConfig``'s fields (``did_you_mean``)."""
    known = {f.name for f in dataclasses.fields(DPGIBOConfig)} | set(inspect.signature(tune).parameters)
    known |= set(FLAT_FIELDS)  # the old option keywords still work (with a DeprecationWarning)
    for name in settings:
        if name not in known:
            raise ValueError(
                f"tune got an unknown setting {name}={settings[name]!r}.{did_you_mean(name, sorted(known))} "
                "Settings are tune's keywords and DPGIBOConfig's fields."
            )


def check_objective(name: str, objective: Any, space: SearchSpace) -> None:
    r"""``ValueError`` naming ``objective`` or ``proxy``: not callable, or a ``SearchSpaceObjective``
    built on another space than ``space``."""
    if objective is None and name == "proxy":
        return
    if not callable(objective):
        raise ValueError(
            f"{name} must be callable (configurations -> q x n losses) or a TorchModelTuningObjective, "
            f"got {type(objective).__name__}."
        )
    if isinstance(objective, SearchSpaceObjective):
        other = objective.space
        if other.hyperparameters != space.hyperparameters or other.fixed != space.fixed:
            raise ValueError(
                f"{name}.space differs from space: {name}.space is {other.describe()}, space is "
                f"{space.describe()}; build the {type(objective).__name__} on the space you tune."
            )


def training_event(objective: Any, space: SearchSpace) -> Any:
    r"""The event ``objective`` charges per training run (DP-SGD, AMP), ``None`` if it charges none, and a
    ``SearchedRun`` for a DP-SGD objective whose space searches the run itself (no one event per run)."""
    planned = getattr(objective, "planned_event", None)
    if not isinstance(objective, SearchSpaceObjective) or planned is None:
        return None
    bound = bound_objective(objective, space.configurations()[0])
    searched = getattr(bound, "training_routes", None)
    if callable(searched) and searched() and bound.planned_run() is not None:
        return SearchedRun(tuple(searched()))  # no one run per evaluation: objectives.covered
    return bound.planned_event(torch.full((space.dim,), 0.5, dtype=torch.float64))


@dataclass(frozen=True)
class SearchedRun:
    r"""What a DP-SGD objective whose space searches the run itself (``epochs``, ``batch_size``,
    ``max_grad_norm``, ``noise_multiplier``) trains per evaluation: no one run. Only a private selection
    over whole runs trains it (``objectives.covered``); DP-GIBO's charged path refuses it before anything.

    Attributes:
        names: The searched settings of the run.
    """

    names: tuple[str, ...]


def bound_objective(objective: Any, choice: dict[str, Any]) -> Any:
    r"""``objective`` with the categorical ``choice`` fixed (itself for an empty choice)."""
    return objective.with_choice(choice) if choice else objective
