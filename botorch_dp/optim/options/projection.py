r"""Projections of the per-user estimates on a public subspace (Kairouz et al.), and their arithmetic.

``NoProjection`` releases ``d`` coordinates. ``Projected(oracle, acquisition=False)`` asks a
``SubspaceOracle`` (``optim.subspace``: fixed basis, public-gradient PCA, previous runs' PCA,
posterior gradient covariance) for each step's public ``d x k`` basis ``Ṽ_t``, projects the
estimates before clipping (the users' sum is taken at ``W = Ṽ_tᵀ A``: same sensitivity ``2B/n``,
``k`` noised coordinates) and lifts the release back, ``Ṽ_t ũ_t`` (``lift``); with
``acquisition`` the batches are chosen for the projected gradient too (spec A5). ``Projection``
is the family's protocol.

``projected_release`` is the same release as a function. A projection's part of the run's
``SubspaceTrack`` (the bases and released coordinates) is saved and checked by
``projection_state_json``/``restore_projection_state``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch import Tensor

from botorch_dp.gradient_gp import GradientGP
from botorch_dp.optim.options.records import (
    ResumeContext,
    RunRecords,
    SubspaceTrack,
    compact,
    payload_entries,
    tensors_from_json,
    tensors_to_json,
)
from botorch_dp.optim.options.registry import Strategy, StrategyLike, register
from botorch_dp.optim.subspace import SubspaceOracle, check_basis, subspace_from_spec
from botorch_dp.privacy.mechanisms import GaussianGradientMechanism, GradientRelease, NonfiniteLosses

if TYPE_CHECKING:
    from botorch_dp.privacy.ledger import Meter

__all__ = [
    "NoProjection",
    "Projected",
    "ProjectedRelease",
    "Projection",
    "ProjectionRecord",
    "SubspaceTrack",
    "lift",
    "projected_release",
    "projection_state_json",
    "restore_projection_state",
]


class Projection(StrategyLike, Protocol):
    r"""A projection of the per-user estimates on a public basis ``Ṽ_t`` (``d x k``): the step's
    basis (``None``: all ``d`` coordinates), the acquisition's, the batch size it suggests, how
    many coordinates a step noises, and the lift of a release back to ``θ``'s coordinates. The
    basis is computed from public values only (``θ_t``, the GP before the step's batch, the
    track); its records go in the run's ``SubspaceTrack``."""

    def basis(self, theta: Tensor, gp: GradientGP, track: SubspaceTrack) -> Tensor | None:
        r"""``Ṽ_t`` of the step at ``θ_t`` (``d x k``), or ``None``."""
        ...

    def acquisition_basis(self, theta: Tensor, gp: GradientGP, track: SubspaceTrack) -> Tensor | None:
        r"""The basis the batch search projects on, or ``None``."""
        ...

    def default_batch_size(self, dim: int) -> int:
        r"""The batch size a fixed batch rule without ``size`` uses."""
        ...

    def released_dim(self, dim: int) -> int:
        r"""How many coordinates a step noises."""
        ...

    def check(self, dim: int) -> None:
        r"""Refuse a projection that cannot run in ``d`` dimensions (``ValueError``)."""
        ...

    def lift(
        self, release: GradientRelease, basis: Tensor | None, track: SubspaceTrack, record: bool
    ) -> tuple[GradientRelease, SubspaceTrack]:
        r"""The release in ``θ``'s coordinates and the track after it (``record``: keep the
        released coordinates, which the step rule asks for)."""
        ...

    def record(self, track: SubspaceTrack) -> ProjectionRecord:
        r"""What a release carries of the projection (``PrivateRelease.records["projection"]``)."""
        ...


@dataclass(frozen=True)
class ProjectionRecord:
    r"""What a release carries of the projection (``PrivateRelease.records["projection"]``), public.

    Attributes:
        bases: The ``d x k`` basis ``Ṽ_t`` of each step (empty without a subspace); the released
            gradients are then ``Ṽ_t ũ_t``.
        coordinates: The released coordinates ``ũ_t`` of each step (``k`` of them; ``d`` without a
            subspace), kept with a subspace or when the step rule keeps them (the private
            preconditioner); else empty.
    """

    bases: tuple[Tensor, ...] = ()
    coordinates: tuple[Tensor, ...] = ()

    @property
    def dims(self) -> tuple[int, ...]:
        r"""``k`` of each step's subspace (empty without a subspace)."""
        return tuple(V.shape[1] for V in self.bases)

    def json_fields(self) -> dict[str, Any]:
        r"""What a release's JSON holds of it (``DPGIBOResult.to_json``): each step's ``k``."""
        return {"subspace_dims": list(self.dims)}


@register("projection", "none")
@dataclass(frozen=True)
class NoProjection(Strategy):
    r"""Release every coordinate (``Ṽ_t = I``)."""

    can_provide = frozenset({"fixed_basis"})

    def basis(self, theta: Tensor, gp: GradientGP, track: SubspaceTrack) -> Tensor | None:
        return None

    def acquisition_basis(self, theta: Tensor, gp: GradientGP, track: SubspaceTrack) -> Tensor | None:
        return None

    def default_batch_size(self, dim: int) -> int:
        r"""``d + 1`` points pin down ``d`` directions."""
        return dim + 1

    def released_dim(self, dim: int) -> int:
        return dim

    def check(self, dim: int) -> None:
        r"""Nothing to check."""

    def lift(
        self, release: GradientRelease, basis: Tensor | None, track: SubspaceTrack, record: bool
    ) -> tuple[GradientRelease, SubspaceTrack]:
        r"""The release as it is; its ``d`` coordinates recorded when ``record`` (another option,
        the private preconditioner, keeps them)."""
        if not record:
            return release, track
        return release, replace(track, coordinates=(*track.coordinates, release.gradient))

    def record(self, track: SubspaceTrack) -> ProjectionRecord:
        r"""The released coordinates the track keeps (no basis: ``Ṽ_t = I``)."""
        return ProjectionRecord(coordinates=track.coordinates)

    def state_json(self, records: RunRecords) -> dict[str, Any]:
        return projection_state_json(records)

    def restore_state(self, payload: dict[str, Any], records: RunRecords, context: ResumeContext) -> RunRecords:
        return restore_projection_state(payload, records, context, bases=False)


@register("projection", "subspace")
@dataclass(frozen=True)
class Projected(Strategy):
    r"""Project on ``oracle``'s public basis ``Ṽ_t`` each step.

    Args:
        oracle: A ``SubspaceOracle``; its basis must not be computed from the sensitive users.
        acquisition: Choose batches for the projected gradient ``Ṽ_tᵀ∇f`` only, maximizing the
            reduction of ``tr(Ṽ_tᵀ Σ_D(θ) Ṽ_t)`` (``bias_tolerance`` applies to that trace).
    """

    oracle: SubspaceOracle
    acquisition: bool = False
    can_provide = frozenset({"fixed_basis"})

    def __post_init__(self) -> None:
        if not isinstance(self.oracle, SubspaceOracle):
            raise ValueError(f"subspace must be a SubspaceOracle (optim.subspace), got {type(self.oracle).__name__}.")
        if not isinstance(self.acquisition, bool):
            raise ValueError(f"subspace_acquisition must be True or False, got {self.acquisition!r}.")

    @property
    def provides(self) -> frozenset[str]:
        return self.can_provide if self.oracle.fixed else frozenset()

    @property
    def label(self) -> str:
        return f"subspace={type(self.oracle).__name__}"

    def spec(self) -> dict[str, Any]:
        return {"kind": self.name, "oracle": self.oracle.spec(), "acquisition": self.acquisition}

    @classmethod
    def from_spec(cls, spec: Any) -> Projected:
        return cls(subspace_from_spec(spec["oracle"]), bool(spec["acquisition"]))

    def check(self, dim: int) -> None:
        r"""The oracle's basis must have ``d`` rows and ``k ≤ d``."""
        basis = getattr(self.oracle, "basis", None)
        if isinstance(basis, Tensor) and basis.shape[0] != dim:
            raise ValueError(f"subspace: the basis has {basis.shape[0]} rows, but the bounds have d = {dim}.")
        k = getattr(self.oracle, "k", None)
        if isinstance(k, int) and k > dim:
            raise ValueError(f"subspace: k = {k} exceeds d = {dim}.")

    def basis(self, theta: Tensor, gp: GradientGP, track: SubspaceTrack) -> Tensor:
        r"""``Ṽ_t`` from the oracle (public: ``θ_t`` and the GP before this step's batch), checked;
        a run that keeps released preconditioners needs the first step's basis again."""
        d = theta.shape[-1]
        with torch.no_grad():
            basis = check_basis(self.oracle(theta.clone(), gp), d, f"basis from {type(self.oracle).__name__}")
        if track.columns and track.bases and not torch.equal(basis, track.bases[0]):
            raise ValueError(
                f"{type(self.oracle).__name__} returned a new basis; the private preconditioner needs a fixed one."
            )
        return basis

    def acquisition_basis(self, theta: Tensor, gp: GradientGP, track: SubspaceTrack) -> Tensor | None:
        return self.basis(theta, gp, track) if self.acquisition else None

    def released_dim(self, dim: int) -> int:
        r"""How many coordinates a step noises: the oracle's ``k`` when it declares one, else ``d``."""
        k = getattr(self.oracle, "k", None)
        basis = getattr(self.oracle, "basis", None)
        k = basis.shape[1] if isinstance(basis, Tensor) and basis.dim() == 2 else k
        return min(k, dim) if isinstance(k, int) else dim

    def default_batch_size(self, dim: int) -> int:
        r"""``k + 1`` with the projected acquisition and an integer ``k`` (spec A5), else ``d + 1``."""
        k = getattr(self.oracle, "k", None) if self.acquisition else None
        return min(k, dim) + 1 if isinstance(k, int) else dim + 1

    def lift(
        self, release: GradientRelease, basis: Tensor | None, track: SubspaceTrack, record: bool
    ) -> tuple[GradientRelease, SubspaceTrack]:
        r"""``Ṽ_t ũ_t`` (and ``Ṽ_t ū_t`` in the diagnostics), with ``Ṽ_t`` and ``ũ_t`` recorded."""
        if basis is None:  # the step's basis(), which is never None for a projected run
            raise ValueError(f"{self.label} lifts a release from its basis Ṽ_t, got basis=None.")
        track = replace(track, bases=(*track.bases, basis), coordinates=(*track.coordinates, release.gradient))
        return lift(release, basis), track

    def record(self, track: SubspaceTrack) -> ProjectionRecord:
        r"""Each step's public basis and released coordinates (never the track's SENSITIVE columns)."""
        return ProjectionRecord(track.bases, track.coordinates)

    def state_json(self, records: RunRecords) -> dict[str, Any]:
        return projection_state_json(records)

    def restore_state(self, payload: dict[str, Any], records: RunRecords, context: ResumeContext) -> RunRecords:
        return restore_projection_state(payload, records, context, bases=True)


# ----------------------------------------------------------------------- the arithmetic
@dataclass
class ProjectedRelease:
    r"""A gradient released in ``k`` coordinates, and its image in θ-space.

    Attributes:
        release: The ``GradientRelease`` in θ-space: ``gradient = Ṽ ũ`` (``d``), the cost of
            the ``k``-dimensional release, and (only if requested) NON-PRIVATE diagnostics
            with ``unnoised_gradient = Ṽ ū``.
        coordinates: ``ũ = ū + N(0, σ² I_k)``, the ``k`` released coordinates (public).
        unnoised_coordinates: SENSITIVE ``ū`` (``k``), only when ``keep_unnoised``: the
            private preconditioner's input, never to be published.
    """

    release: GradientRelease
    coordinates: Tensor
    unnoised_coordinates: Tensor | None = None


def projected_release(
    mechanism: GaussianGradientMechanism,
    basis: Tensor,
    A: Tensor,
    Y: Tensor | Sequence[Tensor],
    *,
    diagnostics: bool = False,
    nonfinite: NonfiniteLosses = "refuse",
    keep_unnoised: bool = False,
    meter: Meter | None = None,
) -> ProjectedRelease:
    r"""Release ``ũ = (1/n) Σ_i clip_B(Ṽᵀ A y_i) + N(0, σ² I_k)`` through ``mechanism``.

    The public ``k x N`` matrix ``Ṽᵀ A`` takes the place of ``A`` in
    ``GaussianGradientMechanism.release``: it is projected before clipping, so each user's
    clipped ``û_i`` has norm at most ``B``, the sensitivity is ``2B/n`` and the release is
    ``μ/√T``-GDP exactly as without a subspace; only ``k`` noise coordinates are drawn.
    ``keep_unnoised``: also return the SENSITIVE ``ū`` (for the private preconditioner).
    """
    if basis.dim() != 2 or basis.shape[0] != A.shape[0]:
        raise ValueError(f"The basis must be d x k with d = {A.shape[0]}, got shape {tuple(basis.shape)}.")
    A_k = basis.transpose(0, 1) @ A  # Ṽᵀ A, k x N, public
    release = mechanism.release(A_k, Y, diagnostics=diagnostics or keep_unnoised, nonfinite=nonfinite, meter=meter)
    info = release.diagnostics
    unnoised = None if info is None or not keep_unnoised else info.unnoised_gradient
    if not diagnostics:
        release = replace(release, diagnostics=None)
    return ProjectedRelease(release=lift(release, basis), coordinates=release.gradient, unnoised_coordinates=unnoised)


def lift(release: GradientRelease, basis: Tensor) -> GradientRelease:
    r"""A ``k``-coordinate release in θ-space: ``Ṽ ũ``, and ``Ṽ ū`` in its diagnostics."""
    info = release.diagnostics
    if info is not None:
        info = replace(info, unnoised_gradient=basis @ info.unnoised_gradient)
    return GradientRelease(gradient=basis @ release.gradient, cost=release.cost, diagnostics=info)


# ----------------------------------------------------------------------- a run's record, saved
def projection_state_json(records: RunRecords) -> dict[str, Any]:
    r"""A projection's part of the run's track as exact JSON: each step's basis and released coordinates."""
    track = records.track
    return compact({"bases": tensors_to_json(track.bases), "coordinates": tensors_to_json(track.coordinates)})


def restore_projection_state(
    payload: dict[str, Any], records: RunRecords, context: ResumeContext, *, bases: bool
) -> RunRecords:
    r"""``records`` with a projection's ``bases`` and ``coordinates`` from its stored ``payload``, checked.

    ``bases``: the projection records a ``d x k`` orthonormal basis per step (else none, and ``Ṽ_t = I``).
    The coordinates are kept each step with a basis, or when the step rule keeps them
    (``keeps_coordinates``); each has the ``k`` of its step's basis (``d`` without one)."""
    entry = payload_entries(payload, {"bases": [], "coordinates": []}, "projection")
    T, d = context.steps, context.dim
    stored = tensors_from_json(entry["bases"], [(d, None)] * (T if bases else 0), "strategies.projection.bases")
    checked = tuple(check_basis(V, d, "checkpoint field 'strategies.projection.bases'") for V in stored)
    kept = bases or context.options.step_rule.keeps_coordinates
    ks = [V.shape[1] for V in checked] if bases else [d] * (T if kept else 0)
    coordinates = tensors_from_json(entry["coordinates"], [(k,) for k in ks], "strategies.projection.coordinates")
    return replace(records, track=replace(records.track, bases=checked, coordinates=coordinates))
