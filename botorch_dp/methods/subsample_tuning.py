r"""Tune on one Poisson subsample of the training records, then ONE DP-SGD training on all, as a method.

``SubsampleTuningMethod`` wraps ``methods.cheap_tuning.tune_on_subsample`` (Koskela & Kulkarni,
NeurIPS 2023): ``K`` configurations trained on one Poisson γ-subset of the private training
records, charged as ONE amplified tuning phase before the subset is drawn, the best carried
unchanged to one final run on all the records. The ε split (τ: the final run alone keeps
``ε·sqrt(1 − τ)``; the tuning phase takes what remains of the composed ``(ε, δ)``) is the caller's
``tuning_share``; else, with ``proxy_data`` (``tune`` hands its proxy over: ``with_tuning_share``),
chosen on that PUBLIC proxy from ``cheap_plan.SHARE_GRID`` when the method runs
(``cheap_tuning.choose_tuning_share``); else the public default ``cheap_plan.DEFAULT_TUNING_SHARE``.
It is stated in ``MethodRun.procedure``, with how it was chosen. With
``protect="both"`` the trials' scores are Gaussian noised (all ``K`` together ``gdp_mu(ε, δ)``-GDP
for the validation users); with ``"training"`` the validation users are treated as public.

``simulate_training(proxy, seed)`` simulates it on the proxy: the trials on a γ-subset of the
proxy's training split at ``σ_t`` (scaled to the proxy), chosen at the precision of the private run's
choice on the objective's ``n`` validation users (once per scoring-half user, on the proxy's other
users, topped up with the real run's sampling noise and, under ``"both"``, its score noise:
``TrainingProxy.held_out_scores``), one final run at ``σ_f`` per configuration some user's choice
picked, each user scoring the final model of its own choice. The simulation runs at the given
``tuning_share``, else at the default τ, also when the private run will choose τ on the proxy:
choosing τ inside every repeat of ``tune``'s method comparison would cost ``len(SHARE_GRID)``
simulated procedures per repeat.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from botorch_dp.methods.protocol import MethodContext, MethodRun, MethodUnavailable
from botorch_dp.methods.proxy_then_train import DEFAULT_CONFIGURATIONS, cheap_method_run, not_on_a_proxy_objective
from botorch_dp.methods.training_proxy import TrainingProxy, random_configurations
from botorch_dp.privacy.analysis.gdp import gdp_mu
from botorch_dp.privacy.ledger import PrivacyLedger

__all__ = ["SubsampleTuningMethod"]


@dataclass(frozen=True)
class SubsampleTuningMethod:
    r"""Tune on a Poisson subsample, then one final DP-SGD training on all records (see the module).

    Attributes:
        space: The objective's ``SearchSpace``.
        epsilon: ``ε`` of the whole procedure on the training records (and of the scores, ``"both"``).
        delta: ``δ``.
        protect: ``"training"`` or ``"both"``.
        num_configurations: ``K``, the configurations trained on the subset.
        subsample_fraction: γ (``None``: ``cheap_plan.DEFAULT_SUBSAMPLE_FRACTION``).
        tuning_share: τ (``None``: chosen on ``proxy_data`` at the run, else
            ``cheap_plan.DEFAULT_TUNING_SHARE``; the simulation uses the default).
        proxy_data: PUBLIC data (``ClassificationData``) to choose τ on when ``tuning_share`` is
            ``None`` (``None``: the default τ).
    """

    space: Any
    epsilon: float
    delta: float
    protect: str = "both"
    num_configurations: int = DEFAULT_CONFIGURATIONS
    subsample_fraction: float | None = None
    tuning_share: float | None = None
    proxy_data: Any = dataclasses.field(default=None, repr=False, compare=False)
    name: str = dataclasses.field(default="subsample_tuning", init=False)

    def with_tuning_share(self, tuning_share: float | None, proxy_data: Any) -> SubsampleTuningMethod:
        r"""This method with τ fixed at ``tuning_share``, or (``None``) chosen on ``proxy_data`` (public) at the run."""
        return dataclasses.replace(self, tuning_share=tuning_share, proxy_data=proxy_data)

    @property
    def gdp_mu(self) -> float | None:
        return None  # Rényi-DP curves, charged to the objective's own ledger

    @property
    def runs_configurations(self) -> bool:
        return False  # handed one objective and a child of tune's seed; tune wraps its one release

    def with_max_trials(self, max_trials: int | None) -> SubsampleTuningMethod:
        return self  # K = num_configurations is public: nothing to pad

    @property
    def private_trainings(self) -> float:
        r"""The DP-SGD trainings on the private records: ``K`` on the subset and the final run."""
        return float(self.num_configurations + 1)

    @property
    def score_mu(self) -> float | None:
        r"""μ of all ``K`` scores together (``protect="both"``), else ``None``."""
        return gdp_mu(self.epsilon, self.delta) if self.protect == "both" else None

    def _settings(self) -> tuple[float, float]:
        from botorch_dp.methods.cheap_plan import DEFAULT_SUBSAMPLE_FRACTION, DEFAULT_TUNING_SHARE  # late

        gamma = DEFAULT_SUBSAMPLE_FRACTION if self.subsample_fraction is None else self.subsample_fraction
        return gamma, DEFAULT_TUNING_SHARE if self.tuning_share is None else self.tuning_share

    def resolved(self, proxy_objective: Callable[[Tensor], Tensor] | None, context: MethodContext) -> Any:
        return self

    def simulate(self, proxy_objective: Callable[[Tensor], Tensor], context: MethodContext, seed: int) -> Tensor:
        raise not_on_a_proxy_objective(self.name)

    def plan(self, proxy: TrainingProxy) -> Any:
        r"""The ``cheap_plan.SubsamplePlan`` of the private run (σ_t, σ_f; public)."""
        from botorch_dp.methods.cheap_plan import plan_subsample_tuning  # late: loaded when used
        from botorch_dp.methods.cheap_tuning import MIN_EXPECTED_SUBSET

        gamma, share = self._settings()
        m = proxy.objective.num_training_records
        if gamma * m < MIN_EXPECTED_SUBSET:
            raise MethodUnavailable(
                f"{self.name}: the expected subset gamma*m = {gamma * m:.3g} records is below {MIN_EXPECTED_SUBSET}."
            )
        rate, steps, _ = proxy.run_shape()
        return plan_subsample_tuning(
            epsilon=self.epsilon,
            delta=self.delta,
            sample_rate=rate,
            steps=steps,
            num_trials=self.num_configurations,
            subsample_fraction=gamma,
            tuning_share=share,
        )

    def simulate_training(self, proxy: TrainingProxy, seed: int) -> float:
        r"""The scoring half's mean loss of the simulated procedure's final model (public)."""
        from botorch_dp.methods.cheap_tuning import draw_poisson_subset  # late: loaded when used

        plan = self.plan(proxy)
        configs = random_configurations(self.space, self.num_configurations, seed)
        rows = draw_poisson_subset(proxy.num_proxy_records, plan.subsample_fraction, seed=proxy.stream(seed, 3))
        noise, clip = 0.0, None
        if self.score_mu is not None:  # the private release's noise on the mean of n clipped losses
            clip = proxy.objective.loss_cap
            per_trial = self.score_mu / math.sqrt(self.num_configurations)
            noise = clip / (proxy.objective.num_users * per_trial)
        per_model = proxy.trained(configs, plan.trial_noise_multiplier, seed, rows)
        users, choices = proxy.held_out_choices(
            per_model, proxy.objective.num_users, seed, score_noise=noise, score_clip=clip
        )  # the private run chooses on the objective's n validation users
        chosen = sorted(set(choices.tolist()))  # one final training per configuration some fold chose
        finals = proxy.final_losses([configs[i] for i in chosen], plan.final_noise_multiplier, seed)
        return proxy.held_out_score(finals, users, torch.tensor([chosen.index(int(c)) for c in choices]))

    def describe(self) -> str:
        gamma, share = self._settings()
        tau = f"tau = {share:g}" if not self._chooses_share else "tau chosen on the proxy at the run"
        return (
            f"{self.num_configurations} configurations trained on one Poisson subset (gamma = {gamma:g}), tuning "
            f"share {tau} of epsilon^2, then one final DP-SGD training ({self.private_trainings:g} private "
            f"trainings; protects {self.protect})"
        )

    @property
    def _chooses_share(self) -> bool:
        return self.tuning_share is None and self.proxy_data is not None

    def run_private(
        self,
        objective: Any,
        *,
        ledger: PrivacyLedger,
        seed: int | None = None,
        progress: bool = False,
        executor: Any = None,
    ) -> MethodRun:
        r"""Run ``tune_on_subsample`` on ``objective`` (its ledger is ``ledger``), τ chosen on ``proxy_data``
        unless fixed; ``seed`` seeds the public configurations and the proxy simulation of τ; ``progress``
        and ``executor`` are not used."""
        from botorch_dp.methods.cheap_tuning import tune_on_subsample  # late: loaded when used

        if ledger is not objective.ledger:
            raise ValueError("ledger: the runs are charged to objective.ledger; pass that ledger or none.")
        gamma, _ = self._settings()
        result = tune_on_subsample(
            objective,
            self.space,
            epsilon=self.epsilon,
            delta=self.delta,
            subsample_fraction=gamma,
            tuning_share=self.tuning_share,  # None: chosen on proxy_data, else the stated default
            proxy=self.proxy_data,
            tuner=self.num_configurations,
            protect=self.protect,
            score_mu=self.score_mu,
            seed=seed,
        )
        return cheap_method_run(self.name, result, self.space, objective, ledger)
