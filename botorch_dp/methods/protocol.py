r"""The ``Method`` protocol: a tuning method that can be simulated on a public proxy and run privately.

The method choice (``methods.choice``) and ``tune`` use methods through this protocol only; they
never read a method's option fields. A method

* ``resolved(proxy_objective, context)``: fixes every setting it still leaves open from the
  PUBLIC proxy and the public ``MethodContext`` (the private run's ``n``, ``(ε, δ)``, box,
  DP-GIBO's planned config and its number of evaluations), and returns a new instance that
  runs exactly as simulated; raises ``MethodUnavailable`` with the reason when it cannot run
  at this budget or is too costly to simulate;
* ``simulate(proxy_objective, context, seed)``: runs on the proxy's ``n_p`` users with the
  noise the private run on ``n`` users will draw (every release's noise is ``c/(n μ)``, so
  ``μ' = μ n/n_p`` on the proxy draws the same noise, ``methods.proxy.simulation_config``) and
  returns the ``θ`` it would release;
* ``run_private(objective, ledger=..., seed=..., progress=..., executor=...)``: the private
  run on the sensitive objective, every release charged to ``ledger`` through its one charge
  protocol before its noise is drawn; returns a ``MethodRun``: one release (``theta``, with its
  categorical ``configuration`` and the released ``runs``) and one guarantee (``mu`` or
  ``epsilon`` at ``delta``, and ``guarantees``: one ``(ε, δ)`` per protected set);
* ``gdp_mu``: the GDP parameter of the private run when it is ``μ``-GDP (a ledger with a
  ``μ`` budget holds it), ``None`` when its guarantee is a Rényi-DP curve (private selection);
* ``describe()``: the resolved public settings in one line;
* ``runs_configurations``: ``True`` for a method that runs over the space's categorical
  configurations itself (the enumerate procedure, the sampled strategy): ``tune`` hands it the
  objective on the space's public encoding and its own seed, from which it derives its noise
  streams, and it returns its released per-configuration ``runs``; ``False`` for the others:
  ``tune`` hands it one objective (the configuration's, or the encoding's for a selection over a
  mixed space) and a child seed of its own, and wraps its one release in a ``ConfigurationRun``;
* ``with_max_trials(max_trials)``: the method whose private run is padded to ``max_trials``
  trials (the wall time then does not reveal a hidden number of trials ``K``; ``None``:
  unchanged); a method without a hidden ``K`` returns itself.

Two members are optional capabilities, each its own protocol:

* ``with_loss_clip(loss_clip)`` (``TakesLossClip``): the method whose open score clip ``C`` is
  ``loss_clip`` (a method with its own ``C`` returns itself). ``tune`` hands it its ``loss_clip``
  (``methods.choice.with_loss_clip``); a method without the member keeps its own clip;
* ``with_checkpoint(checkpoint)`` (``Resumable``): the method whose private run resumes from
  ``checkpoint`` (a ``tuning.tune_checkpoint.TuneCheckpoint``). ``tune`` asks it of the winner
  when given ``checkpoint_dir``, and refuses a method without it by name before it runs.

What ``tune`` records of a method's one release (``runs_configurations`` false) the run says:
``MethodRun.result_is_record`` true when ``result`` is the run's own record (DP-GIBO's
``DPGIBOResult``: its release with the iterates and its records), which ``tune``'s
``ConfigurationRun`` then holds as the enumerate procedure's runs do; else it holds the
``MethodRun`` (``MethodRun.configuration_result``).

``tune`` picks what to do with a method by these members only, never by its type, so a method
written by a user that has them runs through ``tune``'s path like a built-in one (e.g. given in
``plan_options["methods"]`` with a proxy and recommended there).

A ``SimulatedMethod`` has only ``name``, ``resolved``, ``simulate`` and ``describe``: it can be
compared on the proxy, and its private run is another caller's. ``CandidateMethod`` is the old
name of ``Method``.

What is protected. ``MethodRun.guarantees`` states the guarantee per protected set:
``{"validation": (ε, δ) or None, "training": (ε, δ) or None}``. ``"validation"`` is the users
whose per-user losses the method's releases are computed from; ``"training"`` the records
the objective's models are trained on, for a method that charges the training runs itself
(private selection over whole DP-SGD runs charged once up front, tuning on a subsample, one
final training after tuning on a proxy, one untuned run). The validation methods leave
``"training"`` as ``None``: a DP-trained objective charges each of its training runs to its own
ledger, whose statement (``privacy.statement``) gives the training records' guarantee.

The methods that protect the training records (``training_selection``, ``subsample_tuning``,
``proxy_then_train``, ``untuned``) are not simulated on a proxy OBJECTIVE (their ``simulate``
raises ``MethodUnavailable``) but on a proxy's DATA: ``simulate_training(proxy, seed)`` with a
``training_proxy.TrainingProxy`` returns the simulated released model's loss, and
``private_trainings`` is their cost (``training_choice``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from torch import Tensor

from botorch_dp.optim.config import DPGIBOConfig
from botorch_dp.privacy.ledger import PrivacyLedger

__all__ = [
    "PROTECTED_SETS",
    "CandidateMethod",
    "ConfigurationRun",
    "METHOD_MEMBERS",
    "Method",
    "MethodContext",
    "MethodRun",
    "MethodUnavailable",
    "Resumable",
    "SimulatedMethod",
    "TakesLossClip",
    "config_delta",
    "config_mu",
    "missing_members",
]

#: The sets of people a method's guarantee is stated for (``MethodRun.guarantees``).
PROTECTED_SETS = ("validation", "training")


def config_mu(config: DPGIBOConfig) -> float:
    r"""``config.privacy_mu`` (set by the config's checks; ``ValueError`` naming it when absent)."""
    if config.privacy_mu is None:
        raise ValueError("config.privacy_mu: the config has no privacy budget (give privacy_mu or epsilon and delta).")
    return float(config.privacy_mu)


def config_delta(config: DPGIBOConfig) -> float:
    r"""``config.target_delta``, the run's ``δ`` (``ValueError`` naming it when absent)."""
    if config.target_delta is None:
        raise ValueError("config.target_delta: the run's delta is needed to state its (epsilon, delta), got None.")
    return float(config.target_delta)


class MethodUnavailable(ValueError):
    r"""A candidate that cannot run at this budget (or is too costly to simulate); says why."""


@dataclass(frozen=True)
class MethodContext:
    r"""The public settings every candidate is resolved against (no sensitive value).

    Attributes:
        bounds: ``2 x d`` box ``Θ``.
        num_users: ``n`` of the private run.
        num_proxy_users: ``n_p`` of the proxy (``None`` when no proxy is used).
        epsilon: ``ε`` of the private run (``gdp_epsilon(μ, δ)`` of the DP-GIBO config).
        delta: ``δ`` of the private run (the config's ``target_delta``).
        config: DP-GIBO's (planned) config at the private budget.
        evaluations: The number of objective evaluations of DP-GIBO's run with ``config``
            (the mean over its simulated runs): the budget in evaluations the selection
            methods get by default (``E[K]``).
    """

    bounds: Tensor
    num_users: int
    num_proxy_users: int | None
    epsilon: float
    delta: float
    config: DPGIBOConfig
    evaluations: float

    @property
    def proxy_scale(self) -> float:
        r"""``n/n_p``: the factor on a GDP parameter that makes a run on the proxy's ``n_p`` users
        draw the private run's noise (``ValueError`` without a proxy)."""
        if self.num_proxy_users is None:
            raise ValueError("context.num_proxy_users: simulating needs the proxy's n_p, got None.")
        return self.num_users / self.num_proxy_users


@dataclass
class MethodRun:
    r"""What a candidate's private run returns (everything here is released or public).

    Attributes:
        method: The method's ``name``.
        theta: The released ``d`` point.
        result: The method's own result: a ``DPGIBOResult``, or a selection's
            ``baselines.selection.PrivateSelectionResult`` (the winner only: no trial count, no
            losing trial).
        run_id: The run's id in the ledger.
        num_users: ``n`` of the objective.
        epsilon: ``ε`` of this run alone at ``delta``.
        delta: ``δ``.
        description: The mechanism and its guarantee, in words.
        released_score: The winner's noisy score (private selection), else ``None``.
        mu: The validation users' Gaussian-DP ``μ`` as the ledger holds it (all of the run's
            records composed), ``None`` when the guarantee is a Rényi-DP curve (``epsilon``).
        configuration: The released categorical values (``{}`` without categoricals).
        runs: The released per-configuration runs (``ConfigurationRun``; a selection's winner
            only); empty when the run is its own single release (``tune`` wraps it in one).
        chosen: The index of the released run in ``runs``.
        score_mu: The GDP ``μ`` of each released noisy score of a choice among runs, else ``None``.
        procedure: The procedure in words for a report (``None``: described by ``mu``).
        timing: What the wall time of a run with a hidden number of trials reveals, else ``None``.
        guarantees: ``{protected set: (ε, δ) or None}`` for each of ``PROTECTED_SETS`` (see the
            module); default ``{"validation": (epsilon, delta), "training": None}``.
        result_is_record: ``True`` when ``result`` is the run's own record of its one release
            (DP-GIBO's ``DPGIBOResult``), which ``tune``'s ``ConfigurationRun`` holds in place of
            this run (``configuration_result``).
    """

    method: str
    theta: Tensor
    result: Any
    run_id: str
    num_users: int
    epsilon: float
    delta: float
    description: str
    released_score: float | None = None
    mu: float | None = None
    configuration: dict[str, Any] = field(default_factory=dict)
    runs: list[ConfigurationRun] = field(default_factory=list)
    chosen: int = 0
    score_mu: float | None = None
    procedure: str | None = None
    timing: str | None = None
    guarantees: dict[str, tuple[float, float] | None] = field(default_factory=dict)
    result_is_record: bool = False

    def __post_init__(self) -> None:
        if not self.guarantees:
            self.guarantees = {"validation": (self.epsilon, self.delta), "training": None}
        unknown = set(self.guarantees) - set(PROTECTED_SETS)
        if unknown:
            raise ValueError(f"guarantees: the protected sets are {PROTECTED_SETS}, got {sorted(unknown)}.")

    @property
    def release(self) -> Any:
        r"""``result.release`` for DP-GIBO, else ``self`` (whose ``theta`` is the release)."""
        return getattr(self.result, "release", self)

    @property
    def configuration_result(self) -> Any:
        r"""What ``tune``'s ``ConfigurationRun`` holds of this one release: ``result`` when it is the run's
        own record (``result_is_record``), else this run; ``.release.theta`` is the released point either way."""
        return self.result if self.result_is_record else self


@dataclass
class ConfigurationRun:
    r"""One configuration's released run and, with several, its released noisy score.

    ``result`` is a ``DPGIBOResult``, or for another method its ``MethodRun`` (``result.release.theta``
    is the released point either way; a selection's ``MethodRun.result`` is the winner only) with
    ``config`` DP-GIBO's (planned) settings kept for reference and ``plan`` its ``plan.PrivatePlan``.
    """

    configuration: dict[str, Any]
    result: Any
    run_id: str
    num_users: int
    config: DPGIBOConfig
    plan: Any = None
    noisy_score: float | None = None


@runtime_checkable
class SimulatedMethod(Protocol):
    r"""A method that can be resolved and simulated on a public proxy (see the module)."""

    @property
    def name(self) -> str: ...

    def resolved(
        self, proxy_objective: Callable[[Tensor], Tensor] | None, context: MethodContext
    ) -> SimulatedMethod: ...

    def simulate(self, proxy_objective: Callable[[Tensor], Tensor], context: MethodContext, seed: int) -> Tensor: ...

    def describe(self) -> str: ...


@runtime_checkable
class Method(SimulatedMethod, Protocol):
    r"""A method that can be simulated on a public proxy and run privately (see the module)."""

    @property
    def gdp_mu(self) -> float | None: ...

    @property
    def runs_configurations(self) -> bool: ...

    def with_max_trials(self, max_trials: int | None) -> Method: ...

    def resolved(self, proxy_objective: Callable[[Tensor], Tensor] | None, context: MethodContext) -> Method: ...

    def run_private(
        self,
        objective: Callable[[Tensor], Tensor],
        *,
        ledger: PrivacyLedger,
        seed: int | None = None,
        progress: bool = False,
        executor: Any = None,
    ) -> MethodRun: ...

    def describe(self) -> str: ...


@runtime_checkable
class TakesLossClip(Protocol):
    r"""A method whose score clip ``C`` its caller may set (see the module)."""

    def with_loss_clip(self, loss_clip: float) -> Any: ...


@runtime_checkable
class Resumable(Protocol):
    r"""A method whose private run can resume from a checkpoint (see the module)."""

    def with_checkpoint(self, checkpoint: Any) -> Any: ...


#: The members a ``Method`` has (``SimulatedMethod``'s, then those its private run needs).
METHOD_MEMBERS = (
    "name",
    "resolved",
    "simulate",
    "describe",
    "gdp_mu",
    "runs_configurations",
    "with_max_trials",
    "run_private",
)


def missing_members(method: object, members: tuple[str, ...] = METHOD_MEMBERS) -> list[str]:
    r"""The ``Method`` members ``method`` lacks, in ``METHOD_MEMBERS``' order (``[]``: it is a ``Method``)."""
    return [m for m in members if not hasattr(method, m)]


#: The old name of ``Method``.
CandidateMethod = Method
