r"""A PUBLIC proxy data set on which the methods that protect the training records are simulated.

``TrainingProxy`` trains copies of a DP-SGD objective on the proxy's public records at the noise a
method's private run would draw, and scores them on the proxy's validation users split in two
(``methods.proxy_split.ProxySplit``): the comparison SCORES a procedure by its released model's loss on
the SCORING half; no user scores a choice it took part in.

The choice's precision (issue 41): a private run that chooses among its own trained models
(``training_selection``'s trials, ``subsample_tuning``'s configurations) chooses by their mean loss on
the objective's ``n`` PRIVATE validation users (171 on the dpsgd benchmark's breast_cancer, 539 on
digits), ``n`` being public shape information. Choosing by the proxy's fitting half alone (11 and 34
users there) made the simulated choice far noisier than the real one and those methods look worse
than they are. Their simulated choice is therefore made once per scoring-half user ``u`` ("fold")
on ALL the proxy's other ``n_p - 1`` users (the fitting half and the rest of the scoring half: 21
and 67 there) and scored by the chosen model's loss at ``u`` alone (``held_out_scores``,
``held_out_choices``, ``held_out_score``): the most users a choice can be made on while ``u`` stays
out of it. Where the real run chooses on FEWER users (``n < n_p - 1``), each fold's scores get the
Gaussian top-up ``N(0, Σ̂ (1/n - 1/(n_p - 1)))`` (``Σ̂`` the models' per-user loss covariance over
the fold, by the multiplier bootstrap), so that, for Gaussian mean losses, the simulated scores
have exactly the sampling noise of the real run's; with ``protect="both"`` every score also gets
the real run's DP noise ``N(0, (C/(n μ))²)`` on losses clipped to ``[0, C]``. Where the real run
chooses on MORE users than ``n_p - 1``, no proxy-only simulation can be as precise (the proxy's users
carry no more information about the models than ``n_p - 1`` users do; removing noise would need a
model of the trials' losses; SIMEX-style extrapolation to ``n`` recovered under a third of the gap in
a Gaussian check), so the choice is simulated at ``n_p - 1`` users: about twice as precise as the
fitting half, still less precise than the real run (the residual bias is against these methods).
``proxy_then_train`` chooses on the proxy's users in its real run too and is simulated on the
fitting half (``n_p/2`` against its real ``n_p``).

The noise: a DP-SGD run on the private ``m`` records at ``(σ, q = 1/k, steps)`` adds noise
``σ C`` to the sum of an expected batch of ``q m`` clipped gradients; the proxy's copy runs at the
same ``q`` and steps (``k`` batches per epoch) with ``σ m_p/m``, so the noise per expected batch,
relative to the batch, is the private run's (as ``methods.cheap_tuning`` simulates). Every copy has
its own fresh ledger; a proxy that shares a training record with the private data (whose copy
would charge the private ledger) is refused before anything trains. The private objective is used
for its public shape only (``planned_run``, ``num_training_records``, ``with_data``): it is never
evaluated here.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from botorch_dp.methods.proxy_split import ProxySplit
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.utils import child_seeds

__all__ = ["Configuration", "TrainingProxy", "default_configuration", "natural_configuration", "random_configurations"]

#: ``(categorical choice, θ in the unit cube)``.
Configuration = tuple[dict[str, Any], Tensor]


def random_configurations(space: Any, count: int, seed: int | None) -> list[Configuration]:
    r"""``count`` public random configurations of ``space``: θ uniform on the unit cube (log-uniform on
    log ranges in natural units) and a uniform choice of every categorical not fixed; ``seed=None``
    draws from OS entropy."""
    rng = np.random.default_rng(None if seed is None else [int(seed), 4102])
    choices = space.configurations()
    return [
        (dict(choices[int(rng.integers(len(choices)))]), torch.as_tensor(rng.random(space.dim), dtype=torch.float64))
        for _ in range(int(count))
    ]


def default_configuration(space: Any) -> Configuration:
    r"""The public default of an untuned run: the centre of the unit cube (the midpoint of a linear
    range, the geometric mean of a log-scaled one) and the first configuration of the categoricals."""
    return dict(space.configurations()[0]), torch.full((space.dim,), 0.5, dtype=torch.float64)


def natural_configuration(space: Any, values: Any, name: str) -> Configuration:
    r"""One configuration given in natural units (a mapping of hyperparameter names to values) as
    ``(categorical choice, θ in the unit cube)``; ``name`` is the argument named in an error (not a
    mapping, or a continuous or integer hyperparameter missing)."""
    if not isinstance(values, Mapping):
        raise ValueError(f"{name} must be a mapping of hyperparameter names to values, got {values!r}.")
    categorical = {h.name for h in space.categoricals}
    choice = {k: v for k, v in values.items() if k in categorical and k not in space.fixed}
    continuous = {k: v for k, v in values.items() if k not in categorical}
    missing = sorted(set(space.names) - set(continuous))
    if missing:
        raise ValueError(f"{name} lacks the hyperparameter(s) {missing}, got {dict(values)!r}.")
    return choice, space.from_natural(continuous).to(torch.float64)


@dataclass(frozen=True)
class TrainingProxy:
    r"""The PUBLIC proxy data and the private objective's public shape (see the module).

    Attributes:
        objective: The private ``TorchModelTuningObjective`` built with ``dp_sgd=`` (never evaluated).
        data: The proxy's ``ClassificationData`` (public: its training split trains the copies, its
            validation users are split into a fitting and a scoring half).
        split: The public split of the proxy's validation users.
    """

    objective: Any
    data: Any
    split: ProxySplit = ProxySplit()

    @property
    def num_proxy_records(self) -> int:
        return len(self.data.y_train)

    @property
    def num_proxy_users(self) -> int:
        return len(self.data.y_val)

    def run_shape(self) -> tuple[float, int, int]:
        r"""``(q, steps, k)`` of a run on the private data (public: the objective's training config)."""
        planned = self.objective.planned_run()
        if planned is None:
            raise ValueError("objective: the training methods need a TorchModelTuningObjective built with dp_sgd=.")
        _, rate, steps = planned
        return float(rate), int(steps), round(1.0 / rate)

    def copy(self, noise_multiplier: float, seed: int, rows: Tensor | None = None) -> Any:
        r"""The objective on the proxy (``rows`` of its training split, default all) at the private run's
        ``(q, steps)`` with ``σ m_p/m`` (``noise_multiplier`` is the PRIVATE run's σ), its own ledger,
        seeded by ``seed`` (public randomness on public data)."""
        from botorch_dp.training.dp_sgd import DPSGDConfig  # late: Opacus loads only when used

        objective = self.objective
        k = self.run_shape()[2]
        scaled = noise_multiplier * self.num_proxy_records / objective.num_training_records
        dp = DPSGDConfig(noise_multiplier=scaled, max_grad_norm=objective.run_dp_sgd.max_grad_norm)
        training = dataclasses.replace(objective.training, batches_per_epoch=k)
        data = self.data
        if rows is not None:
            data = dataclasses.replace(data, X_train=data.X_train[rows], y_train=data.y_train[rows])
        with warnings.catch_warnings():  # a seeded copy on public data: no guarantee is at stake
            warnings.simplefilter("ignore", PrivacyWarning)
            copy = objective.with_data(data, dp_sgd=dp, training=training, noise_seed=int(seed))
        if copy.ledger is objective.ledger:
            raise ValueError(
                "proxy shares training record(s) with the objective's private data (its copy would charge the "
                "private ledger); it is not public. Give a proxy with no training record in common."
            )
        return copy

    def losses(self, copy: Any, config: Configuration) -> Tensor:
        r"""The ``n_p`` per-user validation losses of one model trained by ``copy`` at ``config`` (public)."""
        choice, theta = config
        bound = copy.with_choice(choice) if choice else copy
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)
            return torch.as_tensor(bound(theta.reshape(1, -1))[0], dtype=torch.float64)

    def fitting_mean(self, losses: Tensor) -> float:
        r"""The mean loss of the FITTING half (what a simulated procedure chooses by)."""
        return float(losses[self.split.halves(self.num_proxy_users)[0]].mean())

    def scoring_mean(self, losses: Tensor) -> float:
        r"""The mean loss of the SCORING half (what the comparison scores a released model by)."""
        return float(losses[self.split.halves(self.num_proxy_users)[1]].mean())

    @staticmethod
    def stream(seed: int, part: int) -> int:
        r"""A public child seed of a repeat's ``seed`` for one part of a simulation."""
        return int(child_seeds([int(seed), 4101, int(part)], 1)[0])

    def trained(
        self, configs: list[Configuration], noise_multiplier: float, seed: int, rows: Tensor | None = None
    ) -> list[Tensor]:
        r"""The ``n_p`` per-user losses of one model per configuration, trained at ``noise_multiplier`` (the
        private run's σ) on ``rows`` of the proxy (default all) by one seeded copy (public)."""
        copy = self.copy(noise_multiplier, self.stream(seed, 0), rows)
        return [self.losses(copy, config) for config in configs]

    def held_out_scores(
        self,
        per_model: list[Tensor],
        num_users: int,
        seed: int,
        *,
        score_noise: float = 0.0,
        score_clip: float | None = None,
    ) -> tuple[Tensor, Tensor]:
        r"""The scores a private run choosing among these models on ``num_users`` validation users would
        compare, simulated once per SCORING-half user ``u`` on the proxy's other ``n_p - 1`` users (see the
        module).

        A model's score in the fold of ``u`` is its mean loss over the users other than ``u`` (losses
        clipped to ``[0, score_clip]`` when the private run clips them), plus, when the private run chooses
        on fewer users than that (``num_users < n_p - 1``), the Gaussian top-up ``N(0, Σ̂ (1/n - 1/(n_p - 1)))``
        (``Σ̂``: the models' covariance of per-user losses over the fold's users, drawn by the Gaussian
        multiplier bootstrap, so the models stay correlated as they are on shared users), plus
        ``N(0, score_noise²)`` per model (the private score's DP noise). A model with a non-finite loss
        scores ``inf`` (it ranks last).

        Returns:
            ``(users, scores)``: the scoring half's user indices and the ``|users| x K`` fold scores.
        """
        n_p = self.num_proxy_users
        users = self.split.halves(n_p)[1]
        losses = torch.stack([torch.as_tensor(v, dtype=torch.float64) for v in per_model])  # K x n_p
        if score_clip is not None:
            losses = losses.clamp(0.0, score_clip)
        finite = torch.isfinite(losses).all(-1)
        losses = torch.where(finite[:, None], losses, torch.zeros_like(losses))
        others = n_p - 1
        means = (losses.sum(-1, keepdim=True) - losses[:, users]).T / others  # folds x K
        generator = torch.Generator().manual_seed(self.stream(seed, 1))
        scores = means.clone()
        if int(num_users) < others:  # the real run's sampling noise exceeds the fold's own: top it up
            weights = torch.randn(len(users), n_p, generator=generator, dtype=torch.float64)
            weights[torch.arange(len(users)), users] = 0.0  # the held-out user takes no part in its fold
            scale = math.sqrt((1.0 / int(num_users) - 1.0 / others) / (others - 1))
            scores += scale * (weights @ losses.T - weights.sum(-1, keepdim=True) * means)
        scores += float(score_noise) * torch.randn(scores.shape, generator=generator, dtype=torch.float64)
        return users, torch.where(finite[None, :], scores, torch.full_like(scores, math.inf))

    def held_out_choices(
        self,
        per_model: list[Tensor],
        num_users: int,
        seed: int,
        *,
        score_noise: float = 0.0,
        score_clip: float | None = None,
    ) -> tuple[Tensor, Tensor]:
        r"""``(users, choices)``: for each scoring-half user, the index of the model with the lowest
        ``held_out_scores`` in that user's fold (what the private run would choose)."""
        users, scores = self.held_out_scores(per_model, num_users, seed, score_noise=score_noise, score_clip=score_clip)
        return users, scores.argmin(-1)

    def final_losses(self, configs: list[Configuration], noise_multiplier: float, seed: int) -> list[Tensor]:
        r"""The ``n_p`` per-user losses of one fresh model per configuration, each trained at ``config`` on the
        whole proxy training split at ``noise_multiplier`` (the private final run's σ), in turn by one copy."""
        copy = self.copy(noise_multiplier, self.stream(seed, 2))
        return [self.losses(copy, config) for config in configs]

    def final_score(self, config: Configuration, noise_multiplier: float, seed: int) -> float:
        r"""The scoring-half mean loss of one fresh model trained at ``config`` on the whole proxy training
        split at ``noise_multiplier`` (the private final run's σ)."""
        return self.scoring_mean(self.final_losses([config], noise_multiplier, seed)[0])

    def held_out_score(self, per_model: list[Tensor], users: Tensor, choices: Tensor) -> float:
        r"""The mean, over the scoring half's users, of the loss of the model each one's fold chose (raw
        losses: what the comparison scores a released model by)."""
        losses = torch.stack([torch.as_tensor(v, dtype=torch.float64) for v in per_model])
        return float(losses[choices, users].mean())
