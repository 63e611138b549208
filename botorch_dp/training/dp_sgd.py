r"""DP-SGD training inside one evaluation: the training-data guarantee.

``train_model`` trains a fresh model for one set of hyperparameters with SGD or, given a
``DPSGDConfig``, with Opacus DP-SGD (Poisson sampling), and returns Opacus's accountant
history of the run; ``planned_dp_run`` says what a run will spend before it touches the
data. Opacus is imported only when a DP-SGD run starts.
"""

from __future__ import annotations

import math
import secrets
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset

from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.utils import child_seeds, torch_threads

__all__ = [
    "DPSGDConfig",
    "TrainingConfig",
    "TrainingRun",
    "make_mlp",
    "planned_dp_run",
    "train_model",
]


@dataclass
class TrainingConfig:
    r"""Public settings of the training run behind each evaluation.

    Attributes:
        epochs: Passes over the training split.
        batch_size: Mini-batch size (the expected batch size under Poisson sampling).
        momentum: SGD momentum.
        hidden_sizes: Widths of the hidden layers of the default MLP.
        seed: Seed of the initialization, dropout masks and (without DP) shuffling, so
            an evaluation is a deterministic function of θ.
        num_threads: torch intra-op threads while training (restored afterwards); small
            models train several times faster on one thread, especially on a busy
            machine. ``None`` keeps torch's setting.
    """

    epochs: int = 10
    batch_size: int = 64
    momentum: float = 0.9
    hidden_sizes: tuple[int, ...] = (64,)
    seed: int = 0
    num_threads: int | None = 1


@dataclass
class DPSGDConfig:
    r"""Opacus DP-SGD settings of every training run (Poisson sampling).

    Attributes:
        noise_multiplier: Noise standard deviation over ``max_grad_norm``.
        max_grad_norm: Per-example gradient clipping norm.
    """

    noise_multiplier: float = 1.0
    max_grad_norm: float = 1.0


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


def planned_dp_run(num_examples: int, training: TrainingConfig, dp_sgd: DPSGDConfig) -> tuple[float, float, int]:
    r"""What one DP-SGD run will spend, known before it touches the data.

    Opacus's Poisson loader samples with rate ``1 / len(loader)`` and takes
    ``len(loader)`` steps per epoch, ``len(loader) = ⌈m / batch_size⌉``.

    Args:
        num_examples: ``m``, the size of the training split.
        training: The ``TrainingConfig`` (epochs, batch size).
        dp_sgd: The ``DPSGDConfig``.

    Returns:
        ``(noise_multiplier, sample_rate, steps)`` as an Opacus history entry.
    """
    k = _batches_per_epoch(num_examples, training.batch_size)
    return float(dp_sgd.noise_multiplier), 1.0 / k, training.epochs * k


def train_model(
    params: Mapping[str, float],
    X: Tensor,
    y: Tensor,
    training: TrainingConfig,
    *,
    model_fn: Callable[[Mapping[str, float]], nn.Module],
    dp_sgd: DPSGDConfig | None = None,
    noise_seed: int | None = None,
) -> tuple[nn.Module, tuple[float, float, int] | None]:
    r"""Train a model with SGD (or Opacus DP-SGD) for the hyperparameters ``params``.

    The initialization and the dropout masks come from ``training.seed`` (torch's global
    generator is forked, the caller's random state is untouched); they are public
    randomness. Without DP the shuffling does too, so the model is a deterministic
    function of ``params``.

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
        params: Natural hyperparameter values; ``lr`` is required, ``weight_decay``
            optional; all are passed to ``model_fn``.
        X: ``m x p`` float32 training features.
        y: ``m`` training labels.
        training: The ``TrainingConfig``.
        model_fn: Builds the (untrained) model from ``params``.
        dp_sgd: Train with Opacus DP-SGD with these settings.
        noise_seed: Seed of the DP-SGD sampler and noise; ``None`` draws it from OS
            entropy (see above). Ignored without ``dp_sgd``.

    Returns:
        The trained model (in eval mode, unwrapped from Opacus) and, with ``dp_sgd``,
        Opacus's accountant history of the run as ``(noise_multiplier, sample_rate, steps)``.
    """
    if dp_sgd is not None and noise_seed is not None:
        warnings.warn(
            "A DP-SGD noise seed was given: the training noise and the Poisson batches are "
            "reproducible, and the guarantee assumes the seed stays secret. Leave "
            "noise_seed=None to draw them from OS entropy.",
            PrivacyWarning,
            stacklevel=2,
        )
    dataset = TensorDataset(X, y)
    with torch_threads(training.num_threads), torch.random.fork_rng(devices=[]):
        torch.manual_seed(training.seed)
        model = model_fn(params)
        optimizer = torch.optim.SGD(
            model.parameters(), lr=float(params["lr"]), momentum=training.momentum,
            weight_decay=float(params.get("weight_decay", 0.0)),
        )
        if dp_sgd is None:
            loader_seed = training.seed
        else:  # independent streams for the Poisson sampler and the gradient noise
            run_seed = secrets.randbits(63) if noise_seed is None else int(noise_seed)
            loader_seed, gradient_noise_seed = child_seeds(run_seed, 2)
        loader_gen = torch.Generator().manual_seed(loader_seed)
        loader = DataLoader(dataset, batch_size=training.batch_size, shuffle=True, generator=loader_gen)
        history = None
        if dp_sgd is not None:
            from opacus import PrivacyEngine

            with warnings.catch_warnings():
                # secure_mode needs torchcsprng; how the generators are seeded is in the docstring
                warnings.filterwarnings("ignore", message=".*Secure RNG turned off.*")
                engine = PrivacyEngine(accountant="rdp")
                model, optimizer, loader = engine.make_private(
                    module=model, optimizer=optimizer, data_loader=loader,
                    noise_multiplier=dp_sgd.noise_multiplier, max_grad_norm=dp_sgd.max_grad_norm,
                    poisson_sampling=True,
                    noise_generator=torch.Generator().manual_seed(gradient_noise_seed),
                )
        model.train()
        with warnings.catch_warnings():
            # Opacus's hooks on the first layer fire without input gradients: harmless
            warnings.filterwarnings("ignore", message=".*Full backward hook is firing.*")
            for _ in range(training.epochs):
                for xb, yb in loader:
                    optimizer.zero_grad(set_to_none=True)
                    if xb.shape[0] == 0:  # an empty Poisson batch still takes a (noise-only) step
                        out = model(xb)
                        loss = out.sum() * 0.0
                    else:
                        loss = F.cross_entropy(model(xb), yb)
                    loss.backward()
                    optimizer.step()
        if dp_sgd is not None:
            entries = engine.accountant.history  # run-length encoded: one entry per run
            if len(entries) != 1:
                raise RuntimeError(f"Expected one accountant entry for the run, got {entries}.")
            s, q, steps = entries[0]
            history = (float(s), float(q), int(steps))
            model = model._module  # drop Opacus's per-sample-gradient hooks
            model.zero_grad(set_to_none=True)
    model.eval()
    return model, history
