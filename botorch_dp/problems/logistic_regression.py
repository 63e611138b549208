r"""Private tuning of AMP-trained logistic regression: the tuning objectives and their losses.

``AMPTuningObjective`` maps θ (the unit cube over ``log10 λ``, optionally ``log10 C``) to
the ``q x n`` per-user logistic losses of the VALIDATION users under a model trained at
each θ with AMP (objective perturbation; Redberg, Koskela & Wang, "Improving the Privacy
and Practicality of Objective Perturbation for Differentially Private Linear Learners") on
the TRAINING split; every training run is charged to a ``PrivacyLedger`` with its RDP
curve before it trains (``objectives.charged``, under any executor). σ is
calibrated per (λ, C) so that every run's RDP curve lies below one public reference curve
(``AMPRunBudget``), so ``k`` runs cost at most what ``k`` reference runs cost.
``DPSGDTuningObjective`` is the Opacus DP-SGD counterpart (θ = the learning rate).

The data (``LogisticData``, ``load_logistic_data``) live in ``logistic_data`` and the per-run
budgets (``AMPRunBudget``, ``plan_amp_runs``, ``plan_amp_selection``, the DP-SGD selection
noise) in ``run_budgets``; this module holds the objectives and re-exports those names.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from gpytorch.kernels import Kernel, RBFKernel, ScaleKernel
from torch import Tensor, nn

from botorch_dp.objectives.charged import ChargedTraining, TrainingTicket, amp_training_event, same_event
from botorch_dp.objectives.non_private import NaturalEvaluation, NonPrivateMetrics
from botorch_dp.objectives.search_space import Hyperparameter, SearchSpace, SearchSpaceObjective
from botorch_dp.objectives.torch_classifier import TorchModelTuningObjective
from botorch_dp.privacy.checks import check_choice, check_positive, check_positive_int
from botorch_dp.privacy.ledger import PrivacyLedger, TrainingMechanism
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.problems.logistic_data import (
    LOGISTIC_DATASETS,
    LogisticData,
    breast_cancer_ranges,
    load_logistic_data,
    synthetic_logistic,
    unit_rows,
)
from botorch_dp.problems.run_budgets import (
    AMPRunBudget,
    amp_sigma_for_curve,
    dp_sgd_curve,
    dp_sgd_noise_for_selection,
    plan_amp_budget,
    plan_amp_runs,
    plan_amp_selection,
    selection_curve,
)
from botorch_dp.training.dp_sgd import DPSGDConfig, TrainingConfig
from botorch_dp.training.objective_perturbation import AMPConfig, AMPResult, fit_amp

__all__ = [
    "LOGISTIC_DATASETS",
    "AMPRunBudget",
    "AMPTuningObjective",
    "DPSGDTuningObjective",
    "LogisticData",
    "amp_sigma_for_curve",
    "breast_cancer_ranges",
    "dp_sgd_curve",
    "dp_sgd_noise_for_selection",
    "load_logistic_data",
    "logistic_losses",
    "plan_amp_budget",
    "plan_amp_runs",
    "plan_amp_selection",
    "selection_curve",
    "synthetic_logistic",
    "unit_rows",
]


# ============================================================================ losses
def logistic_losses(scores: Tensor, y: Tensor, *, loss_cap: float) -> Tensor:
    r"""Per-example logistic loss ``log(1 + e^{−(2y−1)u})`` of margins ``u``, in ``[0, cap]``.

    Written as ``softplus((1 − 2y)u)``, which is finite for finite ``u`` and never NaN for
    infinite ``u``; a NaN (impossible for AMP's finite releases) becomes ``loss_cap``.

    Args:
        scores: ``... x n`` margins ``u = x̃ᵀθ``.
        y: ``n`` labels in {0, 1}.
        loss_cap: ``> 0``, the public cap.

    Returns:
        ``... x n`` float64 losses in ``[0, loss_cap]``.
    """
    u = scores.to(torch.float64)
    loss = torch.nn.functional.softplus((1.0 - 2.0 * y.to(torch.float64)) * u)
    return torch.nan_to_num(loss, nan=loss_cap).clamp(0.0, loss_cap)


# ============================================================================ AMP objective
def _only_budget_weight(options: dict[str, Any]) -> None:
    r"""AMP runs take one option, ``budget_weight``: ``TypeError`` naming any other."""
    if options:
        raise TypeError(f"An AMP run takes only budget_weight as an option, got {sorted(options)}.")


@functools.lru_cache(maxsize=16)
def _selection_plan(
    epsilon: float,
    delta: float,
    mean_trials: float,
    distribution: str,
    tnb_eta: float,
    clip: float,
    beta: float,
    tau: float,
    sigma_out: float,
) -> AMPRunBudget:
    r"""``plan_amp_selection`` at these public settings, planned once per process (it is deterministic)."""
    return plan_amp_selection(
        epsilon, delta, mean_trials=mean_trials, distribution=distribution, tnb_eta=tnb_eta,
        clip=clip, beta=beta, tau=tau, sigma_out=sigma_out,
    )  # fmt: skip


class AMPTuningObjective(ChargedTraining, SearchSpaceObjective, NaturalEvaluation):
    r"""θ (``q x d`` unit cube) ↦ ``q x n`` validation losses of AMP logistic regressions.

    The unit cube maps to ``log10 λ`` (and, with ``clip_range``, ``log10 C``) through a
    ``SearchSpace``. Each row of θ trains ONE AMP model on the training split: ``λ`` (and
    ``C``) from θ, ``σ = budget.sigma_at(λ, C)`` (so the run's RDP curve lies below the
    budget's reference curve), ``τ`` and ``σ_out`` from the budget. Every run is charged to
    the ledger with its exact curve before it trains (``objectives.charged``: a batch admitted
    whole and recorded before dispatch, under any executor; ``train`` records through the
    mechanism at the draw of its perturbation), run id ``f"{run_prefix}-{i:04d}"``,
    numbered from the ledger as in ``TorchModelTuningObjective``. The losses are the validation users' logistic losses
    under the RELEASED parameters, in ``[0, loss_cap]``.

    The returned losses are SENSITIVE (validation side); pass the objective to
    ``DPGIBO.run`` or ``private_random_search``. The released models (``results``) are
    public on the validation side and covered on the training side by the ledger.

    Composition: when the number of runs and their weights are fixed in advance (``k``
    units), every run lies below its weight times the reference curve ``r`` whatever λ
    the tuner picks, so the adaptive composition is at most ``k·r`` at every order and
    ``budget.epsilon(δ, k)`` is the training guarantee. The ledger's own sum of the exact
    curves is never larger; a ledger budget filter, if set, checks every run before
    training at its one fixed order.

    Args:
        data: The ``LogisticData`` (unit rows).
        budget: The per-run ``AMPRunBudget``.
        lam_range: ``(λ_lo, λ_hi)`` searched log-uniformly; ``λ_lo`` must exceed
            ``budget.min_lam()`` (default: ``(1.05·budget.min_lam(), 100·budget.lam)``).
        clip_range: ``(C_lo, C_hi)`` to tune ``C`` too (log-uniform); ``None``: ``C`` fixed
            at the budget's.
        ledger: The ``PrivacyLedger`` (a fresh one if None).
        noise_seed: ``None`` (default): every run's noise from OS entropy. An integer:
            run ``i`` uses the child seed ``child_seeds([noise_seed, i], 1)[0]`` (a
            ``PrivacyWarning`` here, once).
        loss_cap: Cap of the per-user losses.
        max_iter: ``AMPConfig.max_iter``.
        run_prefix: Prefix of the ledger's run ids.
    """

    def __init__(
        self,
        data: LogisticData,
        budget: AMPRunBudget,
        *,
        lam_range: tuple[float, float] | None = None,
        clip_range: tuple[float, float] | None = None,
        ledger: PrivacyLedger | None = None,
        noise_seed: int | None = None,
        loss_cap: float = 3.0,
        max_iter: int = 2000,
        run_prefix: str = "amp",
    ) -> None:
        if not isinstance(budget, AMPRunBudget):
            raise ValueError(f"budget must be an AMPRunBudget, got {type(budget).__name__}.")
        self.data = data
        self.budget = budget
        lam_floor = budget.min_lam()
        lo, hi = (1.05 * lam_floor, 100.0 * budget.lam) if lam_range is None else map(float, lam_range)
        if not (math.isfinite(lo) and math.isfinite(hi) and lam_floor < lo < hi):
            raise ValueError(
                f"lam_range must satisfy {lam_floor:.6g} (the smallest lambda the budget allows) "
                f"< lower < upper, got {(lo, hi)}."
            )
        params = [Hyperparameter("lam", lo, hi, log_scale=True)]
        if clip_range is not None:
            c_lo, c_hi = map(float, clip_range)
            params.append(Hyperparameter("clip", c_lo, c_hi, log_scale=True))
        self.space = SearchSpace(params)
        self.ledger = ledger if ledger is not None else PrivacyLedger()
        if noise_seed is not None:
            warnings.warn(
                "An AMP noise seed was given: the training noise of every run is reproducible, and "
                "the guarantee assumes the seed stays secret. Leave noise_seed=None for OS entropy.",
                PrivacyWarning,
                stacklevel=2,
            )
        self.noise_seed = None if noise_seed is None else int(noise_seed)
        self.loss_cap = check_positive(loss_cap, "loss_cap", allow_inf=False)
        self.max_iter = check_positive_int(max_iter, "max_iter")
        if not isinstance(run_prefix, str) or not run_prefix or any(ch.isspace() for ch in run_prefix):
            raise ValueError(f"run_prefix must be a non-empty string without spaces, got {run_prefix!r}.")
        self.run_prefix = run_prefix
        #: The released ``AMPResult`` of every run this object trained in this process, in order.
        self.results: list[AMPResult] = []
        #: The ledger id of each of ``results``.
        self.run_ids: list[str] = []

    _PER_PROCESS = ("results", "run_ids")

    def recommended_kernel(self, lengthscale: float = 0.3, outputscale: float = 0.25) -> Kernel:
        r"""A scaled RBF kernel on the unit cube with fixed, public hyperparameters.

        Args:
            lengthscale: In unit-cube coordinates.
            outputscale: Prior variance of a per-user loss curve.
        """
        kernel = ScaleKernel(RBFKernel(ard_num_dims=self.dim)).to(torch.float64)
        kernel.base_kernel.lengthscale = torch.full((1, self.dim), float(lengthscale), dtype=torch.float64)
        kernel.outputscale = float(outputscale)
        return kernel.requires_grad_(False)

    # ------------------------------------------------------------------ training
    def config_at(self, theta: Tensor, budget_weight: float = 1.0) -> AMPConfig:
        r"""The public ``AMPConfig`` of a run at ``theta`` (a ``d`` unit-cube point) whose
        RDP curve lies below ``budget_weight`` times the budget's reference curve."""
        theta = torch.as_tensor(theta, dtype=torch.float64).reshape(self.dim)
        if not torch.isfinite(theta).all():
            raise ValueError(f"theta must be finite, got {theta.tolist()}.")
        params = self.space.to_natural(theta)
        if not isinstance(params, dict):  # a d tensor gives one {name: value}
            raise TypeError(f"SearchSpace.to_natural of a {self.dim}-vector gave {type(params).__name__}, not a dict.")
        lam = params["lam"]
        clip = params.get("clip", self.budget.clip)
        sigma = self.budget.sigma_at(lam, clip, weight=budget_weight)
        if sigma is None:  # cannot happen inside lam_range (checked above); kept as a guard
            raise ValueError(f"lambda = {lam:g} is below what the budget allows; nothing was trained.")
        return self._config(lam, clip, sigma)

    def _config(self, lam: float, clip: float, sigma: float) -> AMPConfig:
        return AMPConfig(
            lam=lam,
            sigma=sigma,
            loss="logistic",
            clip=clip,
            feature_bound=1.0,
            fit_intercept=True,
            sigma_out=self.budget.sigma_out,
            tau=self.budget.tau,
            max_iter=self.max_iter,
        )

    def planned_event(self, theta: Tensor, budget_weight: float = 1.0, **options: Any) -> TrainingMechanism:
        r"""The ledger event (``TrainingMechanism``) of a run at ``theta``, known before it trains."""
        _only_budget_weight(options)
        return amp_training_event(self.config_at(theta, budget_weight), self.data.num_features + 1)

    def _train_with(
        self, theta: Tensor, ticket: TrainingTicket, meter: Any = None, budget_weight: float = 1.0, **options: Any
    ) -> AMPResult:
        _only_budget_weight(options)
        if ticket.run_id is None:  # an AMP run always has its mechanism, so its ticket always has a run id
            raise ValueError(f"An AMP run is charged under a run id, got a ticket with run_id=None ({ticket!r}).")
        config = self.config_at(theta, budget_weight)
        generator = None if ticket.noise_seed is None else torch.Generator().manual_seed(ticket.noise_seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)  # warned once, in __init__
            result = fit_amp(
                self.data.X_train, self.data.y_train, config, generator=generator, meter=meter, run_id=ticket.run_id
            )
        if not same_event(amp_training_event(config, result.theta.numel()), ticket.event):
            raise RuntimeError(f"AMP ran {result.description!r} for run {ticket.run_id!r}, charged as {ticket.event}.")
        self.results.append(result)
        self.run_ids.append(ticket.run_id)
        return result

    def _validation_losses(self, result: AMPResult) -> Tensor:
        return self.losses_of(result, self.data.X_val, self.data.y_val)

    def train(self, theta: Tensor, *, label: str | None = None, budget_weight: float = 1.0) -> AMPResult:
        r"""Train and release one AMP model at ``theta``, charged on its own (recorded at its draw).

        Args:
            theta: A ``d`` unit-cube point.
            label: Optional label appended to the run id (e.g. ``"final"``).
            budget_weight: The run's curve lies below this multiple of the reference
                curve (default 1; e.g. a larger share for the final model).

        Returns:
            The ``AMPResult`` (its ``theta`` is the released model).
        """
        return self._train_alone(theta, label, budget_weight=budget_weight)

    # ------------------------------------------------------------------ private selection over whole runs
    def selection_budget(
        self, epsilon: float, delta: float, *, mean_trials: float, distribution: str, tnb_eta: float = 1.0
    ) -> AMPRunBudget:
        r"""The per-trial budget of a Papernot–Steinke selection over AMP trials at ``(ε, δ)``
        (``plan_amp_selection`` with this objective's public AMP constants ``C``, ``β``, ``τ``, ``σ_out``; the
        objective's own budget is not used otherwise), checked BEFORE anything is charged: every ``λ`` of the
        space must have a ``σ`` below the new reference (``ValueError`` naming ``lam_range`` otherwise)."""
        b = self.budget
        budget = _selection_plan(
            float(epsilon), float(delta), float(mean_trials), distribution, float(tnb_eta), b.clip, b.beta, b.tau,
            b.sigma_out,
        )  # fmt: skip
        lowest = self.space.to_natural(torch.zeros(self.dim, dtype=torch.float64))  # the space's least λ
        if not isinstance(lowest, dict):  # a d tensor gives one {name: value}
            raise TypeError(f"SearchSpace.to_natural of a {self.dim}-vector gave {type(lowest).__name__}, not a dict.")
        lam_floor, lo = budget.min_lam(), float(lowest["lam"])
        if not lo > lam_floor:
            raise ValueError(
                f"lam_range lower bound {lo:.6g}: the selection's per-trial budget at epsilon = {epsilon:g} "
                f"(E[K] = {mean_trials:g}) allows only lambda > {lam_floor:.6g}; build the objective with a "
                "larger lam_range (e.g. budget=plan_amp_selection(epsilon, delta, mean_trials=...))."
            )
        return budget

    def train_covered(self, hyperparameters: Any, cover: Any, *, noise_seed: int | None = None) -> AMPResult:
        r"""Train one selection trial at natural ``hyperparameters`` (``lam``, and ``clip`` when searched)
        WITHOUT a record of its own, only under an open ``cover`` (``TrainingCover``) whose RDP record this
        objective's ledger holds: the trial's ``σ`` is the smallest whose curve lies below the cover's reference
        (``amp_sigma_for_curve``), checked (``TrainingCover.check_mechanism``) before the run touches the data.

        Returns:
            The released ``AMPResult``.
        """
        from botorch_dp.objectives.charged import same_ledger
        from botorch_dp.training.cover import TrainingCover

        if not isinstance(cover, TrainingCover) or not cover.is_open:
            raise RuntimeError(
                "train_covered trains only under the open TrainingCover of a running private selection "
                "(select_training_runs); to train a run on its own, use train(theta), which charges it."
            )
        ledger = self._charging_ledger()
        if not same_ledger(cover.ledger, ledger):
            raise ValueError("cover: its record is in another ledger than this objective's.")
        theta = self.space.from_natural(dict(hyperparameters)).to(torch.float64).reshape(self.dim)
        if not bool(((theta >= 0.0) & (theta <= 1.0)).all()):
            raise ValueError(f"hyperparameters {dict(hyperparameters)!r} lie outside the objective's space.")
        lam = float(hyperparameters["lam"])
        clip = float(hyperparameters.get("clip", self.budget.clip))
        b = self.budget
        reference = np.asarray(cover.reference_rdp, dtype=np.float64)
        sigma = amp_sigma_for_curve(reference, lam=lam, clip=clip, beta=b.beta, tau=b.tau, sigma_out=b.sigma_out)
        if sigma is None:
            raise RuntimeError(f"lambda = {lam:g}: no AMP run at it lies below the cover's reference curve.")
        config = self._config(lam, clip, sigma)
        event = amp_training_event(config, self.data.num_features + 1)
        cover.check_mechanism(ledger, event)
        generator = None if noise_seed is None else torch.Generator().manual_seed(int(noise_seed))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)
            result = fit_amp(self.data.X_train, self.data.y_train, config, generator=generator)
        if not same_event(amp_training_event(config, result.theta.numel()), event):
            raise RuntimeError(f"AMP ran {result.description!r}, covered as {event}.")
        return result

    def per_user_scores(self, result: AMPResult, score: str = "loss") -> Tensor:
        r"""SENSITIVE: each validation user's ``"loss"`` (capped logistic) or ``"error"`` (0/1) under a
        released model: ``n`` float64."""
        score = check_choice(score, "score", ("loss", "error"))
        X, y = self.data.X_val, self.data.y_val
        if score == "loss":
            return self.losses_of(result, X, y).to(torch.float64)
        return (result.predict(X) != y).to(torch.float64)

    def losses_of(self, result: AMPResult, X: Tensor, y: Tensor) -> Tensor:
        r"""Per-example capped logistic losses of a released model on ``(X, y)``: ``n``."""
        return logistic_losses(result.decision_function(X), y, loss_cap=self.loss_cap)

    # ------------------------------------------------------------------ diagnostics
    def accuracy_non_private(self, result: AMPResult, split: str = "test") -> float:
        r"""NON-PRIVATE: accuracy of a released model on the ``"test"`` or ``"validation"``
        split (do not publish)."""
        X, y = {"test": (self.data.X_test, self.data.y_test), "validation": (self.data.X_val, self.data.y_val)}[
            check_choice(split, "split", ("test", "validation"))
        ]
        return float((result.predict(X) == y).to(torch.float64).mean())

    def evaluate_non_private(self, theta: Tensor, *, label: str | None = None) -> NonPrivateMetrics:
        r"""NON-PRIVATE: validation and test loss and accuracy of an AMP model released at
        ``theta`` (a unit-cube point; ``evaluate`` takes natural values). The run is charged
        like any other (``train``); the numbers are not protected: do not publish them.

        Returns:
            ``{"validation_loss", "validation_accuracy", "test_loss", "test_accuracy"}``.
        """
        result = self.train(theta, label=label)
        d = self.data
        return NonPrivateMetrics(
            validation_loss=float(self.losses_of(result, d.X_val, d.y_val).mean()),
            validation_accuracy=self.accuracy_non_private(result, "validation"),
            test_loss=float(self.losses_of(result, d.X_test, d.y_test).mean()),
            test_accuracy=self.accuracy_non_private(result, "test"),
        )


# ============================================================================ DP-SGD objective
class DPSGDTuningObjective(TorchModelTuningObjective):
    r"""θ (unit cube over ``log10`` of the learning rate) ↦ validation losses of DP-SGD
    logistic regressions (Opacus; ``TorchModelTuningObjective``).

    The model is a linear layer with two logits (softmax logistic regression, bias
    included); its per-example cross-entropy is the logistic loss of the logit
    difference. Every run is charged to the ledger as a DP-SGD run before it trains.
    Unlike the parent, the trained models are kept (``models``) so that a selection
    method can release the winning trial's own model.

    Args:
        data: The ``LogisticData``.
        lr_range: ``(lr_lo, lr_hi)``, searched log-uniformly (default the authors' code's
            ``[1e-5, 1e-1]`` for Adam, Redberg, Koskela & Wang's code).
        optimizer: The ``torch.optim`` class (default Adam, as in the paper's honest DP-SGD).
        training: Epochs, expected batch size (``TrainingConfig``).
        dp_sgd: Noise multiplier and clipping norm (``DPSGDConfig``).
        ledger, noise_seed, loss_cap, run_prefix: As in ``TorchModelTuningObjective``.
    """

    def __init__(
        self,
        data: LogisticData,
        *,
        lr_range: tuple[float, float] = (1e-5, 1e-1),
        optimizer: Callable[..., torch.optim.Optimizer] = torch.optim.Adam,
        training: TrainingConfig,
        dp_sgd: DPSGDConfig,
        ledger: PrivacyLedger | None = None,
        noise_seed: int | None = None,
        loss_cap: float = 3.0,
        run_prefix: str = "dpsgd",
    ) -> None:
        p = data.num_features
        space = SearchSpace([Hyperparameter("lr", float(lr_range[0]), float(lr_range[1]), log_scale=True)])
        super().__init__(
            data.to_classification_data(),
            space,
            model_fn=functools.partial(nn.Linear, p, 2),
            optimizer=optimizer,
            training=training,
            dp_sgd=dp_sgd,
            ledger=ledger,
            noise_seed=noise_seed,
            loss_cap=loss_cap,
            run_prefix=run_prefix,
        )
        #: The models trained in this process, in order of training.
        self.models: list[nn.Module] = []

    _PER_PROCESS = ("runs", "models")

    def _train_with(self, theta: Tensor, ticket: TrainingTicket, meter: Any = None, **options: Any) -> nn.Module:
        model = super()._train_with(theta, ticket, meter, **options)
        self.models.append(model)
        return model

    def accuracy_non_private(self, model: nn.Module, split: str = "test") -> float:
        r"""NON-PRIVATE: accuracy of a trained model on the test or validation split."""
        d = self.data
        X, y = {"test": (d.X_test, d.y_test), "validation": (d.X_val, d.y_val)}[
            check_choice(split, "split", ("test", "validation"))
        ]
        with torch.no_grad():
            return float((model(X).argmax(-1) == y).to(torch.float64).mean())
