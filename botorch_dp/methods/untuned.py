r"""One untuned DP-SGD training at a public default, at the whole ``ε``: the baseline tuning must beat.

``UntunedMethod`` trains once on the private training records with DP-SGD at ``σ_f`` (the whole
``(ε, δ)``, ``cheap_plan.final_only_noise``) at PUBLIC default hyperparameters: given ones, else the
centre of the space (``training_proxy.default_configuration``: the midpoint of a linear range, the
geometric mean of a log-scaled one, the first value of each categorical). It tunes nothing and reads
no validation loss (``MethodRun.guarantees["validation"]`` is ``(0, δ)``).

``tune(method="auto", proxy=...)`` simulates it next to the tuning methods, says when tuning is
not expected to beat it, and then runs it (unless the chosen tuning method beats it there by more than
one paired standard error: ``methods.training_choice.untuned_wins``); ``tune(method="untuned")`` runs it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from torch import Tensor, nn

from botorch_dp.methods.protocol import MethodContext, MethodRun
from botorch_dp.methods.proxy_then_train import not_on_a_proxy_objective
from botorch_dp.methods.training_proxy import Configuration, TrainingProxy, default_configuration, natural_configuration
from botorch_dp.privacy.ledger import PrivacyLedger

__all__ = ["UntunedMethod", "UntunedResult"]


@dataclass
class UntunedResult:
    r"""What an untuned run releases: its (public default) hyperparameters and the trained model."""

    hyperparameters: dict[str, Any]
    model: nn.Module = dataclasses.field(repr=False)
    noise_multiplier: float


@dataclass(frozen=True)
class UntunedMethod:
    r"""One DP-SGD training at public defaults at the whole ``ε`` (see the module).

    Attributes:
        space: The objective's ``SearchSpace``.
        epsilon: ``ε`` of the run on the training records.
        delta: ``δ``.
        hyperparameters: The public defaults in natural units (``None``: the centre of the space).
    """

    space: Any
    epsilon: float
    delta: float
    hyperparameters: Mapping[str, Any] | None = None
    name: str = dataclasses.field(default="untuned", init=False)

    @property
    def gdp_mu(self) -> float | None:
        return None

    @property
    def runs_configurations(self) -> bool:
        return False  # handed one objective and a child of tune's seed; tune wraps its one release

    def with_max_trials(self, max_trials: int | None) -> UntunedMethod:
        return self  # one private training: nothing to pad

    @property
    def private_trainings(self) -> float:
        return 1.0

    def configuration(self) -> Configuration:
        r"""``(categorical choice, θ)`` of the defaults."""
        if self.hyperparameters is None:
            return default_configuration(self.space)
        return natural_configuration(self.space, self.hyperparameters, "hyperparameters")

    def natural(self) -> dict[str, Any]:
        choice, theta = self.configuration()
        values = self.space.to_natural(theta, choice=choice)
        assert isinstance(values, dict)  # one point
        return dict(values)

    def resolved(self, proxy_objective: Callable[[Tensor], Tensor] | None, context: MethodContext) -> Any:
        return self

    def simulate(self, proxy_objective: Callable[[Tensor], Tensor], context: MethodContext, seed: int) -> Tensor:
        raise not_on_a_proxy_objective(self.name)

    def final_noise(self, proxy: TrainingProxy) -> float:
        from botorch_dp.methods.cheap_plan import final_only_noise  # late: loaded when used

        rate, steps, _ = proxy.run_shape()
        return final_only_noise(epsilon=self.epsilon, delta=self.delta, sample_rate=rate, steps=steps)[0]

    def simulate_training(self, proxy: TrainingProxy, seed: int) -> float:
        r"""The scoring half's mean loss of one training at the defaults at ``σ_f`` on the proxy (public)."""
        return proxy.final_score(self.configuration(), self.final_noise(proxy), seed)

    def describe(self) -> str:
        return f"one DP-SGD training at the public defaults {self.natural()}, no tuning (1 private training)"

    def run_private(
        self,
        objective: Any,
        *,
        ledger: PrivacyLedger,
        seed: int | None = None,
        progress: bool = False,
        executor: Any = None,
    ) -> MethodRun:
        r"""Train once on ``objective``'s data at the defaults, charged to its ledger (``ledger``)."""
        from botorch_dp.methods.cheap_plan import final_only_noise
        from botorch_dp.training.dp_sgd import DPSGDConfig  # late: Opacus loads only when used

        if ledger is not objective.ledger:
            raise ValueError("ledger: the run is charged to objective.ledger; pass that ledger or none.")
        planned = objective.planned_run()
        if planned is None:
            raise ValueError("objective: an untuned DP-SGD run needs a TorchModelTuningObjective built with dp_sgd=.")
        _, rate, steps = planned
        sigma, epsilon = final_only_noise(epsilon=self.epsilon, delta=self.delta, sample_rate=rate, steps=steps)
        dp = DPSGDConfig(noise_multiplier=sigma, max_grad_norm=objective.run_dp_sgd.max_grad_norm)
        choice, theta = self.configuration()
        run = objective.with_data(objective.data, dp_sgd=dp)  # the same rows: the same ledger and numbering
        model = (run.with_choice(choice) if choice else run).train(theta, label="untuned")
        procedure = (
            f"one DP-SGD training at the public defaults {self.natural()} (no tuning), noise_multiplier = "
            f"{sigma:.4g}, q = {rate:.4g}, {steps} steps: (epsilon = {epsilon:.4g}, delta = {self.delta:.3g}) for the "
            "training records; the validation users' losses were not read"
        )
        return MethodRun(
            method=self.name,
            theta=theta,
            result=UntunedResult(self.natural(), model, sigma),
            run_id=ledger.training.run_ids()[-1],
            num_users=int(objective.num_users),
            epsilon=epsilon,
            delta=self.delta,
            description=procedure,
            configuration=choice,
            procedure=procedure,
            guarantees={"training": (epsilon, self.delta), "validation": (0.0, self.delta)},
        )
