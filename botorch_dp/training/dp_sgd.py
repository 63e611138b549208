r"""DP-SGD training inside one evaluation: the training-data guarantee.

``train_model`` trains a fresh model for one set of hyperparameters with any torch
optimizer or, given a ``DPSGDConfig``, with Opacus DP-SGD (Poisson sampling), and returns
Opacus's accountant history of the run; ``planned_dp_run`` says what a run will spend
before it touches the data.

A target training ε: ``DPSGDConfig(target_epsilon=..., target_delta=..., planned_runs=R)``
calibrates the noise multiplier σ so that ALL ``R`` planned runs together are
``(ε, δ)``-DP for the training data (``calibrate_noise_multiplier``). Every run has the
same Poisson rate ``q`` and ``S`` steps, and Opacus's RDP (and PRV) accounting of ``R``
runs of ``S`` steps equals that of one run of ``R·S`` steps (the per-step privacy loss
distributions compose the same way, whichever run a step belongs to; the ledger merges
equal runs the same way). So Opacus's ``get_noise_multiplier`` is asked for
``steps = R·S``, and the composed ε of the ``R`` runs is within its tolerance below the
target. Opacus is imported only when a DP-SGD run or a calibration starts. The accounting
itself (``calibrate_noise_multiplier``, ``composed_training_epsilon``) is in
``dp_sgd_accounting``; both stay importable from here.
"""

from __future__ import annotations

import math
import secrets
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset

from botorch_dp.privacy.checks import check_delta, check_nonnegative, check_positive, check_positive_int
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.training.dp_sgd_accounting import (
    TRAINING_ACCOUNTANTS,
    calibrate_noise_multiplier,
    composed_training_epsilon,
)
from botorch_dp.utils import child_seeds, torch_threads

__all__ = [
    "DPSGDConfig",
    "TRAINING_ACCOUNTANTS",
    "TrainingConfig",
    "TrainingRun",
    "calibrate_noise_multiplier",
    "composed_training_epsilon",
    "make_mlp",
    "per_example_loss_default",
    "planned_dp_run",
    "resolve_dp_sgd",
    "train_model",
]


@dataclass
class TrainingConfig:
    r"""Public settings of the training run behind each evaluation.

    Attributes:
        epochs: Passes over the training split.
        batch_size: Mini-batch size (the expected batch size under Poisson sampling).
        momentum: Momentum of ``torch.optim.SGD`` (only that optimizer, and only when no
            ``momentum`` is given as a hyperparameter or an optimizer keyword).
        hidden_sizes: Widths of the hidden layers of the default MLP.
        seed: Seed of the initialization, dropout masks and (without DP) shuffling, so
            an evaluation is a deterministic function of θ.
        num_threads: torch intra-op threads while training (restored afterwards); small
            models train several times faster on one thread, especially on a busy
            machine. ``None`` keeps torch's setting.
        batches_per_epoch: ``k``, the number of batches (steps) per epoch; ``None``:
            ``⌈m / batch_size⌉``. With DP-SGD the Poisson rate is ``1/k`` and a run takes
            ``epochs·k`` steps, whatever the split's size ``m``: set it when ``m`` is not
            public (a random subset, ``methods.cheap_tuning``), so that the run's ``(q, steps)``
            is. ``batch_size`` is then unused (the expected batch is ``m/k``).
    """

    epochs: int = 10
    batch_size: int = 64
    momentum: float = 0.9
    hidden_sizes: tuple[int, ...] = (64,)
    seed: int = 0
    num_threads: int | None = 1
    batches_per_epoch: int | None = None

    def __post_init__(self) -> None:
        if self.batches_per_epoch is not None:
            self.batches_per_epoch = check_positive_int(self.batches_per_epoch, "batches_per_epoch")


@dataclass
class DPSGDConfig:
    r"""Opacus DP-SGD settings of every training run (Poisson sampling).

    Give either ``noise_multiplier`` or a target: ``target_epsilon``, ``target_delta`` and
    ``planned_runs``, from which the noise multiplier of every run is calibrated so that
    the ``planned_runs`` runs TOGETHER are ``(target_epsilon, target_delta)``-DP for the
    training data (see the module docstring and ``calibrate_noise_multiplier``). Count
    every run that trains on the training data: each evaluation of DP-GIBO (at most
    ``DPGIBOConfig.max_evaluations``), the final model, any diagnostic run.

    Attributes:
        noise_multiplier: Noise standard deviation over ``max_grad_norm`` (default 1.0
            when no target is given).
        max_grad_norm: Per-example gradient clipping norm.
        target_epsilon: Target ε of all planned runs composed.
        target_delta: Its δ.
        planned_runs: ``R``, the number of training runs the target covers; a run
            beyond the target is refused before it touches the data.
        epsilon_tolerance: Accuracy of Opacus's search: the planned runs spend between
            ``target_epsilon − epsilon_tolerance`` and ``target_epsilon``.
    """

    noise_multiplier: float | None = None
    max_grad_norm: float = 1.0
    target_epsilon: float | None = None
    target_delta: float | None = None
    planned_runs: int | None = None
    epsilon_tolerance: float = 0.01

    def __post_init__(self) -> None:
        self.max_grad_norm = check_positive(self.max_grad_norm, "max_grad_norm", allow_inf=False)
        self.epsilon_tolerance = check_positive(self.epsilon_tolerance, "epsilon_tolerance", allow_inf=False)
        target = (self.target_epsilon, self.target_delta, self.planned_runs)
        if all(v is None for v in target):
            noise = 1.0 if self.noise_multiplier is None else self.noise_multiplier
            self.noise_multiplier = check_nonnegative(noise, "noise_multiplier", allow_inf=False)
            return
        if self.noise_multiplier is not None:
            raise ValueError(
                "Give either noise_multiplier or a target (target_epsilon, target_delta, planned_runs), not both."
            )
        epsilon, delta, runs = target
        if epsilon is None or delta is None or runs is None:
            raise ValueError(
                "A training-ε target needs target_epsilon, target_delta and planned_runs "
                "(the number of training runs it covers), got "
                f"target_epsilon={self.target_epsilon!r}, target_delta={self.target_delta!r}, "
                f"planned_runs={self.planned_runs!r}."
            )
        self.target_epsilon = check_positive(epsilon, "target_epsilon", allow_inf=False)
        self.target_delta = check_delta(delta, "target_delta")
        self.planned_runs = check_positive_int(runs, "planned_runs")

    @property
    def has_target(self) -> bool:
        r"""The noise multiplier is calibrated to a target ε (rather than given)."""
        return self.target_epsilon is not None

    def target(self) -> tuple[float, float, int] | None:
        r"""``(target_epsilon, target_delta, planned_runs)``, or None without a target."""
        if self.target_epsilon is None or self.target_delta is None or self.planned_runs is None:
            return None
        return self.target_epsilon, self.target_delta, self.planned_runs


@dataclass(frozen=True)
class TrainingRun:
    r"""One DP-SGD training run as the accountant sees it.

    Attributes:
        run_id: The id under which it is recorded in the ledger.
        noise_multiplier: DP-SGD σ.
        sample_rate: Poisson sampling rate ``q``.
        steps: Optimizer steps.
    """

    run_id: str
    noise_multiplier: float
    sample_rate: float
    steps: int


def make_mlp(
    num_features: int, num_classes: int, hidden_sizes: Sequence[int] = (64,), dropout: float = 0.0
) -> nn.Module:
    r"""``Linear → ReLU → Dropout`` blocks and a linear output layer (Opacus-compatible).

    Args:
        num_features: ``p``.
        num_classes: Number of outputs (logits).
        hidden_sizes: Widths of the hidden layers.
        dropout: Dropout rate after each hidden layer.

    Returns:
        The ``nn.Sequential`` (float32).
    """
    layers: list[nn.Module] = []
    width = num_features
    for h in hidden_sizes:
        layers += [nn.Linear(width, h), nn.ReLU(), nn.Dropout(float(dropout))]
        width = h
    layers.append(nn.Linear(width, num_classes))
    return nn.Sequential(*layers)


def _batches_per_epoch(num_examples: int, batch_size: int) -> int:
    return math.ceil(num_examples / batch_size)


class _FixedBatches:
    r"""``k`` batches per epoch: a shuffled split of the ``m`` indices into ``k`` near-equal parts."""

    def __init__(self, num_examples: int, num_batches: int, generator: torch.Generator) -> None:
        self.num_examples, self.num_batches, self.generator = num_examples, num_batches, generator

    def __len__(self) -> int:
        return self.num_batches

    def __iter__(self) -> Any:
        order = torch.randperm(self.num_examples, generator=self.generator)
        return iter([part.tolist() for part in torch.tensor_split(order, self.num_batches)])


def _run_shape(num_examples: int, training: TrainingConfig) -> tuple[float, int]:
    r"""Opacus's Poisson loader samples with rate ``1 / len(loader)`` and takes
    ``len(loader)`` steps per epoch, ``len(loader) = ⌈m / batch_size⌉`` (or
    ``training.batches_per_epoch``)."""
    k = _batches_per_epoch(check_positive_int(num_examples, "num_examples"), training.batch_size)
    if training.batches_per_epoch is not None:
        k = training.batches_per_epoch
    return 1.0 / k, training.epochs * k


def resolve_dp_sgd(
    dp_sgd: DPSGDConfig,
    num_examples: int,
    training: TrainingConfig,
    *,
    accountant: str = "rdp",
    eps_error: float = 0.01,
) -> DPSGDConfig:
    r"""The plain ``DPSGDConfig`` (a noise multiplier, no target) that every run uses.

    Args:
        dp_sgd: Settings with a noise multiplier or a target ε.
        num_examples: ``m``, the size of the training split.
        training: The ``TrainingConfig`` (epochs, batch size).
        accountant: The accountant the target is met under (the ledger's).
        eps_error: Accuracy of the PRV accountant.

    Returns:
        ``dp_sgd`` itself without a target, else a new config with the calibrated σ.
    """
    target = dp_sgd.target()
    if target is None:
        return dp_sgd
    target_epsilon, target_delta, planned_runs = target
    sample_rate, steps = _run_shape(num_examples, training)
    sigma = calibrate_noise_multiplier(
        target_epsilon=target_epsilon,
        target_delta=target_delta,
        sample_rate=sample_rate,
        steps_per_run=steps,
        planned_runs=planned_runs,
        accountant=accountant,
        epsilon_tolerance=dp_sgd.epsilon_tolerance,
        eps_error=eps_error,
    )
    return DPSGDConfig(noise_multiplier=sigma, max_grad_norm=dp_sgd.max_grad_norm)


def planned_dp_run(num_examples: int, training: TrainingConfig, dp_sgd: DPSGDConfig) -> tuple[float, float, int]:
    r"""What one DP-SGD run will spend, known before it touches the data.

    Args:
        num_examples: ``m``, the size of the training split.
        training: The ``TrainingConfig`` (epochs, batch size).
        dp_sgd: A ``DPSGDConfig`` with a noise multiplier (``resolve_dp_sgd`` turns a
            target into one).

    Returns:
        ``(noise_multiplier, sample_rate, steps)`` as an Opacus history entry.
    """
    if dp_sgd.has_target or dp_sgd.noise_multiplier is None:
        raise ValueError("planned_dp_run needs a noise multiplier; resolve a target with resolve_dp_sgd first.")
    sample_rate, steps = _run_shape(num_examples, training)
    return float(dp_sgd.noise_multiplier), sample_rate, steps


def per_example_loss_default(outputs: Tensor, targets: Tensor) -> Tensor:
    r"""Cross-entropy for class labels, squared error for floating targets; one per example.

    Args:
        outputs: ``m x k`` logits, or ``m`` / ``m x k`` predictions.
        targets: ``m`` class labels (``long``), or floating targets of ``outputs``' size.

    Returns:
        An ``m`` tensor.
    """
    if not targets.is_floating_point():
        return F.cross_entropy(outputs, targets, reduction="none")
    m = outputs.shape[0]
    return (outputs.reshape(m, -1) - targets.reshape(m, -1).to(outputs.dtype)).pow(2).mean(-1)


def model_dtype(model: nn.Module) -> torch.dtype:
    r"""The dtype of the model's first floating-point parameter (torch's default if none)."""
    for parameter in model.parameters():
        if parameter.is_floating_point():
            return parameter.dtype
    return torch.get_default_dtype()


def cast_batch(X: Tensor, y: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    r"""Features in the model's ``dtype``; floating targets too, class labels stay ``long``."""
    return X.to(dtype), (y.to(dtype) if y.is_floating_point() else y)


def train_model(
    model_fn: Callable[[], nn.Module],
    X: Tensor,
    y: Tensor,
    training: TrainingConfig,
    *,
    optimizer: Callable[..., torch.optim.Optimizer] = torch.optim.SGD,
    optimizer_kwargs: Mapping[str, Any] | None = None,
    loss_fn: Callable[[Tensor, Tensor], Tensor] | None = None,
    dp_sgd: DPSGDConfig | None = None,
    noise_seed: int | None = None,
) -> tuple[nn.Module, tuple[float, float, int] | None]:
    r"""Train a fresh model with any torch optimizer (or Opacus DP-SGD around it).

    The initialization and the dropout masks come from ``training.seed`` (torch's global
    generator is forked, the caller's random state is untouched); they are public
    randomness. Without DP the shuffling does too, so the model is a deterministic
    function of its hyperparameters.

    With DP-SGD the Poisson sampling and the gradient noise are privacy randomness, drawn
    from two child streams of one 63-bit run seed:

    * ``noise_seed=None`` (default): the run seed is drawn with ``secrets.randbits(63)``
      from the operating system's CSPRNG, used to seed this run's two generators and
      never stored, returned or logged. Protected: nobody can regenerate the noise or
      the batches from anything this package writes (outputs, ledgers, checkpoints), and
      every run draws fresh, independent noise, as DP-SGD's guarantee and its composition
      over runs assume. Not protected: the generators themselves are torch's Mersenne
      Twister, not a cryptographic generator (Opacus's ``secure_mode`` needs
      ``torchcsprng``, which is not a dependency); the seed lives in this process's memory
      while the run trains; floating-point attacks on Gaussian sampling (Mironov 2012)
      are not addressed.
    * An explicit ``noise_seed`` (tests, reproductions): reproducible noise and a
      ``PrivacyWarning``; the guarantee then assumes the seed stays secret, and seeds
      must differ between runs.

    Args:
        model_fn: Builds the untrained model (called once, after seeding).
        X: ``m x p`` training features of any floating dtype (cast to the model's).
        y: ``m`` class labels, or floating targets.
        training: The ``TrainingConfig``.
        optimizer: A ``torch.optim.Optimizer`` class, or any ``(params, **kwargs) ->
            Optimizer``; Opacus wraps it for DP-SGD.
        optimizer_kwargs: Its keyword arguments (e.g. ``lr``, ``weight_decay``). With
            ``torch.optim.SGD`` and no ``momentum`` among them, ``training.momentum``.
        loss_fn: ``(outputs, targets) -> m`` per-example losses; their mean is minimized
            (default ``per_example_loss_default``).
        dp_sgd: Train with Opacus DP-SGD with these settings (a noise multiplier; see
            ``resolve_dp_sgd`` for a target ε).
        noise_seed: Seed of the DP-SGD sampler and noise; ``None`` draws it from OS
            entropy (see above). Ignored without ``dp_sgd``.

    Returns:
        The trained model (in eval mode, unwrapped from Opacus) and, with ``dp_sgd``,
        Opacus's accountant history of the run as ``(noise_multiplier, sample_rate, steps)``.
    """
    if dp_sgd is not None and dp_sgd.has_target:
        raise ValueError("train_model needs a DPSGDConfig with a noise multiplier; see resolve_dp_sgd.")
    if dp_sgd is not None and noise_seed is not None:
        warnings.warn(
            "A DP-SGD noise seed was given: the training noise and the Poisson batches are "
            "reproducible, and the guarantee assumes the seed stays secret. Leave "
            "noise_seed=None to draw them from OS entropy.",
            PrivacyWarning,
            stacklevel=2,
        )
    loss_fn = per_example_loss_default if loss_fn is None else loss_fn
    kwargs = dict(optimizer_kwargs or {})
    if optimizer is torch.optim.SGD:
        kwargs.setdefault("momentum", training.momentum)
    with torch_threads(training.num_threads), torch.random.fork_rng(devices=[]):
        torch.manual_seed(training.seed)
        model = model_fn()
        if not isinstance(model, nn.Module):
            raise ValueError(f"model_fn must return a torch.nn.Module, got {type(model).__name__}.")
        dataset = TensorDataset(*cast_batch(X, y, model_dtype(model)))
        opt = optimizer(model.parameters(), **kwargs)
        if dp_sgd is None:
            loader_seed = training.seed
        else:  # independent streams for the Poisson sampler and the gradient noise
            run_seed = secrets.randbits(63) if noise_seed is None else int(noise_seed)
            loader_seed, gradient_noise_seed = child_seeds(run_seed, 2)
        loader_gen = torch.Generator().manual_seed(loader_seed)
        if training.batches_per_epoch is None:
            loader = DataLoader(dataset, batch_size=training.batch_size, shuffle=True, generator=loader_gen)
        else:  # len(loader) = k whatever len(dataset): Opacus's rate is then 1/k
            batches = _FixedBatches(len(dataset), training.batches_per_epoch, loader_gen)
            loader = DataLoader(dataset, batch_sampler=batches)
        history = None
        if dp_sgd is not None:
            from opacus import PrivacyEngine

            with warnings.catch_warnings():
                # secure_mode needs torchcsprng; how the generators are seeded is in the docstring
                warnings.filterwarnings("ignore", message=".*Secure RNG turned off.*")
                engine = PrivacyEngine(accountant="rdp")
                model, opt, loader = engine.make_private(
                    module=model,
                    optimizer=opt,
                    data_loader=loader,
                    noise_multiplier=dp_sgd.noise_multiplier,
                    max_grad_norm=dp_sgd.max_grad_norm,
                    poisson_sampling=True,
                    noise_generator=torch.Generator().manual_seed(gradient_noise_seed),
                )
        model.train()
        with warnings.catch_warnings():
            # Opacus's hooks on the first layer fire without input gradients: harmless
            warnings.filterwarnings("ignore", message=".*Full backward hook is firing.*")
            for _ in range(training.epochs):
                for xb, yb in loader:
                    opt.zero_grad(set_to_none=True)
                    if xb.shape[0] == 0:  # an empty Poisson batch still takes a (noise-only) step
                        out = model(xb)
                        loss = out.sum() * 0.0
                    else:
                        loss = loss_fn(model(xb), yb).mean()
                    loss.backward()
                    opt.step()
        if dp_sgd is not None:
            entries = engine.accountant.history  # run-length encoded: one entry per run
            if len(entries) != 1:
                raise RuntimeError(f"Expected one accountant entry for the run, got {entries}.")
            s, q, steps = entries[0]
            history = (float(s), float(q), int(steps))
            unwrap = getattr(model, "to_standard_module", None)  # Opacus's GradSampleModule: drops its hooks
            inner = unwrap() if callable(unwrap) else None
            if not isinstance(inner, torch.nn.Module):
                raise RuntimeError(f"Opacus wrapped the model in a {type(model).__name__} without a module.")
            model = inner
            model.zero_grad(set_to_none=True)
    model.eval()
    return model, history
