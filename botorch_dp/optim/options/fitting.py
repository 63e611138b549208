r"""The LOUD opt-out that looks at the sensitive losses outside the mechanisms.

``NoFitting`` (the default): the kernel's hyperparameters stay as given and the losses reach
the mechanisms untouched. ``SensitiveFitting`` (``unsafe_allow_sensitive_fitting=True`` with a
``hyperparameter_fit`` or a model with an outcome transform) refits the kernel on the mean
losses and/or standardizes the losses before each release: the run then carries NO privacy
guarantee. It needs the raw losses, which only in-memory users give (partitions refuse it).
Each step of such a run records its look at the losses as a release of ``μ = inf`` (part
``"fit"``, recorded before the losses are read), so the ledger, and every statement read off
it, says that no guarantee holds; a ledger with a finite validation budget cannot admit it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol

from gpytorch.kernels import Kernel
from torch import Tensor

from botorch_dp.gradient_gp import GradientGP
from botorch_dp.optim.options.registry import Strategy, StrategyLike, register
from botorch_dp.optim.users import InMemoryUsers, Users
from botorch_dp.privacy.ledger import Gaussian, Meter

__all__ = ["FIT_PART", "Fitting", "NoFitting", "SensitiveFitting"]

#: The ledger part of a sensitive fit's look at the losses (``μ = inf``: no guarantee).
FIT_PART = "fit"


class Fitting(StrategyLike, Protocol):
    r"""What a step does with the users and the GP before its releases: nothing (``holds``: the
    run's guarantee holds), or an UNSAFE look at the losses recorded at ``μ = inf``."""

    @property
    def holds(self) -> bool:
        r"""Whether the run keeps its privacy guarantee."""
        ...

    def bound_parts(self) -> dict[str, Gaussian]:
        r"""What the fit adds to a step's charge."""
        ...

    def prepare(
        self,
        users: Users,
        X: Tensor,
        kernel: Kernel,
        gp: GradientGP,
        noise_variance: float,
        jitter: float,
        meter: Meter | None = None,
    ) -> tuple[Users, GradientGP]:
        r"""The users and GP the step releases from (inside the step's charge, ``meter``)."""
        ...


@register("fitting", "none")
@dataclass(frozen=True)
class NoFitting(Strategy):
    r"""Nothing is fit on, or computed from, the losses outside the mechanisms."""

    holds = True

    def bound_parts(self) -> dict[str, Gaussian]:
        return {}

    def prepare(
        self,
        users: Users,
        X: Tensor,
        kernel: Kernel,
        gp: GradientGP,
        noise_variance: float,
        jitter: float,
        meter: Meter | None = None,
    ) -> tuple[Users, GradientGP]:
        return users, gp


@register("fitting", "sensitive")
@dataclass(frozen=True)
class SensitiveFitting(Strategy):
    r"""UNSAFE: refit the kernel (``fit(kernel, X, mean_losses)``) and/or standardize the losses."""

    fit: Callable[[Kernel, Tensor, Tensor], None] | None = None
    standardize: bool = False
    holds = False
    #: On resume only whether a ``fit`` is given is compared, and ``standardize`` with the kernel's.
    resume_tolerates = MappingProxyType({"fit": "presence", "standardize": "any"})

    def spec(self) -> dict[str, Any]:
        return {
            "kind": self.name,
            "fit": None if self.fit is None else type(self.fit).__qualname__,
            "standardize": self.standardize,
        }

    def bound_parts(self) -> dict[str, Gaussian]:
        r"""The fit's look at the losses: a release without noise, ``μ = inf`` (no guarantee)."""
        return {FIT_PART: Gaussian(math.inf)}

    def prepare(
        self,
        users: Users,
        X: Tensor,
        kernel: Kernel,
        gp: GradientGP,
        noise_variance: float,
        jitter: float,
        meter: Meter | None = None,
    ) -> tuple[Users, GradientGP]:
        if not users.raw_losses or not isinstance(users, InMemoryUsers):  # only InMemoryUsers hold raw losses
            raise ValueError(
                "partitions: partitioned users do not support hyperparameter_fit or a standardizing model "
                "(they need the raw losses, which never leave the partitions)."
            )
        if meter is None:
            raise ValueError("A sensitive fit reads the losses only inside a step's charge (meter=...).")
        meter.record(FIT_PART, Gaussian(math.inf))  # recorded before the losses are read: no guarantee
        Y = users.losses()
        if self.fit is not None:
            self.fit(kernel, X, Y.mean(-1))
            gp = GradientGP(X, kernel, noise_variance, jitter=jitter)
        if self.standardize:  # data-dependent outcome scaling
            Y = (Y - Y.mean()) / Y.std().clamp_min(1e-12)
        return InMemoryUsers((Y,), users.chunk_size, users.nonfinite), gp
