r"""Step rules: how a released gradient moves ``θ``, ``θ ← Π_Θ(θ − η · rule(g))`` (post-processing).

The iterate ``θ`` is the one parameter of a ``torch.optim`` optimizer (``StepPolicy.make_optimizer``):
``SGD`` and ``AdaGrad`` (``torch.optim.SGD``/``Adagrad``), and ``FullMatrixAdaGrad`` (Kairouz et al.,
spec A3; the optimizer ``FullMatrixAdagrad`` below) with its preconditioner policy, a
``PreconditionerPolicy`` registered under ``"preconditioner"``: ``Noisy`` and ``NoisyDebiased`` are
built from the released gradients (free); ``PrivateGOE`` releases the clean preconditioner
``(Σ ū ūᵀ)^{1/2}`` with GOE noise each step (part ``"precond"``, ``μ_H/√T``-GDP,
``μ_H = μ_steps√f_H``), which needs one fixed basis. Each step hands the optimizer a released
gradient and projects onto the box once (``projected_step``); the optimizer's ``state_dict``
(AdaGrad's sums) goes into the checkpoint. ``StepPolicy`` is the family's protocol;
``FullMatrixAdaGrad`` implements it on its own (it is no ``SGD``) and composes its preconditioner
policy as a value.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal, Protocol, cast, overload

import torch
from torch import Tensor

from botorch_dp.optim.options.base import RunPlan
from botorch_dp.optim.options.records import (
    ResumeContext,
    RunRecords,
    SubspaceTrack,
    compact,
    floats_from_json,
    floats_to_json,
    payload_entries,
    tensors_from_json,
    tensors_to_json,
)
from botorch_dp.optim.options.registry import Strategy, StrategyLike, lookup, missing_members, register, registered
from botorch_dp.privacy.checks import check_positive
from botorch_dp.privacy.ledger import Gaussian, Meter
from botorch_dp.privacy.mechanisms import GOEPreconditionerMechanism
from botorch_dp.privacy.mechanisms.sums import ClippedSum
from botorch_dp.utils import project_to_box

__all__ = [
    "ADAGRAD_EPS",
    "SGD",
    "AdaGrad",
    "FullMatrixAdaGrad",
    "FullMatrixAdagrad",
    "Noisy",
    "NoisyDebiased",
    "PreconditionerPolicy",
    "PreconditionerRecord",
    "PrivateGOE",
    "StepPolicy",
    "StepRule",
    "as_preconditioner",
    "debiased_floor",
    "floored_solve",
    "preconditioner_floor",
    "projected_step",
    "psd_sqrt",
]

#: The registered step rules' names (``DPGIBOConfig(step_rule="adagrad")`` and the baselines' keyword).
StepRule = Literal["sgd", "adagrad", "adagrad_full"]
#: The ledger part of the private preconditioner's releases.
PRECONDITIONER_KEY = "precond"
#: ``eps`` added to AdaGrad's denominator ``√(Σ g²) + eps`` (the package's historical value;
#: ``torch.optim.Adagrad``'s own default is 1e-10).
ADAGRAD_EPS = 1e-8


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

    def json_fields(self) -> dict[str, Any]:
        r"""What a release's JSON holds of it (``DPGIBOResult.to_json``): each release's ``μ`` and ``σ_B``."""
        return {"preconditioner_mus": list(self.mus), "preconditioner_noise_stds": list(self.noise_stds)}

    def released(self) -> dict[tuple[int | None, str], Any]:
        r"""Each step's released ``Ĝ_t`` (ledger part ``"precond"``)."""
        return {(step, PRECONDITIONER_KEY): G for step, G in enumerate(self.preconditioners)}

    def charged(self) -> dict[tuple[int | None, str], float | None]:
        r"""The μ of each of those releases."""
        return {(step, PRECONDITIONER_KEY): mu for step, mu in enumerate(self.mus)}


def projected_step(optimizer: torch.optim.Optimizer, gradient: Tensor, bounds: Tensor, **step_kwargs: Any) -> Tensor:
    r"""One step of a ``StepPolicy``'s optimizer on the released ``gradient`` (``step_kwargs``: its
    public extras), then the projection ``Π_Θ``: a copy of the new iterate ``θ_{t+1}``."""
    theta = optimizer.param_groups[0]["params"][0]
    theta.grad = gradient.detach().to(theta)
    optimizer.step(**step_kwargs)
    theta.grad = None
    with torch.no_grad():
        theta.copy_(project_to_box(theta, bounds))
    return theta.detach().clone()


@register("step_rule", "sgd")
@dataclass(frozen=True)
class SGD(Strategy):
    r"""``θ ← Π_Θ(θ − η g)`` (``torch.optim.SGD``)."""

    #: It writes no run records (its state is the optimizer's, which the checkpoint keeps).
    stateless: ClassVar[bool] = True

    @property
    def mu_fraction(self) -> float | None:
        return None

    @property
    def keeps_coordinates(self) -> bool:
        return False

    def make_optimizer(self, theta: Tensor, step_size: float) -> torch.optim.Optimizer:
        return torch.optim.SGD([theta.detach().clone()], lr=step_size)

    def bound_parts(self, plan: RunPlan) -> dict[str, Gaussian]:
        return {}

    def observe(self, summed: ClippedSum, plan: RunPlan, track: SubspaceTrack, meter: Meter) -> SubspaceTrack:
        return track

    def extras(self, basis: Tensor | None, noise_std: float, track: SubspaceTrack) -> dict[str, Any]:
        return {}

    def record(self, plan: RunPlan, track: SubspaceTrack) -> PreconditionerRecord:
        return PreconditionerRecord()


@register("step_rule", "adagrad")
@dataclass(frozen=True)
class AdaGrad(SGD):
    r"""Coordinate-wise AdaGrad on the released gradients: ``θ ← θ − η g / (√(Σ_{s≤t} g_s²) + eps)``
    (``torch.optim.Adagrad`` with ``eps = ADAGRAD_EPS``)."""

    def make_optimizer(self, theta: Tensor, step_size: float) -> torch.optim.Optimizer:
        return torch.optim.Adagrad([theta.detach().clone()], lr=step_size, eps=ADAGRAD_EPS)


class PreconditionerPolicy(StrategyLike, Protocol):
    r"""How ``FullMatrixAdagrad`` builds its ``k x k`` preconditioner ``Ĥ_t`` and the floor of its
    eigenvalues (registered under ``"preconditioner"``: ``Noisy``, ``NoisyDebiased``, ``PrivateGOE``)."""

    @property
    def mu_fraction(self) -> float | None:
        r"""``f_H``, the share of ``μ_steps²`` the preconditioner's releases take (``None``: it is free)."""
        ...

    def floored(
        self,
        state: dict[str, Any],
        basis: Tensor,
        eps: float,
        floor_scale: float,
        released: Tensor | None,
        released_noise_std: float,
    ) -> tuple[Tensor, float]:
        r"""``(Ĥ_t, λ_floor)`` from the optimizer's ``state`` (``sum_outer``, ``noise_outer``,
        ``noise_fourth``), the ``d x k`` ``basis``, AdaGrad's ``eps``, ``c_fl`` and a released
        preconditioner with its noise std (public)."""
        ...


@register("preconditioner", "noisy")
@dataclass(frozen=True)
class Noisy(Strategy):
    r"""``Ĥ_t = Ṽ_tᵀ (Σ_{s≤t} g̃_s g̃_sᵀ)^{1/2} Ṽ_t`` from the released gradients (free), floored at ``eps``."""

    @property
    def mu_fraction(self) -> float | None:
        return None

    def floored(
        self,
        state: dict[str, Any],
        basis: Tensor,
        eps: float,
        floor_scale: float,
        released: Tensor | None,
        released_noise_std: float,
    ) -> tuple[Tensor, float]:
        return basis.transpose(0, 1) @ psd_sqrt(state["sum_outer"]) @ basis, eps


@register("preconditioner", "noisy_debiased")
@dataclass(frozen=True)
class NoisyDebiased(Noisy):
    r"""``Ĥ_t = Ṽ_tᵀ PSD(Σ_s g̃_s g̃_sᵀ − Σ_s σ_s² Ṽ_sṼ_sᵀ)^{1/2} Ṽ_t`` (free: ``σ_s`` is public), which
    removes the noise's expected ``σ² I``, floored at the noise level of that difference
    (``debiased_floor``, an addition to the spec, which floors at ``eps`` only)."""

    def floored(
        self,
        state: dict[str, Any],
        basis: Tensor,
        eps: float,
        floor_scale: float,
        released: Tensor | None,
        released_noise_std: float,
    ) -> tuple[Tensor, float]:
        floor = debiased_floor(basis.shape[1], float(state["noise_fourth"]), eps, floor_scale)
        return basis.transpose(0, 1) @ psd_sqrt(state["sum_outer"] - state["noise_outer"]) @ basis, floor


@register("preconditioner", "private")
@dataclass(frozen=True)
class PrivateGOE(Strategy):
    r"""The private preconditioner of ``FullMatrixAdaGrad``: ``f_H`` in ``(0, 1)``, its share of
    ``μ_steps²`` (default 0.5: ``μ_g = μ_H = μ_steps/√2``). ``Ĥ_t`` is the released ``Ĝ_t``
    (``k x k``, from ``GOEPreconditionerMechanism``), floored at ``max(eps, c_fl 2√k σ_B(t))``."""

    mu_fraction: float = 0.5
    requires = frozenset({"fixed_basis", "fixed_clip_bound"})

    def __post_init__(self) -> None:
        fraction = check_positive(self.mu_fraction, "preconditioner_mu_fraction", allow_inf=False)
        if not fraction < 1.0:
            raise ValueError(f"preconditioner_mu_fraction must lie in (0, 1), got {fraction!r}.")

    def floored(
        self,
        state: dict[str, Any],
        basis: Tensor,
        eps: float,
        floor_scale: float,
        released: Tensor | None,
        released_noise_std: float,
    ) -> tuple[Tensor, float]:
        k = basis.shape[1]
        if released is None or released.shape != (k, k):
            raise ValueError(f"The private preconditioner needs the released {k} x {k} matrix.")
        return released.to(basis), preconditioner_floor(k, released_noise_std, eps, floor_scale)


def as_preconditioner(value: Any) -> PreconditionerPolicy:
    r"""``value`` if it is a ``PreconditionerPolicy``, the one registered under the name ``value``
    (with its defaults) if a string; else a ``ValueError`` naming the registered ones."""
    if isinstance(value, str):
        policy: PreconditionerPolicy = lookup("preconditioner", value, "preconditioner")()
        return policy
    if missing_members(value, PreconditionerPolicy):
        raise ValueError(
            f"preconditioner must be one of {sorted(registered('preconditioner'))} or a PreconditionerPolicy, "
            f"got {value!r}."
        )
    return cast(PreconditionerPolicy, value)


@register("step_rule", "adagrad_full")
@dataclass(frozen=True)
class FullMatrixAdaGrad(Strategy):
    r"""Full-matrix AdaGrad (Kairouz et al.; ``FullMatrixAdagrad``) with a preconditioner policy:
    ``Noisy()`` (default), ``NoisyDebiased()`` or ``PrivateGOE(f_H)``, or its registered name
    (``"noisy"``, ``"noisy_debiased"``, ``"private"``: the policy with its defaults)."""

    preconditioner: PreconditionerPolicy | str = "noisy"

    def __post_init__(self) -> None:
        object.__setattr__(self, "preconditioner", as_preconditioner(self.preconditioner))

    @property
    def policy(self) -> PreconditionerPolicy:
        r"""The preconditioner policy (resolved from its name when the rule was made)."""
        return cast(PreconditionerPolicy, self.preconditioner)

    @property
    def private(self) -> PrivateGOE | None:
        return self.preconditioner if isinstance(self.preconditioner, PrivateGOE) else None

    @property
    def kind(self) -> str:
        r"""The preconditioner's registered name: ``"noisy"``, ``"noisy_debiased"`` or ``"private"``."""
        return self.policy.name

    @property
    def requires(self) -> frozenset[str]:  # type: ignore[override]
        return self.policy.requires

    @property
    def mu_fraction(self) -> float | None:
        return self.policy.mu_fraction

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
        policy: Any = lookup("preconditioner", spec["preconditioner"], "preconditioner")
        fraction = spec.get("mu_fraction")
        return cls(policy() if fraction is None else policy(mu_fraction=fraction))

    def make_optimizer(self, theta: Tensor, step_size: float) -> torch.optim.Optimizer:
        r"""``FullMatrixAdagrad`` over a copy of ``θ`` with this rule's preconditioner policy."""
        return FullMatrixAdagrad([theta.detach().clone()], lr=step_size, preconditioner=self.policy)

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

    def state_json(self, records: RunRecords) -> dict[str, Any]:
        r"""The private preconditioner's releases and its SENSITIVE columns ``ū_t`` (nothing without it)."""
        track = records.track
        return compact(
            {
                "preconditioners": tensors_to_json(track.preconditioners),
                "preconditioner_noise_stds": floats_to_json(track.preconditioner_noise_stds),
                "columns": tensors_to_json(track.columns),
            }
        )

    def restore_state(self, payload: dict[str, Any], records: RunRecords, context: ResumeContext) -> RunRecords:
        r"""``records`` with the private preconditioner's part of the track (``T`` symmetric ``k x k``
        releases, their noise stds and the ``k``-vectors ``ū_t``, ``k`` that of the released coordinates,
        which the projection restored before), checked; the basis must be one for the whole run."""
        names = ("preconditioners", "preconditioner_noise_stds", "columns")
        entry = payload_entries(payload, dict.fromkeys(names, []), "step_rule")
        track, count = records.track, context.steps if self.private is not None else 0
        k = track.coordinates[0].shape[0] if track.coordinates else context.dim
        field = "strategies.step_rule"
        preconditioners = tensors_from_json(entry["preconditioners"], [(k, k)] * count, f"{field}.preconditioners")
        if any(not torch.equal(G, G.transpose(0, 1)) for G in preconditioners):
            raise ValueError(f"Checkpoint field '{field}.preconditioners' must hold symmetric matrices.")
        stds = floats_from_json(entry["preconditioner_noise_stds"], count, f"{field}.preconditioner_noise_stds")
        if any(x < 0 for x in stds):
            raise ValueError(f"Checkpoint field '{field}.preconditioner_noise_stds' must be non-negative.")
        columns = tensors_from_json(entry["columns"], [(k,)] * count, f"{field}.columns")
        if count and any(not torch.equal(V, track.bases[0]) for V in track.bases):
            raise ValueError(
                "Checkpoint field 'strategies.projection.bases': the private preconditioner needs one fixed basis."
            )
        return replace(
            records,
            track=replace(
                track, preconditioners=preconditioners, preconditioner_noise_stds=tuple(stds), columns=columns
            ),
        )


def _precond_mu(plan: RunPlan) -> float:
    r"""``μ_H`` of the run's split (set whenever ``Options.split`` sees a ``PrivateGOE``)."""
    mu = plan.split.precond_mu
    if mu is None:
        raise ValueError(f"The private preconditioner needs a BudgetSplit with a precond_fraction, got {plan.split!r}.")
    return mu


# ------------------------------------------------------- full-matrix AdaGrad's arithmetic (Kairouz et al.)
def psd_sqrt(M: Tensor) -> Tensor:
    r"""``PSD(M)^{1/2}``: the square root of a symmetric matrix with its negative eigenvalues
    set to 0 (``M`` is symmetrised first).
    """
    eigenvalues, Q = torch.linalg.eigh((M + M.transpose(-1, -2)) / 2)
    root = (Q * eigenvalues.clamp_min(0.0).sqrt().unsqueeze(-2)) @ Q.transpose(-1, -2)
    return (root + root.transpose(-1, -2)) / 2


def floored_solve(H: Tensor, u: Tensor, floor: float) -> Tensor:
    r"""``Ĥ⁻¹ u`` with ``Ĥ = Q max(Λ, floor) Qᵀ`` for the symmetrised ``H = QΛQᵀ`` (spec E2.4).

    The floor keeps the step a descent direction when ``H`` is indefinite (GOE noise) or
    singular (few gradients so far).
    """
    eigenvalues, Q = torch.linalg.eigh((H + H.transpose(-1, -2)) / 2)
    return Q @ ((Q.transpose(-1, -2) @ u) / eigenvalues.clamp_min(floor))


def preconditioner_floor(k: int, noise_std: float, eps: float = ADAGRAD_EPS, scale: float = 1.0) -> float:
    r"""``λ_floor = max(eps, c_fl · 2√k · σ_B)``: the GOE spectral edge ``2√k σ_B`` of the
    preconditioner noise (0 for the free preconditioners), at least AdaGrad's ``eps``."""
    return max(eps, scale * 2.0 * math.sqrt(k) * noise_std)


def debiased_floor(k: int, noise_fourth_sum: float, eps: float = ADAGRAD_EPS, scale: float = 1.0) -> float:
    r"""``λ_floor = max(eps, c_fl (4k Σ_s σ_s⁴)^{1/4})`` for the debiased preconditioner.

    ``Σ_s (w_s w_sᵀ − σ_s² I)``, the noise left in the debiased sum, has entries of variance
    ``Σσ_s⁴`` off the diagonal (``2Σσ_s⁴`` on it): close to ``√(Σσ_s⁴)`` times a GOE matrix,
    whose spectral edge is ``2√k √(Σσ_s⁴)``. Eigenvalues of the debiased sum below that edge
    are noise, so its square root is floored at ``√(2√k √(Σσ_s⁴))``. Without this floor a
    direction the clip to PSD zeroed would be divided by ``eps`` while the released ``ũ_t``
    still carries noise of size ``σ_t`` there (steps of ``η σ_t / eps``).
    """
    return max(eps, scale * (4.0 * k * noise_fourth_sum) ** 0.25)


class FullMatrixAdagrad(torch.optim.Optimizer):
    r"""Full-matrix AdaGrad on released gradients, optionally in a public subspace (Kairouz et al., spec A3).

    Each ``step`` reads the released θ-space gradient ``g̃_t = Ṽ_t ũ_t`` from ``θ.grad`` and
    moves ``θ ← θ − η Ṽ_t Ĥ_t⁻¹ ũ_t`` (``ũ_t = Ṽ_tᵀ g̃_t``; the caller projects onto the box).
    ``Ĥ_t`` is the ``k x k`` preconditioner of the ``preconditioner`` policy (``Noisy``,
    ``NoisyDebiased``, ``PrivateGOE``), its eigenvalues floored at the policy's ``λ_floor``
    (``eps``, and ``c_fl`` = ``floor_scale`` for the private and debiased floors). With a fixed
    basis ``Ṽ`` the free preconditioners equal the spec's ``(Σ ũ_sũ_sᵀ)^{1/2}`` in ``k``
    coordinates; the statistics are kept in θ-space so that a basis that changes from step to
    step is handled too. Without a basis, ``Ṽ = I``: ordinary full-matrix AdaGrad.

    State (checkpointed): ``step``, ``sum_outer`` (``Σ g̃ g̃ᵀ``, ``d x d``),
    ``noise_outer`` (``Σ σ² ṼṼᵀ``, ``d x d``) and ``noise_fourth`` (``Σ σ⁴``).
    """

    def __init__(
        self,
        params: Any,
        lr: float,
        *,
        preconditioner: PreconditionerPolicy | str = "noisy",
        eps: float = ADAGRAD_EPS,
        floor_scale: float = 1.0,
    ) -> None:
        policy = as_preconditioner(preconditioner)
        if not lr > 0 or not eps > 0 or not floor_scale >= 0:
            raise ValueError("lr and eps must be positive and floor_scale non-negative.")
        super().__init__(params, dict(lr=lr, eps=eps, floor_scale=floor_scale))
        if len(self.param_groups) != 1 or len(self.param_groups[0]["params"]) != 1:
            raise ValueError("FullMatrixAdagrad takes exactly one parameter (θ).")
        self.preconditioner = policy

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        r"""Load a ``state_dict``; ``ValueError`` if its sums are not ``d x d`` finite tensors."""
        d = self.param_groups[0]["params"][0].numel()
        for entry in dict(state_dict.get("state", {})).values():
            if set(entry) != {"step", "sum_outer", "noise_outer", "noise_fourth"}:
                raise ValueError(
                    "FullMatrixAdagrad state must hold step, sum_outer, noise_outer and noise_fourth, "
                    f"got {sorted(entry)}."
                )
            for key in ("sum_outer", "noise_outer"):
                value = entry[key]
                if not isinstance(value, Tensor) or value.shape != (d, d) or not torch.isfinite(value).all():
                    raise ValueError(f"FullMatrixAdagrad state {key!r} must be a finite {d} x {d} tensor.")
        super().load_state_dict(state_dict)

    # torch.optim.Optimizer.step's two overloads (no closure: None; a closure: its value), with the extras
    @overload
    def step(
        self,
        closure: None = None,
        *,
        basis: Tensor | None = None,
        noise_std: float = 0.0,
        released_preconditioner: Tensor | None = None,
        preconditioner_noise_std: float = 0.0,
    ) -> None: ...

    @overload
    def step(
        self,
        closure: Callable[[], float],
        *,
        basis: Tensor | None = None,
        noise_std: float = 0.0,
        released_preconditioner: Tensor | None = None,
        preconditioner_noise_std: float = 0.0,
    ) -> float: ...

    @torch.no_grad()
    def step(
        self,
        closure: Callable[[], float] | None = None,
        *,
        basis: Tensor | None = None,
        noise_std: float = 0.0,
        released_preconditioner: Tensor | None = None,
        preconditioner_noise_std: float = 0.0,
    ) -> float | None:
        r"""One step on ``θ.grad`` (the released ``g̃_t``) in the public ``basis`` ``Ṽ_t`` (default
        ``I_d``); ``noise_std``: ``σ_t`` of each released coordinate (``"noisy_debiased"``);
        ``released_preconditioner`` and its ``preconditioner_noise_std`` ``σ_B(t)``: ``"private"``
        only. A ``closure`` (``torch.optim``'s signature) is called and its value returned."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        group = self.param_groups[0]
        theta = group["params"][0]
        g = theta.grad.reshape(-1)
        d = g.shape[0]
        V = torch.eye(d, dtype=g.dtype, device=g.device) if basis is None else basis.to(g)
        if V.dim() != 2 or V.shape[0] != d:
            raise ValueError(f"basis must be d x k with d = {d}, got shape {tuple(V.shape)}.")
        state = self.state[theta]
        if not state:
            state["step"] = torch.zeros((), dtype=torch.float64, device=g.device)
            state["sum_outer"] = torch.zeros(d, d, dtype=g.dtype, device=g.device)
            state["noise_outer"] = torch.zeros(d, d, dtype=g.dtype, device=g.device)
            state["noise_fourth"] = torch.zeros((), dtype=torch.float64, device=g.device)
        state["step"] += 1
        state["sum_outer"] += torch.outer(g, g)
        if noise_std:
            state["noise_outer"] += (noise_std**2) * (V @ V.transpose(0, 1))
            state["noise_fourth"] += noise_std**4
        u = V.transpose(0, 1) @ g
        extras = (released_preconditioner, preconditioner_noise_std)
        H, floor = self.preconditioner.floored(state, V, group["eps"], group["floor_scale"], *extras)
        direction = V @ floored_solve(H, u, floor)
        theta.add_(direction.reshape(theta.shape), alpha=-group["lr"])
        return loss
