r"""Step rules: how a released gradient moves ``θ`` (post-processing; ``optim.step_rules``).

``SGD`` and ``AdaGrad`` (``torch.optim``), and ``FullMatrixAdaGrad`` (Kairouz et al.) with its
preconditioner policy: ``"noisy"`` and ``"noisy_debiased"`` are built from the released
gradients (free); ``PrivateGOE`` releases the clean preconditioner ``(Σ ū ūᵀ)^{1/2}`` with
GOE noise each step (part ``"precond"``, ``μ_H/√T``-GDP, ``μ_H = μ_steps√f_H``), which needs
one fixed basis. ``StepPolicy`` is the family's protocol; ``FullMatrixAdaGrad`` implements it on
its own (it is no ``SGD``) and composes its preconditioner policy as a value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol

import torch
from torch import Tensor

from botorch_dp.optim.options.base import RunPlan
from botorch_dp.optim.options.registry import Strategy, StrategyLike, register
from botorch_dp.optim.projected import SubspaceTrack
from botorch_dp.optim.step_rules import PRECONDITIONERS, Preconditioner, StepRule, make_step_optimizer
from botorch_dp.privacy.checks import check_positive
from botorch_dp.privacy.ledger import Gaussian, Meter
from botorch_dp.privacy.mechanisms import GOEPreconditionerMechanism
from botorch_dp.privacy.mechanisms.sums import ClippedSum

__all__ = ["SGD", "AdaGrad", "FullMatrixAdaGrad", "PreconditionerRecord", "StepPolicy"]

PRECONDITIONER_KEY = "precond"


class StepPolicy(StrategyLike, Protocol):
    r"""A step rule: the ``torch.optim`` optimizer that moves ``θ`` by the released gradients
    (post-processing), and what the rule itself releases from a step's clipped sum (``observe``:
    each release recorded through ``meter``; ``bound_parts`` declares them before any draw, and
    ``mu_fraction`` their share of ``μ_steps²``, ``BudgetSplit.precond_fraction``)."""

    @property
    def mu_fraction(self) -> float | None:
        r"""``f_H``, the rule's releases' share of ``μ_steps²`` (``None``: it releases nothing)."""
        ...

    @property
    def keeps_coordinates(self) -> bool:
        r"""Whether the run records the released coordinates for this rule."""
        ...

    def make_optimizer(self, theta: Tensor, step_size: float) -> torch.optim.Optimizer:
        r"""The optimizer of ``θ`` (a ``d``-vector) at step size ``η``."""
        ...

    def bound_parts(self, plan: RunPlan) -> dict[str, Gaussian]:
        r"""What one step's ``observe`` may release, at its largest cost."""
        ...

    def observe(self, summed: ClippedSum, plan: RunPlan, track: SubspaceTrack, meter: Meter) -> SubspaceTrack:
        r"""The rule's releases from the step's clipped sum (SENSITIVE), and the track after them."""
        ...

    def extras(self, basis: Tensor | None, noise_std: float, track: SubspaceTrack) -> dict[str, Any]:
        r"""Public keyword arguments of the optimizer's ``step``."""
        ...

    def record(self, plan: RunPlan, track: SubspaceTrack) -> PreconditionerRecord:
        r"""What a release carries of the rule (``PrivateRelease.records["step_rule"]``), public."""
        ...


@dataclass(frozen=True)
class PreconditionerRecord:
    r"""What a release carries of the step rule (``PrivateRelease.records["step_rule"]``), public;
    empty unless the rule releases a preconditioner (``PrivateGOE``).

    Attributes:
        preconditioners: The released ``k x k`` ``Ĝ_t`` of each step.
        mus: ``μ_H/√T``, the GDP parameter of each of those releases.
        noise_stds: ``σ_B(t)`` of each (GOE scale).
    """

    preconditioners: tuple[Tensor, ...] = ()
    mus: tuple[float, ...] = ()
    noise_stds: tuple[float, ...] = ()


@register("step_rule", "sgd")
@dataclass(frozen=True)
class SGD(Strategy):
    r"""``θ ← Π_Θ(θ − η g)``."""

    rule: ClassVar[StepRule] = "sgd"

    @property
    def mu_fraction(self) -> float | None:
        r"""The preconditioner's share of the steps' budget (none)."""
        return None

    @property
    def keeps_coordinates(self) -> bool:
        r"""Whether the run records the released coordinates for this rule."""
        return False

    def make_optimizer(self, theta: Tensor, step_size: float) -> torch.optim.Optimizer:
        return make_step_optimizer(theta, self.rule, step_size)

    def bound_parts(self, plan: RunPlan) -> dict[str, Gaussian]:
        return {}

    def observe(self, summed: ClippedSum, plan: RunPlan, track: SubspaceTrack, meter: Meter) -> SubspaceTrack:
        r"""What the rule releases from the step's clipped sum (nothing)."""
        return track

    def extras(self, basis: Tensor | None, noise_std: float, track: SubspaceTrack) -> dict[str, Any]:
        r"""Keyword arguments of the optimizer's ``step`` (none)."""
        return {}

    def record(self, plan: RunPlan, track: SubspaceTrack) -> PreconditionerRecord:
        r"""What the rule released (nothing)."""
        return PreconditionerRecord()


@register("step_rule", "adagrad")
@dataclass(frozen=True)
class AdaGrad(SGD):
    r"""Coordinate-wise AdaGrad on the released gradients."""

    rule: ClassVar[StepRule] = "adagrad"


@dataclass(frozen=True)
class PrivateGOE(Strategy):
    r"""The private preconditioner of ``FullMatrixAdaGrad``: ``f_H`` in ``(0, 1)``, its share of
    ``μ_steps²`` (default 0.5: ``μ_g = μ_H = μ_steps/√2``)."""

    mu_fraction: float = 0.5
    requires = frozenset({"fixed_basis", "fixed_clip_bound"})

    def __post_init__(self) -> None:
        fraction = check_positive(self.mu_fraction, "preconditioner_mu_fraction", allow_inf=False)
        if not fraction < 1.0:
            raise ValueError(f"preconditioner_mu_fraction must lie in (0, 1), got {fraction!r}.")


@register("step_rule", "adagrad_full")
@dataclass(frozen=True)
class FullMatrixAdaGrad(Strategy):
    r"""Full-matrix AdaGrad (Kairouz et al.) with ``preconditioner`` ``"noisy"``,
    ``"noisy_debiased"`` or a ``PrivateGOE``."""

    preconditioner: Preconditioner | PrivateGOE = "noisy"
    rule: ClassVar[StepRule] = "adagrad_full"

    def __post_init__(self) -> None:
        if self.preconditioner == "private":
            object.__setattr__(self, "preconditioner", PrivateGOE())
        if isinstance(self.preconditioner, str) and self.preconditioner not in PRECONDITIONERS:
            raise ValueError(f"preconditioner must be one of {PRECONDITIONERS}, got {self.preconditioner!r}.")
        if not isinstance(self.preconditioner, (str, PrivateGOE)):
            raise ValueError(
                f"preconditioner must be one of {PRECONDITIONERS} or a PrivateGOE, got {self.preconditioner!r}."
            )

    @property
    def private(self) -> PrivateGOE | None:
        return self.preconditioner if isinstance(self.preconditioner, PrivateGOE) else None

    @property
    def kind(self) -> Preconditioner:
        r"""``"noisy"``, ``"noisy_debiased"`` or ``"private"``."""
        return "private" if isinstance(self.preconditioner, PrivateGOE) else self.preconditioner

    @property
    def requires(self) -> frozenset[str]:  # type: ignore[override]
        return PrivateGOE.requires if self.private is not None else frozenset()

    @property
    def mu_fraction(self) -> float | None:
        return None if self.private is None else self.private.mu_fraction

    @property
    def keeps_coordinates(self) -> bool:
        return self.private is not None

    @property
    def key(self) -> str:
        return "step_rule:private" if self.private is not None else super().key

    @property
    def label(self) -> str:
        return f"step_rule='adagrad_full' with preconditioner={self.kind!r}"

    def conflicts(self) -> dict[str, str]:
        r"""The private preconditioner's noise is calibrated once for the run (one sensitivity
        ``2B/n``, one per-step share of ``μ``): a moving bound or a per-step budget breaks it."""
        if self.private is None:
            return {}
        return {
            "clip:adaptive": (
                "its GOE noise is calibrated to one sensitivity 2B/n for the whole run (the released "
                "matrix sums every step's clipped mean), and adaptive clipping moves B each step"
            ),
            "noise:adaptive_norm": (
                "its noise is calibrated to a fixed per-step share of mu, while the adaptive "
                "schedule's steps spend what their released norms ask for"
            ),
        }

    def spec(self) -> dict[str, Any]:
        return {"kind": self.name, "preconditioner": self.kind, "mu_fraction": self.mu_fraction}

    @classmethod
    def from_spec(cls, spec: Any) -> FullMatrixAdaGrad:
        kind = spec["preconditioner"]
        return cls(PrivateGOE(spec["mu_fraction"]) if kind == "private" else kind)

    def make_optimizer(self, theta: Tensor, step_size: float) -> torch.optim.Optimizer:
        return make_step_optimizer(theta, self.rule, step_size, preconditioner=self.kind)

    def mechanism(self, plan: RunPlan, bound: float) -> GOEPreconditionerMechanism:
        r"""The private preconditioner's mechanism at the step's ``Δ = 2B/n``."""
        return GOEPreconditionerMechanism(
            sensitivity=2.0 * bound / plan.num_users,
            privacy_mu=_precond_mu(plan),
            num_steps=plan.iteration_cap,
            generator=plan.generator,
        )

    def bound_parts(self, plan: RunPlan) -> dict[str, Gaussian]:
        if self.private is None:
            return {}
        return {PRECONDITIONER_KEY: Gaussian(_precond_mu(plan) / math.sqrt(plan.iteration_cap))}

    def observe(self, summed: ClippedSum, plan: RunPlan, track: SubspaceTrack, meter: Meter) -> SubspaceTrack:
        r"""With ``PrivateGOE``: ``Ĝ_t`` of the clean ``X_t = [ū_1 … ū_t]`` (``ū_t`` the step's
        clipped mean in the basis' coordinates, SENSITIVE and kept in the run's track)."""
        if self.private is None:
            return track
        columns = (*track.columns, summed.mean())
        released = self.mechanism(plan, summed.bound).release(torch.stack(columns, dim=-1), meter=meter)
        return replace(
            track,
            columns=columns,
            preconditioners=(*track.preconditioners, released.matrix),
            preconditioner_noise_stds=(*track.preconditioner_noise_stds, released.noise_std),
        )

    def extras(self, basis: Tensor | None, noise_std: float, track: SubspaceTrack) -> dict[str, Any]:
        r"""The public extras ``FullMatrixAdagrad.step`` needs: the basis, the std ``σ_t`` of each
        released coordinate and, with ``PrivateGOE``, the released ``Ĝ_t`` and its ``σ_B(t)``."""
        extras: dict[str, Any] = {"basis": basis, "noise_std": noise_std}
        if self.private is not None:
            extras["released_preconditioner"] = track.preconditioners[-1]
            extras["preconditioner_noise_std"] = track.preconditioner_noise_stds[-1]
        return extras

    def record(self, plan: RunPlan, track: SubspaceTrack) -> PreconditionerRecord:
        r"""With ``PrivateGOE``: each released ``Ĝ_t`` with its ``μ_H/√T`` and ``σ_B(t)`` (never the
        track's SENSITIVE columns); else nothing."""
        if self.private is None:
            return PreconditionerRecord()
        mu = _precond_mu(plan) / math.sqrt(plan.iteration_cap)
        count = len(track.preconditioners)
        return PreconditionerRecord(track.preconditioners, (mu,) * count, track.preconditioner_noise_stds)


def _precond_mu(plan: RunPlan) -> float:
    r"""``μ_H`` of the run's split (set whenever ``Options.split`` sees a ``PrivateGOE``)."""
    mu = plan.split.precond_mu
    if mu is None:
        raise ValueError(f"The private preconditioner needs a BudgetSplit with a precond_fraction, got {plan.split!r}.")
    return mu
