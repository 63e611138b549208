r"""Trials of a private selection over whole DP-SGD runs, trained under a charge that covers them all.

``TorchModelTuningObjective`` charges one DP-SGD record per training (``objectives.charged``).
Private selection (``methods.training_runs.select_training_runs``) must not: the
number of records would be its hidden number of trials ``K``. It records the whole
procedure's curve once, before the first trial, and then trains each trial with
``train_covered(hyperparameters, cover)``, which records nothing. Why that is sound:

* the selection's bound (Papernot & Steinke) covers ANY number of trials, each of which is
  a DP-SGD run whose RDP curve lies below one reference curve, as long as only the best
  trial's output is released; the record made before the first trial IS the charge of
  every trial it will run;
* ``train_covered`` trains only under an open ``TrainingCover`` (made by the selection after
  it recorded its curve, closed when it ends), whose record it finds in this objective's own
  ledger, and only a run whose own curve (``σ``, ``q``, ``T`` from the hyperparameters) lies
  below the cover's reference at every grid order; all of it is checked before the run
  touches the training data, and Opacus's history of the run must then be the planned run.

What a cover cannot check: that the caller releases only the winner. It is made only inside
``select_training_runs`` and never leaves it. Runs trained this way are not counted in
``runs``/``num_trainings`` (those counts would be ``K``).

Training hyperparameters: ``epochs``, ``batch_size``, ``max_grad_norm`` and ``noise_multiplier``
can be searched (``Hyperparameter.target="training"``, inferred from these names) only here: a
trial's run shape then depends on the first two, and the selection bounds every possible shape of
the space by the pointwise maximum of their curves (``possible_run_shapes``). The clip norm does
not change a run's curve (the noise scales with it). A searched noise multiplier ``σ`` does: the
selection charges the curve at the space's least ``σ`` (``noise_multiplier_range``), which bounds
every trial, since a run at ``σ' ≥ σ`` is the run at ``σ`` with independent Gaussian noise of
variance ``(σ'² − σ²)C²`` added to each step's noisy sum (post-processing); the space's least ``σ``
must therefore be at or above the least the selection's budget allows. DP-GIBO's charged path
refuses them all (``refuse_training_routes``): it charges one fixed run per evaluation.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

from botorch_dp.objectives.charged import same_ledger
from botorch_dp.objectives.discrete import Categorical, Integer
from botorch_dp.privacy.ledger import DPSGDRun
from botorch_dp.training.cover import TrainingCover, train_planned_run
from botorch_dp.training.dp_sgd import DPSGDConfig, TrainingConfig, model_dtype, planned_dp_run

__all__ = ["SCORES", "CoveredTraining"]

#: What a trial is scored by: the mean (capped) validation loss, or the classification error.
SCORES: tuple[str, ...] = ("loss", "error")


class CoveredTraining:
    r"""Mixin of ``TorchModelTuningObjective``: selection trials trained under a ``TrainingCover``.

    Uses the objective's ``space``, ``routes``, ``data``, ``training``, ``run_dp_sgd``,
    ``model_fn``, ``optimizer``, ``loss_fn``, ``split_hyperparameters`` and ledger.
    """

    space: Any
    routes: dict[str, str]
    data: Any
    training: TrainingConfig
    run_dp_sgd: DPSGDConfig | None

    # ------------------------------------------------------------------ training hyperparameters
    def training_routes(self) -> list[str]:
        r"""The names of the space's hyperparameters that set the DP-SGD run itself."""
        return [name for name, target in self.routes.items() if target == "training"]

    def refuse_training_routes(self) -> None:
        r"""Refuse (``ValueError``) a charged evaluation of a space that searches the run itself."""
        names = self.training_routes()
        if names:
            raise ValueError(
                f"space: {names} set the training run itself (epochs, batch size, clip norm, noise multiplier), "
                "which each "
                "charged evaluation trains at its fixed TrainingConfig; only private selection over whole "
                "runs searches them (botorch_dp.methods.training_runs.select_training_runs, or tune with "
                "protect='training' or 'both' and no proxy)."
            )

    def _training_values(self, name: str) -> list[Any]:
        r"""Every value ``name`` can take in the space (the config's own without a hyperparameter)."""
        default = getattr(self.training, name) if name in ("epochs", "batch_size") else None
        if self.routes.get(name) != "training":
            return [default]
        h = next(h for h in self.space.hyperparameters if h.name == name)
        if name in self.space.fixed:
            values = [self.space.fixed[name]]
        elif isinstance(h, Integer):
            values = list(range(h.low, h.high + 1))
        elif isinstance(h, Categorical):
            values = list(h.choices)
        else:
            values = [h.lower, h.upper]
        if name in ("max_grad_norm", "noise_multiplier"):
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < math.inf for v in values):
                raise ValueError(f"space: {name} must take positive finite values only, got {h!r}.")
        elif not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in values):
            raise ValueError(f"space: {name} must be an Integer or a Categorical of positive ints, got {h!r}.")
        return values

    def possible_run_shapes(self) -> list[tuple[float, int]]:
        r"""The ``(sample_rate, steps)`` of every DP-SGD run a trial of the space can be, up to dominance.

        A run's RDP curve grows with its steps at a fixed rate, so for each rate
        ``q = 1/⌈m/b⌉`` (one per distinct ``⌈m/b⌉`` over the batch sizes ``b``) the largest
        number of epochs bounds the others; the clip norm does not change the curve (the noise
        scales with it). Public: it reads the space and ``m`` only.

        Returns:
            The shapes, by increasing sample rate.
        """
        epochs = max(self._training_values("epochs"))
        self._training_values("max_grad_norm")  # checked
        self.noise_multiplier_range()  # checked
        shapes = set()
        for batch_size in self._training_values("batch_size"):
            config = dataclasses.replace(self.training, epochs=epochs, batch_size=batch_size)
            _, rate, steps = planned_dp_run(len(self.data.y_train), config, DPSGDConfig(noise_multiplier=1.0))
            shapes.add((rate, steps))
        return sorted(shapes)

    def noise_multiplier_range(self) -> tuple[float, float] | None:
        r"""``(σ_min, σ_max)``: the least and largest DP-SGD noise multiplier a trial of the space can
        have, or ``None`` when the space does not search ``noise_multiplier`` (the selection then
        calibrates one ``σ`` for every trial). Public: it reads the space only.

        Raises:
            ValueError: ``noise_multiplier`` takes a value that is not positive and finite.
        """
        if self.routes.get("noise_multiplier") != "training":
            return None
        values = [float(v) for v in self._training_values("noise_multiplier")]
        return min(values), max(values)

    def _checked_trial(self, hyperparameters: Mapping[str, Any]) -> dict[str, Any]:
        r"""``hyperparameters`` checked to be a point of the space (``ValueError`` naming what is wrong)."""
        if not isinstance(hyperparameters, Mapping):
            raise ValueError(f"hyperparameters must be a mapping of names to values, got {hyperparameters!r}.")
        names = [h.name for h in self.space.hyperparameters]
        unknown = sorted(set(hyperparameters) - set(names))
        if unknown:
            raise ValueError(f"hyperparameters: {unknown} are not in the space ({names}).")
        self.space.from_natural(hyperparameters)  # range of every continuous and integer value
        for h in self.space.categoricals:
            if h.name not in hyperparameters:
                raise ValueError(f"hyperparameters lack the categorical {h.name!r}.")
            value = h.check(hyperparameters[h.name])
            if h.name in self.space.fixed and value != self.space.fixed[h.name]:
                raise ValueError(f"{h.name}={value!r}: the space fixes it to {self.space.fixed[h.name]!r}.")
        return {name: hyperparameters[name] for name in names}

    def trial_settings(
        self, hyperparameters: Mapping[str, Any], noise_multiplier: float
    ) -> tuple[TrainingConfig, DPSGDConfig]:
        r"""The ``TrainingConfig`` and ``DPSGDConfig`` of a trial at natural ``hyperparameters`` (checked
        to be a point of the space): its noise multiplier is the trial's own where the space searches
        ``noise_multiplier``, else ``noise_multiplier`` (the cover's)."""
        if self.run_dp_sgd is None:
            raise ValueError("A selection trial trains with DP-SGD: build the objective with dp_sgd=DPSGDConfig(...).")
        params = self._checked_trial(hyperparameters)
        run = {name: params[name] for name in self.training_routes()}
        config = dataclasses.replace(
            self.training,
            epochs=int(run.get("epochs", self.training.epochs)),
            batch_size=int(run.get("batch_size", self.training.batch_size)),
        )
        clip = float(run.get("max_grad_norm", self.run_dp_sgd.max_grad_norm))
        sigma = float(run.get("noise_multiplier", noise_multiplier))
        return config, DPSGDConfig(noise_multiplier=sigma, max_grad_norm=clip)

    # ------------------------------------------------------------------ covered training
    def train_covered(
        self, hyperparameters: Mapping[str, Any], cover: TrainingCover, *, noise_seed: int | None = None
    ) -> nn.Module:
        r"""Train one selection trial at natural ``hyperparameters`` WITHOUT a record of its own.

        Only under an open ``cover`` whose record this objective's ledger holds, and only a run
        the cover covers (``TrainingCover.check_trial``; see the module); checked before the
        run touches the data. Not counted in ``runs``/``num_trainings``. The run's noise
        multiplier is the trial's own where the space searches it, else the cover's.

        Args:
            hyperparameters: ``{name: value}``, every hyperparameter of the space (categoricals too).
            cover: The ``TrainingCover`` of the running selection.
            noise_seed: The run's DP-SGD seed (``None``: OS entropy; see ``train_model``).

        Returns:
            The trained model (eval mode).

        Raises:
            RuntimeError: No open cover, no covering record, a run above the reference, or a run
                that Opacus accounted differently from its plan.
            ValueError: Hyperparameters outside the space, or an objective without DP-SGD.
        """
        if not isinstance(cover, TrainingCover) or not cover.is_open:
            raise RuntimeError(
                "train_covered trains only under the open TrainingCover of a running private selection "
                "(select_training_runs); to train a run on its own, use train(theta), which charges it."
            )
        ledger = self._charging_ledger()  # type: ignore[attr-defined]
        if not same_ledger(cover.ledger, ledger):
            raise ValueError("cover: its record is in another ledger than this objective's.")
        training, dp_sgd = self.trial_settings(hyperparameters, cover.noise_multiplier)
        run = DPSGDRun.checked(*planned_dp_run(len(self.data.y_train), training, dp_sgd))
        cover.check_trial(ledger, run)
        params = {k: v for k, v in self._checked_trial(hyperparameters).items() if k not in self.training_routes()}
        optimizer_kwargs, model_kwargs = self.split_hyperparameters(params)  # type: ignore[attr-defined]
        return train_planned_run(
            lambda: self.model_fn(**model_kwargs),  # type: ignore[attr-defined]
            self.data.X_train,
            self.data.y_train,
            training,
            dp_sgd=dp_sgd,
            planned=run,
            charged_as=f"a covered trial planned as {run}",
            noise_seed=noise_seed,
            optimizer=self.optimizer,  # type: ignore[attr-defined]
            optimizer_kwargs=optimizer_kwargs,
            loss_fn=self.loss_fn,  # type: ignore[attr-defined]
            seed_warned=True,  # an explicit seed: the selection warned once
        )

    def per_user_scores(self, model: nn.Module, score: str = "loss") -> Tensor:
        r"""SENSITIVE: each validation user's score under ``model``, lower is better.

        Args:
            model: A trained model.
            score: ``"loss"`` (the capped per-user loss) or ``"error"`` (1 if the predicted class is
                wrong, else 0; classification only).

        Returns:
            An ``n`` float64 tensor.
        """
        if score not in SCORES:
            raise ValueError(f"score must be one of {SCORES}, got {score!r}.")
        X, y = self.data.X_val, self.data.y_val
        if score == "loss":
            return self._losses(model, X, y)  # type: ignore[attr-defined]
        if not self.data.is_classification:
            raise ValueError("score='error' needs class labels; use score='loss'.")
        with torch.no_grad():
            wrong = model(X.to(model_dtype(model))).argmax(-1) != y
        return wrong.to(torch.float64)
