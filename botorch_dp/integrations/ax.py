r"""The GIBO acquisition in Ax (``ax-platform`` 1.x): joint batches around a centre θ that moves.

θ has three coordinate systems (``AxThetaSpace``, in ``ax_theta``): ``"natural"`` (the values
in a trial's parameters), ``"ax"`` (Ax's parameter space: ``log10`` of log-scale parameters,
what a model behind Ax's default ``BOTORCH_MODULAR`` transforms sees) and ``"unit"`` (the
``"ax"`` box mapped onto ``[0, 1]^d``, Ax's ``UnitX``). DP-GIBO, its kernel length-scales and
its search radius work on the unit cube, and so does the generation strategy built here
(transforms ``Log`` then ``UnitX``): a kernel, a radius and a θ mean the same as in a
``DPGIBOConfig`` on the unit cube.

``AxGIBO`` builds the generation strategy (one node: ``BoTorchGenerator`` with
``qGradientInformation``), proposes each round's batch *jointly* (one ``optimize_acqf``
call for ``q`` points, in the box ``θ ± search_radius``; ``Client.get_next_trials`` would
build it one point at a time) and moves θ with ``move_to`` (the acquisition options of the
next round change; nothing is rebuilt). The model's kernel and noise are public and fixed:
Ax never fits them to the outcomes (``PublicKernelGP``), and the criterion never reads the
outcomes, so the points chosen depend on the evaluated *inputs* and θ only.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from ax.adapter.registry import Generators
from ax.adapter.transforms.log import Log
from ax.adapter.transforms.remove_fixed import RemoveFixed
from ax.adapter.transforms.unit_x import UnitX
from ax.core.arm import Arm
from ax.core.base_trial import TrialStatus
from ax.core.experiment import Experiment
from ax.core.generator_run import GeneratorRun
from ax.core.search_space import SearchSpaceDigest
from ax.generation_strategy.generation_node import GenerationNode
from ax.generation_strategy.generation_strategy import GenerationStrategy
from ax.generation_strategy.generator_spec import GeneratorSpec
from ax.generators.torch.botorch_modular.acquisition import Acquisition
from ax.generators.torch.botorch_modular.surrogate import ModelConfig, SurrogateSpec
from ax.generators.torch.botorch_modular.utils import fit_botorch_model
from botorch.models import SingleTaskGP
from botorch.optim import optimize_acqf
from gpytorch.kernels import Kernel, RBFKernel, ScaleKernel
from torch import Tensor

from botorch_dp.acquisition import qGradientInformation
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.integrations.ax_theta import UNITS, AxThetaSpace, Units

__all__ = ["MIN_NOISE", "UNITS", "AxGIBO", "AxThetaSpace", "LocalBoxAcquisition", "PublicKernelGP", "default_kernel"]

_F64 = torch.float64
_NODE = "gibo"
#: GPyTorch rounds a fixed observation noise below this up to it (with a warning); both of
#: ``AxGIBO``'s paths use ``max(noise_variance, MIN_NOISE)`` so that they score alike.
MIN_NOISE = 1e-6


# ---------------------------------------------------------------------- the model Ax builds
class PublicKernelGP(SingleTaskGP):
    r"""A ``SingleTaskGP`` with a public, fixed kernel and noise variance: Ax never fits it.

    Ax builds it with ``construct_inputs`` from the training data and the
    ``model_options`` ``{"kernel": ..., "noise_variance": ...}``; the fit Ax would run on the
    outcomes (``fit_botorch_model``) is registered as a no-op for this class. Observed noise
    levels Ax may pass (``Yvar``, derived from the outcomes) are not used.

    Args:
        train_X: ``N x d`` training inputs (the unit cube in ``AxGIBO``'s strategy).
        train_Y: ``N x 1`` outcomes; kept because BoTorch requires them, never read by
            ``qGradientInformation``.
        kernel: The covariance module (copied; its hyperparameters are frozen).
        noise_variance: ``σ² ≥ 0`` of every observation (``MIN_NOISE`` at least).
        input_transform: Optional BoTorch input transform (none in ``AxGIBO``'s strategy).
        outcome_transform: Ignored (Ax passes one; the criterion reads no outcome).
    """

    def __init__(
        self,
        train_X: Tensor,
        train_Y: Tensor,
        kernel: Kernel,
        noise_variance: float = 0.0,
        input_transform: Any = None,
        outcome_transform: Any = None,
    ) -> None:
        noise = torch.full_like(train_Y, max(float(noise_variance), MIN_NOISE))
        covar = _frozen_copy(kernel).to(train_X)
        super().__init__(
            train_X,
            train_Y,
            train_Yvar=noise,
            covar_module=covar,
            input_transform=input_transform,
            outcome_transform=None,
        )
        self.requires_grad_(False)

    @classmethod
    def construct_inputs(cls, training_data: Any, **kwargs: Any) -> dict[str, Any]:
        return {"train_X": training_data.X, "train_Y": training_data.Y, **kwargs}


def _frozen_copy(kernel: Kernel) -> Kernel:
    return copy.deepcopy(kernel).to(_F64).requires_grad_(False)


@fit_botorch_model.register(PublicKernelGP)
def _keep_public_hyperparameters(model: PublicKernelGP, mll_class: Any = None, mll_options: Any = None) -> None:
    r"""Ax fits every model it builds to the outcomes; a ``PublicKernelGP`` keeps its public values."""


class LocalBoxAcquisition(Acquisition):
    r"""Ax's ``Acquisition``, optimizing in the box ``θ ± search_radius`` (clipped to the search box).

    θ is the ``theta`` of the acquisition function's options, the radius the Ax acquisition
    option ``search_radius`` (a float or ``d`` floats), both in the model's input space (the
    unit cube in ``AxGIBO``'s strategy). Everything else, the one joint ``optimize_acqf`` call
    for the ``n`` points included, is Ax's own ``Acquisition.optimize``.
    """

    def optimize(
        self, n: int, search_space_digest: SearchSpaceDigest, *args: Any, **kwargs: Any
    ) -> tuple[Tensor, Tensor, Tensor]:
        theta = torch.as_tensor(self.botorch_acqf_classes_with_options[0][1]["theta"], dtype=_F64).reshape(-1)
        radius = torch.as_tensor(self.options["search_radius"], dtype=_F64).expand_as(theta)
        lo, hi = torch.tensor(search_space_digest.bounds, dtype=_F64).T
        box = list(
            zip(torch.maximum(lo, theta - radius).tolist(), torch.minimum(hi, theta + radius).tolist(), strict=True)
        )
        local = dataclasses.replace(search_space_digest, bounds=box)
        return super().optimize(n, local, *args, **kwargs)


# ---------------------------------------------------------------------- the strategy
def default_kernel(dim: int, lengthscale: float = 0.2, outputscale: float = 1.0) -> ScaleKernel:
    r"""A scaled RBF kernel on the unit cube with fixed public hyperparameters (as
    ``SearchSpace.recommended_kernel``: a length-scale of a fifth of every range)."""
    kernel = ScaleKernel(RBFKernel(ard_num_dims=dim)).to(_F64)
    kernel.base_kernel.lengthscale = torch.full((1, dim), float(lengthscale), dtype=_F64)
    kernel.outputscale = float(outputscale)
    return kernel.requires_grad_(False)


class AxGIBO:
    r"""GIBO's acquisition in Ax: joint batches in a box around θ, and θ that moves between rounds.

    Example:
        >>> gibo = AxGIBO(client, theta0={"lr": 1e-2, "momentum": 0.5})  # sets the client's strategy
        >>> for index, params in gibo.get_next_trials().items():          # one joint batch
        ...     client.complete_trial(index, raw_data={"loss": train(**params)})
        >>> gibo.move_to(new_theta, units="unit")                         # the next batch's centre

    Args:
        source: An Ax ``Client`` (after ``configure_experiment``; its generation strategy is
            set to this one), ``Experiment`` or ``SearchSpace`` (then call
            ``client.set_generation_strategy(gibo.generation_strategy)`` yourself).
        theta0: The first centre, ``{name: natural value}`` or numbers in ``units``.
        units: The units of ``theta0`` when given as numbers (see ``AxThetaSpace.to_unit``).
        kernel: GPyTorch kernel on the unit cube with public, fixed hyperparameters (default
            ``default_kernel(d)``); never fitted to the outcomes.
        noise_variance: ``σ²`` of an observation, public (default 0; ``MIN_NOISE`` is used at least).
        search_radius: Half-width of the box around θ, in unit-cube coordinates (float or
            ``d`` floats; default 0.1, as ``DPGIBOConfig``).
        batch_size: Points per round (default ``d + 1``).
        num_restarts: ``optimize_acqf`` restarts.
        raw_samples: ``optimize_acqf`` raw samples.
    """

    def __init__(
        self,
        source: Any,
        theta0: Tensor | Sequence[float] | Mapping[str, float],
        *,
        units: Units | None = None,
        kernel: Kernel | None = None,
        noise_variance: float = 0.0,
        search_radius: float | Sequence[float] = 0.1,
        batch_size: int | None = None,
        num_restarts: int = 8,
        raw_samples: int = 256,
    ) -> None:
        self.space = AxThetaSpace(source)
        d = self.space.dim
        self.kernel = default_kernel(d) if kernel is None else _checked_kernel(kernel, d)
        if not (isinstance(noise_variance, (int, float)) and math.isfinite(noise_variance) and noise_variance >= 0):
            raise ValueError(f"noise_variance must be a finite number >= 0, got {noise_variance!r}.")
        self.noise_variance = float(noise_variance)
        radius = torch.as_tensor(search_radius, dtype=_F64)
        if radius.dim() > 1 or (radius.dim() == 1 and radius.numel() != d) or not (radius > 0).all():
            raise ValueError(
                f"search_radius must be a positive number or {d} positive numbers (unit-cube "
                f"coordinates), got {search_radius!r}."
            )
        self.search_radius = radius.expand(d).clone()
        self.batch_size = d + 1 if batch_size is None else _positive_int(batch_size, "batch_size")
        self._optimizer = {
            "num_restarts": _positive_int(num_restarts, "num_restarts"),
            "raw_samples": _positive_int(raw_samples, "raw_samples"),
        }
        self.theta = self.space.to_unit(theta0, units).reshape(d)
        self._spec = GeneratorSpec(
            generator_enum=Generators.BOTORCH_MODULAR,
            generator_kwargs={
                "transforms": [RemoveFixed, Log, UnitX],  # the model lives on the unit cube
                "surrogate_spec": SurrogateSpec(
                    model_configs=[
                        ModelConfig(
                            botorch_model_class=PublicKernelGP,
                            input_transform_classes=None,
                            model_options={"kernel": self.kernel, "noise_variance": self.noise_variance},
                        )
                    ]
                ),
                "botorch_acqf_class": qGradientInformation,
                "acquisition_class": LocalBoxAcquisition,
                "acquisition_options": {"search_radius": self.search_radius.tolist()},
            },
            generator_gen_kwargs={"model_gen_options": self._gen_options()},
        )
        self.generation_strategy = GenerationStrategy(
            name="GIBO", nodes=[GenerationNode(name=_NODE, generator_specs=[self._spec])]
        )
        if hasattr(source, "set_generation_strategy"):
            source.set_generation_strategy(self.generation_strategy)

    # ------------------------------------------------------------------ θ
    def _gen_options(self) -> dict[str, Any]:
        r"""The ``model_gen_options`` of the next ``gen``: θ, the box and the optimizer settings."""
        return {
            "acquisition_function_kwargs": {"theta": self.theta.tolist()},
            "ax_acquisition_kwargs": {"search_radius": self.search_radius.tolist()},
            "optimizer_kwargs": {**self._optimizer, "sequential": False},  # one joint optimization
        }

    def move_to(self, theta: Tensor | Sequence[float] | Mapping[str, float], units: Units | None = None) -> Tensor:
        r"""Make ``theta`` the centre of the next batches (nothing is rebuilt or refitted).

        Args:
            theta: ``{name: natural value}`` or numbers in ``units`` (see ``AxThetaSpace.to_unit``).
            units: ``"unit"``, ``"ax"`` or ``"natural"``; required for numbers.

        Returns:
            The new θ in unit-cube coordinates.
        """
        self.theta = self.space.to_unit(theta, units).reshape(self.space.dim)
        self._spec.generator_gen_kwargs["model_gen_options"] = self._gen_options()
        return self.theta.clone()

    def theta_in(self, units: Units) -> Tensor:
        r"""The current θ in ``units``."""
        return self.space.from_unit(self.theta, units)

    @property
    def parameters(self) -> dict[str, Any]:
        r"""The current θ as an Ax parameterization (natural units)."""
        return self.space.parameters(self.theta)

    # ------------------------------------------------------------------ batches
    def get_next_trials(self, batch_size: int | None = None) -> dict[int, dict[str, Any]]:
        r"""Propose one joint batch around θ and attach it to the experiment as running trials.

        One ``optimize_acqf`` call chooses all ``batch_size`` points together (Ax's
        ``Client.get_next_trials(max_trials=q)`` would run ``q`` generations of one point).
        Before any trial is completed Ax cannot build a model, so the first batch is chosen
        by the same criterion on the prior (``GradientGP`` without data); afterwards Ax's
        ``BoTorchGenerator`` with ``PublicKernelGP`` on the evaluated points chooses it.

        Args:
            batch_size: Points in this batch (default ``self.batch_size``).

        Returns:
            ``{trial index: parameterization}``, like ``Client.get_next_trials``.
        """
        q = self.batch_size if batch_size is None else _positive_int(batch_size, "batch_size")
        try:
            experiment = self.generation_strategy.experiment
        except Exception as e:  # Ax raises when no experiment was set
            raise RuntimeError(
                "The generation strategy has no experiment yet: build AxGIBO from the Client, or call "
                "client.set_generation_strategy(gibo.generation_strategy) first."
            ) from e
        there = AxThetaSpace(experiment)
        if (there.names, there.log_scale, there.fixed) != (
            self.space.names,
            self.space.log_scale,
            self.space.fixed,
        ) or not (torch.equal(there.natural_bounds, self.space.natural_bounds)):
            raise ValueError(
                f"The experiment's search space {there} is not the one AxGIBO was built for, {self.space}."
            )
        if experiment.trials_by_status[TrialStatus.COMPLETED]:
            (runs,) = self.generation_strategy.gen(experiment=experiment, n=q, num_trials=1)
            arms = [arm for run in runs for arm in run.arms]
            source = "ax"
        else:
            arms = [Arm(parameters=self.space.parameters(u)) for u in self._prior_batch(experiment, q)]
            source = "prior"
        metadata = {"gibo_theta": self.theta.tolist(), "gibo_batch_size": q, "gibo_source": source}
        trials = {}
        for arm in arms:
            run = GeneratorRun(arms=[arm], generation_node_name=_NODE, gen_metadata=dict(metadata))
            trial = experiment.new_trial(generator_run=run)
            trial.mark_running(no_runner_required=True)
            trials[trial.index] = dict(arm.parameters)
        return trials

    def _prior_batch(self, experiment: Experiment, q: int) -> Tensor:
        r"""``q`` points by one ``optimize_acqf`` on the prior (running trials as pending points)."""
        running = [arm.parameters for t in experiment.trials_by_status[TrialStatus.RUNNING] for arm in t.arms]
        pending = torch.stack([self.space.to_unit(p) for p in running]) if running else None
        gp = GradientGP(torch.empty(0, self.space.dim, dtype=_F64), self.kernel, max(self.noise_variance, MIN_NOISE))
        acqf = qGradientInformation(gp, self.theta, X_pending=pending)
        box = torch.stack(
            [(self.theta - self.search_radius).clamp_min(0.0), (self.theta + self.search_radius).clamp_max(1.0)]
        )
        X, _ = optimize_acqf(
            acqf,
            box,
            q=q,
            num_restarts=self._optimizer["num_restarts"],
            raw_samples=self._optimizer["raw_samples"],
            sequential=False,
        )
        return X.detach()


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    return value


def _checked_kernel(kernel: Any, d: int) -> Kernel:
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kernel must be a GPyTorch Kernel on the unit cube, got {type(kernel).__name__}.")
    scale = getattr(kernel, "outputscale", None)
    if scale is not None and not bool((torch.as_tensor(scale) > 0).all()):
        raise ValueError(
            f"kernel has outputscale {torch.as_tensor(scale).tolist()}: the prior has no variance, so "
            "no point carries gradient information. Use a positive outputscale."
        )
    ard = getattr(getattr(kernel, "base_kernel", kernel), "ard_num_dims", None)
    if ard is not None and ard != d:
        raise ValueError(f"kernel has ard_num_dims={ard}, the search space has d={d} coordinates.")
    return _frozen_copy(kernel)
