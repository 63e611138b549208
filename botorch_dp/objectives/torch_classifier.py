r"""Private tuning of the continuous hyperparameters of a torch model with DP-GIBO.

``TorchModelTuningObjective`` maps parameters θ (``q x d``) to the ``q x n`` per-user
validation losses of a model trained at each θ (any model, any torch optimizer, any
per-example loss), optionally with Opacus DP-SGD whose training runs are charged to a
``PrivacyLedger`` before they train, in the caller's process whatever executor trains
them (``objectives.charged``), and whose noise can be calibrated to a target training ε.

The objective is what ``DPGIBO.run`` consumes. Its outputs are SENSITIVE (one loss per
validation example); only the DP-GIBO release computed from them is private. Anything
else that looks at the validation or test data (``evaluate(hyperparameters)`` in natural
units, ``evaluate_non_private(theta)`` on the cube) is a NON-PRIVATE diagnostic.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from botorch_dp.objectives.charged import ChargedTraining, TrainingTicket, shared_rows_ledger
from botorch_dp.objectives.covered import CoveredTraining
from botorch_dp.objectives.datasets import ClassificationData
from botorch_dp.objectives.noise_estimate import estimate_training_noise_variance
from botorch_dp.objectives.non_private import NaturalEvaluation, NonPrivateMetrics
from botorch_dp.objectives.per_example import cap_losses, per_example_cross_entropy, per_user_error
from botorch_dp.objectives.search_space import (
    SearchSpace,
    SearchSpaceObjective,
    default_mlp_space,
    route_hyperparameters,
)
from botorch_dp.privacy.ledger import DPSGDRun, PrivacyBudgetExceeded, PrivacyLedger, TrainingMechanism
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.training.cover import train_planned_run
from botorch_dp.training.dp_sgd import (
    DPSGDConfig,
    TrainingConfig,
    TrainingRun,
    cast_batch,
    composed_training_epsilon,
    make_mlp,
    model_dtype,
    per_example_loss_default,
    planned_dp_run,
    resolve_dp_sgd,
)

#: ``estimate_training_noise_variance`` (``noise_estimate``) and ``per_example_cross_entropy``
#: (``per_example``) are defined in their own modules and stay importable from here.
__all__ = ["TorchModelTuningObjective", "estimate_training_noise_variance", "per_example_cross_entropy"]

#: Relative slack when comparing a composed training ε with its target (root finding).
_TARGET_RTOL = 1e-9


class TorchModelTuningObjective(ChargedTraining, CoveredTraining, SearchSpaceObjective, NaturalEvaluation):
    r"""θ (``q x d``, unit cube) ↦ ``q x n`` per-user validation losses of a trained model.

    For each row of θ: map it to natural hyperparameters with ``space``, build the model
    with ``model_fn(**model_hyperparameters)``, train it on the training split with
    ``optimizer(params, **optimizer_kwargs, **optimizer_hyperparameters)`` minimizing the
    mean of ``loss_fn``, and return each validation example's loss under ``loss_fn``
    (capped at ``loss_cap``). Which hyperparameter goes where follows
    ``Hyperparameter.target`` or the two signatures (``route_hyperparameters``): nothing
    is hard-coded, so ``lr``, ``weight_decay``, ``momentum``, ``eps``, … of any
    ``torch.optim`` class and any keyword of your model can be tuned.

    A space with ``Categorical`` hyperparameters is routed the same way (e.g. an
    ``activation`` keyword of the model), but θ does not fix their values: evaluate
    ``with_choice({...})``, one configuration at a time (evaluating the unbound objective is
    refused before anything is charged), or pass the objective to ``tune``, which does that
    for every configuration.

    Without DP-SGD each evaluation is a deterministic function of θ and
    ``training.seed``. With ``dp_sgd``, every training run draws fresh DP-SGD noise and is
    charged to ``ledger`` BEFORE it trains: a batch of rows is admitted whole against the
    training budget and the ``dp_sgd`` target, and its runs are recorded with their
    planned ``(σ, q, steps)``, which Opacus's own history must then match
    (``objectives.charged``: the same under any executor, and a pickled copy carries no
    in-memory ledger). ``DPSGDConfig(target_epsilon=..., target_delta=..., planned_runs=R)``
    calibrates the noise multiplier once, here, so that ``R`` runs spend at most the
    target (see ``botorch_dp.training.dp_sgd``); ``training_report()`` gives the total.

    Training runs are numbered from the ledger, not from this object: run ``i`` is
    recorded as ``f"{run_prefix}-{i:04d}"`` (``f"{run_prefix}-{i:04d}-{label}"`` with a
    label), and ``i`` is one more than the largest index of ``run_prefix`` already in
    the ledger. An objective rebuilt after ``DPGIBO.resume(dir, ledger=ledger)`` on the
    restored ledger therefore continues the numbering: no run id, and with an explicit
    ``noise_seed`` no noise stream, is used twice, and the ledger counts every run.
    Objectives that share a ledger and a prefix share one numbering. A run whose
    evaluation was lost with its process before ``tell`` was checkpointed is not in the
    restored ledger; nothing computed from it was released, and the resumed loop
    evaluates those points again with new runs.

    The returned losses are SENSITIVE; pass the objective to ``DPGIBO.run`` or ``tune``, and
    check a result with ``evaluate(result.hyperparameters)`` (NON-PRIVATE, natural units).

    Example:
        >>> space = SearchSpace([Hyperparameter("lr", 1e-4, 1e-1, log_scale=True),
        ...                      Hyperparameter("dropout", 0.0, 0.5)])
        >>> objective = TorchModelTuningObjective((X_train, y_train, X_val, y_val), space,
        ...                                       model_fn=MyNet, optimizer=torch.optim.Adam)
        >>> result = DPGIBO(DPGIBOConfig(bounds=space.bounds, kernel=space.recommended_kernel(),
        ...                              epsilon=1.0, delta=1e-5)).run(objective)

    Args:
        data: A ``ClassificationData``, or a tuple ``(X_train, y_train, X_val, y_val)``
            (optionally ``+ (X_test, y_test)``) of numpy arrays or tensors of any float
            dtype (features are cast to the model's dtype; integer labels to ``long``).
            The validation examples are the users; there must be at least 2.
        space: The ``SearchSpace`` (default ``default_mlp_space()``).
        model_fn: ``(**model_hyperparameters) -> nn.Module``, e.g. your ``nn.Module``
            class; default an MLP (``make_mlp``) with ``training.hidden_sizes`` and a
            ``dropout`` keyword.
        optimizer: A ``torch.optim.Optimizer`` class, or any ``(params, **kwargs) ->
            Optimizer`` (default ``torch.optim.SGD``, with ``training.momentum``).
        optimizer_kwargs: Fixed keyword arguments of the optimizer (not tuned).
        loss_fn: ``(outputs, targets) -> n`` per-example losses (``reduction="none"``),
            used for training (its mean) and as each user's validation loss; default
            cross-entropy for class labels, squared error for floating targets.
        training: The ``TrainingConfig`` (epochs, batch size, seed, threads).
        dp_sgd: Train every candidate with Opacus DP-SGD (a noise multiplier, or a
            target training ε over ``planned_runs`` runs).
        ledger: ``PrivacyLedger`` that records the DP-SGD runs (a fresh one if None). Its
            ``training_accountant`` is the one a target ε is calibrated with.
        noise_seed: ``None`` (default): every DP-SGD run's sampling and noise come from
            a run seed drawn from OS entropy (``secrets.randbits(63)``) that is never
            stored (see ``train_model`` for what that does and does not protect); runs
            are then not reproducible. An integer: run ``i`` uses the child stream
            ``child_seeds([noise_seed, i], 1)[0]`` (reproducible given the seed and the
            ledger's history) and a ``PrivacyWarning`` is raised; the guarantee then
            assumes the seed stays secret. Never write it to an output.
        loss_cap: Cap of the per-user losses (see ``per_example_cross_entropy``);
            ``None``: no cap (non-finite losses are then refused by DP-GIBO).
        per_example_loss: Optional ``(model, X_val, y_val) -> n`` losses replacing
            ``loss_fn`` at validation, for models that need more than ``model(X)``.
        run_prefix: Prefix of the ledger's run ids (non-empty, no spaces).
    """

    def __init__(
        self,
        data: ClassificationData | Sequence[Any],
        space: SearchSpace | None = None,
        *,
        model_fn: Callable[..., nn.Module] | None = None,
        optimizer: Callable[..., torch.optim.Optimizer] = torch.optim.SGD,
        optimizer_kwargs: Mapping[str, Any] | None = None,
        loss_fn: Callable[[Tensor, Tensor], Tensor] | None = None,
        training: TrainingConfig | None = None,
        dp_sgd: DPSGDConfig | None = None,
        ledger: PrivacyLedger | None = None,
        noise_seed: int | None = None,
        loss_cap: float | None = 20.0,
        per_example_loss: Callable[[nn.Module, Tensor, Tensor], Tensor] | None = None,
        run_prefix: str = "eval",
    ) -> None:
        if not isinstance(data, ClassificationData):
            if not isinstance(data, (tuple, list)) or len(data) not in (4, 6):
                raise ValueError(
                    "data must be a ClassificationData or a tuple (X_train, y_train, X_val, y_val"
                    f"[, X_test, y_test]), got {type(data).__name__}"
                    + (f" of length {len(data)}" if isinstance(data, (tuple, list)) else "")
                    + "."
                )
            data = ClassificationData(*data)
        if len(data.y_val) < 2:
            raise per_user_error(f"The validation split has {len(data.y_val)} example(s), fewer than 2")
        self.data = data
        self.space = space if space is not None else default_mlp_space()
        if not isinstance(self.space, SearchSpace):
            raise ValueError(f"space must be a SearchSpace, got {type(self.space).__name__}.")
        self.training = training if training is not None else TrainingConfig()
        self._given_model_fn = model_fn
        if model_fn is None:
            num_features = data.num_features
            if data.is_classification:
                assert data.num_classes is not None  # ClassificationData sets it for class labels
                outputs = int(data.num_classes)
            else:
                outputs = int(data.y_train[0].numel())
            model_fn = functools.partial(make_mlp, num_features, outputs, tuple(self.training.hidden_sizes))
        if not callable(model_fn) or not callable(optimizer):
            raise ValueError("model_fn and optimizer must be callables (e.g. a Module class and a torch.optim class).")
        self.model_fn = model_fn
        self.optimizer = optimizer
        self.optimizer_kwargs = dict(optimizer_kwargs or {})
        self.loss_fn = per_example_loss_default if loss_fn is None else loss_fn
        self._given_loss_fn = loss_fn
        #: ``{name: "optimizer" | "model"}``: where each hyperparameter is passed.
        self.routes = route_hyperparameters(self.space, optimizer, model_fn)
        clash = sorted(set(self.optimizer_kwargs) & {n for n, t in self.routes.items() if t == "optimizer"})
        if clash:
            raise ValueError(f"optimizer_kwargs fixes {clash}, which the search space tunes; remove one.")
        self.ledger = ledger if ledger is not None else PrivacyLedger()
        #: The settings given (possibly a target ε); ``run_dp_sgd`` is what every run uses.
        self.dp_sgd = dp_sgd
        self.run_dp_sgd = (
            None
            if dp_sgd is None
            else resolve_dp_sgd(
                dp_sgd,
                len(data.y_train),
                self.training,
                accountant=self.ledger.training_accountant,
                eps_error=self.ledger.prv_eps_error,
            )
        )
        if noise_seed is not None and dp_sgd is not None:
            warnings.warn(
                "A DP-SGD noise seed was given: the training noise of every run is "
                "reproducible, and the guarantee assumes the seed stays secret. Leave "
                "noise_seed=None to draw it from OS entropy.",
                PrivacyWarning,
                stacklevel=2,
            )
        self.noise_seed = None if noise_seed is None else int(noise_seed)
        self.loss_cap = None if loss_cap is None else float(loss_cap)
        self.per_example_loss = per_example_loss
        if not isinstance(run_prefix, str) or not run_prefix or any(c.isspace() for c in run_prefix):
            raise ValueError(f"run_prefix must be a non-empty string without spaces, got {run_prefix!r}.")
        self.run_prefix = run_prefix
        #: The DP-SGD runs this object charged (this session only; the ledger has all).
        self.runs: list[TrainingRun] = []
        #: Models this object charged or trained alone (this session only), wherever they trained.
        self.num_trainings = 0
        self._bound_from: TorchModelTuningObjective | None = None  # set on a ``with_choice`` copy

    _PER_PROCESS: tuple[str, ...] = ("runs",)

    def with_choice(self, choice: Mapping[str, Any]) -> TorchModelTuningObjective:
        r"""This objective bound to one configuration of its categorical hyperparameters.

        The copy's space fixes ``choice`` (``SearchSpace.with_choice``: unknown names and
        values are refused by name); each value is routed like any other hyperparameter (to
        the optimizer or to ``model_fn``, ``routes``). It charges the same ledger under the
        same run numbering, and every run it charges is also counted in this object's
        ``runs`` and ``num_trainings``. ``tune`` evaluates one such copy per configuration.

        Args:
            choice: ``{name: value}`` of the categorical hyperparameters not fixed yet.

        Returns:
            The bound ``TorchModelTuningObjective``.
        """
        bound = super().with_choice(choice)
        bound.runs, bound.num_trainings, bound._bound_from = [], 0, self
        return bound

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_bound_from"] = None  # a worker's copy reports nothing back (it only evaluates)
        return state

    def split_hyperparameters(self, params: Mapping[str, float]) -> tuple[dict[str, Any], dict[str, float]]:
        r"""``(optimizer keyword arguments, model keyword arguments)`` for natural values ``params``."""
        optimizer_kwargs = dict(self.optimizer_kwargs)
        model_kwargs: dict[str, float] = {}
        for name, value in params.items():  # "training" ones set the run (objectives.covered), not a keyword
            if self.routes[name] != "training":
                (optimizer_kwargs if self.routes[name] == "optimizer" else model_kwargs)[name] = value
        return optimizer_kwargs, model_kwargs

    # ------------------------------------------------------------------ training
    def planned_run(self) -> tuple[float, float, int] | None:
        r"""``(noise_multiplier, sample_rate, steps)`` of every DP-SGD run (``None`` without DP-SGD)."""
        if self.run_dp_sgd is None:
            return None
        return planned_dp_run(len(self.data.y_train), self.training, self.run_dp_sgd)

    def planned_event(self, theta: Tensor | None = None, **options: Any) -> DPSGDRun | None:
        r"""The ledger event of a run (the same at every ``theta``; None without DP-SGD).

        Every evaluation asks this first, before anything is charged or trained: a space
        with a categorical hyperparameter not fixed yet is refused here (``with_choice``).
        """
        free = [h.name for h in self.space.categoricals if h.name not in self.space.fixed]
        if free:
            raise ValueError(
                f"space: the categorical hyperparameter(s) {free} are not fixed, so a point θ is no "
                "configuration to train; evaluate objective.with_choice({...}) (one configuration of "
                "space.configurations()), or call tune(objective, space, ...), which runs each of them."
            )
        self.refuse_training_routes()  # charged runs have one fixed shape: objectives.covered
        planned = self.planned_run()
        return None if planned is None else DPSGDRun.checked(*planned)

    def _check_charge(self, events: list[DPSGDRun | TrainingMechanism]) -> None:
        target = None if self.dp_sgd is None else self.dp_sgd.target()
        if target is None:
            return
        target_epsilon, target_delta, planned_runs = target
        runs = [e for e in events if isinstance(e, DPSGDRun)]
        if len(runs) != len(events):  # planned_event only plans DPSGDRun events
            raise TypeError(f"A DP-SGD objective charges DPSGDRun events only, got {events!r}.")
        ledger = self._charging_ledger()
        accountant = ledger.training_accountant
        total = composed_training_epsilon(
            [*ledger.training.history(), *runs], target_delta, accountant, ledger.prv_eps_error
        )
        if total > target_epsilon * (1.0 + _TARGET_RTOL):
            raise PrivacyBudgetExceeded(
                f"Training-data target exceeded: {len(events)} more DP-SGD run(s) would bring the training epsilon "
                f"({accountant}, delta={target_delta:g}) to {total:.6g}, above the target "
                f"{target_epsilon:g} that the noise multiplier was calibrated for "
                f"(planned_runs={planned_runs}; the ledger holds {len(ledger.training.runs())} runs). "
                "Plan more runs (more noise per run) or evaluate fewer points."
            )

    def _note_charged(self, tickets: list[TrainingTicket]) -> None:
        super()._note_charged(tickets)
        self.runs += [
            TrainingRun(t.run_id, *t.event) for t in tickets if t.run_id is not None and isinstance(t.event, DPSGDRun)
        ]  # a run id: a DPSGDRun here
        parent = self.__dict__.get("_bound_from")
        if parent is not None:  # a with_choice copy: the objective it was bound from counts it too
            parent._note_charged(tickets)

    def _train_with(self, theta: Tensor, ticket: TrainingTicket, meter: Any = None, **options: Any) -> nn.Module:
        r"""Train one model at ``theta`` under ``ticket`` (with a ``meter``: record its run first)."""
        params = self.space.to_natural(theta)
        if not isinstance(params, dict):
            raise TypeError(f"SearchSpace.to_natural of a {self.dim}-vector gave {type(params).__name__}, not a dict.")
        optimizer_kwargs, model_kwargs = self.split_hyperparameters(params)
        if meter is not None and ticket.run_id is not None:
            meter.record(ticket.run_id)  # just before the run draws its noise
        return train_planned_run(
            lambda: self.model_fn(**model_kwargs),
            self.data.X_train,
            self.data.y_train,
            self.training,
            dp_sgd=self.run_dp_sgd,
            planned=ticket.event,
            charged_as=f"run {ticket.run_id!r}, charged as {ticket.event}",
            noise_seed=ticket.noise_seed,
            optimizer=self.optimizer,
            optimizer_kwargs=optimizer_kwargs,
            loss_fn=self.loss_fn,
            seed_warned=True,  # an explicit noise_seed was warned about once, in __init__
        )

    def _validation_losses(self, model: nn.Module) -> Tensor:
        return self._losses(model, self.data.X_val, self.data.y_val)

    def train(self, theta: Tensor, *, label: str | None = None) -> nn.Module:
        r"""Train one model at ``theta``, its DP-SGD run charged on its own and recorded just before it trains.

        Args:
            theta: A ``d`` tensor in the unit cube.
            label: Optional label (e.g. ``"final"``) appended to the run's ledger id,
                ``f"{run_prefix}-{index:04d}-{label}"``; the index keeps ids unique.

        Returns:
            The trained model in eval mode.
        """
        return self._train_alone(theta, label)

    def _losses(self, model: nn.Module, X: Tensor, y: Tensor) -> Tensor:
        n = X.shape[0]
        if self.per_example_loss is not None:
            losses = self.per_example_loss(model, X.to(model_dtype(model)), y)
            where = "per_example_loss"
        else:
            was_training = model.training
            model.eval()
            with torch.no_grad():
                Xc, yc = cast_batch(X, y, model_dtype(model))
                losses = self.loss_fn(model(Xc), yc)
            model.train(was_training)
            where = "loss_fn"
        losses = torch.as_tensor(losses).detach()
        if losses.dim() == 0 or losses.shape[0] != n:
            raise per_user_error(
                f"{where} returned shape {tuple(losses.shape)} for {n} examples, not one loss per example"
            )
        losses = losses.reshape(n, -1).to(torch.float64).mean(-1)
        return cap_losses(losses, self.loss_cap)

    # ------------------------------------------------------------------ reports
    def training_report(self, delta: float | None = None) -> dict[str, Any]:
        r"""The training-data guarantee of the DP-SGD runs in the ledger (public values).

        Args:
            delta: δ of the reported ε; default the target's ``target_delta``, else the
                ledger's ``training_delta``, else 1e-5.

        Returns:
            ``{"protected": False}`` without DP-SGD; else ``protected``, ``accountant``,
            ``epsilon`` (all runs in the ledger composed), ``delta``, ``num_runs``,
            ``noise_multiplier``, ``sample_rate``, ``steps_per_run`` and, with a target,
            ``target_epsilon``, ``target_delta``, ``planned_runs``.
        """
        planned = self.planned_run()
        if planned is None:
            return {"protected": False}
        ledger = self._charging_ledger()
        target = None if self.dp_sgd is None else self.dp_sgd.target()
        if delta is None:
            delta = target[1] if target is not None else ledger.training_delta
        delta = 1e-5 if delta is None else delta
        report: dict[str, Any] = {
            "protected": True,
            "accountant": ledger.training_accountant,
            "epsilon": ledger.training.epsilon(delta),
            "delta": delta,
            "num_runs": len(ledger.training.runs()),
            "noise_multiplier": planned[0],
            "sample_rate": planned[1],
            "steps_per_run": planned[2],
        }
        if target is not None:
            report.update(target_epsilon=target[0], target_delta=target[1], planned_runs=target[2])
        return report

    # ------------------------------------------------------------------ diagnostics
    def evaluate_non_private(self, theta: Tensor, *, label: str | None = None) -> NonPrivateMetrics:
        r"""NON-PRIVATE: validation and test loss (and accuracy) of a model trained at ``theta``
        (a unit-cube point; ``evaluate`` takes natural values).

        The training run is recorded in the ledger like any other (it uses the training
        data); the returned numbers are computed from the validation and test data
        without any privacy protection — do not publish them.

        Args:
            theta: A ``d`` tensor in the unit cube.
            label: Label of the training run's ledger id (see ``train``).

        Returns:
            ``{"validation_loss", "validation_accuracy", "test_loss", "test_accuracy"}``;
            accuracies are ``None`` for floating targets, test values ``None`` without a
            test split.
        """
        model = self.train(theta, label=label)
        d = self.data

        def accuracy(X: Tensor, y: Tensor) -> float | None:
            if not d.is_classification:
                return None
            with torch.no_grad():
                return float((model(X.to(model_dtype(model))).argmax(-1) == y).double().mean())

        has_test = d.X_test is not None
        return NonPrivateMetrics(
            {
                "validation_loss": float(self._losses(model, d.X_val, d.y_val).mean()),
                "validation_accuracy": accuracy(d.X_val, d.y_val),
                "test_loss": float(self._losses(model, d.X_test, d.y_test).mean()) if has_test else None,
                "test_accuracy": accuracy(d.X_test, d.y_test) if has_test else None,
            }
        )

    def with_data(self, data: ClassificationData | Sequence[Any], **overrides: Any) -> TorchModelTuningObjective:
        r"""A copy of this objective (same space, model, optimizer, loss, training) on other data.

        It trains with the noise multiplier every run of this objective uses (a target ε is
        resolved on this objective's data, not on ``data``). Which ledger it charges depends
        on the training rows: a proxy whose training split shares a record with this
        objective's (compared by content, ``objectives.charged.training_row_digests``) trains on
        sensitive data, so with DP-SGD every run it trains is CHARGED TO THIS OBJECTIVE'S
        LEDGER (and held to its target), whatever it is used for (a pilot, a plan on a
        public validation split); such a copy given another ``ledger=`` or
        ``dp_sgd=None`` is refused (``ValueError``). Without a shared record the copy has a
        fresh ledger unless ``ledger=`` is passed: a pilot on public data costs no privacy.
        Without DP-SGD this objective protects no training data, and neither does the copy.

        Args:
            data: A ``ClassificationData`` or a tuple, as in the constructor.
            **overrides: Constructor arguments to replace (``ledger``, ``noise_seed``, ...).

        Returns:
            The new ``TorchModelTuningObjective``.
        """
        kwargs: dict[str, Any] = dict(
            space=self.space,
            model_fn=self._given_model_fn,
            optimizer=self.optimizer,
            optimizer_kwargs=self.optimizer_kwargs,
            loss_fn=self._given_loss_fn,
            training=self.training,
            dp_sgd=self.run_dp_sgd,
            noise_seed=self.noise_seed,
            loss_cap=self.loss_cap,
            per_example_loss=self.per_example_loss,
            run_prefix=self.run_prefix,
        )
        kwargs.update(overrides)
        ledger = shared_rows_ledger(self, data, overrides)
        proxy = TorchModelTuningObjective(data, **{**kwargs, **({} if ledger is None else {"ledger": ledger})})
        if ledger is not None and "dp_sgd" not in overrides:
            proxy.dp_sgd = self.dp_sgd  # this objective's target covers every run on its rows
        return proxy
